/*
 * Runtime: loaded models, their instances, routing and admission.
 */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "policy/route.h"
#include "runtime/runtime_int.h"

const char *vr_rt_outcome_name(vr_rt_outcome o) {
  static const char *k[] = {"ok", "dropped", "rejected", "failed"};
  return (unsigned)o < VR_OUT_COUNT ? k[o] : "unknown";
}

const char *vr_rt_state_name(vr_rt_state s) {
  static const char *k[] = {"loading", "active", "overloaded", "draining"};
  return (unsigned)s < VR_INST_STATE_COUNT ? k[s] : "unknown";
}

void vr_rt_request_init(vr_rt_request *r) { memset(r, 0, sizeof *r); }

void vr_rt_request_clear(vr_rt_request *r) {
  if (r->out_block) vr_aligned_free(r->out_block);
  memset(r, 0, sizeof *r);
}

void vr_runtime_opts_init(vr_runtime_opts *o) { memset(o, 0, sizeof *o); }

int vr_runtime_create(const vr_runtime_opts *o, vr_runtime **out,
                      vr_errbuf *err) {
  vr_runtime *rt = VR_NEW(vr_runtime);
  if (!rt) return vr_errf(err, VR_ENOMEM, "out of memory");
  if (o) rt->opts = *o;
  if (rt->opts.max_queue_rows <= 0) rt->opts.max_queue_rows = 4096;
  if (rt->opts.profile_runs <= 0) rt->opts.profile_runs = 3;
  if (!rt->opts.clock) rt->opts.clock = vr_clock_monotonic();
  rt->be = rt->opts.backend ? rt->opts.backend : vr_rt_backend_engine();
  if (!rt->be) {
    vr_free(rt);
    return vr_errf(err, VR_EUNSUPPORTED, "no backend: engine not built in");
  }
  pthread_mutex_init(&rt->admin_mu, NULL);
  pthread_rwlock_init(&rt->lock, NULL);
  pthread_mutex_init(&rt->stats_mu, NULL);
  vr_map_init(&rt->models);
  vr_map_init(&rt->vstats);
  rt->next_id = 1;
  int rc = vr__rt_reaper_start(rt, err);
  if (rc) {
    vr_runtime_free(rt);
    return rc;
  }
  *out = rt;
  return 0;
}

/* Drains and frees a model already removed from the map. */
static void model_free(vr_runtime *rt, vr_rt_model *m) {
  for (size_t i = 0; i < m->instances.len; i++)
    vr_inst_destroy(VR_VEC_AT(&m->instances, vr_rt_instance *, i));
  vr_vec_free(&m->instances);
  if (m->handle) rt->be->model_close(rt->be->self, m->handle);
  for (int i = 0; i < VR_RT_MAX_IO; i++) vr_labels_release(m->labels[i]);
  vr_free(m);
}

void vr_rt_shutdown(vr_runtime *rt) {
  /* first: no done() from the reaper once this returns */
  vr__rt_reaper_stop(rt);
  pthread_mutex_lock(&rt->admin_mu);
  pthread_rwlock_wrlock(&rt->lock);
  rt->shutting_down = 1;
  vr_map models = rt->models;
  vr_map_init(&rt->models);
  pthread_rwlock_unlock(&rt->lock);
  const char *k;
  void *v;
  for (size_t it = 0; vr_map_next(&models, &it, &k, &v);) model_free(rt, v);
  vr_map_free(&models);
  pthread_mutex_unlock(&rt->admin_mu);
}

void vr_runtime_free(vr_runtime *rt) {
  if (!rt) return;
  vr_rt_shutdown(rt);
  vr_rt_vstats_free_all(rt);
  vr__rt_reaper_fini(rt);
  pthread_rwlock_destroy(&rt->lock);
  pthread_mutex_destroy(&rt->admin_mu);
  pthread_mutex_destroy(&rt->stats_mu);
  vr_free(rt);
}

/* Creates, profiles and starts one instance and lists it under m. The
 * model is pinned by the caller (it holds it outside the map or has the
 * load in progress), so rt->lock is taken only to publish. */
