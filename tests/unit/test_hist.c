/* Histogram: bucket layout and the stated error bound against exact
 * percentiles of random data (uniform, log-normal-ish, and heavy tail). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/hist.h"
#include "vr_test.h"

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void test_layout(void **st) {
  for (uint64_t v = 0; v < 100000; v += 7) {
    uint64_t lo, hi;
    int i = vr_hist_index(v);
    vr_hist_bucket_range(i, &lo, &hi);
    assert_true(lo <= v && v <= hi);
  }
  uint64_t lo, hi;
  vr_hist_bucket_range(vr_hist_index(UINT64_MAX), &lo, &hi);
  assert_true(hi == UINT64_MAX);
  assert_true(vr_hist_index(UINT64_MAX) < VR_HIST_BUCKETS);
}

static double exact_q(const uint64_t *sorted, size_t n, double q) {
  size_t rank = (size_t)ceil(q * (double)n);
  if (rank < 1) rank = 1;
  return (double)sorted[rank - 1];
}

static void check_dist(uint64_t *vals, size_t n) {
  static vr_hist h;
  vr_hist_init(&h);
  for (size_t i = 0; i < n; i++) vr_hist_record(&h, vals[i]);
  qsort(vals, n, sizeof *vals, cmp_u64);
  const double qs[] = {0.01, 0.1, 0.5, 0.9, 0.99, 0.999};
  const double bound = 1.0 / (1 << (VR_HIST_SUB_BITS + 1));
  for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
    double exact = exact_q(vals, n, qs[k]);
    double got = (double)vr_hist_quantile(&h, qs[k]);
    double rel = exact ? fabs(got - exact) / exact : fabs(got);
    if (rel > bound + 1e-12)
      fail_msg("q=%.3f exact=%.0f got=%.0f rel=%.5f > %.5f", qs[k], exact,
               got, rel, bound);
  }
  assert_int_equal(vr_hist_quantile(&h, 0), vals[0]);
  assert_int_equal(vr_hist_quantile(&h, 1), vals[n - 1]);
}

static void test_error_bound(void **st) {
  enum { N = 200000 };
  uint64_t *v = malloc(N * sizeof *v);
  srand(7);
  for (int i = 0; i < N; i++) v[i] = 1000 + rand() % 100000000; /* uniform */
  check_dist(v, N);
  for (int i = 0; i < N; i++) /* log-uniform over 6 decades */
    v[i] = (uint64_t)exp(log(1000) + (rand() / (double)RAND_MAX) * 13.8);
  check_dist(v, N);
  for (int i = 0; i < N; i++) { /* Pareto heavy tail */
    double u = (rand() + 1.0) / ((double)RAND_MAX + 2.0);
    v[i] = (uint64_t)(50000.0 / pow(u, 1.0 / 1.2));
  }
  check_dist(v, N);
  free(v);
}

static void test_merge_mean(void **st) {
  static vr_hist a, b;
  vr_hist_init(&a);
  vr_hist_init(&b);
  assert_int_equal(vr_hist_quantile(&a, 0.5), 0);
  for (int i = 1; i <= 100; i++) vr_hist_record(&a, i);
  for (int i = 101; i <= 200; i++) vr_hist_record(&b, i);
  vr_hist_merge(&a, &b);
  assert_int_equal(a.count, 200);
  assert_float_equal(vr_hist_mean(&a), 100.5, 1e-9);
  assert_int_equal(vr_hist_quantile(&a, 0.5), 100);
  assert_int_equal(a.min, 1);
  assert_int_equal(a.max, 200);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout),
      cmocka_unit_test(test_error_bound),
      cmocka_unit_test(test_merge_mean),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
