/* Data-movement ops: Shape, Reshape, Flatten, (Un)Squeeze, Transpose,
 * Concat, Split, Slice, Gather, Expand, Tile, Pad, ConstantOfShape, Range,
 * Dropout. Shape-like inputs (Reshape's shape, Slice's starts...) must be
 * constants after folding: the engine plans static shapes per batch size. */
#include <math.h>
#include <string.h>

#include "engine/ops.h"

static size_t esz(const vr_tview *t) { return vr_dtype_size(t->dt); }

static int need_const(const vr_node *n, const vr_tview *in, int i,
                      const char *what, vr_errbuf *err) {
  if (i >= n->nin || !in[i].dt) return 0;
  if (!in[i].data)
    return vr_bad(err, n, VR_EUNSUPPORTED, "input '%s' must be a constant "
                  "(computed from shapes only)", what);
  if (!vr_is_int(in[i].dt))
    return vr_bad(err, n, VR_ETYPE, "input '%s' must be integer", what);
  return 0;
}

/* ---- Shape / Size --------------------------------------------------------- */

static void shape_range(const vr_node *n, int rank, int *s, int *e) {
  int64_t a = vr_attr_i(n, "start", 0), b = vr_attr_i(n, "end", rank);
  if (a < 0) a += rank;
  if (b < 0) b += rank;
  *s = a < 0 ? 0 : a > rank ? rank : (int)a;
  *e = b < 0 ? 0 : b > rank ? rank : (int)b;
  if (*e < *s) *e = *s;
}

static int infer_shape(const vr_node *n, const vr_tview *in, vr_tview *out,
                       vr_errbuf *err) {
  int s, e;
  shape_range(n, in[0].ndim, &s, &e);
  out[0].dt = VR_DT_I64;
  out[0].ndim = 1;
  out[0].shape[0] = e - s;
  return 0;
}

static int eval_shape(const vr_node *n, const vr_tview *in, vr_tview *out,
                      vr_errbuf *err) {
  int s, e;
  shape_range(n, in[0].ndim, &s, &e);
  for (int i = s; i < e; i++) ((int64_t *)out[0].data)[i - s] = in[0].shape[i];
  return 0;
}

static int infer_size(const vr_node *n, const vr_tview *in, vr_tview *out,
                      vr_errbuf *err) {
  out[0].dt = VR_DT_I64;
  out[0].ndim = 0;
  return 0;
}

static int eval_size(const vr_node *n, const vr_tview *in, vr_tview *out,
                     vr_errbuf *err) {
  *(int64_t *)out[0].data = vr_tview_numel(&in[0]);
  return 0;
}

/* ---- pure reshapes: data is copied unchanged ------------------------------ */

static int eval_copy(const vr_node *n, const vr_tview *in, vr_tview *out,
                     vr_errbuf *err) {
  if (out[0].data != in[0].data)
    memcpy(out[0].data, in[0].data, (size_t)vr_tview_numel(&in[0]) * esz(&in[0]));
  return 0;
}

static int infer_reshape(const vr_node *n, const vr_tview *in, vr_tview *out,
                         vr_errbuf *err) {
  int rc = need_const(n, in, 1, "shape", err);
  if (rc) return rc;
  if (n->nin < 2 || !in[1].dt) return vr_bad(err, n, VR_EINVAL, "missing shape input");
  int64_t k = vr_tview_numel(&in[1]);
  if (in[1].ndim != 1 || k > VR_MAX_DIMS)
    return vr_bad(err, n, VR_EUNSUPPORTED, "shape must be 1-D with <= %d "
                  "entries", VR_MAX_DIMS);
  int allowzero = (int)vr_attr_i(n, "allowzero", 0), neg = -1;
  int64_t prod = 1, total = vr_tview_numel(&in[0]);
  out[0] = in[0];
  out[0].data = NULL;
  out[0].ndim = (int)k;
  for (int i = 0; i < k; i++) {
    int64_t d = vr_tview_geti(&in[1], i);
    if (d == 0 && !allowzero) {
      if (i >= in[0].ndim) return vr_bad(err, n, VR_ESHAPE, "0 dim beyond input rank");
      d = in[0].shape[i];
    }
    if (d == -1) {
      if (neg >= 0) return vr_bad(err, n, VR_ESHAPE, "more than one -1 in shape");
      neg = i;
      d = 1;
    } else if (d < 0) {
      return vr_bad(err, n, VR_ESHAPE, "negative dim %lld", (long long)d);
    }
    out[0].shape[i] = d;
    if (d && prod > VR_MAX_TENSOR_ELEMS / d) return vr_bad(err, n, VR_ELIMIT, "shape too large");
    prod *= d;
  }
  if (neg >= 0) {
    if (prod == 0 || total % prod)
      return vr_bad(err, n, VR_ESHAPE, "cannot infer -1 dim (%lld elements)",
                    (long long)total);
    out[0].shape[neg] = total / prod;
  } else if (prod != total) {
    return vr_bad(err, n, VR_ESHAPE, "shape has %lld elements, input %lld",
                  (long long)prod, (long long)total);
  }
  return 0;
}

