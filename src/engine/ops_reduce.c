/* Reductions (ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd,
 * ReduceL1, ReduceL2, ReduceSumSquare) and ArgMax / ArgMin: shape
 * inference and reference kernels (constant folding, and the runtime where
 * oneDNN has no primitive for the shape). */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "engine/ops.h"

/* ---- reductions ----------------------------------------------------------- */

static int reduce_axes(const vr_node *n, const vr_tview *in, int *red,
                       vr_errbuf *err) {
  const int64_t *a;
  int k = vr_attr_ints(n, "axes", &a), r = in[0].ndim;
  int64_t tmp[VR_MAX_DIMS];
  if (k < 0 && n->nin > 1 && in[1].dt) {
    if (!in[1].data) return vr_bad(err, n, VR_EUNSUPPORTED, "input 'axes' must be a constant");
    /* as ONNX types it: a float's conversion was undefined past int64 */
    if (!vr_is_int(in[1].dt)) return vr_bad(err, n, VR_ETYPE, "input 'axes' must be integer");
    k = (int)vr_tview_numel(&in[1]);
    if (k > VR_MAX_DIMS) return vr_bad(err, n, VR_EINVAL, "too many axes");
    for (int i = 0; i < k; i++) tmp[i] = vr_tview_geti(&in[1], i);
    a = tmp;
  }
  for (int i = 0; i < r; i++) red[i] = k <= 0;
  /* axes left out count as empty (ONNX: an Identity then, not a full
   * reduction) */
  if (k <= 0 && vr_attr_i(n, "noop_with_empty_axes", 0))
    for (int i = 0; i < r; i++) red[i] = 0;
  for (int i = 0; i < k; i++) {
    int ax = vr_axis(a[i], r);
    if (ax < 0) return vr_bad(err, n, VR_EINVAL, "bad axis %lld", (long long)a[i]);
    red[ax] = 1;
  }
  return 0;
}

static int infer_reduce(const vr_node *n, const vr_tview *in, vr_tview *out,
                        vr_errbuf *err) {
  int red[VR_MAX_DIMS];
  if (!vr_is_float(in[0].dt) && !vr_is_int(in[0].dt))
    return vr_bad(err, n, VR_EUNSUPPORTED, "type %s", vr_dtype_name(in[0].dt));
  int rc = reduce_axes(n, in, red, err);
  if (rc) return rc;
  int keep = (int)vr_attr_i(n, "keepdims", 1);
  out[0].dt = in[0].dt;
  out[0].data = NULL;
  out[0].ndim = 0;
  for (int i = 0; i < in[0].ndim; i++) {
    if (!red[i]) out[0].shape[out[0].ndim++] = in[0].shape[i];
    else if (keep) out[0].shape[out[0].ndim++] = 1;
  }
  return 0;
}