static int add_instance(vr_runtime *rt, vr_rt_model *m,
                        const vr_rt_instance_opts *o, vr_errbuf *err) {
  vr_rt_instance *in = NULL;
  int rc = vr_inst_create(rt, m, o, &in, err);
  if (!rc) rc = vr_inst_start(in, err);
  if (rc) {
    vr_inst_destroy(in);
    return rc;
  }
  pthread_rwlock_wrlock(&rt->lock);
  in->id = rt->next_id++;
  rc = vr_vec_push(&m->instances, &in);
  pthread_rwlock_unlock(&rt->lock);
  if (rc) {
    vr_inst_destroy(in);
    return vr_errf(err, VR_ENOMEM, "out of memory");
  }
  pthread_mutex_lock(&in->mu);
  double b1_us = in->prof.p50_ms[0] * 1e3;
  pthread_mutex_unlock(&in->mu);
  vr_info("instance %d (%s) active: b1 %.1f us", in->id, in->variant, b1_us);
  return in->id;
}

static vr_rt_instance_opts cfg_opts(const vr_model_config *c) {
  vr_rt_instance_opts o = {c->precision, c->threads, c->max_batch_size,
                           c->max_queue_delay_us, c->pair_begin, c->pair_end};
  return o;
}

/* Reads each output's label file (Triton's label_filename); the count
 * must match the output's classes (the product of its non-batch dims). */
static int load_labels(vr_rt_model *m, vr_errbuf *err) {
  const vr_model_config *c = &m->cfg;
  for (int i = 0; i < c->n_outputs; i++) {
    if (!c->label_file[i][0]) continue;
    char path[sizeof c->dir + sizeof c->label_file[0] + 1];
    snprintf(path, sizeof path, "%s/%s", c->dir, c->label_file[i]);
    const vr_tensor_info *t = &c->outputs[i];
    int64_t classes = 1;
    for (int d = 1; d < t->ndim; d++) classes = t->shape[d] > 0 ? classes * t->shape[d] : 0;
    int rc = vr_labels_load(path, classes, &m->labels[i], err);
    if (rc) return vr_errctx(err, rc, "model '%s' output '%s'", c->name, t->name);
  }
  return 0;
}

/* replace: a loaded model of that name is swapped for the new one once
 * the new one is fully up (Triton's reload); otherwise VR_EEXIST. */
static int load_locked(vr_runtime *rt, const vr_model_config *cfg, int replace,
                       vr_errbuf *err) {
  pthread_rwlock_rdlock(&rt->lock);
  int exists = vr_map_has(&rt->models, cfg->name), down = rt->shutting_down;
  pthread_rwlock_unlock(&rt->lock);
  if (down) return vr_errf(err, VR_ESHUTDOWN, "runtime is shutting down");
  if (exists && !replace)
    return vr_errf(err, VR_EEXIST, "model '%s' is already loaded", cfg->name);
  vr_rt_model *m = VR_NEW(vr_rt_model);
  if (!m) return vr_errf(err, VR_ENOMEM, "out of memory");
  m->cfg = *cfg;
  vr_vec_init(&m->instances, sizeof(vr_rt_instance *));
  int rc = load_labels(m, err);
  if (!rc) rc = rt->be->model_open(rt->be->self, &m->cfg, &m->handle, err);
  vr_rt_instance_opts o = cfg_opts(cfg);
  /* Instances are built before the model is published, so a half-loaded
   * model never takes traffic and a failure leaves nothing behind. */
  for (int i = 0; !rc && i < cfg->instances; i++) {
    int id = add_instance(rt, m, &o, err);
    if (id < 0) rc = id;
  }
  void *old = NULL;
  if (!rc) {
    pthread_rwlock_wrlock(&rt->lock);
    if (rt->shutting_down)
      rc = vr_errf(err, VR_ESHUTDOWN, "runtime is shutting down");
    else if (!replace && vr_map_has(&rt->models, cfg->name))
      rc = vr_errf(err, VR_EEXIST, "model '%s' is already loaded", cfg->name);
    else if (vr_map_put(&rt->models, cfg->name, m, &old))
      rc = vr_errf(err, VR_ENOMEM, "out of memory");
    pthread_rwlock_unlock(&rt->lock);
  }
  if (rc) {
    model_free(rt, m);
    return rc;
  }
  /* The old model takes no new requests now; its queues drain. */
  if (old) model_free(rt, old);
  vr_info("model '%s' %s with %d instance(s)", cfg->name, old ? "reloaded" : "loaded",
          cfg->instances);
  return 0;
}

