/* Why no Loki plan serves (loki.h's errors), for vr_loki_plan and the
 * Proteus-like plan (loki_int.h): what a request needs that no solve can
 * change (workers for the tasks it reaches, a variant and batch per task,
 * the SLO along its path), and CBC's time limit. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "policy/loki_int.h"

int vr__loki_no_plan_in_time(const vr_loki_opts *o, const vr_loki_stats *st,
                             const char *what, vr_errbuf *err) {
  if (st->budget_out)
    return vr_errf(err, VR_EBACKEND, "loki: the plan's solves used up its "
                   "time limit (%g s per plan) and %s; not a proof that none "
                   "exists", o->plan_budget_s, what);
  return vr_errf(err, VR_EBACKEND, "loki: CBC stopped at its time limit "
                 "(%g s per solve) and %s; not a proof that none exists",
                 o->time_limit_s, what);
}

void vr__loki_reached(const vr_pipeline *p, int *reached) {
  for (int t = 0; t < p->ntasks; t++) {
    int par = p->tasks[t].parent;
    reached[t] = par < 0;
    for (int v = 0; par >= 0 && reached[par] && v < p->tasks[par].nvariants; v++) {
      const vr_pipe_variant *pv = &p->tasks[par].variants[v];
      for (int c = 0; c < p->tasks[par].nchildren; c++)
        if (p->tasks[par].children[c] == t && pv->mult * pv->share[c] > 0) reached[t] = 1;
    }
  }
}

/* Called when the best effort serves nothing: is the SLO itself the cause
 * (no load or cluster would do)? Along the tasks requests must reach
 * (some parent variant sends them outputs), the fastest allowed variants
 * at batch 1 are summed root to task; past the MILP's latency bound
 * (SLO/2 less the hops' communication) on any of them, VR_EINFEASIBLE
 * naming the slowest task of the worst path. 0 otherwise. */
static int slo_infeasible(const vr_pipeline *p, const vr_profile *prof,
                          const vr_pipe_plan *shape, const vr_loki_opts *o,
                          vr_errbuf *err) {
  double fast[VR_PIPE_MAX_TASKS], at[VR_PIPE_MAX_TASKS], worst = -1;
  int fv[VR_PIPE_MAX_TASKS], hops[VR_PIPE_MAX_TASKS], reached[VR_PIPE_MAX_TASKS];
  int depth = 0, leaf = -1;
  vr__loki_reached(p, reached);
  for (int t = 0; t < p->ntasks; t++) {
    const vr_pipe_task *tk = &p->tasks[t];
    int par = tk->parent;
    fast[t] = INFINITY, fv[t] = 0;
    for (int v = 0; v < tk->nvariants; v++) {
      double l = vr_profile_latency_ms(&prof[shape->off[t] + v], 1, 0.5);
      if (vr__loki_allowed(p, t, v, o->hw_only) && l < fast[t]) fast[t] = l, fv[t] = v;
    }
    at[t] = fast[t] + (par >= 0 ? at[par] : 0);
    hops[t] = 1 + (par >= 0 ? hops[par] : 0);
    if (hops[t] > depth) depth = hops[t];
    if (reached[t] && at[t] > worst) worst = at[t], leaf = t;
  }
  double half = p->slo_ms / 2 - o->comm_ms * depth;
  if (leaf < 0 || worst <= half) return 0;
  int slow = leaf;
  for (int t = leaf; t >= 0; t = p->tasks[t].parent)
    if (fast[t] > fast[slow]) slow = t;
  return vr_errf(err, VR_EINFEASIBLE,
                 "SLO %.1f ms is infeasible: the fastest variants take "
                 "%.1f ms at batch 1 from the root to task '%s', over the "
                 "%.1f ms a path may take (half the SLO%s); bottleneck stage "
                 "'%s' (%.1f ms on '%s')", p->slo_ms, worst,
                 p->tasks[leaf].name, half,
                 o->comm_ms > 0 ? ", less communication" : "",
                 p->tasks[slow].name, fast[slow],
                 p->tasks[slow].variants[fv[slow]].name);
}

