/* int8 served live: a repository entry of a committed Fashion-MNIST model
 * whose config.json names a calibration file is loaded by the runtime's
 * engine backend at fp32 and at int8; the int8 instance's predictions
 * agree with fp32 on >= 95% of 64 validation rows. A missing, malformed or
 * mismatched calibration file, and int8 without one, fail clearly. Skips
 * when the engine, int8 or the zoo files are not there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control/fsutil.h"
#include "engine_util.h"
#include "runtime/config.h"
#include "runtime/runtime.h"
#include "rt_wait.h"
#include "vr_test.h"

#define ROWS 64

static char g_tmp[256];

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* <tmp>/<name>/{model.onnx, config.json, cal.npy?}; cal_json is the value
 * of "calibration" or NULL for none. */
static void make_entry(const char *name, const char *cal_json,
                       const char *cal_src) {
  char dir[512], p[700], cfg[2048];
  vr_errbuf e = {0};
  snprintf(dir, sizeof dir, "%s/%s", g_tmp, name);
  assert_int_equal(vr_mkdirs(dir, &e), 0);
  snprintf(p, sizeof p, "%s/model.onnx", dir);
  assert_int_equal(
      vr_copy_file(src_path("models/fmnist/fmnist_cnn_bn/model.onnx"), p, &e), 0);
  if (cal_src) {
    snprintf(p, sizeof p, "%s/cal.npy", dir);
    assert_int_equal(vr_copy_file(cal_src, p, &e), 0);
  }
  char calkv[600] = "";
  if (cal_json) snprintf(calkv, sizeof calkv, ",\"calibration\":%s", cal_json);
  snprintf(cfg, sizeof cfg,
           "{\"name\":\"%s\",\"app\":\"fashion\","
           "\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[-1,1,28,28]}],"
           "\"outputs\":[{\"name\":\"logits\",\"datatype\":\"FP32\",\"shape\":[-1,10]}],"
           "\"max_batch_size\":64,\"instances\":1,\"threads\":1%s}",
           name, calkv);
  snprintf(p, sizeof p, "%s/config.json", dir);
  write_text(p, cfg);
}

static int load_cfg(const char *name, vr_model_config *c, vr_errbuf *e) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/%s", g_tmp, name);
  return vr_model_config_load(dir, c, e);
}

/* Runs rows of x through model one request of `rows` rows; argmax into cls. */
static void serve(vr_runtime *rt, const char *model, const vr_npy *x, int rows,
                  int *cls) {
  rt_waiter w = RT_WAITER_INIT;
  vr_rt_request q;
  vr_rt_request_init(&q);
  q.n_in = 1;
  q.in[0] = (vr_tensor){"input", VR_DT_F32, 4, {rows, 1, 28, 28}, x->data,
                        (size_t)rows * 784 * 4};
  q.done = rt_wait_cb;
  q.user = &w;
  assert_int_equal(vr_rt_submit(rt, model, &q), 0);
  rt_wait(&w);
  if (q.status) fail_msg("%s: status %d", model, q.status);
  assert_int_equal(q.n_out, 1);
  assert_int_equal(q.out[0].shape[0], rows);
  const float *o = q.out[0].data;
  for (int r = 0; r < rows; r++) {
    int b = 0;
    for (int k = 1; k < 10; k++)
      if (o[r * 10 + k] > o[r * 10 + b]) b = k;
    cls[r] = b;
  }
  vr_rt_request_clear(&q);
}

static int available(void) {
  return vr_rt_backend_engine() && vr_precision_supported(VR_PREC_INT8) &&
         access(src_path("models/fmnist/fmnist_cnn_bn/model.onnx"), R_OK) == 0 &&
         access(src_path("models/fmnist-data/calib_inputs.npy"), R_OK) == 0;
}

