/* Graph passes: op lookup, probe-batch shape inference with constant
 * folding of shape chains, dead-node elimination, compaction. */
#include <string.h>

#include "base/alloc.h"
#include "engine/graph.h"
#include "engine/ops.h"

#define NPROBE 3 /* batch sizes 1, 2, 3: enough to tell constant from affine */

int vr__graph_check_ops(vr_graph *g, int fused, vr_errbuf *err) {
  for (int i = 0; i < g->nnodes; i++) {
    vr_node *n = &g->nodes[i];
    n->op_id = vr_op_lookup(n->op);
    if (n->op_id < 0)
      return vr_errf(err, VR_EUNSUPPORTED, "node '%s': unsupported op '%s'",
                     n->name, n->op);
    int rc = vr__attr_check(n, err);
    if (rc) return rc;
    const vr_op *op = vr_op_get(n->op_id);
    int nin = n->nin;
    /* a fused Conv's SUM addend is an extra last input (fuse.c; only
     * unpacked graphs have one here) */
    if (n->sum_in >= 0) {
      if (n->sum_in != nin - 1) return vr_bad(err, n, VR_EFORMAT, "sum input not last");
      nin--;
    }
    while (nin > 0 && n->in[nin - 1] < 0) nin--;
    /* MatMul + constant bias (fuse.c, fuse_bias): a third input */
    int max_in = op->max_in + (fused && !strcmp(n->op, "MatMul"));
    if (nin < op->min_in || nin > max_in || n->nout < 1)
      return vr_bad(err, n, VR_EFORMAT, "%d inputs / %d outputs (op takes %d..%d "
                    "inputs)", n->nin, n->nout, op->min_in, op->max_in);
    for (int k = 0; k < op->min_in; k++)
      if (n->in[k] < 0) return vr_bad(err, n, VR_EFORMAT, "required input %d missing", k);
    if (n->out[0] < 0) return vr_bad(err, n, VR_EFORMAT, "first output unnamed");
  }
  return 0;
}

int vr_graph_infer_node(const vr_graph *g, int ni, vr_tview *vt, vr_errbuf *err) {
  const vr_node *n = &g->nodes[ni];
  vr_tview in[64], out[64];
  vr_tview *pin = in, *pout = out;
  int rc = 0;
  if (n->nin > 64 || n->nout > 64) {
    pin = vr_calloc((size_t)n->nin + 1, sizeof(vr_tview));
    pout = vr_calloc((size_t)n->nout + 1, sizeof(vr_tview));
    if (!pin || !pout) {
      rc = vr_errf(err, VR_ENOMEM, "out of memory");
      goto done;
    }
  }
  for (int i = 0; i < n->nin; i++) {
    if (n->in[i] < 0) memset(&pin[i], 0, sizeof(vr_tview));
    else pin[i] = vt[n->in[i]];
    if (n->in[i] >= 0 && pin[i].dt == VR_DT_UNDEFINED) {
      rc = vr_bad(err, n, VR_EINTERNAL, "input %d has no shape", i);
      goto done;
    }
  }
  memset(pout, 0, sizeof(vr_tview) * (size_t)n->nout);
  rc = vr_op_get(n->op_id)->infer(n, pin, pout, err);
  for (int i = 0; !rc && i < n->nout; i++) {
    if (pout[i].ndim < 0 || pout[i].ndim > VR_MAX_DIMS || !vr_dtype_size(pout[i].dt)) {
      rc = vr_bad(err, n, VR_EINTERNAL, "output %d: bad inferred type/rank", i);
      break;
    }
    /* the product of the dims other than 0: an empty output's other
     * dims are multiplied too (its strides, the element counts of its
     * slices), and past the limit they overflowed int64 */
    int64_t cnt = 1;
    for (int d = 0; d < pout[i].ndim; d++) {
      if (pout[i].shape[d] < 0 || pout[i].shape[d] > ((int64_t)1 << 40))
        rc = vr_bad(err, n, VR_ESHAPE, "output %d: bad inferred dim", i);
      else if (pout[i].shape[d] && cnt > VR_MAX_TENSOR_ELEMS / pout[i].shape[d])
        cnt = VR_MAX_TENSOR_ELEMS + 1;
      else if (pout[i].shape[d])
        cnt *= pout[i].shape[d];
    }
    if (!rc && cnt > VR_MAX_TENSOR_ELEMS)
      rc = vr_bad(err, n, VR_ELIMIT, "output %d: its dims other than 0 multiply past 2^31 "
                  "(the element limit)", i);
    if (n->out[i] >= 0) {
      vt[n->out[i]] = pout[i];
      vt[n->out[i]].data = NULL;
    }
  }
done:
  if (pin != in) vr_free(pin);
  if (pout != out) vr_free(pout);
  return rc;
}

