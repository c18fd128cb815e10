/* Models as bytes for another process of the same build (vr_model_pack,
 * include/vario/engine.h): an AsyFunc body hands its shadow process the
 * slice it would run, so the shadow neither parses the whole ONNX file nor
 * re-optimises anything, and holds only its blocks' weights.
 *
 * Layout, native byte order and widths (the same binary on the same host;
 * a magic and version word refuse anything else): a header, the values,
 * the nodes, the graph's input and output indices. The reader trusts
 * nothing: every count, index, size and string is checked against what is
 * left, and the graph it builds is checked as loading checks one (op
 * lookup, attributes, arity), in execution order, and its shapes inferred
 * again and compared, so a pack that passes holds what a loaded model
 * holds. */
#include <stdint.h>
#include <string.h>

#include <dnnl.h>

#include "base/alloc.h"
#include "base/vec.h"
#include "engine/graph.h"

#define PACK_MAGIC 0x504d5256u /* "VRMP" */
#define PACK_VERSION 2u /* 2: a value's shape right after its name */
#define MAX_STR (1u << 16)
#define MAX_COUNT (1 << 24)
#define NULL_STR UINT32_MAX

/* ---- writer ------------------------------------------------------------ */

/* The bytes so far (a vr_vec of bytes) and whether memory ran out. */
typedef struct wbuf {
  vr_vec v;
  int oom;
} wbuf;

static void put(wbuf *w, const void *src, size_t n) {
  if (w->oom || !n) return;
  void *d = vr_vec_grow(&w->v, n);
  if (!d) w->oom = 1;
  else memcpy(d, src, n);
}
static void put_i32(wbuf *w, int32_t v) { put(w, &v, sizeof v); }
static void put_i64(wbuf *w, int64_t v) { put(w, &v, sizeof v); }
static void put_u64(wbuf *w, uint64_t v) { put(w, &v, sizeof v); }
static void put_f32(wbuf *w, float v) { put(w, &v, sizeof v); }
static void put_str(wbuf *w, const char *s) {
  uint32_t n = s ? (uint32_t)strlen(s) : NULL_STR;
  put(w, &n, sizeof n);
  if (s) put(w, s, n);
}
static void put_bytes(wbuf *w, const void *d, size_t n) {
  put_u64(w, d ? (uint64_t)n : UINT64_MAX);
  if (d) put(w, d, n);
}

/* dtype, rank and dims (get_shape reads them back). */
static void put_shape(wbuf *w, vr_dtype dt, int ndim, const int64_t *shape) {
  put_i32(w, (int32_t)dt);
  put_i32(w, ndim);
  for (int d = 0; d < ndim; d++) put_i64(w, shape[d]);
}

static void put_val(wbuf *w, const vr_val *v) {
  put_str(w, v->name);
  put_shape(w, v->dtype, v->ndim, v->shape);
  put_i32(w, v->kind);
  put_i32(w, v->is_input);
  put_i32(w, v->is_output);
  put_i32(w, v->dyn_batch);
  /* a runtime value has no data: its shape sizes nothing here (and may be
   * anything in fuzz_modelpack's mutants) */
  size_t cnt = v->kind == VR_VAL_RUNTIME ? 0 : (size_t)vr_numel(v->ndim, v->shape);
  put_bytes(w, v->kind == VR_VAL_RUNTIME ? NULL : v->data, cnt * vr_dtype_size(v->dtype));
  put_bytes(w, v->kind == VR_VAL_AFFINE ? v->slope : NULL, cnt * sizeof(int64_t));
}

static void put_attr(wbuf *w, const vr_attr *a) {
  put_str(w, a->name);
  put_i32(w, a->type);
  put_f32(w, a->f);
  put_i64(w, a->i);
  put_str(w, a->s);
  put_i32(w, a->n);
  put_bytes(w, a->floats, (size_t)(a->floats ? a->n : 0) * sizeof(float));
  put_bytes(w, a->ints, (size_t)(a->ints ? a->n : 0) * sizeof(int64_t));
  put_i32(w, a->t != NULL);
  if (!a->t) return;
  put_shape(w, a->t->dt, a->t->ndim, a->t->shape);
  put_bytes(w, a->t->data, (size_t)vr_tview_numel(a->t) * vr_dtype_size(a->t->dt));
}

