/* Live pipelines: registry, registration checks, persistence, JSON and
 * metrics (see pipes.h; the request path is pipes_run.c). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/prom.h"
#include "control/pipes_pol.h"

#define DOC_KIND "pipeline"

static void pipe_free(pl_pipe *pp) {
  if (!pp) return;
  pl_pipe *next = pp->next;
  vr__pipe_pol_free(pp->pol);
  vr_pipeline_free(pp->spec);
  vr_free(pp->spec_text);
  vr_free(pp->follow_plan);
  vr_free(pp->t);
  pthread_mutex_destroy(&pp->mu);
  vr_free(pp);
  if (next) vr__pipe_unref(next);
}

void vr__pipe_unref(pl_pipe *pp) {
  if (__atomic_sub_fetch(&pp->refs, 1, __ATOMIC_ACQ_REL) == 0) pipe_free(pp);
}

int vr__pipes_ref_all(vr_pipes *p, pl_pipe **out, int cap, int followed_only) {
  int n = 0;
  pthread_mutex_lock(&p->mu);
  size_t it = 0;
  const char *k;
  void *v;
  while (n < cap && vr_map_next(&p->by_name, &it, &k, &v)) {
    pl_pipe *pp = v;
    if (followed_only && (!pp->pol || !pp->pol->follow)) continue;
    out[n++] = pp;
    __atomic_add_fetch(&pp->refs, 1, __ATOMIC_ACQ_REL);
  }
  pthread_mutex_unlock(&p->mu);
  return n;
}

pl_pipe *vr__pipes_get(vr_pipes *p, const char *name) {
  pthread_mutex_lock(&p->mu);
  pl_pipe *pp = name ? vr_map_get(&p->by_name, name) : NULL;
  if (pp) __atomic_add_fetch(&pp->refs, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_unlock(&p->mu);
  return pp;
}

int vr_pipes_serves(vr_pipes *p, const char *name) {
  pl_pipe *pp = vr__pipes_get(p, name);
  if (pp) vr__pipe_unref(pp);
  return pp != NULL;
}

pl_pipe *vr__pipes_get_synced(vr_pipes *p, const char *name) {
  pl_pipe *pp = vr__pipes_get(p, name);
  vr_errbuf serr = {0};
  /* stored elsewhere? The store is read at most ten times a second for
   * names this process does not serve: a client sending made-up names
   * would otherwise stall the event thread on store I/O with every one */
  int64_t now = vr_clock_now(vr_clock_monotonic());
  int64_t synced = __atomic_load_n(&p->miss_sync_ns, __ATOMIC_RELAXED);
  if (!pp && (synced == 0 || now - synced >= 100000000LL) &&
      __atomic_compare_exchange_n(&p->miss_sync_ns, &synced, now, 0, __ATOMIC_RELAXED,
                                  __ATOMIC_RELAXED) &&
      !vr_pipes_sync(p, &serr))
    pp = vr__pipes_get(p, name);
  return pp;
}

/* ---- registration checks ------------------------------------------------- */

static const vr_tensor_info *cfg_output(const vr_model_config *c, const char *name) {
  for (int i = 0; i < c->n_outputs; i++)
    if (!strcmp(c->outputs[i].name, name)) return &c->outputs[i];
  return NULL;
}

/* The adapter's tensors among a model's outputs, with the grid's shapes. */
static int adapter_outputs(const vr_pipe_task *task, const vr_fanout *fan,
                           const vr_model_config *cfg, vr_errbuf *err) {
  int R = fan->grid_h * fan->grid_w;
  const vr_tensor_info *s = cfg_output(cfg, fan->scores), *lb = cfg_output(cfg, fan->labels);
  if (!s || s->ndim != 2 || s->shape[1] != R)
    return vr_errf(err, VR_ESHAPE, "task '%s': model '%s' has no output '%s' [N,%d]",
                   task->name, cfg->name, fan->scores, R);
  if (!lb || lb->ndim != 3 || lb->shape[1] != R || lb->shape[2] != fan->n_labels)
    return vr_errf(err, VR_ESHAPE, "task '%s': model '%s' has no output '%s' [N,%d,%d]",
                   task->name, cfg->name, fan->labels, R, fan->n_labels);
  return 0;
}

/* The task's adapter, parsed (kind NONE: none, or one resolve_adapter
 * will refuse with its reason). */
static void parse_adapter(const vr_pipe_task *task, vr_fanout *fan) {
  char *text = task->adapter ? json_dumps(task->adapter, JSON_COMPACT) : NULL;
  if (!text || vr_fanout_parse(text, strlen(text), fan, NULL)) memset(fan, 0, sizeof *fan);
  free(text);
}