static void input_view(const vr_val *v, int64_t batch, vr_tview *t) {
  t->dt = v->dtype;
  t->ndim = v->ndim;
  memcpy(t->shape, v->shape, sizeof(t->shape));
  if (v->dyn_batch) t->shape[0] = batch;
  t->data = NULL;
}

/* data + slope x (batch - 1) in uint64: integer ops wrap, so a value
 * may be affine modulo 2^64 only (B x 2^62), and int64 would overflow. */
static int64_t affine_at(int64_t data, int64_t slope, int64_t batch) {
  return (int64_t)((uint64_t)data + (uint64_t)slope * (uint64_t)(batch - 1));
}

static void *materialize(const vr_val *v, int64_t batch) {
  int64_t cnt = vr_numel(v->ndim, v->shape);
  size_t es = vr_dtype_size(v->dtype);
  void *d = vr_aligned_alloc(64, (size_t)(cnt ? cnt : 1) * es);
  if (!d) return NULL;
  vr_tview t = {v->dtype, v->ndim, {0}, d};
  vr_tview s = {v->dtype, v->ndim, {0}, v->data};
  for (int64_t i = 0; i < cnt; i++)
    vr_tview_seti(&t, i, affine_at(vr_tview_geti(&s, i), v->slope[i], batch));
  return d;
}

int vr_graph_shapes_at(const vr_graph *g, int64_t batch, vr_tview *vt,
                       void **owned, vr_errbuf *err) {
  for (int i = 0; i < g->nvals; i++) {
    const vr_val *v = &g->vals[i];
    owned[i] = NULL;
    memset(&vt[i], 0, sizeof(vt[i]));
    if (v->kind == VR_VAL_CONST) {
      input_view(v, 1, &vt[i]);
      vt[i].data = v->data;
    } else if (v->kind == VR_VAL_AFFINE && v->data) { /* unused ones were freed */
      input_view(v, 1, &vt[i]);
      if (!(owned[i] = vt[i].data = materialize(v, batch)))
        return vr_errf(err, VR_ENOMEM, "out of memory");
    } else if (v->is_input) {
      input_view(v, batch, &vt[i]);
    }
  }
  for (int i = 0; i < g->nnodes; i++) {
    if (g->nodes[i].dead) continue;
    int rc = vr_graph_infer_node(g, i, vt, err);
    if (rc) return rc;
  }
  return 0;
}

/* ---- folding -------------------------------------------------------------- */

typedef struct probe {
  vr_tview vt[NPROBE]; /* per probe view; data owned when own[p] */
  int own[NPROBE];
} probe;

static void probe_free(probe *pr, int n) {
  for (int i = 0; i < n; i++)
    for (int p = 0; p < NPROBE; p++)
      if (pr[i].own[p]) vr_aligned_free(pr[i].vt[p].data);
}

