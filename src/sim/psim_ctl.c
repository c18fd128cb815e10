/* Pipeline policies as simulator controllers (psim_ctl.h): the simulator's
 * view becomes a pipeline snapshot (policy/pipe_policy.h) and the policy's
 * plan function decides, as it does live. */
#include "sim/psim_ctl.h"

#include <string.h>

#include "policy/pipe_policy.h"

static int replan(void *ctx, const vr_psim_view *v, vr_pipe_plan *plan, vr_errbuf *err) {
  const vr_psim_ctl *c = ctx;
  const vr_pipe_policy_def *def = &vr_pipe_policies[c->kind];
  vr_pipe_snap s = {.now_s = v->now_s, .p = c->data->pipe, .prof = c->data->prof,
                    .demand_ewma = v->demand_ewma, .demand_last = v->demand_last,
                    .workers = v->workers, .slack = c->slack};
  memcpy(s.task_qps, v->task_qps, sizeof s.task_qps);
  return def->plan(NULL, &s, plan, err);
}

const char *const vr_psim_policy_names[] = {
    "loki", "loki_no_drop", "loki_last_task", "loki_per_task",
    "hw", "proteus", "infaas", NULL};

int vr_psim_policy(const char *name, const vr_pipe_data *d, vr_psim_ctl *ctl,
                   vr_psim_cfg *cfg, vr_errbuf *err) {
  const vr_pipe_policy_def *def = vr_pipe_policy_find(name, err);
  if (!def) return VR_ENOENT;
  memset(ctl, 0, sizeof *ctl);
  ctl->data = d, ctl->kind = (int)(def - vr_pipe_policies), ctl->slack = 1.0;
  cfg->replan = replan;
  cfg->replan_ctx = ctl;
  cfg->plan = NULL;
  if (cfg->drop_mode < 0) cfg->drop_mode = def->drop_mode;
  return 0;
}