int vr_rt_load(vr_runtime *rt, const vr_model_config *cfg, vr_errbuf *err) {
  pthread_mutex_lock(&rt->admin_mu);
  int rc = load_locked(rt, cfg, 0, err);
  pthread_mutex_unlock(&rt->admin_mu);
  return rc;
}

int vr_rt_reload(vr_runtime *rt, const vr_model_config *cfg, vr_errbuf *err) {
  pthread_mutex_lock(&rt->admin_mu);
  int rc = load_locked(rt, cfg, 1, err);
  pthread_mutex_unlock(&rt->admin_mu);
  return rc;
}

int vr_rt_unload(vr_runtime *rt, const char *name, vr_errbuf *err) {
  pthread_mutex_lock(&rt->admin_mu);
  pthread_rwlock_wrlock(&rt->lock);
  vr_rt_model *m = vr_map_del(&rt->models, name);
  pthread_rwlock_unlock(&rt->lock);
  if (m) model_free(rt, m); /* drains: queued requests are still answered */
  pthread_mutex_unlock(&rt->admin_mu);
  if (!m) return vr_errf(err, VR_ENOENT, "model '%s' is not loaded", name);
  vr_info("model '%s' unloaded", name);
  return 0;
}

int vr_rt_model_config(vr_runtime *rt, const char *name,
                       vr_model_config *out) {
  pthread_rwlock_rdlock(&rt->lock);
  vr_rt_model *m = vr_map_get(&rt->models, name);
  if (m) *out = m->cfg;
  pthread_rwlock_unlock(&rt->lock);
  return m ? 0 : VR_ENOENT;
}

int vr_rt_model_version(vr_runtime *rt, const char *name) {
  pthread_rwlock_rdlock(&rt->lock);
  vr_rt_model *m = vr_map_get(&rt->models, name);
  int v = m && m->cfg.version > 0 ? m->cfg.version : 1;
  pthread_rwlock_unlock(&rt->lock);
  return v;
}

vr_labels *vr_rt_model_labels(vr_runtime *rt, const char *model,
                              const char *output) {
  vr_labels *l = NULL;
  pthread_rwlock_rdlock(&rt->lock);
  vr_rt_model *m = vr_map_get(&rt->models, model);
  for (int i = 0; m && i < m->cfg.n_outputs; i++)
    if (!strcmp(m->cfg.outputs[i].name, output)) l = m->labels[i];
  vr_labels_retain(l);
  pthread_rwlock_unlock(&rt->lock);
  return l;
}

int vr_rt_model_names(vr_runtime *rt, char **names, int cap) {
  int n = 0;
  const char *k;
  void *v;
  pthread_rwlock_rdlock(&rt->lock);
  for (size_t it = 0; vr_map_next(&rt->models, &it, &k, &v);) {
    if (n < cap) names[n] = vr_strdup(k);
    n++;
  }
  pthread_rwlock_unlock(&rt->lock);
  return n < cap ? n : cap;
}

int vr_rt_model_ready(vr_runtime *rt, const char *name) {
  pthread_rwlock_rdlock(&rt->lock);
  vr_rt_model *m = vr_map_get(&rt->models, name);
  int ready = m && m->instances.len > 0;
  pthread_rwlock_unlock(&rt->lock);
  return ready;
}

/* Finds an instance by id; rt->lock held. */
static vr_rt_instance *find_instance(vr_runtime *rt, int id,
                                     vr_rt_model **model) {
  const char *k;
  void *v;
  for (size_t it = 0; vr_map_next(&rt->models, &it, &k, &v);) {
    vr_rt_model *m = v;
    for (size_t i = 0; i < m->instances.len; i++) {
      vr_rt_instance *in = VR_VEC_AT(&m->instances, vr_rt_instance *, i);
      if (in->id == id) {
        if (model) *model = m;
        return in;
      }
    }
  }
  return NULL;
}

