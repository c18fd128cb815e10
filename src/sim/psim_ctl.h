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
 *  - inferline, inferline_plan, cg_peak, cg_mean, cg_peak_static,
 *    cg_mean_static: InferLine's configurations and serving-time tick
 *    (policy/il_tick.h), configured by ctl->arg (sim/il_sim.h runs them);
 *    run them with ctl_period_s = the tick (0.1 s).
 *
 * Ownership: a vr_psim_ctl borrows the pipeline data and arg; it owns the
 * policy's ctx (vr_psim_ctl_free).
 */
#ifndef VR_SIM_PSIM_CTL_H
#define VR_SIM_PSIM_CTL_H

#include "sim/psim.h"

typedef struct vr_psim_ctl {
  const vr_pipe_data *data;
  int kind;     /* index into the policy table */
  double slack; /* capacity headroom for planners (default 1.0) */
  void *arg;    /* passed to the policy's ctx_new (InferLine: a
                   vr_il_pipe_arg); set it after vr_psim_policy */
  void *ctx;    /* the policy's per-pipeline memory (owned; created at the
                   first call; vr_psim_ctl_free) */
} vr_psim_ctl;

/* The controller vr_psim_policy installs (cfg->replan), for callers that
 * wrap it (ctx = ctl). */
int vr_psim_policy_replan(void *ctl, const vr_psim_view *v, vr_pipe_plan *plan,
                          vr_errbuf *err);

/* Frees the policy's memory (ctl->ctx). */
void vr_psim_ctl_free(vr_psim_ctl *ctl);

/* Names of the policies, NULL-terminated. */
extern const char *const vr_psim_policy_names[];

/* Sets ctl for policy `name` and fills cfg->replan, replan_ctx and (if
 * drop_mode < 0) cfg->drop_mode with the policy's default. VR_ENOENT for
 * an unknown name (message lists the known ones). */
int vr_psim_policy(const char *name, const vr_pipe_data *d, vr_psim_ctl *ctl,
                   vr_psim_cfg *cfg, vr_errbuf *err);

#endif
