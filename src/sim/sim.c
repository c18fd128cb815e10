/*
 * Simulator data path: arrivals, routing, dynamic batching, completions.
 * The control path (ticks, snapshots, actions) is in sim_ctl.c.
 */
#include <math.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "policy/place.h"
#include "sim/sim_int.h"

int sim_push(vr_sim *s, int kind, int64_t t, int a, void *p) {
  vr_event e = {t, 0, kind, a, p, 0};
  return vr_heap_push(&s->heap, e);
}

/* ---- workers and instances ---- */

sim_worker *sim_worker_new(vr_sim *s, int type, int64_t ready_ns) {
  const vr_sim_wtype *t = &s->cfg->wtypes[type];
  sim_worker *w = VR_NEW(sim_worker);
  if (!w || vr_vec_push(&s->workers, &w)) {
    vr_free(w);
    return NULL;
  }
  w->id = s->next_id++;
  w->index = (int)s->workers.len - 1;
  w->type = type;
  w->cores = w->free_cores = t->cores;
  w->gpus = w->free_gpus = t->gpus;
  w->mem = w->free_mem = t->mem_bytes;
  w->price = t->price_per_s;
  w->started_ns = vr_clock_now(&s->clock);
  w->ready_ns = ready_ns;
  w->idle_since = ready_ns;
  w->state = ready_ns > w->started_ns ? VR_WS_STARTING : VR_WS_UP;
  if (w->state == VR_WS_STARTING && sim_push(s, EV_WORKER_UP, ready_ns, 0, w))
    return NULL;
  return w;
}

static int fits(const sim_worker *w, const vr_profile *p) {
  if (w->state == VR_WS_DRAINING || w->state == WS_REMOVED) return 0;
  return vr_place_holds(w->free_cores, w->free_gpus, w->free_mem, p);
}

static vr_place_cand sim_cand(const sim_worker *w) {
  return (vr_place_cand){w->state == VR_WS_UP, w->gpus, w->free_cores};
}

/* Query-path placement (a LOAD chosen by selection): the policy's
 * placement rule (policy/place.h). */
sim_worker *sim_place(vr_sim *s, const vr_profile *p) {
  sim_worker *best = NULL;
  for (size_t i = 0; i < s->workers.len; i++) {
    sim_worker *w = VR_VEC_AT(&s->workers, sim_worker *, i);
    if (fits(w, p) &&
        (!best || vr_place_prefer(sim_cand(w), sim_cand(best), p)))
      best = w;
  }
  return best;
}

sim_inst *sim_inst_new(vr_sim *s, int variant, sim_worker *w, int warm) {
  sim_variant *v = &s->var[variant];
  if (!fits(w, &v->prof)) return NULL;
  sim_inst *in = VR_NEW(sim_inst);
  if (!in) return NULL;
  in->qcap = 64;
  in->q = vr_malloc(in->qcap * sizeof *in->q);
  if (!in->q || vr_vec_push(&s->insts, &in)) {
    vr_free(in->q);
    vr_free(in);
    return NULL;
  }
  int64_t now = vr_clock_now(&s->clock);
  in->id = s->next_id++;
  in->hpos = -1;
  in->variant = variant;
  in->w = w;
  in->state = VR_IS_LOADING;
  in->loading = 1;
  int b = v->slo_ms > 0 ? vr_profile_batch_for_slo(&v->prof, v->slo_ms) : 0;
  in->max_batch = b > 0 ? b : v->prof.max_batch;
  int64_t start = w->ready_ns > now ? w->ready_ns : now;
  in->ready_ns = start + (warm ? 0 : (int64_t)(v->prof.load_ms * 1e6));
  w->free_cores -= v->prof.threads;
  w->free_mem -= v->prof.mem_bytes;
  if (v->prof.device == VR_DEV_GPU) w->free_gpus--;
  w->ninst++;
  w->idle_since = -1;
  v->nloading++;
  v->loading_one = in;
  v->ever = 1;
  if (sim_push(s, EV_LOADED, in->ready_ns, 0, in)) return NULL;
  return in;
}

/* ---- serving heap: least-loaded instance on top ---- */

/* a lighter than b: the one least-loaded rule (policy/route.h) */
static inline int lighter(const sim_inst *a, const sim_inst *b) {
  return vr_route_lighter(a->state == VR_IS_INTERFERED, a->qlen, a->max_batch,
                          b->state == VR_IS_INTERFERED, b->qlen, b->max_batch);
}

