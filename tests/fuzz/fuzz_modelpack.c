/* libFuzzer harness for model packs (vr_model_unpack, engine/pack.c: what
 * an AsyFunc shadow process reads from its body): unpack arbitrary bytes;
 * if a model comes out and is small, open a batch-1 session and run it
 * once on zeros, so that a pack the checks let through is one the planner
 * and kernels can take. Seeds: packs of tests/data/engine models, whole
 * or a node range, written by
 *   vario shadow --model tests/data/engine/NAME.onnx --range B:E --pack-out NAME.pack
 * (tiny_cnn 0:9 and 3:7, alias_branch 0:4, avgpool_ceil 0:1, act_nan 0:9,
 * tiny_tf 0:23, gemm_alpha0_relu 0:2). A pack is in native byte order and
 * carries the build's limits: regenerate them after a format change. */
#include <stdint.h>
#include <stddef.h>

#include "base/alloc.h"
#include "engine/graph.h"
#include "vario/engine.h"

static void run_once(const vr_model *m) {
  vr_session_opts o;
  vr_session_opts_init(&o);
  vr_session *s = NULL;
  vr_errbuf e;
  if (vr_session_create(m, &o, &s, &e)) return;
  int n = vr_session_num_inputs(s), ok = n <= 16;
  vr_tensor in[16], out[64];
  void *bufs[16] = {0};
  for (int i = 0; ok && i < n; i++) {
    const vr_tensor_info *ti = vr_session_input(s, i);
    int64_t cnt = 1;
    in[i] = (vr_tensor){ti->name, ti->dtype, ti->ndim, {0}, NULL, 0};
    for (int d = 0; d < ti->ndim; d++) {
      in[i].shape[d] = ti->shape[d] < 0 ? 1 : ti->shape[d];
      cnt *= in[i].shape[d];
    }
    in[i].nbytes = (size_t)cnt * vr_dtype_size(ti->dtype);
    if (in[i].nbytes > (1 << 20) || !(bufs[i] = vr_calloc(1, in[i].nbytes + 1))) ok = 0;
    in[i].data = bufs[i];
  }
  if (ok) vr_session_run(s, 1, in, n, out, 64, &e);
  for (int i = 0; i < 16; i++) vr_free(bufs[i]);
  vr_session_free(s);
}

/* Largest tensor of the model at batch 1, in bytes (arena sizing). */
static int64_t largest_tensor(const vr_model *m) {
  int64_t mx = 0;
  for (int i = 0; i < m->g.nvals; i++) {
    const vr_val *v = &m->g.vals[i];
    int64_t b = vr_numel(v->ndim, v->shape) * (int64_t)vr_dtype_size(v->dtype);
    if (b > mx) mx = b;
  }
  return mx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vr_model *m = NULL;
  vr_errbuf e;
  if (vr_model_unpack(data, size, &m, &e) == 0) {
    if (vr_model_flops(m) < 2000000 && vr_model_weight_bytes(m) < (8 << 20) &&
        largest_tensor(m) < (16 << 20))
      run_once(m);
    vr_model_free(m);
  }
  return 0;
}
