/*
 * Baseline policies, expressed with the same snapshot/actions interface so
 * the simulator compares them with INFaaS on equal terms.
 *
 * Clipper+: the operator pre-provisions a fixed set of variants with a
 * fixed number of instances each (sized for peak); nothing scales.
 * SM+ (SageMaker-style): one fixed variant per model, horizontally
 * autoscaled on its load with the same headroom target and patience rule
 * as INFaaS, but never changing variant.
 */
#include "policy/policy_int.h"

static int check_fixed(const vr_policy_cfg *c, const vr_snapshot *s) {
  if (c->nfixed < 1 || c->nfixed > VR_POL_MAX_FIXED) return VR_EINVAL;
  for (int i = 0; i < c->nfixed; i++)
    if (c->fixed[i].variant < 0 || (size_t)c->fixed[i].variant >= s->nvariants)
      return VR_EINVAL;
  return 0;
}

static int run(const vr_policy_cfg *c, vr_policy_state *st,
               const vr_snapshot *s, vr_actions *out, int autoscale) {
  int rc = check_fixed(c, s);
  if (rc) return rc;
  vr_pol_agg a;
  vr_place pl;
  if ((rc = vr_pol_agg_init(&a, c, s))) return rc;
  if ((rc = vr_place_init(&pl, s))) {
    vr_pol_agg_free(&a);
    return rc;
  }
  for (int i = 0; i < c->nfixed && !rc; i++) {
    int v = c->fixed[i].variant;
    const vr_pol_vagg *g = &a.v[v];
    const vr_profile *p = &s->variants[v].prof;
    int want = c->fixed[i].instances > 0 ? c->fixed[i].instances : 1;
    if (autoscale) {
      int need = vr_pol_need(g->q, c->slack, g->sat);
      want = need > 1 ? need : 1;
      if (c->max_instances > 0 && want > c->max_instances)
        want = c->max_instances;
      if (want <= g->n) {
        /* the same scale-down rule as INFaaS, never below one instance */
        rc = vr_pol_scale_down(c, st, s, &a, &pl, v, 1, out);
        continue;
      }
      rc = vr_pol_set_since(st, p->variant, -1);
    }
    for (int k = g->n; k < want && !rc; k++) {
      int placed = vr_place_load(&pl, v, out, autoscale ? "replicate"
                                                        : "provision");
      if (placed < 0) rc = placed; /* 0: no room, recorded for workers */
    }
  }
  if (!rc) rc = vr_pol_workers(c, st, s, &pl, &a, out);
  vr_place_free(&pl);
  vr_pol_agg_free(&a);
  return rc;
}

int vr_pol_clipper(const vr_policy_cfg *c, vr_policy_state *st,
                   const vr_snapshot *s, vr_actions *out) {
  return run(c, st, s, out, 0);
}

int vr_pol_sm(const vr_policy_cfg *c, vr_policy_state *st,
              const vr_snapshot *s, vr_actions *out) {
  return run(c, st, s, out, 1);
}
