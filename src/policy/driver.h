/*
 * Policy driver: everything a control loop keeps around a policy, written
 * once for the live control plane (control/control.c) and the simulator
 * (sim/sim_ctl.c): the policy config and its per-policy state, the
 * selection index the request path reads, the action list, the snapshot
 * buffers reused each period, and their teardown. A side supplies only
 *   - a clock (monotonic live, virtual in the simulator), and
 *   - an actuator table: how it loads, unloads, sets a batch cap, migrates,
 *     pairs/unpairs a shadow, sets routes, adds/removes a worker, records
 *     a state. A NULL slot means "this side cannot do that": the action is
 *     counted as skipped, never half-done.
 *
 * One period, on either side:
 *
 *   vr_driver_begin(d, now);                 // clears the snapshot
 *   vr_driver_add_variant / _instance / _worker / _wtype (from own state)
 *   vr_driver_decide(d);                     // the policy's tick
 *   vr_driver_apply_all(d);                  // through the actuator table
 *   ... rebuild the snapshot ..., vr_driver_index(d)  // selection index
 *
 * How a new policy plugs in (pipelines, Loki, InferLine, AsyFunc): write
 * it as a pure tick in src/policy (snapshot in, actions out; policy.h) and
 * add its kind to vr_policy_tick. If it needs an action neither side has
 * yet, add a kind to vr_action_kind (snapshot.h) and a slot below, and
 * fill that slot in both actuator tables. Nothing else: the live server
 * and the simulator then run the same decisions, and a difference between
 * them is a difference in an actuator, which is where to look.
 *
 * Threads: none. The live control plane calls the driver under its own
 * mutex (apply may run outside it: actions are copied out first).
 */
#ifndef VR_POLICY_DRIVER_H
#define VR_POLICY_DRIVER_H

#include "base/clock.h"
#include "base/vec.h"
#include "policy/policy.h"
#include "policy/select.h"

/* How one side carries out actions. Each slot returns 0 or a VR_E* (an
 * error stops vr_driver_apply_all and is returned); `self` is passed
 * back. */
typedef struct vr_actuator {
  int (*load)(void *self, const vr_action *a);
  int (*unload)(void *self, const vr_action *a);
  int (*set_batch)(void *self, const vr_action *a);
  int (*migrate)(void *self, const vr_action *a);
  int (*pair_shadow)(void *self, const vr_action *a);
  int (*unpair_shadow)(void *self, const vr_action *a);
  int (*set_routes)(void *self, const vr_action *a);
  int (*add_worker)(void *self, const vr_action *a);
  int (*remove_worker)(void *self, const vr_action *a);
  int (*set_vstate)(void *self, const vr_action *a);
  int (*set_istate)(void *self, const vr_action *a);
  void *self;
} vr_actuator;

typedef struct vr_driver {
  vr_policy_cfg cfg;
  vr_policy_state st;      /* the policy's memory between ticks */
  vr_select_index *ix;     /* built by vr_driver_index */
  uint64_t ix_gen;         /* bumped by every build (memo keys) */
  vr_actions acts;         /* the last decision */
  vr_snapshot snap;        /* points into the vectors below */
  vr_vec sv, si, sw, swt;  /* snapshot arrays, reused */
  vr_actuator act;
  vr_clock *clock;         /* borrowed */
  /* actions carried out / that this side has no slot for, by kind
   * (updated atomically: read them with __atomic_load_n) */
  uint64_t applied[VR_ACT__COUNT];
  uint64_t skipped[VR_ACT__COUNT];
} vr_driver;

/* 0 or VR_ENOMEM. cfg and act are copied; clock is borrowed. */
int vr_driver_init(vr_driver *d, const vr_policy_cfg *cfg,
                   const vr_actuator *act, vr_clock *clock);
void vr_driver_free(vr_driver *d);

static inline int64_t vr_driver_now(vr_driver *d) {
  return vr_clock_now(d->clock);
}

/* Starts a new snapshot at now_ns (empties its tables). */
void vr_driver_begin(vr_driver *d, int64_t now_ns);
/* Append to the snapshot; return the new index, or VR_ENOMEM. */
int vr_driver_add_variant(vr_driver *d, const vr_snap_variant *v);
int vr_driver_add_instance(vr_driver *d, const vr_snap_instance *in);
int vr_driver_add_worker(vr_driver *d, const vr_snap_worker *w);
int vr_driver_add_wtype(vr_driver *d, const vr_snap_wtype *t);

/* Runs the configured policy on the snapshot into d->acts (cleared
 * first). 0, VR_ENOMEM or VR_EINVAL (see vr_policy_tick). */
int vr_driver_decide(vr_driver *d);
/* Carries out one action through the actuator table. */
int vr_driver_apply(vr_driver *d, const vr_action *a);
/* Carries out every action of the last decision, in order. */
int vr_driver_apply_all(vr_driver *d);
/* Rebuilds the selection index from the snapshot. */
int vr_driver_index(vr_driver *d);

/* ---- monitoring helpers both sides use to fill instances ---------------- */

#define VR_SNAP_MAX_SAMPLES 1024

/* Median of n samples (n <= VR_SNAP_MAX_SAMPLES; the input is not
 * reordered); 0 when n == 0. */
double vr_snap_median(const float *v, int n);
/* p50 and p99 (nearest rank below) of n compute-time samples into the
 * instance (left untouched when n == 0). */
void vr_snap_latency(vr_snap_instance *x, const float *v, int n);

#endif
