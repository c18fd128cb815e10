/* What the model harnesses (fuzz_onnx, fuzz_modelpack) share: zero inputs
 * for a batch-1 session and the size of a model's largest tensor.
 * Header-only (each harness is its own executable). */
#ifndef VR_FUZZ_MODEL_H
#define VR_FUZZ_MODEL_H

#include "base/alloc.h"
#include "engine/graph.h"
#include "vario/engine.h"

#define VR_FZ_MAX_IN 16
#define VR_FZ_MAX_INPUT_BYTES (1 << 20) /* keep each input fast */

/* Zero-filled batch-1 inputs of s in in[] (buffers in bufs[], which the
 * caller frees with vr_free; all VR_FZ_MAX_IN slots are set). The input
 * count, or -1 when there are too many or one is too large. */
static inline int vr_fz_zero_inputs(const vr_session *s, vr_tensor *in, void **bufs) {
  int n = vr_session_num_inputs(s);
  for (int i = 0; i < VR_FZ_MAX_IN; i++) bufs[i] = NULL;
  if (n > VR_FZ_MAX_IN) return -1;
  for (int i = 0; i < n; i++) {
    const vr_tensor_info *ti = vr_session_input(s, i);
    int64_t cnt = 1;
    in[i] = (vr_tensor){ti->name, ti->dtype, ti->ndim, {0}, NULL, 0};
    for (int d = 0; d < ti->ndim; d++) {
      in[i].shape[d] = ti->shape[d] < 0 ? 1 : ti->shape[d];
      cnt *= in[i].shape[d];
    }
    in[i].nbytes = (size_t)cnt * vr_dtype_size(ti->dtype);
    if (in[i].nbytes > VR_FZ_MAX_INPUT_BYTES || !(bufs[i] = vr_calloc(1, in[i].nbytes + 1)))
      return -1;
    in[i].data = bufs[i];
  }
  return n;
}

/* A default (fp32, batch 1) session on m with zero inputs (as
 * vr_fz_zero_inputs; *n -1 when they could not be made), or NULL when m
 * takes no session. The caller frees bufs[] and the session. */
static inline vr_session *vr_fz_session(const vr_model *m, vr_tensor *in, void **bufs, int *n) {
  vr_session_opts o;
  vr_session_opts_init(&o);
  vr_session *s = NULL;
  vr_errbuf e;
  if (vr_session_create(m, &o, &s, &e)) return NULL;
  *n = vr_fz_zero_inputs(s, in, bufs);
  return s;
}

/* Largest tensor of the model at batch 1, in bytes (arena sizing). */
static inline int64_t vr_fz_largest_tensor(const vr_model *m) {
  int64_t mx = 0;
  for (int i = 0; i < m->g.nvals; i++) {
    const vr_val *v = &m->g.vals[i];
    int64_t b = vr_numel(v->ndim, v->shape) * (int64_t)vr_dtype_size(v->dtype);
    if (b > mx) mx = b;
  }
  return mx;
}

#endif