static int infer_flatten(const vr_node *n, const vr_tview *in, vr_tview *out,
                         vr_errbuf *err) {
  int64_t ax = vr_attr_i(n, "axis", 1);
  if (ax < 0) ax += in[0].ndim;
  if (ax < 0 || ax > in[0].ndim) return vr_bad(err, n, VR_EINVAL, "bad axis");
  out[0] = in[0];
  out[0].data = NULL;
  out[0].ndim = 2;
  out[0].shape[0] = vr_numel((int)ax, in[0].shape);
  out[0].shape[1] = vr_numel(in[0].ndim - (int)ax, in[0].shape + ax);
  return 0;
}

/* Axes from attribute (old opsets) or a constant second input. */
static int get_axes(const vr_node *n, const vr_tview *in, int64_t *axes,
                    int *cnt, vr_errbuf *err) {
  const int64_t *a;
  int k = vr_attr_ints(n, "axes", &a);
  if (k >= 0) {
    if (k > VR_MAX_DIMS) return vr_bad(err, n, VR_EINVAL, "too many axes");
    memcpy(axes, a, sizeof(int64_t) * k);
    *cnt = k;
    return 0;
  }
  *cnt = 0;
  if (n->nin < 2 || !in[1].dt) return 0;
  int rc = need_const(n, in, 1, "axes", err);
  if (rc) return rc;
  int64_t m = vr_tview_numel(&in[1]);
  if (m > VR_MAX_DIMS) return vr_bad(err, n, VR_EINVAL, "too many axes");
  for (int i = 0; i < m; i++) axes[i] = vr_tview_geti(&in[1], i);
  *cnt = (int)m;
  return 0;
}

static int infer_squeeze(const vr_node *n, const vr_tview *in, vr_tview *out,
                         vr_errbuf *err) {
  int64_t axes[VR_MAX_DIMS];
  int k, rc = get_axes(n, in, axes, &k, err), drop[VR_MAX_DIMS] = {0};
  if (rc) return rc;
  for (int i = 0; i < k; i++) {
    int a = vr_axis(axes[i], in[0].ndim);
    if (a < 0 || in[0].shape[a] != 1)
      return vr_bad(err, n, VR_ESHAPE, "axis %lld is not a size-1 dim",
                    (long long)axes[i]);
    drop[a] = 1;
  }
  out[0] = in[0];
  out[0].data = NULL;
  out[0].ndim = 0;
  for (int i = 0; i < in[0].ndim; i++)
    if (k ? !drop[i] : in[0].shape[i] != 1)
      out[0].shape[out[0].ndim++] = in[0].shape[i];
  return 0;
}

static int infer_unsqueeze(const vr_node *n, const vr_tview *in, vr_tview *out,
                           vr_errbuf *err) {
  int64_t axes[VR_MAX_DIMS];
  int k, rc = get_axes(n, in, axes, &k, err), ins[VR_MAX_DIMS] = {0};
  if (rc) return rc;
  int r = in[0].ndim + k;
  if (!k || r > VR_MAX_DIMS) return vr_bad(err, n, VR_EINVAL, "bad axes");
  for (int i = 0; i < k; i++) {
    int a = vr_axis(axes[i], r);
    if (a < 0 || ins[a]) return vr_bad(err, n, VR_EINVAL, "bad axis %lld",
                                       (long long)axes[i]);
    ins[a] = 1;
  }
  out[0] = in[0];
  out[0].data = NULL;
  out[0].ndim = r;
  for (int i = 0, j = 0; i < r; i++) out[0].shape[i] = ins[i] ? 1 : in[0].shape[j++];
  return 0;
}

