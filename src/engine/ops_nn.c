/* Neural-network ops: shape inference for Conv, Gemm, MatMul, pools,
 * normalisations, Softmax, LRN; reference kernels for those that constant
 * folding or odd shapes need (Gemm, MatMul, Softmax, BatchNormalization,
 * LayerNormalization). Conv and pooling run on oneDNN only (plan.c).
 * Reductions and ArgMax/ArgMin are ops_reduce.c. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "engine/ops.h"

/* ---- geometry --------------------------------------------------------- */

static int ints_or(const vr_node *n, const char *name, int cnt, int64_t dflt,
                   int64_t *v, vr_errbuf *err) {
  const int64_t *a;
  int k = vr_attr_ints(n, name, &a);
  if (k < 0) {
    for (int i = 0; i < cnt; i++) v[i] = dflt;
    return 0;
  }
  if (k != cnt) return vr_bad(err, n, VR_EINVAL, "attribute '%s' has %d values, "
                              "expected %d", name, k, cnt);
  for (int i = 0; i < cnt; i++) v[i] = a[i];
  return 0;
}

/* Geometry values are attributes and weight shapes of an untrusted model.
 * Past these bounds they are refused: below them the geometry's products
 * ((k - 1) * d, s * (in - 1), a window's element count) and their sums
 * stay far inside int64, where absurd values overflowed (UBSan; a pool
 * with a 2^63-element window loaded with negative FLOPs). */
#define GEOM_MAX ((int64_t)1 << 30)

static int too_large(const vr_node *n, const char *what, int64_t v, int i, vr_errbuf *err) {
  return vr_bad(err, n, VR_ELIMIT, "%s %lld of spatial dim %d: too large", what, (long long)v, i);
}

static int geom_bounds(const vr_node *n, const vr_tview *x, const vr_geom *g,
                       const int64_t *pads, vr_errbuf *err) {
  int64_t window = 1;
  for (int i = 0; i < g->nsp; i++) {
    if (x->shape[2 + i] > VR_MAX_TENSOR_ELEMS) return too_large(n, "input size", x->shape[2 + i], i, err);
    if (g->k[i] > VR_MAX_TENSOR_ELEMS) return too_large(n, "kernel size", g->k[i], i, err);
    if (g->s[i] > GEOM_MAX) return too_large(n, "stride", g->s[i], i, err);
    if (g->d[i] > GEOM_MAX) return too_large(n, "dilation", g->d[i], i, err);
    for (int e = 0; e < 2; e++)
      if (pads[e * g->nsp + i] > GEOM_MAX) return too_large(n, "pad", pads[e * g->nsp + i], i, err);
    if (g->k[i] > 0) window *= g->k[i];
    if (window > VR_MAX_TENSOR_ELEMS)
      return vr_bad(err, n, VR_ELIMIT, "a window of more than %lld elements",
                    (long long)VR_MAX_TENSOR_ELEMS);
  }
  return 0;
}

int vr_geom_compute(const vr_node *n, const vr_tview *x, const int64_t *kernel,
                    int ceil_mode, vr_geom *g, vr_errbuf *err) {
  int nsp = x->ndim - 2, rc;
  if (nsp < 1 || nsp > VR_MAX_SP)
    return vr_bad(err, n, VR_EUNSUPPORTED, "input rank %d (need 3..5)", x->ndim);
  g->nsp = nsp;
  if (kernel) {
    for (int i = 0; i < nsp; i++) g->k[i] = kernel[i];
  } else if ((rc = ints_or(n, "kernel_shape", nsp, -1, g->k, err))) {
    return rc;
  } else if (g->k[0] < 0) {
    return vr_bad(err, n, VR_EINVAL, "missing kernel_shape");
  }
  int64_t pads[2 * VR_MAX_SP];
  if ((rc = ints_or(n, "strides", nsp, 1, g->s, err)) ||
      (rc = ints_or(n, "dilations", nsp, 1, g->d, err)) ||
      (rc = ints_or(n, "pads", 2 * nsp, 0, pads, err)) || (rc = geom_bounds(n, x, g, pads, err)))
    return rc;
  const char *ap = vr_attr_s(n, "auto_pad", "NOTSET");
  for (int i = 0; i < nsp; i++) {
    int64_t in = x->shape[2 + i], ek;
    if (g->k[i] < 1 || g->s[i] < 1 || g->d[i] < 1 || pads[i] < 0 || pads[nsp + i] < 0)
      return vr_bad(err, n, VR_EINVAL, "bad kernel/stride/dilation/pad values");
    ek = (g->k[i] - 1) * g->d[i] + 1;
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
      int64_t o = (in + g->s[i] - 1) / g->s[i];
      int64_t tot = (o - 1) * g->s[i] + ek - in;
      if (tot < 0) tot = 0;
      g->pl[i] = !strcmp(ap, "SAME_UPPER") ? tot / 2 : tot - tot / 2;
      g->pr[i] = tot - g->pl[i];
      g->out[i] = o;
      continue;
    }
    if (!strcmp(ap, "VALID")) {
      g->pl[i] = g->pr[i] = 0;
    } else if (!strcmp(ap, "NOTSET")) {
      g->pl[i] = pads[i];
      g->pr[i] = pads[nsp + i];
    } else {
      return vr_bad(err, n, VR_EUNSUPPORTED, "auto_pad '%s'", ap);
    }
    int64_t span = in + g->pl[i] + g->pr[i] - ek;
    if (span < 0) return vr_bad(err, n, VR_ESHAPE, "kernel larger than padded input");
    int64_t o = (ceil_mode ? (span + g->s[i] - 1) / g->s[i] : span / g->s[i]) + 1;
    /* A window that would start inside the right padding is dropped. */
    if (ceil_mode && (o - 1) * g->s[i] >= in + g->pl[i]) o--;
    g->out[i] = o;
    /* oneDNN wants the right padding that makes the output size exact. */
    g->pr[i] = (o - 1) * g->s[i] + ek - in - g->pl[i];
  }
  return 0;
}