static void put_node(wbuf *w, const vr_node *n) {
  put_str(w, n->name);
  put_str(w, n->op);
  put_i64(w, n->opset);
  put_i32(w, n->nin);
  for (int k = 0; k < n->nin; k++) put_i32(w, n->in[k]);
  put_i32(w, n->nout);
  for (int k = 0; k < n->nout; k++) put_i32(w, n->out[k]);
  put_i32(w, n->nattr);
  for (int a = 0; a < n->nattr; a++) put_attr(w, &n->attrs[a]);
  put_i32(w, n->npost);
  for (int k = 0; k < n->npost; k++) {
    put_i32(w, n->post[k].kind);
    put_i32(w, n->post[k].alg);
    put_f32(w, n->post[k].alpha);
    put_f32(w, n->post[k].beta);
  }
  put_i32(w, n->sum_in);
  put_str(w, n->label);
}

int vr_model_pack(const vr_model *m, void **buf, size_t *len, vr_errbuf *err) {
  if (!m || !buf || !len) return vr_errf(err, VR_EINVAL, "model/buf/len is NULL");
  *buf = NULL, *len = 0;
  const vr_graph *g = &m->g;
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i].dead)
      return vr_errf(err, VR_EINVAL, "node %d is dead: not an optimised graph", i);
  wbuf w = {{0}, 0};
  vr_vec_init(&w.v, 1);
  uint32_t head[2] = {PACK_MAGIC, PACK_VERSION};
  put(&w, head, sizeof head);
  put_i32(&w, VR_MAX_DIMS);
  put_i32(&w, VR_MAX_POST);
  put_i64(&w, g->opset);
  put_i32(&w, g->nvals);
  put_i32(&w, g->nnodes);
  put_i32(&w, g->nin);
  put_i32(&w, g->nout);
  for (int i = 0; i < g->nvals; i++) put_val(&w, &g->vals[i]);
  for (int i = 0; i < g->nnodes; i++) put_node(&w, &g->nodes[i]);
  for (int i = 0; i < g->nin; i++) put_i32(&w, g->inputs[i]);
  for (int i = 0; i < g->nout; i++) put_i32(&w, g->outputs[i]);
  if (w.oom) {
    vr_vec_free(&w.v);
    return vr_errf(err, VR_ENOMEM, "out of memory packing the model");
  }
  *buf = w.v.data, *len = w.v.len;
  return 0;
}

/* ---- reader ------------------------------------------------------------ */

typedef struct rbuf {
  const char *p;
  size_t left;
  vr_errbuf *err;
  int rc;
} rbuf;

static int short_of(rbuf *r, const char *what) {
  if (!r->rc) r->rc = vr_errf(r->err, VR_EFORMAT, "model pack: truncated or bad %s", what);
  return r->rc;
}

static void get(rbuf *r, void *dst, size_t n, const char *what) {
  if (r->rc) return;
  if (n > r->left) {
    short_of(r, what);
    memset(dst, 0, n);
    return;
  }
  memcpy(dst, r->p, n);
  r->p += n, r->left -= n;
}
static int32_t get_i32(rbuf *r, const char *what) {
  int32_t v = 0;
  get(r, &v, sizeof v, what);
  return v;
}
static int64_t get_i64(rbuf *r, const char *what) {
  int64_t v = 0;
  get(r, &v, sizeof v, what);
  return v;
}
static float get_f32(rbuf *r, const char *what) {
  float v = 0;
  get(r, &v, sizeof v, what);
  return v;
}
/* A count in [0, hi] that at least `each` bytes per item can still back. */
static int get_count(rbuf *r, int hi, size_t each, const char *what) {
  int32_t n = get_i32(r, what);
  if (!r->rc && (n < 0 || n > hi || (size_t)n * each > r->left)) short_of(r, what);
  return r->rc ? 0 : n;
}
/* A NUL-terminated copy (vr_malloc), or NULL for a NULL string; *ok = 0
 * on a bad or oversized one. */
static char *get_str(rbuf *r, int *ok, const char *what) {
  uint32_t n = 0;
  *ok = 0;
  get(r, &n, sizeof n, what);
  if (r->rc) return NULL;
  if (n == NULL_STR) return *ok = 1, NULL;
  if (n > MAX_STR || n > r->left || memchr(r->p, 0, n)) {
    short_of(r, what);
    return NULL;
  }
  char *s = vr_malloc((size_t)n + 1);
  if (!s) {
    r->rc = vr_errf(r->err, VR_ENOMEM, "out of memory");
    return NULL;
  }
  memcpy(s, r->p, n);
  s[n] = 0;
  r->p += n, r->left -= n;
  *ok = 1;
  return s;
}
/* Bytes that must be exactly `want` long when present: *out gets a copy
 * (aligned when `aligned`), or NULL when absent. */
