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

/* The controller's pipeline placement: a worker that does not hold the
 * model, with room, the fewest of the pipeline's instances, then the most
 * free cores, then the lowest index; none: -1. */
static void pick_worker(void **state) {
  (void)state;
  int fc[3] = {4, 2, 2}, mine[3] = {0, 0, 0};
  unsigned char holds[3] = {1, 0, 0};
  /* w0 has the most room but holds the model; w1/w2 tie: the lowest */
  assert_int_equal(vr_cluster_pick_worker(3, fc, holds, mine, 1), 1);
  fc[2] = 3; /* most free cores among the rest */
  assert_int_equal(vr_cluster_pick_worker(3, fc, holds, mine, 1), 2);
  mine[2] = 1; /* spread: fewer of the pipeline's instances beats room */
  assert_int_equal(vr_cluster_pick_worker(3, fc, holds, mine, 1), 1);
  {
    int fc2[3] = {4, 2, 3}, mine2[3] = {1, 0, 0};
    unsigned char none[3] = {0, 0, 0};
    /* the first worker has the most room but one of the pipeline's
     * instances already: the copy goes elsewhere (w2: more room than w1) */
    assert_int_equal(vr_cluster_pick_worker(3, fc2, none, mine2, 1), 2);
  }
  holds[0] = 0; /* now w0 qualifies: fewest (0, tie w1), most room */
  assert_int_equal(vr_cluster_pick_worker(3, fc, holds, mine, 1), 0);
  /* an instance needs 3 cores: only w0 (4) and w2 (3) fit; w0 has fewer */
  assert_int_equal(vr_cluster_pick_worker(3, fc, holds, mine, 3), 0);
  holds[0] = 1;
  assert_int_equal(vr_cluster_pick_worker(3, fc, holds, mine, 3), 2);
  /* none with room and without the model */
  assert_int_equal(vr_cluster_pick_worker(3, fc, holds, mine, 5), -1);
  holds[1] = holds[2] = 1;
  assert_int_equal(vr_cluster_pick_worker(3, fc, holds, mine, 1), -1);
  assert_int_equal(vr_cluster_pick_worker(0, fc, holds, mine, 1), -1);
}

int main(void) {
  const struct CMUnitTest t[] = {cmocka_unit_test(every_worker),
                                 cmocka_unit_test(replicas_least_loaded),
                                 cmocka_unit_test(replace_dead_workers),
                                 cmocka_unit_test(pick_worker)};
  return cmocka_run_group_tests(t, NULL, NULL);
}
