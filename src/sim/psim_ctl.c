/* Pipeline policies as simulator controllers (psim_ctl.h). */
#include "sim/psim_ctl.h"

#include <stdio.h>
#include <string.h>

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

static int replan_hw(void *ctx, const vr_psim_view *v, vr_pipe_plan *plan,
                     vr_errbuf *err) {
  const vr_psim_ctl *c = ctx;
  int choice[VR_PIPE_MAX_TASKS];
  most_accurate(c->data->pipe, choice);
  vr_pipe_plan_scale(c->data->pipe, c->data->prof, choice, v->demand_ewma,
                     v->workers, c->slack, plan);
  return 0;
}

typedef struct policy_def {
  vr_psim_replan_fn fn;
  int drop_mode;
} policy_def;

const char *const vr_psim_policy_names[] = {"hw", NULL};
static const policy_def POLICIES[] = {
    {replan_hw, VR_EDROP_PER_TASK},
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
