/*
 * Query path of the control plane: INFaaS variant selection for each
 * query (policy/select.h over the index the last tick built), the loader
 * thread that loads an inactive variant a query needs, completion
 * accounting, and the JSON description of apps and variants.
 */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "control/control_int.h"
#include "policy/route.h"

static void fill_variant(const vr_control *c, int v, vr_ctl_route *r) {
  const vr_profile *p = &c->var[v].prof;
  r->variant = v;
  snprintf(r->model, sizeof r->model, "%s", p->model);
  snprintf(r->variant_name, sizeof r->variant_name, "%s", p->variant);
  r->accuracy = p->accuracy;
  r->profile_ms = vr_profile_tail_ms(p, 1);
  r->cost_per_1k = 1000 * vr_policy_query_cost(p);
}

/* The answer is a VR_E* code and a message; the server maps the code to
 * HTTP (server.c), so the control plane knows nothing of HTTP. */
static void fail(vr_ctl_route *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(vr_ctl_route *r, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->msg, sizeof r->msg, fmt, ap);
  va_end(ap);
  r->status = status;
}

/* Least-loaded serving instance of v by the one rule of policy/route.h
 * (rows in flight per row of batch capacity, interfered ones last),
 * skipping instances being removed; NULL if none. */
static ctl_inst *pick_instance(vr_control *c, int v) {
  ctl_inst *best = NULL;
  const vr_snap_instance *bx = NULL;
  const vr_snapshot *s = &c->drv.snap;
  for (size_t i = 0; i < c->insts.len; i++) {
    ctl_inst *in = vr_vec_at(&c->insts, i);
    if (in->var != v || in->removing) continue;
    const vr_snap_instance *x = NULL;
    for (size_t k = 0; k < s->ninstances && !x; k++)
      if (s->instances[k].id == in->id) x = &s->instances[k];
    if (!x || x->state == VR_IS_LOADING || x->state == VR_IS_DRAINING) continue;
    if (!best || vr_route_lighter(x->state == VR_IS_INTERFERED, in->inflight,
                                  x->max_batch, bx->state == VR_IS_INTERFERED,
                                  best->inflight, bx->max_batch))
      best = in, bx = x;
  }
  return best;
}

static void count_routed(vr_control *c, ctl_inst *in, double slo, double acc) {
  ctl_var *v = &c->var[in->var];
  if (acc > v->period_acc) v->period_acc = acc;
  in->inflight++;
  in->arrivals++;
  v->arrivals++;
  c->p_arrivals++;
  if (v->period_slo <= 0 || slo < v->period_slo) v->period_slo = slo;
}

/* An idle instance (nothing in flight, no arrivals this period) of another
 * variant whose release lets v fit; marks it removing and returns its id,
 * or 0. Caller holds mu. */
static ctl_inst *find_victim(vr_control *c, int v) {
  const vr_profile *p = &c->var[v].prof;
  for (size_t i = 0; i < c->insts.len; i++) {
    ctl_inst *in = vr_vec_at(&c->insts, i);
    if (in->removing || in->inflight || in->arrivals || in->var == v) continue;
    const vr_profile *q = &c->var[in->var].prof;
    if (c->worker.free_cores + q->threads >= p->threads &&
        c->worker.free_mem + q->mem_bytes >= p->mem_bytes)
      return in;
  }
  return NULL;
}

static int pick_victim(vr_control *c, int v) {
  ctl_inst *in = find_victim(c, v);
  if (!in) return 0;
  const vr_profile *q = &c->var[in->var].prof;
  in->removing = 1;
  c->worker.free_cores += q->threads;
  c->worker.free_mem += q->mem_bytes;
  return in->id;
}

/* What the route rule asks about room (policy/route.h); mu held. */
static int env_available(void *self, int v) {
  vr_control *c = self;
  return c->var[v].loading || pick_instance(c, v) != NULL;
}
static int env_fits(void *self, int v) { return ctl_fits_locked(self, v); }
static int env_evictable(void *self, int v) { return find_victim(self, v) != NULL; }
static int env_backlog(void *self, int v, long *rows) {
  ctl_inst *in = pick_instance(self, v);
  if (!in) return 0;
  *rows = in->inflight;
  return 1;
}

