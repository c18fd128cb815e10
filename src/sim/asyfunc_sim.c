/* AsyFunc simulator (see asyfunc_sim.h): an event loop over arrivals,
 * instance completions, loads and scaling periods. */
#include "sim/asyfunc_sim.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "sim/rng.h"

const char *vr_af_policy_name(vr_af_policy p) {
  return p == VR_AFP_ASYFUNC ? "asyfunc" : p == VR_AFP_MINUS ? "asyfunc-" : "batch";
}

int vr_af_policy_parse(const char *s, vr_af_policy *p) {
  if (!s) return VR_EINVAL;
  if (!strcmp(s, "asyfunc")) *p = VR_AFP_ASYFUNC;
  else if (!strcmp(s, "asyfunc-") || !strcmp(s, "asyfunc-minus")) *p = VR_AFP_MINUS;
  else if (!strcmp(s, "batch")) *p = VR_AFP_BATCH;
  else return VR_EINVAL;
  return 0;
}

/* ---- workload ------------------------------------------------------------ */

void vr_af_workload_init(vr_af_workload *w, double base_qps, double duration_s, uint64_t seed) {
  *w = (vr_af_workload){base_qps, duration_s, 0.15, 600, 90, 5, 20, 1.5, 2.5, seed};
}

int vr_af_arrivals(const vr_af_workload *w, double **out, int64_t *n) {
  *out = NULL;
  *n = 0;
  /* written so that a NaN anywhere fails */
  if (!(w->base_qps > 0) || !(w->duration_s > 0) || !(w->mul_min >= 1) ||
      !(w->mul_max >= w->mul_min) || !isfinite(w->mul_max) || !(w->spike_min_s >= 0) ||
      !(w->spike_max_s >= w->spike_min_s) || !isfinite(w->spike_max_s) ||
      !(w->spike_every_s > 0) || !(w->drift_period_s > 0) || !(w->drift >= 0) || !(w->drift < 1) ||
      !isfinite(w->base_qps) || !isfinite(w->duration_s))
    return VR_EINVAL;
  vr_rng r;
  vr_rng_seed(&r, w->seed);
  /* spikes first, so the arrival stream does not shift them */
  enum { MAXS = 4096 };
  double s0[MAXS], s1[MAXS], mul[MAXS];
  int ns = 0;
  for (double t = vr_rng_exp(&r, 1.0 / w->spike_every_s); t < w->duration_s && ns < MAXS;
       t += vr_rng_exp(&r, 1.0 / w->spike_every_s)) {
    s0[ns] = t;
    s1[ns] = t + w->spike_min_s + vr_rng_unif(&r) * (w->spike_max_s - w->spike_min_s);
    mul[ns++] = w->mul_min + vr_rng_unif(&r) * (w->mul_max - w->mul_min);
  }
  double peak = w->base_qps * (1 + w->drift) * w->mul_max;
  int64_t cap = (int64_t)(peak * w->duration_s * 1.2) + 1024, cnt = 0;
  double *a = vr_malloc((size_t)cap * sizeof(double));
  if (!a) return VR_ENOMEM;
  int k = 0;
  for (double t = vr_rng_exp(&r, peak); t < w->duration_s; t += vr_rng_exp(&r, peak)) {
    while (k < ns && s1[k] <= t) k++;
    double m = 1;
    for (int j = k; j < ns && s0[j] <= t; j++)
      if (t < s1[j] && mul[j] > m) m = mul[j];
    double rate = w->base_qps * (1 + w->drift * sin(2 * M_PI * t / w->drift_period_s)) * m;
    if (vr_rng_unif(&r) * peak >= rate) continue;
    if (cnt == cap) break;
    a[cnt++] = t * 1000.0;
  }
  *out = a;
  *n = cnt;
  return 0;
}

/* ---- simulation state ---------------------------------------------------- */

void vr_af_sim_cfg_init(vr_af_sim_cfg *c, vr_af_policy p, double slo_ms) {
  memset(c, 0, sizeof *c);
  c->policy = p;
  c->period_s = 60;
  c->release_idle_ms = 1000;
  c->batch_lookback = 10;
  c->gamma_per_body = 1;
  c->nodes = 30;
  c->node_cores = 36;
  vr_af_scale_cfg_init(&c->scale, slo_ms);
}

enum { BODY = 0, SHADOW = 1 };

typedef struct inst {
  int kind, cores, node, dying, dead;
  int64_t mem;
  double born, ready_at, busy_until, last_used;
  int partner;     /* body <-> shadow index, -1 = none */
  vr_af_pair pair; /* body: config with its shadow */
  int cap;         /* body alone: batch cap */
} inst;

