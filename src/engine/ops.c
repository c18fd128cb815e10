/* Op registry and helpers shared by the op implementations. */
#include "engine/ops.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const vr_op *const tables[] = {vr_ops_elem, vr_ops_shape, vr_ops_nn, vr_ops_reduce};

static int count_ops(void) {
  int n = 0;
  for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
    for (const vr_op *o = tables[t]; o->name; o++) n++;
  return n;
}

const vr_op *vr_op_get(int id) {
  for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
    for (const vr_op *o = tables[t]; o->name; o++)
      if (id-- == 0) return o;
  return NULL;
}

int vr_op_count(void) { return count_ops(); }

int vr_op_lookup(const char *name) {
  int id = 0;
  for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
    for (const vr_op *o = tables[t]; o->name; o++, id++)
      if (!strcmp(o->name, name)) return id;
  return -1;
}

/* The type ONNX's schemas give each attribute of the ops in the tables
 * above, by name: one name has one type across these ops, except "value"
 * (Pad's pad value, ConstantOfShape's tensor). The accessors (ir.c) give
 * the default for an attribute of another type, which ran a malformed
 * model with a default stride, perm or alpha; ORT refuses it at load. */
static const struct attr_type {
  const char *op; /* NULL: any op */
  const char *name;
  int type;
} attr_types[] = {
    {"ConstantOfShape", "value", VR_ATTR_TENSOR}, {NULL, "value", VR_ATTR_FLOAT},
    {NULL, "alpha", VR_ATTR_FLOAT},  {NULL, "beta", VR_ATTR_FLOAT},
    {NULL, "gamma", VR_ATTR_FLOAT},  {NULL, "bias", VR_ATTR_FLOAT},
    {NULL, "epsilon", VR_ATTR_FLOAT}, {NULL, "momentum", VR_ATTR_FLOAT},
    {NULL, "min", VR_ATTR_FLOAT},    {NULL, "max", VR_ATTR_FLOAT},
    {NULL, "ratio", VR_ATTR_FLOAT},
    {NULL, "axis", VR_ATTR_INT},     {NULL, "keepdims", VR_ATTR_INT},
    {NULL, "group", VR_ATTR_INT},    {NULL, "transA", VR_ATTR_INT},
    {NULL, "transB", VR_ATTR_INT},   {NULL, "ceil_mode", VR_ATTR_INT},
    {NULL, "count_include_pad", VR_ATTR_INT}, {NULL, "storage_order", VR_ATTR_INT},
    {NULL, "size", VR_ATTR_INT},     {NULL, "to", VR_ATTR_INT},
    {NULL, "saturate", VR_ATTR_INT}, {NULL, "fmod", VR_ATTR_INT},
    {NULL, "training_mode", VR_ATTR_INT}, {NULL, "spatial", VR_ATTR_INT},
    {NULL, "is_test", VR_ATTR_INT},  {NULL, "stash_type", VR_ATTR_INT},
    {NULL, "noop_with_empty_axes", VR_ATTR_INT}, {NULL, "select_last_index", VR_ATTR_INT},
    {NULL, "start", VR_ATTR_INT},    {NULL, "end", VR_ATTR_INT},
    {NULL, "allowzero", VR_ATTR_INT}, {NULL, "num_outputs", VR_ATTR_INT},
    {NULL, "seed", VR_ATTR_INT},     {NULL, "broadcast", VR_ATTR_INT},
    {NULL, "auto_pad", VR_ATTR_STRING}, {NULL, "mode", VR_ATTR_STRING},
    {NULL, "approximate", VR_ATTR_STRING},
    {NULL, "axes", VR_ATTR_INTS},    {NULL, "pads", VR_ATTR_INTS},
    {NULL, "perm", VR_ATTR_INTS},    {NULL, "kernel_shape", VR_ATTR_INTS},
    {NULL, "strides", VR_ATTR_INTS}, {NULL, "dilations", VR_ATTR_INTS},
    {NULL, "output_shape", VR_ATTR_INTS}, {NULL, "output_padding", VR_ATTR_INTS},
    {NULL, "split", VR_ATTR_INTS},   {NULL, "starts", VR_ATTR_INTS},
    {NULL, "ends", VR_ATTR_INTS},    {NULL, "shape", VR_ATTR_INTS},
    {NULL, "consumed_inputs", VR_ATTR_INTS},
};