/* Queues a load of v for the loader with w waiting on it (w = NULL: a
 * load nobody waits for, route step 3c); joins one already queued or
 * running. Caller holds mu. */
static int queue_load(vr_control *c, int v, ctl_wait *w, int evict_id) {
  if (c->running && c->running->var == v) {
    if (w) w->next = c->running->waiters, c->running->waiters = w;
    return 0;
  }
  for (ctl_load *l = c->loads; l; l = l->next)
    if (l->var == v) {
      if (w) w->next = l->waiters, l->waiters = w;
      return 0;
    }
  ctl_load *l = VR_NEW(ctl_load);
  if (!l) return VR_ENOMEM;
  l->var = v;
  l->evict_id = evict_id;
  l->waiters = w;
  const vr_profile *p = &c->var[v].prof;
  snprintf(l->name, sizeof l->name, "%s", p->variant);
  l->cores = p->threads;
  l->mem = p->mem_bytes;
  c->loading_cores += p->threads; /* reserve now, so ticks do not overcommit */
  c->loading_mem += p->mem_bytes;
  c->worker.free_cores -= p->threads;
  c->worker.free_mem -= p->mem_bytes;
  c->var[v].loading = 1;
  ctl_load **tail = &c->loads;
  while (*tail) tail = &(*tail)->next;
  *tail = l;
  pthread_cond_broadcast(&c->cv);
  return 0;
}

/* The INFaaS decision for one query (mu held). Returns 1 when the answer
 * is final (r filled), 0 when a load was queued for the waiter; sets
 * *prefetched when it queued a load nobody waits for (route step 3c). */
static int decide(vr_control *c, const vr_ctl_query *q, vr_ctl_route *r,
                  ctl_wait **waiter, int *prefetched) {
  const char *name = q->app ? q->app : q->model;
  int group = name ? vr_select_group(c->drv.ix, q->app ? 'a' : 'm', name) : -1;
  if (group < 0) {
    fail(r, VR_ENOENT, "no registered %s named '%s'", q->app ? "app" : "model",
         name ? name : "");
    return 1;
  }
  double acc = q->min_accuracy; /* percent, as everywhere in the API */
  r->slo_ms = q->latency_ms > 0 ? q->latency_ms : c->o.default_slo_ms;
  r->req_accuracy = vr_route_load_floor(q->app ? 'a' : 'm', acc);
  vr_query_req qr = {group, r->slo_ms, acc};
  vr_route_env env = {c->drv.ix, &c->drv.snap, q->app ? 'a' : 'm', name,
                      env_available, env_fits, env_evictable, env_backlog,
                      c};
  vr_route rt;
  if (vr_route_decide(&env, &qr, &rt)) {
    fail(r, VR_EINTERNAL, "selection failed");
    return 1;
  }
  const vr_selection sel = rt.sel;
  /* route step 3c: the variant INFaaS would load for an overload that
   * no serving variant can take starts loading now; this query stays */
  if (rt.prefetch >= 0 && !c->var[rt.prefetch].loading &&
      !pick_instance(c, rt.prefetch) && ctl_fits_locked(c, rt.prefetch) &&
      queue_load(c, rt.prefetch, NULL, 0) == 0)
    *prefetched = 1;
  if (rt.variant >= 0) fill_variant(c, rt.variant, r);
  if (rt.outcome == VR_ROUTE_INFEASIBLE) {
    c->p_infeasible++;
    fail(r, VR_EINFEASIBLE,
         "no variant of '%s' meets latency_ms=%g and min_accuracy=%g%%; closest is "
         "%s: p99 %.3f ms at batch 1, accuracy %.2f%%", name, r->slo_ms, acc,
         r->variant_name, sel.latency_ms, sel.accuracy);
    return 1;
  }
  if (q->max_cost > 0 && r->cost_per_1k > q->max_cost) {
    c->p_infeasible++;
    fail(r, VR_EINFEASIBLE,
         "variant %s meets latency and accuracy but costs $%.3g per 1000 queries "
         "(max_cost %g)", r->variant_name, r->cost_per_1k, q->max_cost);
    return 1;
  }
  /* an instance of the variant serves: the least loaded (policy/route.h) */
  ctl_inst *in = pick_instance(c, rt.variant);
  if (in) {
    r->instance_id = in->id;
    count_routed(c, in, r->slo_ms, r->req_accuracy);
    return 1;
  }
  /* Inactive (or its instances are going away): load it, or join its
   * load — after evicting an instance nobody used this period, if that
   * makes room (the autoscaler would release it after its load time
   * anyway). */
  int victim = rt.outcome == VR_ROUTE_EVICT_LOAD ? pick_victim(c, rt.variant) : 0;
  if (rt.outcome == VR_ROUTE_LOAD || rt.outcome == VR_ROUTE_SERVE || victim) {
    *waiter = VR_NEW(ctl_wait);
    if (*waiter && queue_load(c, rt.variant, *waiter, victim) == 0) {
      r->loaded = 1;
      return 0;
    }
    if (victim) { /* could not queue: the victim stays */
      ctl_inst *in = ctl_inst_by_id(c, victim);
      in->removing = 0;
      c->worker.free_cores -= c->var[in->var].prof.threads;
      c->worker.free_mem -= c->var[in->var].prof.mem_bytes;
    }
    vr_free(*waiter);
    *waiter = NULL;
  }
  fail(r, VR_EBUSY,
       "variant %s would serve this query but the worker has no room to load it "
       "(%d cores, %lld MiB free)", r->variant_name, c->worker.free_cores,
       (long long)(c->worker.free_mem >> 20));
  return 1;
}

