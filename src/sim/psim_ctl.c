/* Pipeline policies as simulator controllers (psim_ctl.h). */
#include "sim/psim_ctl.h"

#include <stdio.h>
#include <string.h>

#include "policy/loki.h"

/* Per-task demand as a pipeline-agnostic policy sees it: the observed
 * rates, or before traffic reached a task, the pipeline's expected rates
 * under the most accurate variants. */
static void most_accurate(const vr_pipeline *p, int *choice);
static void task_demand(const vr_psim_ctl *c, const vr_psim_view *v,
                        double *q) {
  const vr_pipeline *p = c->data->pipe;
  int choice[VR_PIPE_MAX_TASKS], seen = 0;
  for (int t = 0; t < p->ntasks; t++) seen |= v->task_qps[t] > 0;
  if (seen) {
    for (int t = 0; t < p->ntasks; t++) q[t] = v->task_qps[t];
    return;
  }
  most_accurate(p, choice);
  vr_pipeline_rates(p, choice, NULL, v->demand_ewma, q);
}

/* The most accurate variant of each task. */
static void most_accurate(const vr_pipeline *p, int *choice) {
  for (int t = 0; t < p->ntasks; t++) {
    choice[t] = 0;
    for (int v = 1; v < p->tasks[t].nvariants; v++)
      if (p->tasks[t].variants[v].accuracy >
          p->tasks[t].variants[choice[t]].accuracy)
        choice[t] = v;
  }
}

/* InferLine-like: the MILP's hardware scaling only (most accurate
 * variants, fewest workers; best effort on the whole cluster beyond it). */
static int replan_hw(void *ctx, const vr_psim_view *v, vr_pipe_plan *plan,
                     vr_errbuf *err) {
  const vr_psim_ctl *c = ctx;
  vr_loki_opts o;
  vr_loki_opts_default(&o);
  o.slack = c->slack, o.hw_only = 1;
  return vr_loki_plan(c->data->pipe, c->data->prof, v->demand_ewma,
                      v->workers, &o, plan, NULL, err);
}

/* Loki: hardware scaling, then accuracy scaling (the drop mode comes with
 * the policy name: loki = reroute, loki_* = the ablation modes). */
static int replan_loki(void *ctx, const vr_psim_view *v, vr_pipe_plan *plan,
                       vr_errbuf *err) {
  const vr_psim_ctl *c = ctx;
  vr_loki_opts o;
  vr_loki_opts_default(&o);
  o.slack = c->slack;
  return vr_loki_plan(c->data->pipe, c->data->prof, v->demand_ewma,
                      v->workers, &o, plan, NULL, err);
}

/* Proteus-like: per-task accuracy scaling on the observed per-task demand,
 * the whole cluster, no pipeline knowledge. Before any request reached a
 * task (t = 0) it assumes the pipeline's mean rates. */
static int replan_proteus(void *ctx, const vr_psim_view *v,
                          vr_pipe_plan *plan, vr_errbuf *err) {
  const vr_psim_ctl *c = ctx;
  double q[VR_PIPE_MAX_TASKS];
  task_demand(c, v, q);
  vr_loki_opts o;
  vr_loki_opts_default(&o);
  o.slack = c->slack;
  return vr_proteus_plan(c->data->pipe, c->data->prof, q, v->workers, &o,
                         plan, NULL, err);
}

/* INFaaS-like per task: cheapest variant per task, scaled to its demand. */
static int replan_infaas(void *ctx, const vr_psim_view *v, vr_pipe_plan *plan,
                         vr_errbuf *err) {
  const vr_psim_ctl *c = ctx;
  double q[VR_PIPE_MAX_TASKS];
  task_demand(c, v, q);
  vr_pipe_plan_cheapest(c->data->pipe, c->data->prof, q, v->workers,
                        c->slack, plan);
  return 0;
}

typedef struct policy_def {
  vr_psim_replan_fn fn;
  int drop_mode;
} policy_def;

const char *const vr_psim_policy_names[] = {
    "loki", "loki_no_drop", "loki_last_task", "loki_per_task",
    "hw", "proteus", "infaas", NULL};
static const policy_def POLICIES[] = {
    {replan_loki, VR_EDROP_REROUTE}, {replan_loki, VR_EDROP_NONE},
    {replan_loki, VR_EDROP_LAST},    {replan_loki, VR_EDROP_PER_TASK},
    {replan_hw, VR_EDROP_PER_TASK},  {replan_proteus, VR_EDROP_PER_TASK},
    {replan_infaas, VR_EDROP_PER_TASK},
};

int vr_psim_policy(const char *name, const vr_pipe_data *d, vr_psim_ctl *ctl,
                   vr_psim_cfg *cfg, vr_errbuf *err) {
  for (int i = 0; vr_psim_policy_names[i]; i++) {
    if (strcmp(name, vr_psim_policy_names[i])) continue;
    memset(ctl, 0, sizeof *ctl);
    ctl->data = d, ctl->kind = i, ctl->slack = 1.0;
    cfg->replan = POLICIES[i].fn;
    cfg->replan_ctx = ctl;
    cfg->plan = NULL;
    if (cfg->drop_mode < 0) cfg->drop_mode = POLICIES[i].drop_mode;
    return 0;
  }
  char known[256] = "";
  for (int i = 0; vr_psim_policy_names[i]; i++)
    snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
             i ? ", " : "", vr_psim_policy_names[i]);
  return vr_errf(err, VR_ENOENT, "unknown pipeline policy '%s' (known: %s)",
                 name, known);
}