static void test_int8_served(void **st) {
  (void)st;
  if (!available()) skip();
  make_entry("cnn", "\"cal.npy\"",
             src_path("models/fmnist-data/calib_inputs.npy"));
  vr_errbuf e = {0};
  vr_model_config c32, c8;
  if (load_cfg("cnn", &c32, &e)) fail_msg("%s", e.msg);
  char want[700];
  snprintf(want, sizeof want, "%s/cnn/cal.npy", g_tmp);
  assert_string_equal(c32.calibration_path, want);
  c8 = c32;
  snprintf(c8.name, sizeof c8.name, "cnn_int8");
  c8.precision = VR_PREC_INT8;
  vr_runtime_opts o;
  vr_runtime_opts_init(&o);
  o.profile_runs = 1;
  vr_runtime *rt;
  assert_int_equal(vr_runtime_create(&o, &rt, &e), 0);
  if (vr_rt_load(rt, &c32, &e)) fail_msg("fp32: %s", e.msg);
  if (vr_rt_load(rt, &c8, &e)) fail_msg("int8: %s", e.msg);
  vr_npy x;
  assert_int_equal(vr_npy_read(src_path("models/fmnist-data/val_inputs.npy"), &x, &e), 0);
  assert_true(x.shape[0] >= ROWS);
  int a[ROWS], b[ROWS], same = 0;
  serve(rt, "cnn", &x, ROWS, a);
  serve(rt, "cnn_int8", &x, ROWS, b);
  for (int i = 0; i < ROWS; i++) same += a[i] == b[i];
  printf("  int8 vs fp32 argmax agree on %d/%d rows\n", same, ROWS);
  assert_true(same >= ROWS * 95 / 100);
  /* Single rows through the int8 instance too (batch-1 plan). */
  int one;
  serve(rt, "cnn_int8", &x, 1, &one);
  assert_int_equal(one, b[0]);
  vr_npy_free(&x);
  vr_runtime_free(rt);
}

static void expect_load_error(vr_runtime *rt, vr_model_config *c,
                              const char *msg) {
  vr_errbuf e = {0};
  int rc = vr_rt_load(rt, c, &e);
  assert_true(rc < 0);
  if (!strstr(e.msg, msg)) fail_msg("'%s' does not mention '%s'", e.msg, msg);
}

static void test_int8_bad_calibration(void **st) {
  (void)st;
  if (!available()) skip();
  vr_errbuf e = {0};
  vr_model_config c;
  vr_runtime_opts o;
  vr_runtime_opts_init(&o);
  o.profile_runs = 1;
  vr_runtime *rt;
  assert_int_equal(vr_runtime_create(&o, &rt, &e), 0);

  /* No calibration: fp32 loads; int8 fails with the engine's error. */
  make_entry("nocal", NULL, NULL);
  assert_int_equal(load_cfg("nocal", &c, &e), 0);
  assert_string_equal(c.calibration_path, "");
  c.precision = VR_PREC_INT8;
  expect_load_error(rt, &c, "calibration");

  /* Named but missing: the config itself is refused. */
  make_entry("missing", "\"nope.npy\"", NULL);
  e.msg[0] = 0;
  assert_int_equal(load_cfg("missing", &c, &e), VR_ENOENT);
  assert_non_null(strstr(e.msg, "calibration"));

  /* Not a .npy file: model open fails naming the file. */
  make_entry("garbage", "\"cal.npy\"", src_path("models/fmnist/fmnist_cnn_bn/config.json"));
  assert_int_equal(load_cfg("garbage", &c, &e), 0);
  expect_load_error(rt, &c, "cal.npy");

  /* Rows of the wrong shape (labels: int64 [N]). */
  make_entry("shape", "\"cal.npy\"", src_path("models/fmnist-data/val_labels.npy"));
  assert_int_equal(load_cfg("shape", &c, &e), 0);
  expect_load_error(rt, &c, "calibration");

  /* Not a string. */
  const char *bad =
      "{\"name\":\"m\",\"calibration\":3,"
      "\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[-1,4]}],"
      "\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[-1,4]}]}";
  assert_true(vr_model_config_parse(bad, strlen(bad), NULL, &c, &e) < 0);
  assert_non_null(strstr(e.msg, "calibration"));
  vr_runtime_free(rt);
}

static int setup(void **st) {
  (void)st;
  strcpy(g_tmp, "/tmp/vr_i8_XXXXXX");
  return mkdtemp(g_tmp) ? 0 : -1;
}

static int teardown(void **st) {
  (void)st;
  vr_rmtree(g_tmp);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_int8_served),
      cmocka_unit_test(test_int8_bad_calibration),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
