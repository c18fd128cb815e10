/*
 * INFaaS model autoscaler.
 *
 * For every variant with instances, headroom = (instances x saturation
 * throughput) / load. Below the slack threshold (1.05) it scales up, either
 * by replicating the variant or by upgrading to another variant of the same
 * model (at least as accurate, meeting the variant's SLO) — or of another
 * model of the same app that meets the accuracy its queries asked for —
 * whichever costs
 * less by C*(d + lambda*T_load*max(d,0)) with d the change in instances
 * (an upgrade also credits the old variant's instances, which the
 * scale-down rule then drains). With spare headroom an instance becomes
 * removable; it is unloaded only after it has stayed removable for its
 * load time, so a brief dip does not cost a reload. A cheaper variant that
 * can carry the load (a downgrade) is loaded under the same patience rule.
 * An upgrade or downgrade that finds no room, in a cluster that cannot
 * grow (one fixed worker, as in `vario serve`), replaces the old instances
 * in place: a MIGRATE to the new variant on the same worker, the old
 * instance serving until the new one is loaded. With `cpu_max_replicas`
 * (the authors' artifact, off by default) a CPU variant past the cap
 * upgrades instead of replicating wherever an upgrade fits now.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "policy/policy_int.h"
#include "policy/select.h"

int vr_pol_need(double q, double slack, double sat) {
  if (!(q > 0)) return 0;
  if (!(sat > 0)) return 1;
  double n = ceil(q * slack / sat - 1e-9);
  return n > 1e6 ? 1000000 : (int)n;
}

static double change_cost(const vr_policy_cfg *c, const vr_profile *p, int d) {
  double tload_s = p->load_ms / 1000.0;
  return p->cost_per_s * (d + c->lambda * tload_s * (d > 0 ? d : 0));
}

/* Whether variant u can take over variant v's traffic. Only a variant
 * cheaper per query qualifies: selection sends a model's queries to its
 * cheapest active variant, so traffic follows only such a move (moving to
 * a dearer one would leave the new instances idle and flap). */
static double sat_under(const vr_snapshot *s, int u, double slo_ms);

static int can_replace(const vr_policy_cfg *c, const vr_snapshot *s, int v,
                       int u, int burst) {
  const vr_snap_variant *a = &s->variants[v], *b = &s->variants[u];
  if (u == v) return 0;
  if (strcmp(a->prof.model, b->prof.model)) {
    /* another model of the app: only as accurate as its queries asked,
     * which is known only for a variant that had queries */
    if (!c->cross_model || !a->prof.app[0] ||
        strcmp(a->prof.app, b->prof.app) || !(a->arrival_qps > 0) ||
        !vr_acc_meets(b->prof.accuracy, a->req_accuracy))
      return 0;
  } else if (!vr_acc_meets(b->prof.accuracy, a->prof.accuracy)) {
    return 0;
  }
  /* a burst upgrade (see burst_plan) may cost more per query; it must
   * serve more per instance */
  if (burst ? !(sat_under(s, u, a->slo_ms) > vr_policy_sat_qps(a))
            : !(vr_policy_query_cost(&b->prof) < vr_policy_query_cost(&a->prof)))
    return 0;
  if (a->slo_ms > 0 && vr_profile_batch_for_slo(&b->prof, a->slo_ms) == 0)
    return 0;
  /* a variant no worker type can hold is no option */
  for (size_t t = 0; t < s->nwtypes; t++)
    if (vr_place_type_fits(&s->wtypes[t], &b->prof)) return 1;
  return s->nwtypes == 0;
}

static double sat_under(const vr_snapshot *s, int u, double slo_ms) {
  vr_snap_variant tmp = s->variants[u];
  tmp.slo_ms = slo_ms;
  return vr_policy_sat_qps(&tmp);
}

/* Whether n instances of v pass the artifact's CPU replica cap. */
static int over_cpu_cap(const vr_policy_cfg *c, const vr_snapshot *s, int v,
                        int n) {
  return c->cpu_max_replicas > 0 &&
         s->variants[v].prof.device == VR_DEV_CPU && n > c->cpu_max_replicas;
}

typedef struct plan {
  int u, d;
  double cost;
} plan;

/* Cheapest way to serve variant v's load q: replicate (u = v) or move it
 * to another variant u. `downgrade` looks only at moves. */
