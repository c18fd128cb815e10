#include "policy/inferline.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"

#define MEMO_SLOTS 8192 /* power of two */
#define DEFAULT_MAX_REPLICAS 512

typedef struct memo_ent {
  int used;
  double p99;   /* exact, or INFINITY: known only to be above `above` */
  double above; /* the bound it was estimated with */
  vr_il_stage_cfg st[VR_IL_MAX_STAGES];
} memo_ent;

/* One planner call: problem, memo of estimates, counters. */
typedef struct planner {
  const vr_il_problem *pb;
  memo_ent *memo;
  int memo_n;
  int max_k;
  double raise_p99[VR_IL_MAX_STAGES]; /* each stage's batch doubling at the
                                         last raise_batch (0 before) */
  vr_il_stats stats;
} planner;

double vr_il_stage_ms(const vr_il_problem *pb, const vr_il_config *cfg,
                      int m) {
  const vr_il_stage_cfg *c = &cfg->st[m];
  return vr_profile_latency_ms(&pb->st[m].hw[c->hw], c->batch, 0.5);
}

double vr_il_stage_qps(const vr_il_problem *pb, const vr_il_config *cfg,
                       int m) {
  return vr_profile_peak_qps(&pb->st[m].hw[cfg->st[m].hw], cfg->st[m].batch);
}

double vr_il_cost(const vr_il_problem *pb, const vr_il_config *cfg) {
  double c = 0;
  for (int m = 0; m < pb->nstages; m++)
    c += cfg->st[m].replicas * pb->st[m].hw[cfg->st[m].hw].cost_per_s;
  return c;
}

/* Longest root-to-leaf sum; *argmax = the stage contributing most to it. */
static double service(const vr_il_problem *pb, const vr_il_config *cfg,
                      int *argmax) {
  double path[VR_IL_MAX_STAGES], best = 0;
  int worst_leaf = 0;
  for (int m = 0; m < pb->nstages; m++) {
    int p = pb->st[m].parent;
    path[m] = (p >= 0 ? path[p] : 0) + vr_il_stage_ms(pb, cfg, m);
    if (path[m] > best) {
      best = path[m];
      worst_leaf = m;
    }
  }
  if (argmax) { /* walk the worst path up to its slowest stage */
    double mx = -1;
    for (int m = worst_leaf; m >= 0; m = pb->st[m].parent) {
      double v = vr_il_stage_ms(pb, cfg, m);
      if (v > mx) {
        mx = v;
        *argmax = m;
      }
    }
  }
  return best;
}

double vr_il_service_ms(const vr_il_problem *pb, const vr_il_config *cfg) {
  return service(pb, cfg, NULL);
}

int vr_il_problem_validate(const vr_il_problem *pb, vr_errbuf *err) {
  if (pb->nstages < 1 || pb->nstages > VR_IL_MAX_STAGES)
    return vr_errf(err, VR_EINVAL, "inferline: %d stages (1..%d)",
                   pb->nstages, VR_IL_MAX_STAGES);
  if (!(pb->slo_ms > 0) || !(pb->rate_qps > 0) || !isfinite(pb->slo_ms) ||
      !isfinite(pb->rate_qps) || pb->max_replicas < 0 ||
      !(pb->coarse_factor >= 0) || !isfinite(pb->coarse_factor))
    return vr_errf(err, VR_EINVAL,
                   "inferline: need finite slo_ms > 0 and rate_qps > 0, "
                   "max_replicas >= 0, coarse_factor >= 0");
  if (!pb->estimate)
    return vr_errf(err, VR_EINVAL, "inferline: no estimator");
  for (int m = 0; m < pb->nstages; m++) {
    const vr_il_stage *s = &pb->st[m];
    if ((m == 0) != (s->parent < 0) || s->parent >= m)
      return vr_errf(err, VR_EINVAL,
                     "inferline: stage '%s': stages must be in preorder "
                     "with the root first", s->name);
    if (!(s->scale > 0) || !isfinite(s->scale))
      return vr_errf(err, VR_EINVAL, "inferline: stage '%s': scale factor "
                     "must be positive", s->name);
    if (s->nhw < 1 || !s->hw)
      return vr_errf(err, VR_EINVAL, "inferline: stage '%s' has no "
                     "hardware options", s->name);
    for (int h = 0; h < s->nhw; h++)
      if (!(vr_profile_latency_ms(&s->hw[h], 1, 0.5) > 0) ||
          !isfinite(vr_profile_latency_ms(&s->hw[h], 1, 0.5)) ||
          s->hw[h].max_batch < 1 ||
          !(s->hw[h].cost_per_s >= 0))
        return vr_errf(err, VR_EINVAL, "inferline: stage '%s' option '%s': "
                       "needs a batch-1 latency, max_batch >= 1 and a cost",
                       s->name, s->hw[h].variant);
  }
  return 0;
}