static const char *attr_type_name(int t) {
  static const char *const names[] = {"UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR",
                                      "GRAPH", "FLOATS", "INTS", "STRINGS"};
  return t >= 0 && t < (int)(sizeof names / sizeof *names) ? names[t] : "another type";
}

static int attr_want(const char *op, const char *name) {
  for (size_t i = 0; i < sizeof attr_types / sizeof *attr_types; i++)
    if (!strcmp(attr_types[i].name, name) && (!attr_types[i].op || !strcmp(attr_types[i].op, op)))
      return attr_types[i].type;
  return 0;
}

int vr__attr_check(const vr_node *n, vr_errbuf *err) {
  for (int i = 0; i < n->nattr; i++) {
    const vr_attr *a = &n->attrs[i];
    int want = attr_want(n->op, a->name);
    if (want && a->type != want)
      return vr_bad(err, n, VR_EFORMAT, "attribute '%s' is %s, ONNX types it %s", a->name,
                    attr_type_name(a->type), attr_type_name(want));
  }
  return 0;
}

int vr_bad(vr_errbuf *err, const vr_node *n, int code, const char *fmt, ...) {
  if (!err) return code;
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return vr_errf(err, code, "node '%s' (%s): %s", n->name, n->op, msg);
}

int vr_axis(int64_t axis, int rank) {
  if (axis < 0) axis += rank;
  return axis < 0 || axis >= rank ? -1 : (int)axis;
}

int vr_broadcast(const vr_tview *a, const vr_tview *b, vr_tview *out) {
  int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  out->ndim = nd;
  for (int i = 0; i < nd; i++) {
    int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
    int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
    if (da != db && da != 1 && db != 1) return VR_ESHAPE;
    out->shape[i] = da == 1 ? db : da;
  }
  return 0;
}

void vr_bstrides(const vr_tview *t, const vr_tview *to, int64_t *st) {
  int off = to->ndim - t->ndim;
  int64_t s = 1;
  for (int i = to->ndim - 1; i >= 0; i--) {
    int it = i - off;
    if (it < 0 || t->shape[it] == 1) {
      st[i] = 0;
    } else {
      st[i] = s;
    }
    if (it >= 0) s *= t->shape[it];
  }
}

int vr_is_float(vr_dtype dt) { return dt == VR_DT_F32 || dt == VR_DT_F64; }

int vr_is_int(vr_dtype dt) {
  switch (dt) {
    case VR_DT_I64: case VR_DT_I32: case VR_DT_I16: case VR_DT_I8:
    case VR_DT_U64: case VR_DT_U32: case VR_DT_U16: case VR_DT_U8:
      return 1;
    default:
      return 0;
  }
}

void vr_tview_seti(vr_tview *t, int64_t i, int64_t v) {
  switch (t->dt) {
    case VR_DT_I64: ((int64_t *)t->data)[i] = v; break;
    case VR_DT_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case VR_DT_U64: ((uint64_t *)t->data)[i] = (uint64_t)v; break;
    case VR_DT_U32: ((uint32_t *)t->data)[i] = (uint32_t)v; break;
    case VR_DT_I16: ((int16_t *)t->data)[i] = (int16_t)v; break;
    case VR_DT_U16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
    case VR_DT_I8: ((int8_t *)t->data)[i] = (int8_t)v; break;
    case VR_DT_U8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    case VR_DT_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    case VR_DT_F32: ((float *)t->data)[i] = (float)v; break;
    case VR_DT_F64: ((double *)t->data)[i] = (double)v; break;
    default: break;
  }
}

/* double -> int64 without undefined behaviour: a float result stored in
 * an integer tensor may be NaN or infinite (ReduceMax over nothing is
 * -inf, as in ONNX's reference) or beyond the range. Saturates; NaN is 0. */
static int64_t sat_i64(double v) {
  if (v != v) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

void vr_tview_setf(vr_tview *t, int64_t i, double v) {
  switch (t->dt) {
    case VR_DT_F32: ((float *)t->data)[i] = (float)v; break;
    case VR_DT_F64: ((double *)t->data)[i] = v; break;
    case VR_DT_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    /* 2^63 .. 2^64 fit a uint64 (sat_i64 stopped them at 2^63 - 1) */
    case VR_DT_U64:
      if (v >= 9223372036854775808.0) {
        ((uint64_t *)t->data)[i] = v >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)v;
        break;
      }
      /* fall through */
    default: vr_tview_seti(t, i, sat_i64(v)); break;
  }
}
