/*
 * Control policies: one tick per control period (every simulated or real
 * second), snapshot in, actions out.
 *
 *  - INFaaS: variant state machine, model autoscaler (replicate vs
 *    upgrade/downgrade by cost C*(d + lambda*T_load*max(d,0)), scale down
 *    only after an instance has been removable for its load time),
 *    interference detection and mitigation, worker autoscaling with
 *    consolidation of fragmented workers.
 *  - Clipper+: pre-provisioned fixed variants; never scales.
 *  - SM+: horizontal autoscaling of one fixed variant per group.
 *
 * Purity: a tick reads the snapshot, the config and the caller-owned
 * vr_policy_state, and writes actions and the state. The state carries what
 * a policy must remember between ticks (when a variant became removable,
 * when an add-worker is pending); it is deterministic data, owned by the
 * caller, freed with vr_policy_state_free.
 */
#ifndef VR_POLICY_POLICY_H
#define VR_POLICY_POLICY_H

#include "base/map.h"
#include "policy/snapshot.h"

typedef enum {
  VR_POL_INFAAS = 0,
  VR_POL_CLIPPER = 1,
  VR_POL_SM = 2,
  VR_POL_ASYFUNC = 3, /* bodies + shadows (policy/asyfunc_tick.c) */
} vr_policy_kind;

#define VR_POL_MAX_FIXED 64

typedef struct vr_policy_fixed {
  int variant;   /* snapshot variant index */
  int instances; /* Clipper+: count; SM+: initial count */
} vr_policy_fixed;

typedef struct vr_policy_cfg {
  int kind;                   /* vr_policy_kind */
  double slack;               /* headroom threshold, default 1.05 */
  double lambda;              /* load-time penalty weight per second */
  double interference_factor; /* observed p99 > profile x factor */
  double down_headroom;       /* scale down if headroom after removal >=
                                 this (default 1.5; 0: slack) */
  int64_t worker_idle_ns;     /* remove a worker idle this long */
  int min_workers;            /* never go below */
  int max_instances;          /* per variant, cap (0 = unlimited) */
  int consolidate;            /* INFaaS: empty fragmented workers (1) */
  double vm_util;             /* VM autoscaler (INFaaS paper 4.2.3, rule
                                 1): add a worker of a type once the used
                                 share of any of its resources (cores,
                                 GPUs, memory) over all its workers,
                                 starting ones included, exceeds this, so
                                 capacity is starting before loads find no
                                 room; an idle worker is released only if
                                 the share stays at or below it without
                                 it. Default 0.8 (the paper's value) for
                                 the autoscaling policies (INFaaS, SM+), 0
                                 (off: workers only for loads that found no
                                 room) for Clipper+ */
  double backlog_step;        /* > 1: a variant whose queued rows take more
                                 than half its SLO to drain counts as
                                 loaded to this x its profiled capacity
                                 (live servers, where the front end shares
                                 the cores and profiles run optimistic);
                                 0 = off (default; the simulator's service
                                 times are the profile) */
  int cross_model;            /* INFaaS: upgrades/downgrades may move a
                                 variant's load to another model of the
                                 same app that still meets the accuracy
                                 its queries asked for (1) */
  int burst_upgrade;          /* INFaaS: when the cheapest scale-up finds
                                 no room on the workers that are up,
                                 upgrade to a higher-throughput variant
                                 that fits now, even one dearer per query
                                 (the paper's model-vertical scaling
                                 under its resource constraint); 1 by
                                 default */
  int cpu_max_replicas;       /* INFaaS, the authors' artifact
                                 (autoscaler.cc CPU_MAX_REPLICAS): a CPU
                                 variant that would need more instances
                                 than this upgrades to a higher-throughput
                                 variant that fits now instead of
                                 replicating; 0 = off (default: the paper
                                 has no such cap) */
  /* AsyFunc (VR_POL_ASYFUNC; policy/asyfunc_tick.c), for variants with a
   * block profile: LLS pairs a shadow when the rows queued reach af_gamma
   * per body (default 2), at most af_kappa new shadows per tick (default
   * 10; 0 = none: AsyFunc⁻), one per body; a shadow is released af_release_idle_ms (1000) after the
   * queue fell below; MLS every af_mls_period_ns (60 s) with af_alpha
   * (0.8) / af_beta (0.6). A new body goes on the up worker with the
   * most free cores that fits it; with af_body_per_worker, not on one
   * that holds an instance of the variant already (the cluster: a worker
   * serves a model under its name once). */
  int af_gamma, af_kappa, af_body_per_worker;
  double af_alpha, af_beta, af_release_idle_ms;
  int64_t af_mls_period_ns;
  int nfixed;                 /* baselines: fixed variants */
  vr_policy_fixed fixed[VR_POL_MAX_FIXED];
} vr_policy_cfg;

/* Caller-owned memory of a policy between ticks. */
typedef struct vr_policy_state {
  vr_map removable; /* variant name -> (void*)(removable_since_ns + 1) */
  int64_t last_add_ns; /* last ADD_WORKER (to wait for it to appear) */
} vr_policy_state;

void vr_policy_cfg_default(vr_policy_cfg *c, int kind);
void vr_policy_state_init(vr_policy_state *st);
void vr_policy_state_free(vr_policy_state *st);

/* Runs one control period of the configured policy. Appends to *out.
 * 0, VR_ENOMEM, or VR_EINVAL for an inconsistent snapshot/config. */
int vr_policy_tick(const vr_policy_cfg *c, vr_policy_state *st,
                   const vr_snapshot *s, vr_actions *out);

/* The pieces, callable on their own (tests, the live control loop). */
int vr_policy_states(const vr_policy_cfg *c, const vr_snapshot *s,
                     vr_actions *out);
int vr_policy_interference(const vr_policy_cfg *c, const vr_snapshot *s,
                           vr_actions *out);

/* Cost per query of a variant running full batches: cost_per_s / peak
 * qps at its max batch (plus 1e-9 x latency to break ties). Selection
 * routes a model's queries to its active variant with the lowest value. */
double vr_policy_query_cost(const vr_profile *p);

/* Saturation throughput of one instance of variant v under its SLO. */
double vr_policy_sat_qps(const vr_snap_variant *v);

/* AsyFunc's crowd rule (policy/asyfunc_tick.c): whether `rows` queued at
 * a variant's `bodies` call for layer-level scaling, gamma (af_gamma,
 * default 2) per body. The tick decides LLS on it; the live control plane
 * also checks it as queries are routed, to run the tick at once: the
 * paper's LLS decides "each time a new request arrives" (§3.3), not at
 * the next control period. */
int vr_pol_af_crowded(const vr_policy_cfg *c, long rows, int bodies);

const char *vr_policy_name(int kind);
/* "infaas" / "clipper" / "sm" / "asyfunc" -> kind, or -1. */
int vr_policy_parse(const char *s);

#endif
