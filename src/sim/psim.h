/*
 * The pipeline simulator: request trees through a pipeline (policy/
 * pipeline.h) served by instances on a fixed cluster of workers, one
 * variant instance per worker (as in Loki). A library call, no fork, so
 * planners (InferLine's estimator, tests, benches) run it in process.
 *
 * Model
 *  - Root queries arrive from a vr_workload (sim/workload.h) with deadline
 *    arrival + the pipeline SLO.
 *  - Each instance has a FIFO queue and serves dynamic batches (whatever is
 *    queued, up to its plan's max batch; each request that cannot meet its
 *    deadline even alone is dropped instead, where the drop mode drops:
 *    vr_edrop_deadline_drops) with service times from the
 *    variant's profile (p50, or drawn from the percentiles with `noise`).
 *    (With live_rules, the live server's rules instead: see the config.)
 *  - When a request finishes task t on variant v, it emits K ~ Poisson(mult
 *    of v) outputs (Loki's branching.csv gives the mean detections per
 *    frame; the per-frame distribution is not in the artifact), each sent to
 *    child c with probability share[c] (the rest leave the pipeline). Each
 *    output is a request of the same query with the same deadline.
 *  - Routing: MostAccurateFirst tables (policy/pipe_plan.h) rebuilt every
 *    tick from the observed demand; within a variant, the instance with the
 *    shortest queue among those serving (one still loading only when none
 *    is). Each hop runs vr_pipe_hop (early dropping mode).
 *  - A query is done when all its requests are done. Outcome: dropped (any
 *    request dropped), late (finished after its deadline) or ok.
 *  - SLO violations are counted per path unit, as Loki counts requests at
 *    its sink: every request that ends a path (reaches a leaf task, or
 *    ends with no outputs) is one unit, violated if it ends after the
 *    deadline; every dropped request is one violated unit. The stricter
 *    per-query ratio (a frame with 18 cars fails if any one is dropped) is
 *    reported too. Accuracy of a served
 *    query (ok or late): the mean over its paths (a request that reached a
 *    leaf, or ended with no outputs) of the product of the accuracies of the
 *    variants along the path.
 *  - Control: a static plan, or a controller callback called every
 *    ctl_period_s (and at t = 0) with the demand estimate (EWMA of per-
 *    second demand) that returns a new plan; instances the new plan no
 *    longer needs stop taking requests and leave once their queue drains;
 *    new ones start after load_s.
 *
 * Deterministic: the same config and seed give the same results.
 */
#ifndef VR_SIM_PSIM_H
#define VR_SIM_PSIM_H

#include <stdint.h>
#include <stdio.h>

#include "policy/pipe_plan.h"
#include "sim/loki_data.h"
#include "sim/workload.h"

/* Why a request was dropped. */
typedef enum {
  VR_PDROP_QUEUE_FULL = 0, /* instance queue at max_queue */
  VR_PDROP_EXPIRED,        /* at batch start, could not meet its deadline
                              even alone (vr_drop_due, policy/drop.h; not
                              in mode none, nor before the last task in
                              last_task) */
  VR_PDROP_EARLY,          /* vr_pipe_hop said drop (behind its budget) */
  VR_PDROP_NO_INSTANCE,    /* the task had no instance to route to */
  VR_PDROP_PAST_DEADLINE,  /* live rules: the hop started at or after its
                              deadline (vr_fanout_hop_expired) */
  VR_PDROP_INFEASIBLE,     /* live rules: no variant of the task meets the
                              hop's SLO and accuracy floor */
  VR_PDROP__COUNT
} vr_pdrop_reason;

const char *vr_pdrop_name(int reason);

/* What a controller sees each period. */
typedef struct vr_psim_view {
  double now_s;
  double demand_ewma; /* root queries/s, EWMA over seconds (alpha 0.5) */
  double demand_last; /* root queries/s in the last full second */
  int workers;        /* cluster size */
  double task_qps[VR_PIPE_MAX_TASKS]; /* requests reaching each task per
                                         second, EWMA (what a
                                         pipeline-agnostic policy sees) */
  int64_t open_queries; /* root queries arrived and not yet finished */
  int64_t arrived;      /* root queries arrived so far */
  const int64_t *arrivals; /* their times (ns) since the previous call */
  int narrivals;
} vr_psim_view;