int vr_rt_add_instance(vr_runtime *rt, const char *model,
                       const vr_rt_instance_opts *o, vr_errbuf *err) {
  if (!o || o->threads < 1 || o->threads > VR_RT_MAX_THREADS ||
      o->max_batch < 1 || o->max_batch > VR_RT_MAX_BATCH ||
      o->max_queue_delay_us < 0 || o->pair_begin < 0 ||
      (o->pair_end > 0 && o->pair_end <= o->pair_begin))
    return vr_errf(err, VR_EINVAL, "bad instance options");
  /* admin_mu keeps the model from being unloaded while we build. */
  pthread_mutex_lock(&rt->admin_mu);
  pthread_rwlock_rdlock(&rt->lock);
  vr_rt_model *m = vr_map_get(&rt->models, model);
  pthread_rwlock_unlock(&rt->lock);
  int rc = m ? add_instance(rt, m, o, err)
             : vr_errf(err, VR_ENOENT, "model '%s' is not loaded", model);
  pthread_mutex_unlock(&rt->admin_mu);
  return rc;
}

int vr_rt_remove_instance(vr_runtime *rt, int id, vr_errbuf *err) {
  pthread_mutex_lock(&rt->admin_mu);
  pthread_rwlock_wrlock(&rt->lock);
  vr_rt_model *m = NULL;
  vr_rt_instance *in = find_instance(rt, id, &m);
  if (in)
    for (size_t i = 0; i < m->instances.len; i++)
      if (VR_VEC_AT(&m->instances, vr_rt_instance *, i) == in) {
        vr_vec_remove(&m->instances, i);
        break;
      }
  pthread_rwlock_unlock(&rt->lock);
  if (in) vr_inst_destroy(in);
  pthread_mutex_unlock(&rt->admin_mu);
  if (!in) return vr_errf(err, VR_ENOENT, "no instance %d", id);
  return 0;
}

/* Pair/unpair run under admin_mu (not rt->lock: a shadow's load takes
 * milliseconds and routing must go on), which keeps the instance from
 * being removed meanwhile. */
static int with_instance(vr_runtime *rt, int id, const vr_rt_shadow_opts *o, double *load_ms,
                         vr_errbuf *err) {
  pthread_mutex_lock(&rt->admin_mu);
  pthread_rwlock_rdlock(&rt->lock);
  vr_rt_instance *in = find_instance(rt, id, NULL);
  pthread_rwlock_unlock(&rt->lock);
  int rc = !in ? vr_errf(err, VR_ENOENT, "no instance %d", id)
           : o ? vr_inst_pair(in, o, load_ms, err)
               : vr_inst_unpair(in, err);
  pthread_mutex_unlock(&rt->admin_mu);
  return rc;
}

int vr_rt_pair_shadow(vr_runtime *rt, int id, const vr_rt_shadow_opts *o, double *load_ms,
                      vr_errbuf *err) {
  if (!o) return vr_errf(err, VR_EINVAL, "no shadow options");
  return with_instance(rt, id, o, load_ms, err);
}

int vr_rt_unpair_shadow(vr_runtime *rt, int id, vr_errbuf *err) {
  return with_instance(rt, id, NULL, NULL, err);
}

int vr_rt_set_batch_cap(vr_runtime *rt, int id, int cap, vr_errbuf *err) {
  pthread_rwlock_rdlock(&rt->lock);
  vr_rt_model *m = NULL;
  vr_rt_instance *in = find_instance(rt, id, &m);
  if (in) vr_inst_set_batch_cap(in, cap);
  pthread_rwlock_unlock(&rt->lock);
  return in ? 0 : vr_errf(err, VR_ENOENT, "no instance %d", id);
}

