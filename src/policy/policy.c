/*
 * INFaaS control policy (state machine, autoscaler, interference, workers)
 * and the dispatch to the baselines (baselines.c).
 */
#include "policy/policy.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "policy/place.h"
#include "policy/policy_int.h"

void vr_policy_cfg_default(vr_policy_cfg *c, int kind) {
  memset(c, 0, sizeof *c);
  c->kind = kind;
  c->slack = 1.05;
  c->lambda = 0.1;
  c->interference_factor = 1.5;
  /* Scale-down hysteresis: remove an instance only if the rest keep 1.5x
   * headroom. At the scale-up threshold (slack) itself, a noisy per-second
   * load removed and reloaded instances every few seconds (Proteus traces:
   * 1.05 -> 1.5 cut INFaaS's SLO violations 3.0 -> 1.7% and SM+'s 1.9 ->
   * 0.8% for ~1% more cost). */
  c->down_headroom = 1.5;
  c->worker_idle_ns = 30 * 1000000000LL;
  c->min_workers = 1;
  c->consolidate = kind == VR_POL_INFAAS;
  c->vm_util = kind == VR_POL_CLIPPER ? 0 : 0.8;
  c->cross_model = kind == VR_POL_INFAAS;
  c->burst_upgrade = kind == VR_POL_INFAAS;
  c->af_gamma = 2;
  c->af_kappa = 10;
  c->af_alpha = 0.8;
  c->af_beta = 0.6;
  c->af_release_idle_ms = 1000;
  c->af_mls_period_ns = 60 * 1000000000LL;
}

void vr_policy_state_init(vr_policy_state *st) {
  vr_map_init(&st->removable);
  st->last_add_ns = INT64_MIN / 2;
}

void vr_policy_state_free(vr_policy_state *st) { vr_map_free(&st->removable); }

const char *vr_policy_name(int kind) {
  switch (kind) {
  case VR_POL_INFAAS: return "infaas";
  case VR_POL_CLIPPER: return "clipper";
  case VR_POL_SM: return "sm";
  case VR_POL_ASYFUNC: return "asyfunc";
  }
  return "?";
}

int vr_policy_parse(const char *s) {
  for (int k = 0; k <= VR_POL_ASYFUNC; k++)
    if (s && !strcmp(s, vr_policy_name(k))) return k;
  return -1;
}

double vr_policy_query_cost(const vr_profile *p) {
  double peak = vr_profile_peak_qps(p, p->max_batch);
  return (peak > 0 ? p->cost_per_s / peak : 0) + 1e-9 * vr_profile_tail_ms(p, 1);
}

double vr_policy_sat_qps(const vr_snap_variant *v) {
  double slo = v->slo_ms > 0 ? v->slo_ms : INFINITY;
  double t = vr_profile_sat_qps(&v->prof, slo);
  /* An SLO no batch meets still leaves batch-1 throughput: the instance
   * serves, late. Counting it avoids dividing by zero and scaling forever. */
  return t > 0 ? t : vr_profile_peak_qps(&v->prof, 1);
}