static int same_shape(const vr_tview *a, const vr_tview *b) {
  if (a->dt != b->dt || a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

/* A session runs batches 1..4096 (vr_session_opts.max_batch's limit). */
#define MAX_BATCH 4096

/* Whether node n's output is affine in the batch wherever its inputs are:
 * sums, products (a product of two affine values is quadratic, which
 * three probes tell apart) and rearrangements whose positions do not
 * depend on the batch. Three probes then decide for every batch. Other
 * ops (Min, Mod, Div, comparisons, ...) or batch-dependent indices and
 * conditions are piecewise: Min(B, 3) is B at the probes, not at B = 5. */
static int affine_exact(const vr_graph *g, const vr_node *n) {
  static const char *const any[] = {"Add", "Sub", "Mul", "Neg", "Identity", "Cast", "Concat",
                                    "Transpose", "Flatten", "Unsqueeze", "Squeeze", "Reshape",
                                    "Expand", "Tile", NULL};
  for (int i = 0; any[i]; i++)
    if (!strcmp(n->op, any[i])) return 1; /* their other inputs only shape the output */
  if (!strcmp(n->op, "Where")) /* a constant condition selects positions */
    return g->vals[n->in[0]].kind == VR_VAL_CONST;
  if (strcmp(n->op, "Gather") && strcmp(n->op, "Slice")) return 0;
  for (int i = 1; i < n->nin; i++) /* the indices / starts, ends, axes, steps */
    if (n->in[i] >= 0 && g->vals[n->in[i]].kind != VR_VAL_CONST) return 0;
  return 1;
}

/* Evaluates n at every batch past the probes, its inputs materialised
 * there (exact: they were folded the same way), and compares with the
 * classification r[0] (+ slope x (B - 1)). 1 if it holds everywhere, 0 if
 * not (or the kernel fails at some batch: it is left to run time), <0 on
 * error. */
static int holds_at_all_batches(const vr_graph *g, const vr_node *n, const vr_tview *r0,
                                const int64_t *slope, vr_errbuf *err) {
  const vr_op *op = vr_op_get(n->op_id);
  int64_t cnt = vr_tview_numel(r0);
  size_t bytes = (size_t)(cnt ? cnt : 1) * vr_dtype_size(r0->dt);
  vr_tview in[64], ov = *r0;
  void *tmp[64] = {0};
  int ok = 1;
  /* bounds the work (4093 evaluations): a big value is rarely a shape */
  int64_t work = cnt;
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] >= 0) work += vr_numel(g->vals[n->in[i]].ndim, g->vals[n->in[i]].shape);
  if (work > 4 * MAX_BATCH) return 0;
  if (!(ov.data = vr_aligned_alloc(64, bytes))) return vr_errf(err, VR_ENOMEM, "out of memory");
  for (int64_t b = NPROBE + 1; ok > 0 && b <= MAX_BATCH; b++) {
    for (int i = 0; ok > 0 && i < n->nin; i++) {
      memset(&in[i], 0, sizeof in[i]);
      if (n->in[i] < 0) continue;
      const vr_val *v = &g->vals[n->in[i]];
      input_view(v, 1, &in[i]);
      in[i].data = v->data;
      if (v->kind != VR_VAL_AFFINE) continue;
      if (!tmp[i] && !(tmp[i] = materialize(v, b))) { /* then refilled in place */
        ok = vr_errf(err, VR_ENOMEM, "out of memory");
        break;
      }
      vr_tview t = in[i], s0 = in[i];
      t.data = in[i].data = tmp[i];
      for (int64_t k = 0; k < vr_numel(v->ndim, v->shape); k++)
        vr_tview_seti(&t, k, affine_at(vr_tview_geti(&s0, k), v->slope[k], b));
    }
    if (ok <= 0) break;
    /* the shape first: the kernel writes r0's (Slice(x, B, B + 2) keeps
     * two elements until the end of x clamps it) */
    vr_errbuf quiet = {0};
    vr_tview o = {0};
    if (op->infer(n, in, &o, &quiet) || !same_shape(&o, r0) || op->eval(n, in, &ov, &quiet)) {
      ok = 0;
      break;
    }
    for (int64_t i = 0; i < cnt && ok; i++)
      if (slope ? vr_tview_geti(&ov, i) != affine_at(vr_tview_geti(r0, i), slope[i], b)
                : memcmp((char *)ov.data + i * vr_dtype_size(r0->dt),
                         (char *)r0->data + i * vr_dtype_size(r0->dt), vr_dtype_size(r0->dt)))
        ok = 0;
  }
  for (int i = 0; i < n->nin && i < 64; i++) vr_aligned_free(tmp[i]);
  vr_aligned_free(ov.data);
  return ok;
}

/* Whether the dims of n's outputs may be piecewise in the batch, where
 * three probes cannot tell: a Slice or Split of an axis that grows with
 * the batch (x[0:3] is min(B, 3)), a strided window over one (ceil(B /
 * 3)), clamped or rounded lengths from batch-derived values (Slice
 * bounds, Range), or any input already so. A Shape of such a value is
 * checked at every batch before it folds. */
static int varies(const vr_tview *t, int d) {
  return d >= 0 && d < t[0].ndim && t[0].ndim == t[1].ndim && t[1].ndim == t[2].ndim &&
         (t[0].shape[d] != t[1].shape[d] || t[1].shape[d] != t[2].shape[d]);
}

