/*
 * InferLine in the pipeline simulator: the planner's estimator (psim run
 * as a library on the sample trace), the tuner as a psim controller, and
 * the policies of the InferLine evaluation (inferline = planner + tuner,
 * inferline_plan = planner only, cg_peak / cg_mean = coarse-grained with
 * AutoScale tuning, cg_peak_static / cg_mean_static = never re-scaled).
 * Serving-time control is the pure tick of policy/il_tick.h, called by a
 * psim controller every 100 ms.
 *
 * Stages and hardware: InferLine does not choose models, so each task
 * runs its most accurate variant; its hardware options are that model's
 * profiles in each vr_pipe_data given (one per accelerator, with a
 * price). The derived pipeline (`data`) has, per task, one variant per
 * hardware option ("<model>@<hw>") carrying the model's multiplicative
 * factor and shares, so a plan is a psim plan with instances on exactly
 * one option per task.
 *
 * Sample trace: arrivals from a vr_workload with a seed; psim opens its
 * workload with seed ^ 0x5eed, and vr_il_sim_arrivals draws with the same
 * rule so that the tuner and the envelope see exactly the arrivals psim
 * replays (checked by the tests).
 *
 * Ownership: a vr_il_sim owns its derived data and arrival arrays; the
 * workloads it is given stay the caller's (shallow copies are used per
 * run; only the caller closes them).
 */
#ifndef VR_SIM_IL_SIM_H
#define VR_SIM_IL_SIM_H

#include "policy/il_tick.h"
#include "policy/inferline.h"
#include "sim/loki_data.h"
#include "sim/psim.h"

#define VR_IL_MAX_HW 8

typedef struct vr_il_sim {
  vr_pipe_data data;  /* derived: variants = hardware options */
  vr_il_problem pb;   /* stages point into data.prof */
  const vr_workload *sample;
  double sample_s;
  uint64_t seed;
  int64_t *t;         /* sample arrivals (ns), sorted */
  size_t n;
  double est_wall_s;  /* time spent in the estimator */
  int est_noise;      /* 1 (default): the estimator draws service times
                         from the profiles' percentiles with the sample's
                         seed, as serving does (still deterministic: the
                         same configuration, the same draws); 0: p50 */
  struct vr_psim_stages *stages; /* the estimator (sim/psim_stage.h), for
                                    the sample and est_stages_noise */
  int est_stages_noise;
  int64_t est_stages_run, est_stages_reused; /* stages simulated, reused */
} vr_il_sim;

/* Derives the problem from pipeline data per hardware option (same
 * pipeline in each; hw_names and price_per_s per option). The SLO is the
 * pipeline's. 0 or an error naming the task or option. */
int vr_il_sim_init(vr_il_sim *s, const vr_pipe_data *const *by_hw,
                   const char *const *hw_names, const double *price_per_s,
                   int nhw, vr_errbuf *err);
void vr_il_sim_free(vr_il_sim *s);
/* Drops the stage results the estimator keeps between calls (the next
 * estimate starts cold, as the first after vr_il_sim_sample does). */
void vr_il_sim_forget(vr_il_sim *s);

/* The same from a serving view (the live pipeline's tasks with their
 * registered variants, prof per slot in task order): per task the options
 * are the variants of its most accurate model, one per (precision,
 * threads) with the largest batch cap; price = each profile's
 * cost_per_s. opt[t][h] gets the view variant index of option h (-1 past
 * the last), which is how a plan over the derived pipeline maps back. */
int vr_il_sim_init_view(vr_il_sim *s, const vr_pipeline *p,
                        const vr_profile *prof, int (*opt)[VR_IL_MAX_HW],
                        vr_errbuf *err);

/* Sets the sample trace (borrowed workload, seconds, seed): draws its
 * arrivals and sets pb.rate_qps to their mean rate. */
int vr_il_sim_sample(vr_il_sim *s, const vr_workload *w, double duration_s,
                     uint64_t seed, vr_errbuf *err);

/* Arrivals psim will replay for (w, seed) over duration_s: *t (owned by
 * the caller, vr_free) and *n. */
int vr_il_sim_arrivals(const vr_workload *w, double duration_s, uint64_t seed,
                       int64_t **t, size_t *n, vr_errbuf *err);

