/*
 * The INFaaS greedy on a static provisioning problem (see ilp.h): the real
 * policy (vr_policy_tick) runs every simulated second on a snapshot whose
 * instances and workers follow its own actions, until it stops changing
 * the cluster. Load of a model is shared among its variants' instances in
 * proportion to their capacity, as least-loaded routing does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "policy/place.h"
#include "sim/ilp.h"

typedef struct gstate {
  const vr_cap_problem *p;
  vr_snap_variant *v;
  vr_vec inst;    /* vr_snap_instance */
  vr_vec workers; /* vr_snap_worker */
  vr_snap_wtype *wt;
  int64_t next_id;
} gstate;

static int add_worker(gstate *g, int t, int64_t now) {
  const vr_snap_wtype *wt = &g->wt[t];
  vr_snap_worker w = {.id = g->next_id++, .state = VR_WS_UP,
                      .cores = wt->cores, .free_cores = wt->cores,
                      .gpus = wt->gpus, .free_gpus = wt->gpus,
                      .mem_bytes = wt->mem_bytes, .free_mem = wt->mem_bytes,
                      .price_per_s = wt->price_per_s, .type = t,
                      .idle_since = now};
  g->wt[t].count++;
  return vr_vec_push(&g->workers, &w);
}

static int add_inst(gstate *g, int v, int w) {
  vr_snap_worker *wk = &VR_VEC_AT(&g->workers, vr_snap_worker, w);
  const vr_profile *pr = &g->v[v].prof;
  if (!vr_place_holds(wk->free_cores, wk->free_gpus, wk->free_mem, pr))
    return 0; /* no room (a stale placement: the next tick decides again) */
  wk->free_cores -= pr->threads;
  wk->free_mem -= pr->mem_bytes;
  wk->free_gpus -= pr->device == VR_DEV_GPU;
  wk->idle_since = -1;
  vr_snap_instance in = {.id = g->next_id++, .variant = v, .worker = w,
                         .state = VR_IS_ACTIVE, .max_batch = pr->max_batch};
  return vr_vec_push(&g->inst, &in) ? VR_ENOMEM : 1;
}

static void del_inst(gstate *g, size_t i, int64_t now) {
  vr_snap_instance *in = &VR_VEC_AT(&g->inst, vr_snap_instance, i);
  int w = in->worker;
  vr_snap_worker *wk = &VR_VEC_AT(&g->workers, vr_snap_worker, w);
  const vr_profile *pr = &g->v[in->variant].prof;
  wk->free_cores += pr->threads;
  wk->free_mem += pr->mem_bytes;
  wk->free_gpus += pr->device == VR_DEV_GPU;
  vr_vec_remove(&g->inst, i);
  int used = 0;
  for (size_t k = 0; k < g->inst.len; k++)
    used |= VR_VEC_AT(&g->inst, vr_snap_instance, k).worker == w;
  if (!used) wk->idle_since = now;
}

/* Routes each model's demand as selection does: to its active variant
 * with the lowest cost per query, spread evenly over that variant's
 * instances (least-loaded routing). */
static void share_load(gstate *g) {
  const vr_cap_problem *p = g->p;
  for (size_t v = 0; v < p->nvariants; v++)
    g->v[v].arrival_qps = g->v[v].served_qps = 0;
  for (size_t i = 0; i < g->inst.len; i++) {
    vr_snap_instance *in = &VR_VEC_AT(&g->inst, vr_snap_instance, i);
    in->arrival_qps = in->served_qps = 0;
  }
  for (size_t m = 0; m < p->nmodels; m++) {
    int best = -1, n = 0;
    for (size_t i = 0; i < g->inst.len; i++) {
      int v = VR_VEC_AT(&g->inst, vr_snap_instance, i).variant;
      if ((size_t)p->model_of[v] != m) continue;
      if (best < 0 || vr_policy_query_cost(&p->variants[v]) <
                          vr_policy_query_cost(&p->variants[best]))
        best = v;
    }
    if (best < 0) continue;
    for (size_t i = 0; i < g->inst.len; i++)
      n += VR_VEC_AT(&g->inst, vr_snap_instance, i).variant == best;
    g->v[best].arrival_qps = g->v[best].served_qps = p->demand[m];
    for (size_t i = 0; i < g->inst.len; i++) {
      vr_snap_instance *in = &VR_VEC_AT(&g->inst, vr_snap_instance, i);
      if (in->variant == best)
        in->arrival_qps = in->served_qps = p->demand[m] / n;
    }
  }
}

