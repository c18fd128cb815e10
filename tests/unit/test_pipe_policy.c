/* The pipeline-policy hook (policy/pipe_policy.h): plan -> actions against
 * held instances (two tasks sharing one pool variant, batch caps, surplus
 * unloaded, missing loaded), the replan rule, and the policy table driving
 * Loki on a snapshot (hardware scaling at low demand, accuracy scaling when
 * the workers run out, back again when demand falls). */
#include <string.h>

#include "base/alloc.h"
#include "policy/pipe_policy.h"
#include "vr_test.h"

/* a -> b, a -> c; b and c are served by the same pool variants. */
static const char *TREE =
    "{\"name\":\"t\",\"latency_ms\":100,\"tasks\":["
    "{\"name\":\"a\",\"variants\":[{\"name\":\"a_big\",\"accuracy\":99,\"mult\":2},"
    "{\"name\":\"a_small\",\"accuracy\":80,\"mult\":2}],\"children\":[{\"task\":\"b\",\"label\":\"l1\"},"
    "{\"task\":\"c\",\"label\":\"l2\"}]},"
    "{\"name\":\"b\",\"variants\":[{\"name\":\"x\",\"accuracy\":90}]},"
    "{\"name\":\"c\",\"variants\":[{\"name\":\"x\",\"accuracy\":90}]}]}";

typedef struct fx {
  vr_pipeline *p;
  vr_profile prof[4];
  int slot_var[4]; /* a_big 10, a_small 11, b:x 12, c:x 12 */
  vr_pipe_plan plan;
} fx;

static void make(fx *f) {
  memset(f, 0, sizeof *f);
  vr_errbuf err = {0};
  assert_int_equal(vr_pipeline_parse(TREE, strlen(TREE), &f->p, &err), 0);
  assert_int_equal(vr_pipe_plan_init(&f->plan, f->p), 0);
  assert_int_equal(f->plan.off[3], 4);
  /* a_big 10 ms, a_small 1 ms, x 1 ms at batch 1; twice that at 2 */
  static const double l1[4] = {10, 1, 1, 1};
  for (int i = 0; i < 4; i++) {
    vr_profile_init(&f->prof[i]);
    f->prof[i].max_batch = 4;
    for (int s = 0; s < 3; s++) f->prof[i].lat.p50_ms[s] = l1[i] * (1 << s) * 0.75 + l1[i] * 0.25;
  }
  f->slot_var[0] = 10, f->slot_var[1] = 11, f->slot_var[2] = 12, f->slot_var[3] = 12;
}

static void unmake(fx *f) {
  vr_pipe_plan_free(&f->plan);
  vr_pipeline_free(f->p);
}

static int count(const vr_actions *a, int kind) {
  int n = 0;
  for (size_t i = 0; i < a->len; i++) n += vr_actions_at(a, i)->kind == kind;
  return n;
}

static void test_actions(void **st) {
  (void)st;
  fx f;
  make(&f);
  /* plan: a_big x1 b4, b: x x2 b2, c: x x1 b1 */
  f.plan.a[0] = (vr_pipe_alloc){1, 4, 10, 400};
  f.plan.a[2] = (vr_pipe_alloc){2, 2, 1, 2000};
  f.plan.a[3] = (vr_pipe_alloc){1, 1, 1, 1000};
  /* held: a_small (surplus), two x, and a_big with cap 1 */
  vr_pipe_snap_inst inst[] = {{1, 11, 4}, {2, 12, 2}, {3, 12, 4}, {4, 10, 1}};
  vr_pipe_snap s = {.p = f.p, .prof = f.prof, .slot_var = f.slot_var, .inst = inst, .ninst = 4};
  vr_actions a;
  vr_actions_init(&a);
  int assign[8];
  assert_int_equal(vr_pipe_plan_actions(&s, &f.plan, assign, &a), 0);
  /* instance 1 goes; 2 and 3 serve b; 4 serves a at batch 4; one x loads */
  assert_int_equal(assign[0], -1);
  assert_int_equal(assign[1], 2);
  assert_int_equal(assign[2], 2);
  assert_int_equal(assign[3], 0);
  /* the surplus a_small gives its room to the missing x (no task idle) */
  assert_int_equal(count(&a, VR_ACT_UNLOAD), 0);
  assert_int_equal(count(&a, VR_ACT_LOAD), 0);
  assert_int_equal(count(&a, VR_ACT_MIGRATE), 1);
  assert_int_equal(count(&a, VR_ACT_SET_BATCH), 2); /* 3: 4 -> 2, 4: 1 -> 4 */
  const vr_action *last = vr_actions_at(&a, a.len - 1);
  assert_int_equal(last->kind, VR_ACT_MIGRATE);
  assert_int_equal(last->instance, 1);
  assert_int_equal(last->variant, 12);
  assert_int_equal(last->value, 1); /* c's batch */
  /* two surplus, one missing: the one of the missing slot's task migrates
   * (a_big's room goes to a_small), the other is unloaded first */
  vr_pipe_snap_inst two[] = {{1, 10, 4}, {2, 12, 2}, {3, 12, 2}, {4, 12, 1}, {6, 12, 1}};
  f.plan.a[0].inst = 0;
  f.plan.a[1] = (vr_pipe_alloc){1, 2, 1, 2000};
  s.inst = two;
  s.ninst = 5;
  vr_vec_clear(&a);
  assert_int_equal(vr_pipe_plan_actions(&s, &f.plan, assign, &a), 0);
  assert_int_equal((int)a.len, 2);
  assert_int_equal(vr_actions_at(&a, 0)->kind, VR_ACT_UNLOAD);
  assert_int_equal(vr_actions_at(&a, 0)->instance, 6);
  assert_int_equal(vr_actions_at(&a, 1)->kind, VR_ACT_MIGRATE);
  assert_int_equal(vr_actions_at(&a, 1)->instance, 1);
  assert_int_equal(vr_actions_at(&a, 1)->variant, 11);
  f.plan.a[0] = (vr_pipe_alloc){1, 4, 10, 400};
  f.plan.a[1] = (vr_pipe_alloc){0, 0, 0, 0};
  s.ninst = 4;
  for (size_t i = 0; i < a.len; i++) {
    const vr_action *x = vr_actions_at(&a, i);
    if (x->kind == VR_ACT_SET_BATCH && x->instance == 3) assert_int_equal(x->value, 2);
    if (x->kind == VR_ACT_SET_BATCH && x->instance == 4) assert_int_equal(x->value, 4);
  }
  /* applied: nothing left to do, c's instance assigned */
  vr_pipe_snap_inst after[] = {{2, 12, 2}, {3, 12, 2}, {4, 10, 4}, {5, 12, 1}};
  s.inst = after;
  vr_vec_clear(&a);
  assert_int_equal(vr_pipe_plan_actions(&s, &f.plan, assign, &a), 0);
  assert_int_equal((int)a.len, 0);
  assert_int_equal(assign[3], 3);
  /* a batch beyond the profile's max batch is clamped */
  f.plan.a[0].batch = 64;
  vr_vec_clear(&a);
  assert_int_equal(vr_pipe_plan_actions(&s, &f.plan, NULL, &a), 0);
  assert_int_equal((int)a.len, 0);
  vr_actions_free(&a);
  unmake(&f);
}

