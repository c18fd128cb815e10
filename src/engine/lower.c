/* Lowering of nodes onto oneDNN primitives. Each lower_* returns 0 when it
 * emitted steps, 1 when the configuration is not covered by oneDNN (the
 * builder then uses the reference kernel on plain tensors), <0 on error. */
#include <limits.h>
#include <string.h>

#include "base/alloc.h"
#include "engine/plan_int.h"
#include "engine/quant.h"

#define CHECK(call)                          \
  do {                                       \
    dnnl_status_t s_ = (call);               \
    if (s_ != dnnl_success) return 1;        \
  } while (0)

static const vr_node *node(vr_pb *b, int ni) { return &b->g->nodes[ni]; }
static vr_pval *PV(vr_pb *b, int pv) { return &b->p->pv[pv]; }

static void md_any(dnnl_memory_desc_t *md, const vr_tview *t, dnnl_data_type_t dt) {
  dnnl_dims_t d;
  for (int i = 0; i < t->ndim; i++) d[i] = t->shape[i];
  dnnl_memory_desc_init_by_tag(md, t->ndim, d, dt, dnnl_format_tag_any);
}

/* Post-ops of a fused Conv/Gemm/MatMul. */
static int make_attr(vr_pb *b, const vr_node *n, dnnl_primitive_attr_t *attr) {
  dnnl_post_ops_t po;
  if (dnnl_primitive_attr_create(attr) != dnnl_success) return VR_ENOMEM;
  if (!n->npost) return 0;
  if (dnnl_post_ops_create(&po) != dnnl_success) return VR_ENOMEM;
  for (int i = 0; i < n->npost; i++) {
    const vr_post *p = &n->post[i];
    if (p->kind == VR_POST_SUM) dnnl_post_ops_append_sum(po, 1.0f);
    else dnnl_post_ops_append_eltwise(po, 1.0f, (dnnl_alg_kind_t)p->alg, p->alpha, p->beta);
  }
  dnnl_primitive_attr_set_post_ops(*attr, po);
  dnnl_post_ops_destroy(po);
  return 0;
}

static int query(dnnl_primitive_desc_t pd, dnnl_query_t q, dnnl_memory_desc_t *md) {
  const dnnl_memory_desc_t *m = dnnl_primitive_desc_query_md(pd, q, 0);
  if (!m) return -1;
  *md = *m;
  return 0;
}

/* Destination of a node whose fused sum post-op accumulates into it: the
 * addend is copied (or, if this is its last use, aliased) into dst. xin is
 * the plan value the node reads as its source. */
static int sum_dst(vr_pb *b, const vr_node *n, int xin, const dnnl_memory_desc_t *dmd) {
  int add = vr_pb_pv_of(b, n->in[n->sum_in]);
  if (add < 0) return add;
  int v = n->in[n->sum_in];
  /* In place when this conv is the last reader and does not also read the
   * addend's storage as its source: a view (Identity, Reshape) of the
   * source is another value id over the same bytes, so compare roots. */
  int ni = (int)(n - b->g->nodes);
  if (b->uses[v] == ni && PV(b, xin)->root != PV(b, add)->root &&
      !b->g->vals[v].is_output && !b->g->vals[v].is_input &&
      !PV(b, add)->ext && dnnl_memory_desc_equal(&PV(b, add)->md, dmd))
    return vr_pb_def_alias(b, n->out[0], dmd, add);
  int add2 = vr_pb_as(b, add, dmd);
  if (add2 < 0) return add2;
  if (add2 != add) /* the reordered copy is exactly dst */
    return vr_pb_def_alias(b, n->out[0], dmd, add2);
  int dst = vr_pb_def(b, n->out[0], dmd);
  if (dst < 0) return dst;
  dnnl_primitive_desc_t pd;
  dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, dmd, b->c->eng, dmd, b->c->eng, NULL);
  if (s != dnnl_success) return vr_dnnl_err(b->err, n, s, "sum copy");
  vr_arg a[2] = {{DNNL_ARG_FROM, add}, {DNNL_ARG_TO, dst}};
  int rc = vr_pb_prim(b, -1, pd, a, 2);
  return rc < 0 ? rc : dst;
}