int vr_rt_instances(vr_runtime *rt, const char *model,
                    vr_rt_instance_stats *out, int cap) {
  int n = 0;
  const char *k;
  void *v;
  pthread_rwlock_rdlock(&rt->lock);
  for (size_t it = 0; vr_map_next(&rt->models, &it, &k, &v);) {
    vr_rt_model *m = v;
    if (model && strcmp(model, m->cfg.name)) continue;
    for (size_t i = 0; i < m->instances.len; i++, n++)
      if (n < cap)
        vr_inst_stats(VR_VEC_AT(&m->instances, vr_rt_instance *, i), &out[n]);
  }
  pthread_rwlock_unlock(&rt->lock);
  return n;
}

/* Checks the request's inputs against the config and puts them in the
 * config's order. Returns rows (>= 1) or a negative code with err set. */
static int validate(const vr_model_config *c, vr_rt_request *r, int max_batch,
                    vr_errbuf *err) {
  if (r->n_in != c->n_inputs)
    return vr_errf(err, VR_EINVAL, "model '%s' expects %d input(s), got %d",
                   c->name, c->n_inputs, r->n_in);
  int rows = -1;
  for (int i = 0; i < c->n_inputs; i++) {
    const vr_tensor_info *ti = &c->inputs[i];
    int j = i;
    while (j < r->n_in && (!r->in[j].name || strcmp(r->in[j].name, ti->name)))
      j++;
    if (j == r->n_in)
      return vr_errf(err, VR_EINVAL, "missing input '%s'", ti->name);
    vr_tensor t = r->in[j];
    r->in[j] = r->in[i];
    r->in[i] = t;
    if (t.dtype != ti->dtype)
      return vr_errf(err, VR_ETYPE, "input '%s': datatype %s, expected %s",
                     ti->name, vr_dtype_kserve(t.dtype) ? vr_dtype_kserve(t.dtype) : "?",
                     vr_dtype_kserve(ti->dtype));
    if (t.ndim != ti->ndim)
      return vr_errf(err, VR_ESHAPE, "input '%s': %d dims, expected %d",
                     ti->name, t.ndim, ti->ndim);
    for (int d = 1; d < ti->ndim; d++)
      if (t.shape[d] != ti->shape[d])
        return vr_errf(err, VR_ESHAPE, "input '%s': dim %d is %lld, expected"
                       " %lld", ti->name, d, (long long)t.shape[d],
                       (long long)ti->shape[d]);
    if (t.shape[0] < 1 || (rows >= 0 && t.shape[0] != rows))
      return vr_errf(err, VR_ESHAPE, "input '%s': batch dim %lld (inputs"
                     " must agree, >= 1)", ti->name, (long long)t.shape[0]);
    rows = (int)(t.shape[0] > VR_RT_MAX_BATCH ? VR_RT_MAX_BATCH + 1
                                              : t.shape[0]);
    if (t.shape[0] > max_batch)
      return vr_errf(err, VR_ELIMIT, "batch of %lld rows exceeds max batch"
                     " size %d of '%s'", (long long)t.shape[0], max_batch,
                     c->name);
    if (!t.data || t.nbytes != (size_t)vr_tensor_info_row_bytes(ti) *
                                   (size_t)t.shape[0])
      return vr_errf(err, VR_ESHAPE, "input '%s': %zu bytes, shape needs"
                     " %lld", ti->name, t.nbytes,
                     (long long)(vr_tensor_info_row_bytes(ti) * t.shape[0]));
  }
  return rows;
}

/* Least-loaded instance by the one rule of policy/route.h (queued +
 * running rows per row of max batch); ties go round-robin. rt->lock held
 * (read). */
static vr_rt_instance *route(vr_rt_model *m) {
  vr_rt_instance *best = NULL;
  int best_rows = 0;
  size_t n = m->instances.len;
  unsigned start = __atomic_fetch_add(&m->rr, 1, __ATOMIC_RELAXED);
  for (size_t k = 0; k < n; k++) {
    vr_rt_instance *in =
        VR_VEC_AT(&m->instances, vr_rt_instance *, (start + k) % n);
    int rows = vr_inst_load(in);
    if (!best || vr_route_lighter(0, rows, in->opts.max_batch, 0, best_rows,
                                  best->opts.max_batch)) {
      best = in;
      best_rows = rows;
    }
  }
  return best;
}