static int dims_piecewise(const vr_graph *g, const vr_node *n, const probe *pr,
                          const char *taint) {
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] >= 0 && taint[n->in[i]]) return 1;
  if (n->nin < 1 || n->in[0] < 0) return 0;
  const vr_tview *x = pr[n->in[0]].vt;
  int r = x[0].ndim;
  if (!strcmp(n->op, "Conv") || !strcmp(n->op, "ConvTranspose") ||
      !strcmp(n->op, "MaxPool") || !strcmp(n->op, "AveragePool")) {
    for (int d = 2; d < r; d++)
      if (varies(x, d)) return 1;
    return 0;
  }
  if (!strcmp(n->op, "Split")) return varies(x, vr_axis(vr_attr_i(n, "axis", 0), r));
  if (strcmp(n->op, "Slice") && strcmp(n->op, "Range")) return 0;
  for (int i = strcmp(n->op, "Range") ? 1 : 0; i < n->nin; i++)
    if (n->in[i] >= 0 && g->vals[n->in[i]].kind != VR_VAL_CONST) return 1;
  if (!strcmp(n->op, "Range")) return 0;
  const int64_t *a;
  int k = vr_attr_ints(n, "axes", &a);
  if (k >= 0) { /* opset < 10 */
    for (int i = 0; i < k; i++)
      if (varies(x, vr_axis(a[i], r))) return 1;
    return 0;
  }
  if (n->nin > 3 && n->in[3] >= 0) {
    const vr_tview *ax = &pr[n->in[3]].vt[0];
    for (int64_t i = 0; i < vr_tview_numel(ax); i++)
      if (varies(x, vr_axis(vr_tview_geti(ax, i), r))) return 1;
    return 0;
  }
  int64_t ks = vr_attr_ints(n, "starts", &a);
  if (ks < 0 && n->nin > 1 && n->in[1] >= 0) ks = vr_tview_numel(&pr[n->in[1]].vt[0]);
  for (int d = 0; d < ks && d < r; d++) /* axes left out: 0 .. k - 1 */
    if (varies(x, d)) return 1;
  return 0;
}

/* Shape / Size node ni, folded as r0 (+ slope x (B - 1)) from the probes,
 * checked at every batch past them: the nodes before it are inferred
 * there (the folded ones materialised). A batch whose inference fails
 * has no plan either and is skipped. 1 if it holds, 0 if not, <0 on
 * error. */
static int shape_holds(const vr_graph *g, int ni, const vr_tview *r0, const int64_t *slope,
                       int64_t *budget, vr_errbuf *err) {
  const vr_node *n = &g->nodes[ni];
  /* bounds the work of a load (a hostile model of many such Shapes):
   * past it the Shape runs at run time */
  int64_t work = (int64_t)(ni + 1) * (MAX_BATCH - NPROBE);
  if (work > *budget) return 0;
  *budget -= work;
  int64_t cnt = vr_tview_numel(r0);
  vr_tview ov = *r0;
  vr_tview *vt = vr_calloc((size_t)g->nvals + 1, sizeof(vr_tview));
  void **owned = vr_calloc((size_t)g->nvals + 1, sizeof(void *));
  ov.data = vr_aligned_alloc(64, (size_t)(cnt ? cnt : 1) * sizeof(int64_t));
  int ok = vt && owned && ov.data ? 1 : vr_errf(err, VR_ENOMEM, "out of memory");
  for (int64_t b = NPROBE + 1; ok > 0 && b <= MAX_BATCH; b++) {
    int skip = 0;
    for (int i = 0; i < g->nvals && ok > 0; i++) {
      const vr_val *v = &g->vals[i];
      memset(&vt[i], 0, sizeof vt[i]);
      if (v->kind == VR_VAL_CONST) {
        input_view(v, 1, &vt[i]);
        vt[i].data = v->data;
      } else if (v->kind == VR_VAL_AFFINE && v->data) {
        input_view(v, 1, &vt[i]);
        if (!(owned[i] = vt[i].data = materialize(v, b))) ok = vr_errf(err, VR_ENOMEM, "out of memory");
      } else if (v->is_input) {
        input_view(v, b, &vt[i]);
      }
    }
    for (int k = 0; ok > 0 && !skip && k < ni; k++) {
      vr_errbuf quiet = {0};
      if (!g->nodes[k].dead && vr_graph_infer_node(g, k, vt, &quiet)) skip = 1;
    }
    vr_errbuf quiet = {0};
    if (ok > 0 && !skip) {
      if (vr_op_get(n->op_id)->eval(n, &vt[n->in[0]], &ov, &quiet)) ok = 0;
      for (int64_t i = 0; i < cnt && ok > 0; i++)
        if (vr_tview_geti(&ov, i) != affine_at(vr_tview_geti(r0, i), slope ? slope[i] : 0, b))
          ok = 0;
    }
    for (int i = 0; owned && i < g->nvals; i++) {
      vr_aligned_free(owned[i]);
      owned[i] = NULL;
    }
  }
  vr_free(vt);
  vr_free(owned);
  vr_aligned_free(ov.data);
  return ok;
}