typedef struct sim {
  const vr_af_model *m;
  const vr_af_sim_cfg *cfg;
  const double *arr;
  int64_t n, na, qh; /* arrivals consumed; queue = [qh, na) */
  inst *in;
  int nin, capin, ndead;
  int *node_free;
  double last_crowded; /* last time the queue held >= gamma */
  double t, last_acc, cores_now, gb_now, per_cores, per_gb, period_start;
  int64_t batches, paired_batches;
  vr_af_sim_result *res;
  int batch_cores, batch_b; /* BATCH's configuration */
  double *waits;             /* the queue's waits for the scheduler */
  int64_t capw;
  int oom;                   /* the run stopped for want of memory */
} sim;

/* Accumulates cores x time and GB x time up to t. */
static void account(sim *s, double t) {
  double dt = (t - s->last_acc) / 1000.0;
  if (dt > 0) {
    s->res->cpu_core_s += s->cores_now * dt;
    s->res->mem_gb_s += s->gb_now * dt;
    s->per_cores += s->cores_now * dt;
    s->per_gb += s->gb_now * dt;
  }
  s->last_acc = t;
}

static int add_inst(sim *s, int kind, int cores, int node, int64_t mem, double ready) {
  if (s->nin == s->capin) {
    int cap = s->capin ? s->capin * 2 : 64;
    inst *ni = vr_realloc(s->in, (size_t)cap * sizeof(inst));
    if (!ni) return -1;
    s->in = ni;
    s->capin = cap;
  }
  account(s, s->t);
  inst *x = &s->in[s->nin];
  memset(x, 0, sizeof *x);
  *x = (inst){kind, cores, node, 0, 0, mem, s->t, ready, 0, ready, -1, {0}, 1};
  x->pair.cb = cores;
  /* a body's cap: the largest batch that meets the SLO on its own */
  for (int b = s->m->bmax; b >= 1 && x->cap <= 1; b--)
    if (vr_af_lat(s->m, VR_AF_ALL(s->m), cores, b) <= s->cfg->scale.slo_ms) x->cap = b;
  if (s->cfg->policy == VR_AFP_BATCH) x->cap = s->batch_b;
  s->node_free[node] -= cores;
  s->cores_now += cores;
  s->gb_now += (double)mem / 1e9;
  return s->nin++;
}

static void kill_inst(sim *s, int i) {
  inst *x = &s->in[i];
  if (x->dead) return;
  account(s, s->t);
  x->dead = 1;
  s->ndead++;
  s->node_free[x->node] += x->cores;
  s->cores_now -= x->cores;
  s->gb_now -= (double)x->mem / 1e9;
  if (x->kind == SHADOW) {
    s->res->shadows_released++;
    if (x->partner >= 0) s->in[x->partner].partner = -1;
  } else if (x->partner >= 0) {
    /* a body going away releases its shadow (it is idle: the pair is) */
    int p = x->partner;
    x->partner = -1;
    s->in[p].partner = -1;
    kill_inst(s, p);
  }
}

static int idle(const sim *s, const inst *x) {
  return !x->dead && x->ready_at <= s->t && x->busy_until <= s->t;
}

static int count_live(const sim *s, int kind) {
  int c = 0;
  for (int i = 0; i < s->nin; i++) c += !s->in[i].dead && !s->in[i].dying && s->in[i].kind == kind;
  return c;
}

static int roomiest_node(const sim *s) {
  int best = 0;
  for (int k = 1; k < s->cfg->nodes; k++)
    if (s->node_free[k] > s->node_free[best]) best = k;
  return best;
}

static int new_body(sim *s, int cores, double ready) {
  int node = roomiest_node(s);
  if (s->node_free[node] < cores) return -1;
  int i = add_inst(s, BODY, cores, node, s->m->mem_bytes, ready);
  if (i >= 0) s->res->bodies_created++;
  return i;
}

/* ---- scaling ------------------------------------------------------------- */

static double rate_last_period(const sim *s, double from, double to, double *peak1s) {
  /* arrivals in [from, to): binary search over the sorted times */
  int64_t lo = 0, hi = s->n;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    if (s->arr[mid] < from) lo = mid + 1; else hi = mid;
  }
  int64_t i = lo, cnt = 0;
  double pk = 0, win = from;
  int64_t wcnt = 0;
  for (; i < s->n && s->arr[i] < to; i++, cnt++) {
    while (s->arr[i] >= win + 1000) {
      if (wcnt > pk) pk = (double)wcnt;
      wcnt = 0;
      win += 1000;
    }
    wcnt++;
  }
  if (wcnt > pk) pk = (double)wcnt;
  *peak1s = pk;
  return cnt / ((to - from) / 1000.0);
}

