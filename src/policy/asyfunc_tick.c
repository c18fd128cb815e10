/*
 * AsyFunc as a control policy (VR_POL_ASYFUNC): the decisions of
 * policy/asyfunc.h turned into actions on a snapshot, so that the live
 * control plane and any simulator behind the driver run them unchanged.
 *
 * Per variant that has a block profile (vr_snap_variant.blocks) and
 * instances (its bodies):
 *  - LLS, every tick: when the rows queued at its bodies reach gamma per
 *    body (the simulator's crowd threshold, sim/asyfunc_sim.c), vr_af_lls
 *    picks bodies (earliest idle first) and shadow cores: PAIR_SHADOW
 *    (value = the shadow's cores), at most kappa new ones per tick (the
 *    paper's per-decision bound), one per body;
 *  - release: a shadow is unpaired once the queue has stayed below the
 *    threshold for release_idle_ms (UNPAIR_SHADOW) — bursts come in
 *    waves, and a shadow dropped between two waves would be loaded again;
 *  - MLS, every mls_period: vr_af_mls on the variant's mean arrival rate
 *    over that period (the simulator's rate; note_arrivals): LOAD
 *    more bodies above alpha R_max, UNLOAD the least efficient below beta
 *    R_max (never the last one). A new body is placed on a worker: the up
 *    one with the most free cores that fits it (body_worker), so in a
 *    cluster bodies spread over workers and each pairs its shadows with
 *    the free cores of its own worker (LLS reads them per body). With
 *    worker types that may grow (a cluster with a provider) a body no
 *    worker has room for asks for a worker (ADD_WORKER, one at a time),
 *    and a worker left without instances goes after worker_idle_ns
 *    (REMOVE_WORKER, never below min_workers) — an extension: the
 *    paper's nodes are fixed.
 * Variants without a block profile get no decision here.
 *
 * The live tick runs every control period (vario serve --control-period-ms)
 * and also as soon as a routed query finds the queue crowded
 * (vr_pol_af_crowded, control/control_asyfunc.c), so a shadow is
 * provisioned a tick, its blocks' load and the body's batch in progress
 * after the queue crosses gamma, whatever the period.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "policy/asyfunc.h"
#include "policy/policy_int.h"

/* gamma: the configured one, else AsyFunc's default (it does not depend
 * on the SLO); the tick's LLS and the crowd rule both read it here */
static int af_gamma(const vr_policy_cfg *c) {
  vr_af_scale_cfg d;
  vr_af_scale_cfg_init(&d, 1);
  return c->af_gamma > 0 ? c->af_gamma : d.gamma;
}

static void scale_cfg(const vr_policy_cfg *c, const vr_snap_variant *v, vr_af_scale_cfg *sc) {
  double slo = v->slo_ms > 0 ? v->slo_ms : vr_af_default_slo(v->blocks);
  vr_af_scale_cfg_init(sc, slo);
  sc->gamma = af_gamma(c);
  if (c->af_kappa >= 0) sc->kappa = c->af_kappa;
  if (c->af_alpha > 0) sc->alpha = c->af_alpha;
  if (c->af_beta > 0) sc->beta = c->af_beta;
}

/* Whether worker w can take a new body of variant v: up, room for the
 * variant's cores, and (af_body_per_worker) no instance of v on it and
 * none placed this tick (placed[w]; NULL = none). */
static int body_fits(const vr_policy_cfg *c, const vr_snapshot *s, int v, const int *free_cores,
                     const char *placed, size_t w) {
  if (s->workers[w].state != VR_WS_UP || free_cores[w] < s->variants[v].prof.threads) return 0;
  if (c->af_body_per_worker && placed && placed[w]) return 0;
  for (size_t i = 0; c->af_body_per_worker && i < s->ninstances; i++)
    if (s->instances[i].variant == v && s->instances[i].worker == (int)w) return 0;
  return 1;
}

/* Where MLS puts a new body: of the workers it fits, the one with the
 * most free cores (AsyFunc spreads function instances over the nodes;
 * ties to the first). -1 when none. */
static int body_worker(const vr_policy_cfg *c, const vr_snapshot *s, int v,
                       const int *free_cores, const char *placed) {
  int best = -1;
  for (size_t w = 0; w < s->nworkers; w++)
    if (body_fits(c, s, v, free_cores, placed, w) &&
        (best < 0 || free_cores[w] > free_cores[best]))
      best = (int)w;
  return best;
}