/* int8 chaining: when a quantised conv's output feeds exactly one other
 * conv (and nothing else in the range, and is not a session output), the
 * producer writes u8/s8 directly in the consumer's scale, saving a
 * dequantise + quantise pass over the tensor. Returns the consumer's
 * activation scale, or 0 when the output must stay f32. */
static float chain_scale(vr_pb *b, const vr_node *n, const vr_qparams *q, int *u8) {
  int v = n->out[0];
  if (n->sum_in >= 0 || v < 0 || v >= q->nvals || q->absmax[v] <= 0 || b->g->vals[v].is_output)
    return 0;
  /* oneDNN applies the output scale before the post-ops: a fused eltwise
   * would see values in the consumer's quantised units. Only ReLU (and
   * leaky ReLU, the same kind) commutes with a positive scale; Clip(0, 6)
   * of MobileNetV2 would clip at 6 units of the next scale. */
  for (int i = 0; i < n->npost; i++)
    if (n->post[i].kind != VR_POST_ELTWISE || n->post[i].alg != dnnl_eltwise_relu) return 0;
  if (b->uses[v] == INT_MAX) return 0;
  const vr_node *consumer = NULL;
  for (int i = b->c->node_begin; i < b->c->node_end; i++) {
    const vr_node *c = &b->g->nodes[i];
    for (int k = 0; k < c->nin; k++)
      if (c->in[k] == v) {
        if (consumer || k != 0) return 0;
        consumer = c;
      }
  }
  if (!consumer || strcmp(consumer->op, "Conv") || consumer->nin < 2 ||
      !b->vt[consumer->in[1]].data || vr_attr_i(consumer, "group", 1) != 1)
    return 0;
  *u8 = q->nonneg[v];
  return (*u8 ? 255.0f : 127.0f) / q->absmax[v];
}