static void hswap(sim_inst **d, int a, int b) {
  sim_inst *t = d[a];
  d[a] = d[b];
  d[b] = t;
  d[a]->hpos = a;
  d[b]->hpos = b;
}

static void hsift(vr_vec *h, int i) {
  sim_inst **d = h->data;
  int n = (int)h->len;
  while (i > 0 && lighter(d[i], d[(i - 1) / 2])) {
    hswap(d, i, (i - 1) / 2);
    i = (i - 1) / 2;
  }
  for (;;) {
    int c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && lighter(d[c + 1], d[c])) c++;
    if (!lighter(d[c], d[i])) break;
    hswap(d, i, c);
    i = c;
  }
}

void sim_serving_fix(vr_sim *s, sim_inst *in) {
  if (in->hpos >= 0) hsift(&s->var[in->variant].serving, in->hpos);
}

static int serving_add(sim_variant *v, sim_inst *in) {
  in->hpos = (int)v->serving.len;
  if (vr_vec_push(&v->serving, &in)) {
    in->hpos = -1;
    return VR_ENOMEM;
  }
  hsift(&v->serving, in->hpos);
  return 0;
}

static void serving_remove(sim_variant *v, sim_inst *in) {
  int pos = in->hpos;
  if (pos < 0) return;
  sim_inst *last;
  vr_vec_pop(&v->serving, &last);
  in->hpos = -1;
  if (last != in) {
    VR_VEC_AT(&v->serving, sim_inst *, pos) = last;
    last->hpos = pos;
    hsift(&v->serving, pos);
  }
}

/* An instance dies once it is draining, idle, empty and not loading:
 * then no event refers to it and its resources go back to the worker. */
void sim_maybe_dead(vr_sim *s, sim_inst *in) {
  if (in->dead || in->state != VR_IS_DRAINING || in->loading || in->busy_n ||
      in->qlen)
    return;
  sim_variant *v = &s->var[in->variant];
  sim_worker *w = in->w;
  in->dead = 1;
  w->free_cores += v->prof.threads;
  w->free_mem += v->prof.mem_bytes;
  if (v->prof.device == VR_DEV_GPU) w->free_gpus++;
  if (--w->ninst == 0) w->idle_since = vr_clock_now(&s->clock);
}

void sim_inst_drain(vr_sim *s, sim_inst *in) {
  if (in->state == VR_IS_DRAINING) return;
  sim_variant *v = &s->var[in->variant];
  if (in->loading) {
    v->nloading--;
    if (v->loading_one == in) v->loading_one = NULL;
  } else {
    serving_remove(v, in);
  }
  in->state = VR_IS_DRAINING;
  sim_maybe_dead(s, in);
}

/* ---- outcomes ---- */

static void outcome(vr_sim *s, const vr_req *r, int what, int variant) {
  if (s->out && s->out->on_request)
    s->out->on_request(s->out->user, r, what, variant);
}

/* Whether a request counts in the run's totals: it arrived after the
 * warm-up. Demand and outcome are both booked by arrival, so one that
 * arrived during the warm-up and ends after it is in neither. */
static int counted(const vr_sim *s, const vr_req *r) { return r->t_ns >= s->warm_ns; }

static void drop(vr_sim *s, const vr_req *r) {
  s->row.dropped++;
  s->sum.dropped += counted(s, r);
  outcome(s, r, VR_SIM_DROPPED, -1);
}

/* ---- batching ---- */

static int enqueue(vr_sim *s, sim_inst *in, const vr_req *r) {
  if (in->qlen == in->qcap) {
    uint32_t cap = in->qcap * 2;
    vr_req *q = vr_malloc(cap * sizeof *q);
    if (!q) return VR_ENOMEM;
    for (uint32_t i = 0; i < in->qlen; i++)
      q[i] = in->q[(in->qhead + i) & (in->qcap - 1)];
    vr_free(in->q);
    in->q = q;
    in->qcap = cap;
    in->qhead = 0;
  }
  in->q[(in->qhead + in->qlen) & (in->qcap - 1)] = *r;
  in->qlen++;
  in->arrivals++;
  sim_serving_fix(s, in);
  return 0;
}

static double worker_slowdown(vr_sim *s, const sim_worker *w, int64_t now) {
  double f = 1, t = (double)now / 1e9;
  for (size_t i = 0; i < s->cfg->ninterf; i++) {
    const vr_sim_interf *x = &s->cfg->interf[i];
    if (x->worker == w->index && t >= x->at_s && t < x->until_s) f *= x->factor;
  }
  return f;
}

