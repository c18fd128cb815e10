/* Triton config.pbtxt reader: the fields it maps, and refusals that name
 * the field and its line. */
#include <string.h>

#include "runtime/pbtxt.h"
#include "vr_test.h"

static const char *k_full =
    "name: \"resnet\"  # comment\n"
    "backend: \"onnxruntime\"\n"
    "max_batch_size: 8\n"
    "version_policy: { specific: { versions: [1, 3] } }\n"
    "input { name: \"input\" data_type: TYPE_FP32 dims: [3, 224, 224] }\n"
    "output < name: \"logits\" data_type: TYPE_FP32 dims: 1000 >\n"
    "dynamic_batching { max_queue_delay_microseconds: 250 preferred_batch_size: [4, 8] }\n"
    "instance_group [ { count: 2 kind: KIND_AUTO }, { count: 1, kind: KIND_CPU } ]\n"
    "optimization { execution_accelerators { } }\n"
    "parameters { key: \"x\" value: { string_value: 'a' \"b\" } }\n";

static void test_full(void **st) {
  (void)st;
  vr_model_config c;
  vr_errbuf err = {0};
  assert_int_equal(vr_pbtxt_parse(k_full, strlen(k_full), &c, &err), 0);
  assert_string_equal(c.name, "resnet");
  assert_string_equal(c.platform, "onnxruntime_onnx");
  assert_int_equal(c.max_batch_size, 8);
  assert_int_equal(c.n_versions, 2);
  assert_int_equal(c.versions[1], 3);
  assert_int_equal(c.n_inputs, 1);
  assert_int_equal(c.inputs[0].ndim, 4);
  assert_true(c.inputs[0].shape[0] == -1 && c.inputs[0].shape[3] == 224);
  assert_int_equal(c.outputs[0].shape[1], 1000);
  assert_int_equal(c.max_queue_delay_us, 250);
  assert_int_equal(c.n_preferred_batch, 2);
  assert_int_equal(c.preferred_batch[1], 8);
  assert_int_equal(c.instances, 3);
  assert_true(c.has_dynamic_batching);
}

static void expect_bad(const char *text, const char *needle) {
  vr_model_config c;
  vr_errbuf err = {0};
  int rc = vr_pbtxt_parse(text, strlen(text), &c, &err);
  if (rc == 0 || !strstr(err.msg, needle))
    fail_msg("'%s': rc %d, message '%s' lacks '%s'", text, rc, err.msg, needle);
}

static void test_refusals(void **st) {
  (void)st;
  expect_bad("max_batch_size: 4\nsequence_batching { }", "line 2: field 'sequence_batching'");
  expect_bad("ensemble_scheduling { }", "ensemble_scheduling");
  expect_bad("platform: \"tensorrt_plan\"", "tensorrt_plan");
  expect_bad("instance_group [ { kind: KIND_GPU } ]", "KIND_GPU");
  expect_bad("max_batch_size: 0", "max_batch_size 0");
  expect_bad("max_batch_size: -2", "max_batch_size");
  expect_bad("max_batch_size: \"4\"", "max_batch_size");
  expect_bad("input [ { name: \"x\" data_type: TYPE_FP32 dims: [ -1 ] } ]", "dim -1");
  expect_bad("input [ { name: \"x\" data_type: TYPE_FOO dims: [ 1 ] } ]", "TYPE_FOO");
  expect_bad("input [ { name: \"x\" dims: [ 1 ] } ]", "data_type");
  expect_bad("input [ { name: \"x\" data_type: TYPE_FP32 reshape: { shape: [1] } } ]", "reshape");
  expect_bad("name: \"m\"\nfoo: 1", "line 2: field 'foo'");
  expect_bad("name \"m\"", "expected ':'");
  expect_bad("input [ { name: \"x\" ", "missing");
  expect_bad("name: \"unterminated", "unterminated");
  expect_bad("a{a{a{a{a{a{a{a{a{a{a{a{a{a{a{a{a{a{}}}}}}}}}}}}}}}}}}", "deeper");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
