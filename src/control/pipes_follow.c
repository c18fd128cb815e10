/* Live pipelines following a plan made elsewhere (pipes.h, "following
 * the controller"): `vario controller --pipeline-policy` runs the policy
 * over the cluster and publishes its plan; each worker maps it onto its
 * own planning view, builds the same routing and backup tables, and
 * routes hops by them (vr__pipe_pol_pick, the same per-hop rule as under
 * a local policy): to an instance on this worker when it holds one of the
 * chosen variant, else to the workers that do (vr_pipes_set_remote).
 * The plan's batch sizes are the workers' to apply: each sets the caps of
 * the instances it holds (apply_batches); the pipelines' apps are managed
 * (vr__pipes_manage_apps), so this worker's own control loop neither
 * resets those caps nor unloads what the controller placed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "control/pipes_pol.h"

void vr_pipes_set_remote(vr_pipes *p, vr_pipes_remote_fn fn, vr_pipes_remote_has_fn has,
                         void *user) {
  p->remote = fn;
  p->remote_has = has;
  p->remote_user = user;
}

/* Slot -> local ready instances (of the slot's model), and which slots
 * only other workers hold. Caller holds pp->mu. */
static void slot_lists(vr_pipes *ps, pl_pol *pol) {
  memset(pol->slot_n, 0, (size_t)pol->nslots * sizeof *pol->slot_n);
  vr_rt_instance_stats st[64];
  for (int s = 0; s < pol->nslots; s++) {
    int n = vr_rt_instances(ps->rt, pol->slot_model[s], st, 64);
    for (int i = 0; i < n && i < 64 && pol->slot_n[s] < PL_SLOT_INST; i++)
      if (st[i].state == VR_INST_ACTIVE || st[i].state == VR_INST_OVERLOADED)
        pol->slot_ids[s * PL_SLOT_INST + pol->slot_n[s]++] = st[i].id;
    pol->slot_remote[s] = pol->have_plan && pol->plan.a[s].inst > 0 && pol->slot_n[s] == 0 &&
                          ps->remote && ps->remote_has &&
                          ps->remote_has(ps->remote_user, pol->slot_model[s]);
  }
}

static int by_id(const void *a, const void *b) {
  int64_t x = ((const vr_pipe_snap_inst *)a)->id, y = ((const vr_pipe_snap_inst *)b)->id;
  return (x > y) - (x < y);
}

/* The runtime's instances of the view's models, sorted by id, each as the
 * variant of the first slot on its model: the controller loads a model
 * with its config's max batch, so an instance here need not match a
 * registered variant, only its model (as slot_lists routes to it). */
static int held_here(vr_pipes *ps, const pl_pol *pol, vr_pipe_snap_inst *out, int cap) {
  vr_rt_instance_stats st[64];
  int k = 0;
  for (int s = 0; s < pol->nslots; s++) {
    int first = 1;
    for (int j = 0; j < s && first; j++) first = strcmp(pol->slot_model[j], pol->slot_model[s]) != 0;
    if (!first) continue;
    int n = vr_rt_instances(ps->rt, pol->slot_model[s], st, 64);
    for (int i = 0; i < n && i < 64 && k < cap; i++)
      out[k++] = (vr_pipe_snap_inst){st[i].id, pol->slot_var[s], st[i].batch_cap};
  }
  qsort(out, (size_t)k, sizeof *out, by_id);
  return k;
}

/* The plan's batch caps on the instances held here: the SET_BATCH
 * actions of vr_pipe_plan_actions over this worker's instances (they fill
 * the slots of their variant in slot order, as in the controller and
 * under a local policy; a cap is clamped to the slot's profiled max
 * batch), applied through the control plane's actuator as a local policy
 * applies them. Its loads and unloads are the controller's to make across
 * the workers, so they are not acted on here. Caller: the follower's
 * thread, without pp->mu. */
static void apply_batches(vr_pipes *ps, pl_pipe *pp, pl_pol *pol) {
  vr_pipe_snap_inst inst[256];
  int assign[256], cap[PL_MAX_SLOTS] = {0};
  vr_pipe_snap s = {.p = pol->view, .prof = pol->prof, .slot_var = pol->slot_var,
                    .inst = inst};
  s.ninst = held_here(ps, pol, inst, 256);
  vr_actions acts;
  vr_actions_init(&acts);
  uint64_t set = 0;
  if (vr_pipe_plan_actions(&s, &pol->plan, assign, &acts) == 0) {
    for (size_t k = 0; k < acts.len; k++) {
      const vr_action *a = vr_actions_at(&acts, k);
      if (a->kind != VR_ACT_SET_BATCH || vr_control_apply(ps->ctl, a, NULL)) continue;
      set++;
      for (int i = 0; i < s.ninst; i++)
        if (inst[i].id == a->instance) inst[i].batch = a->value;
    }
    for (int i = 0; i < s.ninst; i++)
      if (assign[i] >= 0 && assign[i] < pol->nslots && assign[i] < PL_MAX_SLOTS)
        cap[assign[i]] = inst[i].batch;
  }
  vr_actions_free(&acts);
  pthread_mutex_lock(&pp->mu);
  pol->batch_set += set;
  memcpy(pol->slot_cap, cap, (size_t)pol->nslots * sizeof *pol->slot_cap);
  pthread_mutex_unlock(&pp->mu);
}

