/* Per-request routing decision (see route.h). */
#include "policy/route.h"

#include <string.h>

#include "policy/batch.h"
#include "policy/policy.h"

static int room(const vr_route_env *e, int v) {
  return e->available(e->self, v) || e->fits(e->self, v);
}

static int evictable(const vr_route_env *e, int v) {
  return e->evictable && e->evictable(e->self, v);
}

/* The variant of the query's group that meets it and has room, with the
 * lowest load + inference time (an available one pays no load); -1. */
static int pick_fitting(const vr_route_env *e, const vr_query_req *q) {
  int best = -1;
  double best_val = 0;
  for (size_t v = 0; v < e->snap->nvariants; v++) {
    const vr_profile *p = &e->snap->variants[v].prof;
    if (strcmp(e->kind == 'a' ? p->app : p->model, e->name)) continue;
    double tail = vr_profile_tail_ms(p, 1);
    if (!vr_acc_meets(p->accuracy, q->min_accuracy) || 2 * tail > q->latency_ms) continue;
    int avail = e->available(e->self, (int)v);
    if (!avail && !e->fits(e->self, (int)v)) continue;
    double val = (avail ? 0 : p->load_ms) + tail;
    if (best < 0 || val < best_val) best = (int)v, best_val = val;
  }
  return best;
}

int vr_route_behind(const vr_profile *p, long rows, double slo_ms) {
  int cap = vr_profile_batch_for_slo(p, slo_ms);
  if (cap < 1) cap = 1;
  if (rows < 0) rows = 0;
  long full = rows / cap;
  int own = (int)(rows % cap) + 1;
  double ns = (double)full * (double)vr_batch_est_ns(&p->lat, cap) +
              (double)vr_batch_est_ns(&p->lat, own);
  return ns > slo_ms * 1e6;
}

/* v serves now and a query joining it would be late (step 3b). */
static int behind(const vr_route_env *e, int v, double slo_ms) {
  long rows = 0;
  return e->backlog(e->self, v, &rows) &&
         vr_route_behind(&e->snap->variants[v].prof, rows, slo_ms);
}

/* The cheapest serving variant of the query's group other than `not`
 * that meets the query and is not behind; -1. */
static int pick_spill(const vr_route_env *e, const vr_query_req *q, int not) {
  int best = -1;
  double best_cost = 0;
  for (size_t v = 0; v < e->snap->nvariants; v++) {
    const vr_profile *p = &e->snap->variants[v].prof;
    long rows = 0;
    if ((int)v == not || strcmp(e->kind == 'a' ? p->app : p->model, e->name))
      continue;
    if (!vr_acc_meets(p->accuracy, q->min_accuracy) ||
        2 * vr_profile_tail_ms(p, 1) > q->latency_ms)
      continue;
    if (!e->backlog(e->self, (int)v, &rows) ||
        vr_route_behind(p, rows, q->latency_ms))
      continue;
    double cost = vr_policy_query_cost(p);
    if (best < 0 || cost < best_cost) best = (int)v, best_cost = cost;
  }
  return best;
}

/* Step 3c: among the variants of the query's group with no serving
 * instance that meet it, the one with the lowest load + inference time
 * (the Inactive choice of INFaaS's getVariant); one already loading pays
 * no load, so the next late queries pick it again rather than start a
 * load of every variant in turn. An inactive one needs room now. -1. */
static int pick_inactive(const vr_route_env *e, const vr_query_req *q) {
  int best = -1;
  double best_val = 0;
  for (size_t v = 0; v < e->snap->nvariants; v++) {
    const vr_profile *p = &e->snap->variants[v].prof;
    long rows;
    if (strcmp(e->kind == 'a' ? p->app : p->model, e->name)) continue;
    double tail = vr_profile_tail_ms(p, 1);
    if (!vr_acc_meets(p->accuracy, q->min_accuracy) || 2 * tail > q->latency_ms ||
        e->backlog(e->self, (int)v, &rows)) /* serving: behind, or 3b took it */
      continue;
    int loading = e->available(e->self, (int)v);
    if (!loading && !e->fits(e->self, (int)v)) continue;
    double val = (loading ? 0 : p->load_ms) + tail;
    if (best < 0 || val < best_val) best = (int)v, best_val = val;
  }
  return best;
}

int vr_route_load(const vr_route_env *e, int v) {
  if (room(e, v)) return VR_ROUTE_LOAD;
  return evictable(e, v) ? VR_ROUTE_EVICT_LOAD : VR_ROUTE_NO_ROOM;
}

int vr_route_decide(const vr_route_env *e, const vr_query_req *q,
                    vr_route *out) {
  vr_selection sel;
  int rc = vr_select(e->ix, q, &sel);
  if (!rc) vr_route_decide_sel(e, q, &sel, out);
  return rc;
}

/* A fallback's variant, with what it gives (route.h: sel describes
 * `variant`). */
static void set_variant(const vr_route_env *e, vr_selection *sel, int v) {
  const vr_profile *p = &e->snap->variants[v].prof;
  sel->variant = v;
  sel->latency_ms = vr_profile_tail_ms(p, 1);
  sel->accuracy = p->accuracy;
}

void vr_route_decide_sel(const vr_route_env *e, const vr_query_req *q,
                         const vr_selection *first, vr_route *out) {
  vr_selection sel = *first;
  out->wanted = sel.variant;
  out->prefetch = -1;
  /* chosen as serving, but its instances are gone since the index was
   * built: it must be loaded again, with the same fallbacks */
  if (sel.outcome == VR_SEL_ACTIVE && !e->available(e->self, sel.variant))
    sel.outcome = VR_SEL_LOAD;
  if (sel.outcome == VR_SEL_LOAD && !room(e, sel.variant)) {
    vr_query_req q2 = *q;
    vr_selection s2;
    q2.loaded_only = 1;
    if (vr_select(e->ix, &q2, &s2) == 0 && s2.outcome == VR_SEL_ACTIVE)
      sel = s2;
  }
  if (sel.outcome == VR_SEL_LOAD && !room(e, sel.variant) &&
      !evictable(e, sel.variant)) {
    int alt = pick_fitting(e, q);
    if (alt >= 0) set_variant(e, &sel, alt);
  }
  /* also when the index, built before its instances loaded, still calls
   * the variant one to load: behind() asks whether one serves now */
  if (sel.outcome != VR_SEL_INFEASIBLE && e->backlog &&
      behind(e, sel.variant, q->latency_ms)) {
    int alt = pick_spill(e, q, sel.variant);
    /* step 3c: the Overloaded state is the monitoring's (the last
     * control period's load above the serving instances' saturation
     * throughput), not a momentary queue: a Poisson clump at 4 QPS
     * is no reason to load a GPU variant */
    if (alt < 0 && e->snap->variants[sel.variant].state == VR_VS_OVERLOADED)
      out->prefetch = pick_inactive(e, q);
    if (alt >= 0) {
      sel.outcome = VR_SEL_ACTIVE;
      set_variant(e, &sel, alt);
    }
  }
  out->sel = sel;
  out->variant = sel.variant;
  out->outcome = sel.outcome == VR_SEL_INFEASIBLE ? VR_ROUTE_INFEASIBLE
                 : sel.outcome == VR_SEL_ACTIVE   ? VR_ROUTE_SERVE
                                                  : vr_route_load(e, sel.variant);
}