int vr_control_has_app(vr_control *c, const char *app) {
  pthread_mutex_lock(&c->mu);
  int has = vr_select_group(c->drv.ix, 'a', app) >= 0; /* as decide() */
  pthread_mutex_unlock(&c->mu);
  return has;
}

void vr_control_route(vr_control *c, const vr_ctl_query *q, vr_ctl_route_cb cb,
                      void *tag) {
  vr_ctl_route r;
  memset(&r, 0, sizeof r);
  r.variant = -1;
  ctl_wait *w = NULL;
  int prefetched = 0;
  pthread_mutex_lock(&c->mu);
  int64_t t0 = vr_now_ns();
  int final = decide(c, q, &r, &w, &prefetched);
  vr_hist_record(&c->sel_hist, (uint64_t)(vr_now_ns() - t0));
  if (final && r.variant >= 0) ctl_af_routed(c, r.variant);
  if (!final) {
    w->cb = cb;
    w->tag = tag;
    w->r = r;
  }
  int started = c->started;
  pthread_mutex_unlock(&c->mu);
  if (final) cb(tag, &r);
  /* no loader thread: load inline */
  if (!started && (!final || prefetched)) ctl_loader_main(c);
}

/* ---- loader ------------------------------------------------------------- */

static void answer_waiters(vr_control *c, ctl_wait *list, int id, const char *msg) {
  for (ctl_wait *w = list, *next; w; w = next) {
    next = w->next;
    if (id > 0) {
      pthread_mutex_lock(&c->mu);
      ctl_inst *in = ctl_inst_by_id(c, id);
      if (in) count_routed(c, in, w->r.slo_ms, w->r.req_accuracy);
      pthread_mutex_unlock(&c->mu);
      w->r.instance_id = id;
    } else {
      fail(&w->r, VR_EBUSY, "loading variant %s failed: %s", w->r.variant_name, msg);
    }
    w->cb(w->tag, &w->r);
    vr_free(w);
  }
}