/* The estimator (vr_il_estimate_fn; ctx = the vr_il_sim): P99 end-to-end
 * latency of cfg on the sample trace, service times drawn as in serving
 * (est_noise), no early drops; any drop makes it infinite, and so does
 * a P99 above above_ms, as soon as the run shows it (psim's stop_bad /
 * stop_above_ms: more than 1 % of the trace took longer). With p50
 * service times a profile whose p90 is well above its p50 (Vario's own,
 * measured on a busy machine: 1.4 vs 2.2 ms at batch 16) made plans at
 * 90 % utilisation on paper that were overloaded in service. */
int vr_il_sim_estimate(void *ctx, const vr_il_problem *pb,
                       const vr_il_config *cfg, double above_ms,
                       double *p99_ms);

/* cfg as a psim plan (plan initialised here; vr_pipe_plan_free it). */
int vr_il_sim_plan(const vr_il_sim *s, const vr_il_config *cfg,
                   vr_pipe_plan *plan);

typedef enum {
  VR_ILP_INFERLINE = 0, /* planner + tuner */
  VR_ILP_PLAN_ONLY,     /* planner, no tuner */
  VR_ILP_CG_PEAK,       /* coarse-grained, sized for the peak, AutoScale
                           tuning (the paper's baseline, §6) */
  VR_ILP_CG_MEAN,       /* coarse-grained, sized for the mean, AutoScale */
  VR_ILP_CG_PEAK_STATIC, /* the same provisioning, never re-scaled (what
                            Fig. 5 compares: planning alone) */
  VR_ILP_CG_MEAN_STATIC,
  VR_ILP__COUNT
} vr_il_policy;

const char *vr_il_policy_name(int p);
int vr_il_policy_parse(const char *s); /* -1 if unknown */

/* The serving-time tick of policy p over configuration cfg (planned on
 * the sample): the tuner for inferline, AutoScale for cg_peak / cg_mean,
 * static otherwise. */
int vr_il_sim_tick_cfg(const vr_il_sim *s, int policy, const vr_il_config *cfg,
                       vr_il_tick_cfg *out, vr_errbuf *err);

/* The planner for a serving side (live: `vario serve --pipeline-policy
 * inferline --inferline-rate QPS`): vr_il_pipe_arg.configure with self =
 * a vr_il_live_opts. Builds the problem from the snapshot's view
 * (vr_il_sim_init_view), draws a Gamma sample trace at rate_qps / cv for
 * sample_s with seed, plans policy `kind` (vr_il_kind = vr_il_policy) and
 * returns its tick config with each stage's option mapped to the view's
 * variant index, each stage capped at workers / stages replicas (or its
 * plan, if more). Runs the planner in the caller's thread (seconds at
 * high rates: see docs/BENCHMARKS.md). */
typedef struct vr_il_live_opts {
  double rate_qps;  /* > 0 */
  double cv;        /* 0: 1 */
  double sample_s;  /* 0: 60 */
  uint64_t seed;    /* 0: 1 */
  double min_window_ms; /* shortest envelope window (0: 10 ms; the paper
                           starts at the service time, 1 ms here, but a
                           live front end stamps arrivals with ms-scale
                           jitter on a busy machine and 2-3 requests in
                           one ms then read as a burst at the sample's
                           own rate) */
} vr_il_live_opts;
int vr_il_sim_configure(void *self, const vr_pipe_snap *s, int kind,
                        vr_il_tick_cfg *out, vr_errbuf *err);

/* One policy's outcome on an evaluation workload. */
typedef struct vr_il_result {
  vr_il_config cfg;      /* initial configuration */
  double cost_per_s;     /* time-averaged over the run */
  double miss_pct;       /* queries late or dropped, percent */
  double p99_ms;         /* end-to-end, served queries */
  int64_t queries;
  int ups, downs;        /* tuner actions */
  double max_cost_per_s; /* highest configuration cost during the run */
  double plan_s;         /* planner wall time */
  vr_il_stats stats;
} vr_il_result;

/* Plans with policy p on the sample trace, then serves `eval` for
 * duration_s with seed (service times drawn from the profiles'
 * percentiles when noise). load_s: replicas the tuner adds serve after
 * this. csv (may be NULL) gets psim's per-tick rows. */
int vr_il_sim_eval(vr_il_sim *s, int policy, const vr_workload *eval,
                   double duration_s, uint64_t seed, int noise, double load_s,
                   FILE *csv, vr_il_result *out, vr_errbuf *err);

#endif