static void get_bytes(rbuf *r, size_t want, int aligned, void **out, const char *what) {
  uint64_t n = 0;
  *out = NULL;
  get(r, &n, sizeof n, what);
  if (r->rc || n == UINT64_MAX) return;
  if (n != want || n > r->left) {
    short_of(r, what);
    return;
  }
  void *d = aligned ? vr_aligned_alloc(64, n ? n : 64) : vr_malloc(n ? n : 1);
  if (!d) {
    r->rc = vr_errf(r->err, VR_ENOMEM, "out of memory");
    return;
  }
  if (n) memcpy(d, r->p, n);
  r->p += n, r->left -= n;
  *out = d;
}

/* dtype, rank and dims of a tensor, checked; its element count. */
static int64_t get_shape(rbuf *r, vr_dtype *dt, int *ndim, int64_t *shape, const char *what) {
  int32_t t = get_i32(r, what), nd = get_i32(r, what);
  if (r->rc) return 0;
  if (!vr_dtype_size((vr_dtype)t) || nd < 0 || nd > VR_MAX_DIMS) return short_of(r, what), 0;
  *dt = (vr_dtype)t, *ndim = nd;
  int64_t cnt = 1;
  for (int d = 0; d < nd; d++) {
    shape[d] = get_i64(r, what);
    if (r->rc || shape[d] < 0 || (shape[d] && cnt > VR_MAX_TENSOR_ELEMS / shape[d]))
      return short_of(r, what), 0;
    cnt *= shape[d];
  }
  return cnt;
}

static void get_val(rbuf *r, vr_graph *g) {
  int ok;
  char *name = get_str(r, &ok, "value name");
  if (r->rc) return;
  if (!name || !*name || vr_graph_find(g, name) >= 0) {
    vr_free(name);
    short_of(r, "value name (empty or repeated)");
    return;
  }
  int i = vr_graph_add_val(g, name);
  vr_free(name);
  if (i < 0) {
    r->rc = vr_errf(r->err, VR_ENOMEM, "out of memory");
    return;
  }
  vr_val *v = &g->vals[i];
  int64_t cnt = get_shape(r, &v->dtype, &v->ndim, v->shape, "value shape");
  v->kind = get_i32(r, "value");
  v->is_input = get_i32(r, "value") != 0;
  get_i32(r, "value"); /* is_output: taken from the output list */
  v->dyn_batch = get_i32(r, "value") != 0;
  if (r->rc) return;
  if (v->kind < VR_VAL_RUNTIME || v->kind > VR_VAL_AFFINE) {
    short_of(r, "value kind");
    return;
  }
  get_bytes(r, (size_t)cnt * vr_dtype_size(v->dtype), 1, &v->data, "value data");
  void *slope = NULL;
  get_bytes(r, (size_t)cnt * sizeof(int64_t), 0, &slope, "value slope");
  v->slope = slope;
  if (r->rc) return;
  /* no data for a runtime value, a slope only for an affine one (a
   * constant nothing reads may have none: check_wiring) */
  if ((v->kind == VR_VAL_RUNTIME && v->data) || (v->kind != VR_VAL_AFFINE && v->slope))
    short_of(r, "value data (does not match its kind)");
}

static void get_attr(rbuf *r, vr_attr *a) {
  int ok;
  a->name = get_str(r, &ok, "attribute name");
  if (!r->rc && !a->name) short_of(r, "attribute name");
  a->type = get_i32(r, "attribute");
  a->f = get_f32(r, "attribute");
  a->i = get_i64(r, "attribute");
  a->s = get_str(r, &ok, "attribute string");
  a->n = get_i32(r, "attribute");
  if (r->rc) return;
  if (a->n < 0 || a->n > MAX_COUNT) {
    short_of(r, "attribute count");
    return;
  }
  void *f = NULL, *in = NULL;
  get_bytes(r, (size_t)a->n * sizeof(float), 0, &f, "attribute floats");
  a->floats = f;
  get_bytes(r, (size_t)a->n * sizeof(int64_t), 0, &in, "attribute ints");
  a->ints = in;
  int has_t = get_i32(r, "attribute tensor");
  if (has_t && !r->rc) {
    if (!(a->t = VR_NEW(vr_tview))) {
      r->rc = vr_errf(r->err, VR_ENOMEM, "out of memory");
      return;
    }
    int64_t cnt = get_shape(r, &a->t->dt, &a->t->ndim, a->t->shape, "attribute tensor");
    if (!r->rc)
      get_bytes(r, (size_t)cnt * vr_dtype_size(a->t->dt), 1, &a->t->data,
                "attribute tensor data");
  }
  if (r->rc) return;
  /* what the ONNX loader makes of each type, and nothing else */
  int t = a->type;
  if ((t == VR_ATTR_STRING) != !!a->s || (t == VR_ATTR_FLOATS) != !!a->floats ||
      (t == VR_ATTR_INTS) != !!a->ints || (t == VR_ATTR_TENSOR) != !!a->t ||
      (a->t && !a->t->data) || (a->n && t != VR_ATTR_FLOATS && t != VR_ATTR_INTS))
    short_of(r, "attribute (its fields do not match its type)");
}

