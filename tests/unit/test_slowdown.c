/* A model's measured slowdown (runtime/slowdown.h): the first window with
 * enough batches sets the baseline, later windows are measured against
 * it; thin windows and restarted counters change nothing. */
#include <math.h>
#include <string.h>

#include "runtime/slowdown.h"
#include "vr_test.h"

static void test_windows(void **st) {
  (void)st;
  vr_slowdown s;
  memset(&s, 0, sizeof s);
  /* 20 batches that took 1.3x the profile: the baseline (value 1) */
  assert_true(fabs(vr_slowdown_step(&s, 20, 26e6, 20e6, 10) - 1.0) < 1e-9);
  /* 5 more batches: too few, the value stays */
  assert_true(fabs(vr_slowdown_step(&s, 25, 40e6, 25e6, 10) - 1.0) < 1e-9);
  /* the thin window folds into the next: 20 batches since the baseline,
   * 52 ms over 20 ms expected = 2.6x, against 1.3 -> 2 */
  assert_true(fabs(vr_slowdown_step(&s, 40, 78e6, 40e6, 10) - 2.0) < 1e-9);
  /* counters that went backwards (a restart): no window, value kept */
  assert_true(fabs(vr_slowdown_step(&s, 3, 1e6, 1e6, 10) - 2.0) < 1e-9);
  /* then windows count from there: 1.3x again -> 1 */
  assert_true(fabs(vr_slowdown_step(&s, 23, 27e6, 21e6, 10) - 1.0) < 1e-9);
}

int main(void) {
  const struct CMUnitTest t[] = {cmocka_unit_test(test_windows)};
  return cmocka_run_group_tests(t, NULL, NULL);
}