static vr_qitem ring_at(void *q, size_t i) {
  const sim_inst *in = q;
  return (vr_qitem){1, in->q[(in->qhead + i) & (in->qcap - 1)].deadline_ns};
}

/* Starts a batch if the instance is ready, idle and has work: the batch
 * rule of policy/batch.h (the live runtime's with "batching": "runtime",
 * the greedy INFaaS rule otherwise) says which requests at the head are
 * dropped (they would miss their deadline) and how many form the batch;
 * its service time is drawn from the profile. */
void sim_try_start(vr_sim *s, sim_inst *in) {
  if (in->busy_n || in->loading || !in->qlen) return;
  sim_variant *v = &s->var[in->variant];
  int64_t now = vr_clock_now(&s->clock);
  vr_qview view = {in, in->qlen, ring_at};
  vr_batch_pick pick = vr_batch_form(
      s->cfg->runtime_batching ? VR_BATCH_DEADLINE : VR_BATCH_GREEDY,
      &v->prof.lat, in->max_batch, now, &view);
  /* no reroute in the simulator yet: every request due is dropped */
  for (size_t i = 0; i < pick.drop; i++) {
    drop(s, &in->q[in->qhead]);
    in->qhead = (in->qhead + 1) & (in->qcap - 1);
    in->qlen--;
  }
  int b = pick.rows;
  sim_serving_fix(s, in);
  if (b == 0) {
    sim_maybe_dead(s, in);
    return;
  }
  double q = s->cfg->noise ? vr_rng_unif(&s->rng) : 0.5;
  double ms = vr_profile_latency_ms(&v->prof, b, q);
  if (s->cfg->ninterf) ms *= worker_slowdown(s, in->w, now);
  in->busy_n = b;
  in->batches++;
  in->items += b;
  int slot = in->nlat < SIM_LAT_SAMPLES
                 ? in->nlat++
                 : (int)(vr_rng_next(&s->rng) % SIM_LAT_SAMPLES);
  in->lat[slot] = (float)ms;
  in->ratio[slot] = (float)(ms / vr_profile_latency_ms(&v->prof, b, 0.5));
  /* Per-request server work outside the engine run (not in the profile, so
   * not in the interference ratio above). */
  ms += b * s->cfg->request_overhead_ms;
  if (sim_push(s, EV_DONE, now + (int64_t)(ms * 1e6), 0, in))
    s->oom = 1; /* the run stops: the batch would never end */
}

static void on_done(vr_sim *s, sim_inst *in) {
  sim_variant *v = &s->var[in->variant];
  int64_t now = vr_clock_now(&s->clock);
  for (int i = 0; i < in->busy_n; i++) {
    const vr_req *r = &in->q[in->qhead];
    int64_t lat = now - r->t_ns;
    int late = now > r->deadline_ns;
    vr_hist_record(s->hist_period, (uint64_t)lat);
    s->row.late += late;
    if (counted(s, r)) {
      vr_hist_record(s->hist_all, (uint64_t)lat);
      s->sum.served++;
      s->sum.late += late;
      s->acc_all += v->prof.accuracy;
    }
    outcome(s, r, VR_SIM_SERVED, in->variant);
    in->qhead = (in->qhead + 1) & (in->qcap - 1);
  }
  in->qlen -= in->busy_n;
  sim_serving_fix(s, in);
  s->row.served += in->busy_n;
  s->acc_period += v->prof.accuracy * in->busy_n;
  in->served += in->busy_n;
  v->served += in->busy_n;
  in->busy_n = 0;
  sim_try_start(s, in);
  sim_maybe_dead(s, in);
}

static void on_loaded(vr_sim *s, sim_inst *in) {
  sim_variant *v = &s->var[in->variant];
  in->loading = 0;
  if (in->state == VR_IS_DRAINING) {
    /* unloaded while loading: its queue (if any) is served, then it dies */
    sim_try_start(s, in);
    sim_maybe_dead(s, in);
    return;
  }
  v->nloading--;
  if (v->loading_one == in) v->loading_one = NULL;
  in->state = VR_IS_ACTIVE;
  for (size_t i = 0; in->replaces && i < s->insts.len; i++) {
    sim_inst *old = VR_VEC_AT(&s->insts, sim_inst *, i);
    if (old->id == in->replaces && !old->dead) sim_inst_drain(s, old);
  }
  if (serving_add(v, in)) s->oom = 1;
  sim_try_start(s, in);
}

