/* Fusions on the folded graph. Each rule looks at a consumer node and its
 * producer; when it fires, the producer takes over the consumer's output
 * and the consumer dies. Why: every fused op saves a full pass over the
 * activation tensor (memory-bound on 2 cores), and oneDNN applies post-ops
 * while the convolution's output is still in cache. */
#include <dnnl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "engine/graph.h"
#include "engine/ops.h"

static void relabel(vr_node *p, const char *what) {
  size_t l = strlen(p->label);
  snprintf(p->label + l, sizeof p->label - l, "+%s", what);
}

static int is_const(const vr_graph *g, int v) {
  return v >= 0 && g->vals[v].kind == VR_VAL_CONST && g->vals[v].dtype == VR_DT_F32;
}

/* Producer of value v if it is a live node whose only use is this one. */
static vr_node *sole_producer(vr_graph *g, int v, const int *uses) {
  if (v < 0 || g->vals[v].producer < 0 || uses[v] != 1 || g->vals[v].is_output)
    return NULL;
  vr_node *p = &g->nodes[g->vals[v].producer];
  return p->dead || p->nout != 1 ? NULL : p;
}

/* A new f32 constant shaped like `like`. Callers pass pointers into
 * g->vals, which vr_graph_add_val may move: the shape is copied first. */
static int new_const(vr_graph *g, const vr_val *like, vr_errbuf *err) {
  int ndim = like->ndim;
  int64_t shape[VR_MAX_DIMS];
  memcpy(shape, like->shape, sizeof(int64_t) * (size_t)ndim);
  int vi = vr_graph_add_val(g, NULL);
  if (vi < 0) return vr_errf(err, VR_ENOMEM, "out of memory");
  int64_t cnt = vr_numel(ndim, shape);
  void *d = vr_aligned_alloc(64, (size_t)(cnt ? cnt : 1) * 4);
  if (!d) return vr_errf(err, VR_ENOMEM, "out of memory");
  vr_val_set_const(&g->vals[vi], VR_DT_F32, ndim, shape, d);
  return vi;
}

/* W'[oc] = W[oc] * a, b'[oc] = (b - mean) * a + beta, a = gamma/sqrt(var+eps). */
static int fold_bn(vr_graph *g, vr_node *bn, vr_node *cv, vr_errbuf *err) {
  for (int i = 1; i < 5; i++)
    if (!is_const(g, bn->in[i])) return 0;
  if (!is_const(g, cv->in[1]) || (cv->nin > 2 && cv->in[2] >= 0 && !is_const(g, cv->in[2])))
    return 0;
  if (cv->npost) return 0;
  int w = new_const(g, &g->vals[cv->in[1]], err);
  if (w < 0) return w;
  int b = new_const(g, &g->vals[bn->in[1]], err);
  if (b < 0) return b;
  const vr_val *W = &g->vals[cv->in[1]];
  int64_t oc = W->shape[0], per = vr_numel(W->ndim - 1, W->shape + 1);
  float eps = vr_attr_f(bn, "epsilon", 1e-5f);
  const float *sc = g->vals[bn->in[1]].data, *be = g->vals[bn->in[2]].data;
  const float *mu = g->vals[bn->in[3]].data, *var = g->vals[bn->in[4]].data;
  const float *ob = cv->nin > 2 && cv->in[2] >= 0 ? g->vals[cv->in[2]].data : NULL;
  const float *ow = W->data;
  float *nw = g->vals[w].data, *nb = g->vals[b].data;
  for (int64_t o = 0; o < oc; o++) {
    float a = sc[o] / sqrtf(var[o] + eps);
    for (int64_t k = 0; k < per; k++) nw[o * per + k] = ow[o * per + k] * a;
    nb[o] = ((ob ? ob[o] : 0) - mu[o]) * a + be[o];
  }
  if (cv->nin < 3) {
    int *ni = vr_realloc(cv->in, sizeof(int) * 4);
    if (!ni) return vr_errf(err, VR_ENOMEM, "out of memory");
    cv->in = ni;
    cv->nin = 3;
  }
  cv->in[1] = w;
  cv->in[2] = b;
  return 1;
}

