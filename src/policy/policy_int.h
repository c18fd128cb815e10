/* Internal helpers shared by policy.c, autoscale.c and baselines.c. */
#ifndef VR_POLICY_POLICY_INT_H
#define VR_POLICY_POLICY_INT_H

#include "policy/place.h"
#include "policy/policy.h"

/* Per-variant aggregates of one snapshot. */
typedef struct vr_pol_vagg {
  int n;          /* non-draining instances (serving + loading) */
  int serving, loading, interfered;
  double sat;     /* saturation qps of one instance under the SLO */
  double q;       /* load: max(arrival, served) qps, raised when backlogged */
  int backlog;    /* rows queued at its serving instances */
  int spill_only; /* it served queries this period but selection chose it
                     for none: it takes only overflow spilled to it from
                     an Overloaded variant (policy/route.h 3b), whose
                     demand counts that load; the autoscaler neither
                     grows it nor keeps it for that load */
} vr_pol_vagg;

typedef struct vr_pol_agg {
  vr_pol_vagg *v; /* nvariants entries, owned */
} vr_pol_agg;

int vr_pol_agg_init(vr_pol_agg *a, const vr_policy_cfg *c,
                    const vr_snapshot *s);
void vr_pol_agg_free(vr_pol_agg *a);

int64_t vr_pol_since(vr_policy_state *st, const char *key);
int vr_pol_set_since(vr_policy_state *st, const char *key, int64_t t);
int vr_pol_unload_one(vr_place *pl, int v, vr_actions *out, const char *why);
int vr_pol_batches(const vr_snapshot *s, vr_actions *out);
int vr_pol_workers(const vr_policy_cfg *c, vr_policy_state *st,
                   const vr_snapshot *s, vr_place *pl, const vr_pol_agg *a,
                   vr_actions *out);

/* Interference detection and mitigation with a shared placement (failed
 * moves ask for workers). */
int vr_pol_interference(const vr_policy_cfg *c, const vr_snapshot *s,
                        vr_place *pl, vr_actions *out);
/* Moves all instances off the least-used worker when they fit elsewhere. */
int vr_pol_consolidate(const vr_snapshot *s, vr_place *pl, vr_actions *out);

int vr_pol_infaas_scale(const vr_policy_cfg *c, vr_policy_state *st,
                        const vr_snapshot *s, vr_actions *out);
int vr_pol_clipper(const vr_policy_cfg *c, vr_policy_state *st,
                   const vr_snapshot *s, vr_actions *out);
int vr_pol_sm(const vr_policy_cfg *c, vr_policy_state *st,
              const vr_snapshot *s, vr_actions *out);
int vr_pol_asyfunc(const vr_policy_cfg *c, vr_policy_state *st,
                   const vr_snapshot *s, vr_actions *out);

/* Removes one instance of v (all but `keep` when idle) once it has been
 * removable for v's load time; the scale-down rule of INFaaS and SM+. */
int vr_pol_scale_down(const vr_policy_cfg *c, vr_policy_state *st,
                      const vr_snapshot *s, const vr_pol_agg *a, vr_place *pl,
                      int v, int keep, vr_actions *out);

/* Instances needed to serve q qps with headroom `slack` at `sat` each. */
int vr_pol_need(double q, double slack, double sat);

#endif