/* The first input [C,H,W] shared by every model of the app, and the app's
 * variants as the task's candidates; every model has the outputs the
 * task's adapter reads (an app's models share their inputs, not their
 * outputs: checking the first only let requests routed to another fail at
 * the fan-out). Called under the store's read lock. */
static int resolve_app(vr_pipes *p, vr_pipeline *sp, int t, pl_task *pt,
                       vr_errbuf *err) {
  int64_t *chw = pt->in_chw;
  vr_tensor_info pt_in0;
  const vr_pipe_task *task = &sp->tasks[t];
  if (!task->app[0])
    return vr_errf(err, VR_EINVAL,
                   "task '%s' names no app: a Loki app definition can be simulated "
                   "(vario sim), not served",
                   task->name);
  size_t n;
  const vr_variant_rec *const *v =
      vr_store_app_variants(p->store, task->app, VR_ORDER_ACCURACY, &n);
  if (!n)
    return vr_errf(err, VR_ENOENT, "task '%s': app '%s' has no registered model", task->name,
                   task->app);
  const char *names[VR_PIPE_MAX_VARIANTS];
  double acc[VR_PIPE_MAX_VARIANTS];
  int nv = 0;
  vr_fanout fan;
  parse_adapter(task, &fan);
  for (size_t i = 0; i < n; i++) {
    const vr_model_rec *m = vr_store_model(p->store, v[i]->model);
    vr_model_config cfg;
    if (!m || vr_model_config_load(m->dir, &cfg, err))
      return vr_errf(err, VR_ENOENT, "task '%s': model '%s' of app '%s' is missing (%s)",
                     task->name, v[i]->model, task->app, err->msg);
    const vr_tensor_info *x = &cfg.inputs[0];
    if (x->ndim != 4)
      return vr_errf(err, VR_ESHAPE, "task '%s': model '%s' takes a %d-D input, not [N,C,H,W]",
                     task->name, v[i]->model, x->ndim);
    /* Crops are cut from, and sent as, FP32 images (vr_fanout_crop): a
     * task that crops or is fed crops with another input type would be
     * registered and then fail at every hop. */
    if ((t > 0 || task->adapter) && x->dtype != VR_DT_F32)
      return vr_errf(err, VR_EINVAL, "task '%s': model '%s' takes %s, but a task that %s "
                     "FP32 images", task->name, v[i]->model, vr_dtype_kserve(x->dtype),
                     t > 0 ? "is fed its parent's crops takes" : "crops its input takes");
    if (i == 0) {
      memcpy(chw, &x->shape[1], 3 * sizeof *chw);
      pt_in0 = *x;
    } else if (memcmp(chw, &x->shape[1], 3 * sizeof *chw)) {
      return vr_errf(err, VR_ESHAPE, "task '%s': the models of app '%s' take different inputs "
                     "('%s' [%lld,%lld,%lld], '%s' [%lld,%lld,%lld])",
                     task->name, task->app, v[0]->model, (long long)chw[0], (long long)chw[1],
                     (long long)chw[2], v[i]->model, (long long)x->shape[1],
                     (long long)x->shape[2], (long long)x->shape[3]);
    }
    int rc = fan.kind == VR_FANOUT_NONE ? 0 : adapter_outputs(task, &fan, &cfg, err);
    if (rc) return rc;
    if (nv < VR_PIPE_MAX_VARIANTS) {
      names[nv] = v[i]->name;
      acc[nv++] = v[i]->accuracy;
    }
  }
  pt->in0 = pt_in0;
  return vr_pipe_task_set_variants(sp, t, names, acc, nv, err);
}

/* The task's adapter: parsed, its tensors present in the models' outputs
 * with the grid's shapes, every child edge labelled with one of its labels. */
