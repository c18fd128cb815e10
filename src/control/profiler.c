#include "control/profiler.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "runtime/runtime.h"

#define MAX_ROWS 64
#define MAX_SAMPLES 1000

static int opt(int v, int dflt) { return v > 0 ? v : dflt; }

/* Elements in one row (all dims but the first) of a model input. */
static int64_t row_elems(const vr_tensor_info *ti) {
  int64_t e = 1;
  for (int d = 1; d < ti->ndim; d++) {
    if (ti->shape[d] <= 0) return -1;
    e *= ti->shape[d];
  }
  return e;
}

static int check_rows(const vr_tensor_info *ti, const vr_npy *x,
                      const char *what, vr_errbuf *err) {
  int same = x->ndim == ti->ndim;
  for (int d = 1; same && d < ti->ndim; d++) same = x->shape[d] == ti->shape[d];
  if (!same)
    return vr_errf(err, VR_ESHAPE,
                   "%s rows do not match model input '%s' (%d dims, row shape "
                   "differs)", what, ti->name, ti->ndim);
  if (x->dtype != ti->dtype)
    return vr_errf(err, VR_ETYPE, "%s are %s but model input '%s' is %s", what,
                   vr_dtype_name(x->dtype), ti->name, vr_dtype_name(ti->dtype));
  return 0;
}

static int init_calib(vr_prof_inputs *in,
                      const vr_npy *src, const vr_prof_opts *o) {
  int64_t rows = src->shape[0];
  int64_t k = opt(o ? o->calib_rows : 0, 128);
  if (k > rows) k = rows;
  size_t bytes = (size_t)k * in->row_bytes[0];
  in->calib_buf = vr_aligned_alloc(64, bytes ? bytes : 64);
  if (!in->calib_buf) return VR_ENOMEM;
  memcpy(in->calib_buf, src->data, bytes);
  in->calib = in->t[0];
  in->calib.shape[0] = k;
  in->calib.data = in->calib_buf;
  in->calib.nbytes = bytes;
  return 0;
}

int vr_prof_inputs_init(vr_prof_inputs *in, const vr_model *m,
                        const vr_valset *vs, const vr_npy *calib,
                        const vr_prof_opts *o, vr_errbuf *err) {
  memset(in, 0, sizeof *in);
  in->n = vr_model_num_inputs(m);
  if (in->n < 1 || in->n > 4)
    return vr_errf(err, VR_EUNSUPPORTED, "model has %d inputs; profiling supports 1..4",
                   in->n);
  if ((vs || calib) && in->n != 1)
    return vr_errf(err, VR_EUNSUPPORTED,
                   "validation/calibration data needs a single-input model (it has %d)",
                   in->n);
  int rc = 0;
  for (int i = 0; rc == 0 && i < in->n; i++) {
    const vr_tensor_info *ti = vr_model_input(m, i);
    int64_t e = row_elems(ti);
    if (e <= 0 || vr_dtype_size(ti->dtype) == 0)
      return vr_errf(err, VR_EUNSUPPORTED, "model input '%s' has an unknown dimension",
                     ti->name);
    if (vs && (rc = check_rows(ti, &vs->inputs, "validation inputs", err))) break;
    if (calib && (rc = check_rows(ti, calib, "calibration inputs", err))) break;
    in->row_bytes[i] = (size_t)e * vr_dtype_size(ti->dtype);
    in->buf[i] = vr_aligned_alloc(64, MAX_ROWS * in->row_bytes[i]);
    if (!in->buf[i]) {
      rc = vr_errf(err, VR_ENOMEM, "out of memory for profiling inputs");
      break;
    }
    memset(in->buf[i], 0, MAX_ROWS * in->row_bytes[i]);
    for (int r = 0; vs && r < MAX_ROWS; r++) /* real rows, cycled */
      memcpy((char *)in->buf[i] + r * in->row_bytes[i],
             (char *)vs->inputs.data + (r % vs->n) * vs->row_bytes, in->row_bytes[i]);
    vr_tensor *t = &in->t[i];
    t->name = ti->name;
    t->dtype = ti->dtype;
    t->ndim = ti->ndim;
    memcpy(t->shape, ti->shape, sizeof t->shape);
    t->data = in->buf[i];
  }
  const vr_npy *csrc = calib ? calib : vs ? &vs->inputs : NULL;
  if (rc == 0 && csrc && csrc->shape[0] > 0 && init_calib(in, csrc, o))
    rc = vr_errf(err, VR_ENOMEM, "out of memory for calibration rows");
  if (rc != 0) vr_prof_inputs_free(in);
  return rc;
}

void vr_prof_inputs_free(vr_prof_inputs *in) {
  for (int i = 0; i < 4; i++) vr_aligned_free(in->buf[i]);
  vr_aligned_free(in->calib_buf);
  memset(in, 0, sizeof *in);
}