static plan best_plan(const vr_policy_cfg *c, const vr_snapshot *s,
                      const vr_pol_agg *a, int v, int downgrade) {
  const vr_pol_vagg *g = &a->v[v];
  const vr_profile *pv = &s->variants[v].prof;
  plan best = {-1, 0, INFINITY};
  if (!downgrade) {
    int d = vr_pol_need(g->q, c->slack, g->sat) - g->n;
    best = (plan){v, d, change_cost(c, pv, d)};
  }
  /* a downgrade is a scale-down: it keeps the scale-down rule's headroom
   * (down_headroom), or the cheaper variant is overloaded by the next
   * swing of the load it was sized for and hands back (flapping) */
  double head = downgrade && c->down_headroom > c->slack ? c->down_headroom
                                                         : c->slack;
  for (size_t u = 0; u < s->nvariants; u++) {
    if (!can_replace(c, s, v, (int)u, 0)) continue;
    const vr_pol_vagg *gu = &a->v[u];
    double sat = sat_under(s, (int)u, s->variants[v].slo_ms);
    int d = vr_pol_need(gu->q + g->q, head, sat) - gu->n;
    if (downgrade && over_cpu_cap(c, s, (int)u, gu->n + d)) continue;
    double cost = change_cost(c, &s->variants[u].prof, d) +
                  change_cost(c, pv, -g->n);
    if (cost < best.cost - 1e-12) best = (plan){(int)u, d, cost};
  }
  return best;
}

static int emit_loads(const vr_policy_cfg *c, vr_place *pl, const vr_pol_agg *a,
                      int u, int d, vr_actions *out, const char *why) {
  if (c->max_instances > 0 && a->v[u].n + d > c->max_instances)
    d = c->max_instances - a->v[u].n;
  /* loads that find no room are recorded in pl for worker scaling */
  for (int k = 0; k < d; k++) {
    int rc = vr_place_load(pl, u, out, why);
    if (rc < 0) return rc;
  }
  return 0;
}

/* Moves v's load to d more instances of u (an upgrade or a downgrade):
 * loads where there is room; where there is none and the cluster cannot
 * grow, replaces v's instances in place. */
static int move_load(const vr_policy_cfg *c, vr_place *pl, const vr_pol_agg *a,
                     int v, int u, int d, int down, vr_actions *out) {
  const vr_snapshot *s = pl->s;
  if (c->max_instances > 0 && a->v[u].n + d > c->max_instances)
    d = c->max_instances - a->v[u].n;
  int grow = vr_place_growable(s);
  size_t next = 0; /* scan position for in-place candidates */
  for (int k = 0; k < d; k++) {
    int rc = vr_place_load(pl, u, out, down ? "downgrade" : "upgrade");
    if (rc < 0) return rc;
    if (rc > 0 || grow) continue; /* placed, or asked for a worker */
    int w = -1;
    for (; next < s->ninstances && w < 0; next++)
      if (s->instances[next].variant == v && s->instances[next].state != VR_IS_LOADING)
        w = vr_place_swap(pl, next, u);
    if (w < 0) break; /* nothing left to replace */
    if (vr_actions_push(out, VR_ACT_MIGRATE, u, s->instances[next - 1].id, w,
                        -1, 0, down ? "downgrade in place" : "upgrade in place"))
      return VR_ENOMEM;
  }
  return 0;
}

/* ---- model-vertical scaling across hardware (the paper's upgrade) ----
 *
 * When the cheapest plan for an overloaded variant v (replicate, or move
 * to a cheaper variant) finds no room on the workers that are up, it waits
 * for a worker to start (30 s in the experiments) while queries miss
 * their SLO. The paper's autoscaler first looks for a model-level action
 * the resources at hand allow (its ILP's constraint 3) and scales VMs only
 * when there is none: an upgrade to a variant with a higher throughput,
 * e.g. a GPU one on a GPU worker that has a free GPU, even if it costs
 * more per query. Selection sends a model's queries to its cheapest
 * serving variant, so the traffic follows in two steps: the upgrade loads
 * u; once u serves and can carry v's load too, v's instances are unloaded
 * (handover). The downgrade rule later moves the load back to the cheaper
 * variant when there is room for all of it. Only where workers can be
 * added (a fixed cluster upgrades in place, see move_load). */

/* Cheapest upgrade of v whose instances fit now on workers that are up
 * (u = -1: none; d = 0: one is already loading with enough capacity). */
static plan burst_plan(const vr_policy_cfg *c, const vr_snapshot *s,
                       const vr_pol_agg *a, const vr_place *pl, int v) {
  const vr_pol_vagg *g = &a->v[v];
  plan best = {-1, 0, INFINITY};
  for (size_t u = 0; u < s->nvariants; u++) {
    if (!can_replace(c, s, v, (int)u, 1)) continue;
    const vr_pol_vagg *gu = &a->v[u];
    double sat = sat_under(s, (int)u, s->variants[v].slo_ms);
    int d = vr_pol_need(gu->q + g->q, c->slack, sat) - gu->n;
    if (d <= 0 && gu->loading) return (plan){(int)u, 0, 0};
    if (d <= 0 || vr_place_room(pl, &s->variants[u].prof) < d) continue;
    double cost = change_cost(c, &s->variants[u].prof, d) +
                  change_cost(c, &s->variants[v].prof, -g->n);
    if (cost < best.cost - 1e-12) best = (plan){(int)u, d, cost};
  }
  return best;
}

