/* Graph IR bookkeeping: values, nodes, attributes. */
#include "engine/ir.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

void vr_graph_init(vr_graph *g) {
  memset(g, 0, sizeof(*g));
  vr_map_init(&g->by_name);
}

static void attr_free(vr_attr *a) {
  vr_free(a->name);
  vr_free(a->s);
  vr_free(a->floats);
  vr_free(a->ints);
  if (a->t) {
    vr_aligned_free(a->t->data);
    vr_free(a->t);
  }
}

void vr_graph_free(vr_graph *g) {
  if (!g) return;
  for (int i = 0; i < g->nvals; i++) {
    vr_free(g->vals[i].name);
    vr_aligned_free(g->vals[i].data);
    vr_free(g->vals[i].slope);
  }
  for (int i = 0; i < g->nnodes; i++) {
    vr_node *n = &g->nodes[i];
    vr_free(n->name);
    vr_free(n->op);
    vr_free(n->in);
    vr_free(n->out);
    for (int a = 0; a < n->nattr; a++) attr_free(&n->attrs[a]);
    vr_free(n->attrs);
  }
  vr_free(g->vals);
  vr_free(g->nodes);
  vr_free(g->inputs);
  vr_free(g->outputs);
  vr_map_free(&g->by_name);
  memset(g, 0, sizeof(*g));
}

int vr_graph_add_val(vr_graph *g, const char *name) {
  if (g->nvals == g->capvals) {
    int cap = g->capvals ? g->capvals * 2 : 64;
    vr_val *nv = vr_realloc(g->vals, (size_t)cap * sizeof(vr_val));
    if (!nv) return VR_ENOMEM;
    g->vals = nv;
    g->capvals = cap;
  }
  char gen[48];
  if (!name || !*name) {
    snprintf(gen, sizeof gen, "_vr_%d", g->nvals);
    name = gen;
  }
  vr_val *v = &g->vals[g->nvals];
  memset(v, 0, sizeof(*v));
  v->name = vr_strdup(name);
  v->producer = -1;
  if (!v->name) return VR_ENOMEM;
  if (vr_map_put(&g->by_name, name, (void *)(intptr_t)(g->nvals + 1), NULL)) {
    vr_free(v->name);
    return VR_ENOMEM;
  }
  return g->nvals++;
}

int vr_graph_find(const vr_graph *g, const char *name) {
  intptr_t x = (intptr_t)vr_map_get(&g->by_name, name);
  return x ? (int)(x - 1) : -1;
}

int vr_graph_add_node(vr_graph *g) {
  if (g->nnodes == g->capnodes) {
    int cap = g->capnodes ? g->capnodes * 2 : 64;
    vr_node *nn = vr_realloc(g->nodes, (size_t)cap * sizeof(vr_node));
    if (!nn) return VR_ENOMEM;
    g->nodes = nn;
    g->capnodes = cap;
  }
  memset(&g->nodes[g->nnodes], 0, sizeof(vr_node));
  g->nodes[g->nnodes].sum_in = -1;
  return g->nnodes++;
}

void vr_val_set_const(vr_val *v, vr_dtype dt, int ndim, const int64_t *shape,
                      void *data) {
  vr_aligned_free(v->data);
  vr_free(v->slope);
  v->slope = NULL;
  v->kind = VR_VAL_CONST;
  v->dtype = dt;
  v->ndim = ndim;
  for (int i = 0; i < ndim; i++) v->shape[i] = shape[i];
  v->data = data;
}

int64_t vr_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

const vr_attr *vr_node_attr(const vr_node *n, const char *name) {
  for (int i = 0; i < n->nattr; i++)
    if (!strcmp(n->attrs[i].name, name)) return &n->attrs[i];
  return NULL;
}

int64_t vr_attr_i(const vr_node *n, const char *name, int64_t dflt) {
  const vr_attr *a = vr_node_attr(n, name);
  return a && a->type == VR_ATTR_INT ? a->i : dflt;
}

float vr_attr_f(const vr_node *n, const char *name, float dflt) {
  const vr_attr *a = vr_node_attr(n, name);
  return a && a->type == VR_ATTR_FLOAT ? a->f : dflt;
}

const char *vr_attr_s(const vr_node *n, const char *name, const char *dflt) {
  const vr_attr *a = vr_node_attr(n, name);
  return a && a->type == VR_ATTR_STRING ? a->s : dflt;
}

int vr_attr_ints(const vr_node *n, const char *name, const int64_t **v) {
  const vr_attr *a = vr_node_attr(n, name);
  if (!a || a->type != VR_ATTR_INTS) return -1;
  *v = a->ints;
  return a->n;
}

/* A float as an integer index, shape or count: saturated, and NaN as 0.
 * A plain cast of a value past int64 is undefined (UBSan aborts on it),
 * and such values reach here from a model's constants and a request's
 * data alike; every caller bounds what it reads. */
static int64_t sat_i64(double x) {
  if (!(x == x)) return 0;
  if (x >= 9223372036854775808.0) return INT64_MAX;
  if (x < -9223372036854775808.0) return INT64_MIN;
  return (int64_t)x;
}

int64_t vr_tview_geti(const vr_tview *t, int64_t i) {
  switch (t->dt) {
    case VR_DT_I64: return ((const int64_t *)t->data)[i];
    case VR_DT_I32: return ((const int32_t *)t->data)[i];
    case VR_DT_U64: return (int64_t)((const uint64_t *)t->data)[i];
    case VR_DT_U32: return ((const uint32_t *)t->data)[i];
    case VR_DT_I16: return ((const int16_t *)t->data)[i];
    case VR_DT_U16: return ((const uint16_t *)t->data)[i];
    case VR_DT_I8: return ((const int8_t *)t->data)[i];
    case VR_DT_U8:
    case VR_DT_BOOL: return ((const uint8_t *)t->data)[i];
    case VR_DT_F32: return sat_i64(((const float *)t->data)[i]);
    case VR_DT_F64: return sat_i64(((const double *)t->data)[i]);
    default: return 0;
  }
}

double vr_tview_getf(const vr_tview *t, int64_t i) {
  switch (t->dt) {
    case VR_DT_F32: return ((const float *)t->data)[i];
    case VR_DT_F64: return ((const double *)t->data)[i];
    /* past 2^63 through vr_tview_geti it is negative */
    case VR_DT_U64: return (double)((const uint64_t *)t->data)[i];
    default: return (double)vr_tview_geti(t, i);
  }
}
