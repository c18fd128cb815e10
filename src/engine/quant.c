/* int8 post-training calibration (see quant.h): runs the fp32 graph over
 * the calibration set with the inputs of every Conv/Gemm/MatMul exposed as
 * plan outputs, and records each one's max |x| and whether it was ever
 * negative. The plan builder turns these into per-tensor activation scales
 * (u8 for non-negative tensors such as post-ReLU ones, s8 otherwise). */
#include "engine/quant.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"

extern void omp_set_num_threads(int n);

typedef struct calib {
  const vr_model *m;
  const vr_tensor **src; /* per graph input: its calibration tensor */
  int64_t n;             /* samples */
  int *vals, nvals;      /* observed values */
  vr_qparams *q;
} calib;

static int match_inputs(calib *c, const vr_session_opts *o, vr_errbuf *err) {
  const vr_graph *g = &c->m->g;
  if (!o->calibration || o->n_calibration < 1)
    return vr_errf(err, VR_EINVAL, "int8 needs a calibration set (one tensor per model "
                   "input, samples along dim 0)");
  c->src = vr_calloc((size_t)g->nin + 1, sizeof(vr_tensor *));
  if (!c->src) return vr_errf(err, VR_ENOMEM, "out of memory");
  for (int i = 0; i < g->nin; i++) {
    const vr_val *v = &g->vals[g->inputs[i]];
    for (int k = 0; k < o->n_calibration; k++)
      if (o->calibration[k].name && !strcmp(o->calibration[k].name, v->name))
        c->src[i] = &o->calibration[k];
    if (!c->src[i] && g->nin == 1 && o->n_calibration == 1) c->src[i] = &o->calibration[0];
    const vr_tensor *t = c->src[i];
    if (!t) return vr_errf(err, VR_ENOENT, "calibration: no tensor for input '%s'", v->name);
    if (t->dtype != v->dtype || t->ndim != v->ndim || !t->data || t->ndim < 1)
      return vr_errf(err, VR_ETYPE, "calibration tensor for '%s': dtype/rank differs "
                     "from the input", v->name);
    for (int d = 1; d < v->ndim; d++)
      if (t->shape[d] != v->shape[d])
        return vr_errf(err, VR_ESHAPE, "calibration tensor for '%s': dim %d is %lld, "
                       "expected %lld", v->name, d, (long long)t->shape[d],
                       (long long)v->shape[d]);
    if (i == 0) c->n = t->shape[0];
    if (t->shape[0] != c->n || c->n < 1)
      return vr_errf(err, VR_ESHAPE, "calibration tensors disagree on the sample count");
    size_t need = (size_t)vr_numel(t->ndim, t->shape) * vr_dtype_size(t->dtype);
    if (t->nbytes < need)
      return vr_errf(err, VR_EINVAL, "calibration tensor for '%s': %zu bytes, need %zu",
                     v->name, t->nbytes, need);
  }
  return 0;
}

/* The activations that feed an int8-capable op. */
static int pick_values(calib *c, vr_errbuf *err) {
  const vr_graph *g = &c->m->g;
  c->vals = vr_calloc((size_t)g->nvals + 1, sizeof(int));
  char *seen = vr_calloc((size_t)g->nvals + 1, 1);
  if (!c->vals || !seen) {
    vr_free(seen);
    return vr_errf(err, VR_ENOMEM, "out of memory");
  }
  for (int i = 0; i < g->nnodes; i++) {
    const vr_node *n = &g->nodes[i];
    if (strcmp(n->op, "Conv") && strcmp(n->op, "Gemm") && strcmp(n->op, "MatMul")) continue;
    int v = n->in[0];
    if (v < 0 || seen[v] || g->vals[v].kind != VR_VAL_RUNTIME || g->vals[v].dtype != VR_DT_F32)
      continue;
    seen[v] = 1;
    c->vals[c->nvals++] = v;
  }
  vr_free(seen);
  return 0;
}

static void observe(calib *c, const vr_plan *p) {
  for (int k = 0; k < p->nout; k++) {
    const vr_port *pt = &p->out[k];
    const float *x = pt->t.data;
    int64_t cnt = vr_tview_numel(&pt->t);
    float mx = c->q->absmax[pt->val];
    int nonneg = c->q->nonneg[pt->val];
    for (int64_t i = 0; i < cnt; i++) {
      float a = fabsf(x[i]);
      if (a > mx) mx = a;
      if (x[i] < 0) nonneg = 0;
    }
    c->q->absmax[pt->val] = mx;
    c->q->nonneg[pt->val] = (char)nonneg;
  }
}