/* A serving, fully loaded variant that can carry v's load with its own:
 * the target of a burst upgrade, ready to take over (-1: none). */
static int handover_target(const vr_policy_cfg *c, const vr_snapshot *s,
                           const vr_pol_agg *a, int v) {
  const vr_pol_vagg *g = &a->v[v];
  for (size_t u = 0; u < s->nvariants; u++) {
    const vr_pol_vagg *gu = &a->v[u];
    if (!gu->serving || gu->loading || !can_replace(c, s, v, (int)u, 1))
      continue;
    double sat = sat_under(s, (int)u, s->variants[v].slo_ms);
    if (gu->serving * sat >= (gu->q + g->q) * c->slack) return (int)u;
  }
  return -1;
}

/* Whether idle variant u is a burst upgrade waiting to take over. */
static int awaits_handover(const vr_policy_cfg *c, const vr_snapshot *s,
                           const vr_pol_agg *a, int u) {
  for (size_t v = 0; v < s->nvariants; v++) {
    const vr_pol_vagg *g = &a->v[v];
    if (g->n && g->q * c->slack > g->n * g->sat &&
        can_replace(c, s, (int)v, u, 1))
      return 1;
  }
  return 0;
}

/* Scale-up of overloaded v: hand over to a ready upgrade, else the
 * cheapest plan if it fits now, else a burst upgrade that does, else the
 * cheapest plan (its loads ask for workers). */
static int scale_up(const vr_policy_cfg *c, const vr_snapshot *s,
                    const vr_pol_agg *a, vr_place *pl, int v,
                    vr_actions *out) {
  int rc = 0, burst = c->burst_upgrade && vr_place_growable(s);
  plan b = best_plan(c, s, a, v, 0);
  int fits = b.d <= 0 || vr_place_room(pl, &s->variants[b.u].prof) >= b.d;
  /* the artifact's cap: past it, replicating is no option while an
   * upgrade fits (autoscaler.cc prices it 1000 load times) */
  int capped = burst && b.d > 0 && over_cpu_cap(c, s, b.u, a->v[b.u].n + b.d);
  if (capped) fits = 0;
  /* hand over only what the cheap plan cannot hold now: a variant that
   * can grow where it is keeps its traffic */
  if (burst && !fits && handover_target(c, s, a, v) >= 0) {
    for (int k = 0; k < a->v[v].n && !rc; k++)
      rc = vr_pol_unload_one(pl, v, out, "handed over to upgrade");
    return rc;
  }
  if (b.d <= 0) return 0;
  if (burst && !fits) {
    plan u = burst_plan(c, s, a, pl, v);
    if (u.u >= 0) {
      /* the cheap plan's capacity is still wanted: ask for its workers */
      if (!capped)
        vr_place_want(pl, &s->variants[b.u].prof,
                      b.d - vr_place_room(pl, &s->variants[b.u].prof));
      return u.d ? emit_loads(c, pl, a, u.u, u.d, out,
                              capped ? "upgrade (CPU replica cap)"
                                     : "upgrade (no room)")
                 : 0;
    }
  }
  return b.u == v ? emit_loads(c, pl, a, b.u, b.d, out, "replicate")
                  : move_load(c, pl, a, v, b.u, b.d, 0, out);
}

/* The scale-down rule of every autoscaling policy (INFaaS, SM+): an
 * instance of v beyond `keep` is removable while the others keep
 * down_headroom over its load; it is unloaded after it has stayed
 * removable for the variant's load time (the paper's T_v), one at a time,
 * all of them down to `keep` when idle.
 * Nothing is removed while an instance of v is loading: its capacity is
 * about to change (and a loading instance may be the replacement of a
 * migration, which removing would undo and repeat every tick). */
