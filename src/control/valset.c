#include "control/valset.h"

#include <string.h>

static int is_integer(vr_dtype dt) {
  switch (dt) {
    case VR_DT_I8: case VR_DT_U8: case VR_DT_I16: case VR_DT_U16:
    case VR_DT_I32: case VR_DT_U32: case VR_DT_I64: case VR_DT_U64:
      return 1;
    default:
      return 0;
  }
}

static int check(const vr_valset *v, const char *ip, const char *lp,
                 vr_errbuf *err) {
  const vr_npy *x = &v->inputs, *y = &v->labels;
  if (x->ndim < 1 || x->shape[0] == 0)
    return vr_errf(err, VR_EINVAL, "validation inputs '%s' are empty", ip);
  if (x->dtype != VR_DT_F32)
    return vr_errf(err, VR_ETYPE, "validation inputs '%s' are %s, expected float32",
                   ip, vr_dtype_name(x->dtype));
  if (!is_integer(y->dtype))
    return vr_errf(err, VR_ETYPE,
                   "validation labels '%s' are %s, expected an integer type", lp,
                   vr_dtype_name(y->dtype));
  int flat = y->ndim == 1 || (y->ndim == 2 && y->shape[1] == 1);
  if (!flat)
    return vr_errf(err, VR_ESHAPE, "validation labels '%s' must be N or N x 1", lp);
  if (y->shape[0] != x->shape[0])
    return vr_errf(err, VR_ESHAPE,
                   "%lld validation labels for %lld input rows ('%s' vs '%s')",
                   (long long)y->shape[0], (long long)x->shape[0], lp, ip);
  for (int64_t i = 0; i < v->n; i++)
    if (vr_valset_label(v, i) < 0)
      return vr_errf(err, VR_ERANGE, "validation label %lld is negative", (long long)i);
  return 0;
}

int vr_valset_load(const char *inputs_path, const char *labels_path,
                   vr_valset *out, vr_errbuf *err) {
  memset(out, 0, sizeof *out);
  int rc = vr_npy_read(inputs_path, &out->inputs, err);
  if (rc != 0) return vr_errctx(err, rc, "validation inputs");
  rc = vr_npy_read(labels_path, &out->labels, err);
  if (rc != 0) {
    vr_valset_free(out);
    return vr_errctx(err, rc, "validation labels");
  }
  out->n = out->inputs.ndim >= 1 ? out->inputs.shape[0] : 0;
  out->row_bytes = out->n > 0 ? out->inputs.nbytes / (size_t)out->n : 0;
  rc = check(out, inputs_path, labels_path, err);
  if (rc != 0) vr_valset_free(out);
  return rc;
}

void vr_valset_free(vr_valset *v) {
  vr_npy_free(&v->inputs);
  vr_npy_free(&v->labels);
  memset(v, 0, sizeof *v);
}

int64_t vr_valset_label(const vr_valset *v, int64_t i) {
  const void *d = v->labels.data;
  switch (v->labels.dtype) {
    case VR_DT_I8: return ((const int8_t *)d)[i];
    case VR_DT_U8: return ((const uint8_t *)d)[i];
    case VR_DT_I16: return ((const int16_t *)d)[i];
    case VR_DT_U16: return ((const uint16_t *)d)[i];
    case VR_DT_I32: return ((const int32_t *)d)[i];
    case VR_DT_U32: return ((const uint32_t *)d)[i];
    case VR_DT_I64: return ((const int64_t *)d)[i];
    /* u64 labels beyond int64 range are absurd; they read as negative
     * and are rejected by check(). */
    case VR_DT_U64: return (int64_t)((const uint64_t *)d)[i];
    default: return -1;
  }
}

int vr_argmax_f32(const float *x, int n) {
  int best = n > 0 ? 0 : -1;
  for (int i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}
