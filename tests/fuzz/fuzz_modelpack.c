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

#include "fuzz_model.h"

static void run_once(const vr_model *m) {
  vr_tensor in[VR_FZ_MAX_IN], out[64];
  void *bufs[VR_FZ_MAX_IN];
  vr_errbuf e;
  int n;
  vr_session *s = vr_fz_session(m, in, bufs, &n);
  if (!s) return;
  if (n >= 0) vr_session_run(s, 1, in, n, out, 64, &e);
  for (int i = 0; i < VR_FZ_MAX_IN; i++) vr_free(bufs[i]);
  vr_session_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vr_model *m = NULL;
  vr_errbuf e;
  if (vr_model_unpack(data, size, &m, &e) == 0) {
    if (vr_model_flops(m) < 2000000 && vr_model_weight_bytes(m) < (8 << 20) &&
        vr_fz_largest_tensor(m) < (16 << 20))
      run_once(m);
    vr_model_free(m);
  }
  return 0;
}
