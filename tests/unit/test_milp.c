/* The CBC wrapper (policy/milp.h): what vr_milp_solve's status says when
 * CBC stops at its time limit. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "vr_test.h"

#include "policy/milp.h"

/* A multi-dimensional knapsack, maximised: n integers in [0,3] under r
 * rows with coefficients 1..89 and room for about half of them. x = 0 is
 * feasible, so no answer may be "infeasible"; its root LP takes CBC a few
 * milliseconds (more under sanitizers). */
static vr_milp *knapsack(int n, int r) {
  vr_milp *m = vr_milp_new(1);
  assert_non_null(m);
  unsigned s = 12345;
  for (int j = 0; j < n; j++) {
    s = s * 1103515245u + 12345u;
    vr_milp_col(m, 0, 3, 1 + (s >> 16) % 97, 1);
  }
  int *idx = malloc(n * sizeof *idx);
  double *k = malloc(n * sizeof *k);
  assert_true(idx && k);
  for (int i = 0; i < r; i++) {
    for (int j = 0; j < n; j++) {
      s = s * 1103515245u + 12345u;
      idx[j] = j, k[j] = 1 + (s >> 16) % 89;
    }
    vr_milp_row(m, n, idx, k, 'L', 40.0 * n);
  }
  free(idx), free(k);
  return m;
}

/* CBC stopped by its time limit during the root LP reported the model
 * proven infeasible, and vr_milp_solve passed that on: Loki's best effort
 * (always feasible) came back VR_EINFEASIBLE with no message. Over limits
 * from before the root LP to past it: never infeasible; a solution is
 * feasible (within the rows, integral); without a limit, optimal. */
static void test_time_limit_is_not_infeasible(void **st) {
  (void)st;
  for (double tl = 0.0005; tl < 0.1; tl *= 1.25) {
    vr_milp *m = knapsack(400, 100);
    int s = vr_milp_solve(m, tl);
    if (s == VR_MILP_INFEASIBLE)
      fail_msg("limit %.4f s: a feasible model reported infeasible", tl);
    if (s == VR_MILP_FEASIBLE || s == VR_MILP_OPTIMAL) {
      const double *x = vr_milp_x(m);
      assert_non_null(x);
      for (int j = 0; j < 400; j++)
        assert_true(x[j] > -1e-6 && x[j] < 3 + 1e-6 &&
                    fabs(x[j] - round(x[j])) < 1e-6);
    }
    vr_milp_free(m);
  }
  vr_milp *m = knapsack(60, 10);
  assert_int_equal(vr_milp_solve(m, 0), VR_MILP_OPTIMAL);
  vr_milp_free(m);
}

/* A real proof stands under a limit it did not reach: x >= 1 and x <= 0;
 * and there is no solution to read (vr_milp_x handed out CBC's last LP
 * point whatever the status, though milp.h promises NULL). */
static void test_infeasible_within_limit(void **st) {
  (void)st;
  vr_milp *m = vr_milp_new(0);
  assert_non_null(m);
  int c = vr_milp_col(m, 0, 5, 1, 1);
  double one = 1;
  vr_milp_row(m, 1, &c, &one, 'G', 1);
  vr_milp_row(m, 1, &c, &one, 'L', 0);
  assert_null(vr_milp_x(m)); /* before a solve */
  assert_int_equal(vr_milp_solve(m, 30), VR_MILP_INFEASIBLE);
  assert_null(vr_milp_x(m)); /* no solution to read */
  vr_milp_free(m);
}

static int g_stop;
static volatile double g_sink;
static void *spin(void *arg) {
  (void)arg;
  while (!__atomic_load_n(&g_stop, __ATOMIC_RELAXED)) g_sink += 1;
  return NULL;
}

/* The limit is wall time, whatever else the process runs: CBC's default
 * counted the process's CPU time, so with one other busy thread (a live
 * server's serving threads) a 0.5-s limit ran out after ~0.3 s, and on 16
 * busy cores after a sixteenth of it. */