static void scale_mls(sim *s, double r, double ready) {
  int cores[512], idx[512], nb = 0, free_total = 0;
  double rmax[512];
  for (int i = 0; i < s->nin && nb < 512; i++) {
    const inst *x = &s->in[i];
    if (x->dead || x->dying || x->kind != BODY) continue;
    idx[nb] = i;
    /* a body with its shadow loaded counts as the pair (Eq. 1) */
    int paired = s->cfg->rmax_pairs && x->partner >= 0 && s->in[x->partner].ready_at <= s->t;
    rmax[nb] = paired ? vr_af_pair_rmax(s->m, &x->pair, s->cfg->scale.slo_ms) : 0;
    cores[nb++] = x->cores;
  }
  for (int k = 0; k < s->cfg->nodes; k++) free_total += s->node_free[k];
  vr_af_mls_out o;
  vr_af_mls_paired(s->m, &s->cfg->scale, r, cores, rmax, nb, free_total, &o);
  for (int k = 0; k < o.ncreate; k++) new_body(s, o.create_cores[k], ready);
  for (int k = 0; k < o.ndestroy; k++) s->in[idx[o.destroy[k]]].dying = 1;
}

static void scale_batch(sim *s, double peak, double ready) {
  double per = vr_af_batch_cfg_obj(s->m, s->cfg->scale.slo_ms, s->cfg->batch_obj, &s->batch_cores,
                                   &s->batch_b);
  if (per <= 0) return; /* nothing meets the SLO: requests are dropped */
  int want = (int)ceil(peak / per), have = count_live(s, BODY);
  if (want < 1) want = 1;
  for (; have < want; have++)
    if (new_body(s, s->batch_cores, ready) < 0) break;
  for (int i = s->nin - 1; i >= 0 && have > want; i--)
    if (!s->in[i].dead && !s->in[i].dying && s->in[i].kind == BODY) s->in[i].dying = 1, have--;
}

static void period_tick(sim *s, double ready) {
  double peak, r = rate_last_period(s, s->t - s->cfg->period_s * 1000, s->t, &peak);
  if (s->cfg->policy == VR_AFP_BATCH) {
    /* BATCH provisions ahead for the bursts it has seen lately */
    double from = s->t - s->cfg->period_s * 1000 * s->cfg->batch_lookback;
    rate_last_period(s, from > 0 ? from : 0, s->t, &peak);
    scale_batch(s, peak, ready);
  }
  else scale_mls(s, r, ready);
}

/* LLS on an arrival (AsyFunc only). */
static int crowd_threshold(const sim *s) {
  int g = s->cfg->scale.gamma;
  return s->cfg->gamma_per_body ? g * (count_live(s, BODY) > 0 ? count_live(s, BODY) : 1) : g;
}

static void scale_lls(sim *s) {
  int qlen = (int)(s->na - s->qh);
  if (qlen < crowd_threshold(s) || s->cfg->scale.kappa <= 0) return;
  vr_af_scale_cfg sc = s->cfg->scale;
  sc.gamma = crowd_threshold(s);
  vr_af_body bd[512];
  int idx[512], nb = 0;
  for (int i = 0; i < s->nin && nb < 512; i++) {
    inst *x = &s->in[i];
    if (x->dead || x->dying || x->kind != BODY || x->ready_at > s->t) continue;
    idx[nb] = i;
    bd[nb++] = (vr_af_body){x->cores, x->busy_until, s->node_free[x->node], x->partner >= 0};
  }
  vr_af_lls_out o;
  vr_af_lls(s->m, &sc, qlen, bd, nb, &o);
  for (int k = 0; k < o.n; k++) {
    inst *b = &s->in[idx[o.body[k]]];
    if (s->node_free[b->node] < o.pair[k].cs) continue;
    double ready = s->t + vr_af_mask_load_ms(s->m, o.pair[k].mask);
    int si = add_inst(s, SHADOW, o.pair[k].cs, s->in[idx[o.body[k]]].node,
                      vr_af_mask_mem(s->m, o.pair[k].mask), ready);
    if (si < 0) return;
    b = &s->in[idx[o.body[k]]]; /* add_inst may move the array */
    b->partner = si;
    b->pair = o.pair[k];
    s->in[si].partner = idx[o.body[k]];
    s->res->shadows_created++;
  }
}