static void get_node(rbuf *r, vr_graph *g) {
  int ni = vr_graph_add_node(g), ok;
  if (ni < 0) {
    r->rc = vr_errf(r->err, VR_ENOMEM, "out of memory");
    return;
  }
  vr_node *n = &g->nodes[ni];
  n->name = get_str(r, &ok, "node name");
  n->op = get_str(r, &ok, "node op");
  if (!r->rc && (!n->name || !n->op)) short_of(r, "node name/op");
  n->opset = get_i64(r, "node");
  int nin = get_count(r, MAX_COUNT, sizeof(int32_t), "node inputs");
  if (r->rc || !(n->in = vr_calloc((size_t)nin + 1, sizeof(int)))) goto oom;
  n->nin = nin;
  for (int k = 0; k < nin; k++) n->in[k] = get_i32(r, "node input");
  int nout = get_count(r, MAX_COUNT, sizeof(int32_t), "node outputs");
  if (r->rc || !(n->out = vr_calloc((size_t)nout + 1, sizeof(int)))) goto oom;
  n->nout = nout;
  for (int k = 0; k < nout; k++) n->out[k] = get_i32(r, "node output");
  int na = get_count(r, MAX_COUNT, 32, "node attributes");
  if (r->rc || !(n->attrs = vr_calloc((size_t)na + 1, sizeof(vr_attr)))) goto oom;
  for (int a = 0; a < na && !r->rc; a++) {
    n->nattr = a + 1; /* so a partial read is freed */
    get_attr(r, &n->attrs[a]);
  }
  n->npost = get_i32(r, "node post-ops");
  if (!r->rc && (n->npost < 0 || n->npost > VR_MAX_POST)) short_of(r, "node post-ops");
  for (int k = 0; k < n->npost && !r->rc; k++) {
    n->post[k].kind = get_i32(r, "post-op");
    n->post[k].alg = get_i32(r, "post-op");
    n->post[k].alpha = get_f32(r, "post-op");
    n->post[k].beta = get_f32(r, "post-op");
  }
  n->sum_in = get_i32(r, "node");
  char *label = get_str(r, &ok, "node label");
  if (!r->rc && (!label || strlen(label) >= sizeof n->label)) short_of(r, "node label");
  if (label && !r->rc) memcpy(n->label, label, strlen(label) + 1);
  vr_free(label);
  return;
oom:
  if (!r->rc) r->rc = vr_errf(r->err, VR_ENOMEM, "out of memory");
}

#define BAD(err, fmt, ...) vr_errf(err, VR_EFORMAT, "model pack: " fmt, __VA_ARGS__)

static int known_eltwise(int alg) {
  static const int ok[] = {dnnl_eltwise_relu,      dnnl_eltwise_logistic, dnnl_eltwise_tanh,
                           dnnl_eltwise_hardswish, dnnl_eltwise_linear,   dnnl_eltwise_clip_v2,
                           dnnl_eltwise_elu,       dnnl_eltwise_gelu_erf, dnnl_eltwise_swish};
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
    if (alg == ok[i]) return 1;
  return 0;
}

/* Post-ops, the SUM addend and the graph's order and ports, which the
 * planner and the lowering take for granted after vr_graph_optimize. */