/* ---- estimates, memoised ---- */

static uint64_t cfg_hash(const vr_il_config *c) {
  uint64_t h = 1469598103934665603ULL;
  for (int m = 0; m < c->nstages; m++) {
    const int v[3] = {c->st[m].hw, c->st[m].batch, c->st[m].replicas};
    for (int i = 0; i < 3; i++) {
      h ^= (uint64_t)(uint32_t)v[i];
      h *= 1099511628211ULL;
    }
  }
  return h;
}

/* c->p99_ms: exact when <= above_ms, else possibly INFINITY (see
 * vr_il_estimate_fn). A remembered bound answers only a question it
 * covers; a finite answer is exact and answers every question. */
static int estimate(planner *pl, vr_il_config *c, double above_ms) {
  size_t n = (size_t)c->nstages * sizeof c->st[0];
  size_t i = (size_t)cfg_hash(c) & (MEMO_SLOTS - 1);
  memo_ent *e = NULL;
  for (; pl->memo[i].used; i = (i + 1) & (MEMO_SLOTS - 1))
    if (!memcmp(pl->memo[i].st, c->st, n)) {
      e = &pl->memo[i];
      break;
    }
  if (e && (isfinite(e->p99) || e->above >= above_ms)) {
    pl->stats.memo_hits++;
    c->p99_ms = e->p99;
    return 0;
  }
  double p99 = INFINITY;
  int rc = pl->pb->estimate(pl->pb->ctx, pl->pb, c, above_ms, &p99);
  if (rc) return rc;
  pl->stats.estimates++;
  c->p99_ms = p99;
  if (!e && pl->memo_n < MEMO_SLOTS * 3 / 4) { /* full: stop remembering */
    e = &pl->memo[i];
    e->used = 1;
    memcpy(e->st, c->st, n);
    pl->memo_n++;
  }
  if (e) e->p99 = p99, e->above = above_ms;
  return 0;
}

/* P99 <= the SLO? 1 feasible, 0 not, < 0 estimator error. */
static int feasible_below(planner *pl, vr_il_config *c, double above_ms) {
  int rc = estimate(pl, c, above_ms);
  if (rc) return rc;
  return c->p99_ms <= pl->pb->slo_ms;
}

static int feasible(planner *pl, vr_il_config *c) {
  return feasible_below(pl, c, pl->pb->slo_ms);
}

/* Replicas the mean load needs at utilisation < 1. */
static int min_replicas(const planner *pl, const vr_il_config *c, int m) {
  double mu = vr_il_stage_qps(pl->pb, c, m);
  double need = mu > 0 ? pl->pb->rate_qps * pl->pb->st[m].scale / mu : 1e9;
  /* the cap first: a need past int (a huge rate or fan-out) is no cast */
  if (!(need < pl->max_k)) return pl->max_k;
  return (int)floor(need) + 1;
}

static double utilisation(const planner *pl, const vr_il_config *c, int m) {
  return pl->pb->rate_qps * pl->pb->st[m].scale /
         (c->st[m].replicas * vr_il_stage_qps(pl->pb, c, m));
}

static int lowest_latency_hw(const vr_il_stage *s) {
  int best = 0;
  for (int h = 1; h < s->nhw; h++)
    if (vr_profile_latency_ms(&s->hw[h], 1, 0.5) <
        vr_profile_latency_ms(&s->hw[best], 1, 0.5))
      best = h;
  return best;
}

/* ---- phase 1 ---- */