/* Releases dying bodies that went idle and shadows idle for a while. */
static void reap(sim *s) {
  if (s->na - s->qh >= crowd_threshold(s)) s->last_crowded = s->t;
  for (int i = 0; i < s->nin; i++) {
    inst *x = &s->in[i];
    if (x->dead || x->busy_until > s->t) continue;
    if (x->kind == BODY && x->dying) {
      if (x->partner < 0 || s->in[x->partner].busy_until <= s->t) kill_inst(s, i);
    } else if (x->kind == SHADOW && x->ready_at <= s->t &&
               s->t - s->last_crowded >= s->cfg->release_idle_ms) {
      kill_inst(s, i);
    }
  }
}

/* ---- scheduling ---------------------------------------------------------- */

static void finish(sim *s, int64_t from, int cnt, double done) {
  for (int64_t k = from; k < from + cnt; k++)
    if (done - s->arr[k] > s->cfg->scale.slo_ms + 1e-9) s->res->violated++;
}

static int schedule_one(sim *s) {
  int qlen = (int)(s->na - s->qh);
  if (qlen <= 0) return 0;
  vr_af_cand c[512];
  int idx[512], n = 0;
  for (int i = 0; i < s->nin && n < 512; i++) {
    inst *x = &s->in[i];
    if (x->kind != BODY || x->dying || !idle(s, x)) continue;
    vr_af_pair p = {x->cores, 0, x->cap, x->cap, 0, 0};
    if (x->partner >= 0 && idle(s, &s->in[x->partner])) {
      /* LLS sized b so that load + run met the SLO; once loaded, the pair
       * takes up to B_max rows (the scheduler checks each batch's SLO) */
      p = x->pair;
      p.b = s->m->bmax;
    }
    idx[n] = i;
    c[n++].cfg = p;
  }
  if (!n) return 0;
  /* the default looks at the oldest 64 (more than any batch); the
   * paper's rule clears the whole queue, so it sees it all */
  int nw = s->cfg->paper_scheduler || qlen < 64 ? qlen : 64;
  if (nw > s->capw) {
    int64_t cap = s->capw ? s->capw : 64;
    while (cap < nw) cap *= 2;
    double *w = vr_realloc(s->waits, (size_t)cap * sizeof(double));
    if (!w) {
      s->oom = 1;
      return 0;
    }
    s->waits = w;
    s->capw = cap;
  }
  for (int k = 0; k < nw; k++) s->waits[k] = s->t - s->arr[s->qh + k];
  int b, drop;
  int pick = s->cfg->paper_scheduler
                 ? vr_af_schedule_paper(s->m, s->cfg->scale.slo_ms, c, n, s->waits, nw, &b, &drop)
                 : vr_af_schedule(s->m, s->cfg->scale.slo_ms, c, n, s->waits, nw, &b, &drop);
  if (pick < 0) return 0;
  s->res->dropped += drop;
  s->res->violated += drop;
  s->qh += drop;
  if (b <= 0) return drop > 0;
  inst *x = &s->in[idx[pick]];
  vr_af_pair p = c[pick].cfg;
  p.b = b;
  if (p.cs > 0 && p.mask) vr_af_split(s->m, &p);
  double tl = vr_af_pair_lat(s->m, &p), done = s->t + tl;
  x->busy_until = done;
  x->last_used = s->t;
  s->batches++;
  s->res->busy_core_s += x->cores * tl / 1000.0;
  if (p.cs > 0 && p.mask && p.bs > 0) {
    inst *sh = &s->in[x->partner];
    sh->busy_until = done;
    sh->last_used = s->t;
    s->paired_batches++;
    s->res->busy_core_s += sh->cores * tl / 1000.0;
  }
  finish(s, s->qh, b, done);
  s->qh += b;
  return 1;
}

/* ---- event loop ---------------------------------------------------------- */

static double next_event(const sim *s, double tick) {
  double t = tick;
  if (s->na < s->n && s->arr[s->na] < t) t = s->arr[s->na];
  for (int i = 0; i < s->nin; i++) {
    const inst *x = &s->in[i];
    if (x->dead) continue;
    if (x->busy_until > s->t && x->busy_until < t) t = x->busy_until;
    if (x->ready_at > s->t && x->ready_at < t) t = x->ready_at;
    double rel = s->last_crowded + s->cfg->release_idle_ms;
    if (x->kind == SHADOW && rel > s->t && rel < t) t = rel;
  }
  return t;
}