static void test_replan_due(void **st) {
  (void)st;
  assert_true(vr_pipe_replan_due(1, 0, 10, 0, 0, 0.3));    /* first */
  assert_true(vr_pipe_replan_due(0, 10, 10, 5, 5, 0.3));   /* period */
  assert_false(vr_pipe_replan_due(0, 5, 10, 120, 100, 0.3));
  assert_true(vr_pipe_replan_due(0, 5, 10, 131, 100, 0.3)); /* +31% */
  assert_true(vr_pipe_replan_due(0, 5, 10, 69, 100, 0.3));  /* -31% */
  assert_false(vr_pipe_replan_due(0, 5, 10, 500, 100, 0)); /* no trigger */
  /* planned for no demand (an idle start): the first demand is a change,
   * not a wait for the period (it was, with the minimal plan meanwhile) */
  assert_true(vr_pipe_replan_due(0, 5, 10, 50, 0, 0.3));
  assert_false(vr_pipe_replan_due(0, 5, 10, 0, 0, 0.3));
}

static void test_table(void **st) {
  (void)st;
  vr_errbuf err = {0};
  assert_non_null(vr_pipe_policy_find("loki", &err));
  assert_int_equal(vr_pipe_policy_find("loki", &err)->drop_mode, VR_EDROP_REROUTE);
  assert_null(vr_pipe_policy_find("nope", &err));
  assert_non_null(strstr(err.msg, "known: loki"));
}

/* Loki through the table: 3 workers; a_big carries ~120/s per worker (at
 * batch 4, 32.5 ms), a_small ~1200/s; each child gets the root's rate
 * (mult 2, split evenly between the two labelled children). */
static void test_loki_scales(void **st) {
  (void)st;
  fx f;
  make(&f);
  const vr_pipe_policy_def *def = vr_pipe_policy_find("loki", NULL);
  vr_pipe_snap s = {.p = f.p, .prof = f.prof, .slot_var = f.slot_var, .workers = 3, .slack = 1};
  vr_errbuf err = {0};
  s.demand_ewma = 50;
  assert_int_equal(def->plan(NULL, &s, &f.plan, &err), 0);
  assert_int_equal(f.plan.accuracy_scaled, 0);
  assert_true(f.plan.a[0].inst >= 1);
  assert_int_equal(f.plan.a[1].inst, 0);
  s.demand_ewma = 500; /* a_big would need 5 workers, a_small needs 1 */
  assert_int_equal(def->plan(NULL, &s, &f.plan, &err), 0);
  assert_int_equal(f.plan.accuracy_scaled, 1);
  assert_int_equal(f.plan.feasible, 1);
  assert_true(f.plan.a[1].inst >= 1);
  assert_true(f.plan.workers <= 3);
  s.demand_ewma = 50;
  assert_int_equal(def->plan(NULL, &s, &f.plan, &err), 0);
  assert_int_equal(f.plan.accuracy_scaled, 0);
  assert_int_equal(f.plan.a[1].inst, 0);
  unmake(&f);
}

