/* Op registry and helpers shared by the op implementations. */
#include "engine/ops.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const vr_op *const tables[] = {vr_ops_elem, vr_ops_shape, vr_ops_nn};

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
    default: vr_tview_seti(t, i, sat_i64(v)); break;
  }
}
