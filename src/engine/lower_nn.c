/* Lowering of pools, normalisations, element-wise ops, Softmax, LRN,
 * Concat and pure reshapes. These run in whatever layout their input has
 * (blocked after a convolution), so they never force a reorder. */
#include <string.h>

#include "engine/plan_int.h"

#define CHECK(call)                   \
  do {                                \
    if ((call) != dnnl_success) return 1; \
  } while (0)

static vr_pval *PV(vr_pb *b, int pv) { return &b->p->pv[pv]; }

static int in_pv(vr_pb *b, const vr_node *n, int i) {
  return vr_pb_pv_of(b, n->in[i]);
}

/* Creates the pd from an op descriptor and emits src -> dst (+ extras). */
static int emit(vr_pb *b, int ni, const void *desc, int src, int inplace,
                const vr_arg *extra, int nextra) {
  const vr_node *n = &b->g->nodes[ni];
  dnnl_primitive_desc_t pd;
  if (dnnl_primitive_desc_create(&pd, desc, NULL, b->c->eng, NULL) != dnnl_success) return 1;
  const dnnl_memory_desc_t *q = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  const dnnl_memory_desc_t *qs = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  if (qs && src >= 0 && !dnnl_memory_desc_equal(qs, &PV(b, src)->md)) {
    src = vr_pb_as(b, src, qs);
    if (src < 0) {
      dnnl_primitive_desc_destroy(pd);
      return src;
    }
  }
  int v = n->in[0];
  int can_alias = inplace && b->uses[v] == ni && !b->g->vals[v].is_output &&
                  !b->g->vals[v].is_input && !PV(b, src)->ext &&
                  dnnl_memory_desc_equal(q, &PV(b, src)->md);
  int dst = can_alias ? vr_pb_def_alias(b, n->out[0], q, src) : vr_pb_def(b, n->out[0], q);
  if (dst < 0) {
    dnnl_primitive_desc_destroy(pd);
    return dst;
  }
  vr_arg a[8] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  int na = 2;
  for (int i = 0; i < nextra && na < 8; i++) a[na++] = extra[i];
  return vr_pb_prim(b, ni, pd, a, na);
}

/* AveragePool with count_include_pad: the divisor of a window is its part
 * within the input and the explicit pads (ONNX, PyTorch). ceil_mode may
 * have widened the right padding (vr_geom_compute) so that the last
 * window fits, and oneDNN would count that widening too. Without explicit
 * pads the divisor is the window within the input: exclude_padding is
 * the same thing. -> the oneDNN algorithm, or -1 when neither is. */
static int ceil_avg_alg(const vr_node *n, const vr_geom *g) {
  const char *ap = vr_attr_s(n, "auto_pad", "NOTSET");
  if (!strncmp(ap, "SAME_", 5)) return dnnl_pooling_avg_include_padding; /* not widened */
  const int64_t *pads = NULL;
  int np = vr_attr_ints(n, "pads", &pads), any_pad = 0, widened = 0;
  for (int i = 0; i < np; i++) any_pad |= pads[i] != 0;
  for (int i = 0; i < g->nsp; i++)
    widened |= g->pr[i] > (np == 2 * g->nsp ? pads[g->nsp + i] : 0);
  if (!widened) return dnnl_pooling_avg_include_padding;
  return any_pad ? -1 : dnnl_pooling_avg_exclude_padding;
}

