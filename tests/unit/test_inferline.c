/* InferLine planner and coarse-grained baselines against estimators
 * defined here (an analytic queueing formula, and an adversarial one), so
 * that the search's guarantees are checked independently of the
 * simulator; tests/unit/test_inferline_sim.c runs it on the simulator. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "vr_test.h"

#include "base/alloc.h"
#include "policy/inferline.h"

/* A model on one piece of hardware: latency a + b*batch ms, max batch 32. */
static vr_profile hw(const char *name, double a, double b, double cost) {
  vr_profile p;
  vr_profile_init(&p);
  snprintf(p.model, sizeof p.model, "m");
  snprintf(p.app, sizeof p.app, "a");
  snprintf(p.variant, sizeof p.variant, "%s", name);
  p.max_batch = 32;
  for (int s = 0; s < 6; s++) p.lat.p50_ms[s] = a + b * (1 << s);
  p.cost_per_s = cost;
  return p;
}

/* Analytic estimator: per stage two batch times plus a queueing term that
 * diverges as utilisation -> 1; P99 = the worst root-to-leaf sum. */
static int est_analytic(void *ctx, const vr_il_problem *pb,
                        const vr_il_config *c, double above_ms, double *p99) {
  (void)above_ms; /* always exact */
  int *calls = ctx;
  if (calls) (*calls)++;
  double path[VR_IL_MAX_STAGES], worst = 0;
  for (int m = 0; m < pb->nstages; m++) {
    double l = vr_il_stage_ms(pb, c, m);
    double u = pb->rate_qps * pb->st[m].scale /
               (c->st[m].replicas * vr_il_stage_qps(pb, c, m));
    double v = u >= 1 ? INFINITY : 2 * l + l * u / (1 - u);
    int p = pb->st[m].parent;
    path[m] = (p >= 0 ? path[p] : 0) + v;
    if (path[m] > worst) worst = path[m];
  }
  *p99 = worst;
  return 0;
}

/* Adversarial: a pseudo-random P99 per configuration, deterministic. */
static int est_noise(void *ctx, const vr_il_problem *pb,
                     const vr_il_config *c, double above_ms, double *p99) {
  (void)ctx;
  uint64_t h = 88172645463325252ULL;
  for (int m = 0; m < pb->nstages; m++) {
    h ^= (uint64_t)(c->st[m].hw * 131 + c->st[m].batch * 7 +
                    c->st[m].replicas * 1009);
    h *= 0x9E3779B97F4A7C15ULL;
    h ^= h >> 29;
  }
  double r = (double)(h % 1000) / 1000.0;
  est_analytic(NULL, pb, c, above_ms, p99);
  *p99 *= 0.6 + 0.8 * r; /* +-40 % around the analytic value */
  return 0;
}

/* est_noise that uses its licence: INFINITY whenever the P99 is above
 * above_ms (ctx counts those for a bound below the SLO). */
static int est_noise_bounded(void *ctx, const vr_il_problem *pb,
                             const vr_il_config *c, double above_ms,
                             double *p99) {
  est_noise(NULL, pb, c, above_ms, p99);
  if (*p99 > above_ms) {
    if (ctx && above_ms < pb->slo_ms && *p99 <= pb->slo_ms) (*(int *)ctx)++;
    *p99 = INFINITY;
  }
  return 0;
}

static int est_fail(void *ctx, const vr_il_problem *pb,
                    const vr_il_config *c, double above_ms, double *p99) {
  (void)ctx, (void)pb, (void)c, (void)above_ms, (void)p99;
  return VR_EIO;
}

static vr_profile gpu[3], cpu[3];