/* ---- Transpose ------------------------------------------------------------ */

static void perm_of(const vr_node *n, int rank, int *perm) {
  const int64_t *p;
  int k = vr_attr_ints(n, "perm", &p);
  for (int i = 0; i < rank; i++) perm[i] = k == rank ? (int)p[i] : rank - 1 - i;
}

static int infer_transpose(const vr_node *n, const vr_tview *in, vr_tview *out,
                           vr_errbuf *err) {
  int r = in[0].ndim, perm[VR_MAX_DIMS], seen[VR_MAX_DIMS] = {0};
  const int64_t *p;
  int k = vr_attr_ints(n, "perm", &p);
  if (k >= 0 && k != r) return vr_bad(err, n, VR_EINVAL, "perm has %d entries for rank %d", k, r);
  perm_of(n, r, perm);
  out[0] = in[0];
  out[0].data = NULL;
  for (int i = 0; i < r; i++) {
    if (perm[i] < 0 || perm[i] >= r || seen[perm[i]]++)
      return vr_bad(err, n, VR_EINVAL, "perm is not a permutation");
    out[0].shape[i] = in[0].shape[perm[i]];
  }
  return 0;
}

static int eval_transpose(const vr_node *n, const vr_tview *in, vr_tview *out,
                          vr_errbuf *err) {
  int r = in[0].ndim, perm[VR_MAX_DIMS];
  perm_of(n, r, perm);
  int64_t ist[VR_MAX_DIMS], st[VR_MAX_DIMS], idx[VR_MAX_DIMS] = {0}, s = 1;
  for (int i = r - 1; i >= 0; i--) {
    ist[i] = s;
    s *= in[0].shape[i];
  }
  for (int i = 0; i < r; i++) st[i] = ist[perm[i]];
  size_t e = esz(&in[0]);
  int64_t cnt = vr_tview_numel(&out[0]), off = 0;
  for (int64_t i = 0; i < cnt; i++) {
    if (e == 4) ((uint32_t *)out[0].data)[i] = ((const uint32_t *)in[0].data)[off];
    else memcpy((char *)out[0].data + i * e, (const char *)in[0].data + off * e, e);
    for (int d = r - 1; d >= 0; d--) {
      off += st[d];
      if (++idx[d] < out[0].shape[d]) break;
      off -= st[d] * out[0].shape[d];
      idx[d] = 0;
    }
  }
  return 0;
}

/* ---- Concat / Split ------------------------------------------------------- */

static int infer_concat(const vr_node *n, const vr_tview *in, vr_tview *out,
                        vr_errbuf *err) {
  if (!in[0].dt) return vr_bad(err, n, VR_EINVAL, "missing input");
  int r = in[0].ndim, ax = vr_axis(vr_attr_i(n, "axis", 0), r);
  if (ax < 0) return vr_bad(err, n, VR_EINVAL, "bad axis");
  out[0] = in[0];
  out[0].data = NULL;
  out[0].shape[ax] = 0;
  for (int i = 0; i < n->nin; i++) {
    if (in[i].dt != in[0].dt || in[i].ndim != r)
      return vr_bad(err, n, VR_ESHAPE, "input %d type/rank differs", i);
    for (int d = 0; d < r; d++)
      if (d != ax && in[i].shape[d] != in[0].shape[d])
        return vr_bad(err, n, VR_ESHAPE, "input %d dim %d differs", i, d);
    out[0].shape[ax] += in[i].shape[ax];
  }
  return 0;
}

static int eval_concat(const vr_node *n, const vr_tview *in, vr_tview *out,
                       vr_errbuf *err) {
  int r = in[0].ndim, ax = vr_axis(vr_attr_i(n, "axis", 0), r);
  int64_t outer = vr_numel(ax, out[0].shape);
  int64_t inner = vr_numel(r - ax - 1, out[0].shape + ax + 1) * (int64_t)esz(&out[0]);
  char *dst = out[0].data;
  for (int64_t o = 0; o < outer; o++)
    for (int i = 0; i < n->nin; i++) {
      size_t b = (size_t)(in[i].shape[ax] * inner);
      memcpy(dst, (const char *)in[i].data + o * b, b);
      dst += b;
    }
  return 0;
}

