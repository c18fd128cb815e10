/* `vario eval MODEL.onnx --input X.npy --labels Y.npy`: top-1 accuracy of
 * a classifier on a validation set, at a given precision (the number the
 * variant generator records as a variant's accuracy). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/npy.h"
#include "cli/commands.h"
#include "vario/engine.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: vario eval MODEL.onnx --input X.npy --labels Y.npy\n"
          "                  [--precision fp32|bf16|int8] [--calibration cal.npy]\n"
          "                  [--threads N] [--batch B] [--json]\n"
          "X: N samples along dim 0 (the model's first input); Y: N integer\n"
          "labels. Prints top-1 accuracy (percent) of the first output's argmax.\n"
          "(--inputs is a deprecated alias of --input.)\n");
}

static int64_t label_at(const vr_npy *y, int64_t i) {
  switch (y->dtype) {
    case VR_DT_I64: return ((const int64_t *)y->data)[i];
    case VR_DT_I32: return ((const int32_t *)y->data)[i];
    case VR_DT_U8: return ((const uint8_t *)y->data)[i];
    default: return -1;
  }
}

static int64_t argmax(const float *p, int64_t n) {
  int64_t k = 0;
  for (int64_t i = 1; i < n; i++)
    if (p[i] > p[k]) k = i;
  return k;
}

typedef struct eval_opts {
  const char *model, *xs, *ys, *cal, *prec;
  int threads, batch, json;
} eval_opts;

static int parse(int argc, char **argv, eval_opts *e) {
  *e = (eval_opts){NULL, NULL, NULL, NULL, "fp32", 1, 32, 0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
    else if ((!strcmp(a, "--input") || !strcmp(a, "--inputs")) && more) e->xs = argv[++i];
    else if (!strcmp(a, "--labels") && more) e->ys = argv[++i];
    else if (!strcmp(a, "--calibration") && more) e->cal = argv[++i];
    else if (!strcmp(a, "--precision") && more) e->prec = argv[++i];
    else if (!strcmp(a, "--threads") && more) {
      if (vr__cli_int("eval", a, argv[++i], 1, 1024, &e->threads)) return 2;
    } else if (!strcmp(a, "--batch") && more) {
      if (vr__cli_int("eval", a, argv[++i], 1, 65536, &e->batch)) return 2;
    }
    else if (!strcmp(a, "--json")) e->json = 1;
    else if (a[0] != '-' && !e->model) e->model = a;
    else return 2;
  }
  return e->model && e->xs && e->ys && e->threads > 0 && e->batch > 0 ? 0 : 2;
}

/* Runs all samples in chunks of at most `batch`; counts correct argmaxes. */
static int score(vr_session *s, const vr_npy *x, const vr_npy *y, int batch, int64_t *correct,
                 vr_errbuf *err) {
  int64_t n = x->shape[0], per = vr_npy_numel(x) / (n ? n : 1);
  size_t esz = vr_dtype_size(x->dtype);
  vr_tensor in = {vr_session_input(s, 0)->name, x->dtype, x->ndim, {0}, NULL, 0}, out[16];
  memcpy(in.shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  *correct = 0;
  for (int64_t i = 0; i < n; i += batch) {
    int b = (int)(n - i < batch ? n - i : batch);
    in.shape[0] = b;
    in.data = (char *)x->data + (size_t)(i * per) * esz;
    in.nbytes = (size_t)(b * per) * esz;
    int rc = vr_session_run(s, b, &in, 1, out, 16, err);
    if (rc) return rc;
    if (out[0].dtype != VR_DT_F32 || out[0].ndim < 1)
      return vr_errf(err, VR_ETYPE, "first output is not a float32 score tensor");
    int64_t k = (int64_t)(out[0].nbytes / 4) / b;
    for (int j = 0; j < b; j++)
      if (argmax((const float *)out[0].data + j * k, k) == label_at(y, i + j)) (*correct)++;
  }
  return 0;
}

int vr_cmd_eval(int argc, char **argv) {
  eval_opts e;
  int prc = parse(argc, argv, &e);
  if (prc == 1) {
    usage(stdout);
    return 0;
  }
  if (prc) {
    usage(stderr);
    return 2;
  }
  vr_errbuf err = {0};
  vr_model *m = NULL;
  vr_session *s = NULL;
  vr_npy x = {0}, y = {0}, cal = {0};
  vr_tensor tcal;
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.threads = e.threads;
  int rc = 1;
  if (vr_precision_parse(e.prec, &o.precision)) {
    fprintf(stderr, "vario eval: unknown precision '%s'\n", e.prec);
    return 2;
  }
  if (vr_model_load(e.model, &m, &err) || vr_npy_read(e.xs, &x, &err) ||
      vr_npy_read(e.ys, &y, &err))
    goto fail;
  if (x.ndim >= 1 && x.shape[0] == 0) {
    vr_errf(&err, VR_ESHAPE, "no samples in %s", e.xs);
    goto fail;
  }
  if (x.ndim < 1 || y.ndim != 1 || y.shape[0] != x.shape[0] || label_at(&y, 0) < 0) {
    vr_errf(&err, VR_ESHAPE, "inputs (%lld samples) and labels (1-D integer, %lld) disagree",
            (long long)(x.ndim ? x.shape[0] : 0), (long long)(y.ndim ? y.shape[0] : 0));
    goto fail;
  }
  const vr_tensor_info *ti = vr_model_input(m, 0);
  o.max_batch = ti->ndim > 0 && ti->shape[0] == -1 ? e.batch : 1;
  o.lazy_plans = 1; /* full batches and one remainder: two plans */
  if (e.cal) {
    if (vr_npy_read(e.cal, &cal, &err)) goto fail;
    tcal = (vr_tensor){ti->name, cal.dtype, cal.ndim, {0}, cal.data, cal.nbytes};
    memcpy(tcal.shape, cal.shape, sizeof(int64_t) * (size_t)cal.ndim);
    o.calibration = &tcal;
    o.n_calibration = 1;
  }
  if (vr_session_create(m, &o, &s, &err)) goto fail;
  int64_t correct, t0 = vr_now_ns();
  if (score(s, &x, &y, o.max_batch, &correct, &err)) goto fail;
  double secs = (double)(vr_now_ns() - t0) / 1e9, acc = 100.0 * (double)correct / (double)x.shape[0];
  if (e.json)
    printf("{\"model\":\"%s\",\"precision\":\"%s\",\"samples\":%lld,\"correct\":%lld,"
           "\"accuracy\":%.4f,\"seconds\":%.3f}\n",
           e.model, e.prec, (long long)x.shape[0], (long long)correct, acc, secs);
  else
    printf("%s  precision %s  top-1 accuracy %.2f%% (%lld/%lld)  %.2fs\n", e.model, e.prec, acc,
           (long long)correct, (long long)x.shape[0], secs);
  rc = 0;
  goto out;
fail:
  fprintf(stderr, "vario eval: %s\n", err.msg[0] ? err.msg : vr_strerror(err.code));
out:
  vr_session_free(s);
  vr_model_free(m);
  vr_npy_free(&x);
  vr_npy_free(&y);
  vr_npy_free(&cal);
  return rc;
}