int vr_pol_scale_down(const vr_policy_cfg *c, vr_policy_state *st,
                      const vr_snapshot *s, const vr_pol_agg *a, vr_place *pl,
                      int v, int keep, vr_actions *out) {
  const vr_pol_vagg *g = &a->v[v];
  const vr_profile *p = &s->variants[v].prof;
  double down = c->down_headroom > 0 ? c->down_headroom : c->slack;
  /* instances that are all still loading have had no chance to get
   * traffic: not idle yet */
  /* no demand of its own: only overflow spilled to it, which the
   * variant that overflowed is sized for */
  int quiet = g->q <= 0 || g->spill_only;
  int removable = g->n > keep && g->serving > 0 && !g->loading &&
                  (quiet || (g->n - 1) * g->sat >= g->q * down);
  /* idle has its own timer: one quiet second after a spare-headroom wait
   * is no reason to drop every instance (at 4 QPS, 2% of the seconds
   * have no query, and the next query waits for a cold load) */
  char ikey[VR_VARIANT_MAX + 4];
  snprintf(ikey, sizeof ikey, "i:%s", p->variant);
  int64_t idle = quiet ? vr_pol_since(st, ikey) : -1;
  int rc = vr_pol_set_since(st, ikey, quiet ? (idle < 0 ? s->now_ns : idle)
                                            : -1);
  if (rc) return rc;
  if (!removable) return vr_pol_set_since(st, p->variant, -1);
  int64_t since = vr_pol_since(st, p->variant);
  if (since < 0) return vr_pol_set_since(st, p->variant, s->now_ns);
  int64_t patience = (int64_t)(p->load_ms * 1e6);
  if (s->now_ns - since < patience) return 0;
  /* idle for a load time: release all; else one step, then wait again */
  int all = idle >= 0 && s->now_ns - idle >= patience;
  int k = all ? g->n - keep : 1;
  for (int i = 0; i < k && !rc; i++)
    rc = vr_pol_unload_one(pl, v, out, all ? "idle" : "spare headroom");
  return rc ? rc : vr_pol_set_since(st, p->variant, s->now_ns);
}

static int downgrade(const vr_policy_cfg *c, vr_policy_state *st,
                     const vr_snapshot *s, const vr_pol_agg *a, vr_place *pl,
                     int v, vr_actions *out) {
  const vr_pol_vagg *g = &a->v[v];
  const vr_profile *p = &s->variants[v].prof;
  char key[VR_VARIANT_MAX + 4];
  snprintf(key, sizeof key, "d:%s", p->variant);
  plan b = g->q > 0 ? best_plan(c, s, a, v, 1) : (plan){-1, 0, 0};
  /* only a clear saving (10% of what v costs now) is worth a reload */
  if (b.u < 0 || !(b.cost < -0.1 * p->cost_per_s * g->n))
    return vr_pol_set_since(st, key, -1);
  int64_t since = vr_pol_since(st, key);
  if (since < 0) return vr_pol_set_since(st, key, s->now_ns);
  if (s->now_ns - since < (int64_t)(p->load_ms * 1e6)) return 0;
  /* never urgent: where workers can be added, wait until all of the
   * cheaper variant's instances fit, so they start serving together
   * (selection moves all traffic to it as soon as one serves) */
  int room = vr_place_room(pl, &s->variants[b.u].prof);
  if (c->burst_upgrade && vr_place_growable(s) && room < b.d) {
    vr_place_want(pl, &s->variants[b.u].prof, b.d - room);
    return 0;
  }
  int rc = move_load(c, pl, a, v, b.u, b.d, 1, out);
  return rc ? rc : vr_pol_set_since(st, key, -1);
}

int vr_pol_infaas_scale(const vr_policy_cfg *c, vr_policy_state *st,
                        const vr_snapshot *s, vr_actions *out) {
  vr_pol_agg a;
  vr_place pl;
  int rc = vr_pol_agg_init(&a, c, s);
  if (rc) return rc;
  if ((rc = vr_place_init(&pl, s))) {
    vr_pol_agg_free(&a);
    return rc;
  }
  rc = vr_pol_interference(c, s, &pl, out);
  for (size_t v = 0; v < s->nvariants && !rc; v++) {
    const vr_pol_vagg *g = &a.v[v];
    /* inactive variants are loaded on demand by selection; one with demand
     * but no instance is one selection chose but found no room for: scale
     * it up here, which asks for workers */
    if (g->n == 0 && !(g->q > 0)) {
      /* a timer left from its last instances would unload the next ones
       * the moment they load */
      rc = vr_pol_set_since(st, s->variants[v].prof.variant, -1);
      continue;
    }
    if (g->q * c->slack > g->n * g->sat && !g->spill_only) {
      rc = vr_pol_set_since(st, s->variants[v].prof.variant, -1);
      if (!rc) rc = scale_up(c, s, &a, &pl, (int)v, out);
    } else if (c->burst_upgrade && vr_place_growable(s) && !(g->q > 0) &&
               awaits_handover(c, s, &a, (int)v)) {
      rc = vr_pol_set_since(st, s->variants[v].prof.variant, -1);
    } else {
      rc = vr_pol_scale_down(c, st, s, &a, &pl, (int)v, 0, out);
      if (!rc) rc = downgrade(c, st, s, &a, &pl, (int)v, out);
    }
  }
  if (!rc && c->consolidate) rc = vr_pol_consolidate(s, &pl, out);
  if (!rc) rc = vr_pol_workers(c, st, s, &pl, &a, out);
  vr_place_free(&pl);
  vr_pol_agg_free(&a);
  return rc;
}