static int resolve_adapter(const vr_pipeline *sp, int t, pl_task *pt, vr_errbuf *err) {
  const vr_pipe_task *task = &sp->tasks[t];
  for (int l = 0; l < VR_FANOUT_MAX_LABELS; l++) pt->child_of_label[l] = -1;
  if (!task->adapter) {
    if (task->nchildren)
      return vr_errf(err, VR_EINVAL, "task '%s' has children but no \"adapter\" to feed them",
                     task->name);
    return 0;
  }
  char *text = json_dumps(task->adapter, JSON_COMPACT);
  if (!text) return vr_errf(err, VR_ENOMEM, "out of memory");
  vr_errbuf e2 = {0};
  int rc = vr_fanout_parse(text, strlen(text), &pt->fan, &e2);
  free(text);
  if (rc) return vr_errf(err, rc, "task '%s': %s", task->name, e2.msg);
  /* (its outputs in every model of the app: resolve_app) */
  int64_t crop[3];
  if ((rc = vr_fanout_crop_shape(&pt->fan, pt->in_chw, crop, &e2)))
    return vr_errf(err, rc, "task '%s': %s", task->name, e2.msg);
  for (int c = 0; c < task->nchildren; c++) {
    const char *lab = sp->tasks[task->children[c]].label;
    if (lab[0] && vr_fanout_label(&pt->fan, lab) < 0)
      return vr_errf(err, VR_EINVAL, "task '%s': edge label '%s' to '%s' is not one of the "
                     "adapter's label_names", task->name, lab, sp->tasks[task->children[c]].name);
  }
  for (int l = 0; l < pt->fan.n_labels; l++) {
    int c = vr_pipe_task_route_label(sp, task, pt->fan.label_names[l]);
    pt->child_of_label[l] = c < 0 ? -1 : task->children[c];
  }
  return 0;
}

/* Parses and resolves a spec against the registry. */
int vr__pipe_compile(vr_pipes *p, const char *json, size_t len, pl_pipe **out, vr_errbuf *err) {
  *out = NULL;
  pl_pipe *pp = vr_calloc(1, sizeof *pp);
  if (!pp) return vr_errf(err, VR_ENOMEM, "out of memory");
  pthread_mutex_init(&pp->mu, NULL);
  vr_hist_init(&pp->lat);
  vr_hist_init(&pp->win[0]);
  vr_hist_init(&pp->win[1]);
  pp->refs = 1;
  int rc = vr_pipeline_parse(json, len, &pp->spec, err);
  /* The spec is one self-contained document: a name in it that refers to
   * nothing (a child or root that is not a task) makes the body invalid
   * (400), unlike an app missing from the store (404, below). */
  if (rc == VR_ENOENT) rc = VR_EINVAL;
  if (rc) goto fail;
  int n = pp->spec->ntasks;
  pp->t = vr_calloc((size_t)n, sizeof *pp->t);
  pp->spec_text = vr_strndup(json, len);
  if (!pp->t || !pp->spec_text) {
    rc = vr_errf(err, VR_ENOMEM, "out of memory");
    goto fail;
  }
  vr_store_rdlock(p->store);
  for (int t = 0; t < n && !rc; t++) rc = resolve_app(p, pp->spec, t, &pp->t[t], err);
  vr_store_unlock(p->store);
  for (int t = 0; t < n && !rc; t++) rc = resolve_adapter(pp->spec, t, &pp->t[t], err);
  /* A child takes its parent's crops. */
  for (int t = 1; t < n && !rc; t++) {
    const pl_task *par = &pp->t[pp->spec->tasks[t].parent];
    int64_t crop[3];
    if (vr_fanout_crop_shape(&par->fan, par->in_chw, crop, NULL)) continue;
    if (memcmp(crop, pp->t[t].in_chw, sizeof crop))
      rc = vr_errf(err, VR_ESHAPE,
                   "task '%s' (app '%s') takes [%lld,%lld,%lld] but the adapter of '%s' "
                   "sends crops [%lld,%lld,%lld]",
                   pp->spec->tasks[t].name, pp->spec->tasks[t].app, (long long)pp->t[t].in_chw[0],
                   (long long)pp->t[t].in_chw[1], (long long)pp->t[t].in_chw[2],
                   pp->spec->tasks[pp->spec->tasks[t].parent].name, (long long)crop[0],
                   (long long)crop[1], (long long)crop[2]);
  }
  if (rc) goto fail;
  int levels[VR_PIPE_MAX_TASKS];
  vr_pipeline_levels(pp->spec, levels);
  for (int t = 0; t < n; t++) pp->t[t].levels = levels[t], pp->t[t].depth_max = levels[0];
  *out = pp;
  return 0;
fail:
  pipe_free(pp);
  return rc;
}

/* ---- registry ----------------------------------------------------------- */

typedef struct doc_list {
  vr_vec names, bodies; /* char* */
} doc_list;

static int collect_doc(void *ctx, const char *name, const char *body) {
  doc_list *d = ctx;
  char *n = vr_strdup(name), *b = vr_strdup(body);
  if (!n || !b || vr_vec_push(&d->names, &n) || vr_vec_push(&d->bodies, &b)) {
    vr_free(n);
    vr_free(b);
    return VR_ENOMEM;
  }
  return 0;
}

