/* Pipeline policies (pipe_policy.h): the planners of Loki and its
 * baselines over one snapshot, the replan rule and plan -> actions. */
#include "policy/pipe_policy.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "policy/il_tick.h"
#include "policy/loki.h"

/* The most accurate variant of each task. */
static void most_accurate(const vr_pipeline *p, int *choice) {
  for (int t = 0; t < p->ntasks; t++) {
    choice[t] = 0;
    for (int v = 1; v < p->tasks[t].nvariants; v++)
      if (p->tasks[t].variants[v].accuracy > p->tasks[t].variants[choice[t]].accuracy)
        choice[t] = v;
  }
}

/* Per-task demand as a pipeline-agnostic policy sees it: the observed
 * rates, or before traffic reached a task, the pipeline's expected rates
 * under the most accurate variants. */
static void task_demand(const vr_pipe_snap *s, double *q) {
  const vr_pipeline *p = s->p;
  int choice[VR_PIPE_MAX_TASKS], seen = 0;
  for (int t = 0; t < p->ntasks; t++) seen |= s->task_qps[t] > 0;
  if (seen) {
    for (int t = 0; t < p->ntasks; t++) q[t] = s->task_qps[t];
    return;
  }
  most_accurate(p, choice);
  vr_pipeline_rates(p, choice, NULL, s->demand_ewma, q);
}

static void loki_opts(const vr_pipe_snap *s, vr_loki_opts *o) {
  vr_loki_opts_default(o);
  if (s->slack > 0) o->slack = s->slack;
}

/* InferLine-like: the MILP's hardware scaling only (most accurate
 * variants, fewest workers; best effort on the whole cluster beyond it). */
static int plan_hw(void *ctx, const vr_pipe_snap *s, vr_pipe_plan *plan, vr_errbuf *err) {
  (void)ctx;
  vr_loki_opts o;
  loki_opts(s, &o);
  o.hw_only = 1;
  return vr_loki_plan(s->p, s->prof, s->demand_ewma, s->workers, &o, plan, NULL, err);
}

/* Loki: hardware scaling, then accuracy scaling (the drop mode comes with
 * the policy name: loki = reroute, loki_* = the ablation modes). */
static int plan_loki(void *ctx, const vr_pipe_snap *s, vr_pipe_plan *plan, vr_errbuf *err) {
  (void)ctx;
  vr_loki_opts o;
  loki_opts(s, &o);
  return vr_loki_plan(s->p, s->prof, s->demand_ewma, s->workers, &o, plan, NULL, err);
}

/* Proteus-like: per-task accuracy scaling on the observed per-task demand,
 * the whole cluster, no pipeline knowledge. */
static int plan_proteus(void *ctx, const vr_pipe_snap *s, vr_pipe_plan *plan,
                        vr_errbuf *err) {
  (void)ctx;
  double q[VR_PIPE_MAX_TASKS];
  task_demand(s, q);
  vr_loki_opts o;
  loki_opts(s, &o);
  return vr_proteus_plan(s->p, s->prof, q, s->workers, &o, plan, NULL, err);
}

/* INFaaS-like per task: cheapest variant per task, scaled to its demand. */
static int plan_infaas(void *ctx, const vr_pipe_snap *s, vr_pipe_plan *plan,
                       vr_errbuf *err) {
  (void)ctx, (void)err;
  double q[VR_PIPE_MAX_TASKS];
  task_demand(s, q);
  vr_pipe_plan_cheapest(s->p, s->prof, q, s->workers, s->slack > 0 ? s->slack : 1, plan);
  return 0;
}

const vr_pipe_policy_def vr_pipe_policies[] = {
    {"loki", plan_loki, VR_EDROP_REROUTE,
     "Loki: hardware then accuracy scaling (MILP), early drop + reroute"},
    {"loki_no_drop", plan_loki, VR_EDROP_NONE, "Loki's plans, no early dropping"},
    {"loki_last_task", plan_loki, VR_EDROP_LAST, "Loki's plans, drop at the last task"},
    {"loki_per_task", plan_loki, VR_EDROP_PER_TASK, "Loki's plans, drop per task budget"},
    {"hw", plan_hw, VR_EDROP_PER_TASK, "hardware scaling only (InferLine-like)"},
    {"proteus", plan_proteus, VR_EDROP_PER_TASK,
     "pipeline-agnostic accuracy scaling (Proteus-like)"},
    {"infaas", plan_infaas, VR_EDROP_PER_TASK, "cheapest variant per task (INFaaS-like)"},
    /* InferLine (policy/il_tick.h): configured once per pipeline by the
     * side's planner (arg), then the tick every tick; queues, no early
     * drop */
    {"inferline", vr_il_pipe_plan, VR_EDROP_NONE,
     "InferLine: planned configuration + traffic-envelope tuner",
     vr_il_pipe_new_inferline, vr_il_pipe_free, 1},
    {"inferline_plan", vr_il_pipe_plan, VR_EDROP_NONE,
     "InferLine's planned configuration, no tuner", vr_il_pipe_new_plan,
     vr_il_pipe_free, 1},
    {"cg_peak", vr_il_pipe_plan, VR_EDROP_NONE,
     "coarse-grained, sized for the peak, AutoScale-tuned",
     vr_il_pipe_new_cg_peak, vr_il_pipe_free, 1},
    {"cg_mean", vr_il_pipe_plan, VR_EDROP_NONE,
     "coarse-grained, sized for the mean, AutoScale-tuned",
     vr_il_pipe_new_cg_mean, vr_il_pipe_free, 1},
    {"cg_peak_static", vr_il_pipe_plan, VR_EDROP_NONE,
     "coarse-grained, sized for the peak, static", vr_il_pipe_new_cg_peak_static,
     vr_il_pipe_free, 1},
    {"cg_mean_static", vr_il_pipe_plan, VR_EDROP_NONE,
     "coarse-grained, sized for the mean, static", vr_il_pipe_new_cg_mean_static,
     vr_il_pipe_free, 1},
    {NULL, NULL, 0, NULL, NULL, NULL, 0},
};

