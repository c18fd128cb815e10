/*
 * vario bench --engine DIR: the model of a repository directory run
 * in-process, closed loop at one batch size, through the same backend the
 * server's instances use. This is the "engine-only" side of the serving
 * benchmarks (saturation ratio, serving overhead).
 */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/hist.h"
#include "runtime/runtime.h"

int vr_cmd_bench_engine(const char *dir, int batch, double duration, int json);

int vr_cmd_bench_engine(const char *dir, int batch, double duration, int json) {
  const vr_rt_backend *be = vr_rt_backend_engine();
  vr_errbuf err = {0};
  vr_model_config c;
  void *model = NULL, *sess = NULL;
  vr_tensor in[VR_RT_MAX_IO], out[VR_RT_MAX_IO];
  memset(in, 0, sizeof in);
  vr_hist *h = vr_malloc(sizeof *h);
  int rc = !be ? vr_errf(&err, VR_EUNSUPPORTED, "engine not built in")
               : !h ? VR_ENOMEM : vr_model_config_load(dir, &c, &err);
  if (!rc) rc = be->model_open(be->self, &c, &model, &err);
  if (!rc) rc = be->session_open(be->self, model, c.precision, c.threads,
                                 batch, &sess, &err);
  for (int i = 0; !rc && i < c.n_inputs; i++) {
    in[i].name = c.inputs[i].name;
    in[i].dtype = c.inputs[i].dtype;
    in[i].ndim = c.inputs[i].ndim;
    memcpy(in[i].shape, c.inputs[i].shape, sizeof in[i].shape);
    in[i].shape[0] = batch;
    in[i].nbytes = (size_t)vr_tensor_info_row_bytes(&c.inputs[i]) * (size_t)batch;
    if (!(in[i].data = vr_aligned_alloc(64, in[i].nbytes))) rc = VR_ENOMEM;
    else memset(in[i].data, 0, in[i].nbytes);
  }
  uint64_t runs = 0;
  double secs = 0;
  if (!rc) {
    vr_hist_init(h);
    for (int w = 0; w < 3 && !rc; w++) /* warm-up */
      rc = be->run(be->self, sess, batch, in, c.n_inputs, out, VR_RT_MAX_IO, &err);
    int64_t t0 = vr_now_ns(), end = t0 + (int64_t)(duration * 1e9), t = t0;
    while (!rc && t < end) {
      rc = be->run(be->self, sess, batch, in, c.n_inputs, out, VR_RT_MAX_IO, &err);
      int64_t t1 = vr_now_ns();
      vr_hist_record(h, (uint64_t)(t1 - t));
      t = t1;
      runs++;
    }
    secs = (t - t0) / 1e9;
  }
  if (!rc) {
    double rows = runs * (double)batch / secs;
    if (json)
      printf("{\"model\":\"%s\",\"batch\":%d,\"runs\":%llu,\"rows_per_s\":%.1f,"
             "\"p50_us\":%.1f,\"p99_us\":%.1f}\n", c.name, batch,
             (unsigned long long)runs, rows, vr_hist_quantile(h, 0.5) / 1e3,
             vr_hist_quantile(h, 0.99) / 1e3);
    else
      printf("engine only: %s batch %d: %.1f rows/s, run p50 %.1f us, p99 %.1f us"
             " (%llu runs)\n", c.name, batch, rows,
             vr_hist_quantile(h, 0.5) / 1e3, vr_hist_quantile(h, 0.99) / 1e3,
             (unsigned long long)runs);
  } else {
    fprintf(stderr, "vario bench: %s\n", err.msg[0] ? err.msg : vr_strerror(rc));
  }
  for (int i = 0; i < VR_RT_MAX_IO; i++) vr_aligned_free(in[i].data);
  if (sess) be->session_close(be->self, sess);
  if (model) be->model_close(be->self, model);
  vr_free(h);
  return rc ? 1 : 0;
}