static int eval_reduce(const vr_node *n, const vr_tview *in, vr_tview *out,
                       vr_errbuf *err) {
  int red[VR_MAX_DIMS], r = in[0].ndim;
  int rc = reduce_axes(n, in, red, err); /* checked at inference too */
  if (rc) return rc;
  const char *op = n->op + 6; /* after "Reduce" */
  int64_t cnt = vr_tview_numel(&out[0]), tot = vr_tview_numel(&in[0]);
  int64_t ost[VR_MAX_DIMS], s = 1, idx[VR_MAX_DIMS] = {0};
  for (int i = r - 1; i >= 0; i--) {
    ost[i] = red[i] ? 0 : s;
    if (!red[i]) s *= in[0].shape[i];
  }
  double init = !strcmp(op, "Max") ? -INFINITY : !strcmp(op, "Min") ? INFINITY
                : !strcmp(op, "Prod") ? 1 : 0;
  double *acc = vr_aligned_alloc(64, (size_t)(cnt ? cnt : 1) * sizeof(double));
  if (!acc) return vr_bad(err, n, VR_ENOMEM, "out of memory");
  for (int64_t i = 0; i < cnt; i++) acc[i] = init;
  int64_t o = 0;
  for (int64_t i = 0; i < tot; i++) {
    double v = vr_tview_getf(&in[0], i);
    switch (op[0]) {
      /* a NaN wins, as in ONNX's reference (numpy); fmax / fmin dropped it */
      case 'M': acc[o] = op[1] == 'a' ? (v > acc[o] || v != v ? v : acc[o])
                         : op[1] == 'i' ? (v < acc[o] || v != v ? v : acc[o]) : acc[o] + v; break;
      case 'P': acc[o] *= v; break;
      case 'L': acc[o] += op[1] == '1' ? fabs(v) : v * v; break; /* ReduceL1 / L2 */
      case 'S': acc[o] += op[3] == 'S' ? v * v : v; break;      /* Sum / SumSquare */
      default: acc[o] += v;
    }
    for (int d = r - 1; d >= 0; d--) {
      o += ost[d];
      if (++idx[d] < in[0].shape[d]) break;
      o -= ost[d] * in[0].shape[d];
      idx[d] = 0;
    }
  }
  double per = cnt ? (double)tot / (double)cnt : 1;
  for (int64_t i = 0; i < cnt; i++) {
    double v = acc[i];
    if (!strcmp(op, "Mean")) v /= per;
    else if (!strcmp(op, "L2")) v = sqrt(v);
    vr_tview_setf(&out[0], i, v);
  }
  vr_aligned_free(acc);
  return 0;
}

/* ---- ArgMax / ArgMin ------------------------------------------------------ */

static int infer_arg(const vr_node *n, const vr_tview *in, vr_tview *out,
                     vr_errbuf *err) {
  int ax = vr_axis(vr_attr_i(n, "axis", 0), in[0].ndim);
  if (ax < 0) return vr_bad(err, n, VR_EINVAL, "bad axis");
  if (!vr_is_float(in[0].dt) && !vr_is_int(in[0].dt))
    return vr_bad(err, n, VR_EUNSUPPORTED, "type %s", vr_dtype_name(in[0].dt));
  out[0] = in[0];
  out[0].data = NULL;
  out[0].dt = VR_DT_I64;
  if (vr_attr_i(n, "keepdims", 1)) {
    out[0].shape[ax] = 1;
  } else {
    for (int i = ax; i < in[0].ndim - 1; i++) out[0].shape[i] = in[0].shape[i + 1];
    out[0].ndim--;
  }
  return 0;
}

static int eval_arg(const vr_node *n, const vr_tview *in, vr_tview *out,
                    vr_errbuf *err) {
  int ax = vr_axis(vr_attr_i(n, "axis", 0), in[0].ndim);
  int mx = !strcmp(n->op, "ArgMax"), last = (int)vr_attr_i(n, "select_last_index", 0);
  int64_t outer = vr_numel(ax, in[0].shape), len = in[0].shape[ax];
  int64_t inner = vr_numel(in[0].ndim - ax - 1, in[0].shape + ax + 1);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t best = 0;
      double bv = len ? vr_tview_getf(&in[0], o * len * inner + i) : 0;
      for (int64_t j = 1; j < len; j++) {
        double v = vr_tview_getf(&in[0], (o * len + j) * inner + i);
        if (mx ? (v > bv || (last && v == bv)) : (v < bv || (last && v == bv))) {
          bv = v;
          best = j;
        }
      }
      ((int64_t *)out[0].data)[o * inner + i] = best;
    }
  return 0;
}

#define RED(name) {name, infer_reduce, eval_reduce, vr_flops_in, 1, 2, 0}

const vr_op vr_ops_reduce[] = {
    {"ArgMax", infer_arg, eval_arg, vr_flops_in, 1, 1, 0},
    {"ArgMin", infer_arg, eval_arg, vr_flops_in, 1, 1, 0},
    RED("ReduceMean"), RED("ReduceSum"), RED("ReduceMax"), RED("ReduceMin"),
    RED("ReduceProd"), RED("ReduceL1"), RED("ReduceL2"), RED("ReduceSumSquare"),
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};
