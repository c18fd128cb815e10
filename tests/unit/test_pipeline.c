/* The pipeline model (src/policy/pipeline.h): both spec formats, the tree
 * checks and their messages, round trips, rates and paths. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/pipeline.h"
#include "vr_test.h"

/* Same shape as Loki's published traffic-analysis app (sinks included). */
static const char *LOKI_APP =
    "{\"appID\":\"1\",\"appName\":\"traffic\",\"latencySLOInMSec\":250,"
    "\"root\":{\"task\":\"object_detection\","
    "\"model_variants\":[\"yolov5n\",\"yolov5s\",\"yolov5x\"],\"children\":["
    "{\"task\":\"car_classification\",\"label\":2,"
    "\"model_variants\":[\"efficientnet-b0\",\"efficientnet-b7\"],"
    "\"children\":[{\"task\":\"sink\",\"model_variants\":[\"sink\"],"
    "\"children\":[]}]},"
    "{\"task\":\"facial_recognition\",\"label\":0,"
    "\"model_variants\":[\"genderNet\"],"
    "\"children\":[{\"task\":\"sink\",\"model_variants\":[\"sink\"],"
    "\"children\":[]}]}]}}";

static const char *SPEC =
    "{\"name\":\"scenes\",\"latency_ms\":200,\"root\":\"detect\",\"tasks\":["
    "{\"name\":\"garment\",\"app\":\"fmnist\"},"
    "{\"name\":\"detect\",\"app\":\"scene_det\","
    " \"adapter\":{\"kind\":\"crop\",\"threshold\":0.5},"
    " \"variants\":[\"det_s\",{\"name\":\"det_l\",\"accuracy\":90,"
    "   \"mult\":3,\"shares\":{\"garment\":0.75,\"shoe\":0.25}}],"
    " \"children\":[{\"task\":\"garment\",\"label\":\"top\"},"
    "               {\"task\":\"shoe\",\"label\":7}]},"
    "{\"name\":\"shoe\",\"app\":\"fmnist\",\"children\":[\"log\"]},"
    "{\"name\":\"log\",\"variants\":[\"logger\"]}]}";

static vr_pipeline *parse_ok(const char *s) {
  vr_pipeline *p = NULL;
  vr_errbuf err = {0};
  int rc = vr_pipeline_parse(s, strlen(s), &p, &err);
  if (rc) fprintf(stderr, "unexpected: %s\n", err.msg);
  assert_int_equal(rc, 0);
  assert_non_null(p);
  return p;
}

static void expect_err(const char *s, int code, const char *needle) {
  vr_pipeline *p = (vr_pipeline *)1;
  vr_errbuf err = {0};
  int rc = vr_pipeline_parse(s, strlen(s), &p, &err);
  if (!strstr(err.msg, needle))
    fprintf(stderr, "message '%s' lacks '%s'\n", err.msg, needle);
  assert_int_equal(rc, code);
  assert_null(p);
  assert_non_null(strstr(err.msg, needle));
}

static void test_loki_app(void **st) {
  (void)st;
  vr_pipeline *p = parse_ok(LOKI_APP);
  assert_string_equal(p->name, "traffic");
  assert_true(p->slo_ms == 250);
  assert_int_equal(p->ntasks, 3); /* sinks are path ends, not tasks */
  assert_string_equal(p->tasks[0].name, "object_detection");
  assert_int_equal(p->tasks[0].nvariants, 3);
  assert_int_equal(p->tasks[0].nchildren, 2);
  int car = vr_pipeline_task(p, "car_classification");
  int face = vr_pipeline_task(p, "facial_recognition");
  assert_int_equal(car, 1);
  assert_int_equal(face, 2);
  assert_string_equal(p->tasks[car].label, "2");
  assert_string_equal(p->tasks[face].label, "0");
  assert_int_equal(p->tasks[car].parent, 0);
  assert_true(p->tasks[0].variants[0].accuracy == -1);
  /* labelled children split the default share evenly */
  assert_true(p->tasks[0].variants[1].share[0] == 0.5);
  assert_int_equal(vr_pipe_task_route_label(p, &p->tasks[0], "2"), 0);
  assert_int_equal(vr_pipe_task_route_label(p, &p->tasks[0], "0"), 1);
  assert_int_equal(vr_pipe_task_route_label(p, &p->tasks[0], "5"), -1);
  int leaves[VR_PIPE_MAX_TASKS], path[VR_PIPE_MAX_TASKS];
  assert_int_equal(vr_pipeline_leaves(p, leaves), 2);
  assert_int_equal(vr_pipeline_path(p, leaves[1], path), 2);
  assert_int_equal(path[0], 0);
  assert_int_equal(path[1], face);
  vr_pipeline_free(p);
}