/* First instance of each model: the variant INFaaS selection would load
 * (lowest load + inference latency meeting the SLO), on the cheapest
 * worker type that holds it. */
static int seed_models(gstate *g) {
  const vr_cap_problem *p = g->p;
  for (size_t m = 0; m < p->nmodels; m++) {
    int best = -1;
    for (size_t v = 0; v < p->nvariants; v++) {
      if ((size_t)p->model_of[v] != m) continue;
      const vr_profile *pr = &p->variants[v];
      if (vr_profile_batch_for_slo(pr, p->slo_ms[m]) == 0) continue;
      if (best < 0 || pr->load_ms + vr_profile_tail_ms(pr, 1) <
                          p->variants[best].load_ms +
                              vr_profile_tail_ms(&p->variants[best], 1))
        best = (int)v;
    }
    if (best < 0 || p->demand[m] <= 0) continue;
    /* an existing worker with room first, as the query path places it */
    int placed = 0;
    for (size_t w = 0; w < g->workers.len && !placed; w++) {
      const vr_snap_worker *wk = &VR_VEC_AT(&g->workers, vr_snap_worker, w);
      if (p->variants[best].device != VR_DEV_GPU && wk->gpus > 0) continue;
      if ((placed = add_inst(g, best, (int)w)) < 0) return placed;
    }
    if (placed) continue;
    int t = -1;
    for (size_t k = 0; k < p->nwtypes; k++)
      if (vr_place_type_fits(&g->wt[k], &p->variants[best]) &&
          (p->variants[best].device == VR_DEV_GPU || g->wt[k].gpus == 0) &&
          (t < 0 || g->wt[k].price_per_s < g->wt[t].price_per_s))
        t = (int)k;
    if (t < 0) continue;
    int rc = add_worker(g, t, 0);
    if (!rc) rc = add_inst(g, best, (int)g->workers.len - 1);
    if (rc < 0) return rc;
    if (rc == 0) return VR_EINVAL; /* a fitting type that does not fit */
  }
  return 0;
}

static int apply(gstate *g, const vr_action *a, int64_t now) {
  switch (a->kind) {
  case VR_ACT_LOAD: return add_inst(g, a->variant, a->worker);
  case VR_ACT_ADD_WORKER: return add_worker(g, a->wtype, now) ? VR_ENOMEM : 1;
  case VR_ACT_UNLOAD:
    for (size_t i = 0; i < g->inst.len; i++)
      if (VR_VEC_AT(&g->inst, vr_snap_instance, i).id == a->instance) {
        del_inst(g, i, now);
        return 1;
      }
    return 0;
  case VR_ACT_MIGRATE: {
    size_t i = 0;
    while (i < g->inst.len &&
           VR_VEC_AT(&g->inst, vr_snap_instance, i).id != a->instance)
      i++;
    /* the evaluation is static: an upgrade in place (same worker) frees
     * the old room first; a move elsewhere loads first and keeps the old
     * instance when the new one finds no room */
    if (i < g->inst.len &&
        VR_VEC_AT(&g->inst, vr_snap_instance, i).worker == a->worker) {
      del_inst(g, i, now);
      return add_inst(g, a->variant, a->worker);
    }
    int rc = add_inst(g, a->variant, a->worker);
    if (rc > 0 && i < g->inst.len) del_inst(g, i, now);
    return rc;
  }
  case VR_ACT_SET_VSTATE: g->v[a->variant].state = a->value; return 0;
  default: return 0;
  }
}