static int lower_conv(vr_pb *b, int ni) {
  const vr_node *n = node(b, ni);
  const vr_tview *x = &b->vt[n->in[0]], *w = &b->vt[n->in[1]], *y = &b->vt[n->out[0]];
  if (!w->data) return 1; /* runtime weights: not supported by the fast path */
  vr_geom g;
  if (vr_geom_compute(n, x, w->shape + 2, 0, &g, b->err)) return VR_EINVAL;
  int64_t grp = vr_attr_i(n, "group", 1);
  dnnl_dims_t st, dl, pl, pr, wd;
  for (int i = 0; i < g.nsp; i++) {
    st[i] = g.s[i];
    dl[i] = g.d[i] - 1;
    pl[i] = g.pl[i];
    pr[i] = g.pr[i];
  }
  int wn = 0;
  if (grp > 1) wd[wn++] = grp;
  wd[wn++] = w->shape[0] / grp;
  for (int i = 1; i < w->ndim; i++) wd[wn++] = w->shape[i];
  dnnl_memory_desc_t xmd, wmd, bmd, ymd, wplain;
  dnnl_data_type_t dt = b->c->precision == VR_PREC_BF16 ? dnnl_bf16 : dnnl_f32;
  /* int8: symmetric per-tensor activation scale from calibration, per
   * output-channel weight scales; u8 activations when never negative. */
  const vr_qparams *q = b->c->precision == VR_PREC_INT8 ? b->c->q : NULL;
  int q8 = !b->no_q8 && q && n->in[0] < q->nvals && q->absmax[n->in[0]] > 0;
  /* the int8 bias is pre-scaled from its values: a computed one stays f32 */
  if (n->nin > 2 && n->in[2] >= 0 && !b->vt[n->in[2]].data) q8 = 0;
  float sx = 1, *sw = NULL, *osc = NULL;
  dnnl_data_type_t sdt = dt, wdt = dt;
  if (q8) {
    int u8 = q->nonneg[n->in[0]];
    sdt = u8 ? dnnl_u8 : dnnl_s8;
    wdt = dnnl_s8;
    sx = (u8 ? 255.0f : 127.0f) / q->absmax[n->in[0]];
    int64_t oc = w->shape[0], per = vr_numel(w->ndim - 1, w->shape + 1);
    sw = vr_pb_alloc(b, sizeof(float) * (size_t)oc);
    osc = vr_pb_alloc(b, sizeof(float) * (size_t)oc);
    if (!sw || !osc) return vr_errf(b->err, VR_ENOMEM, "out of memory");
    const float *wf = w->data;
    for (int64_t o = 0; o < oc; o++) {
      float mx = 0;
      for (int64_t k = 0; k < per; k++) {
        float a = wf[o * per + k] < 0 ? -wf[o * per + k] : wf[o * per + k];
        if (a > mx) mx = a;
      }
      sw[o] = mx > 0 ? 127.0f / mx : 1.0f;
      osc[o] = 1.0f / (sx * sw[o]);
    }
  }
  int next_u8 = 0;
  float snext = q8 ? chain_scale(b, n, q, &next_u8) : 0;
  if (snext > 0)
    for (int64_t o = 0; o < w->shape[0]; o++) osc[o] *= snext;
  md_any(&xmd, x, sdt);
  md_any(&ymd, y, snext > 0 ? (next_u8 ? dnnl_u8 : dnnl_s8) : dnnl_f32);
  dnnl_memory_desc_init_by_tag(&wmd, wn, wd, wdt, dnnl_format_tag_any);
  {
    dnnl_dims_t s;
    int64_t acc = 1;
    for (int i = wn - 1; i >= 0; i--) {
      s[i] = acc;
      acc *= wd[i];
    }
    dnnl_memory_desc_init_by_strides(&wplain, wn, wd, dnnl_f32, s);
  }
  int has_b = n->nin > 2 && n->in[2] >= 0;
  dnnl_dims_t bd = {w->shape[0]};
  dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_a);
  dnnl_convolution_desc_t cd;
  CHECK(dnnl_dilated_convolution_forward_desc_init(
      &cd, dnnl_forward_inference, dnnl_convolution_direct, &xmd, &wmd,
      has_b ? &bmd : NULL, &ymd, st, dl, pl, pr));
  dnnl_primitive_attr_t attr;
  if (make_attr(b, n, &attr)) return vr_errf(b->err, VR_ENOMEM, "out of memory");
  int64_t noc = w->shape[0];
  if (q8) dnnl_primitive_attr_set_output_scales(attr, noc, 1 << 1, osc);
  dnnl_primitive_desc_t pd;
  dnnl_status_t s = dnnl_primitive_desc_create(&pd, &cd, attr, b->c->eng, NULL);
  dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) return 1;
  dnnl_memory_desc_t qx, qw, qy;
  query(pd, dnnl_query_src_md, &qx);
  query(pd, dnnl_query_weights_md, &qw);
  query(pd, dnnl_query_dst_md, &qy);
  void *wdata;
  dnnl_primitive_attr_t wattr = NULL;
  if (q8 && dnnl_primitive_attr_create(&wattr) == dnnl_success)
    dnnl_primitive_attr_set_output_scales(wattr, noc, grp > 1 ? 3 : 1, sw);
  int rc = vr_pb_weights(b, n->in[1], &wplain, &qw, wattr, &wdata);
  if (wattr) dnnl_primitive_attr_destroy(wattr);
  if (rc == VR_EUNSUPPORTED && q8) {
    dnnl_primitive_desc_destroy(pd);
    return rc;
  }
  int xin = rc ? rc : vr_pb_pv_of(b, n->in[0]);
  if (xin >= 0) {
    dnnl_data_type_t have = PV(b, xin)->md.data_type;
    int chained = have == dnnl_u8 || have == dnnl_s8; /* from chain_scale */
    if (chained && q8) {
      xin = vr_pb_as(b, xin, &qx); /* already in this conv's scale */
    } else if (chained) { /* int8 input but this conv fell back to f32 */
      float s_in = (have == dnnl_u8 ? 255.0f : 127.0f) / q->absmax[n->in[0]];
      xin = vr_pb_quantize(b, xin, &qx, 1.0f / s_in);
    } else {
      xin = q8 ? vr_pb_quantize(b, xin, &qx, sx) : vr_pb_as(b, xin, &qx);
    }
  }
  if (xin < 0) {
    dnnl_primitive_desc_destroy(pd);
    return xin;
  }
  vr_tview wt = *w;
  int wpv = vr_pb_new_pv(b, &wt, &qw);
  if (wpv < 0) { dnnl_primitive_desc_destroy(pd); return wpv; }
  PV(b, wpv)->ext = wdata;
  int y_pv = n->sum_in >= 0 ? sum_dst(b, n, xin, &qy) : vr_pb_def(b, n->out[0], &qy);
  if (y_pv < 0) { dnnl_primitive_desc_destroy(pd); return y_pv; }
  vr_arg a[4] = {{DNNL_ARG_SRC, xin}, {DNNL_ARG_WEIGHTS, wpv}, {DNNL_ARG_DST, y_pv}};
  int na = 3;
  if (has_b) {
    int bpv = vr_pb_pv_of(b, n->in[2]);
    if (bpv < 0) { dnnl_primitive_desc_destroy(pd); return bpv; }
    if (q8) {
      /* oneDNN 2.x int8 adds the bias to the integer accumulator before the
       * output scales: pre-scale it into accumulator units. */
      vr_tview bt = PV(b, bpv)->t;
      float *sb = vr_pb_alloc(b, sizeof(float) * (size_t)noc);
      if (!sb) { dnnl_primitive_desc_destroy(pd); return vr_errf(b->err, VR_ENOMEM, "out of memory"); }
      for (int64_t o = 0; o < noc; o++) sb[o] = ((const float *)b->vt[n->in[2]].data)[o] * sx * sw[o];
      bpv = vr_pb_new_pv(b, &bt, &PV(b, bpv)->md);
      if (bpv < 0) { dnnl_primitive_desc_destroy(pd); return bpv; }
      PV(b, bpv)->ext = sb;
    }
    a[na++] = (vr_arg){DNNL_ARG_BIAS, bpv};
  }
  return vr_pb_prim(b, ni, pd, a, na);
}

