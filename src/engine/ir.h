/*
 * The engine's internal graph IR.
 *
 * A vr_graph owns everything it points to: values (tensors), nodes, their
 * attributes and constant data. Values are referred to by index, nodes by
 * index; a node input of -1 is an omitted optional input.
 *
 * Dynamic batch: graph inputs whose first dim is symbolic get the batch
 * size. Every value's `shape` is its shape at batch 1. Small integer values
 * computed from shapes (exporter chains Shape -> Gather -> Concat ->
 * Reshape) are folded into constants; when they depend on the batch they
 * are AFFINE in it: value(B) = data + slope * (B - 1), which the planner
 * materialises per batch size.
 */
#ifndef VR_ENGINE_IR_H
#define VR_ENGINE_IR_H

#include <stdint.h>

#include "base/map.h"
#include "vario/engine.h"

/* Largest tensor the engine accepts (elements); larger shapes are rejected
 * with VR_ELIMIT rather than attempted. */
#define VR_MAX_TENSOR_ELEMS ((int64_t)1 << 31)

enum { VR_VAL_RUNTIME = 0, VR_VAL_CONST = 1, VR_VAL_AFFINE = 2 };

typedef struct vr_val {
  char *name;
  vr_dtype dtype;
  int ndim;
  int64_t shape[VR_MAX_DIMS]; /* at batch 1 */
  int kind;                   /* VR_VAL_* */
  void *data;   /* CONST/AFFINE: owned, 64-byte aligned (vr_aligned_alloc) */
  int64_t *slope; /* AFFINE: owned, one int64 per element */
  int producer;   /* node index, or -1 */
  int is_input;   /* a graph input (runtime) */
  int is_output;  /* a graph output */
  int dyn_batch;  /* graph input whose dim 0 is the batch */
} vr_val;

enum {
  VR_ATTR_FLOAT = 1, VR_ATTR_INT = 2, VR_ATTR_STRING = 3, VR_ATTR_TENSOR = 4,
  VR_ATTR_FLOATS = 6, VR_ATTR_INTS = 7, VR_ATTR_STRINGS = 8
};

typedef struct vr_attr {
  char *name;
  int type;
  float f;
  int64_t i;
  char *s;        /* STRING (NUL-terminated copy) */
  int n;          /* FLOATS / INTS count */
  float *floats;
  int64_t *ints;
  struct vr_tview *t; /* TENSOR: owned copy (data vr_aligned_alloc'd) */
} vr_attr;

/* Fused post-operations of Conv / Gemm / MatMul. */
enum { VR_POST_ELTWISE = 1, VR_POST_SUM = 2 };
#define VR_MAX_POST 4
typedef struct vr_post {
  int kind;
  int alg;        /* dnnl_alg_kind_t for ELTWISE */
  float alpha, beta;
} vr_post;

typedef struct vr_node {
  char *name;
  char *op;       /* ONNX op_type */
  int op_id;      /* index in the op table (ops.h) */
  int64_t opset;  /* the model's ai.onnx opset (semantics changed over time) */
  int nin, nout;
  int *in, *out;  /* value indices; in[i] may be -1 */
  int nattr;
  vr_attr *attrs;
  int dead;
  /* Fusion results. sum_in: index in `in` of the SUM post-op's addend. */
  int npost;
  vr_post post[VR_MAX_POST];
  int sum_in;
  char label[64]; /* op name after fusion, e.g. "Conv+Add+Relu" */
} vr_node;

typedef struct vr_graph {
  vr_val *vals;
  int nvals, capvals;
  vr_node *nodes;
  int nnodes, capnodes;
  int *inputs, nin;
  int *outputs, nout;
  vr_map by_name; /* value name -> index + 1 */
  int64_t opset;
} vr_graph;

void vr_graph_init(vr_graph *g);
void vr_graph_free(vr_graph *g);
/* Adds a value (name copied; NULL = generated); returns index or <0. */
int vr_graph_add_val(vr_graph *g, const char *name);
/* Index of a value by name, or -1. */
int vr_graph_find(const vr_graph *g, const char *name);
/* Appends a zeroed node; returns its index or <0. */
int vr_graph_add_node(vr_graph *g);
void vr_val_set_const(vr_val *v, vr_dtype dt, int ndim, const int64_t *shape,
                      void *data);
int64_t vr_numel(int ndim, const int64_t *shape);

/* Attribute lookup on a node; NULL if absent. The typed accessors give
 * dflt for an absent attribute; one of another type than ONNX's was
 * refused at load (vr__attr_check, ops.h). */
const vr_attr *vr_node_attr(const vr_node *n, const char *name);
int64_t vr_attr_i(const vr_node *n, const char *name, int64_t dflt);
float vr_attr_f(const vr_node *n, const char *name, float dflt);
const char *vr_attr_s(const vr_node *n, const char *name, const char *dflt);
/* INTS attribute: returns count (or -1 if absent) and sets *v. */
int vr_attr_ints(const vr_node *n, const char *name, const int64_t **v);

/* A plain (row-major) tensor view used by shape inference and the
 * reference kernels. data is NULL when the value is not known. */
typedef struct vr_tview {
  vr_dtype dt;
  int ndim;
  int64_t shape[VR_MAX_DIMS];
  void *data;
} vr_tview;

static inline int64_t vr_tview_numel(const vr_tview *t) {
  return vr_numel(t->ndim, t->shape);
}
/* Reads element i of an integer (or float) tensor as int64 / double. */
int64_t vr_tview_geti(const vr_tview *t, int64_t i);
double vr_tview_getf(const vr_tview *t, int64_t i);

#endif