static int check_wiring(vr_graph *g, vr_errbuf *err) {
  for (int i = 0; i < g->nvals; i++) g->vals[i].producer = -1;
  /* the opsets the ONNX loader accepts: ops branch on them */
  if (g->opset < 7 || g->opset > 18)
    return BAD(err, "opset %lld not supported", (long long)g->opset);
  for (int ni = 0; ni < g->nnodes; ni++) {
    vr_node *n = &g->nodes[ni];
    if (n->opset != g->opset) return BAD(err, "node %d: opset %lld", ni, (long long)n->opset);
    /* the post-ops fuse.c makes, on the ops it makes them on */
    int bn = !strcmp(n->op, "BatchNormalization");
    int fusable = !strcmp(n->op, "Conv") || !strcmp(n->op, "Gemm") || !strcmp(n->op, "MatMul");
    if (n->npost && !fusable && !(bn && n->npost == 1))
      return BAD(err, "node %d: post-ops on an op that takes none", ni);
    int sums = 0;
    for (int k = 0; k < n->npost; k++) {
      const vr_post *q = &n->post[k];
      if ((q->kind != VR_POST_ELTWISE && q->kind != VR_POST_SUM) ||
          (q->kind == VR_POST_ELTWISE && !known_eltwise(q->alg)) ||
          (bn && (q->kind != VR_POST_ELTWISE || q->alg != dnnl_eltwise_relu)))
        return BAD(err, "node %d: post-op %d is none the fusions make", ni, k);
      sums += q->kind == VR_POST_SUM;
    }
    if (n->sum_in < -1 || n->sum_in >= n->nin || (n->sum_in >= 0) != (sums > 0) || sums > 1 ||
        (n->sum_in >= 0 && (strcmp(n->op, "Conv") || n->in[n->sum_in] < 0)))
      return BAD(err, "node %d: bad sum input %d", ni, n->sum_in);
    for (int k = 0; k < n->nin; k++) {
      int v = n->in[k];
      if (v < -1 || v >= g->nvals) return BAD(err, "node %d: input %d out of range", ni, k);
      if (v >= 0 && g->vals[v].kind != VR_VAL_RUNTIME &&
          (!g->vals[v].data || (g->vals[v].kind == VR_VAL_AFFINE && !g->vals[v].slope)))
        return BAD(err, "node %d: constant input %d has no data", ni, k);
      if (v < 0 || g->vals[v].kind != VR_VAL_RUNTIME || g->vals[v].is_input) continue;
      if (g->vals[v].producer < 0) /* not produced before it: order or a hole */
        return BAD(err, "node %d: input %d is computed by no earlier node", ni, k);
    }
    for (int k = 0; k < n->nout; k++) {
      int v = n->out[k];
      if (v < -1 || v >= g->nvals) return BAD(err, "node %d: output %d out of range", ni, k);
      if (v < 0) continue;
      vr_val *o = &g->vals[v];
      if (o->producer >= 0 || o->is_input || o->kind != VR_VAL_RUNTIME)
        return BAD(err, "node %d: output %d is written twice, or is an input or constant", ni,
                   k);
      o->producer = ni;
    }
  }
  if (g->nin < 1 || g->nout < 1) return BAD(err, "%d inputs, %d outputs", g->nin, g->nout);
  int marked = 0;
  for (int i = 0; i < g->nvals; i++) marked += g->vals[i].is_input;
  for (int i = 0; i < g->nin; i++) {
    int v = g->inputs[i];
    if (v < 0 || v >= g->nvals || !g->vals[v].is_input || g->vals[v].kind != VR_VAL_RUNTIME)
      return BAD(err, "graph input %d (value %d) is no runtime input", i, v);
    for (int j = 0; j < i; j++)
      if (g->inputs[j] == v) return BAD(err, "graph input %d repeats value %d", i, v);
  }
  if (marked != g->nin) return BAD(err, "%d values marked input, %d listed", marked, g->nin);
  for (int i = 0; i < g->nvals; i++)
    if (g->vals[i].dyn_batch && !g->vals[i].is_input)
      return BAD(err, "value %d has a batch dim but is no input", i);
  for (int i = 0; i < g->nout; i++) {
    int v = g->outputs[i];
    if (v < 0 || v >= g->nvals) return BAD(err, "graph output %d out of range", i);
    if (g->vals[v].kind != VR_VAL_RUNTIME ? !g->vals[v].data
                                          : g->vals[v].producer < 0 && !g->vals[v].is_input)
      return BAD(err, "graph output %d is computed by nothing", i);
    if (g->vals[v].is_output) return BAD(err, "graph output %d repeats value %d", i, v);
    g->vals[v].is_output = 1;
  }
  return 0;
}

