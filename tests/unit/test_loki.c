/* Loki's MILPs (policy/loki.h) against exhaustive search on small
 * instances, the Proteus-like per-task MILP, and infeasible demand: a best
 * effort plan and explicit drops, never an error, crash or hang. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "policy/loki.h"
#include "sim/psim.h"
#include "vr_test.h"

/* Chain a -> b; a1 (acc 100, mult 2), a2 (acc 80, mult 1); b1 (100), b2
 * (70). Latencies (ms) at batch 1, 2 below; SLO 60 (paths <= 30). */
static const char *CHAIN =
    "{\"name\":\"chain\",\"latency_ms\":60,\"tasks\":["
    "{\"name\":\"a\",\"variants\":[{\"name\":\"a1\",\"accuracy\":100,"
    "\"mult\":2},{\"name\":\"a2\",\"accuracy\":80,\"mult\":1}],"
    "\"children\":[\"b\"]},"
    "{\"name\":\"b\",\"variants\":[{\"name\":\"b1\",\"accuracy\":100},"
    "{\"name\":\"b2\",\"accuracy\":70}]}]}";
static const double LAT[4][2] = {{10, 16}, {4, 6}, {12, 18}, {3, 5}};

static void make(vr_pipe_data *d) {
  memset(d, 0, sizeof *d);
  vr_errbuf err = {0};
  assert_int_equal(vr_pipeline_parse(CHAIN, strlen(CHAIN), &d->pipe, &err), 0);
  vr_pipe_data_index(d);
  d->prof = VR_NEWN(vr_profile, 4);
  for (int i = 0; i < 4; i++) {
    vr_profile_init(&d->prof[i]);
    d->prof[i].lat.p50_ms[0] = LAT[i][0];
    d->prof[i].lat.p50_ms[1] = LAT[i][1];
    d->prof[i].max_batch = 2;
  }
}

static double cap(int slot, int b) { return b * 1000.0 / LAT[slot][b - 1]; }

/* Step 1 by brute force: the fewest workers with a1 and b1 only. */
static int brute_hw(double D, int S) {
  int best = -1;
  for (int na = 1; na <= S; na++)
    for (int nb = 1; na + nb <= S; nb++)
      for (int ba = 1; ba <= 2; ba++)
        for (int bb = 1; bb <= 2; bb++) {
          if (LAT[0][ba - 1] + LAT[2][bb - 1] > 30) continue;
          if (na * cap(0, ba) < D || nb * cap(2, bb) < 2 * D) continue;
          if (best < 0 || na + nb < best) best = na + nb;
        }
  return best;
}

/* Step 2 by brute force: integer allocations x flows on a 1/20 grid. */
static double brute_acc(double D, int S) {
  static const double A[4] = {1, .8, 1, .7}, M[2] = {2, 1};
  double best = -1;
  int n[4], b[4];
  for (int code = 0; code < 2401; code++) { /* 7 options per slot */
    int c = code, used = 0;
    for (int i = 0; i < 4; i++, c /= 7) {
      int o = c % 7; /* 0: none; 1..6: (n,b) */
      n[i] = o ? (o + 1) / 2 : 0;
      b[i] = o ? 2 - o % 2 : 1;
      used += n[i];
    }
    if (used > S) continue;
    int ok = 1; /* every path between hosted variants within 30 ms */
    for (int i = 0; i < 2; i++)
      for (int j = 2; j < 4; j++)
        if (n[i] && n[j] && LAT[i][b[i] - 1] + LAT[j][b[j] - 1] > 30) ok = 0;
    if (!ok) continue;
    for (int fa = 0; fa <= 20; fa++)
      for (int f1 = 0; f1 <= 20; f1++)
        for (int f2 = 0; f2 <= 20; f2++) {
          double F1 = fa / 20.0, F2 = 1 - F1; /* a1, a2 */
          double F11 = F1 * f1 / 20, F12 = F1 - F11, F21 = F2 * f2 / 20,
                 F22 = F2 - F21;
          double la = D * F1, la2 = D * F2;
          double lb1 = D * (F11 * M[0] + F21 * M[1]);
          double lb2 = D * (F12 * M[0] + F22 * M[1]);
          if (la > n[0] * cap(0, b[0]) + 1e-9 ||
              la2 > n[1] * cap(1, b[1]) + 1e-9 ||
              lb1 > n[2] * cap(2, b[2]) + 1e-9 ||
              lb2 > n[3] * cap(3, b[3]) + 1e-9)
            continue;
          double acc = F11 * A[0] * A[2] + F12 * A[0] * A[3] +
                       F21 * A[1] * A[2] + F22 * A[1] * A[3];
          if (acc > best) best = acc;
        }
  }
  return best;
}

static void check_plan(const vr_pipe_data *d, const vr_pipe_plan *plan,
                       int S) {
  assert_true(plan->workers <= S);
  for (int i = 0; i < 2; i++)
    for (int j = 2; j < 4; j++)
      if (plan->a[i].inst && plan->a[j].inst)
        assert_true(plan->a[i].lat_ms + plan->a[j].lat_ms <= 30 + 1e-9);
  (void)d;
}