static int split_sizes(const vr_node *n, const vr_tview *in, int ax,
                       int64_t *sz, vr_errbuf *err) {
  const int64_t *a;
  int k = vr_attr_ints(n, "split", &a);
  int64_t total = in[0].shape[ax], sum = 0;
  if (k < 0 && n->nin > 1 && in[1].dt) {
    int rc = need_const(n, in, 1, "split", err);
    if (rc) return rc;
    k = (int)vr_tview_numel(&in[1]);
    if (k != n->nout) return vr_bad(err, n, VR_EINVAL, "split count != outputs");
    for (int i = 0; i < k; i++) sz[i] = vr_tview_geti(&in[1], i);
  } else if (k >= 0) {
    if (k != n->nout) return vr_bad(err, n, VR_EINVAL, "split count != outputs");
    memcpy(sz, a, sizeof(int64_t) * k);
  } else {
    int64_t per = (total + n->nout - 1) / n->nout;
    for (int i = 0; i < n->nout; i++) {
      sz[i] = total - sum < per ? total - sum : per;
      sum += sz[i];
    }
    return 0;
  }
  for (int i = 0; i < n->nout; i++) {
    if (sz[i] < 0) return vr_bad(err, n, VR_EINVAL, "negative split");
    /* before the sum: absurd sizes wrapped it (UBSan), even to the dim */
    if (sz[i] > total)
      return vr_bad(err, n, VR_ESHAPE, "split %lld larger than the dim (%lld)",
                    (long long)sz[i], (long long)total);
    sum += sz[i];
  }
  if (sum != total) return vr_bad(err, n, VR_ESHAPE, "splits sum to %lld, dim is %lld",
                                  (long long)sum, (long long)total);
  return 0;
}

static int infer_split(const vr_node *n, const vr_tview *in, vr_tview *out,
                       vr_errbuf *err) {
  int ax = vr_axis(vr_attr_i(n, "axis", 0), in[0].ndim);
  if (ax < 0 || n->nout < 1 || n->nout > 4096) return vr_bad(err, n, VR_EINVAL, "bad axis or outputs");
  int64_t sz[4096];
  int rc = split_sizes(n, in, ax, sz, err);
  if (rc) return rc;
  for (int i = 0; i < n->nout; i++) {
    out[i] = in[0];
    out[i].data = NULL;
    out[i].shape[ax] = sz[i];
  }
  return 0;
}

static int eval_split(const vr_node *n, const vr_tview *in, vr_tview *out,
                      vr_errbuf *err) {
  int r = in[0].ndim, ax = vr_axis(vr_attr_i(n, "axis", 0), r);
  int64_t outer = vr_numel(ax, in[0].shape);
  int64_t inner = vr_numel(r - ax - 1, in[0].shape + ax + 1) * (int64_t)esz(&in[0]);
  const char *src = in[0].data;
  for (int64_t o = 0; o < outer; o++)
    for (int i = 0; i < n->nout; i++) {
      size_t b = (size_t)(out[i].shape[ax] * inner);
      if (out[i].data) memcpy((char *)out[i].data + o * b, src, b);
      src += b;
    }
  return 0;
}

/* ---- Slice ---------------------------------------------------------------- */

typedef struct slice_p {
  int64_t start[VR_MAX_DIMS], step[VR_MAX_DIMS];
} slice_p;