/* ---- Conv ----------------------------------------------------------------- */

static int infer_conv(const vr_node *n, const vr_tview *in, vr_tview *out,
                      vr_errbuf *err) {
  const vr_tview *x = &in[0], *w = &in[1];
  if (n->nin < 2 || !w->dt) return vr_bad(err, n, VR_EINVAL, "missing weights");
  if (x->dt != VR_DT_F32 || w->dt != VR_DT_F32)
    return vr_bad(err, n, VR_EUNSUPPORTED, "only float32 convolution");
  if (w->ndim != x->ndim) return vr_bad(err, n, VR_ESHAPE, "weight rank %d != input rank %d",
                                        w->ndim, x->ndim);
  int64_t grp = vr_attr_i(n, "group", 1);
  if (grp < 1 || x->shape[1] % grp || w->shape[0] % grp || w->shape[1] * grp != x->shape[1])
    return vr_bad(err, n, VR_ESHAPE, "input channels %lld, weight %lldx%lld, group %lld",
                  (long long)x->shape[1], (long long)w->shape[0],
                  (long long)w->shape[1], (long long)grp);
  if (n->nin > 2 && in[2].dt && (in[2].ndim != 1 || in[2].shape[0] != w->shape[0]))
    return vr_bad(err, n, VR_ESHAPE, "bias must be [%lld]", (long long)w->shape[0]);
  const int64_t *ks;
  int nk = vr_attr_ints(n, "kernel_shape", &ks);
  for (int i = 0; i < nk && i + 2 < w->ndim; i++)
    if (ks[i] != w->shape[2 + i]) return vr_bad(err, n, VR_ESHAPE, "kernel_shape differs from weights");
  vr_geom g;
  int rc = vr_geom_compute(n, x, w->shape + 2, 0, &g, err);
  if (rc) return rc;
  out[0].dt = VR_DT_F32;
  out[0].ndim = x->ndim;
  out[0].shape[0] = x->shape[0];
  out[0].shape[1] = w->shape[0];
  for (int i = 0; i < g.nsp; i++) out[0].shape[2 + i] = g.out[i];
  return 0;
}

static int64_t flops_conv(const vr_node *n, const vr_tview *in, const vr_tview *out) {
  int64_t per_out = 2 * vr_numel(in[1].ndim - 1, in[1].shape + 1);
  return per_out * vr_tview_numel(&out[0]);
}

/* ---- ConvTranspose ---------------------------------------------------------- */

/* Geometry of a transposed convolution: pads resolved from pads /
 * output_shape / auto_pad (ONNX rules), output spatial sizes. */
