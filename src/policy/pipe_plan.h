/*
 * Pipeline resource plans, routing tables and per-hop decisions (Loki §4-5),
 * pure functions shared by the pipeline simulator and the live server.
 *
 * Plan: per (task, variant) the number of instances (one worker each, as
 * Loki's workers host one variant), the max batch size and the profiled
 * execution time at that batch (Loki's l(i,k)). Latency budgets split the
 * SLO along paths in proportion to those times: budget = lat x SLO / (the
 * longest path's sum of lat over hosted variants), at least 2 x lat (a
 * request may wait for the batch in service, then run in its own: the rule
 * that makes the MILP check paths against SLO/2). A plan at that edge gets
 * exactly 2 x lat; one with room to spare spreads the room, so a short
 * queue at a lightly loaded task is not taken for a request falling
 * behind.
 *
 * Indexing: (task t, variant v) is slot off[t] + v, off[] from
 * vr_pipe_plan_init (pipeline variant lists in order).
 *
 * Routing (MostAccurateFirst, Algorithm 1, at variant granularity: the
 * instances of one variant are identical and share its load equally): the
 * root's demand fills root variants in non-increasing accuracy up to their
 * capacity; each variant's outputs (its incoming x mult x share per child)
 * fill the child's variants the same way, and so on down the tree. The
 * result is a front-end table (root variant probabilities) and, per
 * (parent variant, child task), a table of child variant probabilities.
 * Demand beyond every variant's capacity is spread over the variants in
 * proportion to capacity (it will queue; early dropping deals with it).
 * Leftover capacity per variant forms the backup tables used by
 * opportunistic rerouting.
 *
 * Ownership: plan and routes own their arrays; free with *_free.
 */
#ifndef VR_POLICY_PIPE_PLAN_H
#define VR_POLICY_PIPE_PLAN_H

#include "policy/pipeline.h"
#include "policy/profile.h"

typedef struct vr_pipe_alloc {
  int inst;      /* instances */
  int batch;     /* max batch size (1..64) */
  double lat_ms; /* profiled p50 at that batch: l(i,k) */
  double cap_qps; /* per instance: batch / lat */
} vr_pipe_alloc;

typedef struct vr_pipe_plan {
  int ntasks;
  int off[VR_PIPE_MAX_TASKS + 1];
  vr_pipe_alloc *a;  /* off[ntasks] slots */
  int workers;       /* sum of inst */
  int accuracy_scaled; /* 1 when the plan lowered accuracy */
  int feasible;        /* 1 when it covers demand_qps */
  double demand_qps;   /* the demand it was made for */
  double accuracy;     /* expected system accuracy, percent */
  double fill;         /* share of each variant's capacity routing may
                          fill before moving on (1/slack of the planner;
                          0 = 1): without it MostAccurateFirst fills the
                          most accurate variants past the flows the plan
                          assumed, and their larger fan-out overloads the
                          children */
} vr_pipe_plan;

/* Sizes plan for p (all slots zero). 0 or VR_ENOMEM. */
int vr_pipe_plan_init(vr_pipe_plan *plan, const vr_pipeline *p);
void vr_pipe_plan_free(vr_pipe_plan *plan);
/* Deep copy into dst (initialised or zeroed). 0 or VR_ENOMEM. */
int vr_pipe_plan_copy(vr_pipe_plan *dst, const vr_pipe_plan *src);

/* Sets slot (t,v) to n instances at batch b, filling lat/cap from prof
 * (indexed like the plan). */
void vr_pipe_plan_set(vr_pipe_plan *plan, const vr_profile *prof, int t,
                      int v, int n, int b);

/* The longest root-to-leaf sum of lat_ms over the variants in use (for
 * each task, the slowest variant with instances). */
double vr_pipe_plan_path_ms(const vr_pipeline *p, const vr_pipe_plan *plan);

/* Hardware scaling with one fixed variant per task (choice[t]): batch
 * sizes (powers of two up to each profile's max batch) so that every path
 * runs within slo_ms / 2 (lat at the batch, Loki's rule), raised greedily
 * where they save the most workers, then instances = ceil(slack x rate /
 * capacity), at least 1 per task. When the total exceeds `workers`, the
 * workers are shared in proportion to need (at least one per task) and
 * plan->feasible = 0: the best effort; early dropping takes the rest.
 * demand_qps at the root; rates from the variants' mult and shares. */
void vr_pipe_plan_scale(const vr_pipeline *p, const vr_profile *prof,
                        const int *choice, double demand_qps, int workers,
                        double slack, vr_pipe_plan *plan);

/* INFaaS-like, per task and pipeline-agnostic: each task is an app with
 * its own observed demand task_qps[t] and SLO / depth (halved for
 * queueing); it gets the variant that serves that demand with the fewest
 * workers at its best batch (INFaaS minimises cost and treats accuracy as
 * a constraint; pipelines state none), instances = ceil(slack x demand /
 * capacity), shared out as in vr_pipe_plan_scale when over `workers`. */
void vr_pipe_plan_cheapest(const vr_pipeline *p, const vr_profile *prof,
                           const double *task_qps, int workers, double slack,
                           vr_pipe_plan *plan);