/* Evaluates node n at each probe into freshly allocated outputs and
 * classifies them. Returns 1 if folded, 0 if kept, <0 on error. */
static int try_fold(vr_graph *g, int ni, probe *pr, const char *taint, int64_t *budget,
                    vr_errbuf *err) {
  vr_node *n = &g->nodes[ni];
  const vr_op *op = vr_op_get(n->op_id);
  if (!op->eval || n->nout != 1 || n->out[0] < 0) return 0;
  int shape_op = !strcmp(n->op, "Shape") || !strcmp(n->op, "Size");
  int all_const = !shape_op;
  for (int i = 0; i < n->nin && !shape_op; i++) {
    if (n->in[i] < 0) continue;
    const vr_val *v = &g->vals[n->in[i]];
    if (v->kind == VR_VAL_RUNTIME && !pr[n->in[i]].vt[0].data) return 0;
    if (v->kind != VR_VAL_CONST) all_const = 0;
  }
  int o = n->out[0], np = all_const ? 1 : NPROBE;
  vr_tview in[64];
  if (n->nin > 64) return 0;
  for (int p = 0; p < np; p++) {
    vr_tview *ov = &pr[o].vt[p];
    int64_t cnt = vr_tview_numel(ov);
    /* Folding that would blow up a small input into a big constant (e.g.
     * ConstantOfShape) is left to run time; weight transforms fold. */
    int64_t in_bytes = 0;
    for (int i = 0; i < n->nin; i++)
      if (n->in[i] >= 0) in_bytes += vr_tview_numel(&pr[n->in[i]].vt[p]) * 8;
    int64_t ob = cnt * (int64_t)vr_dtype_size(ov->dt);
    if (ob > ((int64_t)64 << 20) && ob > 2 * in_bytes) return 0;
    ov->data = vr_aligned_alloc(64, (size_t)(cnt ? cnt : 1) * vr_dtype_size(ov->dt));
    if (!ov->data) return vr_errf(err, VR_ENOMEM, "out of memory");
    pr[o].own[p] = 1;
    for (int i = 0; i < n->nin; i++)
      if (n->in[i] < 0) memset(&in[i], 0, sizeof in[i]);
      else in[i] = pr[n->in[i]].vt[p];
    int rc = op->eval(n, in, ov, err);
    if (rc) return rc;
  }
  vr_val *v = &g->vals[o];
  vr_tview *r = pr[o].vt;
  size_t bytes = (size_t)vr_tview_numel(&r[0]) * vr_dtype_size(r[0].dt);
  int is_const = all_const || (same_shape(&r[0], &r[1]) && same_shape(&r[0], &r[2]) &&
                               !memcmp(r[0].data, r[1].data, bytes) &&
                               !memcmp(r[0].data, r[2].data, bytes));
  int piecewise_in = shape_op && taint[n->in[0]];
  if (is_const) {
    if (!all_const && !shape_op && !affine_exact(g, n)) {
      int h = holds_at_all_batches(g, n, &r[0], NULL, err);
      if (h < 0) return h;
      if (!h) goto keep;
    }
    if (piecewise_in) {
      int h = shape_holds(g, ni, &r[0], NULL, budget, err);
      if (h < 0) return h;
      if (!h) goto keep;
    }
    v->kind = VR_VAL_CONST;
  } else {
    if (!vr_is_int(r[0].dt) || !same_shape(&r[0], &r[1]) || !same_shape(&r[0], &r[2]))
      goto keep;
    int64_t cnt = vr_tview_numel(&r[0]);
    v->slope = vr_malloc(sizeof(int64_t) * (size_t)(cnt ? cnt : 1));
    if (!v->slope) return vr_errf(err, VR_ENOMEM, "out of memory");
    for (int64_t i = 0; i < cnt; i++) {
      int64_t a = vr_tview_geti(&r[0], i), b = vr_tview_geti(&r[1], i), c = vr_tview_geti(&r[2], i);
      if ((uint64_t)b - (uint64_t)a != (uint64_t)c - (uint64_t)b) { /* see affine_at */
        vr_free(v->slope);
        v->slope = NULL;
        goto keep;
      }
      v->slope[i] = (int64_t)((uint64_t)b - (uint64_t)a);
    }
    if ((!shape_op && !affine_exact(g, n)) || piecewise_in) {
      int h = shape_op ? shape_holds(g, ni, &r[0], v->slope, budget, err)
                       : holds_at_all_batches(g, n, &r[0], v->slope, err);
      if (h <= 0) {
        vr_free(v->slope);
        v->slope = NULL;
        if (h < 0) return h;
        goto keep;
      }
    }
    v->kind = VR_VAL_AFFINE;
  }
  /* The value keeps probe 0's data (batch 1); the probe table borrows it. */
  v->data = r[0].data;
  v->dtype = r[0].dt;
  v->ndim = r[0].ndim;
  memcpy(v->shape, r[0].shape, sizeof v->shape);
  pr[o].own[0] = 0;
  if (all_const)
    for (int p = 1; p < NPROBE; p++) r[p] = r[0];
  n->dead = 1;
  return 1;
keep:
  for (int p = 0; p < np; p++) {
    vr_aligned_free(r[p].data);
    r[p].data = NULL;
    pr[o].own[p] = 0;
  }
  return 0;
}