int vr_pol_agg_init(vr_pol_agg *a, const vr_policy_cfg *c,
                    const vr_snapshot *s) {
  a->v = VR_NEWN(vr_pol_vagg, s->nvariants ? s->nvariants : 1);
  if (!a->v) return VR_ENOMEM;
  for (size_t v = 0; v < s->nvariants; v++) {
    a->v[v].sat = vr_policy_sat_qps(&s->variants[v]);
    a->v[v].q = fmax(s->variants[v].arrival_qps, s->variants[v].served_qps);
    a->v[v].spill_only = !(s->variants[v].arrival_qps > 0) &&
                         s->variants[v].served_qps > 0;
  }
  for (size_t i = 0; i < s->ninstances; i++) {
    const vr_snap_instance *in = &s->instances[i];
    if (in->variant < 0 || (size_t)in->variant >= s->nvariants) {
      vr_free(a->v);
      a->v = NULL;
      return VR_EINVAL;
    }
    vr_pol_vagg *g = &a->v[in->variant];
    if (in->state == VR_IS_DRAINING) continue;
    g->n++;
    if (in->state == VR_IS_LOADING) g->loading++;
    else g->serving++, g->backlog += in->queue_len;
    if (in->state == VR_IS_INTERFERED) g->interfered++;
  }
  /* A backlog that takes more than half the SLO to drain at the profiled
   * rate means the instances serve less than their profile says (they
   * share cores with the front end, or the profile is optimistic) and
   * the arrival rate undercounts demand (clients wait to send): count
   * the load as backlog_step x what the instances can serve, so the
   * autoscaler steps up each period while the backlog lasts. */
  for (size_t v = 0; v < s->nvariants && c->backlog_step > 1; v++) {
    vr_pol_vagg *g = &a->v[v];
    double slo_s = s->variants[v].slo_ms / 1000.0;
    if (g->serving > 0 && slo_s > 0 && g->sat > 0 &&
        g->backlog / (g->serving * g->sat) > slo_s / 2)
      g->q = fmax(g->q, c->backlog_step * g->serving * g->sat);
  }
  return 0;
}

void vr_pol_agg_free(vr_pol_agg *a) { vr_free(a->v); }

/* Variant and instance state machine from monitoring. */
int vr_policy_states(const vr_policy_cfg *c, const vr_snapshot *s,
                     vr_actions *out) {
  vr_pol_agg a;
  int rc = vr_pol_agg_init(&a, c, s);
  if (rc) return rc;
  for (size_t i = 0; i < s->ninstances && !rc; i++) {
    const vr_snap_instance *in = &s->instances[i];
    if (in->state == VR_IS_INTERFERED && in->served_qps > 0 &&
        in->slowdown <= c->interference_factor) {
      rc = vr_actions_push(out, VR_ACT_SET_ISTATE, in->variant, in->id, -1,
                           -1, VR_IS_ACTIVE, "interference over");
      continue;
    }
    if (in->state != VR_IS_ACTIVE && in->state != VR_IS_OVERLOADED) continue;
    int over = in->arrival_qps > a.v[in->variant].sat;
    int want = over ? VR_IS_OVERLOADED : VR_IS_ACTIVE;
    if (want != in->state)
      rc = vr_actions_push(out, VR_ACT_SET_ISTATE, in->variant, in->id, -1,
                           -1, want, over ? "instance over saturation"
                                          : "instance back under saturation");
  }
  for (size_t v = 0; v < s->nvariants && !rc; v++) {
    const vr_pol_vagg *g = &a.v[v];
    int want;
    if (g->serving == 0) want = g->loading ? s->variants[v].state
                                           : VR_VS_INACTIVE;
    else if (g->q > g->serving * g->sat) want = VR_VS_OVERLOADED;
    /* one slow instance is routed around (least-loaded routing avoids
     * it); the variant counts as interfered only when all of them are */
    else if (g->interfered == g->serving) want = VR_VS_INTERFERED;
    else want = VR_VS_ACTIVE;
    if (want != s->variants[v].state)
      rc = vr_actions_push(out, VR_ACT_SET_VSTATE, (int)v, -1, -1, -1, want,
                           "monitoring");
  }
  vr_pol_agg_free(&a);
  return rc;
}

static int replacement_loading(const vr_snapshot *s, int v) {
  for (size_t i = 0; i < s->ninstances; i++)
    if (s->instances[i].variant == v && s->instances[i].state == VR_IS_LOADING)
      return 1;
  return 0;
}

/* Compute time above profile x factor (median of observed / profiled per
 * batch) while under saturation: the instance shares its cores with
 * something else. Mitigate by loading a replacement on another worker
 * that takes over once ready (MIGRATE). The median, not a tail, is
 * compared: profiles already spread the tail, and one slow batch is
 * noise, not interference. */
