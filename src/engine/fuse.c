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

static int new_const(vr_graph *g, const vr_val *like, vr_errbuf *err) {
  int vi = vr_graph_add_val(g, NULL);
  if (vi < 0) return vr_errf(err, VR_ENOMEM, "out of memory");
  int64_t cnt = vr_numel(like->ndim, like->shape);
  void *d = vr_aligned_alloc(64, (size_t)(cnt ? cnt : 1) * 4);
  if (!d) return vr_errf(err, VR_ENOMEM, "out of memory");
  vr_val_set_const(&g->vals[vi], VR_DT_F32, like->ndim, like->shape, d);
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
  const vr_val *bnv = &g->vals[bn->in[1]];
  int b = new_const(g, bnv, err);
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
  if (!strcmp(p->op, "Gemm"))
    return p->nin < 3 || p->in[2] < 0 || is_const(g, p->in[2]);
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

/* MatMul(x, W[K,N]) + bias[N] -> MatMul with bias input. */
static int fuse_bias(vr_graph *g, vr_node *n, const int *uses, vr_errbuf *err) {
  for (int s = 0; s < 2; s++) {
    int x = n->in[s], c = n->in[1 - s];
    vr_node *p = sole_producer(g, x, uses);
    if (!p || strcmp(p->op, "MatMul") || p->npost || p->nin != 2) continue;
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

int vr_graph_fuse(vr_graph *g, vr_errbuf *err) {
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
    } else if (!strcmp(n->op, "Add") && n->nin == 2) {
      rc = fuse_sum(g, n, uses, err);
      if (rc == 0) rc = fuse_bias(g, n, uses, err);
    }
  }
  vr_free(uses);
  return rc < 0 ? rc : 0;
}