typedef struct vr_pipe_routes {
  int ntasks;
  int off[VR_PIPE_MAX_TASKS + 1];
  double *front;    /* root variant probabilities (off[1] entries) */
  int toff[VR_PIPE_MAX_TASKS + 1]; /* table offsets per child task */
  double *table;    /* task c: [parent variant][c's variant] */
  double *incoming; /* expected qps per slot */
  double *spare;    /* leftover capacity per slot (qps), >= 0 */
  int *order;       /* per task, variant indexes by non-increasing
                       accuracy: order[off[t] + k] */
  double accuracy;  /* expected accuracy of a served query, percent */
  double budget_scale; /* budget = lat x this (>= 2) */
} vr_pipe_routes;

/* Latency budget of slot i under routes r (see above). */
static inline double vr_pipe_budget_ms(const vr_pipe_plan *plan,
                                       const vr_pipe_routes *r, int i) {
  return plan->a[i].lat_ms * r->budget_scale;
}

/* The budget a hop holds its parent task (slot) to: the slot's budget
 * under routes r, or, when that variant has left the plan meanwhile (a
 * plan change while the request was in flight), twice its profiled p50 at
 * batch 1 (prof indexed like the plan). */
static inline double vr_pipe_hop_budget_ms(const vr_pipe_plan *plan,
                                           const vr_pipe_routes *r,
                                           const vr_profile *prof, int slot) {
  double b = vr_pipe_budget_ms(plan, r, slot);
  return b > 0 ? b : 2 * vr_profile_latency_ms(&prof[slot], 1, 0.5);
}

/* ---- as text ----------------------------------------------------------------
 * How the controller publishes the plan of a pipeline it runs a policy for
 * to the workers that route its hops (`vario controller --pipeline-policy`;
 * registry table "pipe.<pipeline>"), by task and variant name so that a
 * side whose view lists the variants in another order (or lacks some)
 * maps it onto its own view:
 *   vario-pipe-plan 1
 *   ewma E drop D accuracy A scaled S feasible F demand Q fill L
 *   <task> <variant> <inst> <batch> <lat_ms> <cap_qps>      (per slot)
 * E: the demand EWMA routes are built for; D: the early-drop mode. */
/* The text (vr_malloc'd), or NULL when out of memory. */
char *vr_pipe_plan_text(const vr_pipeline *view, const vr_pipe_plan *plan, double ewma,
                        int drop_mode);
/* Parses text into plan (initialised over view by vr_pipe_plan_init; every
 * slot reset first; lines naming a task or variant not in view are
 * skipped). 0, or VR_EFORMAT with a message (plan then half-set: keep the
 * old one). */
int vr_pipe_plan_parse_text(const vr_pipeline *view, const char *text, size_t len,
                            vr_pipe_plan *plan, double *ewma, int *drop_mode, vr_errbuf *err);

void vr_pipe_routes_free(vr_pipe_routes *r);

/* MostAccurateFirst for demand root_qps under plan. 0 or VR_ENOMEM; on
 * success *r is (re)built (free the old one first or pass zeroed). */
int vr_pipe_route_build(const vr_pipeline *p, const vr_pipe_plan *plan,
                        double root_qps, vr_pipe_routes *r);

/* Picks a variant of child task c for an output of parent variant pv
 * (slot of the parent), u uniform in [0,1). -1 when the child has no
 * instance. For the root use c = 0 and pv = -1. */
int vr_pipe_route_pick(const vr_pipeline *p, const vr_pipe_routes *r, int c,
                       int pv_slot, double u);

/* Early dropping modes (Loki §5.2, §6.3 ablation). */
typedef enum {
  VR_EDROP_NONE = 0,    /* follow the routing plan, never drop early */
  VR_EDROP_LAST = 1,    /* drop only at the last task when it cannot make it */
  VR_EDROP_PER_TASK = 2, /* drop when a task took longer than its budget */
  VR_EDROP_REROUTE = 3, /* behind by x: backup variant with time <= y - x,
                           else drop (Loki) */
} vr_edrop_mode;

const char *vr_edrop_name(int mode);
int vr_edrop_parse(const char *s); /* -1 if unknown */

/* Whether a hop at a task may be dropped for its deadline besides
 * vr_pipe_hop's verdict: by its queue (policy/drop.h vr_drop_due, at
 * admission and before each batch) or when it is queued past the
 * deadline. Loki's modes say where requests may be dropped (§5.2, §6.3):
 * none never, last_task only at the last task (a leaf: no task after it),
 * per_task and reroute at every task. The live request path and psim both
 * ask here. */
int vr_edrop_deadline_drops(int mode, int last_task);

/* One hop: a request finished task t (slot `from`, -1 at the front end)
 * and the routing table chose variant `to` (a slot of child task c). */
typedef struct vr_hop {
  int mode;              /* vr_edrop_mode */
  double elapsed_ms;     /* since the query arrived */
  double spent_ms;       /* at the task just finished (queue + run) */
  double budget_ms;      /* that task's budget */
  double budget_sum_ms;  /* budgets of the path so far, incl. that task */
  double slo_ms;
  int child_is_leaf;
} vr_hop;

typedef enum {
  VR_HOP_FORWARD = 0,  /* to the chosen variant */
  VR_HOP_REROUTE = 1,  /* to *alt */
  VR_HOP_DROP = 2,
} vr_hop_verdict;

/* Decides the hop; on VR_HOP_REROUTE *alt is the backup slot: among child
 * c's variants with spare capacity, the most accurate one whose execution
 * time is <= y - x (y: the chosen variant's, x: how far behind the budget
 * the request is); ties go to the lower variant index. */
int vr_pipe_hop(const vr_pipeline *p, const vr_pipe_plan *plan,
                const vr_pipe_routes *r, int c, int to, const vr_hop *h,
                int *alt);

#endif