/* arrival + timeout, or no deadline for none (<= 0). A timeout so long
 * that the sum passes INT64_MAX (a client's "timeout": 9e15 us meaning
 * "never") is no deadline too, not a wrapped one in the past. */
static int64_t deadline_after(int64_t arrival_ns, int64_t timeout_ns) {
  if (timeout_ns <= 0) return VR_NO_DEADLINE;
  if (arrival_ns > 0 && timeout_ns >= VR_NO_DEADLINE - arrival_ns) return VR_NO_DEADLINE;
  return arrival_ns + timeout_ns;
}

static int prepare(vr_runtime *rt, vr_rt_request *req) {
  if (!req || !req->done) return VR_EINVAL;
  req->status = 0;
  req->n_out = 0;
  req->out_block = NULL;
  req->next = NULL;
  req->instance_id = 0;
  req->variant[0] = 0;
  int64_t now = vr_rt_now(rt);
  req->arrival_ns = req->arrived_ns > 0 && req->arrived_ns < now ? req->arrived_ns : now;
  req->deadline_ns = deadline_after(req->arrival_ns, req->timeout_ns);
  req->prio_key = req->priority > 0 ? req->priority : VR_RT_PRIO_DEFAULT;
  (void)rt;
  return 0;
}

/* Admission on the chosen instance: validation, then the queue (which
 * drops it at once if even an immediate run alone would miss the
 * deadline). rt->lock held. */
static void admit(vr_runtime *rt, vr_rt_instance *in, vr_rt_request *req, vr__rt_later *later) {
  int rows = validate(&in->model->cfg, req, in->opts.max_batch, &req->err);
  if (rows < 0) { /* bad input: not a variant outcome (no stats) */
    vr__rt_fail_later(later, NULL, rt, req, rows, VR_OUT_REJECTED, NULL);
    return;
  }
  req->rows = rows;
  vr_inst_enqueue_many(in, &req, 1, later); /* drops it if already due (policy/drop.h) */
}

/* Triton's queue policy: the model's default timeout, unless the request
 * brings its own and overrides are allowed; DELAY serves a request past
 * the default timeout late instead of dropping it. */
static void apply_queue_policy(const vr_model_config *c, vr_rt_request *req) {
  int64_t t = req->timeout_ns;
  if (!(t > 0 && c->queue.allow_timeout_override))
    t = c->queue.delay ? 0 : c->queue.default_timeout_us * 1000;
  req->timeout_ns = t;
  req->deadline_ns = deadline_after(req->arrival_ns, t);
}

int vr_rt_submit(vr_runtime *rt, const char *model, vr_rt_request *req) {
  int rc = prepare(rt, req);
  if (rc) return rc;
  pthread_rwlock_rdlock(&rt->lock);
  vr_rt_model *m = rt->shutting_down ? NULL : vr_map_get(&rt->models, model);
  if (m && req->queue_policy) apply_queue_policy(&m->cfg, req);
  vr_rt_instance *in = m ? route(m) : NULL;
  vr__rt_later later = VR__RT_LATER_INIT(later);
  if (in) admit(rt, in, req, &later);
  pthread_rwlock_unlock(&rt->lock);
  vr__rt_answer_later(rt, &later);
  if (in) return 0;
  if (rt->shutting_down)
    vr_rt_fail(NULL, rt, req, VR_ESHUTDOWN, VR_OUT_REJECTED,
               "server is shutting down");
  else if (!m)
    vr_rt_fail(NULL, rt, req, VR_ENOENT, VR_OUT_REJECTED,
               "model '%s' is not loaded", model);
  else
    vr_rt_fail(NULL, rt, req, VR_ESTATE, VR_OUT_REJECTED,
               "model '%s' has no active instance", model);
  return 0;
}

/* ---- plugging (runtime_int.h) -------------------------------------------- */

typedef struct plug {
  vr_runtime *rt; /* plugged on this thread, or NULL */
  vr_rt_request **reqs;
  int *ids;
  int n, cap;
} plug;
static __thread plug t_plug;