static void run_load(vr_control *c, ctl_load *l) {
  vr_errbuf err = {0};
  if (l->evict_id) {
    vr_errbuf e2 = {0};
    if (vr_rt_remove_instance(c->o.rt, l->evict_id, &e2))
      vr_warn("control: evicting instance %d: %s", l->evict_id, e2.msg);
    else
      vr_info("control: evicted idle instance %d for %s", l->evict_id,
              c->var[l->var].prof.variant);
    __atomic_fetch_add(&c->drv.applied[VR_ACT_UNLOAD], 1, __ATOMIC_RELAXED);
  }
  /* by name: a store reload may have moved (or removed) the variant
   * since the load was queued */
  int id = ctl_load_variant_named(c, l->name, &err);
  pthread_mutex_lock(&c->mu);
  c->loading_cores -= l->cores;
  c->loading_mem -= l->mem;
  if (l->var >= 0) c->var[l->var].loading = 0;
  if (id > 0) /* a query-path load */
    __atomic_fetch_add(&c->drv.applied[VR_ACT_LOAD], 1, __ATOMIC_RELAXED);
  /* Make the new instance visible to routing before answering. */
  ctl_refresh_locked(c, vr_driver_now(&c->drv), 1.0);
  /* Queries that joined while it loaded are answered with the rest;
   * later ones see the instance in the index. */
  ctl_wait *list = l->waiters;
  c->running = NULL;
  pthread_mutex_unlock(&c->mu);
  if (id < 0) vr_warn("control: query-path load failed: %s", err.msg);
  answer_waiters(c, list, id, err.msg);
  vr_free(l);
}

/* Thread body (or called inline when no threads run): performs queued
 * loads until stopped; on stop, loads what is queued so nobody waits
 * forever. */
