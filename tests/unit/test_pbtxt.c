/* Triton config.pbtxt reader: the fields it maps, and refusals that name
 * the field and its line; classification label files (labels.h). */
#include <string.h>

#include "runtime/labels.h"
#include "runtime/pbtxt.h"
#include "vr_test.h"

static const char *k_full =
    "name: \"resnet\"  # comment\n"
    "backend: \"onnxruntime\"\n"
    "max_batch_size: 8\n"
    "version_policy: { specific: { versions: [1, 3] } }\n"
    "input { name: \"input\" data_type: TYPE_FP32 dims: [3, 224, 224] }\n"
    "output < name: \"logits\" data_type: TYPE_FP32 dims: 1000 label_filename: \"l.txt\" >\n"
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
  assert_string_equal(c.label_file[0], "l.txt");
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
  /* each dim is below 2^28, their product (a sample's size) is not */
  expect_bad("input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 65536, 65536, 65536, 65536 ] } ]",
             "line 1: input dims: sample of more than 2^28 elements");
  expect_bad("output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 16385, 16384 ] } ]",
             "2^28");
  expect_bad("input [ { name: \"x\" data_type: TYPE_FOO dims: [ 1 ] } ]", "TYPE_FOO");
  expect_bad("input [ { name: \"x\" dims: [ 1 ] } ]", "data_type");
  expect_bad("input [ { name: \"x\" data_type: TYPE_FP32 reshape: { shape: [1] } } ]", "reshape");
  expect_bad("name: \"m\"\nfoo: 1", "line 2: field 'foo'");
  /* label_filename belongs to an output (Triton's ModelOutput) */
  expect_bad("label_filename: \"l.txt\"", "field 'label_filename'");
  expect_bad("input { name: \"x\" data_type: TYPE_FP32 dims: 1 label_filename: \"l\" }",
             "label_filename");
  expect_bad("output { name: \"y\" data_type: TYPE_FP32 dims: 1 label_filename: \"../l\" }",
             "must be a file name");
  expect_bad("name \"m\"", "expected ':'");
  expect_bad("input [ { name: \"x\" ", "missing");
  expect_bad("name: \"unterminated", "unterminated");
  expect_bad("a{a{a{a{a{a{a{a{a{a{a{a{a{a{a{a{a{a{}}}}}}}}}}}}}}}}}}", "deeper");
}

static void expect_labels_bad(const char *text, size_t len, int64_t classes,
                              const char *needle) {
  vr_labels *l = (vr_labels *)1;
  vr_errbuf err = {0};
  int rc = vr_labels_parse(text, len, "l.txt", classes, &l, &err);
  if (rc == 0 || l || !strstr(err.msg, needle) || !strstr(err.msg, "l.txt"))
    fail_msg("labels: rc %d, message '%s' lacks '%s'", rc, err.msg, needle);
}

static void test_labels(void **st) {
  (void)st;
  vr_labels *l;
  vr_errbuf err = {0};
  const char *t = "cat\r\ndog\n\nbird"; /* CRLF, an empty label, no last \n */
  assert_int_equal(vr_labels_parse(t, strlen(t), "l.txt", 4, &l, &err), 0);
  assert_int_equal(vr_labels_count(l), 4);
  assert_string_equal(vr_labels_get(l, 0), "cat");
  assert_string_equal(vr_labels_get(l, 1), "dog");
  assert_string_equal(vr_labels_get(l, 2), "");
  assert_string_equal(vr_labels_get(l, 3), "bird");
  assert_null(vr_labels_get(l, 4));
  assert_null(vr_labels_get(l, -1));
  vr_labels_retain(l); /* a response keeps them past an unload */
  vr_labels_release(l);
  assert_string_equal(vr_labels_get(l, 3), "bird");
  vr_labels_release(l);
  assert_int_equal(vr_labels_parse("a\nb\n", 4, "l.txt", 0, &l, &err), 0);
  assert_int_equal(vr_labels_count(l), 2); /* the last \n ends a line */
  vr_labels_release(l);
  expect_labels_bad("", 0, 0, "empty");
  expect_labels_bad("a\0b\n", 4, 0, "NUL");
  expect_labels_bad("a\nb\n", 4, 3, "has 2 labels; the output has 3 classes");
  assert_int_equal(vr_labels_load("/nonexistent/l.txt", 0, &l, &err), VR_ENOENT);
  assert_non_null(strstr(err.msg, "/nonexistent/l.txt"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_labels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
