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

static volatile int g_stop;
static volatile double g_sink;
static void *spin(void *arg) {
  (void)arg;
  while (!g_stop) g_sink += 1;
  return NULL;
}

/* The limit is wall time, whatever else the process runs: CBC's default
 * counted the process's CPU time, so with one other busy thread (a live
 * server's serving threads) a 0.5-s limit ran out after ~0.3 s, and on 16
 * busy cores after a sixteenth of it. */
static void test_limit_is_wall_time(void **st) {
  (void)st;
  pthread_t th;
  g_stop = 0;
  assert_int_equal(pthread_create(&th, NULL, spin, NULL), 0);
  vr_milp *m = knapsack(400, 100);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  int s = vr_milp_solve(m, 0.5);
  clock_gettime(CLOCK_MONOTONIC, &b);
  g_stop = 1;
  pthread_join(th, NULL);
  double wall = (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
  if (s != VR_MILP_OPTIMAL && wall < 0.45) /* stopped by the limit, early */
    fail_msg("a 0.5-s limit stopped CBC after %.3f s of wall time", wall);
  vr_milp_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_time_limit_is_not_infeasible),
      cmocka_unit_test(test_infeasible_within_limit),
      cmocka_unit_test(test_limit_is_wall_time),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