static void test_limit_is_wall_time(void **st) {
  (void)st;
  pthread_t th;
  __atomic_store_n(&g_stop, 0, __ATOMIC_RELAXED);
  assert_int_equal(pthread_create(&th, NULL, spin, NULL), 0);
  vr_milp *m = knapsack(400, 100);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  int s = vr_milp_solve(m, 0.5);
  clock_gettime(CLOCK_MONOTONIC, &b);
  __atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
  pthread_join(th, NULL);
  double wall = (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
  if (s != VR_MILP_OPTIMAL && wall < 0.45) /* stopped by the limit, early */
    fail_msg("a 0.5-s limit stopped CBC after %.3f s of wall time", wall);
  vr_milp_free(m);
}

/* Loki's hardware scaling (policy/loki.c) of a root task feeding two
 * children: per task one of five (batch) options, each with a per-worker
 * throughput and a latency; workers w_i <= cap_i y_i, one option per task,
 * capacity for the demand, at most 20 workers, and each path's latency
 * within 125 ms; fewest workers. One of the models test_loki's
 * test_time_limit builds, here solved lean (as accuracy scaling's
 * sub-MILPs are), which is how a limit crashed CBC on it. */
static vr_milp *loki_like(void) {
  static const double thr[3][5] = {
      {57.1428571, 95.2380952, 142.857143, 190.47619, 228.571429},
      {34.7826087, 57.9710145, 86.9565217, 115.942029, 139.130435},
      {57.1428571, 95.2380952, 142.857143, 190.47619, 228.571429}};
  static const double lat[3][5] = {{17.5, 21, 28, 42, 70},
                                   {28.75, 34.5, 46, 69, 115},
                                   {17.5, 21, 28, 42, 70}};
  static const int cap[3][5] = {
      {2, 1, 1, 1, 1}, {20, 14, 10, 7, 6}, {15, 9, 6, 5, 4}};
  static const double demand[3] = {90, 810, 810};
  vr_milp *m = vr_milp_new(0);
  assert_non_null(m);
  int served = vr_milp_col(m, 1, 1, 0, 0), x[3], w[3][5], y[3][5], l[3];
  for (int t = 0; t < 3; t++) x[t] = vr_milp_col(m, 0, 1, 0, 0);
  for (int t = 0; t < 3; t++)
    for (int i = 0; i < 5; i++) {
      w[t][i] = vr_milp_col(m, 0, cap[t][i], 1, 1);
      y[t][i] = vr_milp_col(m, 0, 1, 0, 1);
    }
  for (int t = 0; t < 3; t++) l[t] = vr_milp_col(m, 0, 125, 0, 0);
  int idx[16];
  double k[16];
  for (int t = 0; t < 3; t++) { /* the fraction served flows down */
    idx[0] = t ? x[0] : served, idx[1] = x[t], k[0] = -1, k[1] = 1;
    vr_milp_row(m, 2, idx, k, 'E', 0);
  }
  for (int t = 0; t < 3; t++) {
    int n = 0;
    idx[n] = x[t], k[n++] = demand[t];
    for (int i = 0; i < 5; i++) idx[n] = w[t][i], k[n++] = -thr[t][i];
    vr_milp_row(m, n, idx, k, 'L', 0); /* capacity */
    for (int i = 0; i < 5; i++) {
      int p[2] = {w[t][i], y[t][i]};
      double c[2] = {1, -cap[t][i]};
      vr_milp_row(m, 2, p, c, 'L', 0); /* workers only on the chosen */
      idx[i] = y[t][i], k[i] = 1;
    }
    vr_milp_row(m, 5, idx, k, 'L', 1); /* one option */
    for (int i = 0; i < 5; i++) idx[i] = y[t][i], k[i] = lat[t][i];
    idx[5] = l[t], k[5] = -1;
    vr_milp_row(m, 6, idx, k, 'L', 0); /* the task's latency */
  }
  for (int t = 0, n = 0; t < 3; t++)
    for (int i = 0; i < 5; i++, n++) idx[n] = w[t][i], k[n] = 1;
  vr_milp_row(m, 15, idx, k, 'L', 20); /* the cluster */
  for (int c = 1; c < 3; c++) { /* each path within the SLO */
    idx[0] = l[0], idx[1] = l[c], k[0] = k[1] = 1;
    vr_milp_row(m, 2, idx, k, 'L', 125);
  }
  vr_milp_lean(m);
  return m;
}

/* CBC's preprocessing (CglPreProcess, Cgl 0.60.3) stops its passes when
 * the time limit runs out but keeps its pass count, so a solution found
 * after it was post-processed through passes that never ran: a NULL model,
 * a segfault that took the process with it. Over limits from before
 * preprocessing to past the solve, every answer is a status; a solution
 * is within its bounds. */
static void test_limit_during_preprocessing(void **st) {
  (void)st;
  int solved = 0;
  for (double tl = 1e-4; tl < 0.05; tl *= 1.03) {
    vr_milp *m = loki_like();
    int s = vr_milp_solve(m, tl);
    assert_true(s >= VR_MILP_OPTIMAL && s <= VR_MILP_NONE);
    if (s == VR_MILP_OPTIMAL || s == VR_MILP_FEASIBLE) {
      const double *x = vr_milp_x(m);
      assert_non_null(x);
      assert_true(fabs(x[0] - 1) < 1e-6);
      solved++;
    }
    vr_milp_free(m);
  }
  vr_milp *m = loki_like();
  assert_int_equal(vr_milp_solve(m, 0), VR_MILP_OPTIMAL);
  vr_milp_free(m);
  assert_true(solved > 0);
}

/* A budget shared by solves: the first takes what is left (here nothing
 * worth a root LP), the next does not run; no budget is no limit. */
static void test_budget(void **st) {
  (void)st;
  vr_milp_budget b;
  vr_milp_budget_init(&b, 1e-9);
  vr_milp *m = knapsack(400, 100);
  int s = vr_milp_solve_budget(m, 30, &b);
  assert_true(s != VR_MILP_INFEASIBLE);
  vr_milp_free(m);
  assert_true(b.left_s <= 0);
  m = knapsack(60, 10);
  assert_int_equal(vr_milp_solve_budget(m, 30, &b), VR_MILP_NONE);
  assert_null(vr_milp_x(m));
  assert_true(b.ran_out);
  vr_milp_free(m);
  vr_milp_budget_init(&b, 0);
  m = knapsack(60, 10);
  assert_int_equal(vr_milp_solve_budget(m, 0, &b), VR_MILP_OPTIMAL);
  assert_false(b.ran_out);
  vr_milp_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_time_limit_is_not_infeasible),
      cmocka_unit_test(test_infeasible_within_limit),
      cmocka_unit_test(test_limit_is_wall_time),
      cmocka_unit_test(test_limit_during_preprocessing),
      cmocka_unit_test(test_budget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
