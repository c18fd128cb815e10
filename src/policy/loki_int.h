/* What the Loki MILPs (loki.c) and the Proteus-like per-task MILP
 * (proteus_plan.c) share: the prefixes of the augmented graph, the per-(slot,
 * batch) instance columns with their capacity and one-batch rows,
 * reading a solution into a plan, and why no plan serves (loki_check.c).
 * Internal to src/policy. */
#ifndef VR_POLICY_LOKI_INT_H
#define VR_POLICY_LOKI_INT_H

#include "policy/loki.h"
#include "policy/milp.h"

#define MAX_PREFIXES 20000
#define BIG_SERVED 1000.0
#define NB VR_PROF_NB

/* One prefix of an augmented root-to-leaf path: its last vertex. */
typedef struct prefix {
  int task, slot, parent; /* parent prefix, -1 at the root */
  double m;               /* requests per root request reaching it */
  double acc;             /* product of accuracies (0..1) along it */
  int hops;
  int col;                /* F column */
} prefix;

typedef struct model {
  const vr_pipeline *p;
  const vr_profile *prof;
  const vr_pipe_plan *shape; /* slot offsets */
  prefix *pre;
  int npre;
  int w[VR_PIPE_MAX_TASKS * VR_PIPE_MAX_VARIANTS][NB]; /* columns, -1 */
  int z[VR_PIPE_MAX_TASKS * VR_PIPE_MAX_VARIANTS][NB];
  int rows;
} model;

/* Row helper buffers. */
typedef struct rowbuf {
  int *idx;
  double *k;
  int n;
} rowbuf;

static inline void vr__loki_rb_add(rowbuf *r, int col, double k) {
  r->idx[r->n] = col, r->k[r->n++] = k;
}

/* A variant's accuracy in 0..1 (1 when unknown). */
static inline double vr__loki_acc01(const vr_pipe_variant *v) {
  return v->accuracy >= 0 ? v->accuracy / 100 : 1;
}

/* Is slot (t,v) allowed (hw_only: only the most accurate variants)? */
static inline int vr__loki_allowed(const vr_pipeline *p, int t, int v,
                                   int hw_only) {
  if (!hw_only) return 1;
  const vr_pipe_task *tk = &p->tasks[t];
  for (int k = 0; k < tk->nvariants; k++)
    if (vr__loki_acc01(&tk->variants[k]) > vr__loki_acc01(&tk->variants[v]))
      return 0;
  return 1;
}

/* Columns w (instances) and z (the one max batch) for every allowed
 * (slot, batch) of md, -1 where not allowed (a batch over max_batch or
 * whose latency exceeds half). maxload[slot] bounds w. With fixb (the
 * level decomposition) only w at batch fixb[s] (-1: none) and no z.
 * relax: continuous columns (the LP relaxation). */
void vr__loki_add_batch_cols(model *md, vr_milp *m, const vr_loki_opts *o,
                             double half, int workers, int hw_only,
                             double w_obj, const double *maxload,
                             const int *fixb, int relax);

/* Closes a capacity row whose load terms are already in rb (load <= sum
 * of w(b) x throughput(b)) and adds slot s's one-batch row. */
void vr__loki_capacity_rows(model *md, vr_milp *m, rowbuf *rb, int s);

/* Reads the w columns of solution x into plan; load[slot] = expected qps
 * (demand x flows). settle: lower each batch as far as capacity for load x
 * slack allows. A slot no flow reaches gets no instances (whatever w the
 * solver left there: workers are free in the accuracy modes). */
void vr__loki_extract(const model *md, const double *x, double demand,
                      double slack, int settle, vr_pipe_plan *plan,
                      double *load);

/* Idle workers (up to `workers`) become headroom on the variants in use,
 * one at a time to the one with the highest load per instance. */
void vr__loki_spread_idle(vr_pipe_plan *plan, const vr_profile *prof,
                          const double *load, int workers);

/* loki_check.c. CBC stopped at its time limit, or the plan's budget ran
 * out (st->budget_out), with "what": no plan in time, VR_EBACKEND, not the
 * proof of infeasibility VR_EINFEASIBLE reports. */
int vr__loki_no_plan_in_time(const vr_loki_opts *o, const vr_loki_stats *st,
                             const char *what, vr_errbuf *err);

/* Why a best effort (stats st) serves nothing: the SLO along a path
 * requests must take (VR_EINFEASIBLE naming the bottleneck stage), a task
 * no variant and batch fits (VR_EINFEASIBLE naming it), CBC's time limit
 * (its incumbent may be the zero plan: VR_EBACKEND), else the plan itself
 * (VR_EINFEASIBLE). Never 0: an empty plan would unload every instance of
 * the pipeline. */
int vr__loki_serves_nothing(const vr_pipeline *p, const vr_profile *prof,
                            const vr_pipe_plan *shape, const vr_loki_opts *o,
                            const vr_loki_stats *st, vr_errbuf *err);

/* reached[t]: whether requests can reach task t (every task above it
 * has a variant that sends it outputs). */
void vr__loki_reached(const vr_pipeline *p, int *reached);

/* Fewer workers than the cheapest tree of tasks a request reaches (an
 * instance of each): VR_EINFEASIBLE naming them; 0 otherwise. */
int vr__loki_too_few_workers(const vr_pipeline *p, int workers, int hw_only,
                             vr_errbuf *err);

/* Whether task t has a (variant, batch) the MILPs may use: a batch within
 * o->max_batch and the profile's, its latency within half. 0 if so, else
 * VR_EINFEASIBLE naming the task and the cause (who: the message's
 * prefix). */
int vr__loki_task_unservable(const vr_pipeline *p, const vr_profile *prof,
                             const vr_pipe_plan *shape, const vr_loki_opts *o,
                             int hw_only, double half, int t,
                             const char *who, vr_errbuf *err);

#endif