static void test_hw_vs_brute(void **st) {
  (void)st;
  vr_pipe_data d;
  make(&d);
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
  vr_errbuf err = {0};
  vr_loki_stats ls;
  const double demand[] = {10, 60, 100, 130, 170, 240};
  for (int k = 0; k < 6; k++) {
    int S = 6, want = brute_hw(demand[k], S);
    assert_int_equal(vr_loki_plan(d.pipe, d.prof, demand[k], S, NULL, &plan,
                                  &ls, &err), 0);
    if (want < 0) { /* accuracy scaling took over */
      assert_int_equal(ls.step, 2);
      continue;
    }
    assert_int_equal(ls.step, 1);
    assert_int_equal(plan.workers, want);
    assert_int_equal(plan.a[1].inst + plan.a[3].inst, 0); /* most accurate */
    assert_true(plan.feasible && !plan.accuracy_scaled);
    check_plan(&d, &plan, S);
  }
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

static void test_accuracy_vs_brute(void **st) {
  (void)st;
  vr_pipe_data d;
  make(&d);
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
  vr_errbuf err = {0};
  vr_loki_stats ls;
  vr_loki_opts o;
  vr_loki_opts_default(&o);
  o.no_hw_scaling = 1;
  const double demand[] = {100, 150, 200, 250, 300};
  for (int k = 0; k < 5; k++) {
    int S = 3;
    double want = brute_acc(demand[k], S);
    assert_int_equal(vr_loki_plan(d.pipe, d.prof, demand[k], S, &o, &plan,
                                  &ls, &err), 0);
    if (want < 0) {
      assert_true(ls.served < 0.999 && !plan.feasible);
      continue;
    }
    double got = ls.accuracy / 100 * ls.served;
    assert_true(ls.served > 0.999);
    if (!(got >= want - 1e-6 && got <= want + 0.03))
      fprintf(stderr, "D=%g milp %.4f brute %.4f\n", demand[k], got, want);
    assert_true(got >= want - 1e-6);  /* as good as any enumerated plan */
    assert_true(got <= want + 0.03);  /* and the grid's resolution above */
    assert_true(plan.accuracy_scaled);
    assert_int_equal(plan.workers, S); /* idle workers became headroom */
    check_plan(&d, &plan, S);
  }
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

/* Far beyond what even the fastest variants carry: a best-effort plan,
 * and the simulator drops the excess explicitly. */
static void test_infeasible(void **st) {
  (void)st;
  vr_pipe_data d;
  make(&d);
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
  vr_errbuf err = {0};
  vr_loki_stats ls;
  assert_int_equal(vr_loki_plan(d.pipe, d.prof, 5000, 3, NULL, &plan, &ls,
                                &err), 0);
  assert_int_equal(ls.step, 2);
  assert_true(ls.served > 0.05 && ls.served < 0.5);
  assert_false(plan.feasible);
  assert_int_equal(plan.workers, 3);
  vr_workload wl;
  memset(&wl, 0, sizeof wl);
  wl.kind = VR_WL_POISSON;
  wl.rate = 5000;
  vr_psim_cfg cfg = {.data = &d, .arrivals = &wl, .workers = 3,
                     .duration_s = 5, .tick_s = 1, .seed = 1,
                     .max_queue = 256, .drop_mode = VR_EDROP_REROUTE,
                     .plan = &plan, .ctl_period_s = 10};
  vr_psim_summary s;
  assert_int_equal(vr_psim_run(&cfg, NULL, &s, &err), 0);
  assert_true(s.queries > 20000);
  assert_int_equal(s.ok + s.late + s.dropped, s.queries);
  assert_true(s.dropped > s.queries / 2);
  assert_true(s.ok > 0);
  vr_psim_summary_free(&s);
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

/* Proteus-like: per-task demand, whole cluster, accuracy lowered where a
 * task alone cannot keep up; unaware of the detector's fan-out. */
static void test_proteus(void **st) {
  (void)st;
  vr_pipe_data d;
  make(&d);
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
  vr_errbuf err = {0};
  vr_loki_stats ls;
  double q[2] = {50, 50}; /* light: most accurate everywhere */
  assert_int_equal(vr_proteus_plan(d.pipe, d.prof, q, 4, NULL, &plan, &ls,
                                   &err), 0);
  assert_int_equal(plan.workers, 4);
  assert_true(plan.a[0].inst > 0 && plan.a[2].inst > 0);
  assert_int_equal(plan.a[1].inst + plan.a[3].inst, 0);
  assert_true(fabs(ls.accuracy - 100) < 1e-6);
  q[0] = 150, q[1] = 600; /* b needs its fast variant */
  assert_int_equal(vr_proteus_plan(d.pipe, d.prof, q, 4, NULL, &plan, &ls,
                                   &err), 0);
  assert_true(plan.a[3].inst > 0);
  assert_true(ls.accuracy < 100 && ls.served > 0.999);
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hw_vs_brute),
      cmocka_unit_test(test_accuracy_vs_brute),
      cmocka_unit_test(test_infeasible),
      cmocka_unit_test(test_proteus),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
