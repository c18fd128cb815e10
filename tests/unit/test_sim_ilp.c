/* The CBC provisioning ILP and the greedy (real INFaaS policy) on the same
 * problems: known optimum, infeasibility, and optimum <= greedy on random
 * instances. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "vr_test.h"

#include "sim/ilp.h"
#include "sim/rng.h"

static vr_profile prof(const char *name, const char *model, int threads,
                       int gpu, double b1) {
  vr_profile p;
  vr_profile_init(&p);
  snprintf(p.variant, sizeof p.variant, "%s", name);
  snprintf(p.model, sizeof p.model, "%s", model);
  p.threads = threads;
  p.device = gpu ? VR_DEV_GPU : VR_DEV_CPU;
  p.max_batch = 1;
  p.lat.p50_ms[0] = b1;
  p.accuracy = 90;
  p.load_ms = 1000;
  p.mem_bytes = 1LL << 30;
  p.cost_per_s = gpu ? 3 : threads / 16.0;
  return p;
}

static void test_known(void **st) {
  (void)st;
  /* m0: 4-thread variant, 10 ms -> 100 qps per instance; 300 qps needs
   * 4 instances with 1.05 slack = 16 cores. m1: 2 threads, 200 qps each,
   * 150 qps -> 1 instance. Optimum: 2 CPU workers (18 cores), or one GPU
   * worker for m1 at price 3: 2 CPU workers cost 2. */
  vr_profile v[3] = {prof("m0/t4", "m0", 4, 0, 10), prof("m1/t2", "m1", 2, 0, 5),
                     prof("m1/gpu", "m1", 1, 1, 1)};
  int model_of[3] = {0, 1, 1};
  double demand[2] = {300, 150}, slo[2] = {100, 100};
  vr_snap_wtype wt[2] = {{16, 0, 64LL << 30, 1.0, 4, 0},
                         {8, 1, 64LL << 30, 3.0, 4, 0}};
  vr_cap_problem p = {v, 3, model_of, 2, demand, slo, 1.05, wt, 2};
  vr_cap_solution opt, gr;
  vr_errbuf err = {0};
  assert_int_equal(vr_ilp_solve(&p, 10, &opt, &err), 0);
  assert_true(opt.optimal);
  assert_true(fabs(opt.cost - 2) < 1e-9);
  assert_int_equal(opt.inst[0], 4);
  assert_int_equal(opt.inst[1], 1);
  assert_int_equal(opt.inst[2], 0);
  vr_policy_cfg cfg;
  vr_policy_cfg_default(&cfg, VR_POL_INFAAS);
  cfg.min_workers = 0;
  cfg.worker_idle_ns = 0;
  assert_int_equal(vr_greedy_solve(&p, &cfg, &gr, &err), 0);
  assert_true(gr.feasible);
  assert_true(gr.cost >= opt.cost - 1e-9);
  assert_true(fabs(gr.cost - 2) < 1e-9); /* the greedy finds it here */
  vr_cap_solution_free(&opt);
  vr_cap_solution_free(&gr);
  /* an SLO no variant meets: infeasible */
  slo[0] = 5;
  assert_int_equal(vr_ilp_solve(&p, 10, &opt, &err), VR_EINFEASIBLE);
  /* bad worker pool */
  slo[0] = 100;
  wt[0].max_count = 0;
  assert_int_equal(vr_ilp_solve(&p, 10, &opt, &err), VR_EINVAL);
}

static void test_random(void **st) {
  (void)st;
  vr_rng r;
  vr_rng_seed(&r, 99);
  vr_policy_cfg cfg;
  vr_policy_cfg_default(&cfg, VR_POL_INFAAS);
  cfg.min_workers = 0;
  cfg.worker_idle_ns = 0;
  for (int it = 0; it < 15; it++) {
    vr_profile v[8];
    int model_of[8];
    double demand[2], slo[2] = {200, 200};
    for (int m = 0; m < 2; m++) demand[m] = 20 + 300 * vr_rng_unif(&r);
    for (int k = 0; k < 8; k++) {
      char name[32], model[8];
      int thr = 1 << (vr_rng_next(&r) % 3), gpu = k % 4 == 3;
      snprintf(model, sizeof model, "m%d", k % 2);
      snprintf(name, sizeof name, "%s/%d", model, k);
      v[k] = prof(name, model, gpu ? 1 : thr, gpu,
                  (gpu ? 3 : 30.0 / thr) * (0.8 + 0.4 * vr_rng_unif(&r)));
      model_of[k] = k % 2;
    }
    vr_snap_wtype wt[2] = {{16, 0, 64LL << 30, 1.0, 6, 0},
                           {8, 1, 64LL << 30, 3.0, 6, 0}};
    vr_cap_problem p = {v, 8, model_of, 2, demand, slo, 1.05, wt, 2};
    vr_cap_solution opt, gr;
    vr_errbuf err = {0};
    assert_int_equal(vr_ilp_solve(&p, 10, &opt, &err), 0);
    assert_int_equal(vr_greedy_solve(&p, &cfg, &gr, &err), 0);
    assert_true(gr.feasible);
    assert_true(opt.cost <= gr.cost + 1e-9);
    /* the optimum covers the demand */
    for (int m = 0; m < 2; m++) {
      double cap = 0;
      for (int k = 0; k < 8; k++)
        if (model_of[k] == m)
          cap += opt.inst[k] * vr_profile_sat_qps(&v[k], slo[m]);
      assert_true(cap >= 1.05 * demand[m] - 1e-6);
    }
    vr_cap_solution_free(&opt);
    vr_cap_solution_free(&gr);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_known),
      cmocka_unit_test(test_random),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
