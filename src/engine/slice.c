/* Model slices: a node range of an optimised graph as a model of its own,
 * holding only the weights its nodes read (AsyFunc's shadow instances load
 * just their layer blocks). */
#include <string.h>

#include "base/alloc.h"
#include "engine/graph.h"

int vr__graph_range_ports(const vr_graph *g, int b, int e, int *in_vals, int *nin,
                          int *out_vals, int *nout) {
  *nin = *nout = 0;
  if (b == 0 && e == g->nnodes) {
    for (int i = 0; i < g->nin; i++) in_vals[(*nin)++] = g->inputs[i];
    for (int i = 0; i < g->nout; i++) out_vals[(*nout)++] = g->outputs[i];
    return 0;
  }
  char *seen = vr_calloc((size_t)g->nvals + 1, 1);
  if (!seen) return VR_ENOMEM;
  for (int ni = b; ni < e; ni++)
    for (int k = 0; k < g->nodes[ni].nin; k++) {
      int v = g->nodes[ni].in[k];
      if (v < 0 || seen[v] || g->vals[v].kind != VR_VAL_RUNTIME) continue;
      if (g->vals[v].producer >= b && g->vals[v].producer < e) continue;
      seen[v] = 1;
      in_vals[(*nin)++] = v;
    }
  for (int ni = b; ni < e; ni++)
    for (int k = 0; k < g->nodes[ni].nout; k++) {
      int v = g->nodes[ni].out[k], used = 0;
      if (v < 0) continue;
      used = g->vals[v].is_output;
      for (int nj = e; nj < g->nnodes && !used; nj++)
        for (int j = 0; j < g->nodes[nj].nin; j++)
          if (g->nodes[nj].in[j] == v) used = 1;
      if (used) out_vals[(*nout)++] = v;
    }
  vr_free(seen);
  return 0;
}

static void *dup_aligned(const void *src, size_t n) {
  void *d = vr_aligned_alloc(64, n ? n : 64);
  if (d && n) memcpy(d, src, n);
  return d;
}

/* Copies value src into dst's fresh slot (constants deep-copied). */
static int copy_val(vr_val *dst, const vr_val *src) {
  dst->dtype = src->dtype;
  dst->ndim = src->ndim;
  memcpy(dst->shape, src->shape, sizeof dst->shape);
  dst->kind = src->kind;
  if (src->kind == VR_VAL_RUNTIME || !src->data) return 0;
  int64_t cnt = vr_numel(src->ndim, src->shape);
  if (!(dst->data = dup_aligned(src->data, (size_t)cnt * vr_dtype_size(src->dtype))))
    return VR_ENOMEM;
  if (src->kind == VR_VAL_AFFINE && src->slope) {
    dst->slope = vr_malloc((size_t)(cnt ? cnt : 1) * sizeof(int64_t));
    if (!dst->slope) return VR_ENOMEM;
    memcpy(dst->slope, src->slope, (size_t)cnt * sizeof(int64_t));
  }
  return 0;
}

static int copy_attr(vr_attr *d, const vr_attr *s) {
  *d = *s;
  d->name = vr_strdup(s->name);
  d->s = s->s ? vr_strdup(s->s) : NULL;
  d->floats = NULL;
  d->ints = NULL;
  d->t = NULL;
  if (!d->name || (s->s && !d->s)) return VR_ENOMEM;
  if (s->floats && !(d->floats = vr_malloc((size_t)(s->n ? s->n : 1) * sizeof(float))))
    return VR_ENOMEM;
  if (s->floats) memcpy(d->floats, s->floats, (size_t)s->n * sizeof(float));
  if (s->ints && !(d->ints = vr_malloc((size_t)(s->n ? s->n : 1) * sizeof(int64_t))))
    return VR_ENOMEM;
  if (s->ints) memcpy(d->ints, s->ints, (size_t)s->n * sizeof(int64_t));
  if (s->t) {
    if (!(d->t = VR_NEW(vr_tview))) return VR_ENOMEM;
    *d->t = *s->t;
    d->t->data = NULL;
    size_t n = (size_t)vr_tview_numel(s->t) * vr_dtype_size(s->t->dt);
    if (s->t->data && !(d->t->data = dup_aligned(s->t->data, n))) return VR_ENOMEM;
  }
  return 0;
}