int vr_deconv_geom(const vr_node *n, const vr_tview *x, const vr_tview *w, vr_geom *g,
                   vr_errbuf *err) {
  int nsp = x->ndim - 2, rc;
  if (nsp < 1 || nsp > VR_MAX_SP || w->ndim != x->ndim)
    return vr_bad(err, n, VR_EUNSUPPORTED, "input/weight rank %d/%d", x->ndim, w->ndim);
  g->nsp = nsp;
  int64_t pads[2 * VR_MAX_SP], opad[VR_MAX_SP], oshape[VR_MAX_SP];
  for (int i = 0; i < nsp; i++) g->k[i] = w->shape[2 + i];
  if ((rc = ints_or(n, "strides", nsp, 1, g->s, err)) ||
      (rc = ints_or(n, "dilations", nsp, 1, g->d, err)) ||
      (rc = ints_or(n, "pads", 2 * nsp, 0, pads, err)) ||
      (rc = ints_or(n, "output_padding", nsp, 0, opad, err)) ||
      (rc = geom_bounds(n, x, g, pads, err)))
    return rc;
  /* output_shape: the spatial sizes or the full N, C, spatial form (ORT
   * takes both) */
  const int64_t *os;
  int nos = vr_attr_ints(n, "output_shape", &os);
  if (nos >= 0 && nos != nsp && nos != x->ndim)
    return vr_bad(err, n, VR_EINVAL, "attribute 'output_shape' has %d values, expected %d "
                  "(spatial) or %d (N, C, spatial)", nos, nsp, x->ndim);
  for (int i = 0; i < nsp; i++) oshape[i] = nos < 0 ? -1 : os[nos - nsp + i];
  const char *ap = vr_attr_s(n, "auto_pad", "NOTSET");
  for (int i = 0; i < nsp; i++) {
    /* checked before (k - 1) * d: a negative dilation overflowed it */
    if (g->k[i] < 1 || g->s[i] < 1 || g->d[i] < 1 || opad[i] < 0 || pads[i] < 0 ||
        pads[nsp + i] < 0)
      return vr_bad(err, n, VR_EINVAL, "bad kernel/stride/dilation/padding values");
    int64_t in = x->shape[2 + i], ek = (g->k[i] - 1) * g->d[i] + 1;
    if (opad[i] > GEOM_MAX) return too_large(n, "output padding", opad[i], i, err);
    if (oshape[i] > VR_MAX_TENSOR_ELEMS) return too_large(n, "output size", oshape[i], i, err);
    int64_t full = g->s[i] * (in - 1) + opad[i] + ek;
    int64_t want = oshape[i] >= 0 ? oshape[i]
                   : (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) ? in * g->s[i] : -1;
    if (want >= 0) {
      int64_t tot = full - want;
      /* ONNX: SAME_UPPER puts the extra pad at the end, any other
       * auto_pad (SAME_LOWER, and NOTSET with an output_shape, whose pads
       * are ignored) at the start; a negative total (output_shape larger
       * than the kernel reach) extends the end with zeros, i.e. a
       * negative right pad. */
      g->pl[i] = tot < 0 ? 0 : strcmp(ap, "SAME_UPPER") ? tot - tot / 2 : tot / 2;
      g->pr[i] = tot - g->pl[i];
    } else {
      g->pl[i] = pads[i];
      g->pr[i] = pads[nsp + i];
    }
    g->out[i] = full - g->pl[i] - g->pr[i];
    if (g->out[i] < 1) return vr_bad(err, n, VR_ESHAPE, "empty output");
  }
  return 0;
}

static int infer_deconv(const vr_node *n, const vr_tview *in, vr_tview *out,
                        vr_errbuf *err) {
  const vr_tview *x = &in[0], *w = &in[1];
  if (x->dt != VR_DT_F32 || w->dt != VR_DT_F32)
    return vr_bad(err, n, VR_EUNSUPPORTED, "only float32 ConvTranspose");
  int64_t grp = vr_attr_i(n, "group", 1);
  if (grp < 1 || w->ndim < 3 || w->shape[0] != x->shape[1] || x->shape[1] % grp)
    return vr_bad(err, n, VR_ESHAPE, "weight dim 0 must equal input channels");
  vr_geom g;
  int rc = vr_deconv_geom(n, x, w, &g, err);
  if (rc) return rc;
  int64_t m = w->shape[1] * grp;
  if (n->nin > 2 && in[2].dt && (in[2].ndim != 1 || in[2].shape[0] != m))
    return vr_bad(err, n, VR_ESHAPE, "bias must be [%lld]", (long long)m);
  out[0].dt = VR_DT_F32;
  out[0].ndim = x->ndim;
  out[0].shape[0] = x->shape[0];
  out[0].shape[1] = m;
  for (int i = 0; i < g.nsp; i++) out[0].shape[2 + i] = g.out[i];
  return 0;
}

static int64_t flops_deconv(const vr_node *n, const vr_tview *in, const vr_tview *out) {
  return 2 * vr_tview_numel(&in[0]) * vr_numel(in[1].ndim - 1, in[1].shape + 1);
}

/* ---- Gemm / MatMul -------------------------------------------------------- */

static int infer_gemm(const vr_node *n, const vr_tview *in, vr_tview *out,
                      vr_errbuf *err) {
  const vr_tview *a = &in[0], *b = &in[1];
  if (a->ndim != 2 || b->ndim != 2 || a->dt != VR_DT_F32 || b->dt != VR_DT_F32)
    return vr_bad(err, n, VR_EUNSUPPORTED, "A and B must be 2-D float32");
  int64_t ta = vr_attr_i(n, "transA", 0), tb = vr_attr_i(n, "transB", 0);
  /* they index the shapes here, in the kernel and the lowering */
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
    return vr_bad(err, n, VR_EINVAL, "transA / transB must be 0 or 1 (%lld, %lld)",
                  (long long)ta, (long long)tb);
  int64_t m = a->shape[ta], k = a->shape[1 - ta], k2 = b->shape[tb], nn = b->shape[1 - tb];
  if (k != k2) return vr_bad(err, n, VR_ESHAPE, "inner dims %lld vs %lld",
                             (long long)k, (long long)k2);
  out[0].dt = VR_DT_F32;
  out[0].ndim = 2;
  out[0].shape[0] = m;
  out[0].shape[1] = nn;
  if (n->nin > 2 && in[2].dt) {
    vr_tview t;
    if (vr_broadcast(&in[2], &out[0], &t) || t.shape[0] != m || t.shape[1] != nn)
      return vr_bad(err, n, VR_ESHAPE, "C cannot broadcast to [%lld, %lld]",
                    (long long)m, (long long)nn);
  }
  return 0;
}