/* detect -> {classify, faces}: detect on GPU (fast, dear) or CPU. */
static void mkpb(vr_il_problem *pb, double slo, double qps) {
  memset(pb, 0, sizeof *pb);
  gpu[0] = hw("det/gpu", 4, 1, 10);
  cpu[0] = hw("det/cpu", 20, 15, 2);
  gpu[1] = hw("cls/gpu", 2, 0.5, 10);
  cpu[1] = hw("cls/cpu", 6, 4, 1);
  gpu[2] = hw("face/gpu", 3, 0.5, 10);
  cpu[2] = hw("face/cpu", 10, 6, 1);
  const char *names[] = {"detect", "classify", "faces"};
  double scale[] = {1, 2.5, 0.4};
  pb->nstages = 3;
  for (int m = 0; m < 3; m++) {
    snprintf(pb->st[m].name, sizeof pb->st[m].name, "%s", names[m]);
    pb->st[m].parent = m ? 0 : -1;
    pb->st[m].scale = scale[m];
    pb->st[m].nhw = 2;
  }
  static vr_profile opts[3][2];
  for (int m = 0; m < 3; m++) {
    opts[m][0] = gpu[m];
    opts[m][1] = cpu[m];
    pb->st[m].hw = opts[m];
  }
  pb->slo_ms = slo;
  pb->rate_qps = qps;
  pb->estimate = est_analytic;
}

/* No single replica removal from the plan is both feasible and cheaper. */
static void assert_local_optimum(const vr_il_problem *pb,
                                 const vr_il_config *c) {
  for (int m = 0; m < pb->nstages; m++) {
    if (c->st[m].replicas <= 1) continue;
    vr_il_config t = *c;
    t.st[m].replicas--;
    double p99;
    pb->estimate(pb->ctx, pb, &t, pb->slo_ms, &p99);
    assert_true(p99 > pb->slo_ms);
  }
}

static void test_plan_meets_slo_and_saves(void **st) {
  (void)st;
  vr_il_problem pb;
  mkpb(&pb, 150, 200);
  int calls = 0;
  pb.ctx = &calls;
  vr_il_config c;
  vr_il_stats s;
  vr_errbuf err = {0};
  assert_int_equal(vr_il_plan(&pb, &c, &s, &err), 0);
  assert_true(c.p99_ms <= pb.slo_ms);
  double p99;
  est_analytic(NULL, &pb, &c, pb.slo_ms, &p99);
  assert_true(p99 == c.p99_ms);
  assert_true(fabs(c.cost_per_s - vr_il_cost(&pb, &c)) < 1e-9);
  assert_int_equal(calls, s.estimates);
  assert_local_optimum(&pb, &c);
  assert_true(s.iterations > 0);
  /* cheaper than the coarse-grained pipeline sized for the mean */
  vr_il_config cg;
  assert_int_equal(vr_il_coarse(&pb, pb.rate_qps, &cg, &err), 0);
  assert_true(c.cost_per_s < cg.cost_per_s);
  /* a loose SLO lets a stage move to the cheap hardware */
  vr_il_problem loose;
  mkpb(&loose, 2000, 20);
  assert_int_equal(vr_il_plan(&loose, &c, NULL, &err), 0);
  int on_cpu = 0;
  for (int m = 0; m < 3; m++) on_cpu += c.st[m].hw == 1;
  assert_true(on_cpu >= 1);
  assert_true(c.p99_ms <= loose.slo_ms);
  /* batching happened somewhere (it is what lets replicas go) */
  int batched = 0;
  for (int m = 0; m < 3; m++) batched += c.st[m].batch > 1;
  assert_true(batched >= 1);
}

static void test_plan_never_above_slo(void **st) {
  (void)st;
  for (int i = 0; i < 12; i++) {
    vr_il_problem pb;
    mkpb(&pb, 40 + 30 * i, 50 + 40 * i);
    pb.estimate = est_noise;
    vr_il_config c;
    vr_errbuf err = {0};
    int rc = vr_il_plan(&pb, &c, NULL, &err);
    if (rc) {
      assert_int_equal(rc, VR_EINFEASIBLE);
      continue;
    }
    double p99;
    est_noise(NULL, &pb, &c, pb.slo_ms, &p99);
    assert_true(p99 <= pb.slo_ms);
    assert_true(c.p99_ms == p99);
  }
}

