/*
 * AsyFunc simulator: one model served by body instances (whole model) and,
 * under AsyFunc, shadow instances paired with bodies at bursts. Policies:
 *  - VR_AFP_ASYFUNC: MLS every period + LLS on arrivals + Algorithm 3;
 *  - VR_AFP_MINUS (AsyFunc⁻): MLS + Algorithm 3, no shadows;
 *  - VR_AFP_BATCH: BATCH's fixed (cores, batch) configuration
 *    (vr_af_batch_cfg_obj: least resources per request), instances
 *    for the peak 1-s rate of the last batch_lookback periods (it must
 *    provision ahead: a body takes the whole model's load time), same
 *    scheduler.
 * Execution times come from the block profile (vr_af_model): a body alone
 * takes t(c, b); a pair max(t_np + t_pB, t_np + t_pS + transfer); a new
 * body is usable after the whole model's load time, a shadow after its
 * blocks' load time. CPU-core-seconds and memory-GB-seconds count every
 * instance from creation (loading included) to release. A request
 * violates its SLO when it finishes later than slo_ms after arrival or is
 * dropped by the scheduler (Algorithm 3 drops requests that cannot make
 * it). Decisions are the pure functions of src/policy/asyfunc.h.
 */
#ifndef VR_SIM_ASYFUNC_SIM_H
#define VR_SIM_ASYFUNC_SIM_H

#include <stdint.h>

#include "policy/asyfunc.h"

typedef enum { VR_AFP_ASYFUNC = 0, VR_AFP_MINUS = 1, VR_AFP_BATCH = 2 } vr_af_policy;
const char *vr_af_policy_name(vr_af_policy p); /* "asyfunc", "asyfunc-", "batch" */
int vr_af_policy_parse(const char *s, vr_af_policy *p);

/* Bursty arrivals, Azure-Functions-like: a steady Poisson base rate with
 * a slow sinusoidal drift, and sudden spikes that multiply it. Spike
 * starts are a Poisson process (mean gap spike_every_s); each lasts
 * U[spike_min_s, spike_max_s] and multiplies the rate by
 * U[mul_min, mul_max]. Arrivals by thinning; seeded. */
typedef struct vr_af_workload {
  double base_qps, duration_s;
  double drift, drift_period_s;   /* rate x (1 + drift sin(2 pi t / period)) */
  double spike_every_s, spike_min_s, spike_max_s, mul_min, mul_max;
  uint64_t seed;
} vr_af_workload;

void vr_af_workload_init(vr_af_workload *w, double base_qps, double duration_s, uint64_t seed);
/* Arrival times in ms, ascending; *out is vr_malloc'd (caller frees with
 * vr_free). 0 or VR_ENOMEM/VR_EINVAL. */
int vr_af_arrivals(const vr_af_workload *w, double **out, int64_t *n);

typedef struct vr_af_sim_cfg {
  vr_af_policy policy;
  double period_s;        /* model-level scaling period, 60 */
  double release_idle_ms; /* shadows are released once the queue stayed below
                           * gamma this long (the burst passed), 1000 */
  int batch_lookback;     /* BATCH: periods of peak history it provisions for, 10 */
  vr_af_batch_obj batch_obj; /* BATCH's offline choice: VR_AF_BATCH_COST (default) */
  /* MLS's R_max counts a body with a loaded shadow as the pair (Eq. 1:
   * "paired with Shadow Function instances or not"). Off by default: with
   * shadows released only once the queue calms, a pair alive at the tick
   * keeps MLS from adding the body the steady load needs, and the shadow
   * turns into steady capacity (docs/EXPERIMENTS.md (e)). */
  int rmax_pairs;
  /* LLS crowding test: |Q| >= gamma (paper, one queue of a few slow
   * instances) or, when set (default), |Q| >= gamma x live bodies: the one
   * queue here feeds tens of bodies at tens of qps each, where two waiting
   * requests are the steady state, not a burst. */
  int gamma_per_body;
  /* Algorithm 3 as written (vr_af_schedule_paper: the fewest cores that
   * take the whole queue in time; else the most cores take the latest
   * requests and the rest is dropped) instead of the default (the idle
   * instance with the best throughput per core on the most rows whose
   * oldest still meets the SLO, vr_af_schedule). */
  int paper_scheduler;
  int nodes, node_cores;  /* cluster: 30 x 36 (paper Table 1) */
  vr_af_scale_cfg scale;  /* alpha, beta, gamma, kappa, slo */
} vr_af_sim_cfg;

void vr_af_sim_cfg_init(vr_af_sim_cfg *c, vr_af_policy p, double slo_ms);

#define VR_AF_MAX_PERIODS 1024

typedef struct vr_af_sim_result {
  int64_t requests, violated, dropped;
  double cpu_core_s, mem_gb_s, violations_pct;
  /* core-seconds while executing a batch (body and shadow cores x the
   * batch's time); cpu_core_s counts what is allocated, idle or not, as
   * the paper counts "all provisioned function instances" */
  double busy_core_s;
  int bodies_created, shadows_created, shadows_released;
  int max_bodies, max_shadows;
  double paired_batches_pct; /* batches run by a body with its shadow */
  /* per period: average cores and GB allocated (for the violin/box plots) */
  int nperiods;
  double period_cores[VR_AF_MAX_PERIODS], period_gb[VR_AF_MAX_PERIODS];
} vr_af_sim_result;

/* Runs the policy on the arrivals (ms, ascending). 0 or VR_ENOMEM. */
int vr_af_simulate(const vr_af_model *m, const vr_af_sim_cfg *cfg, const double *arr, int64_t n,
                   vr_af_sim_result *res);

#endif