/* Stops serving the pipelines in `before` (served before the store was
 * read) that the store no longer holds: another process deleted them.
 * Those registered meanwhile are not in `before`. */
static void drop_deleted(vr_pipes *p, const vr_vec *before, const doc_list *d) {
  for (size_t i = 0; i < before->len; i++) {
    const char *name = *(char *const *)vr_vec_at(before, i);
    int stored = 0;
    for (size_t k = 0; k < d->names.len && !stored; k++)
      stored = !strcmp(name, *(char *const *)vr_vec_at(&d->names, k));
    if (stored) continue;
    pthread_mutex_lock(&p->mu);
    pl_pipe *pp = vr_map_get(&p->by_name, name);
    if (pp) vr_map_del(&p->by_name, name);
    pthread_mutex_unlock(&p->mu);
    if (pp) {
      vr_log(VR_LOG_INFO, "pipeline '%s' deleted from the store: no longer served", name);
      vr__pipe_unref(pp);
    }
  }
}

/* Serves the stored pipelines not served yet (at start, and when a
 * request names one another process registered); with sync, stops
 * serving those another process deleted. */
static int load_stored(vr_pipes *p, int warn, int sync, vr_errbuf *err) {
  doc_list d;
  vr_vec before;
  vr_vec_init(&d.names, sizeof(char *));
  vr_vec_init(&d.bodies, sizeof(char *));
  vr_vec_init(&before, sizeof(char *));
  pthread_mutex_lock(&p->mu);
  size_t it = 0;
  const char *k;
  void *v;
  int lost = 0;
  while (sync && vr_map_next(&p->by_name, &it, &k, &v)) {
    char *n = vr_strdup(k);
    if (!n || vr_vec_push(&before, &n)) vr_free(n), lost = 1;
  }
  pthread_mutex_unlock(&p->mu);
  int rc = vr_store_load_docs(p->store, DOC_KIND, collect_doc, &d, err);
  if (!rc && sync && !lost) drop_deleted(p, &before, &d);
  for (size_t i = 0; i < before.len; i++) vr_free(*(char **)vr_vec_at(&before, i));
  vr_vec_free(&before);
  for (size_t i = 0; i < d.names.len; i++) {
    char *name = *(char **)vr_vec_at(&d.names, i), *body = *(char **)vr_vec_at(&d.bodies, i);
    pthread_mutex_lock(&p->mu);
    const pl_pipe *cur = vr_map_get(&p->by_name, name);
    int known = cur != NULL;
    /* deleted and registered again, differently, by another process
     * between two syncs: the name alone said "served already" */
    int changed = cur && sync && strcmp(cur->spec_text, body);
    pthread_mutex_unlock(&p->mu);
    pl_pipe *pp, *old = NULL;
    vr_errbuf e2 = {0};
    /* A stored pipeline whose apps are gone stays stored (not lost), unserved. */
    if (!rc && (!known || changed) && vr__pipe_compile(p, body, strlen(body), &pp, &e2) == 0) {
      pthread_mutex_lock(&p->mu);
      const pl_pipe *now = vr_map_get(&p->by_name, pp->spec->name);
      /* another thread served it meanwhile: keep that one */
      if ((now && (!changed || !strcmp(now->spec_text, pp->spec_text))) ||
          vr_map_put(&p->by_name, pp->spec->name, pp, (void **)&old))
        pipe_free(pp), old = NULL;
      pthread_mutex_unlock(&p->mu);
      if (old) { /* requests in flight keep their reference to it */
        vr_log(VR_LOG_INFO, "pipeline '%s' changed in the store: serving the new spec", name);
        vr__pipe_unref(old);
      }
    } else if (!rc && (!known || changed) && warn) {
      vr_log(VR_LOG_WARN, "pipeline '%s' stored but not served: %s", name, e2.msg);
    }
    vr_free(name);
    vr_free(body);
  }
  vr_vec_free(&d.names);
  vr_vec_free(&d.bodies);
  return rc;
}

int vr_pipes_sync(vr_pipes *p, vr_errbuf *err) {
  int rc = load_stored(p, 0, 1, err);
  vr_pipes_refresh(p); /* models registered or unregistered by another process */
  return rc;
}