void vr__rt_plug(vr_runtime *rt) { t_plug.rt = rt; }

/* Holds req for unplug; 0, or VR_ENOMEM (then it is submitted at once). */
static int plug_hold(vr_rt_request *req, int id) {
  plug *p = &t_plug;
  if (p->n == p->cap) {
    int cap = p->cap ? 2 * p->cap : 16;
    vr_rt_request **r = vr_realloc(p->reqs, (size_t)cap * sizeof *r);
    if (!r) return VR_ENOMEM;
    p->reqs = r;
    int *ids = vr_realloc(p->ids, (size_t)cap * sizeof *ids);
    if (!ids) return VR_ENOMEM;
    p->ids = ids;
    p->cap = cap;
  }
  p->reqs[p->n] = req;
  p->ids[p->n++] = id;
  return 0;
}

/* A request for an instance that is not there: the runtime is shutting
 * down, or the instance was removed after the caller chose it (a scale-in
 * racing the routing). Both are 503s a caller may retry, not 404s: the
 * model or app it asked for may well exist (VR_ESTATE: route again). */
static void fail_gone(vr_runtime *rt, vr_rt_request *r, int id) {
  if (rt->shutting_down)
    vr_rt_fail(NULL, rt, r, VR_ESHUTDOWN, VR_OUT_REJECTED, "shutting down");
  else
    vr_rt_fail(NULL, rt, r, VR_ESTATE, VR_OUT_REJECTED,
               "instance %d was removed after it was chosen", id);
}

void vr__rt_unplug(vr_runtime *rt) {
  plug p = t_plug;
  t_plug = (plug){0}; /* what the answers below submit goes straight in */
  vr_rt_request **share = p.n ? vr_malloc((size_t)p.n * sizeof *share) : NULL;
  for (int i = 0; i < p.n; i++) {
    if (!share) { /* out of memory: one at a time */
      vr_rt_submit_to(rt, p.ids[i], p.reqs[i]);
      continue;
    }
    if (!p.reqs[i]) continue;
    int id = p.ids[i], n = 0;
    vr__rt_later later = VR__RT_LATER_INIT(later);
    pthread_rwlock_rdlock(&rt->lock);
    vr_rt_instance *in = rt->shutting_down ? NULL : find_instance(rt, id, NULL);
    /* this instance's share, in submission order, validated as admit does */
    for (int j = i; in && j < p.n; j++) {
      vr_rt_request *r = p.reqs[j];
      if (!r || p.ids[j] != id) continue;
      p.reqs[j] = NULL;
      int rows = validate(&in->model->cfg, r, in->opts.max_batch, &r->err);
      if (rows < 0) {
        vr__rt_fail_later(&later, NULL, rt, r, rows, VR_OUT_REJECTED, NULL);
        continue;
      }
      r->rows = rows;
      share[n++] = r;
    }
    if (in) vr_inst_enqueue_many(in, share, n, &later);
    pthread_rwlock_unlock(&rt->lock);
    vr__rt_answer_later(rt, &later);
    if (!in) {
      vr_rt_request *r = p.reqs[i];
      p.reqs[i] = NULL;
      fail_gone(rt, r, id);
    }
  }
  vr_free(share);
  vr_free(p.reqs);
  vr_free(p.ids);
}

int vr_rt_submit_to(vr_runtime *rt, int instance_id, vr_rt_request *req) {
  int rc = prepare(rt, req);
  if (rc) return rc;
  if (t_plug.rt == rt && !plug_hold(req, instance_id)) return 0;
  pthread_rwlock_rdlock(&rt->lock);
  vr_rt_instance *in =
      rt->shutting_down ? NULL : find_instance(rt, instance_id, NULL);
  vr__rt_later later = VR__RT_LATER_INIT(later);
  if (in) admit(rt, in, req, &later);
  pthread_rwlock_unlock(&rt->lock);
  vr__rt_answer_later(rt, &later);
  if (!in) fail_gone(rt, req, instance_id);
  return 0;
}