const vr_pipe_policy_def *vr_pipe_policy_find(const char *name, vr_errbuf *err) {
  for (int i = 0; name && vr_pipe_policies[i].name; i++)
    if (!strcmp(name, vr_pipe_policies[i].name)) return &vr_pipe_policies[i];
  char known[256] = "";
  for (int i = 0; vr_pipe_policies[i].name; i++)
    snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
             vr_pipe_policies[i].name);
  vr_errf(err, VR_ENOENT, "unknown pipeline policy '%s' (known: %s)", name ? name : "",
          known);
  return NULL;
}

int vr_pipe_replan_due(int first, double now_s, double next_s, double ewma,
                       double planned_for, double change) {
  if (first || now_s + 1e-9 >= next_s) return 1;
  /* a plan for no demand (an idle start) changes with the first demand:
   * any rate is more than `change` times none */
  return change > 0 && fabs(ewma - planned_for) > change * (planned_for > 0 ? planned_for : 0);
}

/* ---- plan -> actions ------------------------------------------------------ */

static int slot_task(const vr_pipe_plan *plan, int k) {
  int t = 0;
  while (t + 1 < plan->ntasks && plan->off[t + 1] <= k) t++;
  return t;
}

static int clamp_batch(const vr_pipe_snap *s, int slot, int b) {
  int mb = s->prof[slot].max_batch;
  if (b < 1) b = 1;
  return mb > 0 && b > mb ? mb : b;
}

int vr_pipe_plan_actions(const vr_pipe_snap *s, const vr_pipe_plan *plan, int *assign,
                         vr_actions *out) {
  int nslots = plan->off[plan->ntasks];
  int *want = vr_calloc((size_t)(nslots ? nslots : 1), sizeof *want);
  int *mine = vr_calloc((size_t)(s->ninst ? s->ninst : 1), sizeof *mine);
  int rc = want && mine ? 0 : VR_ENOMEM;
  for (int i = 0; i < nslots && want; i++) want[i] = plan->a[i].inst > 0 ? plan->a[i].inst : 0;
  /* Held instances fill the slots of their pool variant in slot order. */
  for (int i = 0; !rc && i < s->ninst; i++) {
    mine[i] = -1;
    for (int k = 0; k < nslots && mine[i] < 0; k++)
      if (s->slot_var[k] == s->inst[i].var && want[k] > 0) want[k]--, mine[i] = k;
  }
  /* A surplus instance makes room for a missing one: MIGRATE (load the
   * new one in its room, then drain it), preferring a missing instance of
   * a task the surplus one could serve, so a task changing variant is
   * never left without one while the new instance loads. */
  int *pair = vr_calloc((size_t)(s->ninst ? s->ninst : 1), sizeof *pair);
  if (!pair) rc = VR_ENOMEM;
  for (int pass = 0; !rc && pass < 2; pass++)
    for (int i = 0; i < s->ninst; i++) {
      if (pass == 0) pair[i] = -1;
      if (mine[i] >= 0 || pair[i] >= 0) continue;
      for (int k = 0; k < nslots && pair[i] < 0; k++) {
        if (want[k] <= 0) continue;
        int t = slot_task(plan, k), same = 0;
        for (int j = plan->off[t]; j < plan->off[t + 1] && !same; j++)
          same = s->slot_var[j] == s->inst[i].var;
        if (same || pass == 1) want[k]--, pair[i] = k;
      }
    }
  for (int i = 0; !rc && i < s->ninst; i++)
    if (mine[i] < 0 && pair[i] < 0)
      rc = vr_actions_push(out, VR_ACT_UNLOAD, s->inst[i].var, s->inst[i].id, 0, -1, 0,
                           "pipeline plan: not needed");
  for (int i = 0; !rc && i < s->ninst; i++) {
    if (mine[i] < 0) continue;
    int b = clamp_batch(s, mine[i], plan->a[mine[i]].batch);
    if (b != s->inst[i].batch)
      rc = vr_actions_push(out, VR_ACT_SET_BATCH, s->inst[i].var, s->inst[i].id, 0, -1, b,
                           "pipeline plan: batch size");
  }
  for (int i = 0; !rc && i < s->ninst; i++)
    if (mine[i] < 0 && pair[i] >= 0)
      rc = vr_actions_push(out, VR_ACT_MIGRATE, s->slot_var[pair[i]], s->inst[i].id, 0, -1,
                           clamp_batch(s, pair[i], plan->a[pair[i]].batch),
                           "pipeline plan: replace");
  vr_free(pair);
  for (int k = 0; !rc && k < nslots; k++)
    for (int n = 0; !rc && n < want[k]; n++)
      rc = vr_actions_push(out, VR_ACT_LOAD, s->slot_var[k], -1, 0, -1,
                           clamp_batch(s, k, plan->a[k].batch), "pipeline plan: instance");
  if (!rc && assign) memcpy(assign, mine, (size_t)s->ninst * sizeof *assign);
  vr_free(want);
  vr_free(mine);
  return rc;
}