/* An estimator that stops at the planner's bound (INFINITY above it) gets
 * the same plan as an exact one: the bounds only ever cut estimates the
 * planner could not have used. */
static void test_plan_same_with_bounded_estimates(void **st) {
  (void)st;
  int bounded = 0, planned = 0;
  for (int i = 0; i < 12; i++) {
    vr_il_problem pb;
    mkpb(&pb, 40 + 30 * i, 50 + 40 * i);
    pb.estimate = est_noise;
    vr_il_config exact, cut;
    vr_errbuf err = {0};
    int rc = vr_il_plan(&pb, &exact, NULL, &err);
    pb.estimate = est_noise_bounded;
    int below_slo = 0;
    pb.ctx = &below_slo;
    assert_int_equal(vr_il_plan(&pb, &cut, NULL, &err), rc);
    if (rc) continue;
    planned++;
    assert_memory_equal(exact.st, cut.st, sizeof exact.st[0] * 3);
    assert_true(exact.p99_ms == cut.p99_ms);
    assert_true(exact.cost_per_s == cut.cost_per_s);
    bounded += below_slo;
  }
  assert_true(planned >= 6);
  assert_true(bounded > 0); /* the bounds were used */
}

static void test_plan_infeasible_names_stage(void **st) {
  (void)st;
  vr_il_problem pb;
  mkpb(&pb, 5, 10); /* detect alone needs 5 ms on its GPU, plus a child */
  vr_il_config c;
  vr_errbuf err = {0};
  assert_int_equal(vr_il_plan(&pb, &c, NULL, &err), VR_EINFEASIBLE);
  assert_non_null(strstr(err.msg, "bottleneck stage 'detect'"));
  assert_non_null(strstr(err.msg, "infeasible"));
  /* feasible service time but replicas capped: names the bottleneck */
  mkpb(&pb, 100, 5000);
  pb.max_replicas = 4;
  assert_int_equal(vr_il_plan(&pb, &c, NULL, &err), VR_EINFEASIBLE);
  assert_non_null(strstr(err.msg, "bottleneck stage 'classify'"));
  /* the median path fits (8.5 ms) but the tail does not (P99 twice it,
   * whatever the replicas): said at once, naming the slowest stage, not
   * after adding replicas one by one up to the limit */
  mkpb(&pb, 9, 10);
  int calls = 0;
  pb.ctx = &calls;
  assert_int_equal(vr_il_plan(&pb, &c, NULL, &err), VR_EINFEASIBLE);
  assert_non_null(strstr(err.msg, "even with 512 replicas of every stage"));
  assert_non_null(strstr(err.msg, "bottleneck stage 'detect'"));
  assert_true(calls < 10);
  /* coarse: twice the batch-1 service time must fit */
  mkpb(&pb, 12, 10);
  assert_int_equal(vr_il_coarse(&pb, 10, &c, &err), VR_EINFEASIBLE);
  assert_non_null(strstr(err.msg, "'detect'"));
  /* estimator errors propagate */
  mkpb(&pb, 100, 10);
  pb.estimate = est_fail;
  assert_int_equal(vr_il_plan(&pb, &c, NULL, &err), VR_EIO);
  /* malformed problems */
  mkpb(&pb, 100, 10);
  pb.st[2].parent = 2;
  assert_int_equal(vr_il_plan(&pb, &c, NULL, &err), VR_EINVAL);
  mkpb(&pb, 100, 10);
  pb.st[1].scale = 0;
  assert_int_equal(vr_il_plan(&pb, &c, NULL, &err), VR_EINVAL);
  assert_non_null(strstr(err.msg, "classify"));
  /* an infinite rate or SLO: refused, not cast to a replica count */
  mkpb(&pb, 100, 10);
  pb.rate_qps = INFINITY;
  assert_int_equal(vr_il_plan(&pb, &c, NULL, &err), VR_EINVAL);
  mkpb(&pb, 100, 10);
  pb.slo_ms = INFINITY;
  assert_int_equal(vr_il_plan(&pb, &c, NULL, &err), VR_EINVAL);
  /* a finite rate whose replica need passes int (1e13 q/s, or a huge
   * fan-out): the replica limit, not an out-of-range cast (UBSan) */
  mkpb(&pb, 100, 1e13);
  assert_int_equal(vr_il_plan(&pb, &c, NULL, &err), VR_EINFEASIBLE);
  assert_non_null(strstr(err.msg, "the replica limit"));
  assert_int_equal(vr_il_coarse(&pb, 1e13, &c, &err), 0);
  assert_int_equal(c.st[0].replicas, 1000000);
  assert_int_equal(vr_il_coarse(&pb, INFINITY, &c, &err), VR_EINVAL);
}