int vr__loki_task_unservable(const vr_pipeline *p, const vr_profile *prof,
                             const vr_pipe_plan *shape, const vr_loki_opts *o,
                             int hw_only, double half, int t,
                             const char *who, vr_errbuf *err) {
  const vr_pipe_task *tk = &p->tasks[t];
  int batches = 0, fv = -1, maxb = 0;
  double fast = INFINITY;
  for (int v = 0; v < tk->nvariants; v++) {
    const vr_profile *pr = &prof[shape->off[t] + v];
    if (!vr__loki_allowed(p, t, v, hw_only)) continue;
    if (pr->max_batch > maxb) maxb = pr->max_batch;
    for (int b = 0; b < NB; b++) {
      int bs = vr_prof_batch(b);
      if (bs > o->max_batch || bs > pr->max_batch) break;
      batches++;
      double l = vr_profile_latency_ms(pr, bs, 0.5);
      if (l <= half) return 0;
      if (l < fast) fast = l, fv = v;
    }
  }
  if (!batches)
    return vr_errf(err, VR_EINFEASIBLE,
                   "%s: task '%s' cannot be served: no batch size fits its "
                   "variants' max batch (%d in their profiles, %d the "
                   "planner's)", who, tk->name, maxb, o->max_batch);
  return vr_errf(err, VR_EINFEASIBLE,
                 "%s: task '%s' cannot be served: every variant takes over "
                 "the %.1f ms it may take at any batch (the fastest, '%s', "
                 "%.1f ms)", who, tk->name, half, tk->variants[fv].name, fast);
}

int vr__loki_serves_nothing(const vr_pipeline *p, const vr_profile *prof,
                            const vr_pipe_plan *shape, const vr_loki_opts *o,
                            const vr_loki_stats *st, vr_errbuf *err) {
  int rc = slo_infeasible(p, prof, shape, o, err);
  if (rc) return rc;
  int reached[VR_PIPE_MAX_TASKS], depth = 0;
  vr__loki_reached(p, reached);
  for (int t = 0; t < p->ntasks; t++) {
    int d = 1;
    for (int a = p->tasks[t].parent; a >= 0; a = p->tasks[a].parent) d++;
    if (d > depth) depth = d;
  }
  double half = p->slo_ms / 2 - o->comm_ms * depth;
  for (int t = 0; t < p->ntasks && !rc; t++)
    if (reached[t])
      rc = vr__loki_task_unservable(p, prof, shape, o, o->hw_only, half, t,
                                    "loki", err);
  if (rc) return rc;
  if (st->status != VR_MILP_OPTIMAL)
    return vr__loki_no_plan_in_time(o, st, "its best plan serves nothing",
                                    err);
  return vr_errf(err, VR_EINFEASIBLE, "loki: no plan for pipeline '%s' "
                 "serves any request", p->name);
}

/* A request served takes an instance of the root and of every task the
 * root's variant sends outputs to, and so on down: with fewer workers
 * than the cheapest such tree of tasks, no plan serves anything. The
 * best effort then had alpha = 0 and worker columns of no cost, so the
 * solver left instances anywhere (the leaves', none of the root's) and
 * the plan, returned as a best effort, served nothing. VR_EINFEASIBLE
 * naming the tasks; 0 when the workers can host them. Children come
 * after their parent in the task order (build_prefixes). */
int vr__loki_too_few_workers(const vr_pipeline *p, int workers, int hw_only,
                             vr_errbuf *err) {
  int need[VR_PIPE_MAX_TASKS], pick[VR_PIPE_MAX_TASKS];
  for (int t = p->ntasks - 1; t >= 0; t--) {
    const vr_pipe_task *tk = &p->tasks[t];
    need[t] = p->ntasks + 1, pick[t] = 0; /* above any tree */
    for (int v = 0; v < tk->nvariants; v++) {
      if (!vr__loki_allowed(p, t, v, hw_only)) continue;
      int n = 1;
      for (int c = 0; c < tk->nchildren; c++)
        if (tk->variants[v].mult * tk->variants[v].share[c] > 0)
          n += need[tk->children[c]];
      if (n < need[t]) need[t] = n, pick[t] = v;
    }
  }
  if (need[0] <= workers) return 0;
  /* the tasks of that tree, root first */
  char names[256] = "";
  int reach[VR_PIPE_MAX_TASKS] = {1};
  for (int t = 0; t < p->ntasks; t++) {
    if (!reach[t]) continue;
    const vr_pipe_task *tk = &p->tasks[t];
    const vr_pipe_variant *pv = &tk->variants[pick[t]];
    for (int c = 0; c < tk->nchildren; c++)
      if (pv->mult * pv->share[c] > 0) reach[tk->children[c]] = 1;
    size_t len = strlen(names);
    snprintf(names + len, sizeof names - len, "%s'%s'", len ? ", " : "",
             tk->name);
  }
  return vr_errf(err, VR_EINFEASIBLE,
                 "%d worker(s) cannot host pipeline '%s': a request needs "
                 "an instance of each task it reaches (%s), %d at least",
                 workers, p->name, names, need[0]);
}