/* The shapes inference gives at batch 1 must be the packed ones. */
static int check_shapes(const vr_graph *g, vr_errbuf *err) {
  size_t nv = (size_t)g->nvals + 1;
  vr_tview *vt = vr_calloc(nv, sizeof(vr_tview));
  void **owned = vr_calloc(nv, sizeof(void *));
  char *used = vr_calloc(nv, 1);
  int rc = vt && owned && used ? vr_graph_shapes_at(g, 1, vt, owned, err)
                               : vr_errf(err, VR_ENOMEM, "out of memory");
  /* values left over from folding and fusion, which nothing reads, are
   * not inferred: only those the graph touches are compared */
  for (int ni = 0; used && ni < g->nnodes; ni++) {
    for (int k = 0; k < g->nodes[ni].nin; k++)
      if (g->nodes[ni].in[k] >= 0) used[g->nodes[ni].in[k]] = 1;
    for (int k = 0; k < g->nodes[ni].nout; k++)
      if (g->nodes[ni].out[k] >= 0) used[g->nodes[ni].out[k]] = 1;
  }
  for (int i = 0; used && i < g->nin; i++) used[g->inputs[i]] = 1;
  for (int i = 0; used && i < g->nout; i++) used[g->outputs[i]] = 1;
  for (int i = 0; !rc && i < g->nvals; i++) {
    const vr_val *v = &g->vals[i];
    if (!used[i]) continue;
    int same = vt[i].dt == v->dtype && vt[i].ndim == v->ndim;
    for (int d = 0; same && d < v->ndim; d++) same = vt[i].shape[d] == v->shape[d];
    if (!same) rc = BAD(err, "value %d: its packed shape is not the inferred one", i);
  }
  for (int i = 0; owned && i < g->nvals; i++) vr_aligned_free(owned[i]);
  vr_free(used);
  vr_free(owned);
  vr_free(vt);
  return rc;
}

static int read_graph(rbuf *r, vr_graph *g) {
  uint32_t head[2] = {0, 0};
  get(r, head, sizeof head, "header");
  if (!r->rc && (head[0] != PACK_MAGIC || head[1] != PACK_VERSION))
    return r->rc = vr_errf(r->err, VR_EFORMAT, "not a model pack of this version");
  int32_t dims = get_i32(r, "header"), posts = get_i32(r, "header");
  if (!r->rc && (dims != VR_MAX_DIMS || posts != VR_MAX_POST))
    return r->rc = vr_errf(r->err, VR_EFORMAT, "model pack from another build");
  g->opset = get_i64(r, "header");
  int nvals = get_count(r, MAX_COUNT, 40, "value count");
  int nnodes = get_count(r, MAX_COUNT, 40, "node count");
  int nin = get_count(r, MAX_COUNT, 4, "input count");
  int nout = get_count(r, MAX_COUNT, 4, "output count");
  for (int i = 0; i < nvals && !r->rc; i++) get_val(r, g);
  for (int i = 0; i < nnodes && !r->rc; i++) get_node(r, g);
  if (r->rc) return r->rc;
  g->inputs = vr_calloc((size_t)nin + 1, sizeof(int));
  g->outputs = vr_calloc((size_t)nout + 1, sizeof(int));
  if (!g->inputs || !g->outputs) return r->rc = vr_errf(r->err, VR_ENOMEM, "out of memory");
  for (int i = 0; i < nin; i++) g->inputs[i] = get_i32(r, "inputs");
  g->nin = nin;
  for (int i = 0; i < nout; i++) g->outputs[i] = get_i32(r, "outputs");
  g->nout = nout;
  if (!r->rc && r->left) short_of(r, "length (bytes after the end)");
  return r->rc;
}

int vr_model_unpack(const void *buf, size_t len, vr_model **out, vr_errbuf *err) {
  if (!buf || !out) return vr_errf(err, VR_EINVAL, "buf/out is NULL");
  *out = NULL;
  vr_model *m = VR_NEW(vr_model);
  if (!m) return vr_errf(err, VR_ENOMEM, "out of memory");
  vr_graph_init(&m->g);
  rbuf r = {buf, len, err, 0};
  int rc = read_graph(&r, &m->g);
  /* the wiring first: the op checks read node inputs by index */
  if (!rc) rc = check_wiring(&m->g, err);
  if (!rc) rc = vr__graph_check_ops(&m->g, 1, err);
  if (!rc) rc = check_shapes(&m->g, err);
  if (!rc) rc = vr__model_finish(m, err);
  if (rc) {
    if (rc == VR_ENOMEM && err && !err->msg[0]) vr_errf(err, rc, "out of memory");
    vr_model_free(m);
    return rc;
  }
  *out = m;
  return 0;
}
