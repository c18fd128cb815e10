/*
 * The op registry: for every ONNX op the engine supports, a shape/type
 * inference function, an optional reference kernel on plain row-major
 * tensors (used for constant folding and for ops that do not run on
 * oneDNN), and a FLOP count.
 *
 * infer: in[i] carries dtype and shape of input i (dt == VR_DT_UNDEFINED
 *   for an omitted optional input) and data when the input is a known
 *   constant; fills dt/ndim/shape of every output. Validates attributes and
 *   shapes; returns VR_EUNSUPPORTED for attribute values the engine does not
 *   implement, naming node, op and attribute.
 * eval: computes outputs into caller-allocated out[i].data (shapes as
 *   inferred). NULL when only the oneDNN lowering exists.
 */
#ifndef VR_ENGINE_OPS_H
#define VR_ENGINE_OPS_H

#include "engine/ir.h"
#include "vario/status.h"

typedef int (*vr_infer_fn)(const vr_node *n, const vr_tview *in, vr_tview *out,
                           vr_errbuf *err);
typedef int (*vr_eval_fn)(const vr_node *n, const vr_tview *in, vr_tview *out,
                          vr_errbuf *err);
typedef int64_t (*vr_flops_fn)(const vr_node *n, const vr_tview *in,
                               const vr_tview *out);

typedef struct vr_op {
  const char *name;
  vr_infer_fn infer;
  vr_eval_fn eval;
  vr_flops_fn flops;
  int min_in, max_in;
  int nondeterministic; /* never folded (none yet) */
} vr_op;

/* Op id for an ONNX op_type, or -1. */
int vr_op_lookup(const char *name);
const vr_op *vr_op_get(int id);
int vr_op_count(void);

/* VR_EFORMAT, naming node, op and attribute, when an attribute has
 * another type than ONNX gives it (an INT strides, a STRING axis). */
int vr__attr_check(const vr_node *n, vr_errbuf *err);

/* Shared helpers for op implementations. */
/* Fills err with "node 'NAME' (OP): <message>" and returns code. */
int vr_bad(vr_errbuf *err, const vr_node *n, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Normalises a possibly negative axis against rank; -1 if out of range. */
int vr_axis(int64_t axis, int rank);
/* Numpy broadcasting of two shapes into out; 0 or VR_ESHAPE. */
int vr_broadcast(const vr_tview *a, const vr_tview *b, vr_tview *out);
/* Row-major strides of a shape, with 0 for broadcast dims against `to`. */
void vr_bstrides(const vr_tview *t, const vr_tview *to, int64_t *st);
int vr_is_float(vr_dtype dt);
int vr_is_int(vr_dtype dt);
/* Stores v as element i of an integer or float tensor. */
void vr_tview_seti(vr_tview *t, int64_t i, int64_t v);
void vr_tview_setf(vr_tview *t, int64_t i, double v);

/* Convolution / pooling geometry with resolved auto_pad and ceil_mode.
 * kernel == NULL takes the kernel from the kernel_shape attribute (pools)
 * or from the weight shape passed by the caller (Conv). */
#define VR_MAX_SP 3
typedef struct vr_geom {
  int nsp; /* number of spatial dims (1..3) */
  int64_t k[VR_MAX_SP], s[VR_MAX_SP], d[VR_MAX_SP];
  int64_t pl[VR_MAX_SP], pr[VR_MAX_SP], out[VR_MAX_SP];
} vr_geom;
int vr_geom_compute(const vr_node *n, const vr_tview *x, const int64_t *kernel,
                    int ceil_mode, vr_geom *g, vr_errbuf *err);

int vr_deconv_geom(const vr_node *n, const vr_tview *x, const vr_tview *w, vr_geom *g,
                   vr_errbuf *err);

/* Softmax-family layout: outer x len x inner with the reduction over len
 * (opset < 13 flattens from axis; opset >= 13 uses the single axis). */
int vr_softmax_dims(const vr_node *n, const vr_tview *x, int64_t *outer,
                    int64_t *len, int64_t *inner);

/* FLOPs of an op that touches each element of its first input once
 * (ops_nn.c; the normalisations, Softmax, global pools, reductions, ArgMax). */
int64_t vr_flops_in(const vr_node *n, const vr_tview *in, const vr_tview *out);

/* Per-category tables (ops_*.c), merged by ops.c. */
extern const vr_op vr_ops_elem[];
extern const vr_op vr_ops_shape[];
extern const vr_op vr_ops_nn[];
extern const vr_op vr_ops_reduce[];

#endif