static int initialise(planner *pl, vr_il_config *c, vr_errbuf *err) {
  const vr_il_problem *pb = pl->pb;
  memset(c, 0, sizeof *c);
  c->nstages = pb->nstages;
  for (int m = 0; m < pb->nstages; m++)
    c->st[m] = (vr_il_stage_cfg){lowest_latency_hw(&pb->st[m]), 1, 1};
  int slow = 0;
  double svc = service(pb, c, &slow);
  if (svc > pb->slo_ms)
    return vr_errf(err, VR_EINFEASIBLE,
                   "SLO %.1f ms is infeasible: the service time at batch 1 on "
                   "the fastest hardware is %.1f ms; bottleneck stage '%s' "
                   "(%.1f ms on '%s')", pb->slo_ms, svc, pb->st[slow].name,
                   vr_il_stage_ms(pb, c, slow),
                   pb->st[slow].hw[c->st[slow].hw].variant);
  for (int m = 0; m < pb->nstages; m++)
    c->st[m].replicas = min_replicas(pl, c, m);
  int tried_limit = 0;
  for (;;) {
    int ok = feasible(pl, c);
    if (ok < 0) return ok;
    if (ok) return 0;
    int b = 0;
    for (int m = 1; m < pb->nstages; m++)
      if (utilisation(pl, c, m) > utilisation(pl, c, b)) b = m;
    /* Little queueing left even at the bottleneck: if the replica limit
     * on every stage misses too, the service times alone do (their tail,
     * not the median the check above takes), and adding replicas one by
     * one up to the limit only took long (seconds) to name a stage that
     * waits for nothing. */
    if (!tried_limit && utilisation(pl, c, b) < 0.3) {
      tried_limit = 1;
      vr_il_config all = *c;
      for (int m = 0; m < pb->nstages; m++) all.st[m].replicas = pl->max_k;
      int okl = feasible(pl, &all);
      if (okl < 0) return okl;
      if (!okl)
        return vr_errf(err, VR_EINFEASIBLE,
                       "SLO %.1f ms is infeasible: estimated P99 %.1f ms even with %d "
                       "replicas of every stage (the service times alone miss it, batch 1 "
                       "on the fastest hardware); bottleneck stage '%s' (%.1f ms on '%s')",
                       pb->slo_ms, all.p99_ms, pl->max_k, pb->st[slow].name,
                       vr_il_stage_ms(pb, c, slow), pb->st[slow].hw[c->st[slow].hw].variant);
    }
    if (c->st[b].replicas >= pl->max_k)
      return vr_errf(err, VR_EINFEASIBLE,
                     "SLO %.1f ms is infeasible: estimated P99 %.1f ms with "
                     "%d replicas of bottleneck stage '%s' (utilisation "
                     "%.2f, the replica limit)", pb->slo_ms, c->p99_ms,
                     c->st[b].replicas, pb->st[b].name, utilisation(pl, c, b));
    c->st[b].replicas++;
  }
}

/* ---- phase 2 ---- */

/* Cheapest feasible settings for stage m on hardware h with the others
 * frozen: fewest feasible replicas at batch 1, then replica removal and
 * batch doubling while feasible. 1 found (in *c), 0 none cheaper than
 * budget, < 0 error. */
static int replan_stage(planner *pl, vr_il_config *c, int m, int h,
                        double budget) {
  const vr_profile *p = &pl->pb->st[m].hw[h];
  c->st[m] = (vr_il_stage_cfg){h, 1, 1};
  c->st[m].replicas = min_replicas(pl, c, m);
  for (;;) {
    if (c->st[m].replicas * p->cost_per_s >= budget) return 0;
    int ok = feasible(pl, c);
    if (ok < 0) return ok;
    if (ok) break;
    if (c->st[m].replicas >= pl->max_k) return 0;
    c->st[m].replicas++;
  }
  for (;;) {
    vr_il_config t = *c;
    int ok = 0;
    if (t.st[m].replicas > 1) {
      t.st[m].replicas--;
      ok = feasible(pl, &t);
    }
    if (!ok && c->st[m].batch * 2 <= p->max_batch) {
      t = *c;
      t.st[m].batch *= 2;
      ok = feasible(pl, &t);
    }
    if (ok < 0) return ok;
    if (!ok) break;
    *c = t;
  }
  return c->st[m].replicas * p->cost_per_s < budget;
}

/* The feasible batch doubling with the lowest estimated P99 (the first
 * stage on a tie); 1 applied, 0 none, < 0 error. Only the winner's P99
 * must be exact: a candidate is needed only below the best so far, so its
 * estimate may stop as soon as its P99 is known to be no better. The
 * stages are tried in the order of their P99 at the previous call (the
 * same stage tends to win again), which changes how soon the others stop,
 * not which one wins. */