/* The published file itself, when ../shared is present. */
static void test_loki_published(void **st) {
  (void)st;
  const char *src = getenv("VR_SOURCE_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/../shared/data/loki/apps/"
           "traffic_analysis.json", src ? src : ".");
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "skip: %s absent\n", path);
    skip();
  }
  char buf[8192];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  vr_pipeline *p = NULL;
  vr_errbuf err = {0};
  assert_int_equal(vr_pipeline_parse(buf, n, &p, &err), 0);
  assert_int_equal(p->ntasks, 3);
  assert_true(p->slo_ms == 250);
  assert_int_equal(p->tasks[0].nvariants, 5);
  assert_int_equal(p->tasks[1].nvariants, 8);
  assert_int_equal(p->tasks[2].nvariants, 5);
  vr_pipeline_free(p);
}

static void test_spec(void **st) {
  (void)st;
  vr_pipeline *p = parse_ok(SPEC);
  assert_int_equal(p->ntasks, 4);
  /* preorder from the root, children in spec order */
  assert_string_equal(p->tasks[0].name, "detect");
  assert_string_equal(p->tasks[1].name, "garment");
  assert_string_equal(p->tasks[2].name, "shoe");
  assert_string_equal(p->tasks[3].name, "log");
  assert_int_equal(p->tasks[3].parent, 2);
  assert_string_equal(p->tasks[1].label, "top");
  assert_string_equal(p->tasks[2].label, "7");
  assert_string_equal(p->tasks[3].label, "");
  assert_string_equal(p->tasks[1].app, "fmnist");
  assert_int_equal(p->tasks[1].nvariants, 0); /* filled from the app later */
  const vr_pipe_task *d = &p->tasks[0];
  assert_non_null(d->adapter);
  assert_true(json_real_value(json_object_get(d->adapter, "threshold")) == 0.5);
  assert_int_equal(d->nvariants, 2);
  assert_true(d->variants[0].mult == 1 && d->variants[0].accuracy == -1);
  assert_true(d->variants[1].mult == 3 && d->variants[1].accuracy == 90);
  assert_true(d->variants[1].share[0] == 0.75);
  assert_true(d->variants[1].share[1] == 0.25);
  /* shoe -> log is unlabelled: every output goes there */
  assert_true(p->tasks[2].nchildren == 1);
  assert_int_equal(vr_pipe_task_route_label(p, &p->tasks[2], "x"), 0);
  vr_pipeline_free(p);
}

static void test_round_trip(void **st) {
  (void)st;
  const char *docs[] = {SPEC, LOKI_APP};
  for (int i = 0; i < 2; i++) {
    vr_pipeline *p = parse_ok(docs[i]), *q = NULL, *r;
    json_t *a = vr_pipeline_to_json(p);
    vr_errbuf err = {0};
    assert_int_equal(vr_pipeline_from_json(a, &q, &err), 0);
    json_t *b = vr_pipeline_to_json(q);
    assert_true(json_equal(a, b));
    r = vr_pipeline_dup(q);
    json_t *c = vr_pipeline_to_json(r);
    assert_true(json_equal(a, c));
    json_decref(a), json_decref(b), json_decref(c);
    vr_pipeline_free(p), vr_pipeline_free(q), vr_pipeline_free(r);
  }
}