void *ctl_loader_main(void *arg) {
  vr_control *c = arg;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    while (!c->loads && !c->stop && c->started) pthread_cond_wait(&c->cv, &c->mu);
    ctl_load *l = c->loads;
    if (!l) break;
    c->loads = l->next;
    c->running = l;
    pthread_mutex_unlock(&c->mu);
    run_load(c, l);
    pthread_mutex_lock(&c->mu);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

/* ---- completions ---------------------------------------------------------- */

ctl_app_period *ctl_app_period_of(vr_control *c, const char *app) {
  for (int i = 0; i < c->napps; i++)
    if (!strcmp(c->apps[i]->app, app)) return c->apps[i];
  if (c->napps == CTL_MAX_APPS) return NULL;
  ctl_app_period *a = vr_malloc(sizeof *a);
  if (!a) return NULL;
  snprintf(a->app, sizeof a->app, "%s", app);
  a->served = a->late = 0;
  vr_hist_init(&a->lat);
  c->apps[c->napps++] = a;
  return a;
}

void vr_control_not_run(vr_control *c, const vr_ctl_route *r) {
  vr_rt_request none;
  vr_rt_request_init(&none);
  none.status = VR_EINTERNAL; /* any failure: only served requests are timed */
  none.outcome = VR_OUT_FAILED;
  vr_control_completed(c, r, &none);
}

void vr_control_completed(vr_control *c, const vr_ctl_route *r,
                          const vr_rt_request *req) {
  pthread_mutex_lock(&c->mu);
  ctl_inst *in = ctl_inst_by_id(c, r->instance_id);
  if (in) {
    in->inflight--;
    if (req->status == 0) {
      /* batch_ns, not end - start: a stuck shadow's wait is no sign that
       * the variant runs slow (runtime.h) */
      if (in->nlat < CTL_LAT_SAMPLES) in->lat[in->nlat++] = (float)(req->batch_ns / 1e6);
      int64_t ref = vr_batch_est_ns(&in->lp, req->batch_size);
      if (ref > 0 && in->nratio < CTL_LAT_SAMPLES)
        in->ratio[in->nratio++] = (float)((double)req->batch_ns / ref);
      in->items += req->batch_size;
      in->batches++;
    }
  }
  /* by name: a store reload since routing may have moved the index */
  uintptr_t vi = (uintptr_t)vr_map_get(&c->var_by_name, r->variant_name);
  int v = vi ? (int)vi - 1 : -1;
  if (req->status == 0) {
    if (v >= 0) c->var[v].served++;
    c->p_served++;
    double ms = (req->end_ns - req->arrival_ns) / 1e6;
    if (ms > r->slo_ms) c->p_late++;
    c->p_acc_sum += r->accuracy;
    vr_hist_record(&c->p_hist, (uint64_t)(ms * 1000));
    ctl_app_period *a = v >= 0 ? ctl_app_period_of(c, c->var[v].prof.app) : NULL;
    if (a) {
      a->served++;
      a->late += ms > r->slo_ms;
      vr_hist_record(&a->lat, (uint64_t)(ms * 1000));
    }
  } else {
    c->p_failed++;
  }
  pthread_mutex_unlock(&c->mu);
}

/* ---- metrics ---------------------------------------------------------------- */

static void prom_line(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void prom_line(char **buf, size_t *len, size_t *cap, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = *buf ? vsnprintf(*buf + *len, *cap - *len, fmt, ap) : -1;
    va_end(ap);
    if (n >= 0 && *len + (size_t)n < *cap) {
      *len += (size_t)n;
      return;
    }
    size_t nc = *cap ? *cap * 2 : 4096;
    char *nb = vr_realloc(*buf, nc);
    if (!nb) return; /* keep what fits */
    *buf = nb;
    *cap = nc;
  }
}

char *vr_control_prometheus(vr_control *c) {
  char *b = NULL;
  size_t len = 0, cap = 0;
  pthread_mutex_lock(&c->mu);
  prom_line(&b, &len, &cap, "# HELP vario_scaling_actions_total Control-plane actions "
            "applied, by kind.\n# TYPE vario_scaling_actions_total counter\n");
  for (int k = VR_ACT_LOAD; k < VR_ACT__COUNT; k++)
    prom_line(&b, &len, &cap, "vario_scaling_actions_total{kind=\"%s\"} %llu\n",
              vr_action_name(k),
              (unsigned long long)__atomic_load_n(&c->drv.applied[k], __ATOMIC_RELAXED));
  prom_line(&b, &len, &cap, "# HELP vario_control_instances Instances per variant.\n"
            "# TYPE vario_control_instances gauge\n");
  for (size_t v = 0; v < c->nvar; v++) {
    int n = 0;
    for (size_t i = 0; i < c->insts.len; i++) {
      ctl_inst *in = vr_vec_at(&c->insts, i);
      n += in->var == (int)v && !in->removing;
    }
    if (n || c->var[v].state != VR_VS_INACTIVE)
      prom_line(&b, &len, &cap, "vario_control_instances{variant=\"%s\",state=\"%s\"} %d\n",
                c->var[v].prof.variant, vr_vstate_name(c->var[v].state), n);
  }
  prom_line(&b, &len, &cap, "# HELP vario_variant_selection_seconds Per-query variant "
            "selection time.\n# TYPE vario_variant_selection_seconds summary\n");
  const double qs[] = {0.5, 0.9, 0.99};
  for (int i = 0; i < 3; i++)
    prom_line(&b, &len, &cap, "vario_variant_selection_seconds{quantile=\"%g\"} %.9f\n",
              qs[i], vr_hist_quantile(&c->sel_hist, qs[i]) / 1e9);
  prom_line(&b, &len, &cap, "vario_variant_selection_seconds_sum %.9f\n"
            "vario_variant_selection_seconds_count %llu\n", c->sel_hist.sum / 1e9,
            (unsigned long long)c->sel_hist.count);
  prom_line(&b, &len, &cap, "# HELP vario_app_slo_violations_total Model-less queries "
            "answered after their latency_ms.\n# TYPE vario_app_slo_violations_total counter\n"
            "vario_app_slo_violations_total %llu\n", (unsigned long long)(c->total_late + c->p_late));
  prom_line(&b, &len, &cap, "# HELP vario_infeasible_queries_total Model-less queries no "
            "variant could meet (4xx).\n# TYPE vario_infeasible_queries_total counter\n"
            "vario_infeasible_queries_total %llu\n",
            (unsigned long long)(c->total_infeasible + c->p_infeasible));
  if (c->o.policy.kind == VR_POL_ASYFUNC && c->af_provision_ms >= 0)
    prom_line(&b, &len, &cap, "# HELP vario_shadow_provision_ms AsyFunc: from a routed "
              "query finding the bodies crowded to the shadow paired (its blocks loaded), "
              "the last shadow.\n# TYPE vario_shadow_provision_ms gauge\n"
              "vario_shadow_provision_ms %.3f\n", c->af_provision_ms);
  pthread_mutex_unlock(&c->mu);
  return b;
}

/* ---- description ---------------------------------------------------------- */

static json_t *variant_json(vr_control *c, int v) {
  const vr_profile *p = &c->var[v].prof;
  int n = 0, inflight = 0;
  for (size_t i = 0; i < c->insts.len; i++) {
    ctl_inst *in = vr_vec_at(&c->insts, i);
    n += in->var == v && !in->removing;
    if (in->var == v) inflight += in->inflight;
  }
  return json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:f, s:f, s:I, s:f, s:s, s:i, s:i}",
                   "name", p->variant, "model", p->model, "precision", p->precision,
                   "threads", p->threads, "max_batch", p->max_batch, "accuracy",
                   p->accuracy, "p50_ms_b1", p->lat.p50_ms[0], "p99_ms_b1",
                   vr_profile_tail_ms(p, 1), "load_ms", p->load_ms, "mem_bytes",
                   (json_int_t)p->mem_bytes, "cost_per_s", p->cost_per_s, "state",
                   vr_vstate_name(c->var[v].state), "instances", n, "in_flight", inflight);
}