/* MatMul / Gemm: dims padded to the output rank (>= 2). */
static void md_rank(dnnl_memory_desc_t *md, const vr_tview *t, int rank, int trans,
                    dnnl_data_type_t dt, int any) {
  dnnl_dims_t d, s;
  int off = rank - t->ndim;
  for (int i = 0; i < rank; i++) d[i] = i < off ? 1 : t->shape[i - off];
  int64_t acc = 1;
  for (int i = rank - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= d[i];
  }
  if (trans) { /* logical [.., K, N] viewing a stored [.., N, K] */
    int64_t r0 = d[rank - 2];
    d[rank - 2] = d[rank - 1];
    d[rank - 1] = r0;
    s[rank - 1] = d[rank - 2];
    s[rank - 2] = 1;
  }
  if (any) dnnl_memory_desc_init_by_tag(md, rank, d, dt, dnnl_format_tag_any);
  else dnnl_memory_desc_init_by_strides(md, rank, d, dt, s);
}

/* Value v's plain buffer seen through md (a padded or transposed view of
 * the same bytes): a new plan value that shares its storage. */
static int plain_view(vr_pb *b, int v, const dnnl_memory_desc_t *md) {
  int pv = vr_pb_pv_of(b, v);
  if (pv >= 0) pv = vr_pb_plain(b, pv);
  if (pv < 0) return pv;
  vr_tview t = PV(b, pv)->t;
  int nv = vr_pb_new_pv(b, &t, md);
  if (nv >= 0) {
    PV(b, nv)->root = PV(b, pv)->root;
    PV(b, nv)->ext = PV(b, pv)->ext;
    PV(b, nv)->bytes = 0;
  }
  return nv;
}