static int fold_pass(vr_graph *g, vr_errbuf *err) {
  probe *pr = vr_calloc((size_t)g->nvals + 1, sizeof(probe));
  if (!pr) return vr_errf(err, VR_ENOMEM, "out of memory");
  int rc = 0;
  for (int i = 0; i < g->nvals; i++) {
    vr_val *v = &g->vals[i];
    for (int p = 0; p < NPROBE; p++) {
      if (v->kind == VR_VAL_CONST) {
        input_view(v, 1, &pr[i].vt[p]);
        pr[i].vt[p].data = v->data;
      } else if (v->is_input) {
        input_view(v, p + 1, &pr[i].vt[p]);
      }
    }
  }
  vr_tview *vt = vr_calloc((size_t)g->nvals + 1, sizeof(vr_tview));
  char *taint = vr_calloc((size_t)g->nvals + 1, 1); /* dims_piecewise, per value */
  int64_t budget = (int64_t)1 << 23; /* node inferences for shape_holds */
  if (!vt || !taint) rc = vr_errf(err, VR_ENOMEM, "out of memory");
  for (int ni = 0; !rc && ni < g->nnodes; ni++) {
    vr_node *n = &g->nodes[ni];
    for (int p = 0; p < NPROBE && !rc; p++) {
      /* Only the node's inputs are read (O(inputs), not O(values)). */
      for (int i = 0; i < n->nin; i++)
        if (n->in[i] >= 0) vt[n->in[i]] = pr[n->in[i]].vt[p];
      if ((rc = vr_graph_infer_node(g, ni, vt, err))) {
        if (p > 0 && err) vr_errctx(err, rc, "at batch %d", p + 1);
        break;
      }
      for (int k = 0; k < n->nout; k++)
        if (n->out[k] >= 0) {
          pr[n->out[k]].vt[p] = vt[n->out[k]];
          pr[n->out[k]].vt[p].data = NULL;
        }
    }
    if (!rc && dims_piecewise(g, n, pr, taint))
      for (int k = 0; k < n->nout; k++)
        if (n->out[k] >= 0) taint[n->out[k]] = 1;
    if (!rc) {
      int f = try_fold(g, ni, pr, taint, &budget, err);
      if (f < 0) rc = f;
    }
  }
  /* Record batch-1 shapes; reject values whose rank/type depend on batch. */
  for (int i = 0; !rc && i < g->nvals; i++) {
    vr_val *v = &g->vals[i];
    if (v->kind != VR_VAL_RUNTIME || v->is_input) continue;
    vr_tview *t = pr[i].vt;
    if (!t[0].dt) continue; /* unused optional output */
    if (t[0].ndim != t[1].ndim || t[0].dt != t[1].dt)
      rc = vr_errf(err, VR_EUNSUPPORTED, "tensor '%s': rank depends on batch size", v->name);
    v->dtype = t[0].dt;
    v->ndim = t[0].ndim;
    memcpy(v->shape, t[0].shape, sizeof v->shape);
  }
  vr_free(vt);
  vr_free(taint);
  probe_free(pr, g->nvals);
  vr_free(pr);
  return rc;
}