/* The cores MLS may give new bodies: the free cores of the workers that
 * can take one (one worker: its free cores, as before). */
static int room_for_bodies(const vr_policy_cfg *c, const vr_snapshot *s, int v,
                           const int *free_cores) {
  int n = 0;
  for (size_t w = 0; w < s->nworkers; w++)
    if (s->workers[w].state == VR_WS_UP &&
        (!c->af_body_per_worker || body_fits(c, s, v, free_cores, NULL, w)))
      n += free_cores[w] > 0 ? free_cores[w] : 0;
  return n;
}

/* The worker type a new worker would be (the first that may grow), or -1;
 * -1 too while one is starting: its cores are on the way. */
static int grow_type(const vr_snapshot *s) {
  for (size_t w = 0; w < s->nworkers; w++)
    if (s->workers[w].state == VR_WS_STARTING) return -1;
  for (size_t t = 0; t < s->nwtypes; t++)
    if (s->wtypes[t].cores > 0 &&
        (s->wtypes[t].max_count <= 0 || s->wtypes[t].count < s->wtypes[t].max_count))
      return (int)t;
  return -1;
}

/* Workers for AsyFunc (an extension: the paper's nodes are fixed; only
 * with worker types that may grow, i.e. a cluster with a provider): a
 * worker without instances for worker_idle_ns goes, never below
 * min_workers. (Bodies MLS cannot place ask for one in one_variant.) */
static int idle_workers(const vr_policy_cfg *c, const vr_snapshot *s, vr_actions *out) {
  int alive = 0;
  for (size_t w = 0; w < s->nworkers; w++) alive += s->workers[w].state != VR_WS_DRAINING;
  for (size_t w = 0; w < s->nworkers && alive > c->min_workers && s->nwtypes; w++) {
    const vr_snap_worker *wk = &s->workers[w];
    int used = 0;
    for (size_t i = 0; i < s->ninstances && !used; i++) used = s->instances[i].worker == (int)w;
    if (wk->state != VR_WS_UP || used || wk->idle_since < 0 ||
        s->now_ns - wk->idle_since < c->worker_idle_ns)
      continue;
    if (vr_actions_push(out, VR_ACT_REMOVE_WORKER, -1, -1, (int)w, wk->type, 0,
                        "asyfunc: idle worker"))
      return VR_ENOMEM;
    alive--;
  }
  return 0;
}

int vr_pol_af_crowded(const vr_policy_cfg *c, long rows, int bodies) {
  return bodies > 0 && rows >= (long)af_gamma(c) * bodies;
}

/* MLS sizes bodies for the mean arrival rate since its last decision, as
 * the simulator's scale_mls does (sim/asyfunc_sim.c), not for the last
 * control period's rate, which is one second (or 50 ms) of a 60-s period.
 * Each tick adds the arrivals it saw, in milli-queries: the policy state
 * keeps integers. */
static void arrivals_key(char *k, size_t n, const vr_snap_variant *sv) {
  snprintf(k, n, "af:arr:%s", sv->prof.variant);
}

static int note_arrivals(vr_policy_state *st, const vr_snapshot *s, const vr_snap_variant *sv) {
  char kt[VR_VARIANT_MAX + 16], ka[VR_VARIANT_MAX + 16];
  snprintf(kt, sizeof kt, "af:tick:%s", sv->prof.variant);
  arrivals_key(ka, sizeof ka, sv);
  int64_t last = vr_pol_since(st, kt), acc = vr_pol_since(st, ka);
  if (acc < 0) acc = 0;
  if (last >= 0 && s->now_ns > last && sv->arrival_qps > 0)
    acc += llround(sv->arrival_qps * (double)(s->now_ns - last) / 1e6);
  return vr_pol_set_since(st, kt, s->now_ns) || vr_pol_set_since(st, ka, acc) ? VR_ENOMEM : 0;
}

/* The mean rate since t0 (the last MLS decision), and a fresh count. */
static double take_mean_rate(vr_policy_state *st, const vr_snapshot *s, const vr_snap_variant *sv,
                             int64_t t0, int *rc) {
  char ka[VR_VARIANT_MAX + 16];
  arrivals_key(ka, sizeof ka, sv);
  int64_t acc = vr_pol_since(st, ka);
  *rc = vr_pol_set_since(st, ka, 0) ? VR_ENOMEM : 0;
  if (acc <= 0 || s->now_ns <= t0) return 0;
  return (double)acc / 1000.0 / ((double)(s->now_ns - t0) / 1e9);
}

