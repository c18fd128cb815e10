/*
 * Per-query variant selection (INFaaS), over indices built once per
 * snapshot.
 *
 * A query names an app (model-less: any model of the app may serve it) or
 * a model, plus a latency SLO and a minimum accuracy. Selection:
 *   1. among variants with serving instances (state active or overloaded)
 *      that meet both, the cheapest per query (cost_per_s / peak qps;
 *      ties: lower latency) -> VR_SEL_ACTIVE, then the caller sends it to
 *      the least-loaded instance (vr_select_instance). Overloaded variants
 *      stay eligible: the autoscaler adds their capacity, while moving
 *      their whole load elsewhere for a period makes load flip-flop
 *      between variants (we measured it in the simulator);
 *   2. else among variants with no serving instance that meet both, the one
 *      with the lowest load + inference latency -> VR_SEL_LOAD (the caller
 *      loads it, or queues behind an instance already loading);
 *   3. else an interfered variant that meets both -> VR_SEL_ACTIVE;
 *   4. else VR_SEL_INFEASIBLE with the closest variant: the fastest one
 *      meeting the accuracy, or failing that the most accurate one, and
 *      what it can give (its tail latency and accuracy).
 * "Meets" means accuracy >= minimum and 2 x tail latency at batch 1 <= SLO
 * (a query may wait for the batch in service, then run in its own; the
 * same rule as vr_profile_batch_for_slo).
 *
 * Cost: vr_select is O(log^2 n) for n variants of the group (a merge-sort
 * tree over variants ordered by accuracy, each node sorted by latency with
 * prefix minima); building is O(n log n). The index owns all its memory and
 * keeps no pointer into the snapshot after vr_select_build returns, so it
 * stays valid until the next build. Not thread-safe for build; concurrent
 * vr_select calls on a built index are safe (read-only).
 */
#ifndef VR_POLICY_SELECT_H
#define VR_POLICY_SELECT_H

#include "policy/snapshot.h"

typedef struct vr_select_index vr_select_index;

typedef enum {
  VR_SEL_ACTIVE = 0,
  VR_SEL_LOAD = 1,
  VR_SEL_INFEASIBLE = 2,
} vr_sel_outcome;

typedef struct vr_query_req {
  int group;           /* from vr_select_group(); resolve once per stream */
  double latency_ms;   /* SLO */
  double min_accuracy; /* percent */
  int loaded_only;     /* skip inactive variants: the caller has no room to
                          load one, so a busy loaded variant is better */
} vr_query_req;

/* "Meets the accuracy" wherever the request path asks it (selection, the
 * route fallbacks, the autoscaler's moves): one rule, with room for the
 * rounding of percentages read from JSON and CSV. */
static inline int vr_acc_meets(double accuracy, double min_accuracy) {
  return accuracy + 1e-9 >= min_accuracy;
}

typedef struct vr_selection {
  int outcome;       /* vr_sel_outcome */
  int variant;       /* snapshot variant index (closest if infeasible) */
  double latency_ms; /* its tail latency at batch 1 */
  double accuracy;
} vr_selection;

vr_select_index *vr_select_new(void);
void vr_select_free(vr_select_index *ix);
/* (Re)builds the index from a snapshot, reusing memory. 0 or VR_ENOMEM. */
int vr_select_build(vr_select_index *ix, const vr_snapshot *s);

/* Group id of an app ("app:NAME"-free: pass kind 'a' for app, 'm' for
 * model) or -1 when no variant belongs to it. */
int vr_select_group(const vr_select_index *ix, char kind, const char *name);

/* 0, or VR_EINVAL for a bad group. Always fills *out on 0. */
int vr_select(const vr_select_index *ix, const vr_query_req *q,
              vr_selection *out);

/* Least-loaded serving instance of a variant: the snapshot instance index
 * with the lowest load[i] (caller's live load, e.g. queue length over
 * saturation qps, indexed by snapshot instance index), or -1 if the
 * variant has no serving instance. */
int vr_select_instance(const vr_select_index *ix, int variant,
                       const double *load);
/* Serving instances of a variant (snapshot instance indices). */
const int *vr_select_instances(const vr_select_index *ix, int variant,
                               int *n);

#endif
