/* InferLine's serving-time tick (policy/il_tick.h): static, tuner and the
 * coarse-grained AutoScale modes, on hand-made inputs. */
#include <math.h>
#include <string.h>

#include "vr_test.h"

#include "policy/il_tick.h"

#define SEC 1000000000LL

/* A plan over 2 tasks (2 variants at task 0, 1 at task 1) and per-slot
 * profiles. */
typedef struct fix {
  vr_profile prof[3];
  vr_pipe_alloc a[3];
  vr_pipe_plan plan;
} fix;

static void mk(fix *f) {
  memset(f, 0, sizeof *f);
  for (int i = 0; i < 3; i++) {
    vr_profile_init(&f->prof[i]);
    f->prof[i].max_batch = 8;
    for (int j = 0; j < 4; j++) f->prof[i].lat.p50_ms[j] = 5 + 5.0 * (1 << j);
  }
  f->plan.ntasks = 2;
  f->plan.off[0] = 0, f->plan.off[1] = 2, f->plan.off[2] = 3;
  f->plan.a = f->a;
}

static void rm(fix *f) { (void)f; }

static vr_il_tick_cfg base_cfg(int mode, int k0, int k1) {
  vr_il_tick_cfg c;
  memset(&c, 0, sizeof c);
  c.mode = mode;
  c.base.nstages = 2;
  c.base.st[0] = (vr_il_stage_cfg){.hw = 1, .batch = 4, .replicas = k0};
  c.base.st[1] = (vr_il_stage_cfg){.hw = 0, .batch = 2, .replicas = k1};
  return c;
}

static void test_static_writes_plan(void **st) {
  (void)st;
  fix f;
  mk(&f);
  vr_il_tick_cfg c = base_cfg(VR_ILT_STATIC, 3, 2);
  assert_int_equal(vr_il_tick_validate(&c, NULL), 0);
  vr_il_tick_state s;
  vr_il_tick_state_init(&s, &c, 0);
  vr_il_tick_in in = {.now_ns = SEC, .open_queries = 1000};
  assert_int_equal(vr_il_tick(&c, &s, &in, f.prof, &f.plan), 0);
  assert_int_equal(f.plan.a[0].inst, 0);
  assert_int_equal(f.plan.a[1].inst, 3);
  assert_int_equal(f.plan.a[1].batch, 4);
  assert_int_equal(f.plan.a[2].inst, 2);
  assert_int_equal(f.plan.workers, 5);
  vr_il_tick_state_free(&s);
  rm(&f);
}

/* AutoScale: ceil(n / p) units at once; down only after t_wait, to the
 * largest need seen meanwhile. */
static void test_autoscale(void **st) {
  (void)st;
  fix f;
  mk(&f);
  vr_il_tick_cfg c = base_cfg(VR_ILT_AUTOSCALE, 2, 2);
  vr_il_autoscale_default(&c.as);
  c.as.pack = 4;
  assert_int_equal(vr_il_tick_validate(&c, NULL), 0);
  vr_il_tick_state s;
  vr_il_tick_state_init(&s, &c, 0);
  vr_il_tick_in in = {.now_ns = 0, .open_queries = 8};
  assert_int_equal(vr_il_tick(&c, &s, &in, f.prof, &f.plan), 0);
  in.open_queries = 17; /* 5 units */
  in.now_ns = SEC;
  assert_int_equal(vr_il_tick(&c, &s, &in, f.prof, &f.plan), 1);
  assert_int_equal(f.plan.a[1].inst, 5);
  assert_int_equal(f.plan.a[2].inst, 5);
  assert_int_equal(s.ups, 1);
  /* quiet: nothing for t_wait, then down to the largest need (3) */
  for (int64_t t = 2; t < 121; t++) {
    in.now_ns = t * SEC;
    in.open_queries = t == 50 ? 12 : 1;
    assert_int_equal(vr_il_tick(&c, &s, &in, f.prof, &f.plan), 0);
  }
  in.now_ns = 122 * SEC;
  assert_int_equal(vr_il_tick(&c, &s, &in, f.prof, &f.plan), 1);
  assert_int_equal(s.units, 3);
  assert_int_equal(s.downs, 1);
  assert_int_equal(f.plan.a[2].inst, 3);
  /* cap */
  c.as.max_units = 4;
  in.open_queries = 1000;
  in.now_ns = 123 * SEC;
  assert_int_equal(vr_il_tick(&c, &s, &in, f.prof, &f.plan), 1);
  assert_int_equal(s.units, 4);
  vr_il_tick_state_free(&s);
  rm(&f);
}