/* Runs samples [first, first + bs) through plan p. */
static int run_chunk(calib *c, vr_plan *p, dnnl_stream_t st, int64_t first, vr_errbuf *err) {
  for (int i = 0; i < p->nin; i++) {
    const vr_tensor *t = c->src[i];
    size_t per = (size_t)vr_numel(t->ndim - 1, t->shape + 1) * vr_dtype_size(t->dtype);
    memcpy(p->in[i].t.data, (const char *)t->data + (size_t)first * per, per * (size_t)p->batch);
  }
  int rc = vr_plan_run(p, st, 0, NULL, err);
  if (!rc) observe(c, p);
  return rc;
}

static int run_all(calib *c, int threads, vr_errbuf *err) {
  const vr_graph *g = &c->m->g;
  int chunk = c->m->dyn_batch ? (int)(c->n < 16 ? c->n : 16) : 1;
  int64_t full = c->n / chunk, rem = c->n % chunk;
  vr_wcache *wc = NULL;
  vr_plan_ctx ctx = {g, vr_dnnl_engine(), &wc, 0, g->nnodes, g->inputs, g->nin,
                     c->vals, c->nvals, VR_PREC_FP32, NULL};
  vr_plan *p1 = NULL, *p2 = NULL;
  void *arena = NULL;
  dnnl_stream_t st = NULL;
  omp_set_num_threads(threads);
  int rc = vr_plan_build(&ctx, chunk, &p1, err);
  if (!rc && rem) rc = vr_plan_build(&ctx, (int)rem, &p2, err);
  size_t ab = p1 ? p1->arena_bytes : 0;
  if (p2 && p2->arena_bytes > ab) ab = p2->arena_bytes;
  if (!rc && !(arena = vr_aligned_alloc(4096, ab ? ab : 64)))
    rc = vr_errf(err, VR_ENOMEM, "calibration arena of %zu bytes", ab);
  if (!rc) rc = vr_plan_bind(p1, arena, err);
  if (!rc && p2) rc = vr_plan_bind(p2, arena, err);
  if (!rc && dnnl_stream_create(&st, vr_dnnl_engine(), dnnl_stream_default_flags) != dnnl_success)
    rc = vr_errf(err, VR_EBACKEND, "cannot create a oneDNN stream");
  for (int64_t k = 0; !rc && k < full; k++) rc = run_chunk(c, p1, st, k * chunk, err);
  if (!rc && p2) rc = run_chunk(c, p2, st, full * chunk, err);
  if (st) dnnl_stream_destroy(st);
  vr_plan_free(p1);
  vr_plan_free(p2);
  vr_aligned_free(arena);
  vr_wcache_free(wc);
  if (rc) vr_errctx(err, rc, "int8 calibration");
  return rc;
}

int vr_quant_calibrate(const vr_model *m, const vr_session_opts *o,
                       int node_begin, int node_end, vr_qparams **out,
                       vr_errbuf *err) {
  *out = NULL;
  /* A partial session takes its scales from a run of the whole graph, so
   * that its blocks quantise exactly as they do in the whole model. */
  (void)node_begin;
  (void)node_end;
  calib c = {m, NULL, 0, NULL, 0, NULL};
  int rc = match_inputs(&c, o, err);
  if (!rc) rc = pick_values(&c, err);
  if (!rc) {
    c.q = VR_NEW(vr_qparams);
    if (c.q) {
      c.q->nvals = m->g.nvals;
      c.q->absmax = vr_calloc((size_t)m->g.nvals + 1, sizeof(float));
      c.q->nonneg = vr_calloc((size_t)m->g.nvals + 1, 1);
      for (int i = 0; c.q->nonneg && i < c.nvals; i++) c.q->nonneg[c.vals[i]] = 1;
    }
    if (!c.q || !c.q->absmax || !c.q->nonneg) rc = vr_errf(err, VR_ENOMEM, "out of memory");
  }
  /* nothing int8-capable reads a runtime value: the scales would be
   * those of no value, and a large calibration set is one graph run per
   * sample (a fuzz input of 2^20 empty rows took minutes) */
  if (!rc && c.nvals > 0) rc = run_all(&c, o->threads > 0 ? o->threads : 1, err);
  vr_free(c.src);
  vr_free(c.vals);
  if (rc) {
    vr_quant_free(c.q);
    return rc;
  }
  *out = c.q;
  return 0;
}

void vr_quant_free(vr_qparams *q) {
  if (!q) return;
  vr_free(q->absmax);
  vr_free(q->nonneg);
  vr_free(q);
}