static int slice_params(const vr_node *n, const vr_tview *in, vr_tview *o,
                        slice_p *p, vr_errbuf *err) {
  int r = in[0].ndim;
  int64_t st[VR_MAX_DIMS], en[VR_MAX_DIMS], ax[VR_MAX_DIMS], sp[VR_MAX_DIMS];
  int k;
  const int64_t *a;
  if ((k = vr_attr_ints(n, "starts", &a)) >= 0) { /* opset < 10 */
    const int64_t *e, *x;
    if (k > r || vr_attr_ints(n, "ends", &e) != k) return vr_bad(err, n, VR_EINVAL, "starts/ends");
    int kx = vr_attr_ints(n, "axes", &x);
    for (int i = 0; i < k; i++) {
      st[i] = a[i]; en[i] = e[i]; sp[i] = 1;
      ax[i] = kx == k ? x[i] : i;
    }
  } else {
    for (int i = 1; i < n->nin; i++) {
      int rc = need_const(n, in, i, i == 1 ? "starts" : i == 2 ? "ends" : i == 3 ? "axes" : "steps", err);
      if (rc) return rc;
    }
    if (n->nin < 3) return vr_bad(err, n, VR_EINVAL, "needs starts and ends");
    k = (int)vr_tview_numel(&in[1]);
    if (k > r || vr_tview_numel(&in[2]) != k) return vr_bad(err, n, VR_EINVAL, "starts/ends length");
    for (int i = 0; i < k; i++) {
      st[i] = vr_tview_geti(&in[1], i);
      en[i] = vr_tview_geti(&in[2], i);
      ax[i] = n->nin > 3 && in[3].dt ? vr_tview_geti(&in[3], i) : i;
      sp[i] = n->nin > 4 && in[4].dt ? vr_tview_geti(&in[4], i) : 1;
    }
    if ((n->nin > 3 && in[3].dt && vr_tview_numel(&in[3]) != k) ||
        (n->nin > 4 && in[4].dt && vr_tview_numel(&in[4]) != k))
      return vr_bad(err, n, VR_EINVAL, "axes/steps length");
  }
  *o = in[0];
  o->data = NULL;
  for (int d = 0; d < r; d++) { p->start[d] = 0; p->step[d] = 1; }
  int seen[VR_MAX_DIMS] = {0};
  for (int i = 0; i < k; i++) {
    int d = vr_axis(ax[i], r);
    if (d < 0 || seen[d]++) return vr_bad(err, n, VR_EINVAL, "bad axis");
    if (sp[i] == 0) return vr_bad(err, n, VR_EINVAL, "step 0");
    int64_t dim = in[0].shape[d], s = st[i], e = en[i], step = sp[i];
    /* A step beyond the dim takes at most one element, as a step of the
     * dim itself does: clamped, (e - s + step - 1) and the kernel's
     * step * stride cannot overflow (a step of INT64_MAX or INT64_MIN
     * gave an empty or wrong slice). */
    if (step > dim) step = dim > 0 ? dim : 1;
    if (step < -dim) step = dim > 0 ? -dim : -1;
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      s = s < 0 ? 0 : s > dim ? dim : s;
      e = e < 0 ? 0 : e > dim ? dim : e;
      o->shape[d] = e > s ? (e - s + step - 1) / step : 0;
    } else {
      /* ONNX clamps the start into [0, dim - 1] (a start before the
       * first element still takes it), -1 for an empty dim */
      s = s < 0 ? 0 : s;
      if (s > dim - 1) s = dim - 1;
      e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
      o->shape[d] = s > e ? (s - e + (-step) - 1) / (-step) : 0;
    }
    p->start[d] = s;
    p->step[d] = step;
  }
  return 0;
}

static int infer_slice(const vr_node *n, const vr_tview *in, vr_tview *out,
                       vr_errbuf *err) {
  slice_p p;
  return slice_params(n, in, &out[0], &p, err);
}

static int eval_slice(const vr_node *n, const vr_tview *in, vr_tview *out,
                      vr_errbuf *err) {
  slice_p p;
  vr_tview o;
  int rc = slice_params(n, in, &o, &p, err);
  if (rc) return rc;
  int r = in[0].ndim;
  int64_t ist[VR_MAX_DIMS], s = 1, idx[VR_MAX_DIMS] = {0}, off = 0;
  for (int i = r - 1; i >= 0; i--) {
    ist[i] = s;
    s *= in[0].shape[i];
  }
  for (int d = 0; d < r; d++) off += p.start[d] * ist[d];
  size_t e = esz(&in[0]);
  int64_t cnt = vr_tview_numel(&out[0]);
  /* Unit step on the last dim: copy whole rows. */
  int64_t run = r > 0 && p.step[r - 1] == 1 ? out[0].shape[r - 1] : 1;
  int top = run > 1 ? r - 2 : r - 1;
  for (int64_t i = 0; i < cnt; i += run) {
    memcpy((char *)out[0].data + i * e, (const char *)in[0].data + off * e, e * (size_t)run);
    for (int d = top; d >= 0; d--) {
      off += p.step[d] * ist[d];
      if (++idx[d] < out[0].shape[d]) break;
      off -= p.step[d] * ist[d] * out[0].shape[d];
      idx[d] = 0;
    }
  }
  return 0;
}

/* ---- Gather (axis) -------------------------------------------------------- */