int vr_pipes_create(vr_control *ctl, vr_runtime *rt, vr_store *store, vr_pipes **out,
                    vr_errbuf *err) {
  vr_pipes *p = vr_calloc(1, sizeof *p);
  if (!p) return vr_errf(err, VR_ENOMEM, "out of memory");
  p->ctl = ctl;
  p->rt = rt;
  p->store = store;
  p->clock = vr_clock_monotonic();
  pthread_mutex_init(&p->mu, NULL);
  pthread_mutex_init(&p->refresh_mu, NULL);
  pthread_cond_init(&p->pcv, NULL);
  vr_map_init(&p->by_name);
  int rc = load_stored(p, 1, 0, err);
  if (rc) {
    vr_pipes_free(p);
    return rc;
  }
  *out = p;
  return 0;
}

void vr_pipes_set_clock(vr_pipes *p, vr_clock *clock) {
  p->clock = clock ? clock : vr_clock_monotonic();
}

void vr_pipes_free(vr_pipes *p) {
  if (!p) return;
  vr__pipes_stop_policy(p);
  /* no policy of ours is left to manage these apps: the control loop
   * does again (the control plane outlives us, serve_control.c) */
  for (int j = 0; j < p->nmanaged; j++) vr_control_set_managed(p->ctl, p->managed[j], 0);
  vr_free(p->managed);
  pthread_cond_destroy(&p->pcv);
  size_t it = 0;
  const char *k;
  void *v;
  while (vr_map_next(&p->by_name, &it, &k, &v)) vr__pipe_unref(v);
  vr_map_free(&p->by_name);
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->refresh_mu);
  vr_free(p);
}

int vr_pipes_register(vr_pipes *p, const char *json, size_t len, char *name_out,
                      vr_errbuf *err) {
  pl_pipe *pp;
  int rc = vr__pipe_compile(p, json, len, &pp, err);
  if (rc) return rc;
  pthread_mutex_lock(&p->mu);
  if (vr_map_has(&p->by_name, pp->spec->name))
    rc = vr_errf(err, VR_EEXIST, "pipeline '%s' is already registered", pp->spec->name);
  else if (p->by_name.len >= VR_PIPES_MAX) /* the policy would never plan it */
    rc = vr_errf(err, VR_ELIMIT, "%d pipelines are registered, the most served at once: "
                 "delete one first", VR_PIPES_MAX);
  if (!rc) rc = vr_store_put_doc(p->store, DOC_KIND, pp->spec->name, pp->spec_text, err);
  if (!rc && vr_map_put(&p->by_name, pp->spec->name, pp, NULL)) {
    vr_store_del_doc(p->store, DOC_KIND, pp->spec->name, NULL);
    rc = vr_errf(err, VR_ENOMEM, "out of memory");
  }
  pthread_mutex_unlock(&p->mu);
  if (rc) {
    pipe_free(pp);
    return rc;
  }
  snprintf(name_out, VR_PIPE_NAME_MAX, "%s", pp->spec->name);
  return 0;
}

int vr_pipes_delete(vr_pipes *p, const char *name, vr_errbuf *err) {
  pthread_mutex_lock(&p->mu);
  pl_pipe *pp = vr_map_get(&p->by_name, name);
  /* By the store, which processes share (a cluster's front end sends a
   * DELETE to any worker): one stored but not served here (registered by
   * another process since this one read the store, or its apps gone) is
   * deleted, and one served here that another process deleted stops
   * being served. */
  int rc = vr_store_del_doc(p->store, DOC_KIND, name, err);
  if (rc == VR_ENOENT && pp) rc = 0;
  else if (rc == VR_ENOENT)
    rc = vr_errf(err, VR_ENOENT, "no registered pipeline named '%.100s'", name);
  if (!rc && pp) vr_map_del(&p->by_name, name);
  pthread_mutex_unlock(&p->mu);
  if (!rc && pp) vr__pipe_unref(pp);
  return rc;
}

/* ---- statistics --------------------------------------------------------- */

pl_pipe *vr__pipe_lock_current(pl_pipe *pp) {
  pthread_mutex_lock(&pp->mu);
  while (pp->next) { /* pp holds a reference to next */
    pl_pipe *n = pp->next;
    pthread_mutex_unlock(&pp->mu);
    pp = n;
    pthread_mutex_lock(&pp->mu);
  }
  return pp;
}

