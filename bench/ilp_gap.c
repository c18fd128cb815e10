/*
 * Greedy INFaaS autoscaler vs the optimal provisioning (CBC) on random
 * instances: cost gap = greedy cost / optimal cost - 1.
 *
 *   build-sim/bench/bench_ilp_gap [instances] [seed]
 *
 * Each instance: 1-4 models, each with 2-5 variants (CPU with 1/2/4/8
 * threads or GPU, random latency curves), demand 5-400 qps, SLO 50-300 ms;
 * worker types: 16-core CPU (price 1) and 8-core 1-GPU (price 2.5-5).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/ilp.h"
#include "sim/rng.h"

static double wall(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void make(vr_rng *r, vr_profile *v, int *model_of, size_t *nv,
                 double *demand, double *slo, size_t *nm, vr_snap_wtype *wt) {
  *nm = 1 + vr_rng_next(r) % 4;
  *nv = 0;
  for (size_t m = 0; m < *nm; m++) {
    demand[m] = 5 + 395 * vr_rng_unif(r);
    slo[m] = 50 + 250 * vr_rng_unif(r);
    int k = 2 + (int)(vr_rng_next(r) % 4);
    double base = 5 + 40 * vr_rng_unif(r); /* 1-thread batch-1 latency */
    for (int j = 0; j < k; j++) {
      vr_profile *p = &v[*nv];
      vr_profile_init(p);
      snprintf(p->model, sizeof p->model, "m%zu", m);
      snprintf(p->app, sizeof p->app, "a");
      int gpu = vr_rng_unif(r) < 0.3;
      int thr = gpu ? 1 : 1 << (vr_rng_next(r) % 4);
      snprintf(p->variant, sizeof p->variant, "m%zu/%s%d/%d", m,
               gpu ? "gpu" : "t", thr, j);
      p->device = gpu ? VR_DEV_GPU : VR_DEV_CPU;
      p->threads = thr;
      p->max_batch = 16;
      double b1 = gpu ? base * 0.4 : base / pow(thr, 0.7);
      double grow = gpu ? 0.15 : 0.8; /* per-doubling latency growth */
      for (int s = 0; s < 5; s++) {
        p->lat.p50_ms[s] = b1 * pow(1 + grow, s) * (0.9 + 0.2 * vr_rng_unif(r));
        if (s && p->lat.p50_ms[s] < p->lat.p50_ms[s - 1])
          p->lat.p50_ms[s] = p->lat.p50_ms[s - 1];
        p->lat.p99_ms[s] = p->lat.p50_ms[s] * 1.2;
      }
      p->accuracy = 90;
      p->load_ms = gpu ? 3000 : 1000;
      p->mem_bytes = (int64_t)(1 + vr_rng_next(r) % 4) << 30;
      p->cost_per_s = gpu ? 2.5 : thr / 16.0;
      model_of[(*nv)++] = (int)m;
    }
  }
  wt[0] = (vr_snap_wtype){16, 0, 64LL << 30, 1.0, 12, 0};
  wt[1] = (vr_snap_wtype){8, 1, 64LL << 30, 2.5 + 2.5 * vr_rng_unif(r), 12, 0};
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 200;
  uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
  vr_rng r;
  vr_rng_seed(&r, seed);
  vr_policy_cfg cfg;
  vr_policy_cfg_default(&cfg, VR_POL_INFAAS);
  cfg.min_workers = 0;
  cfg.worker_idle_ns = 0;
  double gap_sum = 0, gap_max = 0, t_ilp = 0, t_greedy = 0;
  int counted = 0, optimal = 0, equal = 0, skipped = 0;
  for (int i = 0; i < n; i++) {
    vr_profile v[32];
    int model_of[32];
    double demand[4], slo[4];
    size_t nv, nm;
    vr_snap_wtype wt[2];
    make(&r, v, model_of, &nv, demand, slo, &nm, wt);
    vr_cap_problem p = {v, nv, model_of, nm, demand, slo, cfg.slack, wt, 2};
    vr_cap_solution opt, gr;
    vr_errbuf err = {0};
    double t0 = wall();
    int rc = vr_ilp_solve(&p, 20, &opt, &err);
    double t1 = wall();
    if (rc) { /* e.g. an SLO no variant meets */
      skipped++;
      continue;
    }
    if (vr_greedy_solve(&p, &cfg, &gr, &err) || !gr.feasible) {
      fprintf(stderr, "instance %d: greedy %s\n", i,
              err.msg[0] ? err.msg : "left demand uncovered");
      vr_cap_solution_free(&opt);
      skipped++;
      continue;
    }
    double t2 = wall();
    t_ilp += t1 - t0;
    t_greedy += t2 - t1;
    double gap = gr.cost / opt.cost - 1;
    if (getenv("VR_VERBOSE") && gap > 1e-9) {
      printf("instance %d: greedy %.2f (%d workers) optimal %.2f (%d)\n", i,
             gr.cost, gr.workers, opt.cost, opt.workers);
      for (size_t k = 0; k < nv; k++)
        printf("  %-14s demand %6.1f slo %5.1f sat %7.2f thr %d cost %.3f "
               "greedy %d opt %d\n", v[k].variant, demand[model_of[k]],
               slo[model_of[k]], vr_profile_sat_qps(&v[k], slo[model_of[k]]),
               v[k].threads, v[k].cost_per_s, gr.inst[k], opt.inst[k]);
    }
    gap_sum += gap;
    if (gap > gap_max) gap_max = gap;
    equal += fabs(gap) < 1e-9;
    optimal += opt.optimal;
    counted++;
    vr_cap_solution_free(&opt);
    vr_cap_solution_free(&gr);
  }
  printf("instances %d (skipped %d: infeasible SLO or greedy failure)\n",
         counted, skipped);
  printf("CBC proved optimal: %d/%d\n", optimal, counted);
  printf("greedy cost gap: mean %.2f%%  max %.2f%%  equal to optimal %d/%d\n",
         100 * gap_sum / (counted ? counted : 1), 100 * gap_max, equal,
         counted);
  printf("time per instance: CBC %.1f ms, greedy %.2f ms\n",
         1000 * t_ilp / (counted ? counted : 1),
         1000 * t_greedy / (counted ? counted : 1));
  return 0;
}
