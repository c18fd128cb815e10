/*
 * Pipeline policies: the hook a pipeline resource manager plugs into, run
 * the same way live (control/pipes_policy.c, `vario serve
 * --pipeline-policy NAME`) and in the pipeline simulator (sim/psim_ctl.c,
 * `vario sim --loki`). Pure: no threads, I/O, clock or globals.
 *
 * One period, on either side:
 *
 *   side fills a vr_pipe_snap (planning view of the pipeline, profiles,
 *     demand EWMA, workers, the instances it holds, the plan in force)
 *   if vr_pipe_replan_due(...):  def->plan(&snap, &plan)    // the policy
 *   vr_pipe_plan_actions(&snap, &plan, assign, &acts)       // plan -> actions
 *   side applies acts (live: the control plane's actuator table,
 *     policy/driver.h; sim: its own instances), then
 *   vr_pipe_route_build(view, &plan, demand_ewma, &routes)  // each tick
 *   and every hop: vr_pipe_route_pick + vr_pipe_hop (pipe_plan.h).
 *
 * A second pipeline policy (InferLine's planner/tuner, ...) is one more
 * entry in the table in pipe_policy.c: a plan function over the snapshot
 * (it may keep memory in its own ctx) and its default early-drop mode.
 * Both sides then run it unchanged. A policy with memory per pipeline
 * (InferLine: its planned configuration and the tuner's state) gives
 * ctx_new/ctx_free: each side calls ctx_new once per pipeline, with the
 * first snapshot and the `arg` it was configured with (live:
 * vr_pipes_policy_opts.arg; sim: vr_psim_ctl.arg), and passes the ctx to
 * every plan call. A policy with every_tick set is asked for a plan on
 * every tick instead of by vr_pipe_replan_due (a high-frequency tuner);
 * it reads the root arrivals since the last tick from the snapshot.
 *
 * Slots: (task t, variant v of the planning view) is slot off[t] + v as in
 * pipe_plan.h. A "pool variant" is the side's own index of the runnable
 * variant a slot's instances are made of (live: the control plane's
 * variant index). Two slots may share a pool variant (two tasks served by
 * the same app): their instances are assigned to the slots in slot order.
 *
 * Ownership: the caller owns everything a snapshot points to.
 */
#ifndef VR_POLICY_PIPE_POLICY_H
#define VR_POLICY_PIPE_POLICY_H

#include <stdint.h>

#include "policy/pipe_plan.h"
#include "policy/snapshot.h"

/* An instance the side holds for the pipeline. */
typedef struct vr_pipe_snap_inst {
  int64_t id;
  int var;   /* pool variant */
  int batch; /* its batch cap now */
} vr_pipe_snap_inst;

typedef struct vr_pipe_snap {
  double now_s;
  const vr_pipeline *p;  /* planning view: candidates with accuracy and
                            (observed) mult/shares */
  const vr_profile *prof; /* per slot */
  const int *slot_var;    /* per slot: its pool variant */
  const vr_pipe_snap_inst *inst; /* sorted by id */
  int ninst;
  double demand_ewma;     /* root requests (rows) per second, EWMA */
  double demand_last;     /* in the last second */
  double task_qps[VR_PIPE_MAX_TASKS]; /* requests reaching each task, EWMA */
  int workers;            /* instances the pipeline may hold at once */
  double slack;           /* planner headroom on demand (config; 1 = none) */
  const vr_pipe_plan *cur; /* plan in force, NULL before the first */
  /* Root arrivals since the previous tick, ns on the side's monotonic
   * clock (the one now_s is read from), non-decreasing; NULL/0 when the
   * side records none. */
  const int64_t *arrivals;
  int narrivals;
  int64_t open_queries;   /* root queries in the system now */
} vr_pipe_snap;

/* A pipeline policy: its plan function (0 or VR_E*; on error the plan in
 * force stays) and its default early-dropping mode (vr_edrop_mode). */
typedef int (*vr_pipe_plan_fn)(void *ctx, const vr_pipe_snap *s,
                               vr_pipe_plan *plan, vr_errbuf *err);
typedef struct vr_pipe_policy_def {
  const char *name;
  vr_pipe_plan_fn plan;
  int drop_mode;
  const char *what; /* one line for usage texts */
  /* Optional per-pipeline memory (NULL: plan gets ctx NULL). ctx_new: 0
   * with *ctx set, or VR_E* with err (the side then runs no policy for
   * that pipeline). */
  int (*ctx_new)(const vr_pipe_snap *s, void *arg, void **ctx, vr_errbuf *err);
  void (*ctx_free)(void *ctx);
  int every_tick; /* 1: plan on every tick (see above) */
} vr_pipe_policy_def;

/* Known policies ("loki", "loki_no_drop", "loki_last_task",
 * "loki_per_task", "hw", "proteus", "infaas", and InferLine's
 * "inferline", "inferline_plan", "cg_peak", "cg_mean", "cg_peak_static",
 * "cg_mean_static": policy/il_tick.h); NULL-terminated by name. */
extern const vr_pipe_policy_def vr_pipe_policies[];
/* The policy named `name`, or NULL (err lists the known ones). */
const vr_pipe_policy_def *vr_pipe_policy_find(const char *name, vr_errbuf *err);

/* Whether to replan now: the first time, when the period is due
 * (now_s >= next_s), or on a significant demand change (|ewma -
 * planned_for| > change x planned_for, change > 0; after a plan for no
 * demand, any demand). */
int vr_pipe_replan_due(int first, double now_s, double next_s, double ewma,
                       double planned_for, double change);

/* Actions that turn the instances of s into plan: per pool variant, the
 * plan's instances of every slot on it in slot order; held instances (in
 * s->inst order) fill them. A surplus instance gives its room to a missing
 * one (MIGRATE: instance = the surplus, variant = the missing one's pool
 * variant; a missing one of a task the surplus could serve first), so a
 * task that changes variant keeps serving while the new one loads; the
 * rest of the surplus is unloaded. Out, in order: UNLOAD, SET_BATCH
 * (instance, value = the slot's batch, clamped to the profile's max batch)
 * where the cap differs, MIGRATE, then LOAD (variant = pool variant,
 * worker 0) for what is still missing. assign[i] (s->ninst entries, may be
 * NULL) gets the slot instance i serves, or -1 (to be replaced or
 * unloaded). 0 or VR_ENOMEM. */
int vr_pipe_plan_actions(const vr_pipe_snap *s, const vr_pipe_plan *plan,
                         int *assign, vr_actions *out);

#endif