static int infer_gather(const vr_node *n, const vr_tview *in, vr_tview *out,
                        vr_errbuf *err) {
  int r = in[0].ndim, ax = vr_axis(vr_attr_i(n, "axis", 0), r);
  if (ax < 0) return vr_bad(err, n, VR_EINVAL, "bad axis");
  if (!vr_is_int(in[1].dt)) return vr_bad(err, n, VR_ETYPE, "indices must be integer");
  if (r - 1 + in[1].ndim > VR_MAX_DIMS) return vr_bad(err, n, VR_EUNSUPPORTED, "rank too high");
  out[0].dt = in[0].dt;
  out[0].data = NULL;
  out[0].ndim = 0;
  for (int i = 0; i < ax; i++) out[0].shape[out[0].ndim++] = in[0].shape[i];
  for (int i = 0; i < in[1].ndim; i++) out[0].shape[out[0].ndim++] = in[1].shape[i];
  for (int i = ax + 1; i < r; i++) out[0].shape[out[0].ndim++] = in[0].shape[i];
  return 0;
}

static int eval_gather(const vr_node *n, const vr_tview *in, vr_tview *out,
                       vr_errbuf *err) {
  int r = in[0].ndim, ax = vr_axis(vr_attr_i(n, "axis", 0), r);
  int64_t outer = vr_numel(ax, in[0].shape), dim = in[0].shape[ax];
  size_t inner = (size_t)vr_numel(r - ax - 1, in[0].shape + ax + 1) * esz(&in[0]);
  int64_t ni = vr_tview_numel(&in[1]);
  char *dst = out[0].data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < ni; j++) {
      int64_t k = vr_tview_geti(&in[1], j);
      if (k < 0) k += dim;
      if (k < 0 || k >= dim)
        return vr_bad(err, n, VR_ERANGE, "index %lld out of range [0, %lld)",
                      (long long)vr_tview_geti(&in[1], j), (long long)dim);
      memcpy(dst, (const char *)in[0].data + (o * dim + k) * inner, inner);
      dst += inner;
    }
  return 0;
}

/* ---- Expand / Tile -------------------------------------------------------- */

static int infer_expand(const vr_node *n, const vr_tview *in, vr_tview *out,
                        vr_errbuf *err) {
  int rc = need_const(n, in, 1, "shape", err);
  if (rc) return rc;
  vr_tview t = {VR_DT_I64, (int)vr_tview_numel(&in[1]), {0}, NULL};
  if (t.ndim > VR_MAX_DIMS) return vr_bad(err, n, VR_EINVAL, "shape too long");
  for (int i = 0; i < t.ndim; i++) t.shape[i] = vr_tview_geti(&in[1], i);
  if (vr_broadcast(&in[0], &t, &out[0]))
    return vr_bad(err, n, VR_ESHAPE, "cannot broadcast to shape");
  out[0].dt = in[0].dt;
  out[0].data = NULL;
  return 0;
}

static int eval_expand(const vr_node *n, const vr_tview *in, vr_tview *out,
                       vr_errbuf *err) {
  int64_t s[VR_MAX_DIMS], idx[VR_MAX_DIMS] = {0}, off = 0;
  vr_bstrides(&in[0], &out[0], s);
  size_t e = esz(&in[0]);
  int64_t cnt = vr_tview_numel(&out[0]);
  for (int64_t i = 0; i < cnt; i++) {
    memcpy((char *)out[0].data + i * e, (const char *)in[0].data + off * e, e);
    for (int d = out[0].ndim - 1; d >= 0; d--) {
      off += s[d];
      if (++idx[d] < out[0].shape[d]) break;
      off -= s[d] * out[0].shape[d];
      idx[d] = 0;
    }
  }
  return 0;
}

static int infer_tile(const vr_node *n, const vr_tview *in, vr_tview *out,
                      vr_errbuf *err) {
  int rc = need_const(n, in, 1, "repeats", err);
  if (rc) return rc;
  if (vr_tview_numel(&in[1]) != in[0].ndim) return vr_bad(err, n, VR_EINVAL, "repeats length");
  out[0] = in[0];
  out[0].data = NULL;
  for (int i = 0; i < in[0].ndim; i++) {
    int64_t k = vr_tview_geti(&in[1], i);
    if (k < 0) return vr_bad(err, n, VR_EINVAL, "negative repeat");
    /* bounded before the product: an absurd repeat overflowed int64 (and
     * could wrap to a small, wrong dim) */
    if (k && out[0].shape[i] > VR_MAX_TENSOR_ELEMS / k)
      return vr_bad(err, n, VR_ELIMIT, "repeat %lld of dim %d: too large", (long long)k, i);
    out[0].shape[i] *= k;
  }
  return 0;
}