/* ---- routing ---- */

/* Least-loaded serving instance (the heap's top); interfered ones only
 * when all are. */
static sim_inst *least_loaded(const sim_variant *v) {
  return v->serving.len ? VR_VEC_AT(&v->serving, sim_inst *, 0) : NULL;
}

static void reject(vr_sim *s, const vr_req *r) {
  s->row.dropped++;
  if (counted(s, r)) s->sum.dropped++, s->sum.rejected++;
  outcome(s, r, VR_SIM_REJECTED, -1);
}

/* The strictest SLO and accuracy floor among the queries a variant takes:
 * its batch limit keeps that SLO, and an up/downgrade keeps that accuracy
 * (the live side notes them where it routes a query, control_route.c
 * count_routed). */
static void note_query(sim_variant *v, double slo, double min_acc) {
  if (slo < v->min_slo) v->min_slo = slo;
  if (min_acc > v->max_acc) v->max_acc = min_acc;
}

/* Demand for the variant selection wanted, whether served or not: the
 * autoscaler sizes it from this. */
static void count_demand(vr_sim *s, int wanted, double slo, double min_acc) {
  sim_variant *w = &s->var[wanted];
  w->arrivals++;
  note_query(w, slo, min_acc);
}

/* Step 3c of the route rule (policy/route.h): start loading `v` now while
 * the query stays where it was sent; only where the load can start at
 * once (a worker that is up) and none of v serves or loads. */
static int prefetch(vr_sim *s, int v) {
  sim_variant *sv = &s->var[v];
  if (sv->serving.len || sv->loading_one) return 0;
  sim_worker *wk = sim_place(s, &sv->prof);
  if (!wk || wk->state != VR_WS_UP) return 0;
  return sim_inst_new(s, v, wk, 0) ? 0 : VR_ENOMEM;
}

/* Warm start, the same for every policy: before traffic (t = 0), each
 * workload's first request counts as one query of demand for the variant
 * it would go to (INFaaS: the one selection picks; a baseline: its fixed
 * one), so the t = 0 policy tick provisions one instance per application,
 * warm — what the baselines' fixed lists give them (SM+ starts with one
 * instance of each). Only workloads whose first request comes in the first
 * control period; not counted as requests. */
void sim_prime(vr_sim *s) {
  for (size_t i = 0; i < s->cfg->nstreams; i++) {
    const vr_req *r = &s->pending[i];
    sim_stream *st = &s->st[i];
    /* no request, or a workload that starts later: nothing to provision */
    if (!(r->deadline_ns > r->t_ns) ||
        r->t_ns >= (int64_t)(s->cfg->tick_s * 1e9))
      continue;
    double slo = (double)(r->deadline_ns - r->t_ns) / 1e6;
    int vi = st->fixed;
    if (s->cfg->policy.kind == VR_POL_INFAAS) {
      vr_query_req q = {st->group, slo, r->min_acc};
      vr_selection sel;
      vi = st->group >= 0 && !vr_select(s->drv.ix, &q, &sel) &&
                   sel.outcome != VR_SEL_INFEASIBLE
               ? sel.variant
               : -1;
    }
    if (vi >= 0)
      count_demand(s, vi, slo, vr_route_load_floor(st->wl->target_kind, r->min_acc));
  }
}

/* What the route rule asks about room (policy/route.h). */
static int env_available(void *self, int v) {
  vr_sim *s = self;
  return least_loaded(&s->var[v]) || s->var[v].loading_one;
}
static int env_fits(void *self, int v) {
  vr_sim *s = self;
  return sim_place(s, &s->var[v].prof) != NULL;
}

static int env_backlog(void *self, int v, long *rows) {
  vr_sim *s = self;
  const sim_inst *in = least_loaded(&s->var[v]);
  if (!in) return 0;
  *rows = (long)in->qlen;
  return 1;
}

/* Sends one request to an instance: INFaaS routing (policy/route.h; the
 * selection memoised per stream: a pure function of the index and the
 * request's requirements), or the baseline's fixed variant; then the
 * least-loaded instance. */