static void test_errors(void **st) {
  (void)st;
  expect_err("{\"name\":\"c\",\"latency_ms\":100,\"tasks\":["
             "{\"name\":\"a\",\"app\":\"x\",\"children\":[\"b\"]},"
             "{\"name\":\"b\",\"app\":\"x\",\"children\":[\"c\"]},"
             "{\"name\":\"c\",\"app\":\"x\",\"children\":[\"a\"]}]}",
             VR_EINVAL, "cycle: a -> b -> c -> a");
  expect_err("{\"name\":\"c\",\"latency_ms\":100,\"tasks\":["
             "{\"name\":\"a\",\"app\":\"x\",\"children\":[\"a\"]}]}",
             VR_EINVAL, "cycle: a -> a");
  expect_err("{\"name\":\"c\",\"latency_ms\":100,\"tasks\":["
             "{\"name\":\"a\",\"app\":\"x\",\"children\":[\"zz\"]}]}",
             VR_ENOENT, "child 'zz' is an unknown task");
  expect_err("{\"name\":\"c\",\"latency_ms\":100,\"tasks\":["
             "{\"name\":\"a\",\"app\":\"x\",\"children\":[\"b\"]},"
             "{\"name\":\"b\"}]}",
             VR_EINVAL, "task 'b' has no model");
  expect_err("{\"appName\":\"l\",\"latencySLOInMSec\":100,\"root\":"
             "{\"task\":\"a\",\"model_variants\":[]}}",
             VR_EINVAL, "task 'a' has no model");
  expect_err("{\"name\":\"c\",\"latency_ms\":100,\"tasks\":["
             "{\"name\":\"a\",\"app\":\"x\",\"children\":[\"b\",\"c\"]},"
             "{\"name\":\"b\",\"app\":\"x\",\"children\":[\"c\"]},"
             "{\"name\":\"c\",\"app\":\"x\"}]}",
             VR_EINVAL, "task 'c' is reached twice");
  expect_err("{\"name\":\"c\",\"latency_ms\":100,\"tasks\":["
             "{\"name\":\"a\",\"app\":\"x\"},{\"name\":\"b\",\"app\":\"x\"}]}",
             VR_EINVAL, "task 'b' is not reachable");
  expect_err("{\"name\":\"c\",\"latency_ms\":100,\"tasks\":["
             "{\"name\":\"a\",\"app\":\"x\"},{\"name\":\"a\",\"app\":\"y\"}]}",
             VR_EINVAL, "task 'a' defined twice");
  expect_err("{\"name\":\"c\",\"latency_ms\":-5,\"tasks\":["
             "{\"name\":\"a\",\"app\":\"x\"}]}", VR_EINVAL, "SLO -5");
  expect_err("{\"name\":\"c\",\"tasks\":[{\"name\":\"a\",\"app\":\"x\"}]}",
             VR_EINVAL, "\"latency_ms\" (end-to-end SLO) is required");
  expect_err("{\"name\":\"c\",\"latency_ms\":100,\"tasks\":["
             "{\"name\":\"a\",\"variants\":[{\"name\":\"v\",\"accuracy\":120}]"
             "}]}", VR_EINVAL, "accuracy 120");
  expect_err("{\"name\":\"c\",\"latency_ms\":100,\"tasks\":["
             "{\"name\":\"a\",\"variants\":[{\"name\":\"v\",\"shares\":"
             "{\"q\":1}}]}]}", VR_ENOENT, "not a child");
  expect_err("{\"name\":\"c\",\"latency_ms\":100,\"root\":\"q\",\"tasks\":["
             "{\"name\":\"a\",\"app\":\"x\"}]}", VR_ENOENT, "root is not");
  expect_err("{\"name\":\"c\",\"latency_ms\":100,\"tasks\":["
             "{\"name\":\"a\",\"app\":\"x\",\"children\":["
             "{\"task\":\"b\",\"label\":1},{\"task\":\"d\",\"label\":1}]},"
             "{\"name\":\"b\",\"app\":\"x\"},{\"name\":\"d\",\"app\":\"x\"}]}",
             VR_EINVAL, "the same label \"1\"");
  expect_err("{\"name\":\"c\",\"latency_ms\":100,\"tasks\":["
             "{\"name\":\"a\",\"app\":\"x\",\"adapter\":[1]}]}", VR_EINVAL,
             "\"adapter\" must be an object");
  /* a name given but refused says why, not that none was given */
  expect_err("{\"name\":\"a/b\",\"latency_ms\":100,\"tasks\":["
             "{\"name\":\"a\",\"app\":\"x\"}]}", VR_EINVAL,
             "pipeline: name 'a/b' holds '/' or a control character");
  expect_err("{\"name\":\"c\",\"latency_ms\":100,\"tasks\":["
             "{\"name\":\"t/1\",\"app\":\"x\"}]}", VR_EINVAL,
             "task 0: name 't/1' holds '/'");
  expect_err("{\"name\":\"c\",\"latency_ms\":100,\"tasks\":["
             "{\"name\":\"a\",\"variants\":[\"v/2\"]}]}", VR_EINVAL,
             "name 'v/2' holds '/'");
  expect_err("{\"name\":", VR_EFORMAT, "bad JSON");
  expect_err("{\"appName\":\"l\",\"latencySLOInMSec\":100,\"root\":"
             "{\"task\":\"a\",\"model_variants\":[\"m\"],\"children\":["
             "{\"task\":\"a\",\"model_variants\":[\"m\"]}]}}",
             VR_EINVAL, "task 'a' defined twice");
}