static int raise_batch(planner *pl, vr_il_config *cur) {
  const vr_il_problem *pb = pl->pb;
  int order[VR_IL_MAX_STAGES], n = 0, bm = -1;
  for (int m = 0; m < pb->nstages; m++) {
    int j = n++;
    for (; j > 0 && pl->raise_p99[order[j - 1]] > pl->raise_p99[m]; j--)
      order[j] = order[j - 1];
    order[j] = m;
  }
  vr_il_config best = {0};
  for (int i = 0; i < n; i++) {
    int m = order[i];
    const vr_profile *hw = &pb->st[m].hw[cur->st[m].hw];
    pl->raise_p99[m] = INFINITY;
    if (cur->st[m].batch * 2 > hw->max_batch) continue;
    vr_il_config t = *cur;
    t.st[m].batch *= 2;
    /* beats the best on a tie only from an earlier stage */
    double above = pb->slo_ms;
    if (bm >= 0 && best.p99_ms <= above)
      above = m < bm ? best.p99_ms : nextafter(best.p99_ms, -INFINITY);
    int ok = feasible_below(pl, &t, above);
    if (ok < 0) return ok;
    pl->raise_p99[m] = t.p99_ms;
    if (ok && (bm < 0 || t.p99_ms < best.p99_ms ||
               (t.p99_ms == best.p99_ms && m < bm)))
      best = t, bm = m;
  }
  if (bm >= 0) *cur = best;
  return bm >= 0;
}

/* Best feasible single action from *cur; 1 applied, 0 none, < 0 error. */
static int improve(planner *pl, vr_il_config *cur) {
  const vr_il_problem *pb = pl->pb;
  double cost0 = vr_il_cost(pb, cur);
  vr_il_config best = {0};
  double best_cost = cost0;
  int have = 0;
  for (int m = 0; m < pb->nstages; m++) {
    const vr_il_stage *s = &pb->st[m];
    const vr_profile *hw = &s->hw[cur->st[m].hw];
    vr_il_config t = *cur;
    int ok;
    /* remove a replica; a candidate no cheaper than the best found so far
     * could not be chosen, so it is not estimated */
    if (t.st[m].replicas > 1 &&
        cost0 - hw->cost_per_s < best_cost) {
      t.st[m].replicas--;
      if ((ok = feasible(pl, &t)) < 0) return ok;
      double cost = vr_il_cost(pb, &t);
      if (ok && cost < best_cost) best = t, best_cost = cost, have = 1;
    }
    for (int h = 0; h < s->nhw; h++) { /* downgrade hardware */
      if (!(s->hw[h].cost_per_s < hw->cost_per_s)) continue;
      t = *cur;
      double others = cost0 - cur->st[m].replicas * hw->cost_per_s;
      ok = replan_stage(pl, &t, m, h, best_cost - others);
      if (ok < 0) return ok;
      double cost = vr_il_cost(pb, &t);
      if (ok && cost < best_cost) best = t, best_cost = cost, have = 1;
    }
  }
  if (have) {
    *cur = best;
    return 1;
  }
  return raise_batch(pl, cur);
}

int vr_il_plan(const vr_il_problem *pb, vr_il_config *out, vr_il_stats *stats,
               vr_errbuf *err) {
  int rc = vr_il_problem_validate(pb, err);
  if (rc) return rc;
  planner pl = {.pb = pb,
                .max_k = pb->max_replicas ? pb->max_replicas
                                          : DEFAULT_MAX_REPLICAS};
  pl.memo = VR_NEWN(memo_ent, MEMO_SLOTS);
  if (!pl.memo) return VR_ENOMEM;
  vr_il_config cur, kept;
  rc = initialise(&pl, &cur, err);
  kept = cur;
  while (!rc) {
    int r = improve(&pl, &cur);
    if (r < 0) rc = r;
    if (r <= 0) break;
    pl.stats.iterations++;
    /* Batch doublings that never led to a cheaper configuration only
     * add latency (and fragility on traces other than the sample): keep
     * the configuration of the last cost reduction. */
    if (vr_il_cost(pb, &cur) < vr_il_cost(pb, &kept) - 1e-12 ||
        (vr_il_cost(pb, &cur) <= vr_il_cost(pb, &kept) + 1e-12 &&
         cur.p99_ms < kept.p99_ms))
      kept = cur;
  }
  cur = kept;
  if (rc < 0 && rc != VR_EINFEASIBLE && err && !err->msg[0])
    vr_errf(err, rc, "inferline planner: estimator failed: %s",
            vr_strerror(rc));
  if (!rc) {
    /* the memo may hold this configuration's estimate: re-read it so
     * p99_ms is the one that admitted it */
    rc = estimate(&pl, &cur, pb->slo_ms);
    cur.cost_per_s = vr_il_cost(pb, &cur);
    *out = cur;
  }
  if (stats) *stats = pl.stats;
  vr_free(pl.memo);
  return rc;
}