static double used_cost(gstate *g, int *workers) {
  double c = 0;
  *workers = 0;
  for (size_t w = 0; w < g->workers.len; w++) {
    int used = 0;
    for (size_t i = 0; i < g->inst.len && !used; i++)
      used = VR_VEC_AT(&g->inst, vr_snap_instance, i).worker == (int)w;
    if (used) c += VR_VEC_AT(&g->workers, vr_snap_worker, w).price_per_s;
    *workers += used;
  }
  return c;
}

int vr_greedy_solve(const vr_cap_problem *p, const vr_policy_cfg *cfg,
                    vr_cap_solution *out, vr_errbuf *err) {
  memset(out, 0, sizeof *out);
  gstate g = {p, VR_NEWN(vr_snap_variant, p->nvariants ? p->nvariants : 1)};
  g.wt = VR_NEWN(vr_snap_wtype, p->nwtypes ? p->nwtypes : 1);
  out->inst = VR_NEWN(int, p->nvariants ? p->nvariants : 1);
  vr_vec_init(&g.inst, sizeof(vr_snap_instance));
  vr_vec_init(&g.workers, sizeof(vr_snap_worker));
  vr_actions acts;
  vr_actions_init(&acts);
  vr_policy_state st;
  vr_policy_state_init(&st);
  /* the capacity problem (like the ILP) serves each model's demand with
   * that model's variants only */
  vr_policy_cfg c = *cfg;
  c.cross_model = 0;
  cfg = &c;
  int rc = !g.v || !g.wt || !out->inst ? VR_ENOMEM : 0;
  for (size_t v = 0; !rc && v < p->nvariants; v++) {
    g.v[v].prof = p->variants[v];
    g.v[v].slo_ms = p->slo_ms[p->model_of[v]];
  }
  for (size_t t = 0; !rc && t < p->nwtypes; t++) g.wt[t] = p->wtypes[t];
  if (!rc) rc = seed_models(&g);
  int quiet = 0;
  for (int sec = 1; !rc && sec <= 300 && quiet < 10; sec++) {
    int64_t now = (int64_t)sec * 1000000000LL;
    share_load(&g);
    vr_snapshot s = {now, g.v, p->nvariants, g.inst.data, g.inst.len,
                     g.workers.data, g.workers.len, g.wt, p->nwtypes};
    vr_vec_clear(&acts);
    if ((rc = vr_policy_tick(cfg, &st, &s, &acts))) break;
    int changed = 0;
    if (getenv("VR_GREEDY_TRACE"))
      for (size_t i = 0; i < acts.len; i++) {
        const vr_action *a = vr_actions_at(&acts, i);
        if (a->kind != VR_ACT_SET_BATCH && a->kind != VR_ACT_SET_ISTATE)
          fprintf(stderr, "t=%d %s v=%d w=%d (%s)\n", sec,
                  vr_action_name(a->kind), a->variant, a->worker, a->why);
      }
    for (size_t i = 0; i < acts.len && rc >= 0; i++) {
      rc = apply(&g, vr_actions_at(&acts, i), now);
      if (rc > 0) changed = 1, rc = 0;
    }
    quiet = changed ? 0 : quiet + 1;
  }
  if (!rc) {
    out->cost = used_cost(&g, &out->workers);
    out->feasible = 1;
    for (size_t i = 0; i < g.inst.len; i++)
      out->inst[VR_VEC_AT(&g.inst, vr_snap_instance, i).variant]++;
    for (size_t m = 0; m < p->nmodels; m++) {
      double cap = 0;
      for (size_t v = 0; v < p->nvariants; v++)
        if ((size_t)p->model_of[v] == m)
          cap += out->inst[v] * vr_policy_sat_qps(&g.v[v]);
      if (cap + 1e-9 < p->slack * p->demand[m]) out->feasible = 0;
    }
  }
  if (rc == VR_ENOMEM) vr_errf(err, rc, "greedy: out of memory");
  else if (rc) vr_errf(err, rc, "greedy: policy failed: %s", vr_strerror(rc));
  vr_actions_free(&acts);
  vr_policy_state_free(&st);
  vr_vec_free(&g.inst);
  vr_vec_free(&g.workers);
  vr_free(g.v);
  vr_free(g.wt);
  if (rc) vr_cap_solution_free(out);
  return rc;
}