int vr_pol_interference(const vr_policy_cfg *c, const vr_snapshot *s,
                        vr_place *pl, vr_actions *out) {
  int rc = 0;
  for (size_t i = 0; i < s->ninstances && !rc; i++) {
    const vr_snap_instance *in = &s->instances[i];
    int slow = in->served_qps > 0 && in->slowdown > c->interference_factor;
    if (!slow || pl->gone[i] ||
        (in->state != VR_IS_ACTIVE && in->state != VR_IS_INTERFERED))
      continue;
    const vr_snap_variant *sv = &s->variants[in->variant];
    if (in->arrival_qps > vr_policy_sat_qps(sv)) continue; /* overloaded */
    /* Nowhere to move it (no other worker has room, none can be added):
     * routing around it would only pile its load onto the same cores, so
     * it stays active. On one worker this is the usual case: what slows
     * it is the front end and the clients sharing its cores. */
    if (!vr_place_growable(s) && !vr_place_fits_elsewhere(pl, &sv->prof, in->worker)) {
      if (in->state == VR_IS_INTERFERED)
        rc = vr_actions_push(out, VR_ACT_SET_ISTATE, in->variant, in->id, -1,
                             -1, VR_IS_ACTIVE, "interference: nowhere to move");
      continue;
    }
    if (in->state == VR_IS_ACTIVE)
      rc = vr_actions_push(out, VR_ACT_SET_ISTATE, in->variant, in->id, -1,
                           -1, VR_IS_INTERFERED, "latency above profile");
    /* still slow and no replacement in flight (a move that found no room
     * earlier): try again; a failed pick asks for a worker */
    else if (replacement_loading(s, in->variant))
      continue;
    int w = rc ? -1 : vr_place_pick(pl, &sv->prof, in->worker);
    if (!rc && w >= 0) {
      pl->gone[i] = 1;
      rc = vr_actions_push(out, VR_ACT_MIGRATE, in->variant, in->id, w, -1, 0,
                           "interference mitigation");
    }
  }
  return rc;
}

int vr_policy_interference(const vr_policy_cfg *c, const vr_snapshot *s,
                           vr_actions *out) {
  vr_place pl;
  int rc = vr_place_init(&pl, s);
  if (rc) return rc;
  rc = vr_pol_interference(c, s, &pl, out);
  vr_place_free(&pl);
  return rc;
}

/* ---- removable timers (caller-owned state keyed by variant name) ---- */

int64_t vr_pol_since(vr_policy_state *st, const char *key) {
  void *v = vr_map_get(&st->removable, key);
  return v ? (int64_t)(intptr_t)v - 1 : -1;
}

int vr_pol_set_since(vr_policy_state *st, const char *key, int64_t t) {
  if (t < 0) {
    vr_map_del(&st->removable, key);
    return 0;
  }
  return vr_map_put(&st->removable, key, (void *)(intptr_t)(t + 1), NULL);
}

/* Unloads the least loaded non-draining instance of v. */
int vr_pol_unload_one(vr_place *pl, int v, vr_actions *out, const char *why) {
  const vr_snapshot *s = pl->s;
  int best = -1;
  for (size_t i = 0; i < s->ninstances; i++) {
    const vr_snap_instance *in = &s->instances[i];
    if (in->variant != v || in->state == VR_IS_DRAINING || pl->gone[i])
      continue;
    /* prefer still-loading instances, then the least loaded: loading
     * first, so a serving one never displaces a loading one (queries may
     * join an instance that loads: it can have arrivals too) */
    int loading = in->state == VR_IS_LOADING;
    int best_loading = best >= 0 && s->instances[best].state == VR_IS_LOADING;
    if (best < 0 || loading > best_loading ||
        (loading == best_loading && in->arrival_qps < s->instances[best].arrival_qps))
      best = (int)i;
  }
  if (best < 0) return 0;
  pl->gone[best] = 1;
  vr_place_release_inst(pl, (size_t)best);
  return vr_actions_push(out, VR_ACT_UNLOAD, v, s->instances[best].id,
                         s->instances[best].worker, -1, 0, why);
}

/* Sets each serving instance's max batch to the largest batch that keeps
 * its variant's SLO (dynamic batching never waits for a batch to fill). */