int vr_prof_open(const vr_model *m, const vr_prof_inputs *in, vr_precision p,
                 int threads, int max_batch, vr_session **out,
                 double *create_ms, int64_t *mem_bytes, vr_errbuf *err) {
  vr_session_opts so;
  vr_session_opts_init(&so);
  so.precision = p;
  so.threads = threads;
  so.max_batch = max_batch;
  if (p == VR_PREC_INT8) {
    if (!in->calib.data)
      return vr_errf(err, VR_EINVAL, "int8 needs calibration rows");
    so.calibration = &in->calib;
    so.n_calibration = 1;
  }
  int64_t t0 = vr_now_ns();
  int rc = vr_session_create(m, &so, out, err);
  if (rc != 0) return rc;
  *create_ms = (vr_now_ns() - t0) / 1e6;
  *mem_bytes = vr_session_memory_bytes(*out);
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Nearest-rank quantile of sorted samples. */
static double quantile(const double *s, int n, double q) {
  int k = (int)(q * n + 0.999999) - 1;
  if (k < 0) k = 0;
  if (k >= n) k = n - 1;
  return s[k];
}

static int run_batch(vr_session *s, const vr_prof_inputs *in, int b,
                     vr_errbuf *err) {
  vr_tensor x[4], y[16];
  for (int i = 0; i < in->n; i++) {
    x[i] = in->t[i];
    x[i].shape[0] = b;
    x[i].nbytes = (size_t)b * in->row_bytes[i];
  }
  int n_out = vr_session_num_outputs(s);
  if (n_out > 16) return vr_errf(err, VR_EUNSUPPORTED, "model has %d outputs", n_out);
  int rc = vr_session_run(s, b, x, in->n, y, n_out, err);
  /* the runtime would refuse to load the variant (it splits a batch into
   * requests by dim 0): registration refuses it first */
  return rc ? rc : vr_rt_check_batch_major(y, n_out, b, err);
}

int vr_prof_latency_sweep(vr_session *s, const vr_prof_inputs *in,
                          const vr_prof_opts *o, vr_latency *out,
                          vr_errbuf *err) {
  int runs = opt(o ? o->runs : 0, 20), warm = opt(o ? o->warmup : 0, 2);
  if (runs > MAX_SAMPLES) runs = MAX_SAMPLES;
  double budget = o && o->max_ms_per_batch > 0 ? o->max_ms_per_batch : 400;
  int gap_us = !o || o->gap_us == 0 ? 1000 : o->gap_us;
  double samples[MAX_SAMPLES];
  vr_latency_init(out);
  int maxb = vr_session_max_batch(s);
  for (int k = 0, b = 1; k < VR_PROF_NB && b <= maxb && b <= MAX_ROWS; k++, b *= 2) {
    for (int w = 0; w < warm; w++) {
      int rc = run_batch(s, in, b, err);
      if (rc != 0) return rc;
    }
    int n = 0;
    double spent = 0;
    /* At least 3 samples even for slow models, so p50 means something. */
    while (n < runs && (n < 3 || spent < budget)) {
      if (gap_us > 0) {
        struct timespec ts = {0, gap_us * 1000L};
        nanosleep(&ts, NULL);
      }
      int64_t t0 = vr_now_ns();
      int rc = run_batch(s, in, b, err);
      if (rc != 0) return rc;
      samples[n] = (vr_now_ns() - t0) / 1e6;
      spent += samples[n++];
    }
    qsort(samples, n, sizeof *samples, cmp_double);
    out->p50_ms[k] = quantile(samples, n, 0.5);
    out->p90_ms[k] = quantile(samples, n, 0.9);
    out->p99_ms[k] = quantile(samples, n, 0.99);
  }
  return 0;
}

/* Predicted class of row r of output y (scores [B, C] or ids [B]). */
static int64_t predicted(const vr_tensor *y, int r) {
  int64_t c = 1;
  for (int d = 1; d < y->ndim; d++) c *= y->shape[d];
  if (y->dtype == VR_DT_F32) return vr_argmax_f32((const float *)y->data + r * c, (int)c);
  if (y->dtype == VR_DT_I64 && c == 1) return ((const int64_t *)y->data)[r];
  if (y->dtype == VR_DT_I32 && c == 1) return ((const int32_t *)y->data)[r];
  return -1;
}

int vr_prof_accuracy(vr_session *s, const vr_valset *vs, double *acc,
                     vr_errbuf *err) {
  int maxb = vr_session_max_batch(s);
  const vr_tensor_info *ti = vr_session_input(s, 0);
  int64_t correct = 0;
  for (int64_t i = 0; i < vs->n; i += maxb) {
    int b = (int)(vs->n - i < maxb ? vs->n - i : maxb);
    vr_tensor x = {ti->name, ti->dtype, vs->inputs.ndim, {0}, NULL, 0};
    memcpy(x.shape, vs->inputs.shape, sizeof x.shape);
    x.shape[0] = b;
    x.data = (char *)vs->inputs.data + i * vs->row_bytes;
    x.nbytes = (size_t)b * vs->row_bytes;
    vr_tensor y[16];
    int n_out = vr_session_num_outputs(s);
    if (n_out > 16) return vr_errf(err, VR_EUNSUPPORTED, "model has %d outputs", n_out);
    int rc = vr_session_run(s, b, &x, 1, y, n_out, err);
    if (rc != 0) return vr_errctx(err, rc, "accuracy run");
    /* rows are read by dim 0 below: past the end of an output without it */
    if ((rc = vr_rt_check_batch_major(y, n_out, b, err))) return rc;
    if (predicted(&y[0], 0) < 0)
      return vr_errf(err, VR_EUNSUPPORTED,
                     "output '%s' is neither class scores nor class ids", y[0].name);
    for (int r = 0; r < b; r++) correct += predicted(&y[0], r) == vr_valset_label(vs, i + r);
  }
  *acc = (double)correct / (double)vs->n;
  return 0;
}
