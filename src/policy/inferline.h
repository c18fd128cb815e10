/*
 * InferLine's low-frequency planner (SoCC'20, §4.3) and the coarse-grained
 * baselines it is compared with (CG-Peak, CG-Mean, §6).
 *
 * A problem is a pipeline of stages (a tree in preorder; each stage has a
 * scale factor s_m = requests reaching it per pipeline request) and per
 * stage its hardware options: profiles of the one model the stage runs, on
 * each hardware it can run on (in Vario, the variants of the model at
 * each precision and thread count; in the simulator, also the GPUs of the
 * shared profiles). A configuration picks per stage a hardware option, a
 * maximum batch size and a replica count; its cost per second is
 * sum(replicas x cost_per_s).
 *
 * The planner never judges latency itself: every candidate goes through
 * the caller's estimator (in Vario, the pipeline simulator run as a
 * library on the sample trace; see sim/) which returns the P99 end-to-end
 * latency. So the guarantee is the estimator's: the planner never returns
 * a configuration its estimator puts above the SLO.
 *
 *  Phase 1 (Algorithm 1): batch 1 on each stage's lowest-latency hardware.
 *    If the service time (sum of batch-1 latencies on the longest path)
 *    exceeds the SLO, the SLO is infeasible: VR_EINFEASIBLE naming the
 *    stage that takes longest. Else replicas start at what the mean load
 *    needs (utilisation < 1), then the throughput bottleneck (highest
 *    utilisation) gets one more replica until the estimator meets the SLO.
 *  Phase 2 (Algorithm 2): repeatedly, over all stages, consider removing a
 *    replica, downgrading the hardware (to each cheaper option, re-planned
 *    locally for that stage: batch 1, fewest feasible replicas, then
 *    batch doubling / replica removal while feasible; kept only if
 *    cheaper) and doubling the batch; apply the feasible one that lowers
 *    cost most, or, when none lowers cost, the feasible batch doubling with
 *    the lowest estimated P99 (the first stage on a tie; a doubling is
 *    estimated only as far as it could beat the best one so far, see
 *    vr_il_estimate_fn's above_ms). Stop when nothing feasible remains, and
 *    return the configuration after the last cost reduction (or, at
 *    equal cost, the lowest estimated P99 seen): trailing batch doublings
 *    that bought nothing only add latency. This last step is Vario's; the
 *    paper returns wherever the greedy loop stopped.
 *
 * Purity: no I/O, no clock, no globals; the estimator is the only call
 * out. Memory: vr_il_plan allocates a memo of estimates for the call and
 * frees it before returning. Profiles are borrowed from the caller.
 */
#ifndef VR_POLICY_INFERLINE_H
#define VR_POLICY_INFERLINE_H

#include <stddef.h>
#include <stdint.h>

#include "policy/envelope.h"
#include "policy/profile.h"
#include "vario/status.h"

#define VR_IL_MAX_STAGES VR_TUNER_MAX_STAGES

typedef struct vr_il_stage {
  char name[64];
  int parent;            /* stage index, -1 for the root; parent < index */
  double scale;          /* s_m > 0 */
  int nhw;               /* >= 1 */
  const vr_profile *hw;  /* nhw hardware options, borrowed */
} vr_il_stage;

typedef struct vr_il_stage_cfg {
  int hw;       /* index into the stage's options */
  int batch;    /* maximum batch size, a power of two */
  int replicas; /* >= 1 */
} vr_il_stage_cfg;

typedef struct vr_il_config {
  int nstages;
  vr_il_stage_cfg st[VR_IL_MAX_STAGES];
  double cost_per_s; /* filled by the planner */
  double p99_ms;     /* the estimator's P99 for this configuration */
} vr_il_config;