static int copy_node(vr_node *d, const vr_node *s, const int *map) {
  d->name = vr_strdup(s->name);
  d->op = vr_strdup(s->op);
  d->op_id = s->op_id;
  d->opset = s->opset;
  d->npost = s->npost;
  memcpy(d->post, s->post, sizeof d->post);
  d->sum_in = s->sum_in;
  memcpy(d->label, s->label, sizeof d->label);
  d->in = vr_calloc((size_t)s->nin + 1, sizeof(int));
  d->out = vr_calloc((size_t)s->nout + 1, sizeof(int));
  d->attrs = vr_calloc((size_t)s->nattr + 1, sizeof(vr_attr));
  if (!d->name || !d->op || !d->in || !d->out || !d->attrs) return VR_ENOMEM;
  d->nin = s->nin;
  d->nout = s->nout;
  for (int k = 0; k < s->nin; k++) d->in[k] = s->in[k] < 0 ? -1 : map[s->in[k]];
  for (int k = 0; k < s->nout; k++) d->out[k] = s->out[k] < 0 ? -1 : map[s->out[k]];
  for (int a = 0; a < s->nattr; a++) {
    d->nattr = a + 1; /* so a partial copy is freed */
    if (copy_attr(&d->attrs[a], &s->attrs[a])) return VR_ENOMEM;
  }
  return 0;
}

/* A boundary input carries the batch in dim 0 when its shape at batch 2
 * is its batch-1 shape with dim 0 doubled from 1. */
static int batch_dim(const vr_tview *s1, const vr_tview *s2, int *dyn) {
  *dyn = 0;
  if (s1->ndim != s2->ndim) return -1;
  int same = 1;
  for (int d = 0; d < s1->ndim; d++) same &= s1->shape[d] == s2->shape[d];
  if (same) return 0;
  if (s1->ndim < 1 || s1->shape[0] != 1 || s2->shape[0] != 2) return -1;
  for (int d = 1; d < s1->ndim; d++)
    if (s1->shape[d] != s2->shape[d]) return -1;
  *dyn = 1;
  return 0;
}

typedef struct slicer {
  const vr_graph *g;
  vr_graph *ng;
  int b, e;
  int *map; /* old value -> new value, -1 = not in the slice */
  int *ins, nin, *outs, nout;
  vr_tview *v1, *v2;
  void **o1, **o2;
} slicer;

static int add_val(slicer *s, int v) {
  if (s->map[v] >= 0) return 0;
  int nv = vr_graph_add_val(s->ng, s->g->vals[v].name);
  if (nv < 0) return VR_ENOMEM;
  s->map[v] = nv;
  return copy_val(&s->ng->vals[nv], &s->g->vals[v]);
}

static int mark_ports(slicer *s, vr_errbuf *err) {
  vr_graph *ng = s->ng;
  ng->inputs = vr_calloc((size_t)s->nin + 1, sizeof(int));
  ng->outputs = vr_calloc((size_t)s->nout + 1, sizeof(int));
  if (!ng->inputs || !ng->outputs) return VR_ENOMEM;
  for (int i = 0; i < s->nin; i++) {
    int v = s->ins[i], dyn;
    if (batch_dim(&s->v1[v], &s->v2[v], &dyn))
      return vr_errf(err, VR_EUNSUPPORTED, "boundary tensor '%s' does not carry the batch "
                     "in dim 0; choose another split", s->g->vals[v].name);
    vr_val *nv = &ng->vals[s->map[v]];
    nv->is_input = 1;
    nv->dyn_batch = dyn;
    ng->inputs[ng->nin++] = s->map[v];
  }
  for (int i = 0; i < s->nout; i++) {
    ng->vals[s->map[s->outs[i]]].is_output = 1;
    ng->outputs[ng->nout++] = s->map[s->outs[i]];
  }
  return 0;
}

static int slice_graph(slicer *s, vr_errbuf *err) {
  const vr_graph *g = s->g;
  int rc = vr__graph_range_ports(g, s->b, s->e, s->ins, &s->nin, s->outs, &s->nout);
  if (rc) return rc;
  if (!rc) rc = vr_graph_shapes_at(g, 1, s->v1, s->o1, err);
  if (!rc) rc = vr_graph_shapes_at(g, 2, s->v2, s->o2, err);
  for (int i = 0; !rc && i < s->nin; i++) rc = add_val(s, s->ins[i]);
  for (int ni = s->b; !rc && ni < s->e; ni++) {
    const vr_node *n = &g->nodes[ni];
    for (int k = 0; !rc && k < n->nin; k++)
      if (n->in[k] >= 0) rc = add_val(s, n->in[k]);
    for (int k = 0; !rc && k < n->nout; k++)
      if (n->out[k] >= 0) rc = add_val(s, n->out[k]);
    int nn = rc ? -1 : vr_graph_add_node(s->ng);
    if (nn < 0) return rc ? rc : VR_ENOMEM;
    rc = copy_node(&s->ng->nodes[nn], n, s->map);
    for (int k = 0; !rc && k < n->nout; k++)
      if (n->out[k] >= 0) s->ng->vals[s->map[n->out[k]]].producer = nn;
  }
  s->ng->opset = g->opset;
  if (!rc) rc = mark_ports(s, err);
  return rc;
}

