/*
 * Loki's resource manager (HPDC'24 §4): two MILPs over the pipeline's
 * augmented graph, solved with CBC (policy/milp.h).
 *
 * Augmented graph: one vertex per (task, variant); a root-to-leaf path picks
 * one variant per task along a tree path. Flows are fractions of the root
 * demand D on every prefix of such paths (a request fans out to every
 * child task, so at each vertex the flow is split again per child task);
 * m(q) = product of mult x share along the prefix gives the requests per
 * root request reaching its last vertex.
 *
 * Variables: flow F(q) in [0,1] per prefix q; per (task, variant, batch b)
 * an integer w (instances at that batch) and a binary z (that batch is the
 * variant's one max batch); per task L(t), its slowest hosted variant's
 * latency. Constraints: flows conserve (children of q sum to F(q) per
 * child task); capacity D x slack x sum F(q) m(q) <= sum_b w(b) q(b) per
 * variant (Loki's (2)); sum w <= workers ((3)); one batch per variant
 * ((4)); every path between hosted variants within SLO/2 - comm x hops
 * ((5)-(7), the SLO halved for queueing as in the paper), written without
 * big-M as sum_b l(b) z(b) <= L(t) per variant and sum of L(t) <= SLO/2 -
 * comm x hops along every root-to-leaf task path (paths are the full
 * product of variants, so this is the same set of plans).
 *
 *  1. Hardware scaling: only each task's most accurate variants; minimise
 *     the workers ((8)-(11)).
 *  2. If that is infeasible on the cluster: accuracy scaling; maximise the
 *     system accuracy: mean over leaf tasks of sum_p F(p) A(p), A(p) the
 *     product of the path's accuracies ((12)). The root's served fraction
 *     alpha = sum F(root) <= 1 carries a weight of 1000, so when even the
 *     least accurate variants cannot keep up the result is the best effort
 *     (most demand served) with feasible = 0, never an error; but when it
 *     serves nothing because even the fastest variants miss the SLO along
 *     a path requests must take (no load or cluster would do), the SLO is
 *     VR_EINFEASIBLE, naming the bottleneck stage; so is a task requests
 *     reach that no variant and batch fits (no batch size within the max
 *     batch, or none within SLO/2), naming the task and the cause. Fewer
 *     workers than the tasks a request reaches (an instance of each) are
 *     VR_EINFEASIBLE too, naming those tasks, before any MILP: with alpha
 *     = 0 the solver's workers, free in these modes, landed anywhere.
 *     Solved by latency levels: each task with children takes one of its
 *     (variant, batch) latencies as L(t), which fixes every variant's best
 *     batch; the LP relaxation of each level vector ranks them, and the
 *     small MILPs left (no z, no latency rows) are solved best bound
 *     first, each required to beat the incumbent, until no bound can (the
 *     same optimum as the one MILP within 1e-4, i.e. 0.01 accuracy
 *     points; ~9x less CPU on traffic analysis, bench/loki_plan.c). More
 *     than 512 level vectors, or opts.single_milp: the one MILP.
 *     Workers the solution leaves idle are added to the variants in use in
 *     proportion to their load (headroom: all servers take part, as in the
 *     paper's accuracy-scaling phase); so are the instances it left on
 *     variants no flow uses (workers cost nothing in these modes), which a
 *     plan never holds.
 *
 * Pure: no I/O, no globals; the clock only through CBC's time limits and
 * the plan's budget (milp.h), which bind only on slow solves (a plan that
 * hits one depends on the machine). Outputs: the plan (instances and max
 * batch per variant; budgets follow from pipe_plan.h).
 */
#ifndef VR_POLICY_LOKI_H
#define VR_POLICY_LOKI_H

#include "policy/pipe_plan.h"

typedef struct vr_loki_opts {
  double slack;        /* demand multiplier for capacity (default 1.0) */
  double comm_ms;      /* per-hop communication latency (default 0) */
  double time_limit_s; /* CBC limit per solve (default 2) */
  double plan_budget_s; /* wall time for all of vr_loki_plan's solves
                           (default 10; <= 0: none): past it no solve
                           starts, and the plan is the best found,
                           unproven (the Proteus-like plan is one solve) */
  int max_batch;       /* largest batch considered (default 64) */
  int hw_only;         /* never lower accuracy (InferLine-like baseline):
                          step 2 keeps only the most accurate variants */
  int no_hw_scaling;   /* skip step 1 (always maximise accuracy on the
                          whole cluster) */
  int single_milp;     /* accuracy scaling as one MILP with the batch
                          choice inside, instead of split by latency
                          levels (same optimum, slower; for comparison) */
} vr_loki_opts;

typedef struct vr_loki_stats {
  int step;          /* 1 hardware scaling, 2 accuracy scaling */
  int status;        /* vr_milp_status of the last solve */
  double served;     /* alpha: fraction of demand the plan carries */
  double accuracy;   /* objective accuracy, percent */
  int cols, rows;    /* size of the last MILP */
  int prefixes;      /* augmented prefixes (paths and their heads) */
  int subsolves;     /* LPs and MILPs of the latency-level split (0: one
                        MILP) */
  int budget_out;    /* opts.plan_budget_s cut or skipped a solve */
} vr_loki_stats;

void vr_loki_opts_default(vr_loki_opts *o);

/* Plans for demand_qps at the root on at most `workers` workers. plan must
 * be initialised for p (vr_pipe_plan_init); it is overwritten. 0, VR_ENOMEM,
 * VR_ELIMIT (augmented graph too large: > 20000 prefixes), VR_EBACKEND
 * (CBC stopped at its time limit in accuracy scaling with no plan, or
 * only one serving nothing; a plan it stopped with that serves is used,
 * stats.status VR_MILP_FEASIBLE; hardware scaling with no plan in time
 * goes on to accuracy scaling, as with none at all) or VR_EINFEASIBLE
 * (the SLO is below the fastest path, err naming the bottleneck stage; a
 * task no variant and batch fits; too few workers for the tasks). Never 0
 * with a plan that serves nothing. */
int vr_loki_plan(const vr_pipeline *p, const vr_profile *prof,
                 double demand_qps, int workers, const vr_loki_opts *o,
                 vr_pipe_plan *plan, vr_loki_stats *st, vr_errbuf *err);

/* Proteus-like pipeline-agnostic accuracy scaling: each task is an
 * independent model with its observed demand task_qps[t] and an equal
 * share of the SLO (SLO / depth of the tree, halved for queueing); one
 * MILP over all tasks maximises the demand-weighted mean single-model
 * accuracy on the whole cluster (no hardware scaling; idle workers are
 * spread as headroom). Best effort as above; a task requests reach that
 * no variant and batch fits its share of the SLO (or its max batch), and
 * fewer workers than the tasks a request reaches, are VR_EINFEASIBLE
 * naming them. */
int vr_proteus_plan(const vr_pipeline *p, const vr_profile *prof,
                    const double *task_qps, int workers,
                    const vr_loki_opts *o, vr_pipe_plan *plan,
                    vr_loki_stats *st, vr_errbuf *err);

#endif