static json_t *inputs_json(const char *dir) {
  vr_model_config cfg;
  json_t *a = json_array();
  if (vr_model_config_load(dir, &cfg, NULL)) return a;
  for (int i = 0; i < cfg.n_inputs; i++) {
    json_t *shape = json_array();
    for (int d = 0; d < cfg.inputs[i].ndim; d++)
      json_array_append_new(shape, json_integer(cfg.inputs[i].shape[d]));
    const char *dt = vr_dtype_kserve(cfg.inputs[i].dtype);
    json_array_append_new(a, json_pack("{s:s, s:s, s:o}", "name", cfg.inputs[i].name,
                                       "datatype", dt ? dt : "?", "shape", shape));
  }
  return a;
}

char *vr_control_describe(vr_control *c, const char *app) {
  json_t *apps = json_object();
  pthread_mutex_lock(&c->mu);
  for (size_t v = 0; v < c->nvar; v++) {
    const char *a = c->var[v].prof.app;
    if (app && strcmp(a, app)) continue;
    json_t *arr = json_object_get(apps, a);
    if (!arr) json_object_set_new(apps, a, arr = json_array());
    json_array_append_new(arr, variant_json(c, (int)v));
  }
  json_t *root = json_pack("{s:o, s:i, s:i, s:I}", "apps", apps, "cores", c->o.cores,
                           "free_cores", c->worker.free_cores, "free_mem",
                           (json_int_t)c->worker.free_mem);
  /* One app: also its input tensors (as GET /v2/models/{m}), so clients
   * such as vario bench can build requests without naming a model. */
  for (size_t v = 0; app && v < c->nvar; v++)
    if (!strcmp(c->var[v].prof.app, app)) {
      json_object_set_new(root, "inputs", inputs_json(c->var[v].dir));
      break;
    }
  pthread_mutex_unlock(&c->mu);
  if (app && !json_object_get(apps, app)) {
    json_decref(root);
    return NULL;
  }
  /* 12 significant digits: 89.7, not the double's 89.700000000000003. */
  char *s = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(12));
  json_decref(root);
  char *out = s ? vr_strdup(s) : NULL;
  free(s);
  return out;
}