static int lower_matmul(vr_pb *b, int ni, int gemm) {
  const vr_node *n = node(b, ni);
  vr_tview a = b->vt[n->in[0]], w = b->vt[n->in[1]];
  vr_tview yv = b->vt[n->out[0]];
  const vr_tview *y = &yv;
  if (a.ndim < 2 || w.ndim < 2 || y->ndim > 6) return 1;
  /* oneDNN 2.6 divides by M while it creates a matmul: M = 0 (an empty
   * slice as input) raised SIGFPE, and so did K = 0 in bf16. An empty
   * operand needs no GEMM: the reference kernel writes nothing, or C. */
  if (vr_tview_numel(y) == 0 || vr_tview_numel(&a) == 0 || vr_tview_numel(&w) == 0) return 1;
  /* [..., M, K] x [K, N]: fold the batch dims into M, one big GEMM instead
   * of many small ones (plain buffers make both views the same bytes). */
  int collapsed = 0;
  if (!gemm && w.ndim == 2 && a.ndim > 2) {
    int64_t k = a.shape[a.ndim - 1];
    a.shape[0] = vr_tview_numel(&a) / (k ? k : 1);
    a.shape[1] = k;
    a.ndim = 2;
    yv.shape[0] = a.shape[0];
    yv.shape[1] = w.shape[1];
    yv.ndim = 2;
    collapsed = 1;
  }
  int ta = gemm ? (int)vr_attr_i(n, "transA", 0) : 0;
  int tb = gemm ? (int)vr_attr_i(n, "transB", 0) : 0;
  float alpha = gemm ? vr_attr_f(n, "alpha", 1) : 1, beta = gemm ? vr_attr_f(n, "beta", 1) : 1;
  int has_c = n->nin > 2 && n->in[2] >= 0;
  if (has_c && !b->vt[n->in[2]].data) return 1;
  /* the bias goes in before the output scale alpha, divided by it: with
   * alpha 0 (Y = beta C) the reference kernel computes it instead */
  if (has_c && alpha == 0) return 1;
  int r = y->ndim;
  dnnl_memory_desc_t amd, aq, wmd, wsrc, ymd, cmd;
  /* bf16 takes constant weights, reordered once; runtime ones stay f32
   * and oneDNN has no bf16 x f32 matmul (nor the reference kernel a fused
   * post-op): such a node computes in f32. */
  int wconst = w.data != NULL;
  dnnl_data_type_t dt = b->c->precision == VR_PREC_BF16 && wconst ? dnnl_bf16 : dnnl_f32;
  md_rank(&amd, &a, r, ta, dnnl_f32, 0);
  aq = amd;
  if (dt != dnnl_f32) md_rank(&aq, &a, r, ta, dt, 1);
  md_rank(&wsrc, &w, r, tb, dnnl_f32, 0);
  md_rank(&wmd, &w, r, tb, dt, wconst);
  if (!wconst) wmd = wsrc;
  md_rank(&ymd, y, r, 0, dnnl_f32, 0);
  int64_t N = y->shape[r - 1], K = a.shape[a.ndim - 1 - ta];
  /* int8 (see lower_conv): constant 2-D weights, per-column scales, so a
   * C must have its N columns along the last axis (a 0-d or [1] C, one
   * value for all columns, stays f32). */
  const vr_qparams *q = b->c->precision == VR_PREC_INT8 ? b->c->q : NULL;
  const vr_tview *cv = has_c ? &b->vt[n->in[2]] : NULL;
  int q8 = !b->no_q8 && q && wconst && w.ndim == 2 && n->in[0] < q->nvals && q->absmax[n->in[0]] > 0 &&
           (!cv || (cv->ndim >= 1 && cv->shape[cv->ndim - 1] == N));
  float sx = 1, *sw = NULL, *osc = NULL;
  if (q8) {
    int u8 = q->nonneg[n->in[0]];
    sx = (u8 ? 255.0f : 127.0f) / q->absmax[n->in[0]];
    sw = vr_pb_alloc(b, sizeof(float) * (size_t)N);
    osc = vr_pb_alloc(b, sizeof(float) * (size_t)N);
    if (!sw || !osc) return vr_errf(b->err, VR_ENOMEM, "out of memory");
    const float *wf = w.data;
    for (int64_t j = 0; j < N; j++) {
      float mx = 0;
      for (int64_t k = 0; k < K; k++) {
        float v = wf[tb ? j * K + k : k * N + j];
        if (v < 0) v = -v;
        if (v > mx) mx = v;
      }
      sw[j] = mx > 0 ? 127.0f / mx : 1.0f;
      osc[j] = alpha / (sx * sw[j]);
    }
    md_rank(&aq, &a, r, ta, u8 ? dnnl_u8 : dnnl_s8, 1);
    md_rank(&wmd, &w, r, tb, dnnl_s8, 1);
  }
  float *cdata = NULL;
  if (has_c) {
    vr_tview c = b->vt[n->in[2]];
    md_rank(&cmd, &c, r, 0, dnnl_f32, 0);
    int64_t cnt = vr_tview_numel(&c);
    cdata = vr_pb_alloc(b, (size_t)cnt * 4);
    if (!cdata) return vr_errf(b->err, VR_ENOMEM, "out of memory");
    /* Bias is added before the output scale: bring it to that scale. */
    for (int64_t i = 0; i < cnt; i++)
      cdata[i] = (float)(beta * vr_tview_getf(&c, i) / alpha * (q8 ? sx * sw[i % N] : 1));
  }
  dnnl_matmul_desc_t md;
  CHECK(dnnl_matmul_desc_init(&md, &aq, &wmd, has_c ? &cmd : NULL, &ymd));
  dnnl_primitive_attr_t attr;
  if (make_attr(b, n, &attr)) return vr_errf(b->err, VR_ENOMEM, "out of memory");
  if (q8) dnnl_primitive_attr_set_output_scales(attr, N, 1 << (r - 1), osc);
  else if (alpha != 1) dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha);
  dnnl_primitive_desc_t pd;
  dnnl_status_t s = dnnl_primitive_desc_create(&pd, &md, attr, b->c->eng, NULL);
  dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) return 1;
  dnnl_memory_desc_t qa, qw;
  query(pd, dnnl_query_src_md, &qa);
  query(pd, dnnl_query_weights_md, &qw);
  /* Weights first: when their int8 reorder fails the node is lowered
   * again in f32, and nothing (an input quantize) may be left emitted. */
  int wpv;
  if (wconst) {
    void *wd;
    dnnl_primitive_attr_t wattr = NULL;
    if (q8 && dnnl_primitive_attr_create(&wattr) == dnnl_success)
      dnnl_primitive_attr_set_output_scales(wattr, N, 1 << (r - 1), sw);
    int rc = vr_pb_weights(b, n->in[1], &wsrc, &qw, wattr, &wd);
    if (wattr) dnnl_primitive_attr_destroy(wattr);
    if (rc == VR_EUNSUPPORTED && q8) {
      dnnl_primitive_desc_destroy(pd);
      return rc;
    }
    wpv = rc ? rc : vr_pb_new_pv(b, &w, &qw);
    if (wpv >= 0) PV(b, wpv)->ext = wd;
  } else {
    wpv = plain_view(b, n->in[1], &wsrc);
  }
  if (wpv < 0) { dnnl_primitive_desc_destroy(pd); return wpv; }
  int apv = plain_view(b, n->in[0], &amd);
  if (apv >= 0) apv = q8 ? vr_pb_quantize(b, apv, &qa, sx) : vr_pb_as(b, apv, &qa);
  if (apv < 0) { dnnl_primitive_desc_destroy(pd); return apv; }
  int ypv = vr_pb_def(b, n->out[0], collapsed ? NULL : &ymd);
  if (ypv >= 0 && collapsed) { /* 2-D view of the plain output */
    vr_tview t = PV(b, ypv)->t;
    int v = vr_pb_new_pv(b, &t, &ymd);
    if (v >= 0) {
      PV(b, v)->root = PV(b, ypv)->root;
      PV(b, v)->bytes = 0;
    }
    ypv = v;
  }
  if (ypv < 0) { dnnl_primitive_desc_destroy(pd); return ypv; }
  vr_arg args[4] = {{DNNL_ARG_SRC, apv}, {DNNL_ARG_WEIGHTS, wpv}, {DNNL_ARG_DST, ypv}};
  int na = 3;
  if (has_c) {
    vr_tview c = b->vt[n->in[2]];
    int cpv = vr_pb_new_pv(b, &c, &cmd);
    if (cpv < 0) { dnnl_primitive_desc_destroy(pd); return cpv; }
    PV(b, cpv)->ext = cdata;
    args[na++] = (vr_arg){DNNL_ARG_BIAS, cpv};
  }
  return vr_pb_prim(b, ni, pd, args, na);
}

