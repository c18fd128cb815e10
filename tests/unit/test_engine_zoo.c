/* Zoo check: every committed Fashion-MNIST model (models/fmnist/<name>/
 * model.onnx) reproduces PyTorch's outputs on the first 64 validation rows
 * (models/fmnist-data/ref/<name>.npy) within relative error 1e-4, at batch
 * 64 and at batch 1. Skips when the zoo files are not there. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "engine_util.h"
#include "vr_test.h"

#define ROWS 64

static int check_one(const char *name, const vr_npy *val) {
  char mp[512], rp[512];
  snprintf(mp, sizeof mp, "models/fmnist/%s/model.onnx", name);
  snprintf(rp, sizeof rp, "models/fmnist-data/ref/%s.npy", name);
  struct stat sb;
  if (stat(src_path(mp), &sb) || stat(src_path(rp), &sb)) return 0;
  vr_errbuf e = {0};
  vr_model *m;
  vr_npy ref;
  if (vr_model_load(src_path(mp), &m, &e)) fail_msg("%s: %s", name, e.msg);
  assert_int_equal(vr_npy_read(src_path(rp), &ref, &e), 0);
  assert_true(ref.shape[0] == ROWS);
  int64_t per = vr_npy_numel(&ref) / ROWS, per_in = vr_npy_numel(val) / val->shape[0];
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.max_batch = ROWS;
  vr_session *s;
  if (vr_session_create(m, &o, &s, &e)) fail_msg("%s: %s", name, e.msg);
  vr_tensor in = tensor_of(vr_model_input(m, 0)->name, val), out[4];
  in.shape[0] = ROWS;
  in.nbytes = (size_t)(per_in * ROWS) * 4;
  if (vr_session_run(s, ROWS, &in, 1, out, 4, &e)) fail_msg("%s: %s", name, e.msg);
  double r = rel_err(out[0].data, ref.data, per * ROWS);
  printf("  %-24s batch %d: relative error %.2e\n", name, ROWS, r);
  if (r > 1e-4) fail_msg("%s: relative error %g > 1e-4", name, r);
  in.shape[0] = 1;
  in.nbytes = (size_t)per_in * 4;
  for (int i = 0; i < ROWS; i += 7) {
    in.data = (float *)val->data + i * per_in;
    if (vr_session_run(s, 1, &in, 1, out, 4, &e)) fail_msg("%s: %s", name, e.msg);
    r = rel_err(out[0].data, (float *)ref.data + i * per, per);
    if (r > 1e-4) fail_msg("%s row %d alone: relative error %g", name, i, r);
  }
  vr_session_free(s);
  /* int8 (calibrated on the calibration set; conv->conv chains stay
   * int8): predictions agree with fp32 PyTorch on >= 95% of the rows. */
  vr_npy cal;
  if (vr_precision_supported(VR_PREC_INT8) &&
      !vr_npy_read(src_path("models/fmnist-data/calib_inputs.npy"), &cal, &e)) {
    vr_tensor tc = tensor_of(vr_model_input(m, 0)->name, &cal);
    o.precision = VR_PREC_INT8;
    o.calibration = &tc;
    o.n_calibration = 1;
    if (vr_session_create(m, &o, &s, &e)) fail_msg("%s int8: %s", name, e.msg);
    in.shape[0] = ROWS;
    in.data = val->data;
    in.nbytes = (size_t)(per_in * ROWS) * 4;
    if (vr_session_run(s, ROWS, &in, 1, out, 4, &e)) fail_msg("%s int8: %s", name, e.msg);
    int agree = 0;
    for (int i = 0; i < ROWS; i++) {
      const float *a = (const float *)out[0].data + i * per, *b = (const float *)ref.data + i * per;
      int ia = 0, ib = 0;
      for (int k = 1; k < per; k++) {
        if (a[k] > a[ia]) ia = k;
        if (b[k] > b[ib]) ib = k;
      }
      agree += ia == ib;
    }
    printf("  %-24s int8: %d/%d predictions agree with fp32\n", name, agree, ROWS);
    if (agree < ROWS * 95 / 100) fail_msg("%s int8: only %d/%d predictions agree", name, agree, ROWS);
    vr_session_free(s);
    vr_npy_free(&cal);
  }
  vr_npy_free(&ref);
  vr_model_free(m);
  return 1;
}

static void test_fmnist_zoo(void **st) {
  vr_npy val;
  vr_errbuf e = {0};
  DIR *d = opendir(src_path("models/fmnist"));
  if (!d || vr_npy_read(src_path("models/fmnist-data/val_inputs.npy"), &val, &e)) {
    if (d) closedir(d);
    printf("SKIP: models/fmnist or its validation data not present\n");
    skip();
  }
  int checked = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    if (de->d_name[0] != '.') checked += check_one(de->d_name, &val);
  closedir(d);
  vr_npy_free(&val);
  printf("  %d zoo models checked\n", checked);
  if (!checked) skip();
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_fmnist_zoo)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