static int route(vr_sim *s, sim_stream *st, const vr_req *r) {
  int vi = st->fixed, wanted = vi, outcome = VR_ROUTE_SERVE;
  int infaas = s->cfg->policy.kind == VR_POL_INFAAS;
  double slo = (double)(r->deadline_ns - r->t_ns) / 1e6;
  s->row.demand++;
  s->sum.demand += counted(s, r);
  vr_route_env env = {s->drv.ix, &s->drv.snap, st->wl->target_kind,
                      st->wl->target, env_available, env_fits, NULL,
                      env_backlog, s};
  if (infaas) {
    if (st->group < 0) return reject(s, r), 0;
    vr_query_req q = {st->group, slo, r->min_acc};
    if (st->memo_gen != s->drv.ix_gen || st->memo_slo != slo ||
        st->memo_acc != r->min_acc) {
      if (vr_select(s->drv.ix, &q, &st->memo)) return reject(s, r), 0;
      st->memo_gen = s->drv.ix_gen, st->memo_slo = slo, st->memo_acc = r->min_acc;
    }
    vr_route rt;
    vr_route_decide_sel(&env, &q, &st->memo, &rt);
    if (rt.outcome == VR_ROUTE_INFEASIBLE) return reject(s, r), 0;
    vi = rt.variant, wanted = rt.wanted, outcome = rt.outcome;
    if (rt.prefetch >= 0 && prefetch(s, rt.prefetch)) return VR_ENOMEM;
  }
  if (vi < 0) return reject(s, r), 0;
  double floor = vr_route_load_floor(st->wl->target_kind, r->min_acc);
  count_demand(s, wanted, slo, floor);
  sim_variant *v = &s->var[vi];
  note_query(v, slo, floor); /* a spill target serves it */
  sim_inst *in = least_loaded(v);
  if (!in) in = v->loading_one;
  if (!in && infaas) { /* load on the query path, as INFaaS does */
    if (outcome == VR_ROUTE_SERVE) outcome = vr_route_load(&env, vi);
    sim_worker *wk = outcome == VR_ROUTE_LOAD ? sim_place(s, &v->prof) : NULL;
    if (wk && !(in = sim_inst_new(s, vi, wk, 0))) return VR_ENOMEM;
  }
  if (!in) return reject(s, r), 0;
  /* an instance still loading (perhaps on a worker still starting) that
   * cannot serve in time: drop now rather than after the wait */
  if (in->loading && vr_drop_due(in->ready_ns, r->deadline_ns, &v->prof.lat, 1)) {
    drop(s, r);
    return 0;
  }
  if (in->qlen >= (uint32_t)s->cfg->max_queue) {
    drop(s, r);
    return 0;
  }
  if (enqueue(s, in, r)) return VR_ENOMEM;
  sim_try_start(s, in);
  return 0;
}

static int next_arrival(vr_sim *s, int i) {
  vr_req r;
  int rc = vr_wl_next(s->st[i].wl, s->cfg->duration_s, &r, s->err);
  if (rc <= 0) return rc;
  r.stream = i;
  vr_event e = {r.t_ns, 0, EV_ARRIVAL, i, NULL, 0};
  /* one request per stream is in flight in the heap; it waits here */
  s->pending[i] = r;
  return vr_heap_push(&s->heap, e);
}

/* ---- the run ---- */

static int init(vr_sim *s, vr_sim_cfg *cfg, const vr_sim_out *out,
                vr_errbuf *err) {
  memset(s, 0, sizeof *s);
  s->cfg = cfg;
  s->out = out;
  s->err = err;
  s->next_id = 1;
  s->warm_ns = (int64_t)(cfg->warmup_s * 1e9);
  vr_vclock_init(&s->clock, 0);
  vr_heap_init(&s->heap);
  vr_rng_seed(&s->rng, cfg->seed);
  vr_vec_init(&s->workers, sizeof(sim_worker *));
  vr_vec_init(&s->insts, sizeof(sim_inst *));
  s->nvar = cfg->nprofiles;
  s->var = VR_NEWN(sim_variant, s->nvar ? s->nvar : 1);
  s->st = VR_NEWN(sim_stream, cfg->nstreams ? cfg->nstreams : 1);
  s->pending = VR_NEWN(vr_req, cfg->nstreams ? cfg->nstreams : 1);
  s->hist_period = vr_malloc(sizeof(vr_hist));
  s->hist_all = vr_malloc(sizeof(vr_hist));
  if (!s->var || !s->st || !s->pending || !s->hist_period || !s->hist_all)
    return VR_ENOMEM;
  vr_hist_init(s->hist_period);
  vr_hist_init(s->hist_all);
  for (size_t i = 0; i < s->nvar; i++) {
    sim_variant *v = &s->var[i];
    v->prof = cfg->profiles[i];
    vr_vec_init(&v->serving, sizeof(sim_inst *));
    v->min_slo = INFINITY;
  }
  for (size_t t = 0; t < cfg->nwtypes; t++)
    for (int k = 0; k < cfg->wtypes[t].initial; k++)
      if (!sim_worker_new(s, (int)t, 0)) return VR_ENOMEM;
  return sim_ctl_init(s);
}