void vr_graph_count_uses(const vr_graph *g, int *uses) {
  memset(uses, 0, sizeof(int) * (size_t)g->nvals);
  for (int i = 0; i < g->nnodes; i++) {
    if (g->nodes[i].dead) continue;
    for (int k = 0; k < g->nodes[i].nin; k++)
      if (g->nodes[i].in[k] >= 0) uses[g->nodes[i].in[k]]++;
  }
  for (int i = 0; i < g->nout; i++) uses[g->outputs[i]]++;
}

/* Kills nodes none of whose outputs is used; repeats until stable. */
static void dce(vr_graph *g, int *uses) {
  vr_graph_count_uses(g, uses);
  for (int i = g->nnodes - 1; i >= 0; i--) {
    vr_node *n = &g->nodes[i];
    if (n->dead) continue;
    int used = 0;
    for (int k = 0; k < n->nout; k++)
      if (n->out[k] >= 0 && uses[n->out[k]]) used = 1;
    if (used) continue;
    n->dead = 1;
    for (int k = 0; k < n->nin; k++)
      if (n->in[k] >= 0) uses[n->in[k]]--;
  }
}

/* Frees dead nodes and unused constants; renumbers producers. */
static void compact(vr_graph *g, const int *uses) {
  int j = 0;
  for (int i = 0; i < g->nnodes; i++) {
    vr_node *n = &g->nodes[i];
    if (n->dead) {
      vr_free(n->name);
      vr_free(n->op);
      vr_free(n->in);
      vr_free(n->out);
      for (int a = 0; a < n->nattr; a++) {
        vr_free(n->attrs[a].name);
        vr_free(n->attrs[a].s);
        vr_free(n->attrs[a].floats);
        vr_free(n->attrs[a].ints);
        if (n->attrs[a].t) {
          vr_aligned_free(n->attrs[a].t->data);
          vr_free(n->attrs[a].t);
        }
      }
      vr_free(n->attrs);
      continue;
    }
    g->nodes[j] = *n;
    for (int k = 0; k < n->nout; k++)
      if (n->out[k] >= 0) g->vals[n->out[k]].producer = j;
    j++;
  }
  g->nnodes = j;
  for (int i = 0; i < g->nvals; i++) {
    vr_val *v = &g->vals[i];
    if (v->kind != VR_VAL_RUNTIME) v->producer = -1;
    if (v->kind != VR_VAL_RUNTIME && !uses[i] && v->data) {
      vr_aligned_free(v->data);
      v->data = NULL;
      vr_free(v->slope);
      v->slope = NULL;
      v->ndim = 0;
    }
  }
}

int vr_graph_optimize(vr_graph *g, vr_errbuf *err) {
  int rc = vr__graph_check_ops(g, 0, err);
  if (rc) return rc;
  if ((rc = fold_pass(g, err))) return rc;
  /* A graph output may be a constant (e.g. Shape of a static input): the
   * plan then returns the constant's data. */
  int *uses = vr_calloc((size_t)g->nvals + 1, sizeof(int));
  if (!uses) return vr_errf(err, VR_ENOMEM, "out of memory");
  dce(g, uses);
  rc = vr_graph_fuse(g, err);
  if (!rc) { /* fusion may have added values (folded weights) */
    vr_free(uses);
    uses = vr_calloc((size_t)g->nvals + 1, sizeof(int));
    if (!uses) return vr_errf(err, VR_ENOMEM, "out of memory");
    vr_graph_count_uses(g, uses);
    compact(g, uses);
  }
  vr_free(uses);
  return rc;
}