void vr__pipe_count_hop(pl_pipe *pp, const vr_pipe_hop_rec *h) {
  uint64_t rows = h->outcome == VR_POUT_OK && h->rt.n_in ? (uint64_t)h->rt.in[0].shape[0] : 1;
  pp = vr__pipe_lock_current(pp); /* the same spec text: the same tasks */
  pl_task *pt = &pp->t[h->task];
  pt->in += rows;
  pt->out += (uint64_t)h->fanout;
  pt->outcomes[h->outcome]++;
  if (h->outcome == VR_POUT_OK) {
    int i = 0;
    while (i < pt->nvs && strcmp(pt->vs[i].variant, h->variant)) i++;
    if (i == pt->nvs && pt->nvs < VR_PIPE_MAX_VARIANTS)
      snprintf(pt->vs[pt->nvs++].variant, sizeof pt->vs[0].variant, "%s", h->variant);
    if (i < pt->nvs) {
      pt->vs[i].in += rows;
      pt->vs[i].out += (uint64_t)h->fanout;
      for (int c = 0; c < VR_PIPE_MAX_CHILDREN; c++)
        pt->vs[i].out_child[c] += (uint64_t)h->fanout_to[c];
    }
  }
  pthread_mutex_unlock(&pp->mu);
}

void vr__pipe_count_request(pl_pipe *pp, const vr_pipe_result *r) {
  pp = vr__pipe_lock_current(pp);
  pp->outcomes[r->outcome]++;
  pp->met += r->outcome == VR_POUT_OK && r->end_ns <= r->deadline_ns;
  if (r->outcome == VR_POUT_OK && r->n_hops > 0) {
    double sum = 0;
    int leaves = 0;
    for (int i = 0; i < r->n_hops; i++) {
      const vr_pipe_hop_rec *h = r->hops[i];
      if (h->outcome != VR_POUT_OK || h->fanout > 0) continue;
      double a = 1;
      for (int k = i, steps = 0; k >= 0 && steps <= r->n_hops; k = r->hops[k]->parent, steps++)
        a *= r->hops[k]->accuracy / 100.0;
      sum += a;
      leaves++;
    }
    if (leaves) {
      pp->acc_sum += 100.0 * sum / leaves;
      pp->acc_n++;
    }
  }
  vr_hist_record(&pp->lat, (uint64_t)(r->end_ns - r->arrival_ns));
  int64_t gap = r->end_ns - pp->win_start;
  if (gap >= 2 * PL_WIN_NS) { /* both windows are stale: start afresh */
    vr_hist_init(&pp->win[0]);
    vr_hist_init(&pp->win[1]);
    pp->win_start = r->end_ns;
  } else if (gap >= PL_WIN_NS) {
    pp->cur ^= 1;
    vr_hist_init(&pp->win[pp->cur]);
    pp->win_start += PL_WIN_NS;
  }
  vr_hist_record(&pp->win[pp->cur], (uint64_t)(r->end_ns - r->arrival_ns));
  pthread_mutex_unlock(&pp->mu);
}

/* ---- JSON ------------------------------------------------------------------ */

static json_t *outcomes_json(const uint64_t *o) {
  json_t *j = json_object();
  for (int i = 0; i < VR_POUT_COUNT; i++)
    json_object_set_new(j, vr_pipe_outcome_name(i), json_integer((json_int_t)o[i]));
  return j;
}

static json_t *task_json(vr_pipes *p, pl_pipe *pp, int t) {
  const vr_pipe_task *task = &pp->spec->tasks[t];
  const pl_task *pt = &pp->t[t];
  json_t *j = json_pack("{s:s, s:s, s:i, s:[I,I,I]}", "name", task->name, "app", task->app,
                        "levels", pt->levels, "input", (json_int_t)pt->in_chw[0],
                        (json_int_t)pt->in_chw[1], (json_int_t)pt->in_chw[2]);
  if (t > 0) {
    json_object_set_new(j, "parent", json_string(pp->spec->tasks[task->parent].name));
    json_object_set_new(j, "label", json_string(task->label));
  }
  if (task->adapter) json_object_set(j, "adapter", task->adapter);
  json_t *ch = json_array();
  for (int c = 0; c < task->nchildren; c++)
    json_array_append_new(ch, json_string(pp->spec->tasks[task->children[c]].name));
  json_object_set_new(j, "children", ch);
  json_t *cand = json_array();
  for (int v = 0; v < task->nvariants; v++)
    json_array_append_new(cand, json_pack("{s:s, s:f}", "name", task->variants[v].name,
                                          "accuracy", task->variants[v].accuracy));
  json_object_set_new(j, "candidate_variants", cand);
  /* The app's live state: variant states and instances (control plane). */
  char *app = vr_control_describe(p->ctl, task->app);
  json_t *aj = app ? json_loads(app, 0, NULL) : NULL;
  vr_free(app);
  if (aj) json_object_set_new(j, "serving", aj);
  /* Observed: requests in, fan-out, multiplicative factor per variant; the
   * shares of requests each variant served are the current routing. */
  json_t *obs = json_array();
  uint64_t served = 0;
  for (int i = 0; i < pt->nvs; i++) served += pt->vs[i].in;
  for (int i = 0; i < pt->nvs; i++)
    json_array_append_new(
        obs, json_pack("{s:s, s:I, s:I, s:f, s:f}", "variant", pt->vs[i].variant, "requests",
                       (json_int_t)pt->vs[i].in, "fanout", (json_int_t)pt->vs[i].out,
                       "multiplicative_factor",
                       pt->vs[i].in ? (double)pt->vs[i].out / pt->vs[i].in : 0.0, "share",
                       served ? (double)pt->vs[i].in / served : 0.0));
  json_object_set_new(j, "routing", obs);
  uint64_t out = 0;
  for (int i = 0; i < pt->nvs; i++) out += pt->vs[i].out;
  json_object_set_new(j, "requests", json_integer((json_int_t)pt->in));
  json_object_set_new(j, "fanout", json_integer((json_int_t)pt->out));
  /* over the requests it served: child requests per served request */
  json_object_set_new(j, "multiplicative_factor",
                      json_real(served ? (double)out / served : 0.0));
  json_object_set_new(j, "outcomes", outcomes_json(pt->outcomes));
  return j;
}