static int one_variant(const vr_policy_cfg *c, vr_policy_state *st, const vr_snapshot *s, int v,
                       int *free_cores, int *asked, vr_actions *out) {
  const vr_snap_variant *sv = &s->variants[v];
  const vr_af_model *m = sv->blocks;
  vr_af_scale_cfg sc;
  scale_cfg(c, sv, &sc);
  enum { MAXB = 64 };
  int idx[MAXB], nb = 0, qlen = 0;
  for (size_t i = 0; i < s->ninstances && nb < MAXB; i++) {
    const vr_snap_instance *in = &s->instances[i];
    if (in->variant != v || !in->body || in->state == VR_IS_DRAINING) continue;
    idx[nb++] = (int)i;
    qlen += in->queue_len;
  }
  if (note_arrivals(st, s, sv)) return VR_ENOMEM;
  if (!nb) return 0;
  char key[VR_VARIANT_MAX + 16];
  snprintf(key, sizeof key, "af:crowd:%s", sv->prof.variant);
  int crowded = vr_pol_af_crowded(c, qlen, nb);
  int64_t last = vr_pol_since(st, key);
  if (crowded) {
    last = s->now_ns;
    if (vr_pol_set_since(st, key, last)) return VR_ENOMEM;
  }
  /* LLS */
  if (crowded && sc.kappa > 0) {
    vr_af_body bd[MAXB];
    double now_ms = (double)s->now_ns / 1e6;
    for (int k = 0; k < nb; k++) {
      const vr_snap_instance *in = &s->instances[idx[k]];
      /* busy until its queue drains at its observed (or profiled) speed */
      double per_row = in->p50_ms > 0 && in->obs_batch > 0 ? in->p50_ms / in->obs_batch
                       : vr_af_lat(m, VR_AF_ALL(m), sv->prof.threads, 1);
      int w = in->worker >= 0 ? in->worker : 0;
      int fc = in->worker >= 0 && (size_t)w < s->nworkers ? free_cores[w] : 0;
      bd[k] = (vr_af_body){sv->prof.threads, now_ms + per_row * in->queue_len, fc,
                           in->shadow_cores > 0};
    }
    sc.gamma *= nb; /* the threshold vr_af_lls checks is the total */
    vr_af_lls_out o;
    vr_af_lls(m, &sc, qlen, bd, nb, &o);
    for (int k = 0; k < o.n; k++) {
      const vr_snap_instance *in = &s->instances[idx[o.body[k]]];
      int cs = o.pair[k].cs;
      if (in->worker < 0 || free_cores[in->worker] < cs) continue;
      free_cores[in->worker] -= cs;
      if (vr_actions_push(out, VR_ACT_PAIR_SHADOW, v, in->id, in->worker, -1, cs,
                          "asyfunc: queue above gamma (LLS)"))
        return VR_ENOMEM;
    }
  }
  /* release shadows once the burst is over */
  double quiet_ms = last < 0 ? INFINITY : (double)(s->now_ns - last) / 1e6;
  double hold = c->af_release_idle_ms > 0 ? c->af_release_idle_ms : 1000;
  for (int k = 0; k < nb && quiet_ms >= hold; k++) {
    const vr_snap_instance *in = &s->instances[idx[k]];
    if (in->shadow_cores <= 0) continue;
    if (vr_actions_push(out, VR_ACT_UNPAIR_SHADOW, v, in->id, in->worker, -1, 0,
                        "asyfunc: queue drained (LLS release)"))
      return VR_ENOMEM;
  }
  /* MLS, once per period */
  snprintf(key, sizeof key, "af:mls:%s", sv->prof.variant);
  int64_t period = c->af_mls_period_ns > 0 ? c->af_mls_period_ns : 60 * 1000000000LL;
  int64_t prev = vr_pol_since(st, key);
  int rc = 0;
  if (prev < 0) { /* the first period starts now, its count with it */
    take_mean_rate(st, s, sv, s->now_ns, &rc);
    return rc || vr_pol_set_since(st, key, s->now_ns) ? VR_ENOMEM : 0;
  }
  if (s->now_ns - prev < period) return 0;
  double rate = take_mean_rate(st, s, sv, prev, &rc);
  if (rc || vr_pol_set_since(st, key, s->now_ns)) return VR_ENOMEM;
  int cores[MAXB], fc = room_for_bodies(c, s, v, free_cores);
  for (int k = 0; k < nb; k++) cores[k] = sv->prof.threads;
  vr_af_mls_out mo;
  vr_af_mls(m, &sc, rate, cores, nb, fc, &mo);
  /* bodies are this variant's cores: MLS's core choice is only a count */
  char *placed = mo.ncreate ? vr_calloc(s->nworkers + 1, 1) : NULL;
  if (mo.ncreate && !placed) return VR_ENOMEM;
  int np = 0; /* bodies placed */
  for (; np < mo.ncreate; np++) {
    int w = body_worker(c, s, v, free_cores, placed);
    if (w < 0) break;
    free_cores[w] -= sv->prof.threads;
    placed[w] = 1;
    if (vr_actions_push(out, VR_ACT_LOAD, v, -1, w, -1, 0, "asyfunc: rate above alpha R_max (MLS)")) {
      vr_free(placed);
      return VR_ENOMEM;
    }
  }
  vr_free(placed);
  /* a body MLS wants and no worker holds: ask for a worker, one at a time
   * (MLS with a new worker's cores: whether it would create one there) */
  int t = *asked ? -1 : grow_type(s), want = np < mo.ncreate;
  for (size_t i = 0; i < s->ninstances && t >= 0; i++) /* a body on the way: wait for it */
    if (s->instances[i].variant == v && s->instances[i].state == VR_IS_LOADING) t = -1;
  if (t >= 0 && !mo.ncreate) {
    vr_af_mls_out more;
    vr_af_mls(m, &sc, rate, cores, nb, s->wtypes[t].cores, &more);
    want = more.ncreate > 0;
  }
  if (t >= 0 && want) {
    *asked = 1;
    if (vr_actions_push(out, VR_ACT_ADD_WORKER, -1, -1, -1, t, 0,
                        "asyfunc: no worker has room for a body MLS wants"))
      return VR_ENOMEM;
  }
  for (int k = 0; k < mo.ndestroy && k < nb - 1; k++) {
    const vr_snap_instance *in = &s->instances[idx[mo.destroy[k]]];
    if (vr_actions_push(out, VR_ACT_UNLOAD, v, in->id, in->worker, -1, 0,
                        "asyfunc: rate below beta R_max (MLS)"))
      return VR_ENOMEM;
  }
  return 0;
}