static int eval_tile(const vr_node *n, const vr_tview *in, vr_tview *out,
                     vr_errbuf *err) {
  int r = in[0].ndim;
  int64_t ist[VR_MAX_DIMS], s = 1, idx[VR_MAX_DIMS] = {0};
  for (int i = r - 1; i >= 0; i--) {
    ist[i] = s;
    s *= in[0].shape[i];
  }
  size_t e = esz(&in[0]);
  int64_t cnt = vr_tview_numel(&out[0]);
  for (int64_t i = 0; i < cnt; i++) {
    int64_t off = 0;
    for (int d = 0; d < r; d++) off += (idx[d] % in[0].shape[d]) * ist[d];
    memcpy((char *)out[0].data + i * e, (const char *)in[0].data + off * e, e);
    for (int d = r - 1; d >= 0; d--) {
      if (++idx[d] < out[0].shape[d]) break;
      idx[d] = 0;
    }
  }
  return 0;
}

/* ---- ConstantOfShape / Range / Dropout ------------------------------------ */

static int infer_cos(const vr_node *n, const vr_tview *in, vr_tview *out,
                     vr_errbuf *err) {
  int rc = need_const(n, in, 0, "shape", err);
  if (rc) return rc;
  const vr_attr *a = vr_node_attr(n, "value");
  out[0].dt = VR_DT_F32;
  if (a && a->type == VR_ATTR_TENSOR && a->t) {
    if (vr_tview_numel(a->t) != 1)
      return vr_bad(err, n, VR_EINVAL, "value must have one element");
    out[0].dt = a->t->dt;
  }
  out[0].ndim = (int)vr_tview_numel(&in[0]);
  if (out[0].ndim > VR_MAX_DIMS) return vr_bad(err, n, VR_EINVAL, "shape too long");
  for (int i = 0; i < out[0].ndim; i++) {
    out[0].shape[i] = vr_tview_geti(&in[0], i);
    if (out[0].shape[i] < 0) return vr_bad(err, n, VR_EINVAL, "negative dim");
  }
  return 0;
}

static int infer_range(const vr_node *n, const vr_tview *in, vr_tview *out,
                       vr_errbuf *err) {
  for (int i = 0; i < 3; i++) {
    if (!in[i].data) return vr_bad(err, n, VR_EUNSUPPORTED, "inputs must be a constant");
    /* scalars: element 0 is read (an empty one read past its data) */
    if (vr_tview_numel(&in[i]) != 1)
      return vr_bad(err, n, VR_ESHAPE, "input %d must be a scalar, has %lld elements", i,
                    (long long)vr_tview_numel(&in[i]));
  }
  /* ONNX types start, limit and delta alike: an integer start with a
   * float delta of 0.5 read the delta as the integer 0 and divided by it */
  if (in[1].dt != in[0].dt || in[2].dt != in[0].dt)
    return vr_bad(err, n, VR_EINVAL, "start, limit and delta must have one type");
  double s = vr_tview_getf(&in[0], 0), l = vr_tview_getf(&in[1], 0), d = vr_tview_getf(&in[2], 0);
  if (d == 0) return vr_bad(err, n, VR_EINVAL, "delta 0");
  double c = ceil((l - s) / d);
  if (!vr_is_float(in[0].dt)) {
    /* Integers counted exactly: through double, int64 bounds past 2^53
     * rounded (Range(2^60, 2^60 + 3, 1) was empty). The span between
     * the bounds fits in uint64 whatever they are. */
    int64_t si = vr_tview_geti(&in[0], 0), li = vr_tview_geti(&in[1], 0),
            di = vr_tview_geti(&in[2], 0);
    uint64_t span = di > 0 ? (uint64_t)li - (uint64_t)si : (uint64_t)si - (uint64_t)li;
    uint64_t step = di > 0 ? (uint64_t)di : 0 - (uint64_t)di;
    c = (di > 0 ? li > si : li < si) ? (double)((span - 1) / step + 1) : 0;
  }
  out[0].dt = in[0].dt;
  out[0].ndim = 1;
  /* bounded before the conversion: a double past int64 has none */
  if (c > (double)(1 << 30)) return vr_bad(err, n, VR_ELIMIT, "range too long");
  out[0].shape[0] = c > 0 ? (int64_t)c : 0;
  return 0;
}

