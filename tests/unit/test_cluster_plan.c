/* Cluster placement (policy/cluster_plan.c): copies per model, the
 * least-loaded worker gets a missing copy, loads in flight count, and the
 * provider is asked to replace dead workers up to the minimum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "policy/cluster_plan.h"
#include "vario/status.h"

static void every_worker(void **state) {
  (void)state;
  /* 2 models x 3 workers; model 0 on w0, model 1 loading on w1 */
  unsigned char has[6] = {1, 0, 0, 0, 2, 0};
  int lm[6], lw[6];
  vr_cplan_in in = {.n_workers = 3, .n_models = 2, .has = has};
  vr_cplan_out out = {lm, lw, 0, 0};
  assert_int_equal(vr_cluster_plan(&in, &out), 0);
  assert_int_equal(out.n_loads, 4);
  for (int i = 0; i < out.n_loads; i++) assert_int_equal(has[lm[i] * 3 + lw[i]], 0);
  assert_int_equal(out.add_workers, 0);
}

static void replicas_least_loaded(void **state) {
  (void)state;
  /* 3 models x 3 workers. w0 holds m0 and m1, w1 holds m1; m2 wants 2
   * copies: w2 (0 models) then w1 (1 model). */
  unsigned char has[9] = {1, 0, 0, 1, 1, 0, 0, 0, 0};
  int lm[9], lw[9];
  vr_cplan_in in = {.n_workers = 3, .n_models = 3, .has = has, .replicas = 2};
  vr_cplan_out out = {lm, lw, 0, 0};
  assert_int_equal(vr_cluster_plan(&in, &out), 0);
  /* m0 needs one more copy: w2 (empty); m2 needs two: w2 already got m0,
   * so w1 (1 model) and then w2 (1 model, tie -> lower index w1 first) */
  assert_int_equal(out.n_loads, 3);
  assert_int_equal(lm[0], 0);
  assert_int_equal(lw[0], 2);
  assert_int_equal(lm[1], 2);
  assert_int_equal(lw[1], 1);
  assert_int_equal(lm[2], 2);
  assert_int_equal(lw[2], 2);
}

static void replace_dead_workers(void **state) {
  (void)state;
  int lm[1], lw[1];
  vr_cplan_in in = {.n_workers = 1, .n_models = 0, .min_workers = 2};
  vr_cplan_out out = {lm, lw, 0, 0};
  assert_int_equal(vr_cluster_plan(&in, &out), 0);
  assert_int_equal(out.add_workers, 1);
  in.starting = 1; /* already asked for: not again */
  assert_int_equal(vr_cluster_plan(&in, &out), 0);
  assert_int_equal(out.add_workers, 0);
  in.starting = 0;
  in.n_workers = 0;
  in.max_workers = 1; /* the cap wins over the minimum */
  assert_int_equal(vr_cluster_plan(&in, &out), 0);
  assert_int_equal(out.add_workers, 1);
  in.n_workers = -1;
  assert_int_equal(vr_cluster_plan(&in, &out), VR_EINVAL);
}

int main(void) {
  const struct CMUnitTest t[] = {cmocka_unit_test(every_worker),
                                 cmocka_unit_test(replicas_least_loaded),
                                 cmocka_unit_test(replace_dead_workers)};
  return cmocka_run_group_tests(t, NULL, NULL);
}
