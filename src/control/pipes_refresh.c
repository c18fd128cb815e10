/* A pipeline's candidates follow its apps (pipes.h, vr_pipes_refresh).
 *
 * A task's candidate variants are its app's registered variants, resolved
 * when the pipeline is compiled (the model checks: inputs, the adapter's
 * outputs). A model registered into the app later was never a candidate:
 * the policy's planning view, the controller's plan as this worker maps
 * it and GET /v2/pipelines/{p} kept the variants of the first compile
 * until the server restarted. Now, when an app's variants differ from the
 * task's, the pipeline is compiled again from its stored text and the new
 * one replaces it in the map. Its statistics carry over (the metrics and
 * the policy's demand go on, not back to zero), and the old one forwards
 * what its requests in flight count (pl_pipe.next). */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/map.h"
#include "control/pipes_pol.h"

/* A hash of each task's app variants as a compile would take them
 * (accuracy order, the first VR_PIPE_MAX_VARIANTS); *same: whether they
 * are the spec's candidates. Under the store's read lock. */
static uint64_t app_variants_sig(vr_store *st, const vr_pipeline *sp, int *same) {
  uint64_t h = 0;
  *same = 1;
  for (int t = 0; t < sp->ntasks; t++) {
    const vr_pipe_task *task = &sp->tasks[t];
    size_t n = 0;
    const vr_variant_rec *const *v =
        task->app[0] ? vr_store_app_variants(st, task->app, VR_ORDER_ACCURACY, &n) : NULL;
    if (n > VR_PIPE_MAX_VARIANTS) n = VR_PIPE_MAX_VARIANTS;
    if ((int)n != task->nvariants) *same = 0;
    for (size_t i = 0; i < n; i++) {
      h = h * 31 + vr_hash_bytes(v[i]->name, strlen(v[i]->name));
      if (*same && (strcmp(v[i]->name, task->variants[i].name) ||
                    (v[i]->accuracy >= 0 ? v[i]->accuracy : -1) != task->variants[i].accuracy))
        *same = 0;
    }
    h = h * 31 + 1; /* the task's end */
  }
  return h;
}

/* What `from` counted, into its replacement (same spec text, so the same
 * tasks). Caller holds from->mu; `to` is not shared yet. */
static void carry_stats(pl_pipe *to, const pl_pipe *from) {
  to->arrivals = from->arrivals;
  to->requests = from->requests;
  memcpy(to->arr_t, from->arr_t, sizeof to->arr_t);
  to->arr_head = from->arr_head;
  to->arr_n = from->arr_n;
  to->arr_last = from->arr_last;
  memcpy(to->outcomes, from->outcomes, sizeof to->outcomes);
  to->lat = from->lat;
  to->met = from->met;
  to->acc_sum = from->acc_sum;
  to->acc_n = from->acc_n;
  to->win[0] = from->win[0];
  to->win[1] = from->win[1];
  to->cur = from->cur;
  to->win_start = from->win_start;
  /* followed again by the replacement (NULL when out of memory: the
   * controller's next plan, as before) */
  to->follow_plan = from->follow_plan ? vr_strdup(from->follow_plan) : NULL;
  for (int t = 0; t < from->spec->ntasks; t++) {
    pl_task *a = &to->t[t];
    const pl_task *b = &from->t[t];
    a->in = b->in;
    a->out = b->out;
    memcpy(a->outcomes, b->outcomes, sizeof a->outcomes);
    a->nvs = b->nvs;
    memcpy(a->vs, b->vs, sizeof a->vs);
  }
}

/* Compiles pp again and serves the result in its place; 0, or the
 * compile's error (pp stays). */
static int replace(vr_pipes *ps, pl_pipe *pp, vr_errbuf *err) {
  pl_pipe *np;
  int rc = vr__pipe_compile(ps, pp->spec_text, strlen(pp->spec_text), &np, err);
  if (rc) return rc;
  np->refreshed = 1;
  pthread_mutex_lock(&ps->mu);
  int served = vr_map_get(&ps->by_name, pp->spec->name) == pp &&
               vr_map_put(&ps->by_name, np->spec->name, np, NULL) == 0;
  if (served) { /* np is reached only through the map, whose lock we hold */
    pthread_mutex_lock(&pp->mu);
    carry_stats(np, pp);
    __atomic_add_fetch(&np->refs, 1, __ATOMIC_ACQ_REL); /* pp's, for forwarding */
    pp->next = np;
    pthread_mutex_unlock(&pp->mu);
  }
  pthread_mutex_unlock(&ps->mu);
  /* the map's reference moved to np; a pipeline deleted or replaced
   * meanwhile is left as it is */
  vr__pipe_unref(served ? pp : np);
  return 0;
}

void vr_pipes_refresh(vr_pipes *ps) {
  pthread_mutex_lock(&ps->refresh_mu); /* one at a time: stale_sig is ours */
  pl_pipe *pipes[VR_PIPES_MAX];
  int n = vr__pipes_ref_all(ps, pipes, VR_PIPES_MAX, 0);
  for (int i = 0; i < n; i++) {
    pl_pipe *pp = pipes[i];
    int same;
    vr_store_rdlock(ps->store);
    uint64_t sig = app_variants_sig(ps->store, pp->spec, &same);
    vr_store_unlock(ps->store);
    if (!same && sig != pp->stale_sig) {
      vr_errbuf err = {0};
      if (replace(ps, pp, &err)) {
        pp->stale_sig = sig;
        vr_warn("pipeline '%s': its apps' variants changed, but it keeps its candidates: %s",
                pp->spec->name, err.msg);
      } else {
        vr_info("pipeline '%s': its apps' variants changed: candidates refreshed",
                pp->spec->name);
      }
    }
    vr__pipe_unref(pp);
  }
  pthread_mutex_unlock(&ps->refresh_mu);
}