/* ---- coarse-grained baseline ---- */

int vr_il_coarse(const vr_il_problem *pb, double target_qps,
                 vr_il_config *out, vr_errbuf *err) {
  int rc = vr_il_problem_validate(pb, err);
  if (rc) return rc;
  if (!(target_qps > 0) || !isfinite(target_qps))
    return vr_errf(err, VR_EINVAL, "coarse: target rate must be positive "
                   "and finite");
  vr_il_config c = {.nstages = pb->nstages};
  int maxb = VR_PROF_MAX_BATCH;
  for (int m = 0; m < pb->nstages; m++) {
    c.st[m] = (vr_il_stage_cfg){lowest_latency_hw(&pb->st[m]), 1, 1};
    int mb = pb->st[m].hw[c.st[m].hw].max_batch;
    if (mb < maxb) maxb = mb;
  }
  int slow = 0, batch = 0;
  double f = pb->coarse_factor > 0 ? pb->coarse_factor : 2;
  for (int b = 1; b <= maxb; b *= 2) {
    for (int m = 0; m < pb->nstages; m++) c.st[m].batch = b;
    if (f * service(pb, &c, &slow) <= pb->slo_ms) batch = b;
  }
  if (!batch) {
    for (int m = 0; m < pb->nstages; m++) c.st[m].batch = 1;
    double svc = service(pb, &c, &slow);
    return vr_errf(err, VR_EINFEASIBLE,
                   "SLO %.1f ms is infeasible for a coarse-grained pipeline: "
                   "%g x its batch-1 service time is %.1f ms; bottleneck "
                   "stage '%s'", pb->slo_ms, f, f * svc, pb->st[slow].name);
  }
  double unit = INFINITY; /* pipeline requests/s one unit sustains */
  for (int m = 0; m < pb->nstages; m++) {
    c.st[m].batch = batch;
    double q = vr_il_stage_qps(pb, &c, m) / pb->st[m].scale;
    if (q < unit) unit = q;
  }
  /* at most 1e6 units, as AutoScale's tick caps them (il_tick.c): a
   * count past int is no cast */
  double need = ceil(target_qps / unit - 1e-9);
  int units = need < 1 ? 1 : need > 1e6 ? 1000000 : (int)need;
  for (int m = 0; m < pb->nstages; m++) c.st[m].replicas = units;
  c.cost_per_s = vr_il_cost(pb, &c);
  c.p99_ms = -1;
  *out = c;
  return 0;
}

double vr_il_peak_qps(const int64_t *t, size_t n, int64_t window_ns) {
  vr_envelope e;
  if (vr_envelope_windows(&e, window_ns, window_ns) ||
      vr_envelope_compute(&e, t, n))
    return 0;
  return vr_envelope_rate(&e, 0);
}

int vr_il_tuner_cfg(const vr_il_problem *pb, const vr_il_config *cfg,
                    const int64_t *t, size_t n, vr_tuner_cfg *out,
                    vr_errbuf *err) {
  vr_tuner_cfg_default(out);
  int64_t svc = (int64_t)(vr_il_service_ms(pb, cfg) * 1e6);
  int rc = vr_envelope_windows(&out->plan, svc, VR_ENV_HORIZON_NS);
  if (!rc) rc = vr_envelope_compute(&out->plan, t, n);
  if (rc)
    return vr_errf(err, rc, "tuner: sample trace not sorted or service "
                   "time beyond 60 s");
  out->plan_qps = pb->rate_qps;
  out->nstages = pb->nstages;
  for (int m = 0; m < pb->nstages; m++)
    out->st[m] = (vr_tuner_stage){.k_plan = cfg->st[m].replicas,
                                  .scale = pb->st[m].scale,
                                  .mu_qps = vr_il_stage_qps(pb, cfg, m)};
  out->plan_down_qps = vr_tuner_plan_down_qps(out, t, n);
  return vr_tuner_cfg_validate(out, err);
}