static json_t *pipe_json(vr_pipes *p, pl_pipe *pp, int full) {
  pthread_mutex_lock(&pp->mu);
  json_t *j = json_pack("{s:s, s:f, s:s, s:i}", "name", pp->spec->name, "latency_ms",
                        pp->spec->slo_ms, "root", pp->spec->tasks[0].name, "tasks_count",
                        pp->spec->ntasks);
  const vr_tensor_info *in = &pp->t[0].in0; /* what a request sends (bench reads it) */
  json_t *shape = json_array();
  json_array_append_new(shape, json_integer(-1));
  for (int d = 0; d < 3; d++) json_array_append_new(shape, json_integer(pp->t[0].in_chw[d]));
  json_object_set_new(j, "inputs", json_pack("[{s:s, s:s, s:o}]", "name", in->name, "datatype",
                                             vr_dtype_kserve(in->dtype), "shape", shape));
  json_object_set_new(j, "requests", outcomes_json(pp->outcomes));
  json_object_set_new(j, "latency_p50_ms", json_real(vr_hist_quantile(&pp->lat, 0.5) / 1e6));
  json_object_set_new(j, "latency_p99_ms", json_real(vr_hist_quantile(&pp->lat, 0.99) / 1e6));
  if (full) {
    json_t *ts = json_array();
    for (int t = 0; t < pp->spec->ntasks; t++) json_array_append_new(ts, task_json(p, pp, t));
    json_object_set_new(j, "tasks", ts);
    json_t *pol = vr__pipe_pol_json(p, pp); /* plan, routing and backup tables */
    if (pol) json_object_set_new(j, "policy", pol);
  }
  pthread_mutex_unlock(&pp->mu);
  return j;
}

static char *dump(json_t *j) {
  /* 12 significant digits: 98.9, not the double's 98.900000000000006. */
  char *t = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(12)) : NULL;
  json_decref(j);
  char *out = t ? vr_strdup(t) : NULL;
  free(t);
  return out;
}

char *vr_pipes_describe(vr_pipes *p, const char *name) {
  if (name) { /* stored by another process since the last read: as a request */
    pl_pipe *pp = vr__pipes_get_synced(p, name);
    if (!pp) return NULL;
    char *out = dump(pipe_json(p, pp, 1));
    vr__pipe_unref(pp);
    return out;
  }
  json_t *arr = json_array();
  pthread_mutex_lock(&p->mu);
  size_t it = 0;
  const char *k;
  void *v;
  while (vr_map_next(&p->by_name, &it, &k, &v)) json_array_append_new(arr, pipe_json(p, v, 0));
  pthread_mutex_unlock(&p->mu);
  return dump(json_pack("{s:o}", "pipelines", arr));
}

/* ---- Prometheus --------------------------------------------------------- */

static const double k_bounds_ms[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000};

/* The pipeline families of /metrics, each written whole (HELP, TYPE, then
 * its series of every pipeline), as the text format asks. */