/* ConvTranspose on oneDNN deconvolution. ONNX weights are [C_in, M/g, k..];
 * oneDNN wants (g,) oc, ic, k.. : a strided view of the same bytes. */
static int lower_deconv(vr_pb *b, int ni) {
  const vr_node *n = node(b, ni);
  const vr_tview *x = &b->vt[n->in[0]], *w = &b->vt[n->in[1]], *y = &b->vt[n->out[0]];
  if (!w->data) return 1;
  vr_geom g;
  if (vr_deconv_geom(n, x, w, &g, b->err)) return VR_EINVAL;
  int64_t grp = vr_attr_i(n, "group", 1), icg = w->shape[0] / grp, ocg = w->shape[1];
  dnnl_dims_t st, dl, pl, pr, wd, ws;
  for (int i = 0; i < g.nsp; i++) {
    st[i] = g.s[i];
    dl[i] = g.d[i] - 1;
    pl[i] = g.pl[i];
    pr[i] = g.pr[i];
  }
  int64_t ksz = vr_numel(g.nsp, w->shape + 2);
  int wn = 0;
  if (grp > 1) { wd[wn] = grp; ws[wn++] = icg * ocg * ksz; }
  wd[wn] = ocg; ws[wn++] = ksz;       /* oc stride in [ic, oc, k] storage */
  wd[wn] = icg; ws[wn++] = ocg * ksz; /* ic stride */
  for (int i = 0; i < g.nsp; i++) {
    wd[wn] = w->shape[2 + i];
    ws[wn++] = vr_numel(g.nsp - i - 1, w->shape + 3 + i);
  }
  dnnl_memory_desc_t xmd, wmd, wsrc, bmd, ymd;
  md_any(&xmd, x, dnnl_f32);
  md_any(&ymd, y, dnnl_f32);
  dnnl_memory_desc_init_by_tag(&wmd, wn, wd, dnnl_f32, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_strides(&wsrc, wn, wd, dnnl_f32, ws);
  int has_b = n->nin > 2 && n->in[2] >= 0;
  dnnl_dims_t bd = {y->shape[1]};
  dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_a);
  dnnl_deconvolution_desc_t dd;
  CHECK(dnnl_dilated_deconvolution_forward_desc_init(&dd, dnnl_forward_inference,
                                                    dnnl_deconvolution_direct, &xmd, &wmd,
                                                    has_b ? &bmd : NULL, &ymd, st, dl, pl, pr));
  dnnl_primitive_desc_t pd;
  if (dnnl_primitive_desc_create(&pd, &dd, NULL, b->c->eng, NULL) != dnnl_success) return 1;
  dnnl_memory_desc_t qx, qw, qy;
  query(pd, dnnl_query_src_md, &qx);
  query(pd, dnnl_query_weights_md, &qw);
  query(pd, dnnl_query_dst_md, &qy);
  void *wdata;
  int rc = vr_pb_weights(b, n->in[1], &wsrc, &qw, NULL, &wdata);
  int xin = rc ? rc : vr_pb_pv_of(b, n->in[0]);
  if (xin >= 0) xin = vr_pb_as(b, xin, &qx);
  int wpv = xin < 0 ? xin : vr_pb_new_pv(b, w, &qw);
  if (wpv >= 0) PV(b, wpv)->ext = wdata;
  int ypv = wpv < 0 ? wpv : vr_pb_def(b, n->out[0], &qy);
  if (ypv < 0) {
    dnnl_primitive_desc_destroy(pd);
    return ypv;
  }
  vr_arg a[4] = {{DNNL_ARG_SRC, xin}, {DNNL_ARG_WEIGHTS, wpv}, {DNNL_ARG_DST, ypv}};
  int na = 3;
  if (has_b) {
    int bpv = vr_pb_pv_of(b, n->in[2]);
    if (bpv < 0) { dnnl_primitive_desc_destroy(pd); return bpv; }
    a[na++] = (vr_arg){DNNL_ARG_BIAS, bpv};
  }
  return vr_pb_prim(b, ni, pd, a, na);
}

int vr_lower_nn(vr_pb *b, int ni);

static int lower_gemm_like(vr_pb *b, int ni) {
  const vr_node *n = node(b, ni);
  if (!strcmp(n->op, "Conv")) return lower_conv(b, ni);
  return lower_matmul(b, ni, !strcmp(n->op, "Gemm"));
}

int vr_lower_node(vr_pb *b, int ni) {
  const vr_node *n = node(b, ni);
  if (!strcmp(n->op, "ConvTranspose")) return lower_deconv(b, ni);
  if (strcmp(n->op, "Conv") && strcmp(n->op, "MatMul") && strcmp(n->op, "Gemm"))
    return vr_lower_nn(b, ni);
  int rc = lower_gemm_like(b, ni);
  /* int8 falls back to fp32 for a node whose quantised weight layout
   * oneDNN cannot produce (seen with some grouped / s8-source cases).
   * Nothing was emitted for the node when the weight reorder failed. */
  if (rc == VR_EUNSUPPORTED && b->c->precision == VR_PREC_INT8 && !b->no_q8) {
    b->no_q8 = 1;
    rc = lower_gemm_like(b, ni);
    b->no_q8 = 0;
  }
  return rc;
}
