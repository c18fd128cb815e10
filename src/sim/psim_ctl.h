/*
 * Pipeline policies for the simulator: each is a replan callback (psim.h)
 * that calls the pure planners in src/policy with the simulator's demand
 * estimate, plus its early-dropping mode.
 *
 *  - loki: Loki's MILPs (policy/loki.h: hardware scaling, then accuracy
 *    scaling) with early dropping + opportunistic rerouting; loki_no_drop,
 *    loki_last_task, loki_per_task: the same plans with the paper's
 *    ablation drop modes.
 *  - hw: hardware scaling only (InferLine-like): Loki's step 1, the most
 *    accurate variants on the fewest workers; beyond the cluster, the best
 *    effort with those variants.
 *  - proteus: pipeline-agnostic accuracy scaling (vr_proteus_plan) on the
 *    per-task demand it observes, whole cluster.
 *  - infaas: INFaaS-like per task (vr_pipe_plan_cheapest).
 *  Baselines drop per task (a request behind its task's budget is dropped,
 *  and every mode but loki_no_drop drops requests whose deadline passed
 *  before their batch starts).
 *
 * Ownership: a vr_psim_ctl borrows the pipeline data; it holds no memory.
 */
#ifndef VR_SIM_PSIM_CTL_H
#define VR_SIM_PSIM_CTL_H

#include "sim/psim.h"

typedef struct vr_psim_ctl {
  const vr_pipe_data *data;
  int kind;     /* index into the policy table */
  double slack; /* capacity headroom for planners (default 1.0) */
} vr_psim_ctl;

/* Names of the policies, NULL-terminated. */
extern const char *const vr_psim_policy_names[];

/* Sets ctl for policy `name` and fills cfg->replan, replan_ctx and (if
 * drop_mode < 0) cfg->drop_mode with the policy's default. VR_ENOENT for
 * an unknown name (message lists the known ones). */
int vr_psim_policy(const char *name, const vr_pipe_data *d, vr_psim_ctl *ctl,
                   vr_psim_cfg *cfg, vr_errbuf *err);

#endif