static const char *const k_pipe_families[][3] = {
    {"vario_pipeline_requests_total", "counter", "Pipeline queries by outcome."},
    {"vario_pipeline_latency_seconds", "histogram",
     "Arrival to answer of pipeline queries, whatever their outcome."},
    {"vario_pipeline_task_requests_total", "counter", "Requests of a pipeline's task by outcome."},
    {"vario_pipeline_fanout_total", "counter", "Requests a task's outputs sent on."},
    {"vario_pipeline_multiplicative_factor", "gauge",
     "Observed outputs per input of a task's variant."},
};

static void prom_latency(FILE *b, const char *n, const pl_pipe *pp) {
  size_t nb = sizeof k_bounds_ms / sizeof *k_bounds_ms;
  for (size_t i = 0; i < nb; i++) {
    uint64_t le = (uint64_t)(k_bounds_ms[i] * 1e6), cnt = 0;
    for (int k = 0; k < VR_HIST_BUCKETS; k++) {
      uint64_t lo, hi;
      vr_hist_bucket_range(k, &lo, &hi);
      if (hi <= le) cnt += pp->lat.buckets[k];
    }
    fprintf(b, "vario_pipeline_latency_seconds_bucket{pipeline=%s,le=\"%g\"} %llu\n", n,
            k_bounds_ms[i] / 1e3, (unsigned long long)cnt);
  }
  fprintf(b, "vario_pipeline_latency_seconds_bucket{pipeline=%s,le=\"+Inf\"} %llu\n", n,
          (unsigned long long)pp->lat.count);
  fprintf(b, "vario_pipeline_latency_seconds_sum{pipeline=%s} %.9g\n", n, pp->lat.sum / 1e9);
  fprintf(b, "vario_pipeline_latency_seconds_count{pipeline=%s} %llu\n", n,
          (unsigned long long)pp->lat.count);
}

/* The series of family f for one pipeline; names quoted (base/prom.h). */
static void prom_pipe(FILE *b, int f, pl_pipe *pp) {
  char *n = vr_prom_quote(pp->spec->name);
  if (!n) return;
  pthread_mutex_lock(&pp->mu);
  if (f == 0)
    for (int o = 0; o < VR_POUT_COUNT; o++)
      fprintf(b, "vario_pipeline_requests_total{pipeline=%s,outcome=\"%s\"} %llu\n", n,
              vr_pipe_outcome_name(o), (unsigned long long)pp->outcomes[o]);
  if (f == 1) prom_latency(b, n, pp);
  for (int t = 0; f >= 2 && t < pp->spec->ntasks; t++) {
    const pl_task *pt = &pp->t[t];
    char *tn = vr_prom_quote(pp->spec->tasks[t].name);
    if (!tn) break;
    for (int o = 0; f == 2 && o < VR_POUT_COUNT; o++)
      fprintf(b, "vario_pipeline_task_requests_total{pipeline=%s,task=%s,outcome=\"%s\"} %llu\n",
              n, tn, vr_pipe_outcome_name(o), (unsigned long long)pt->outcomes[o]);
    if (f == 3)
      fprintf(b, "vario_pipeline_fanout_total{pipeline=%s,task=%s} %llu\n", n, tn,
              (unsigned long long)pt->out);
    for (int i = 0; f == 4 && i < pt->nvs; i++) {
      char *vn = vr_prom_quote(pt->vs[i].variant);
      if (vn)
        fprintf(b, "vario_pipeline_multiplicative_factor{pipeline=%s,task=%s,variant=%s} %.6g\n",
                n, tn, vn, pt->vs[i].in ? (double)pt->vs[i].out / pt->vs[i].in : 0.0);
      vr_free(vn);
    }
    vr_free(tn);
  }
  pthread_mutex_unlock(&pp->mu);
  vr_free(n);
}

char *vr_pipes_prometheus(vr_pipes *p) {
  char *text = NULL;
  size_t len = 0;
  FILE *b = open_memstream(&text, &len); /* glibc; the text is malloc'd */
  if (!b) return NULL;
  pthread_mutex_lock(&p->mu);
  for (int f = 0; f < (int)(sizeof k_pipe_families / sizeof *k_pipe_families); f++) {
    fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", k_pipe_families[f][0], k_pipe_families[f][2],
            k_pipe_families[f][0], k_pipe_families[f][1]);
    size_t it = 0;
    const char *k;
    void *v;
    while (vr_map_next(&p->by_name, &it, &k, &v)) prom_pipe(b, f, v);
  }
  pthread_mutex_unlock(&p->mu);
  fclose(b);
  char *out = text ? vr_strdup(text) : NULL;
  free(text);
  return out;
}