/* One request (a hop: a query's request at one task) leaving its task:
 * served there, or dropped. */
typedef struct vr_psim_outcome {
  int64_t query;  /* the root query, by arrival order from 0 */
  int task;
  int region;     /* the parent's output it came from (the fan-out hook's
                     region), -1 for the root or drawn fan-out */
  int served;     /* 1 served; 0 dropped for `reason` */
  int reason;     /* vr_pdrop_reason when dropped */
  int slot;       /* variant slot it was routed to (data->off[task] + v),
                     -1 when never routed */
  int64_t t_ns;
} vr_psim_outcome;
typedef void (*vr_psim_outcome_fn)(void *ctx, const vr_psim_outcome *o);

/* A fan-out that the caller replays (recorded detections, a test's
 * script) instead of drawing from the factors: the outputs of request
 * (query, task, region) just served on variant `slot`, as child index c
 * (into tasks[task].children) and a region id each, at most cap; returns
 * how many (negative: an error that stops the run). */
typedef struct vr_psim_emit {
  int child, region;
} vr_psim_emit;
typedef int (*vr_psim_fanout_fn)(void *ctx, int64_t query, int task, int region,
                                 int slot, vr_psim_emit *out, int cap);

/* Returns 0 and fills plan (initialised for the pipeline, holding the
 * current plan), or an error that stops the run. */
typedef int (*vr_psim_replan_fn)(void *ctx, const vr_psim_view *view,
                                 vr_pipe_plan *plan, vr_errbuf *err);

typedef struct vr_psim_cfg {
  const vr_pipe_data *data; /* pipeline + profiles (borrowed) */
  vr_workload *arrivals;    /* root queries (borrowed; opened and closed by
                               the run) */
  int workers;              /* cluster size S */
  double duration_s;
  double warmup_s;          /* seconds left out of the summary */
  double tick_s;            /* routing rebuild + time series (default 1) */
  uint64_t seed;
  int noise;                /* 1: service times drawn from percentiles */
  int fanout_exact;         /* 1: floor(mult) outputs + one more with
                               probability frac(mult), instead of Poisson
                               (linear pipelines, tests) */
  int max_queue;            /* per instance (default 4096) */
  int drop_mode;            /* vr_edrop_mode */
  double load_s;            /* a new instance serves after this (default 0) */
  int warm_start;           /* 1: the instances of the first plan serve at
                               t = 0 (deployed before traffic starts) */
  const vr_pipe_plan *plan; /* static plan, or NULL with replan */
  vr_psim_replan_fn replan;
  void *replan_ctx;
  double ctl_period_s;      /* default 10 */
  FILE *plans_csv;          /* if set: every plan, t_s,task,variant,
                               instances,batch,lat_ms,accuracy_scaled,
                               feasible */
  double ctl_change;        /* also replan when the EWMA moved by more than
                               this fraction since the last plan (0.2;
                               <= 0 off) */
  /* 1: the live executor's rules (control/pipes_run.c) instead of Loki's,
   * each called from where both sides take it:
   *  - a query's deadline is its arrival + its own SLO (the workload's
   *    deadline), its accuracy floor end to end is its min_acc;
   *  - a hop that starts at or after the deadline is dropped
   *    (vr_fanout_hop_expired);
   *  - a hop is routed by the request path's rule (policy/route.h: INFaaS
   *    selection among the task's variants that have instances, nothing
   *    loaded on demand) with the SLO vr_fanout_hop_slo_ms(time left,
   *    levels) and the floor vr_fanout_task_min_accuracy(min_acc, depth);
   *    within the variant, the lighter instance (vr_route_lighter);
   *  - queues drop what is due (vr_drop_due) when it arrives and before
   *    each batch, and form batches by the runtime's rule (policy/batch.h,
   *    deadline mode);
   *  - everything one batch emits joins its queues before any of them
   *    starts a batch (runtime.h, vr_rt_submit_to).
   * The plan gives the instances; its routing tables and budgets are not
   * used. 0: Loki's (routing tables, vr_pipe_hop, the batch loop above). */
  int live_rules;
  vr_psim_fanout_fn fanout; /* NULL: draw from the factors */
  void *fanout_ctx;
  vr_psim_outcome_fn on_request; /* NULL: none; every request once */
  void *on_request_ctx;
  int64_t stop_bad;  /* > 0: stop the run as soon as this many queries
                        ended late or dropped (sum->stopped = 1; the rest
                        of the summary is then partial). An estimator that
                        only asks "is P99 within the SLO?" knows the answer
                        once more than 1 % of its trace missed. 0: off */
  double stop_above_ms; /* > 0: for stop_bad, a query counts when it was
                           dropped or its end-to-end latency, as the
                           summary records it (float ms), is above this
                           (so the run stops exactly when the P99 is known
                           to be above it: an estimator comparing
                           candidates by P99 stops a candidate as soon as
                           it cannot beat the best one). 0: the query
                           ended after its deadline */
  const int64_t *replay_ns; /* non-NULL: the root arrivals (ns, sorted),
                               in place of drawing `arrivals` again; they
                               must be what `arrivals` draws for this seed
                               and duration (vr_il_sim_arrivals' rule), so
                               the run is the same, without the cost of
                               the draws. Loki's rules only (live_rules
                               0: they read only the arrival time; a
                               query's deadline is the pipeline's SLO) */
  size_t replay_n;
  /* 1: stage streams. Each task draws its service times from a stream of
   * its own, a request draws its fan-out (and routing) from a stream of
   * its identity (its root query and its output index at each hop), and
   * among events at the same time a parent's completions go before its
   * children's. A stage's results then depend only on its own config and
   * the requests that reach it, so vr_psim_stages (sim/psim_stage.h)
   * gives the same answers stage by stage and reuses the stages a new
   * plan keeps. The same model as 0, another sample of its draws. */
  int stage_rng;
} vr_psim_cfg;