static int eval_gemm(const vr_node *n, const vr_tview *in, vr_tview *out,
                     vr_errbuf *err) {
  int ta = (int)vr_attr_i(n, "transA", 0), tb = (int)vr_attr_i(n, "transB", 0);
  float alpha = vr_attr_f(n, "alpha", 1), beta = vr_attr_f(n, "beta", 1);
  const float *A = in[0].data, *B = in[1].data;
  int64_t M = out[0].shape[0], N = out[0].shape[1], K = in[0].shape[1 - ta];
  float *Y = out[0].data;
  int64_t cs[VR_MAX_DIMS];
  if (n->nin > 2 && in[2].dt) vr_bstrides(&in[2], &out[0], cs);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double acc = 0;
      for (int64_t p = 0; p < K; p++)
        acc += (double)A[ta ? p * M + i : i * K + p] * B[tb ? j * K + p : p * N + j];
      double c = n->nin > 2 && in[2].dt ? vr_tview_getf(&in[2], i * cs[0] + j * cs[1]) : 0;
      Y[i * N + j] = (float)(alpha * acc + beta * c);
    }
  return 0;
}

static int64_t flops_gemm(const vr_node *n, const vr_tview *in, const vr_tview *out) {
  int ta = (int)vr_attr_i(n, "transA", 0);
  return 2 * in[0].shape[1 - ta] * out[0].shape[1] * out[0].shape[0];
}

static int infer_matmul(const vr_node *n, const vr_tview *in, vr_tview *out,
                        vr_errbuf *err) {
  vr_tview a = in[0], b = in[1];
  if (a.dt != VR_DT_F32 || b.dt != VR_DT_F32)
    return vr_bad(err, n, VR_EUNSUPPORTED, "only float32 MatMul");
  if (a.ndim < 1 || b.ndim < 1) return vr_bad(err, n, VR_ESHAPE, "scalar operand");
  int a1 = a.ndim == 1, b1 = b.ndim == 1;
  if (a1) { a.ndim = 2; a.shape[1] = a.shape[0]; a.shape[0] = 1; }
  if (b1) { b.ndim = 2; b.shape[1] = 1; }
  if (a.shape[a.ndim - 1] != b.shape[b.ndim - 2])
    return vr_bad(err, n, VR_ESHAPE, "inner dims %lld vs %lld",
                  (long long)a.shape[a.ndim - 1], (long long)b.shape[b.ndim - 2]);
  vr_tview ba = a, bb = b;
  ba.ndim -= 2;
  bb.ndim -= 2;
  if (vr_broadcast(&ba, &bb, &out[0])) return vr_bad(err, n, VR_ESHAPE, "batch dims do not broadcast");
  int r = out[0].ndim;
  if (!a1) out[0].shape[r++] = a.shape[a.ndim - 2];
  if (!b1) out[0].shape[r++] = b.shape[b.ndim - 1];
  out[0].ndim = r;
  out[0].dt = VR_DT_F32;
  return 0;
}

static int eval_matmul(const vr_node *n, const vr_tview *in, vr_tview *out,
                       vr_errbuf *err) {
  vr_tview a = in[0], b = in[1], o;
  if (a.ndim == 1) { a.ndim = 2; a.shape[1] = a.shape[0]; a.shape[0] = 1; }
  if (b.ndim == 1) { b.ndim = 2; b.shape[1] = 1; }
  int64_t M = a.shape[a.ndim - 2], K = a.shape[a.ndim - 1], N = b.shape[b.ndim - 1];
  vr_tview ba = a, bb = b;
  ba.ndim -= 2;
  bb.ndim -= 2;
  vr_broadcast(&ba, &bb, &o);
  int64_t sa[VR_MAX_DIMS], sb[VR_MAX_DIMS], idx[VR_MAX_DIMS] = {0}, ia = 0, ib = 0;
  vr_bstrides(&ba, &o, sa);
  vr_bstrides(&bb, &o, sb);
  int64_t nb = vr_tview_numel(&o);
  const float *A = a.data, *B = b.data, *bias = NULL;
  float *Y = out[0].data;
  if (n->nin > 2 && n->in[2] >= 0) { /* a bias fused by fuse_bias: one per column */
    if (in[2].dt != VR_DT_F32 || vr_tview_numel(&in[2]) != N)
      return vr_bad(err, n, VR_EUNSUPPORTED, "bias of %lld values for %lld columns",
                    (long long)vr_tview_numel(&in[2]), (long long)N);
    bias = in[2].data;
  }
  for (int64_t bi = 0; bi < nb; bi++) {
    const float *pa = A + ia * M * K, *pb = B + ib * K * N;
    float *py = Y + bi * M * N;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double acc = 0;
        for (int64_t p = 0; p < K; p++) acc += (double)pa[i * K + p] * pb[p * N + j];
        py[i * N + j] = (float)acc + (bias ? bias[j] : 0.0f);
      }
    for (int d = o.ndim - 1; d >= 0; d--) {
      ia += sa[d];
      ib += sb[d];
      if (++idx[d] < o.shape[d]) break;
      ia -= sa[d] * o.shape[d];
      ib -= sb[d] * o.shape[d];
      idx[d] = 0;
    }
  }
  return 0;
}