static void test_coarse_and_peak(void **st) {
  (void)st;
  vr_il_problem pb;
  mkpb(&pb, 100, 100);
  vr_il_config mean, peak;
  vr_errbuf err = {0};
  assert_int_equal(vr_il_coarse(&pb, 100, &mean, &err), 0);
  assert_int_equal(vr_il_coarse(&pb, 4000, &peak, &err), 0);
  /* one batch for every stage, all on the fastest (GPU) hardware, the
   * same number of units everywhere */
  for (int m = 0; m < 3; m++) {
    assert_int_equal(mean.st[m].hw, 0);
    assert_int_equal(mean.st[m].batch, mean.st[0].batch);
    assert_int_equal(mean.st[m].replicas, mean.st[0].replicas);
  }
  /* 2 x (detect + faces at batch b) <= 100:
   * b = 16: 2x(20+11) = 62 fits, b = 32: 2x(36+19) = 110 does not) */
  assert_int_equal(mean.st[0].batch, 16);
  assert_true(peak.cost_per_s > 3 * mean.cost_per_s);
  /* the paper's reading (service(b) <= SLO): b = 32, 55 ms, fits */
  pb.coarse_factor = 1;
  assert_int_equal(vr_il_coarse(&pb, 100, &mean, &err), 0);
  assert_int_equal(mean.st[0].batch, 32);
  pb.coarse_factor = -1;
  assert_int_equal(vr_il_coarse(&pb, 100, &mean, &err), VR_EINVAL);
  int64_t t[] = {0, 1000000, 2000000, 500000000, 900000000};
  /* 3 arrivals within 10 ms: 300 qps */
  assert_true(fabs(vr_il_peak_qps(t, 5, 10000000) - 300) < 1e-9);
  assert_true(vr_il_peak_qps(t, 0, 10000000) == 0);
}

static void test_tuner_from_plan(void **st) {
  (void)st;
  vr_il_problem pb;
  mkpb(&pb, 150, 100);
  vr_il_config c;
  vr_errbuf err = {0};
  assert_int_equal(vr_il_plan(&pb, &c, NULL, &err), 0);
  size_t n = 6000;
  int64_t *t = VR_NEWN(int64_t, n);
  for (size_t i = 0; i < n; i++) t[i] = (int64_t)i * 10000000;
  vr_tuner_cfg tc;
  assert_int_equal(vr_il_tuner_cfg(&pb, &c, t, n, &tc, &err), 0);
  assert_int_equal(tc.plan.win_ns[0],
                   (int64_t)(vr_il_service_ms(&pb, &c) * 1e6));
  for (int m = 0; m < 3; m++) {
    assert_int_equal(tc.st[m].k_plan, c.st[m].replicas);
    assert_true(tc.st[m].scale == pb.st[m].scale);
  }
  vr_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plan_meets_slo_and_saves),
      cmocka_unit_test(test_plan_never_above_slo),
      cmocka_unit_test(test_plan_same_with_bounded_estimates),
      cmocka_unit_test(test_plan_infeasible_names_stage),
      cmocka_unit_test(test_coarse_and_peak),
      cmocka_unit_test(test_tuner_from_plan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