static int lower_pool(vr_pb *b, int ni, int global) {
  const vr_node *n = &b->g->nodes[ni];
  const vr_tview *x = &b->vt[n->in[0]], *y = &b->vt[n->out[0]];
  vr_geom g;
  int nsp = x->ndim - 2;
  if (nsp < 1 || nsp > 3) return 1;
  if (global) {
    g.nsp = nsp;
    for (int i = 0; i < nsp; i++) {
      g.k[i] = x->shape[2 + i];
      g.s[i] = 1; g.d[i] = 1; g.pl[i] = g.pr[i] = 0;
    }
  } else if (vr_geom_compute(n, x, NULL, (int)vr_attr_i(n, "ceil_mode", 0), &g, b->err)) {
    return VR_EINVAL;
  }
  dnnl_dims_t k, s, d, pl, pr;
  for (int i = 0; i < nsp; i++) {
    k[i] = g.k[i]; s[i] = g.s[i]; d[i] = g.d[i] - 1; pl[i] = g.pl[i]; pr[i] = g.pr[i];
  }
  dnnl_alg_kind_t alg;
  if (strstr(n->op, "Max")) alg = dnnl_pooling_max;
  else alg = global || vr_attr_i(n, "count_include_pad", 0) ? dnnl_pooling_avg_include_padding
                                                          : dnnl_pooling_avg_exclude_padding;
  if (alg == dnnl_pooling_avg_include_padding && !global) {
    int a = ceil_avg_alg(n, &g);
    if (a < 0)
      return vr_bad(b->err, n, VR_EUNSUPPORTED, "count_include_pad with ceil_mode and "
                    "explicit pads (a window past the pads counts only up to them)");
    alg = (dnnl_alg_kind_t)a;
  }
  int src = in_pv(b, n, 0);
  if (src < 0) return src;
  dnnl_memory_desc_t ymd;
  dnnl_dims_t yd;
  for (int i = 0; i < y->ndim; i++) yd[i] = y->shape[i];
  dnnl_memory_desc_init_by_tag(&ymd, y->ndim, yd, dnnl_f32, dnnl_format_tag_any);
  dnnl_pooling_v2_desc_t pd;
  CHECK(dnnl_pooling_v2_forward_desc_init(&pd, dnnl_forward_inference, alg, &PV(b, src)->md,
                                          &ymd, s, k, d, pl, pr));
  return emit(b, ni, &pd, src, 0, NULL, 0);
}