static int eval_range(const vr_node *n, const vr_tview *in, vr_tview *out,
                      vr_errbuf *err) {
  for (int64_t i = 0; i < out[0].shape[0]; i++) {
    if (vr_is_float(out[0].dt))
      vr_tview_setf(&out[0], i, vr_tview_getf(&in[0], 0) + i * vr_tview_getf(&in[2], 0));
    else /* in uint64: i * delta alone may pass int64 where the sum does not */
      vr_tview_seti(&out[0], i, (int64_t)((uint64_t)vr_tview_geti(&in[0], 0) +
                                          (uint64_t)i * (uint64_t)vr_tview_geti(&in[2], 0)));
  }
  return 0;
}

static int infer_dropout(const vr_node *n, const vr_tview *in, vr_tview *out,
                         vr_errbuf *err) {
  if (n->nin > 2 && in[2].dt && vr_tview_numel(&in[2]) != 1)
    return vr_bad(err, n, VR_ESHAPE, "training_mode must be a scalar");
  /* as ONNX types it: a float's conversion was undefined past int64 */
  if (n->nin > 2 && in[2].dt && in[2].dt != VR_DT_BOOL)
    return vr_bad(err, n, VR_ETYPE, "training_mode must be bool");
  if (n->nin > 2 && in[2].dt && (!in[2].data || vr_tview_geti(&in[2], 0)))
    return vr_bad(err, n, VR_EUNSUPPORTED, "training mode is not supported");
  out[0] = in[0];
  out[0].data = NULL;
  if (n->nout > 1) {
    out[1] = in[0];
    out[1].dt = VR_DT_BOOL;
    out[1].data = NULL;
  }
  return 0;
}

static int eval_dropout(const vr_node *n, const vr_tview *in, vr_tview *out,
                        vr_errbuf *err) {
  eval_copy(n, in, out, err);
  if (n->nout > 1 && out[1].data) memset(out[1].data, 1, (size_t)vr_tview_numel(&out[1]));
  return 0;
}

extern int vr_eval_constant_of_shape(const vr_node *n, const vr_tview *in,
                                     vr_tview *out, vr_errbuf *err);
extern int vr_infer_pad(const vr_node *n, const vr_tview *in, vr_tview *out,
                        vr_errbuf *err);
extern int vr_eval_pad(const vr_node *n, const vr_tview *in, vr_tview *out,
                       vr_errbuf *err);

const vr_op vr_ops_shape[] = {
    {"Shape", infer_shape, eval_shape, NULL, 1, 1, 0},
    {"Size", infer_size, eval_size, NULL, 1, 1, 0},
    {"Reshape", infer_reshape, eval_copy, NULL, 2, 2, 0},
    {"Flatten", infer_flatten, eval_copy, NULL, 1, 1, 0},
    {"Squeeze", infer_squeeze, eval_copy, NULL, 1, 2, 0},
    {"Unsqueeze", infer_unsqueeze, eval_copy, NULL, 1, 2, 0},
    {"Transpose", infer_transpose, eval_transpose, NULL, 1, 1, 0},
    {"Concat", infer_concat, eval_concat, NULL, 1, 4096, 0},
    {"Split", infer_split, eval_split, NULL, 1, 2, 0},
    {"Slice", infer_slice, eval_slice, NULL, 1, 5, 0},
    {"Gather", infer_gather, eval_gather, NULL, 2, 2, 0},
    {"Expand", infer_expand, eval_expand, NULL, 2, 2, 0},
    {"Tile", infer_tile, eval_tile, NULL, 2, 2, 0},
    {"ConstantOfShape", infer_cos, vr_eval_constant_of_shape, NULL, 1, 1, 0},
    {"Range", infer_range, eval_range, NULL, 3, 3, 0},
    {"Dropout", infer_dropout, eval_dropout, NULL, 1, 3, 0},
    {"Pad", vr_infer_pad, vr_eval_pad, NULL, 1, 4, 0},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};