/* The tuner mode follows vr_tuner_decide; arrivals going back fail. */
static void test_tuner_mode(void **st) {
  (void)st;
  fix f;
  mk(&f);
  vr_il_tick_cfg c = base_cfg(VR_ILT_TUNER, 2, 1);
  vr_tuner_cfg_default(&c.tuner);
  assert_int_equal(vr_envelope_windows(&c.tuner.plan, 50000000, 60 * SEC), 0);
  int64_t t[600];
  for (int i = 0; i < 600; i++) t[i] = (int64_t)i * SEC / 10; /* 10 qps */
  assert_int_equal(vr_envelope_compute(&c.tuner.plan, t, 600), 0);
  c.tuner.plan_qps = 10;
  c.tuner.nstages = 2;
  c.tuner.st[0] = (vr_tuner_stage){.k_plan = 2, .scale = 1, .mu_qps = 8};
  c.tuner.st[1] = (vr_tuner_stage){.k_plan = 1, .scale = 1, .mu_qps = 20};
  assert_int_equal(vr_il_tick_validate(&c, NULL), 0);
  vr_il_tick_state s;
  vr_il_tick_state_init(&s, &c, 0);
  /* 4x the planned rate for a second */
  int64_t burst[40];
  for (int i = 0; i < 40; i++) burst[i] = (int64_t)i * SEC / 40;
  vr_il_tick_in in = {.now_ns = SEC, .arrivals = burst, .narrivals = 40};
  assert_int_equal(vr_il_tick(&c, &s, &in, f.prof, &f.plan), 1);
  assert_true(f.plan.a[1].inst >= 8);
  assert_true(f.plan.a[2].inst >= 4);
  assert_int_equal(s.ups, 1);
  int64_t back[1] = {0};
  in.now_ns = 2 * SEC, in.arrivals = back, in.narrivals = 1;
  assert_int_equal(vr_il_tick(&c, &s, &in, f.prof, &f.plan), VR_EINVAL);
  vr_il_tick_state_free(&s);
  rm(&f);
}

static void test_validate(void **st) {
  (void)st;
  vr_errbuf err = {0};
  vr_il_tick_cfg c = base_cfg(VR_ILT_AUTOSCALE, 2, 3);
  c.as.pack = 2;
  assert_int_equal(vr_il_tick_validate(&c, &err), VR_EINVAL);
  assert_non_null(strstr(err.msg, "not coarse"));
  c = base_cfg(VR_ILT_AUTOSCALE, 2, 2);
  assert_int_equal(vr_il_tick_validate(&c, &err), VR_EINVAL); /* pack 0 */
  c = base_cfg(7, 2, 2);
  assert_int_equal(vr_il_tick_validate(&c, &err), VR_EINVAL);
  c = base_cfg(VR_ILT_TUNER, 2, 2);
  assert_int_equal(vr_il_tick_validate(&c, &err), VR_EINVAL);
  c = base_cfg(VR_ILT_STATIC, 0, 2);
  assert_int_equal(vr_il_tick_validate(&c, &err), VR_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_static_writes_plan),
      cmocka_unit_test(test_autoscale),
      cmocka_unit_test(test_tuner_mode),
      cmocka_unit_test(test_validate),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