static int64_t flops_matmul(const vr_node *n, const vr_tview *in, const vr_tview *out) {
  int64_t k = in[0].shape[in[0].ndim - 1];
  return 2 * k * (out[0].ndim ? vr_tview_numel(&out[0]) : 1);
}

/* ---- pools ---------------------------------------------------------------- */

static int infer_pool(const vr_node *n, const vr_tview *in, vr_tview *out,
                      vr_errbuf *err) {
  if (in[0].dt != VR_DT_F32) return vr_bad(err, n, VR_EUNSUPPORTED, "only float32 pooling");
  if (n->nout > 1) return vr_bad(err, n, VR_EUNSUPPORTED, "the Indices output");
  if (vr_attr_i(n, "storage_order", 0)) return vr_bad(err, n, VR_EUNSUPPORTED, "storage_order");
  vr_geom g;
  int rc = vr_geom_compute(n, &in[0], NULL, (int)vr_attr_i(n, "ceil_mode", 0), &g, err);
  if (rc) return rc;
  for (int i = 0; i < g.nsp; i++)
    if (g.pl[i] >= g.k[i] * g.d[i] || g.out[i] < 1)
      return vr_bad(err, n, VR_EUNSUPPORTED, "padding not smaller than the kernel");
  out[0] = in[0];
  out[0].data = NULL;
  for (int i = 0; i < g.nsp; i++) out[0].shape[2 + i] = g.out[i];
  return 0;
}

static int64_t flops_pool(const vr_node *n, const vr_tview *in, const vr_tview *out) {
  const int64_t *k;
  int nk = vr_attr_ints(n, "kernel_shape", &k);
  int64_t kk = 1;
  for (int i = 0; i < nk; i++) kk *= k[i];
  return kk * vr_tview_numel(&out[0]);
}

static int infer_gpool(const vr_node *n, const vr_tview *in, vr_tview *out,
                       vr_errbuf *err) {
  if (in[0].dt != VR_DT_F32 || in[0].ndim < 3)
    return vr_bad(err, n, VR_EUNSUPPORTED, "needs float32 N x C x spatial input");
  out[0] = in[0];
  out[0].data = NULL;
  for (int i = 2; i < in[0].ndim; i++) out[0].shape[i] = 1;
  return 0;
}

static int eval_gpool(const vr_node *n, const vr_tview *in, vr_tview *out,
                      vr_errbuf *err) {
  int64_t nc = in[0].shape[0] * in[0].shape[1];
  int64_t sp = vr_numel(in[0].ndim - 2, in[0].shape + 2);
  int avg = !strcmp(n->op, "GlobalAveragePool");
  const float *x = in[0].data;
  for (int64_t i = 0; i < nc; i++) {
    double acc = avg ? 0 : -INFINITY;
    for (int64_t j = 0; j < sp; j++) acc = avg ? acc + x[i * sp + j] : fmax(acc, x[i * sp + j]);
    ((float *)out[0].data)[i] = (float)(avg ? acc / (double)sp : acc);
  }
  return 0;
}

int64_t vr_flops_in(const vr_node *n, const vr_tview *in, const vr_tview *out) {
  return vr_tview_numel(&in[0]);
}

/* ---- normalisations ------------------------------------------------------- */

static int infer_bn(const vr_node *n, const vr_tview *in, vr_tview *out,
                    vr_errbuf *err) {
  if (n->nin != 5) return vr_bad(err, n, VR_EINVAL, "needs 5 inputs");
  if (vr_attr_i(n, "training_mode", 0) || n->nout > 1)
    return vr_bad(err, n, VR_EUNSUPPORTED, "training mode");
  if (in[0].dt != VR_DT_F32 || in[0].ndim < 2) return vr_bad(err, n, VR_EUNSUPPORTED, "needs float32 N x C x ...");
  for (int i = 1; i < 5; i++)
    if (in[i].dt != VR_DT_F32 || vr_tview_numel(&in[i]) != in[0].shape[1])
      return vr_bad(err, n, VR_ESHAPE, "parameter %d must have C=%lld floats", i,
                    (long long)in[0].shape[1]);
  out[0] = in[0];
  out[0].data = NULL;
  return 0;
}