struct vr_il_problem;
/* Estimated P99 end-to-end latency (ms) of cfg on the sample trace. 0 or a
 * negative VR_E* code (propagated by the planner). above_ms (<= the SLO)
 * says how much the planner needs: the exact P99 when it is <= above_ms;
 * when it is above, the estimator may instead return INFINITY as soon as
 * it knows (the SLO for "is it feasible?", the best P99 so far when
 * choosing among batch raises). Must be deterministic: the same cfg
 * gives the same exact answer whatever above_ms (the planner memoises). */
typedef int (*vr_il_estimate_fn)(void *ctx, const struct vr_il_problem *pb,
                                 const vr_il_config *cfg, double above_ms,
                                 double *p99_ms);

typedef struct vr_il_problem {
  int nstages;
  vr_il_stage st[VR_IL_MAX_STAGES];
  double slo_ms;   /* end-to-end P99 target */
  double rate_qps; /* mean arrival rate of the sample trace */
  int max_replicas; /* per stage (0: 512) */
  double coarse_factor; /* vr_il_coarse's batch: the largest b with
                           coarse_factor x service(b) <= SLO (0: 2, Vario's
                           SLO rule: a query may wait for the batch in
                           service; the paper's "maximum batch size
                           capable of meeting the SLO" reads as 1) */
  vr_il_estimate_fn estimate;
  void *ctx;
} vr_il_problem;

/* Planner statistics of one call. */
typedef struct vr_il_stats {
  int estimates;   /* estimator calls (memo misses) */
  int memo_hits;
  int iterations;  /* phase-2 actions applied */
} vr_il_stats;

/* Structure checks (tree, scales, options with a batch-1 latency). */
int vr_il_problem_validate(const vr_il_problem *pb, vr_errbuf *err);

/* Runs both phases. 0 with *out the cheapest configuration found (its P99
 * per the estimator <= slo_ms); VR_EINFEASIBLE with err naming the
 * bottleneck stage; other codes from the estimator or VR_ENOMEM. stats
 * may be NULL. */
int vr_il_plan(const vr_il_problem *pb, vr_il_config *out, vr_il_stats *stats,
               vr_errbuf *err);

/* The coarse-grained baseline: the whole pipeline replicated as one unit.
 * Each stage on its lowest-latency hardware, one batch size for all (the
 * largest power of two whose service time, twice over — a query may wait
 * for the batch in service — fits the SLO; pb->coarse_factor times over
 * when set), and as many units as
 * target_qps needs at the unit's bottleneck throughput. CG-Mean passes the
 * trace's mean rate, CG-Peak its peak rate in windows of the SLO
 * (vr_il_peak_qps). Fills cost_per_s, leaves p99_ms at -1.
 * VR_EINFEASIBLE naming the stage when even batch 1 misses the SLO. */
int vr_il_coarse(const vr_il_problem *pb, double target_qps,
                 vr_il_config *out, vr_errbuf *err);

/* Peak rate of sorted arrivals in sliding windows of window_ns (>= 1 ms;
 * 0 if unsorted or empty). */
double vr_il_peak_qps(const int64_t *t_ns, size_t n, int64_t window_ns);

/* Cost per second of cfg. */
double vr_il_cost(const vr_il_problem *pb, const vr_il_config *cfg);
/* Service time: the largest sum over root-to-leaf paths of the stages'
 * latency (p50) at their configured batch. */
double vr_il_service_ms(const vr_il_problem *pb, const vr_il_config *cfg);
/* Latency (p50, ms) and throughput (qps) of one replica of stage m. */
double vr_il_stage_ms(const vr_il_problem *pb, const vr_il_config *cfg, int m);
double vr_il_stage_qps(const vr_il_problem *pb, const vr_il_config *cfg,
                       int m);

/* The tuner's inputs from a plan (§5 Initialization): windows from the
 * plan's service time, the envelope of the sample trace (sorted arrival
 * times), per stage k_plan, s_m and one replica's throughput. */
int vr_il_tuner_cfg(const vr_il_problem *pb, const vr_il_config *cfg,
                    const int64_t *t_ns, size_t n, vr_tuner_cfg *out,
                    vr_errbuf *err);

#endif