static void fini(vr_sim *s) {
  sim_ctl_free(s);
  for (size_t i = 0; i < s->insts.len; i++) {
    sim_inst *in = VR_VEC_AT(&s->insts, sim_inst *, i);
    vr_free(in->q);
    vr_free(in);
  }
  for (size_t i = 0; i < s->workers.len; i++)
    vr_free(VR_VEC_AT(&s->workers, sim_worker *, i));
  vr_vec_free(&s->insts);
  vr_vec_free(&s->workers);
  for (size_t i = 0; s->var && i < s->nvar; i++) vr_vec_free(&s->var[i].serving);
  for (size_t i = 0; s->cfg && i < s->cfg->nstreams; i++)
    if (s->cfg->streams[i].f) {
      fclose(s->cfg->streams[i].f);
      s->cfg->streams[i].f = NULL;
    }
  vr_free(s->var);
  vr_free(s->st);
  vr_free(s->pending);
  vr_free(s->hist_period);
  vr_free(s->hist_all);
  vr_heap_free(&s->heap);
}

static int dispatch(vr_sim *s, const vr_event *e) {
  switch (e->kind) {
  case EV_ARRIVAL: {
    int rc = route(s, &s->st[e->a], &s->pending[e->a]);
    return rc ? rc : next_arrival(s, e->a);
  }
  case EV_DONE: on_done(s, e->p); return 0;
  case EV_LOADED: on_loaded(s, e->p); return 0;
  case EV_WORKER_UP: {
    sim_worker *w = e->p;
    if (w->state == VR_WS_STARTING) w->state = VR_WS_UP;
    /* instances placed while it started begin loading now (ready_ns was
     * computed from the worker's ready time) */
    return 0;
  }
  case EV_TICK: {
    int rc = sim_tick(s);
    int64_t next = e->t_ns + (int64_t)(s->cfg->tick_s * 1e9);
    if (!rc && next <= (int64_t)(s->cfg->duration_s * 1e9))
      rc = sim_push(s, EV_TICK, next, 0, NULL);
    return rc;
  }
  }
  return VR_EINTERNAL;
}

int vr_sim_run(vr_sim_cfg *cfg, const vr_sim_out *out, vr_sim_summary *sum,
               vr_errbuf *err) {
  vr_sim s;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = init(&s, cfg, out, err);
  /* the t = 0 tick first: at equal times the heap keeps push order, and
   * the cluster is provisioned (warm start) before the first request */
  if (!rc) rc = sim_push(&s, EV_TICK, 0, 0, NULL);
  for (size_t i = 0; !rc && i < cfg->nstreams; i++) {
    if ((rc = vr_wl_open(&cfg->streams[i], cfg->seed * 7919 + i + 1, err)))
      break;
    rc = next_arrival(&s, (int)i);
    if (rc > 0) rc = 0;
  }
  int64_t end = (int64_t)(cfg->duration_s * 1e9);
  vr_event e;
  while (!rc && vr_heap_pop(&s.heap, &e)) {
    if (e.t_ns > end) break;
    vr_vclock_set(&s.clock, e.t_ns);
    s.sum.events++;
    rc = dispatch(&s, &e);
    if (!rc && s.oom) rc = VR_ENOMEM;
  }
  if (!rc) {
    vr_vclock_set(&s.clock, end);
    sim_finish(&s);
  }
  if (rc == VR_ENOMEM && err && !err->msg[0])
    vr_errf(err, rc, "simulation: out of memory");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (!rc) {
    *sum = s.sum;
    sum->wall_s = (double)(t1.tv_sec - t0.tv_sec) +
                  (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    sum->sim_rps = sum->wall_s > 0 ? (double)sum->demand / sum->wall_s : 0;
  }
  fini(&s);
  return rc;
}