static void slicer_free(slicer *s) {
  for (int i = 0; s->o1 && s->o2 && i < s->g->nvals; i++) {
    vr_aligned_free(s->o1[i]);
    vr_aligned_free(s->o2[i]);
  }
  vr_free(s->o1);
  vr_free(s->o2);
  vr_free(s->v1);
  vr_free(s->v2);
  vr_free(s->map);
  vr_free(s->ins);
  vr_free(s->outs);
}

int vr_model_slice(const vr_model *m, int node_begin, int node_end, vr_model **out,
                   vr_errbuf *err) {
  if (!m || !out) return vr_errf(err, VR_EINVAL, "model/out is NULL");
  *out = NULL;
  if (node_begin < 0 || node_end > m->nnodes || node_begin >= node_end)
    return vr_errf(err, VR_ERANGE, "node range [%d, %d) outside [0, %d)", node_begin,
                   node_end, m->nnodes);
  const vr_graph *g = &m->g;
  size_t nv = (size_t)g->nvals + 1;
  slicer s = {g, NULL, node_begin, node_end, vr_malloc(nv * sizeof(int)),
              vr_calloc(nv, sizeof(int)), 0, vr_calloc(nv, sizeof(int)), 0,
              vr_calloc(nv, sizeof(vr_tview)), vr_calloc(nv, sizeof(vr_tview)),
              vr_calloc(nv, sizeof(void *)), vr_calloc(nv, sizeof(void *))};
  vr_model *sm = VR_NEW(vr_model);
  int rc = 0;
  if (!sm || !s.map || !s.ins || !s.outs || !s.v1 || !s.v2 || !s.o1 || !s.o2)
    rc = vr_errf(err, VR_ENOMEM, "out of memory");
  if (sm) vr_graph_init(&sm->g);
  s.ng = sm ? &sm->g : NULL;
  for (size_t i = 0; !rc && i < nv; i++) s.map[i] = -1;
  if (!rc) rc = slice_graph(&s, err);
  if (!rc) rc = vr__model_finish(sm, err);
  slicer_free(&s);
  if (rc) {
    if (rc == VR_ENOMEM && err && !err->msg[0]) vr_errf(err, rc, "out of memory");
    vr_model_free(sm);
    return rc;
  }
  *out = sm;
  return 0;
}

int vr_model_chain_cuts(const vr_model *m, char *cut) {
  const vr_graph *g = &m->g;
  size_t nv = (size_t)g->nvals + 1;
  int *ins = vr_calloc(nv, sizeof(int)), *outs = vr_calloc(nv, sizeof(int)), rc = 0;
  vr_tview *v1 = vr_calloc(nv, sizeof(vr_tview)), *v2 = vr_calloc(nv, sizeof(vr_tview));
  void **o1 = vr_calloc(nv, sizeof(void *)), **o2 = vr_calloc(nv, sizeof(void *));
  if (!ins || !outs || !v1 || !v2 || !o1 || !o2) rc = VR_ENOMEM;
  if (!rc) rc = vr_graph_shapes_at(g, 1, v1, o1, NULL);
  if (!rc) rc = vr_graph_shapes_at(g, 2, v2, o2, NULL);
  for (int k = 0; !rc && k <= g->nnodes; k++) {
    int ni, no, dyn;
    cut[k] = 0;
    if (k == 0 || k == g->nnodes) continue;
    if ((rc = vr__graph_range_ports(g, 0, k, ins, &ni, outs, &no))) break;
    if (no != 1 || g->vals[outs[0]].is_output || batch_dim(&v1[outs[0]], &v2[outs[0]], &dyn) ||
        !dyn)
      continue;
    int v = outs[0];
    if ((rc = vr__graph_range_ports(g, k, g->nnodes, ins, &ni, outs, &no))) break;
    cut[k] = ni == 1 && ins[0] == v;
  }
  for (size_t i = 0; o1 && o2 && i < nv - 1; i++) {
    vr_aligned_free(o1[i]);
    vr_aligned_free(o2[i]);
  }
  vr_free(o1);
  vr_free(o2);
  vr_free(v1);
  vr_free(v2);
  vr_free(ins);
  vr_free(outs);
  return rc;
}
