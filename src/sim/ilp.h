/*
 * Reference for the INFaaS autoscaler: the cost-minimal provisioning ILP,
 * solved exactly with COIN-OR CBC, and a driver that runs the real greedy
 * policy (src/policy) to convergence on the same problem, so tests and
 * benchmarks can measure the greedy's gap to optimal.
 *
 * Problem: models m with demand D_m (qps); variants v of each model with
 * saturation throughput sat_v per instance under the model's SLO and
 * resource needs (threads, GPU, memory); worker types t with cores, GPUs,
 * memory, price and at most max_count workers. Choose instances x[v,w] on
 * workers w (y_w = 1 if w is used) so that every model has
 * sum sat_v x[v,w] >= slack * D_m, no worker is overcommitted, and the
 * price of the used workers is minimal.
 *
 * Not a policy: heavy reference work (CBC through policy/milp.h); it lives in
 * sim/. Ownership: vr_cap_solution.inst is allocated by the solver and
 * freed with vr_cap_solution_free.
 */
#ifndef VR_SIM_ILP_H
#define VR_SIM_ILP_H

#include "policy/policy.h"

typedef struct vr_cap_problem {
  const vr_profile *variants; /* nvariants */
  size_t nvariants;
  const int *model_of;        /* model index per variant */
  size_t nmodels;
  const double *demand;       /* qps per model */
  const double *slo_ms;       /* SLO per model */
  double slack;               /* headroom, e.g. 1.05 */
  const vr_snap_wtype *wtypes; /* max_count > 0 required */
  size_t nwtypes;
} vr_cap_problem;

typedef struct vr_cap_solution {
  double cost;    /* price per second of the workers used */
  int workers;    /* workers used */
  int *inst;      /* instances per variant (nvariants) */
  int optimal;    /* CBC proved optimality */
  int feasible;   /* demand covered */
} vr_cap_solution;

/* Exact solution with CBC (time_limit_s bounds the search; `optimal` says
 * whether it finished). VR_EINFEASIBLE when no provisioning exists. */
int vr_ilp_solve(const vr_cap_problem *p, double time_limit_s,
                 vr_cap_solution *out, vr_errbuf *err);

/* The INFaaS greedy: the first instance of each model as selection would
 * load it, then vr_policy_tick every simulated second (actions applied,
 * load shared by capacity) until nothing changes for 10 s or 300 s pass. */
int vr_greedy_solve(const vr_cap_problem *p, const vr_policy_cfg *cfg,
                    vr_cap_solution *out, vr_errbuf *err);

void vr_cap_solution_free(vr_cap_solution *s);

#endif