static int eval_bn(const vr_node *n, const vr_tview *in, vr_tview *out,
                   vr_errbuf *err) {
  int64_t N = in[0].shape[0], C = in[0].shape[1], sp = vr_numel(in[0].ndim - 2, in[0].shape + 2);
  float eps = vr_attr_f(n, "epsilon", 1e-5f);
  const float *x = in[0].data, *sc = in[1].data, *b = in[2].data, *m = in[3].data, *v = in[4].data;
  float *y = out[0].data;
  for (int64_t i = 0; i < N; i++)
    for (int64_t c = 0; c < C; c++) {
      float a = sc[c] / sqrtf(v[c] + eps), s = b[c] - m[c] * a;
      for (int64_t j = 0; j < sp; j++) {
        int64_t k = (i * C + c) * sp + j;
        y[k] = x[k] * a + s;
      }
    }
  return 0;
}

static int infer_ln(const vr_node *n, const vr_tview *in, vr_tview *out,
                    vr_errbuf *err) {
  int ax = vr_axis(vr_attr_i(n, "axis", -1), in[0].ndim);
  if (ax < 0 || in[0].dt != VR_DT_F32) return vr_bad(err, n, VR_EINVAL, "bad axis or type");
  int64_t inner = vr_numel(in[0].ndim - ax, in[0].shape + ax);
  for (int i = 1; i < n->nin && i < 3; i++)
    if (in[i].dt && vr_tview_numel(&in[i]) != inner)
      return vr_bad(err, n, VR_EUNSUPPORTED, "scale/bias must cover the normalised dims");
  out[0] = in[0];
  out[0].data = NULL;
  for (int k = 1; k < n->nout && k < 3; k++) { /* Mean, InvStdDev */
    out[k] = in[0];
    out[k].data = NULL;
    for (int d = ax; d < in[0].ndim; d++) out[k].shape[d] = 1;
  }
  return 0;
}

static int eval_ln(const vr_node *n, const vr_tview *in, vr_tview *out,
                   vr_errbuf *err) {
  int ax = vr_axis(vr_attr_i(n, "axis", -1), in[0].ndim);
  int64_t outer = vr_numel(ax, in[0].shape), inner = vr_numel(in[0].ndim - ax, in[0].shape + ax);
  float eps = vr_attr_f(n, "epsilon", 1e-5f);
  const float *x = in[0].data, *g = in[1].data;
  const float *b = n->nin > 2 && in[2].dt ? in[2].data : NULL;
  for (int64_t o = 0; o < outer; o++) {
    const float *r = x + o * inner;
    double mu = 0, var = 0;
    for (int64_t j = 0; j < inner; j++) mu += r[j];
    mu /= (double)inner;
    for (int64_t j = 0; j < inner; j++) var += (r[j] - mu) * (r[j] - mu);
    double is = 1.0 / sqrt(var / (double)inner + eps);
    if (n->nout > 1 && out[1].data) ((float *)out[1].data)[o] = (float)mu;
    if (n->nout > 2 && out[2].data) ((float *)out[2].data)[o] = (float)is;
    for (int64_t j = 0; j < inner; j++)
      ((float *)out[0].data)[o * inner + j] = (float)((r[j] - mu) * is * g[j] + (b ? b[j] : 0));
  }
  return 0;
}

static int infer_lrn(const vr_node *n, const vr_tview *in, vr_tview *out,
                     vr_errbuf *err) {
  if (in[0].dt != VR_DT_F32 || in[0].ndim < 3) return vr_bad(err, n, VR_EUNSUPPORTED, "needs float32 NCHW");
  int64_t size = vr_attr_i(n, "size", 0);
  if (size < 1) return vr_bad(err, n, VR_EINVAL, "attribute 'size' must be >= 1");
  out[0] = in[0];
  out[0].data = NULL;
  return 0;
}

/* ONNX LRN: channels [c - floor((size-1)/2), c + ceil((size-1)/2)], so an
 * even size has one more channel after c than before. oneDNN's window is
 * centred: lower_lrn leaves even sizes to this kernel. */
static int eval_lrn(const vr_node *n, const vr_tview *in, vr_tview *out,
                    vr_errbuf *err) {
  int64_t size = vr_attr_i(n, "size", 1), C = in[0].shape[1];
  double alpha = vr_attr_f(n, "alpha", 1e-4f), beta = vr_attr_f(n, "beta", 0.75f);
  double bias = vr_attr_f(n, "bias", 1.0f);
  int64_t outer = in[0].shape[0], inner = vr_numel(in[0].ndim - 2, in[0].shape + 2);
  const float *x = in[0].data;
  float *y = out[0].data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < C; c++) {
      int64_t lo = c - (size - 1) / 2, hi = c + size / 2;
      if (lo < 0) lo = 0;
      if (hi > C - 1) hi = C - 1;
      for (int64_t j = 0; j < inner; j++) {
        double sq = 0;
        for (int64_t k = lo; k <= hi; k++) {
          double v = x[(o * C + k) * inner + j];
          sq += v * v;
        }
        int64_t i = (o * C + c) * inner + j;
        y[i] = (float)(x[i] / pow(bias + alpha / (double)size * sq, beta));
      }
    }
  return 0;
}