int vr_pol_batches(const vr_snapshot *s, vr_actions *out) {
  for (size_t i = 0; i < s->ninstances; i++) {
    const vr_snap_instance *in = &s->instances[i];
    const vr_snap_variant *sv = &s->variants[in->variant];
    if (in->state == VR_IS_DRAINING) continue;
    int b = sv->slo_ms > 0 ? vr_profile_batch_for_slo(&sv->prof, sv->slo_ms)
                           : sv->prof.max_batch;
    if (b < 1) b = 1;
    if (b != in->max_batch &&
        vr_actions_push(out, VR_ACT_SET_BATCH, in->variant, in->id, -1, -1, b,
                        "batch for SLO"))
      return VR_ENOMEM;
  }
  return 0;
}

/* Utilization of type t's live workers (leaving out worker `without`,
 * -1: none) as the paper's monitoring measures it: the busy share of the
 * cores and GPUs its instances hold (an instance is as busy as its
 * variant's load over its capacity; a load decided this tick counts
 * whole) and the memory they hold; the most used of the three. 0 when
 * the type has no worker. */
static double type_util(const vr_place *pl, const vr_pol_agg *a, size_t t,
                        int without) {
  const vr_snapshot *s = pl->s;
  double cap[3] = {0, 0, 0}, used[3] = {0, 0, 0}, u = 0;
  for (size_t w = 0; w < s->nworkers; w++) {
    const vr_snap_worker *wk = &s->workers[w];
    if ((size_t)wk->type != t || wk->state == VR_WS_DRAINING ||
        (int)w == without)
      continue;
    cap[0] += wk->cores, cap[1] += wk->gpus, cap[2] += (double)wk->mem_bytes;
    /* held now minus held at the snapshot = placed this tick */
    used[0] += wk->free_cores - pl->free_cores[w];
    used[1] += wk->free_gpus - pl->free_gpus[w];
    used[2] += (double)(wk->mem_bytes - pl->free_mem[w]);
  }
  for (size_t i = 0; i < s->ninstances; i++) {
    const vr_snap_instance *in = &s->instances[i];
    if (in->worker < 0 || in->worker == without || pl->gone[i] ||
        in->state == VR_IS_DRAINING ||
        (size_t)s->workers[in->worker].type != t)
      continue;
    const vr_pol_vagg *g = &a->v[in->variant];
    const vr_profile *p = &s->variants[in->variant].prof;
    double busy = g->n && g->sat > 0 ? fmin(1, g->q / (g->n * g->sat)) : 1;
    used[0] += busy * p->threads;
    used[1] += busy * (p->device == VR_DEV_GPU);
  }
  for (int r = 0; r < 3; r++)
    if (cap[r] > 0) u = fmax(u, used[r] / cap[r]);
  return u;
}

/* Share of type t's workers that are up and hold an instance serving over
 * its saturation throughput (the VM autoscaler's rule 3, §4.2.3: "when
 * more than 80% of workers have Overloaded variants, start a new worker");
 * 0 while a worker of the type is starting (its room is on the way). */
static double type_overloaded(const vr_snapshot *s, const vr_pol_agg *a,
                              size_t t) {
  int up = 0, over = 0;
  for (size_t w = 0; w < s->nworkers; w++) {
    const vr_snap_worker *wk = &s->workers[w];
    if ((size_t)wk->type != t || wk->state == VR_WS_DRAINING) continue;
    if (wk->state == VR_WS_STARTING) return 0;
    int hot = 0;
    for (size_t i = 0; i < s->ninstances && !hot; i++) {
      const vr_snap_instance *in = &s->instances[i];
      hot = in->worker == (int)w && in->state != VR_IS_LOADING &&
            in->state != VR_IS_DRAINING &&
            in->arrival_qps > a->v[in->variant].sat;
    }
    up++;
    over += hot;
  }
  return up ? (double)over / up : 0;
}