/* Maps an activation node to a oneDNN eltwise post-op. */
static int act_post(const vr_graph *g, const vr_node *n, vr_post *p) {
  const char *op = n->op;
  p->kind = VR_POST_ELTWISE;
  p->alpha = p->beta = 0;
  if (!strcmp(op, "Relu")) p->alg = dnnl_eltwise_relu;
  else if (!strcmp(op, "LeakyRelu")) { p->alg = dnnl_eltwise_relu; p->alpha = vr_attr_f(n, "alpha", 0.01f); }
  else if (!strcmp(op, "Sigmoid")) p->alg = dnnl_eltwise_logistic;
  else if (!strcmp(op, "Tanh")) p->alg = dnnl_eltwise_tanh;
  else if (!strcmp(op, "HardSwish")) { p->alg = dnnl_eltwise_hardswish; }
  else if (!strcmp(op, "HardSigmoid")) {
    /* No hardsigmoid in oneDNN 2.6: linear(alpha, beta) then clip(0, 1). */
    p->alg = dnnl_eltwise_linear;
    p->alpha = vr_attr_f(n, "alpha", 0.2f);
    p->beta = vr_attr_f(n, "beta", 0.5f);
    p[1] = (vr_post){VR_POST_ELTWISE, dnnl_eltwise_clip_v2, 0.0f, 1.0f};
    return 2;
  } else if (!strcmp(op, "Elu")) { p->alg = dnnl_eltwise_elu; p->alpha = vr_attr_f(n, "alpha", 1.0f); }
  else if (!strcmp(op, "Gelu")) p->alg = dnnl_eltwise_gelu_erf;
  else if (!strcmp(op, "Swish")) { p->alg = dnnl_eltwise_swish; p->alpha = 1.0f; }
  else if (!strcmp(op, "Clip")) {
    float lo = vr_attr_f(n, "min", -INFINITY), hi = vr_attr_f(n, "max", INFINITY);
    if (n->nin > 1 && n->in[1] >= 0) {
      if (!is_const(g, n->in[1])) return 0;
      lo = *(const float *)g->vals[n->in[1]].data;
    }
    if (n->nin > 2 && n->in[2] >= 0) {
      if (!is_const(g, n->in[2])) return 0;
      hi = *(const float *)g->vals[n->in[2]].data;
    }
    /* ONNX: min > max sets every value to max; clip_v2 then passed the
     * values through unclipped. */
    if (lo > hi) lo = hi;
    p->alg = dnnl_eltwise_clip_v2;
    p->alpha = lo;
    p->beta = hi;
  } else {
    return 0;
  }
  return 1;
}

/* Producers that run on oneDNN with post-ops: Conv with constant weights,
 * Gemm with constant C, MatMul of matrices. */
static int is_gemm_like(const vr_graph *g, const vr_node *p) {
  if (!strcmp(p->op, "Conv")) return is_const(g, p->in[1]);
  if (!strcmp(p->op, "Gemm")) /* alpha 0 with a C runs on the reference kernel (lower_matmul) */
    return p->nin < 3 || p->in[2] < 0 || (is_const(g, p->in[2]) && vr_attr_f(p, "alpha", 1) != 0);
  if (!strcmp(p->op, "MatMul"))
    return g->vals[p->in[0]].ndim >= 2 && g->vals[p->in[1]].ndim >= 2;
  return 0;
}

static void take_output(vr_graph *g, vr_node *p, vr_node *n) {
  p->out[0] = n->out[0];
  g->vals[n->out[0]].producer = (int)(p - g->nodes);
  n->dead = 1;
}