/* The apps of every pipeline followed here are managed (pipes_pol.h). */
static void manage_followed(vr_pipes *ps) {
  pl_pipe *pipes[VR_PIPES_MAX];
  int n = vr__pipes_ref_all(ps, pipes, VR_PIPES_MAX, 1);
  vr__pipes_manage_apps(ps, pipes, n);
  for (int i = 0; i < n; i++) vr__pipe_unref(pipes[i]);
}

void vr_pipes_follow_manage(vr_pipes *ps) {
  if (!ps->pdef) manage_followed(ps);
}

static int start_follow(vr_pipes *ps, pl_pipe *pp, vr_errbuf *err) {
  pl_pol *pol = NULL;
  int rc = vr__pipe_pol_build_view(ps, pp, &pol, err);
  if (rc) return rc;
  pol->follow = 1;
  pol->slot_remote = vr_calloc((size_t)pol->nslots, 1);
  pol->slot_cap = vr_calloc((size_t)pol->nslots, sizeof *pol->slot_cap);
  if (!pol->slot_remote || !pol->slot_cap) {
    vr__pipe_pol_free(pol);
    return vr_errf(err, VR_ENOMEM, "out of memory");
  }
  pthread_mutex_lock(&pp->mu);
  pp->pol = pol;
  pthread_mutex_unlock(&pp->mu);
  return 0;
}

int vr_pipes_follow(vr_pipes *ps, const char *name, const char *plan, size_t len,
                    vr_errbuf *err) {
  if (ps->pdef) return vr_errf(err, VR_ESTATE, "this server runs its own pipeline policy");
  pl_pipe *pp = vr__pipes_get(ps, name);
  if (!pp) return vr_errf(err, VR_ENOENT, "no registered pipeline named '%.100s'", name);
  /* The version seen, but no plan here: a replacement of the pipeline
   * that followed it (pipes_refresh.c) follows its text. */
  char *kept = NULL;
  pthread_mutex_lock(&pp->mu);
  if (!plan && pp->follow_plan && !(pp->pol && pp->pol->have_plan))
    kept = vr_strdup(pp->follow_plan);
  pthread_mutex_unlock(&pp->mu);
  if (kept) plan = kept, len = strlen(kept);
  int rc = pp->pol ? 0 : start_follow(ps, pp, err);
  pl_pol *pol = pp->pol;
  if (!rc && vr__pipe_pol_refresh_slots(ps, pp, pol)) {
    /* a variant of the view went away (its model unregistered): the view
     * is built again from what is served, or no plan was ever followed
     * again (the controller's views lack it, too) */
    vr__pipe_pol_drop(pp);
    rc = start_follow(ps, pp, err);
    pol = pp->pol;
    if (!rc && vr__pipe_pol_refresh_slots(ps, pp, pol))
      rc = vr_errf(err, VR_ENOENT, "pipeline '%s': a variant is no longer served", name);
  }
  vr_pipe_plan next = {0};
  vr_pipe_routes routes = {0};
  double ewma = 0;
  int drop = 0, have = 0;
  if (!rc && plan) {
    rc = vr_pipe_plan_init(&next, pol->view);
    if (!rc) rc = vr_pipe_plan_parse_text(pol->view, plan, len, &next, &ewma, &drop, err);
    if (!rc && vr_pipe_route_build(pol->view, &next, ewma, &routes))
      rc = vr_errf(err, VR_ENOMEM, "out of memory");
    have = !rc;
  }
  char *text = have && plan != kept ? vr_strndup(plan, len) : NULL;
  pthread_mutex_lock(&pp->mu);
  if (text) {
    vr_free(pp->follow_plan);
    pp->follow_plan = text;
  }
  if (have) {
    vr_pipe_plan_free(&pol->plan);
    pol->plan = next; /* moved */
    if (pol->have_routes) vr_pipe_routes_free(&pol->routes);
    pol->routes = routes;
    pol->have_plan = pol->have_routes = 1;
    pol->ewma = ewma;
    pol->drop_mode = drop;
  }
  if (pol) slot_lists(ps, pol);
  int planned = pol && pol->have_plan;
  pthread_mutex_unlock(&pp->mu);
  if (!have) vr_pipe_plan_free(&next);
  if (!rc && planned && pol->nslots <= PL_MAX_SLOTS) {
    manage_followed(ps); /* before the caps: the control loop must not undo them */
    apply_batches(ps, pp, pol);
  }
  vr_free(kept);
  vr__pipe_unref(pp);
  return rc;
}

static int id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == '-';
}

void vr_pipe_plan_table(const char *name, char *out) {
  size_t n = strlen(name), ok = n > 0 && n <= 58;
  for (size_t i = 0; ok && i < n; i++) ok = id_char(name[i]);
  if (ok) {
    snprintf(out, 64, "pipe.%s", name);
    return;
  }
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  char keep[41];
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    h = (h ^ (unsigned char)name[i]) * 1099511628211ULL;
    if (k < sizeof keep - 1 && id_char(name[i])) keep[k++] = name[i];
  }
  keep[k] = 0;
  snprintf(out, 64, "pipe.%s-%016llx", keep, (unsigned long long)h);
}

int vr_pipes_names(vr_pipes *p, char (*names)[VR_PIPE_NAME_MAX], int cap) {
  pthread_mutex_lock(&p->mu);
  size_t it = 0;
  const char *k;
  void *v;
  int n = 0;
  while (vr_map_next(&p->by_name, &it, &k, &v)) {
    if (n < cap) snprintf(names[n], VR_PIPE_NAME_MAX, "%s", k);
    n++;
  }
  pthread_mutex_unlock(&p->mu);
  return n;
}