int vr_pol_asyfunc(const vr_policy_cfg *c, vr_policy_state *st, const vr_snapshot *s,
                   vr_actions *out) {
  int *free_cores = vr_calloc(s->nworkers + 1, sizeof(int));
  if (!free_cores) return VR_ENOMEM;
  for (size_t w = 0; w < s->nworkers; w++) free_cores[w] = s->workers[w].free_cores;
  int rc = 0, asked = 0;
  for (size_t v = 0; v < s->nvariants && !rc; v++)
    if (s->variants[v].blocks) rc = one_variant(c, st, s, (int)v, free_cores, &asked, out);
  vr_free(free_cores);
  return rc ? rc : idle_workers(c, s, out);
}

int vr_af_body_range(const vr_af_model *m, const vr_af_scale_cfg *cfg, int body_cores,
                     int shadow_cores, int *pb, int *pe, uint32_t *mask) {
  vr_af_body bd = {body_cores, 0, shadow_cores, 0};
  vr_af_lls_out o;
  vr_af_lls(m, cfg, cfg->gamma, &bd, 1, &o);
  if (!o.n || !o.pair[0].mask) return VR_ENOENT;
  uint32_t mk = o.pair[0].mask;
  int lo = 0, hi = m->nblocks - 1;
  while (!(mk >> lo & 1u)) lo++;
  while (!(mk >> hi & 1u)) hi--;
  *pb = m->blk[lo].node_begin;
  *pe = m->blk[hi].node_end;
  *mask = 0;
  for (int i = lo; i <= hi; i++) *mask |= 1u << i;
  return 0;
}

void vr_af_split_table(const vr_af_model *m, uint32_t mask, int body_cores, int shadow_cores,
                       int max_batch, int *split) {
  split[0] = 0;
  for (int b = 1; b <= max_batch; b++) {
    vr_af_pair p = {body_cores, shadow_cores, b, b, 0, mask};
    vr_af_split(m, &p);
    split[b] = p.bs;
  }
}