/* Worker autoscaling: add enough workers of each type for the loads that
 * found no room this tick (capacity of workers still starting was already
 * offered to them), or one when the type's utilization is above vm_util,
 * up to the type's cap; remove workers idle too long. */
int vr_pol_workers(const vr_policy_cfg *c, vr_policy_state *st,
                   const vr_snapshot *s, vr_place *pl, const vr_pol_agg *a,
                   vr_actions *out) {
  int alive = 0;
  for (size_t w = 0; w < s->nworkers; w++)
    if (s->workers[w].state != VR_WS_DRAINING) alive++;
  for (size_t t = 0; t < s->nwtypes; t++) {
    const vr_snap_wtype *wt = &s->wtypes[t];
    double n = 0, want[3] = {pl->want_cores[t], pl->want_gpus[t],
                             pl->want_mem[t]};
    /* what workers still starting will offer and no load placed this tick
     * has claimed counts against the want: a want stated without placing
     * (a burst upgrade's cheap plan, a deferred downgrade) would otherwise
     * add one more worker every tick of a 30-s start */
    for (size_t w = 0; w < s->nworkers; w++)
      if ((size_t)s->workers[w].type == t &&
          s->workers[w].state == VR_WS_STARTING) {
        want[0] -= pl->free_cores[w];
        want[1] -= pl->free_gpus[w];
        want[2] -= (double)pl->free_mem[w];
      }
    if (wt->cores > 0) n = fmax(n, ceil(want[0] / wt->cores));
    if (wt->gpus > 0) n = fmax(n, ceil(want[1] / wt->gpus));
    if (wt->mem_bytes > 0) n = fmax(n, ceil(want[2] / (double)wt->mem_bytes));
    if (n < 1 && c->vm_util > 0 &&
        (type_util(pl, a, t, -1) > c->vm_util ||
         type_overloaded(s, a, t) > c->vm_util))
      n = 1;
    int k = (int)fmin(n, 1e6);
    if (wt->max_count > 0 && wt->count + k > wt->max_count)
      k = wt->max_count - wt->count;
    for (int i = 0; i < k; i++)
      if (vr_actions_push(out, VR_ACT_ADD_WORKER, -1, -1, -1, (int)t, 0,
                          "no room for loads"))
        return VR_ENOMEM;
    if (k > 0) st->last_add_ns = s->now_ns;
  }
  for (size_t w = 0; w < s->nworkers && alive > c->min_workers; w++) {
    const vr_snap_worker *wk = &s->workers[w];
    if (wk->state != VR_WS_UP || pl->ninst[w] > 0 || wk->idle_since < 0 ||
        s->now_ns - wk->idle_since < c->worker_idle_ns)
      continue;
    /* the spare worker the utilization rule keeps */
    if (c->vm_util > 0 && type_util(pl, a, (size_t)wk->type, (int)w) > c->vm_util)
      continue;
    if (vr_actions_push(out, VR_ACT_REMOVE_WORKER, -1, -1, (int)w, wk->type,
                        0, "idle"))
      return VR_ENOMEM;
    alive--;
  }
  return 0;
}

int vr_policy_tick(const vr_policy_cfg *c, vr_policy_state *st,
                   const vr_snapshot *s, vr_actions *out) {
  for (size_t i = 0; i < s->ninstances; i++) {
    const vr_snap_instance *in = &s->instances[i];
    if (in->variant < 0 || (size_t)in->variant >= s->nvariants ||
        in->worker < -1 || in->worker >= (int)s->nworkers)
      return VR_EINVAL;
  }
  int rc = vr_policy_states(c, s, out);
  if (!rc) rc = vr_pol_batches(s, out);
  if (rc) return rc;
  switch (c->kind) {
  case VR_POL_INFAAS: return vr_pol_infaas_scale(c, st, s, out);
  case VR_POL_CLIPPER: return vr_pol_clipper(c, st, s, out);
  case VR_POL_SM: return vr_pol_sm(c, st, s, out);
  case VR_POL_ASYFUNC: return vr_pol_asyfunc(c, st, s, out);
  }
  return VR_EINVAL;
}