static int same_shape_val(const vr_val *a, const vr_val *b) {
  if (a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

/* Add(x, y) -> Conv(+sum): fused into the LATER of the two producers, so
 * that the other operand already exists when the conv runs. */
static int fuse_sum(vr_graph *g, vr_node *n, const int *uses, vr_errbuf *err) {
  int a = n->in[0], b = n->in[1];
  if (a < 0 || b < 0 || a == b) return 0;
  if (g->vals[a].kind != VR_VAL_RUNTIME || g->vals[b].kind != VR_VAL_RUNTIME) return 0;
  int pa = g->vals[a].producer, pb = g->vals[b].producer;
  int conv_v = pa > pb ? a : b, other = conv_v == a ? b : a;
  vr_node *p = sole_producer(g, conv_v, uses);
  if (!p || strcmp(p->op, "Conv") || p->sum_in >= 0 || p->npost >= VR_MAX_POST) return 0;
  if (!same_shape_val(&g->vals[a], &g->vals[b]) ||
      !same_shape_val(&g->vals[a], &g->vals[n->out[0]]))
    return 0;
  int *ni = vr_realloc(p->in, sizeof(int) * (size_t)(p->nin + 2));
  if (!ni) return vr_errf(err, VR_ENOMEM, "out of memory");
  p->in = ni;
  while (p->nin < 3) p->in[p->nin++] = -1;
  p->in[p->nin] = other;
  p->sum_in = p->nin++;
  p->post[p->npost++] = (vr_post){VR_POST_SUM, 0, 1.0f, 0};
  relabel(p, "Add");
  take_output(g, p, n);
  return 1;
}

/* MatMul(x, W[K,N]) + bias[N] -> MatMul with bias input. Only for a
 * matrix x: a 1-D one runs on the reference kernel (oneDNN wants ranks
 * >= 2), where fusing gains nothing. */
static int fuse_bias(vr_graph *g, vr_node *n, const int *uses, vr_errbuf *err) {
  for (int s = 0; s < 2; s++) {
    int x = n->in[s], c = n->in[1 - s];
    vr_node *p = sole_producer(g, x, uses);
    if (!p || strcmp(p->op, "MatMul") || p->npost || p->nin != 2) continue;
    if (g->vals[p->in[0]].ndim < 2) continue;
    if (!is_const(g, c) || !is_const(g, p->in[1]) || g->vals[p->in[1]].ndim != 2) continue;
    const vr_val *cv = &g->vals[c];
    int64_t nn = g->vals[p->in[1]].shape[1];
    if (vr_numel(cv->ndim, cv->shape) != nn || (cv->ndim && cv->shape[cv->ndim - 1] != nn)) continue;
    if (!same_shape_val(&g->vals[x], &g->vals[n->out[0]])) continue;
    int *ni = vr_realloc(p->in, sizeof(int) * 3);
    if (!ni) return vr_errf(err, VR_ENOMEM, "out of memory");
    p->in = ni;
    p->in[2] = c;
    p->nin = 3;
    relabel(p, "Add");
    take_output(g, p, n);
    return 1;
  }
  return 0;
}

/* ---- pattern rewrites: decomposed LayerNorm and GELU ------------------- */

static vr_node *live_prod(vr_graph *g, int v) {
  if (v < 0 || g->vals[v].producer < 0) return NULL;
  vr_node *p = &g->nodes[g->vals[v].producer];
  return p->dead ? NULL : p;
}

static vr_node *prod_op(vr_graph *g, int v, const char *op) {
  vr_node *p = live_prod(g, v);
  return p && !strcmp(p->op, op) ? p : NULL;
}

static int is_int_const(const vr_graph *g, int v) {
  return v >= 0 && g->vals[v].kind == VR_VAL_CONST && g->vals[v].dtype == VR_DT_I64;
}

/* The scalar value of a constant float tensor with one element, or NAN. */
static float const_scalar(const vr_graph *g, int v) {
  if (v < 0 || g->vals[v].kind != VR_VAL_CONST || vr_numel(g->vals[v].ndim, g->vals[v].shape) != 1)
    return NAN;
  if (g->vals[v].dtype == VR_DT_F32) return *(const float *)g->vals[v].data;
  if (g->vals[v].dtype == VR_DT_F64) return (float)*(const double *)g->vals[v].data;
  return NAN;
}

/* ReduceMean over the last axis only, keepdims. */
static int mean_last(const vr_graph *g, const vr_node *r) {
  const int64_t *ax;
  int k = vr_attr_ints(r, "axes", &ax);
  int rank = g->vals[r->in[0]].ndim;
  if (!vr_attr_i(r, "keepdims", 1) || k != 1) return 0;
  return ax[0] == -1 || ax[0] == rank - 1;
}

static int set_attrs(vr_node *n, const char *op, float eps, vr_errbuf *err) {
  for (int a = 0; a < n->nattr; a++) {
    vr_free(n->attrs[a].name);
    vr_free(n->attrs[a].ints);
    vr_free(n->attrs[a].floats);
    vr_free(n->attrs[a].s);
  }
  n->nattr = 0;
  char *o = vr_strdup(op);
  if (!o) return vr_errf(err, VR_ENOMEM, "out of memory");
  vr_free(n->op);
  n->op = o;
  n->op_id = vr_op_lookup(op);
  snprintf(n->label, sizeof n->label, "%s", op);
  if (eps == eps) { /* not NAN: LayerNormalization's epsilon */
    vr_attr *a = vr_realloc(n->attrs, sizeof(vr_attr) * 2);
    if (!a) return vr_errf(err, VR_ENOMEM, "out of memory");
    n->attrs = a;
    memset(a, 0, sizeof(vr_attr));
    a->name = vr_strdup("epsilon");
    a->type = VR_ATTR_FLOAT;
    a->f = eps;
    if (!a->name) return vr_errf(err, VR_ENOMEM, "out of memory");
    n->nattr = 1;
  }
  return 0;
}

static int const_fill(vr_graph *g, int64_t c, float val, vr_errbuf *err) {
  vr_val like = {0};
  like.ndim = 1;
  like.shape[0] = c;
  int v = new_const(g, &like, err);
  if (v < 0) return v;
  for (int64_t i = 0; i < c; i++) ((float *)g->vals[v].data)[i] = val;
  return v;
}

/* A constant that broadcasts like LayerNormalization's gamma/beta on x of
 * rank xr: c values along the last axis only ([c], [1, c], ...). One with
 * the c values on another axis ([c, 1]) has the same count but scales rows,
 * and a higher rank would change the output's shape. */
static int ln_param(const vr_graph *g, int v, int xr, int64_t c) {
  if (!is_const(g, v)) return 0;
  const vr_val *p = &g->vals[v];
  if (p->ndim < 1 || p->ndim > xr || p->shape[p->ndim - 1] != c) return 0;
  for (int i = 0; i < p->ndim - 1; i++)
    if (p->shape[i] != 1) return 0;
  return 1;
}

/* Div(Sub(x, Mean(x)), Sqrt(Add(Mean(Pow(Sub, 2)), eps))) [* gamma] [+ beta]
 * -> LayerNormalization(x, gamma, beta) on the last axis. */
static int fuse_layernorm(vr_graph *g, vr_node *dv, const int *uses, vr_errbuf *err) {
  if (strcmp(dv->op, "Div") || dv->nin != 2) return 0;
  vr_node *sub = prod_op(g, dv->in[0], "Sub"), *sq = prod_op(g, dv->in[1], "Sqrt");
  if (!sub || !sq || uses[dv->in[0]] != 2 || uses[dv->in[1]] != 1) return 0;
  vr_node *m1 = prod_op(g, sub->in[1], "ReduceMean");
  if (!m1 || m1->in[0] != sub->in[0] || !mean_last(g, m1) || uses[sub->in[1]] != 1) return 0;
  vr_node *ae = prod_op(g, sq->in[0], "Add");
  if (!ae || uses[sq->in[0]] != 1) return 0;
  int eps_v = g->vals[ae->in[1]].kind == VR_VAL_CONST ? ae->in[1] : ae->in[0];
  int var_v = eps_v == ae->in[1] ? ae->in[0] : ae->in[1];
  float eps = const_scalar(g, eps_v);
  vr_node *m2 = prod_op(g, var_v, "ReduceMean");
  if (eps != eps || !m2 || !mean_last(g, m2) || uses[var_v] != 1) return 0;
  vr_node *pw = prod_op(g, m2->in[0], "Pow");
  if (!pw || pw->in[0] != dv->in[0] || const_scalar(g, pw->in[1]) != 2.0f || uses[m2->in[0]] != 1)
    return 0;
  int x = sub->in[0], out = dv->out[0];
  int64_t c = g->vals[x].shape[g->vals[x].ndim - 1];
  if (g->vals[x].dtype != VR_DT_F32 || g->vals[x].ndim < 2) return 0;
  int gamma = -1, beta = -1;
  vr_node *mul = NULL, *add = NULL;
  for (int k = 0; k < g->nnodes && uses[out] == 1 && !g->vals[out].is_output; k++) {
    vr_node *u = &g->nodes[k];
    if (u->dead || u->nin != 2 || (u->in[0] != out && u->in[1] != out)) continue;
    int other = u->in[0] == out ? u->in[1] : u->in[0];
    if (ln_param(g, other, g->vals[x].ndim, c)) {
      if (!mul && !strcmp(u->op, "Mul")) { mul = u; gamma = other; out = u->out[0]; k = -1; continue; }
      if (mul && !add && !strcmp(u->op, "Add")) { add = u; beta = other; out = u->out[0]; break; }
    }
    break;
  }
  if (gamma < 0 && (gamma = const_fill(g, c, 1.0f, err)) < 0) return gamma;
  if (beta < 0 && (beta = const_fill(g, c, 0.0f, err)) < 0) return beta;
  int rc = set_attrs(dv, "LayerNormalization", eps, err);
  if (rc) return rc;
  dv->in[0] = x;
  dv->in[1] = gamma;
  int *ni = vr_realloc(dv->in, sizeof(int) * 3);
  if (!ni) return vr_errf(err, VR_ENOMEM, "out of memory");
  dv->in = ni;
  dv->in[2] = beta;
  dv->nin = 3;
  dv->out[0] = out;
  g->vals[out].producer = (int)(dv - g->nodes);
  sub->dead = sq->dead = m1->dead = ae->dead = m2->dead = pw->dead = 1;
  if (mul) mul->dead = 1;
  if (add) add->dead = 1;
  return 1;
}

/* Mul(Mul(x, Add(Erf(Div(x, sqrt2)), 1)), 0.5) -> Gelu(x), in any operand
 * order of the commutative ops. */
static int fuse_gelu(vr_graph *g, vr_node *m2, const int *uses, vr_errbuf *err) {
  if (strcmp(m2->op, "Mul") || m2->nin != 2) return 0;
  for (int s = 0; s < 2; s++) {
    /* written so that NAN (not a one-value constant) fails the test too */
    if (!(fabsf(const_scalar(g, m2->in[1 - s]) - 0.5f) <= 1e-6f)) continue;
    vr_node *m1 = prod_op(g, m2->in[s], "Mul");
    if (!m1 || uses[m2->in[s]] != 1) continue;
    for (int t = 0; t < 2; t++) {
      int x = m1->in[t];
      vr_node *ad = prod_op(g, m1->in[1 - t], "Add");
      if (!ad || uses[m1->in[1 - t]] != 1) continue;
      int one = const_scalar(g, ad->in[1]) == 1.0f ? 1 : const_scalar(g, ad->in[0]) == 1.0f ? 0 : -1;
      if (one < 0) continue;
      vr_node *ef = prod_op(g, ad->in[1 - one], "Erf");
      if (!ef || uses[ad->in[1 - one]] != 1) continue;
      vr_node *dv = prod_op(g, ef->in[0], "Div");
      if (!dv || dv->in[0] != x || uses[ef->in[0]] != 1 ||
          !(fabsf(const_scalar(g, dv->in[1]) - 1.41421356f) <= 1e-4f))
        continue;
      int rc = set_attrs(m2, "Gelu", NAN, err);
      if (rc) return rc;
      m2->in[0] = x;
      m2->nin = 1;
      m1->dead = ad->dead = ef->dead = dv->dead = 1;
      return 1;
    }
  }
  return 0;
}

/* Mul(x, Sigmoid(x)) -> Swish(x) (SiLU); Mul(x, HardSigmoid(x) with alpha
 * 1/6, beta 1/2) -> HardSwish(x): both then fuse into the producing conv. */
static int fuse_gated(vr_graph *g, vr_node *mul, const int *uses, vr_errbuf *err) {
  if (strcmp(mul->op, "Mul") || mul->nin != 2) return 0;
  for (int s = 0; s < 2; s++) {
    int x = mul->in[s], gv = mul->in[1 - s];
    vr_node *gate = live_prod(g, gv);
    if (!gate || gate->in[0] != x || uses[gv] != 1 || g->vals[x].dtype != VR_DT_F32) continue;
    const char *to = NULL;
    if (!strcmp(gate->op, "Sigmoid")) to = "Swish";
    else if (!strcmp(gate->op, "HardSigmoid") &&
             fabsf(vr_attr_f(gate, "alpha", 0.2f) - 1.0f / 6) < 1e-6f &&
             fabsf(vr_attr_f(gate, "beta", 0.5f) - 0.5f) < 1e-6f)
      to = "HardSwish";
    if (!to) continue;
    int rc = set_attrs(mul, to, NAN, err);
    if (rc) return rc;
    mul->in[0] = x;
    mul->nin = 1;
    gate->dead = 1;
    return 1;
  }
  return 0;
}

/* Pad(x, zeros on spatial dims only) -> Conv / AveragePool(count_include_pad)
 * with the padding added to the consumer's own pads. */
static int fuse_pad(vr_graph *g, vr_node *pad, const int *uses) {
  if (strcmp(pad->op, "Pad") || strcmp(vr_attr_s(pad, "mode", "constant"), "constant")) return 0;
  int v = pad->out[0];
  if (uses[v] != 1 || g->vals[v].is_output || g->vals[pad->in[0]].ndim < 3) return 0;
  int r = g->vals[pad->in[0]].ndim, nsp = r - 2;
  int64_t pads[2 * VR_MAX_DIMS];
  const int64_t *pa;
  int k = vr_attr_ints(pad, "pads", &pa);
  if (k < 0) {
    if (pad->nin < 2 || !is_int_const(g, pad->in[1])) return 0;
    if (pad->nin > 2 && pad->in[2] >= 0 && const_scalar(g, pad->in[2]) != 0.0f) return 0;
    if (pad->nin > 3 && pad->in[3] >= 0) return 0;
    const vr_val *pv = &g->vals[pad->in[1]];
    k = (int)vr_numel(pv->ndim, pv->shape);
    for (int i = 0; i < k && i < 2 * VR_MAX_DIMS; i++) pads[i] = ((const int64_t *)pv->data)[i];
  } else {
    if (vr_attr_f(pad, "value", 0) != 0.0f) return 0;
    for (int i = 0; i < k && i < 2 * VR_MAX_DIMS; i++) pads[i] = pa[i];
  }
  if (k != 2 * r) return 0;
  int zero = 1;
  for (int i = 0; i < 2 * r; i++) zero &= pads[i] == 0;
  if (zero) { /* exporters emit all-zero Pads (e.g. before AvgPool): a no-op */
    vr_free(pad->op);
    pad->op = vr_strdup("Identity");
    if (!pad->op) return VR_ENOMEM;
    pad->op_id = vr_op_lookup("Identity");
    snprintf(pad->label, sizeof pad->label, "Identity");
    pad->nin = 1;
    return 1;
  }
  if (pads[0] || pads[1] || pads[r] || pads[r + 1]) return 0;
  for (int i = 0; i < 2 * r; i++)
    if (pads[i] < 0) return 0;
  vr_node *c = NULL;
  for (int i = 0; i < g->nnodes && !c; i++)
    if (!g->nodes[i].dead && g->nodes[i].nin > 0 && g->nodes[i].in[0] == v) c = &g->nodes[i];
  if (!c) return 0;
  int conv = !strcmp(c->op, "Conv");
  int avg = !strcmp(c->op, "AveragePool") && vr_attr_i(c, "count_include_pad", 0);
  if (!conv && !(avg && !vr_attr_i(c, "ceil_mode", 0))) return 0;
  if (strcmp(vr_attr_s(c, "auto_pad", "NOTSET"), "NOTSET")) return 0;
  vr_attr *cp = NULL;
  for (int a = 0; a < c->nattr; a++)
    if (!strcmp(c->attrs[a].name, "pads")) cp = &c->attrs[a];
  if (!cp) {
    vr_attr *na = vr_realloc(c->attrs, sizeof(vr_attr) * (size_t)(c->nattr + 1));
    if (!na) return 0;
    c->attrs = na;
    cp = &c->attrs[c->nattr++];
    memset(cp, 0, sizeof *cp);
    cp->name = vr_strdup("pads");
    cp->type = VR_ATTR_INTS;
    cp->n = 2 * nsp;
    cp->ints = vr_calloc((size_t)(2 * nsp), sizeof(int64_t));
    if (!cp->name || !cp->ints) return 0;
  }
  if (cp->type != VR_ATTR_INTS || cp->n != 2 * nsp) return 0;
  for (int i = 0; i < nsp; i++) {
    cp->ints[i] += pads[2 + i];
    cp->ints[nsp + i] += pads[r + 2 + i];
  }
  c->in[0] = pad->in[0];
  pad->dead = 1;
  return 1;
}

static int fuse_patterns(vr_graph *g, vr_errbuf *err) {
  int *uses = NULL, rc = 0;
  for (int i = 0; i < g->nnodes && rc >= 0; i++) {
    vr_node *n = &g->nodes[i];
    if (n->dead || (strcmp(n->op, "Div") && strcmp(n->op, "Mul") && strcmp(n->op, "Pad")))
      continue;
    vr_free(uses);
    uses = vr_calloc((size_t)g->nvals + 64, sizeof(int));
    if (!uses) return vr_errf(err, VR_ENOMEM, "out of memory");
    vr_graph_count_uses(g, uses);
    rc = fuse_layernorm(g, n, uses, err);
    if (rc == 0) rc = fuse_gelu(g, &g->nodes[i], uses, err);
    if (rc == 0) rc = fuse_gated(g, &g->nodes[i], uses, err);
    if (rc == 0) rc = fuse_pad(g, &g->nodes[i], uses);
  }
  vr_free(uses);
  return rc < 0 ? rc : 0;
}

int vr_graph_fuse(vr_graph *g, vr_errbuf *err) {
  int prc = fuse_patterns(g, err);
  if (prc) return prc;
  int *uses = vr_calloc((size_t)g->nvals + 64, sizeof(int));
  if (!uses) return vr_errf(err, VR_ENOMEM, "out of memory");
  int rc = 0;
  for (int i = 0; i < g->nnodes && rc >= 0; i++) {
    vr_node *n = &g->nodes[i];
    if (n->dead || n->nin < 1 || n->in[0] < 0) continue;
    /* New constants may have been appended: recount against g->nvals. */
    vr_free(uses);
    uses = vr_calloc((size_t)g->nvals + 64, sizeof(int));
    if (!uses) return vr_errf(err, VR_ENOMEM, "out of memory");
    vr_graph_count_uses(g, uses);
    vr_node *p = sole_producer(g, n->in[0], uses);
    vr_post post[2];
    int np;
    if (!strcmp(n->op, "BatchNormalization") && p && !strcmp(p->op, "Conv")) {
      rc = fold_bn(g, n, p = &g->nodes[g->vals[n->in[0]].producer], err);
      if (rc > 0) {
        n = &g->nodes[i];
        relabel(p, "BN");
        take_output(g, p, n);
      }
    } else if (p && is_gemm_like(g, p) && p->npost < VR_MAX_POST - 1 && n->nout == 1 &&
               (np = act_post(g, n, post)) > 0) {
      for (int k = 0; k < np; k++) p->post[p->npost++] = post[k];
      relabel(p, n->op);
      take_output(g, p, n);
    } else if (p && !strcmp(p->op, "BatchNormalization") && !p->npost && !strcmp(n->op, "Relu") &&
               g->vals[p->in[0]].ndim >= 2) {
      /* oneDNN applies ReLU inside batch normalization (fuse_norm_relu). */
      p->post[p->npost++] = (vr_post){VR_POST_ELTWISE, dnnl_eltwise_relu, 0, 0};
      relabel(p, "Relu");
      take_output(g, p, n);
    } else if (!strcmp(n->op, "Add") && n->nin == 2) {
      rc = fuse_sum(g, n, uses, err);
      if (rc == 0) rc = fuse_bias(g, n, uses, err);
    }
  }
  vr_free(uses);
  return rc < 0 ? rc : 0;
}