/* ---- Softmax family --------------------------------------------------------- */

int vr_softmax_dims(const vr_node *n, const vr_tview *x, int64_t *outer,
                    int64_t *len, int64_t *inner) {
  int old = n->opset < 13;
  int ax = vr_axis(vr_attr_i(n, "axis", old ? 1 : -1), x->ndim ? x->ndim : 1);
  if (ax < 0) return -1;
  *outer = vr_numel(ax, x->shape);
  if (old) {
    *len = vr_numel(x->ndim - ax, x->shape + ax);
    *inner = 1;
  } else {
    *len = x->ndim ? x->shape[ax] : 1;
    *inner = vr_numel(x->ndim - ax - 1, x->shape + ax + 1);
  }
  return 0;
}

static int infer_softmax(const vr_node *n, const vr_tview *in, vr_tview *out,
                         vr_errbuf *err) {
  int64_t a, b, c;
  if (in[0].dt != VR_DT_F32) return vr_bad(err, n, VR_EUNSUPPORTED, "only float32");
  if (vr_softmax_dims(n, &in[0], &a, &b, &c)) return vr_bad(err, n, VR_EINVAL, "bad axis");
  out[0] = in[0];
  out[0].data = NULL;
  return 0;
}

static int eval_softmax(const vr_node *n, const vr_tview *in, vr_tview *out,
                        vr_errbuf *err) {
  int64_t outer, len, inner;
  vr_softmax_dims(n, &in[0], &outer, &len, &inner);
  int logsm = !strcmp(n->op, "LogSoftmax"), hard = !strcmp(n->op, "Hardmax");
  const float *x = in[0].data;
  float *y = out[0].data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      const float *r = x + o * len * inner + i;
      float *w = y + o * len * inner + i;
      double mx = -INFINITY, s = 0;
      int64_t am = 0;
      for (int64_t j = 0; j < len; j++)
        if (r[j * inner] > mx) { mx = r[j * inner]; am = j; }
      for (int64_t j = 0; j < len; j++) s += exp(r[j * inner] - mx);
      for (int64_t j = 0; j < len; j++)
        w[j * inner] = hard ? (float)(j == am) : logsm ? (float)(r[j * inner] - mx - log(s))
                                          : (float)(exp(r[j * inner] - mx) / s);
    }
  return 0;
}

/* ---- Pad / ConstantOfShape ------------------------------------------------ */

static int pad_params(const vr_node *n, const vr_tview *in, int64_t *pads,
                      double *val, vr_errbuf *err) {
  int r = in[0].ndim;
  const int64_t *a;
  int k = vr_attr_ints(n, "pads", &a);
  *val = vr_attr_f(n, "value", 0);
  if (k < 0) {
    if (n->nin < 2 || !in[1].data) return vr_bad(err, n, VR_EUNSUPPORTED, "input 'pads' must be a constant");
    if (n->nin > 3 && in[3].dt) return vr_bad(err, n, VR_EUNSUPPORTED, "the axes input");
    /* as ONNX types it: a float's conversion was undefined past int64 */
    if (!vr_is_int(in[1].dt)) return vr_bad(err, n, VR_ETYPE, "input 'pads' must be integer");
    k = (int)vr_tview_numel(&in[1]);
    if (k != 2 * r) return vr_bad(err, n, VR_EINVAL, "pads needs %d values", 2 * r);
    for (int i = 0; i < k; i++) pads[i] = vr_tview_geti(&in[1], i);
    if (n->nin > 2 && in[2].dt) {
      if (!in[2].data) return vr_bad(err, n, VR_EUNSUPPORTED, "input 'constant_value' must be a constant");
      if (vr_tview_numel(&in[2]) != 1) /* element 0 is read */
        return vr_bad(err, n, VR_ESHAPE, "input 'constant_value' must be a scalar");
      *val = vr_tview_getf(&in[2], 0);
    }
  } else {
    if (k != 2 * r) return vr_bad(err, n, VR_EINVAL, "pads needs %d values", 2 * r);
    memcpy(pads, a, sizeof(int64_t) * k);
  }
  return 0;
}