/* An unlabelled child beside a labelled one takes the outputs no labelled
 * sibling does (one child per output): its share is the remainder, and a
 * variant's shares cannot sum past 1. It defaulted to 1 beside the
 * labelled child's 1, so planners provisioned twice the outputs. */
static void test_unlabelled_sibling_share(void **st) {
  (void)st;
  static const char *FORK =
      "{\"name\":\"f\",\"latency_ms\":100,\"tasks\":["
      "{\"name\":\"a\",\"variants\":[\"v\",{\"name\":\"w\",\"shares\":"
      "{\"car\":0.8}}],\"children\":[{\"task\":\"car\",\"label\":\"car\"},"
      "\"rest\"]},"
      "{\"name\":\"car\",\"app\":\"x\"},{\"name\":\"rest\",\"app\":\"x\"}]}";
  vr_pipeline *p = parse_ok(FORK);
  const vr_pipe_task *a = &p->tasks[0];
  assert_true(a->variants[0].share[0] == 0.5 && a->variants[0].share[1] == 0.5);
  assert_true(fabs(a->variants[1].share[1] - 0.2) < 1e-12);
  int choice[3] = {0, 0, 0};
  double rate[3];
  vr_pipeline_rates(p, choice, NULL, 100, rate);
  assert_true(fabs(rate[1] + rate[2] - 100) < 1e-9);
  vr_pipeline_free(p);
  expect_err("{\"name\":\"f\",\"latency_ms\":100,\"tasks\":["
             "{\"name\":\"a\",\"variants\":[{\"name\":\"v\",\"shares\":"
             "{\"car\":0.8,\"rest\":0.5}}],\"children\":["
             "{\"task\":\"car\",\"label\":\"car\"},\"rest\"]},"
             "{\"name\":\"car\",\"app\":\"x\"},{\"name\":\"rest\",\"app\":\"x\"}]}",
             VR_EINVAL, "shares sum to 1.3 > 1");
}

static void test_rates(void **st) {
  (void)st;
  vr_pipeline *p = parse_ok(SPEC);
  /* det_l: 3 outputs per frame, 3/4 to garment, 1/4 to shoe; log gets
   * every shoe output (mult 1, share 1). */
  int choice[4] = {1, 0, 0, 0};
  double rate[4];
  vr_pipeline_rates(p, choice, NULL, 100, rate);
  assert_true(fabs(rate[0] - 100) < 1e-9);
  assert_true(fabs(rate[1] - 225) < 1e-9);
  assert_true(fabs(rate[2] - 75) < 1e-9);
  assert_true(fabs(rate[3] - 75) < 1e-9);
  /* a 50/50 mix of det_s (mult 1, shares 1/2 each) and det_l */
  double m0[2] = {0.5, 0.5}, one[1] = {1};
  const double *mix[4] = {m0, one, one, one};
  int any[4] = {-1, 0, 0, 0};
  vr_pipeline_rates(p, any, mix, 100, rate);
  assert_true(fabs(rate[1] - (25 + 112.5)) < 1e-9);
  assert_true(fabs(rate[2] - (25 + 37.5)) < 1e-9);
  vr_pipeline_free(p);
}

static void test_set_variants(void **st) {
  (void)st;
  vr_pipeline *p = parse_ok(SPEC);
  const char *names[] = {"fmnist_mlp", "fmnist_cnn"};
  double acc[] = {85, 91};
  vr_errbuf err = {0};
  assert_int_equal(vr_pipe_task_set_variants(p, 1, names, acc, 2, &err), 0);
  assert_int_equal(p->tasks[1].nvariants, 2);
  assert_int_equal(vr_pipe_task_variant(&p->tasks[1], "fmnist_cnn"), 1);
  assert_true(p->tasks[1].variants[1].accuracy == 91);
  const char *dup[] = {"a", "a"};
  assert_int_equal(vr_pipe_task_set_variants(p, 1, dup, NULL, 2, &err),
                   VR_EINVAL);
  assert_non_null(strstr(err.msg, "listed twice"));
  assert_int_equal(p->tasks[1].nvariants, 2); /* unchanged on error */
  assert_int_equal(vr_pipeline_validate(p, &err), 0);
  vr_pipeline_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loki_app),   cmocka_unit_test(test_loki_published),
      cmocka_unit_test(test_spec),       cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_errors),     cmocka_unit_test(test_rates),
      cmocka_unit_test(test_set_variants), cmocka_unit_test(test_unlabelled_sibling_share),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