/* Rates too large to print in the room reserved for the header: the text
 * is cut (and refused by a reader), never written past its buffer. */
static void test_plan_text_huge(void **st) {
  (void)st;
  static const char *ONE = "{\"name\":\"one\",\"latency_ms\":100,\"tasks\":["
                           "{\"name\":\"a\",\"variants\":[{\"name\":\"v\",\"accuracy\":90}]}]}";
  vr_pipeline *p = NULL;
  vr_errbuf err = {0};
  assert_int_equal(vr_pipeline_parse(ONE, strlen(ONE), &p, &err), 0);
  vr_pipe_plan plan = {0};
  assert_int_equal(vr_pipe_plan_init(&plan, p), 0);
  plan.demand_qps = 1e300;
  char *t = vr_pipe_plan_text(p, &plan, 1e300, 0);
  assert_non_null(t);
  vr_pipe_plan q = {0};
  assert_int_equal(vr_pipe_plan_init(&q, p), 0);
  double ewma;
  int drop;
  assert_int_not_equal(vr_pipe_plan_parse_text(p, t, strlen(t), &q, &ewma, &drop, &err), 0);
  vr_free(t);
  vr_pipe_plan_free(&q);
  vr_pipe_plan_free(&plan);
  vr_pipeline_free(p);
}

/* The plan as the controller publishes it and a worker reads it: by task
 * and variant name, onto a view that lists the variants in another order
 * and lacks one; a malformed text is refused with a message. */
static void test_plan_text(void **st) {
  (void)st;
  fx f;
  make(&f);
  f.plan.a[0] = (vr_pipe_alloc){2, 4, 10, 400};
  f.plan.a[1] = (vr_pipe_alloc){0, 1, 1, 1000};
  f.plan.a[2] = (vr_pipe_alloc){1, 2, 1.5, 1333.33};
  f.plan.a[3] = (vr_pipe_alloc){3, 1, 1, 1000};
  f.plan.accuracy = 91.25;
  f.plan.feasible = 1;
  f.plan.fill = 0.8;
  char *t = vr_pipe_plan_text(f.p, &f.plan, 12.5, VR_EDROP_REROUTE);
  assert_non_null(t);
  static const char *OTHER =
      "{\"name\":\"t\",\"latency_ms\":100,\"tasks\":["
      "{\"name\":\"a\",\"variants\":[{\"name\":\"a_small\",\"accuracy\":80},"
      "{\"name\":\"a_big\",\"accuracy\":99}],\"children\":[{\"task\":\"b\",\"label\":\"l1\"},"
      "{\"task\":\"c\",\"label\":\"l2\"}]},"
      "{\"name\":\"b\",\"variants\":[{\"name\":\"x\",\"accuracy\":90}]},"
      "{\"name\":\"c\",\"variants\":[{\"name\":\"y\",\"accuracy\":90}]}]}";
  vr_pipeline *o = NULL;
  vr_errbuf err = {0};
  assert_int_equal(vr_pipeline_parse(OTHER, strlen(OTHER), &o, &err), 0);
  vr_pipe_plan q = {0};
  assert_int_equal(vr_pipe_plan_init(&q, o), 0);
  double ewma = 0;
  int drop = -1;
  assert_int_equal(vr_pipe_plan_parse_text(o, t, strlen(t), &q, &ewma, &drop, &err), 0);
  assert_true(ewma == 12.5);
  assert_int_equal(drop, VR_EDROP_REROUTE);
  assert_int_equal(q.a[0].inst, 0); /* a_small */
  assert_int_equal(q.a[1].inst, 2); /* a_big */
  assert_int_equal(q.a[1].batch, 4);
  assert_int_equal(q.a[2].inst, 1); /* b: x */
  assert_int_equal(q.a[3].inst, 0); /* c: y, not in the text; c: x skipped */
  assert_int_equal(q.workers, 3);
  assert_true(q.accuracy == 91.25 && q.feasible == 1 && q.fill == 0.8);
  /* malformed: a clear error */
  static const char *bad[] = {"", "vario-pipe-plan 2\n", "vario-pipe-plan 1\n",
                              "vario-pipe-plan 1\newma 1 drop 9 accuracy 1 scaled 0 feasible 1 "
                              "demand 1 fill 1\n",
                              "vario-pipe-plan 1\newma 1 drop 1 accuracy 1 scaled 0 feasible 1 "
                              "demand 1 fill 1\na a_big -1 1 1 1\n"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    err.msg[0] = 0;
    assert_int_equal(vr_pipe_plan_parse_text(o, bad[i], strlen(bad[i]), &q, &ewma, &drop, &err),
                     VR_EFORMAT);
    assert_true(err.msg[0] != 0);
  }
  vr_free(t);
  vr_pipe_plan_free(&q);
  vr_pipeline_free(o);
  unmake(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plan_text),
      cmocka_unit_test(test_plan_text_huge),
      cmocka_unit_test(test_actions),
      cmocka_unit_test(test_replan_due),
      cmocka_unit_test(test_table),
      cmocka_unit_test(test_loki_scales),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