static int lower_bn(vr_pb *b, int ni) {
  const vr_node *n = &b->g->nodes[ni];
  for (int i = 1; i < 5; i++)
    if (!b->vt[n->in[i]].data) return 1;
  int src = in_pv(b, n, 0);
  if (src < 0) return src;
  dnnl_batch_normalization_desc_t d;
  unsigned flags = dnnl_use_global_stats | dnnl_use_scale | dnnl_use_shift;
  if (n->npost) flags |= dnnl_fuse_norm_relu; /* the only post-op fuse.c adds here */
  CHECK(dnnl_batch_normalization_forward_desc_init(
      &d, dnnl_forward_inference, &PV(b, src)->md, vr_attr_f(n, "epsilon", 1e-5f), flags));
  vr_arg ex[4];
  static const int kinds[4] = {DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
  for (int i = 0; i < 4; i++) {
    int pv = in_pv(b, n, 1 + i);
    if (pv < 0) return pv;
    ex[i] = (vr_arg){kinds[i], pv};
  }
  return emit(b, ni, &d, src, 1, ex, 4);
}

static int eltwise_alg(const vr_node *n, dnnl_alg_kind_t *alg, float *a, float *bb) {
  const char *op = n->op;
  *a = *bb = 0;
  if (!strcmp(op, "Relu")) *alg = dnnl_eltwise_relu;
  else if (!strcmp(op, "LeakyRelu")) { *alg = dnnl_eltwise_relu; *a = vr_attr_f(n, "alpha", 0.01f); }
  else if (!strcmp(op, "Sigmoid")) *alg = dnnl_eltwise_logistic;
  else if (!strcmp(op, "Tanh")) *alg = dnnl_eltwise_tanh;
  else if (!strcmp(op, "HardSwish")) *alg = dnnl_eltwise_hardswish;
  else if (!strcmp(op, "Elu")) { *alg = dnnl_eltwise_elu; *a = vr_attr_f(n, "alpha", 1); }
  else if (!strcmp(op, "Exp")) *alg = dnnl_eltwise_exp;
  else if (!strcmp(op, "Gelu")) *alg = dnnl_eltwise_gelu_erf;
  else if (!strcmp(op, "Swish")) { *alg = dnnl_eltwise_swish; *a = 1.0f; }
  else if (!strcmp(op, "Sqrt")) *alg = dnnl_eltwise_sqrt;
  else if (!strcmp(op, "Abs")) *alg = dnnl_eltwise_abs;
  else if (!strcmp(op, "Erf")) return 0; /* no plain erf in oneDNN 2.6 */
  else return 0;
  return 1;
}

static int lower_eltwise(vr_pb *b, int ni) {
  const vr_node *n = &b->g->nodes[ni];
  dnnl_alg_kind_t alg;
  float a, bb;
  if (b->vt[n->in[0]].dt != VR_DT_F32 || !eltwise_alg(n, &alg, &a, &bb)) return 1;
  int src = in_pv(b, n, 0);
  if (src < 0) return src;
  dnnl_eltwise_desc_t d;
  CHECK(dnnl_eltwise_forward_desc_init(&d, dnnl_forward_inference, alg, &PV(b, src)->md, a, bb));
  return emit(b, ni, &d, src, 1, NULL, 0);
}

/* A plain md of t padded with leading 1s to rank r. */
static void md_padded(dnnl_memory_desc_t *md, const vr_tview *t, int r) {
  vr_tview u = *t;
  u.ndim = r;
  for (int i = 0; i < r; i++) u.shape[i] = i < r - t->ndim ? 1 : t->shape[i - (r - t->ndim)];
  vr_md_plain(md, &u);
}

static int lower_binary(vr_pb *b, int ni) {
  const vr_node *n = &b->g->nodes[ni];
  dnnl_alg_kind_t alg;
  if (!strcmp(n->op, "Add")) alg = dnnl_binary_add;
  else if (!strcmp(n->op, "Sub")) alg = dnnl_binary_sub;
  else if (!strcmp(n->op, "Mul")) alg = dnnl_binary_mul;
  else if (!strcmp(n->op, "Div")) alg = dnnl_binary_div;
  else return 1;
  const vr_tview *y = &b->vt[n->out[0]];
  int i0 = 0, i1 = 1;
  const vr_tview *t0 = &b->vt[n->in[0]], *t1 = &b->vt[n->in[1]];
  if (t0->dt != VR_DT_F32 || y->ndim < 1 || y->ndim > 6) return 1;
  if (vr_tview_numel(t0) != vr_tview_numel(y)) {
    if (alg != dnnl_binary_add && alg != dnnl_binary_mul) return 1;
    i0 = 1; i1 = 0;
    const vr_tview *t = t0; t0 = t1; t1 = t;
    if (vr_tview_numel(t0) != vr_tview_numel(y)) return 1;
  }
  int s0 = in_pv(b, n, i0), s1 = in_pv(b, n, i1);
  if (s0 < 0 || s1 < 0) return s0 < 0 ? s0 : s1;
  dnnl_memory_desc_t m0 = PV(b, s0)->md, m1 = PV(b, s1)->md;
  if (t0->ndim != y->ndim) { /* same numel, lower rank: plain view */
    if ((s0 = vr_pb_plain(b, s0)) < 0) return s0;
    md_padded(&m0, t0, y->ndim);
  }
  if (t1->ndim != y->ndim || !dnnl_memory_desc_equal(&m1, &m0)) {
    if ((s1 = vr_pb_plain(b, s1)) < 0) return s1;
    md_padded(&m1, t1, y->ndim);
  }
  /* Views with padded dims alias the plain buffers. */
  int v0 = s0, v1 = s1;
  if (!dnnl_memory_desc_equal(&m0, &PV(b, s0)->md)) {
    v0 = vr_pb_new_pv(b, &PV(b, s0)->t, &m0);
    if (v0 < 0) return v0;
    PV(b, v0)->root = PV(b, s0)->root; PV(b, v0)->ext = PV(b, s0)->ext; PV(b, v0)->bytes = 0;
  }
  if (!dnnl_memory_desc_equal(&m1, &PV(b, s1)->md)) {
    v1 = vr_pb_new_pv(b, &PV(b, s1)->t, &m1);
    if (v1 < 0) return v1;
    PV(b, v1)->root = PV(b, s1)->root; PV(b, v1)->ext = PV(b, s1)->ext; PV(b, v1)->bytes = 0;
  }
  dnnl_binary_desc_t d;
  CHECK(dnnl_binary_desc_init(&d, alg, &m0, &m1, &m0));
  dnnl_primitive_desc_t pd;
  if (dnnl_primitive_desc_create(&pd, &d, NULL, b->c->eng, NULL) != dnnl_success) return 1;
  int dst = vr_pb_def(b, n->out[0], &m0);
  if (dst < 0) { dnnl_primitive_desc_destroy(pd); return dst; }
  vr_arg a[3] = {{DNNL_ARG_SRC_0, v0}, {DNNL_ARG_SRC_1, v1}, {DNNL_ARG_DST, dst}};
  return vr_pb_prim(b, ni, pd, a, 3);
}

static int lower_softmax(vr_pb *b, int ni) {
  const vr_node *n = &b->g->nodes[ni];
  int logsm = !strcmp(n->op, "LogSoftmax");
  if (!logsm && strcmp(n->op, "Softmax")) return 1;
  int64_t outer, len, inner;
  const vr_tview *x = &b->vt[n->in[0]];
  if (vr_softmax_dims(n, x, &outer, &len, &inner) || len == 0 || outer * inner == 0) return 1;
  int src = in_pv(b, n, 0);
  if (src < 0 || (src = vr_pb_plain(b, src)) < 0) return src;
  /* A 3-D view [outer, len, inner] of the plain buffer. */
  vr_tview v = {VR_DT_F32, 3, {outer, len, inner}, NULL};
  dnnl_memory_desc_t md;
  vr_md_plain(&md, &v);
  int sv = vr_pb_new_pv(b, &PV(b, src)->t, &md);
  if (sv < 0) return sv;
  PV(b, sv)->root = PV(b, src)->root; PV(b, sv)->ext = PV(b, src)->ext; PV(b, sv)->bytes = 0;
  dnnl_softmax_v2_desc_t d;
  CHECK(dnnl_softmax_v2_forward_desc_init(&d, dnnl_forward_inference,
                                          logsm ? dnnl_softmax_log : dnnl_softmax_accurate,
                                          &md, &md, 1));
  dnnl_primitive_desc_t pd;
  if (dnnl_primitive_desc_create(&pd, &d, NULL, b->c->eng, NULL) != dnnl_success) return 1;
  dnnl_memory_desc_t ymd;
  vr_md_plain(&ymd, &b->vt[n->out[0]]);
  int dst = vr_pb_def(b, n->out[0], &ymd);
  if (dst < 0) { dnnl_primitive_desc_destroy(pd); return dst; }
  int dv = vr_pb_new_pv(b, &PV(b, dst)->t, &md);
  if (dv < 0) { dnnl_primitive_desc_destroy(pd); return dv; }
  PV(b, dv)->root = PV(b, dst)->root; PV(b, dv)->bytes = 0;
  vr_arg a[2] = {{DNNL_ARG_SRC, sv}, {DNNL_ARG_DST, dv}};
  return vr_pb_prim(b, ni, pd, a, 2);
}

static int lower_lrn(vr_pb *b, int ni) {
  const vr_node *n = &b->g->nodes[ni];
  /* oneDNN centres the window; ONNX's even-size window is not (eval_lrn) */
  if (vr_attr_i(n, "size", 1) % 2 == 0) return 1;
  int src = in_pv(b, n, 0);
  if (src < 0) return src;
  dnnl_lrn_desc_t d;
  CHECK(dnnl_lrn_forward_desc_init(&d, dnnl_forward_inference, dnnl_lrn_across_channels,
                                   &PV(b, src)->md, vr_attr_i(n, "size", 1),
                                   vr_attr_f(n, "alpha", 1e-4f), vr_attr_f(n, "beta", 0.75f),
                                   vr_attr_f(n, "bias", 1.0f)));
  return emit(b, ni, &d, src, 0, NULL, 0);
}

/* md for tensor t with the same dim order as ref (a permuted dense
 * layout such as channels-last); 0 on success, -1 if ref is not one. */
static int md_like(dnnl_memory_desc_t *md, const vr_tview *t, const dnnl_memory_desc_t *ref) {
  if (ref->format_kind != dnnl_blocked || ref->format_desc.blocking.inner_nblks != 0 ||
      ref->ndims != t->ndim)
    return -1;
  int order[DNNL_MAX_NDIMS], r = ref->ndims;
  const dnnl_dims_t *st = &ref->format_desc.blocking.strides;
  for (int i = 0; i < r; i++) order[i] = i;
  for (int i = 0; i < r; i++) /* outermost first; ties keep logical order */
    for (int j = i + 1; j < r; j++)
      if ((*st)[order[j]] > (*st)[order[i]]) {
        int x = order[i];
        order[i] = order[j];
        order[j] = x;
      }
  dnnl_dims_t dims, strides;
  int64_t acc = 1;
  for (int i = 0; i < r; i++) dims[i] = t->shape[i];
  for (int k = r - 1; k >= 0; k--) {
    strides[order[k]] = acc;
    acc *= dims[order[k]] ? dims[order[k]] : 1;
  }
  return dnnl_memory_desc_init_by_strides(md, r, dims, vr_dnnl_dt(t->dt), strides) == dnnl_success ? 0 : -1;
}

static int lower_concat(vr_pb *b, int ni) {
  const vr_node *n = &b->g->nodes[ni];
  const vr_tview *y = &b->vt[n->out[0]];
  if (y->dt != VR_DT_F32 || n->nin > 64 || n->nin < 2 || y->ndim < 1) return 1;
  int ax = vr_axis(vr_attr_i(n, "axis", 0), y->ndim);
  dnnl_memory_desc_t mds[64];
  int pvs[64];
  int pref = -1; /* an input in a permuted dense layout (e.g. conv output) */
  for (int i = 0; i < n->nin; i++) {
    if ((pvs[i] = in_pv(b, n, i)) < 0) return pvs[i];
    if (b->vt[n->in[i]].shape[ax] == 0) return 1;
    mds[i] = PV(b, pvs[i])->md;
    if (pref < 0 && !vr_md_is_plain(&mds[i], &PV(b, pvs[i])->t) &&
        mds[i].format_desc.blocking.inner_nblks == 0)
      pref = i;
  }
  /* Mixed layouts send oneDNN's concat to its reference kernel and leave
   * the result plain: bring every input (and the output) to the layout of
   * the first permuted one (densenet: pool output + conv outputs). */
  dnnl_memory_desc_t ymd, *ydp = NULL;
  if (pref >= 0 && !md_like(&ymd, y, &mds[pref])) {
    for (int i = 0; i < n->nin; i++) {
      dnnl_memory_desc_t want;
      if (md_like(&want, &b->vt[n->in[i]], &mds[pref])) return 1;
      if ((pvs[i] = vr_pb_as(b, pvs[i], &want)) < 0) return pvs[i];
      mds[i] = want;
    }
    ydp = &ymd;
  }
  dnnl_primitive_desc_t pd;
  if (dnnl_concat_primitive_desc_create(&pd, ydp, n->nin, ax, mds, NULL, b->c->eng) != dnnl_success)
    return 1;
  const dnnl_memory_desc_t *q = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  int dst = vr_pb_def(b, n->out[0], q);
  if (dst < 0) { dnnl_primitive_desc_destroy(pd); return dst; }
  vr_arg a[65];
  for (int i = 0; i < n->nin; i++) a[i] = (vr_arg){DNNL_ARG_MULTIPLE_SRC + i, pvs[i]};
  a[n->nin] = (vr_arg){DNNL_ARG_DST, dst};
  if (n->nin + 1 > VR_STEP_MAX_ARGS) { dnnl_primitive_desc_destroy(pd); return 1; }
  return vr_pb_prim(b, ni, pd, a, n->nin + 1);
}

/* Reshape-like ops on a plain tensor only relabel its shape. */
static int lower_view(vr_pb *b, int ni) {
  const vr_node *n = &b->g->nodes[ni];
  if (!vr_dnnl_dt(b->vt[n->out[0]].dt)) return 1;
  if (n->nout > 1 && n->out[1] >= 0) return 1; /* Dropout mask */
  int src = in_pv(b, n, 0);
  if (src < 0) return src;
  /* Shape-preserving ones (Identity, Dropout, one-input Concat) keep any
   * layout; real reshapes need the plain bytes. */
  int same = vr_tview_numel(&b->vt[n->in[0]]) == vr_tview_numel(&b->vt[n->out[0]]) &&
             b->vt[n->in[0]].ndim == b->vt[n->out[0]].ndim &&
             !memcmp(b->vt[n->in[0]].shape, b->vt[n->out[0]].shape,
                     sizeof(int64_t) * (size_t)b->vt[n->in[0]].ndim);
  if (same && PV(b, src)->has_md) {
    dnnl_memory_desc_t md = PV(b, src)->md;
    return vr_pb_def_alias(b, n->out[0], &md, src) < 0 ? VR_ENOMEM : 0;
  }
  if ((src = vr_pb_plain(b, src)) < 0) return src;
  return vr_pb_def_alias(b, n->out[0], NULL, src) < 0 ? VR_ENOMEM : 0;
}

static int lower_ln(vr_pb *b, int ni) {
  const vr_node *n = &b->g->nodes[ni];
  const vr_tview *x = &b->vt[n->in[0]];
  if (vr_axis(vr_attr_i(n, "axis", -1), x->ndim) != x->ndim - 1 || x->ndim < 2) return 1;
  if (n->nout > 1) return 1; /* Mean / InvStdDev outputs: reference kernel */
  if (!b->vt[n->in[1]].data || (n->nin > 2 && n->in[2] >= 0 && !b->vt[n->in[2]].data)) return 1;
  int src = in_pv(b, n, 0);
  if (src < 0 || (src = vr_pb_plain(b, src)) < 0) return src;
  unsigned flags = dnnl_use_scale | (n->nin > 2 && n->in[2] >= 0 ? dnnl_use_shift : 0);
  dnnl_layer_normalization_desc_t d;
  CHECK(dnnl_layer_normalization_forward_desc_init(&d, dnnl_forward_inference, &PV(b, src)->md,
                                                   NULL, vr_attr_f(n, "epsilon", 1e-5f), flags));
  vr_arg ex[2];
  int ne = 0;
  int sc = in_pv(b, n, 1);
  if (sc < 0) return sc;
  ex[ne++] = (vr_arg){DNNL_ARG_SCALE, sc};
  if (flags & dnnl_use_shift) {
    int sh = in_pv(b, n, 2);
    if (sh < 0) return sh;
    ex[ne++] = (vr_arg){DNNL_ARG_SHIFT, sh};
  }
  return emit(b, ni, &d, src, 0, ex, ne);
}

/* Transpose as a oneDNN reorder into a strided view of the plain output
 * (vectorised, unlike an element loop). */
static int lower_transpose(vr_pb *b, int ni) {
  const vr_node *n = &b->g->nodes[ni];
  const vr_tview *x = &b->vt[n->in[0]], *y = &b->vt[n->out[0]];
  int r = x->ndim, perm[VR_MAX_DIMS];
  if (!vr_dnnl_dt(x->dt) || r < 2 || r > 6 || vr_tview_numel(x) == 0) return 1;
  const int64_t *pa;
  int k = vr_attr_ints(n, "perm", &pa);
  for (int i = 0; i < r; i++) perm[i] = k == r ? (int)pa[i] : r - 1 - i;
  int src = in_pv(b, n, 0);
  if (src < 0 || (src = vr_pb_plain(b, src)) < 0) return src;
  dnnl_dims_t dims, strides, ys;
  int64_t acc = 1;
  for (int j = r - 1; j >= 0; j--) {
    ys[j] = acc;
    acc *= y->shape[j];
  }
  for (int i = 0; i < r; i++) dims[i] = x->shape[i];
  for (int j = 0; j < r; j++) strides[perm[j]] = ys[j];
  dnnl_memory_desc_t vmd;
  if (dnnl_memory_desc_init_by_strides(&vmd, r, dims, vr_dnnl_dt(x->dt), strides) != dnnl_success)
    return 1;
  dnnl_primitive_desc_t pd;
  if (dnnl_reorder_primitive_desc_create(&pd, &PV(b, src)->md, b->c->eng, &vmd, b->c->eng, NULL) !=
      dnnl_success)
    return 1;
  int dst = vr_pb_def(b, n->out[0], NULL);
  int view = dst < 0 ? dst : vr_pb_new_pv(b, &PV(b, src)->t, &vmd);
  if (view < 0) {
    dnnl_primitive_desc_destroy(pd);
    return view;
  }
  PV(b, view)->root = PV(b, dst)->root;
  PV(b, view)->bytes = 0;
  vr_arg a[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, view}};
  return vr_pb_prim(b, ni, pd, a, 2);
}

int vr_lower_nn(vr_pb *b, int ni) {
  const vr_node *n = &b->g->nodes[ni];
  const char *op = n->op;
  if (!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool")) return lower_pool(b, ni, 0);
  if (!strcmp(op, "GlobalAveragePool") || !strcmp(op, "GlobalMaxPool")) return lower_pool(b, ni, 1);
  if (!strcmp(op, "BatchNormalization")) return lower_bn(b, ni);
  if (!strcmp(op, "LRN")) return lower_lrn(b, ni);
  if (!strcmp(op, "Concat")) return n->nin == 1 ? lower_view(b, ni) : lower_concat(b, ni);
  if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax")) return lower_softmax(b, ni);
  if (!strcmp(op, "LayerNormalization")) return lower_ln(b, ni);
  if (!strcmp(op, "Transpose")) return lower_transpose(b, ni);
  if (!strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Squeeze") ||
      !strcmp(op, "Unsqueeze") || !strcmp(op, "Identity") || !strcmp(op, "Dropout"))
    return lower_view(b, ni);
  if (n->nin == 2 && n->nout == 1) return lower_binary(b, ni);
  if (n->nin == 1 && n->nout == 1) return lower_eltwise(b, ni);
  return 1;
}