/* Drops released instances from the array (partners renumbered), so that
 * a run that creates and releases many shadows stays linear in their
 * number. Only between events: no index into s->in is held then. */
static void compact(sim *s) {
  int *to = vr_malloc((size_t)(s->nin > 0 ? s->nin : 1) * sizeof(int));
  if (!to) return; /* a larger array is slower, not wrong */
  int k = 0;
  for (int i = 0; i < s->nin; i++) to[i] = s->in[i].dead ? -1 : k++;
  for (int i = 0; i < s->nin; i++) {
    if (s->in[i].dead) continue;
    inst x = s->in[i];
    x.partner = x.partner >= 0 ? to[x.partner] : -1;
    s->in[to[i]] = x;
  }
  s->nin = k;
  s->ndead = 0;
  vr_free(to);
}

static void close_period(sim *s) {
  account(s, s->t);
  double len = (s->t - s->period_start) / 1000.0;
  vr_af_sim_result *r = s->res;
  if (len > 0 && r->nperiods < VR_AF_MAX_PERIODS) {
    r->period_cores[r->nperiods] = s->per_cores / len;
    r->period_gb[r->nperiods++] = s->per_gb / len;
  }
  s->per_cores = s->per_gb = 0;
  s->period_start = s->t;
}

static void run(sim *s) {
  double P = s->cfg->period_s * 1000, tick = P;
  /* warm start: every policy sizes for the first period's traffic */
  double peak, r = rate_last_period(s, 0, P, &peak);
  if (s->cfg->policy == VR_AFP_BATCH) scale_batch(s, peak, 0);
  else scale_mls(s, r, 0);
  while (s->na < s->n || s->qh < s->na) {
    if (s->ndead > 64 && 2 * s->ndead > s->nin) compact(s);
    double t = next_event(s, tick);
    if (!isfinite(t)) break;
    if (s->na == s->n && s->n > 0 && t > s->arr[s->n - 1] + 10 * P) {
      /* nothing can serve what is left (no configuration meets the SLO) */
      s->res->dropped += s->na - s->qh;
      s->res->violated += s->na - s->qh;
      s->qh = s->na;
      break;
    }
    s->t = t;
    while (s->na < s->n && s->arr[s->na] <= s->t) {
      s->na++;
      if (s->cfg->policy == VR_AFP_ASYFUNC) scale_lls(s);
    }
    if (s->t >= tick) {
      close_period(s);
      period_tick(s, s->t);
      tick += P;
    }
    reap(s);
    while (schedule_one(s)) {
    }
    if (s->oom) return;
    int live = count_live(s, BODY), sh = count_live(s, SHADOW);
    if (live > s->res->max_bodies) s->res->max_bodies = live;
    if (sh > s->res->max_shadows) s->res->max_shadows = sh;
  }
  /* let the last batches finish, then release everything */
  double end = s->t;
  for (int i = 0; i < s->nin; i++)
    if (!s->in[i].dead && s->in[i].busy_until > end) end = s->in[i].busy_until;
  s->t = end;
  close_period(s);
  for (int i = 0; i < s->nin; i++) kill_inst(s, i);
}

int vr_af_simulate(const vr_af_model *m, const vr_af_sim_cfg *cfg, const double *arr, int64_t n,
                   vr_af_sim_result *res) {
  memset(res, 0, sizeof *res);
  sim s;
  memset(&s, 0, sizeof s);
  s.m = m;
  s.cfg = cfg;
  s.arr = arr;
  s.n = n;
  s.res = res;
  s.node_free = vr_calloc((size_t)(cfg->nodes > 0 ? cfg->nodes : 1), sizeof(int));
  if (!s.node_free || cfg->nodes < 1) {
    vr_free(s.node_free);
    return s.node_free ? VR_EINVAL : VR_ENOMEM;
  }
  for (int k = 0; k < cfg->nodes; k++) s.node_free[k] = cfg->node_cores;
  vr_af_batch_cfg_obj(m, cfg->scale.slo_ms, cfg->batch_obj, &s.batch_cores, &s.batch_b);
  run(&s);
  vr_free(s.waits);
  if (s.oom) {
    vr_free(s.in);
    vr_free(s.node_free);
    return VR_ENOMEM;
  }
  res->requests = n;
  res->violations_pct = n ? 100.0 * (double)res->violated / (double)n : 0;
  res->paired_batches_pct = s.batches ? 100.0 * (double)s.paired_batches / (double)s.batches : 0;
  vr_free(s.in);
  vr_free(s.node_free);
  return 0;
}