int vr_infer_pad(const vr_node *n, const vr_tview *in, vr_tview *out,
                 vr_errbuf *err) {
  int64_t pads[2 * VR_MAX_DIMS];
  double v;
  int rc = pad_params(n, in, pads, &v, err);
  if (rc) return rc;
  const char *mode = vr_attr_s(n, "mode", "constant");
  if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge"))
    return vr_bad(err, n, VR_EUNSUPPORTED, "mode '%s'", mode);
  out[0] = in[0];
  out[0].data = NULL;
  for (int i = 0; i < in[0].ndim; i++) {
    /* bounded before the sum: absurd pads overflowed int64 (two could
     * wrap to a small, wrong dim) */
    for (int k = 0; k < 2; k++)
      if (pads[i + k * in[0].ndim] > VR_MAX_TENSOR_ELEMS || pads[i + k * in[0].ndim] < -VR_MAX_TENSOR_ELEMS)
        return vr_bad(err, n, VR_ELIMIT, "pad %lld of dim %d: too large",
                      (long long)pads[i + k * in[0].ndim], i);
    out[0].shape[i] += pads[i] + pads[in[0].ndim + i];
    if (out[0].shape[i] < 0) return vr_bad(err, n, VR_ESHAPE, "negative output dim");
    int64_t dim = in[0].shape[i], lo = pads[i], hi = pads[in[0].ndim + i];
    if (!strcmp(mode, "reflect") && (lo > 0 || hi > 0) && (lo > dim - 1 || hi > dim - 1))
      return vr_bad(err, n, VR_EINVAL, "reflect padding larger than the input");
    if (!strcmp(mode, "edge") && dim == 0 && (lo > 0 || hi > 0))
      return vr_bad(err, n, VR_EINVAL, "edge padding of an empty dim");
  }
  return 0;
}

int vr_eval_pad(const vr_node *n, const vr_tview *in, vr_tview *out,
                vr_errbuf *err) {
  int64_t pads[2 * VR_MAX_DIMS];
  double v;
  int rc = pad_params(n, in, pads, &v, err); /* checked at inference too */
  if (rc) return rc;
  const char *mode = vr_attr_s(n, "mode", "constant");
  int r = in[0].ndim, refl = !strcmp(mode, "reflect"), edge = !strcmp(mode, "edge");
  int64_t ist[VR_MAX_DIMS], s = 1, idx[VR_MAX_DIMS] = {0};
  for (int i = r - 1; i >= 0; i--) {
    ist[i] = s;
    s *= in[0].shape[i];
  }
  size_t e = vr_dtype_size(in[0].dt);
  int64_t cnt = vr_tview_numel(&out[0]);
  for (int64_t i = 0; i < cnt; i++) {
    int64_t off = 0;
    int outside = 0;
    for (int d = 0; d < r; d++) {
      int64_t j = idx[d] - pads[d], dim = in[0].shape[d];
      if (j < 0 || j >= dim) {
        if (refl && dim > 1) {
          int64_t per = 2 * (dim - 1);
          j = ((j % per) + per) % per;
          if (j >= dim) j = per - j;
        } else if ((edge || refl) && dim > 0) {
          j = j < 0 ? 0 : dim - 1;
        } else {
          outside = 1;
        }
      }
      off += j * ist[d];
    }
    if (outside) vr_tview_setf(&out[0], i, v);
    else memcpy((char *)out[0].data + i * e, (const char *)in[0].data + off * e, e);
    for (int d = r - 1; d >= 0; d--) {
      if (++idx[d] < out[0].shape[d]) break;
      idx[d] = 0;
    }
  }
  return 0;
}

int vr_eval_constant_of_shape(const vr_node *n, const vr_tview *in,
                              vr_tview *out, vr_errbuf *err) {
  const vr_attr *a = vr_node_attr(n, "value");
  size_t e = vr_dtype_size(out[0].dt);
  char zero[16] = {0};
  const void *src = a && a->t ? a->t->data : zero;
  int64_t cnt = vr_tview_numel(&out[0]);
  for (int64_t i = 0; i < cnt; i++) memcpy((char *)out[0].data + i * e, src, e);
  return 0;
}

const vr_op vr_ops_nn[] = {
    {"Conv", infer_conv, NULL, flops_conv, 2, 3, 0},
    {"ConvTranspose", infer_deconv, NULL, flops_deconv, 2, 3, 0},
    {"Gemm", infer_gemm, eval_gemm, flops_gemm, 2, 3, 0},
    {"MatMul", infer_matmul, eval_matmul, flops_matmul, 2, 2, 0},
    {"MaxPool", infer_pool, NULL, flops_pool, 1, 1, 0},
    {"AveragePool", infer_pool, NULL, flops_pool, 1, 1, 0},
    {"GlobalAveragePool", infer_gpool, eval_gpool, vr_flops_in, 1, 1, 0},
    {"GlobalMaxPool", infer_gpool, eval_gpool, vr_flops_in, 1, 1, 0},
    {"BatchNormalization", infer_bn, eval_bn, vr_flops_in, 5, 5, 0},
    {"LayerNormalization", infer_ln, eval_ln, vr_flops_in, 2, 3, 0},
    {"LRN", infer_lrn, eval_lrn, vr_flops_in, 1, 1, 0},
    {"Softmax", infer_softmax, eval_softmax, vr_flops_in, 1, 1, 0},
    {"LogSoftmax", infer_softmax, eval_softmax, vr_flops_in, 1, 1, 0},
    {"Hardmax", infer_softmax, eval_softmax, vr_flops_in, 1, 1, 0},
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};
