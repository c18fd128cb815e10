/* A model's measured slowdown (runtime/slowdown.h): the first five
 * windows' worth of batches set the baseline, later windows are measured
 * against it; thin windows and restarted counters change nothing. */
#include <math.h>
#include <string.h>

#include "runtime/slowdown.h"
#include "vr_test.h"

static void test_windows(void **st) {
  (void)st;
  vr_slowdown s;
  memset(&s, 0, sizeof s);
  /* the baseline sums five windows' worth (min 10 -> 50 batches): 20 at
   * 1.2x, 30 at 1.4x of the profile -> base 66/50 = 1.32 */
  assert_true(vr_slowdown_step(&s, 20, 24e6, 20e6, 10) == 0); /* not measured yet */
  assert_true(fabs(vr_slowdown_step(&s, 50, 66e6, 50e6, 10) - 1.0) < 1e-9);
  assert_true(fabs(s.base - 1.32) < 1e-9);
  /* 5 more batches: too few, the value stays */
  assert_true(fabs(vr_slowdown_step(&s, 55, 80e6, 55e6, 10) - 1.0) < 1e-9);
  /* the thin window folds into the next: 20 batches since the baseline,
   * 52.8 ms over 20 ms expected = 2.64x, against 1.32 -> 2 */
  assert_true(fabs(vr_slowdown_step(&s, 70, 118.8e6, 70e6, 10) - 2.0) < 1e-9);
  /* counters that went backwards (a restart): no window, value kept */
  assert_true(fabs(vr_slowdown_step(&s, 3, 1e6, 1e6, 10) - 2.0) < 1e-9);
  /* then windows count from there: 1.32x again -> 1 */
  assert_true(fabs(vr_slowdown_step(&s, 23, 27.4e6, 21e6, 10) - 1.0) < 1e-9);
}

int main(void) {
  const struct CMUnitTest t[] = {cmocka_unit_test(test_windows)};
  return cmocka_run_group_tests(t, NULL, NULL);
}