typedef struct vr_psim_row {
  double t_s;
  int64_t demand, ok, late, dropped; /* queries by arrival second */
  int64_t paths, paths_bad;         /* path units of those queries */
  double accuracy;                  /* mean over served queries */
  int workers;                      /* instances alive (incl. draining) */
  double demand_est;
} vr_psim_row;

typedef struct vr_psim_task_stats {
  int64_t requests;                 /* requests that reached the task */
  int64_t served;                   /* requests it completed */
  int64_t drops[VR_PDROP__COUNT]; /* every dropped request, by reason */
  int64_t rerouted;                 /* sent to a backup variant */
} vr_psim_task_stats;

typedef struct vr_psim_summary {
  int64_t queries, ok, late, dropped; /* after warm-up */
  int64_t unfinished;         /* queries with a request still in the
                                 system at the end: queries = ok + late +
                                 dropped + unfinished */
  int64_t unfinished_overdue; /* of those, past their deadline (violations
                                 in query_violations_pct; their paths are
                                 in no path count) */
  int64_t paths, paths_bad; /* path units (see above) */
  double violations_pct;  /* paths_bad / paths */
  double query_violations_pct; /* (late + dropped + unfinished_overdue) /
                                  queries */
  double accuracy_pct;    /* mean accuracy of served queries */
  double p50_ms, p99_ms;  /* end-to-end latency of served queries */
  double mean_workers;
  double capacity_qps;    /* highest 10-s window demand with <= 1% path
                             violations */
  double offpeak_workers; /* mean workers while demand <= 20% of its peak */
  double peak_violations_pct; /* violations of the 10-s window of highest
                                 demand */
  int replans;
  int stopped;            /* cfg->stop_bad reached: the run ended early */
  vr_psim_task_stats task[VR_PIPE_MAX_TASKS];
  double *mult_observed;  /* per slot: outputs / served (owned; NULL if
                             nothing ran); free with vr_psim_summary_free */
  int nslots;
  double wall_s;
} vr_psim_summary;

void vr_psim_summary_free(vr_psim_summary *s);

/* Runs the simulation; rows (one per tick, may be NULL) are written to csv
 * as they are produced. 0 or an error (bad config, a controller error, a
 * malformed trace line, out of memory). */
int vr_psim_run(const vr_psim_cfg *cfg, FILE *csv, vr_psim_summary *sum,
                vr_errbuf *err);

/* Writes the summary as JSON: the `policy=... violations_pct=...` fields
 * and per-task counts, observed factors. */
int vr_psim_summary_write(const vr_psim_cfg *cfg, const char *policy,
                          const vr_psim_summary *s, FILE *f);

#endif
