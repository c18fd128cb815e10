/*
 * The pipeline simulator stage by stage: vr_psim_run's answer for a
 * static plan under stage streams (vr_psim_cfg.stage_rng), computed one
 * task at a time from the root down, each task from the requests its
 * parent sent it. A handle keeps the results of recent stages, so a plan
 * that changes one task re-runs only that task and the tasks under it;
 * InferLine's planner (policy/inferline.h) changes one stage per
 * candidate, and its estimator (sim/il_sim.h) is this.
 *
 * Same answers as vr_psim_run (unit_test_inferline_sim's test_stages_*
 * check it request for request: P50, P99, late, dropped, early stop) for
 * the runs it accepts:
 * replayed root arrivals, a static plan with every task's instances of
 * one variant, Loki's rules with drop mode none, drawn fan-out, instances
 * serving from t = 0 (load_s 0 or warm start, workers enough for the
 * plan). Why it is exact: with stage streams a task's service times come
 * from its own stream in the order its batches start, a request's
 * outputs from its own identity, and among events at one time a
 * parent's completions (a child's arrivals) go first, so a task's events
 * happen in the same order in both engines.
 *
 * Not thread-safe; one handle per thread.
 */
#ifndef VR_SIM_PSIM_STAGE_H
#define VR_SIM_PSIM_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "policy/pipe_plan.h"
#include "sim/loki_data.h"

typedef struct vr_psim_stages vr_psim_stages;

typedef struct vr_psim_stages_cfg {
  const vr_pipe_data *data; /* pipeline + profiles (borrowed) */
  const int64_t *t;         /* root arrivals (ns, sorted; borrowed) */
  size_t n;
  double duration_s;        /* the trace's (psim's runaway cut: 600 s
                               after it) */
  uint64_t seed;            /* vr_psim_cfg.seed */
  int noise;                /* vr_psim_cfg.noise */
  int fanout_exact;         /* vr_psim_cfg.fanout_exact */
  int max_queue;            /* per instance (default 4096) */
} vr_psim_stages_cfg;

typedef struct vr_psim_stages_result {
  int stopped;     /* stop_bad queries were above the bound: the run ended
                      there and the rest is partial (the P99 is above it) */
  int dropped;     /* an instance queue overflowed (a query was dropped):
                      the run ended there */
  int unfinished;  /* a request ended over 600 s after the trace (psim
                      stops there: queries left unfinished) */
  int64_t late;    /* queries that ended after arrival + the SLO */
  double p50_ms, p99_ms; /* end to end, as vr_psim_summary's */
  int stages_run, stages_reused; /* this call */
} vr_psim_stages_result;

/* 0, VR_EINVAL (bad config) or VR_ENOMEM. */
int vr_psim_stages_new(const vr_psim_stages_cfg *cfg, vr_psim_stages **out,
                       vr_errbuf *err);
void vr_psim_stages_free(vr_psim_stages *s);

/* Runs `plan` (borrowed) over the arrivals. stop_bad > 0: stop as soon as
 * that many queries took longer than above_ms (> 0; <= 0: ended after
 * their deadline), as vr_psim_cfg.stop_bad. 0, or VR_EINVAL for a plan
 * it does not accept (a task with instances of two variants), VR_ENOMEM. */
int vr_psim_stages_run(vr_psim_stages *s, const vr_pipe_plan *plan,
                       int64_t stop_bad, double above_ms,
                       vr_psim_stages_result *res, vr_errbuf *err);

#endif
