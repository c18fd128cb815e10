/* Element-wise ops: unary math and activations, broadcasting binary
 * arithmetic and comparisons, Where, Cast, Clip. The reference kernels
 * here serve constant folding and the (rare) runtime cases that oneDNN's
 * eltwise / binary primitives do not cover. */
#include <math.h>
#include <string.h>

#include "engine/ops.h"

/* ---- unary ---------------------------------------------------------- */

static int infer_same(const vr_node *n, const vr_tview *in, vr_tview *out,
                      vr_errbuf *err) {
  if (in[0].dt == VR_DT_UNDEFINED) return vr_bad(err, n, VR_EINVAL, "missing input");
  out[0] = in[0];
  out[0].data = NULL;
  return 0;
}

static int infer_float_same(const vr_node *n, const vr_tview *in, vr_tview *out,
                            vr_errbuf *err) {
  if (!vr_is_float(in[0].dt))
    return vr_bad(err, n, VR_EUNSUPPORTED, "input type %s not supported "
                  "(float only)", vr_dtype_name(in[0].dt));
  return infer_same(n, in, out, err);
}

/* A NaN stays NaN, as in ONNX and ORT: fmax / fmin give the number of a
 * NaN and a number (HardSigmoid(NaN) was 1). */
static double hsig(double v) { return v <= 0 ? 0 : v >= 1 ? 1 : v; }

static double unary_f(const vr_node *n, double x) {
  const char *op = n->op;
  switch (op[0]) {
    case 'A': if (!strcmp(op, "Abs")) return fabs(x); break;
    case 'C':
      if (!strcmp(op, "Ceil")) return ceil(x);
      if (!strcmp(op, "Cos")) return cos(x);
      break;
    case 'E':
      if (!strcmp(op, "Exp")) return exp(x);
      if (!strcmp(op, "Erf")) return erf(x);
      if (!strcmp(op, "Elu")) {
        double a = vr_attr_f(n, "alpha", 1.0f);
        return x >= 0 ? x : a * (exp(x) - 1);
      }
      break;
    case 'F': return floor(x);
    case 'G': return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); /* Gelu */
    case 'H':
      if (!strcmp(op, "HardSigmoid")) {
        double a = vr_attr_f(n, "alpha", 0.2f), b = vr_attr_f(n, "beta", 0.5f);
        return hsig(a * x + b);
      }
      return x * fmax(0, fmin(1, x / 6 + 0.5)); /* HardSwish */
    case 'I': return x; /* Identity */
    case 'L':
      if (!strcmp(op, "Log")) return log(x);
      {
        double a = vr_attr_f(n, "alpha", 0.01f); /* LeakyRelu */
        return x >= 0 ? x : a * x;
      }
    case 'N': return -x;
    case 'R':
      if (!strcmp(op, "Relu")) return x <= 0 ? 0 : x; /* NaN stays NaN */
      if (!strcmp(op, "Reciprocal")) return 1.0 / x;
      return nearbyint(x); /* Round: half to even */
    case 'S':
      if (!strcmp(op, "Sigmoid")) return 1.0 / (1.0 + exp(-x));
      if (!strcmp(op, "Sqrt")) return sqrt(x);
      if (!strcmp(op, "Sin")) return sin(x);
      if (!strcmp(op, "Sign")) return (x > 0) - (x < 0);
      if (!strcmp(op, "Softplus")) return log1p(exp(-fabs(x))) + fmax(x, 0);
      if (!strcmp(op, "Softsign")) return x / (1 + fabs(x));
      if (!strcmp(op, "Swish")) return x / (1.0 + exp(-x)); /* internal: x*sigmoid(x) */
      if (!strcmp(op, "Selu")) {
        double a = vr_attr_f(n, "alpha", 1.67326319217681884765625f);
        double g = vr_attr_f(n, "gamma", 1.05070102214813232421875f);
        return x > 0 ? g * x : g * (a * exp(x) - a);
      }
      break;
    case 'T': return tanh(x);
  }
  return x;
}

static int eval_unary(const vr_node *n, const vr_tview *in, vr_tview *out,
                      vr_errbuf *err) {
  int64_t cnt = vr_tview_numel(&in[0]);
  if (in[0].dt == VR_DT_F32) {
    const float *x = in[0].data;
    float *y = out[0].data;
    /* Hot activations get tight loops (the generic path re-dispatches on
     * the op name per element). */
    const char *op = n->op;
    /* written so that a NaN stays NaN (a comparison with it is false) */
    if (!strcmp(op, "Relu")) {
      for (int64_t i = 0; i < cnt; i++) y[i] = x[i] <= 0 ? 0 : x[i];
    } else if (!strcmp(op, "HardSigmoid")) {
      float a = vr_attr_f(n, "alpha", 0.2f), b = vr_attr_f(n, "beta", 0.5f);
      for (int64_t i = 0; i < cnt; i++) {
        float v = a * x[i] + b;
        y[i] = v <= 0 ? 0.f : v >= 1 ? 1.f : v;
      }
    } else if (!strcmp(op, "HardSwish")) {
      for (int64_t i = 0; i < cnt; i++) y[i] = x[i] * fmaxf(0.f, fminf(1.f, x[i] / 6 + 0.5f));
    } else if (!strcmp(op, "Sigmoid")) {
      for (int64_t i = 0; i < cnt; i++) y[i] = 1.f / (1.f + expf(-x[i]));
    } else if (!strcmp(op, "Swish")) {
      for (int64_t i = 0; i < cnt; i++) y[i] = x[i] / (1.f + expf(-x[i]));
    } else if (!strcmp(op, "Erf")) {
      for (int64_t i = 0; i < cnt; i++) y[i] = erff(x[i]);
    } else if (!strcmp(op, "Tanh")) {
      for (int64_t i = 0; i < cnt; i++) y[i] = tanhf(x[i]);
    } else {
      for (int64_t i = 0; i < cnt; i++) y[i] = (float)unary_f(n, x[i]);
    }
    return 0;
  }
  if (vr_is_float(in[0].dt)) {
    for (int64_t i = 0; i < cnt; i++)
      vr_tview_setf(&out[0], i, unary_f(n, vr_tview_getf(&in[0], i)));
    return 0;
  }
  /* Integer Abs / Neg / Identity / Relu / Sign. */
  for (int64_t i = 0; i < cnt; i++) {
    int64_t v = vr_tview_geti(&in[0], i);
    /* Negated through uint64: -INT64_MIN wraps to itself (signed: UB). */
    if (!strcmp(n->op, "Abs")) v = v < 0 ? (int64_t)(0 - (uint64_t)v) : v;
    else if (!strcmp(n->op, "Neg")) v = (int64_t)(0 - (uint64_t)v);
    else if (!strcmp(n->op, "Relu")) v = v > 0 ? v : 0;
    else if (!strcmp(n->op, "Sign")) v = (v > 0) - (v < 0);
    vr_tview_seti(&out[0], i, v);
  }
  return 0;
}

static int infer_num_same(const vr_node *n, const vr_tview *in, vr_tview *out,
                          vr_errbuf *err) {
  if (!vr_is_float(in[0].dt) && !vr_is_int(in[0].dt) && strcmp(n->op, "Identity"))
    return vr_bad(err, n, VR_EUNSUPPORTED, "input type %s not supported",
                  vr_dtype_name(in[0].dt));
  return infer_same(n, in, out, err);
}

static int eval_copy(const vr_node *n, const vr_tview *in, vr_tview *out,
                     vr_errbuf *err) {
  memcpy(out[0].data, in[0].data,
         (size_t)vr_tview_numel(&in[0]) * vr_dtype_size(in[0].dt));
  return 0;
}

static int infer_not(const vr_node *n, const vr_tview *in, vr_tview *out,
                     vr_errbuf *err) {
  if (in[0].dt != VR_DT_BOOL) return vr_bad(err, n, VR_ETYPE, "input must be bool");
  return infer_same(n, in, out, err);
}

static int eval_not(const vr_node *n, const vr_tview *in, vr_tview *out,
                    vr_errbuf *err) {
  int64_t c = vr_tview_numel(&in[0]);
  for (int64_t i = 0; i < c; i++)
    ((uint8_t *)out[0].data)[i] = !((const uint8_t *)in[0].data)[i];
  return 0;
}

/* ---- Clip: min / max as attributes (opset < 11) or inputs ---------------- */

static void clip_bounds(const vr_node *n, const vr_tview *in, double *lo,
                        double *hi) {
  *lo = vr_attr_f(n, "min", -INFINITY);
  *hi = vr_attr_f(n, "max", INFINITY);
  if (n->nin > 1 && in[1].dt && in[1].data) *lo = vr_tview_getf(&in[1], 0);
  if (n->nin > 2 && in[2].dt && in[2].data) *hi = vr_tview_getf(&in[2], 0);
  if (*lo > *hi) *lo = *hi; /* ONNX: min > max sets every value to max */
}

static int infer_clip(const vr_node *n, const vr_tview *in, vr_tview *out,
                      vr_errbuf *err) {
  for (int i = 1; i < n->nin && i < 3; i++) {
    if (in[i].dt && !in[i].data)
      return vr_bad(err, n, VR_EUNSUPPORTED, "input %d (min/max) must be a constant", i);
    /* a scalar: element 0 is read (an empty one read past its data) */
    if (in[i].dt && vr_tview_numel(&in[i]) != 1)
      return vr_bad(err, n, VR_ESHAPE, "input %d (min/max) must be a scalar, has %lld "
                    "elements", i, (long long)vr_tview_numel(&in[i]));
  }
  return infer_num_same(n, in, out, err);
}

static int eval_clip(const vr_node *n, const vr_tview *in, vr_tview *out,
                     vr_errbuf *err) {
  double lo, hi;
  clip_bounds(n, in, &lo, &hi);
  int64_t c = vr_tview_numel(&in[0]);
  int ib = 1; /* integer bounds too (ONNX types them as the input) */
  for (int i = 1; i < n->nin && i < 3; i++) ib &= !in[i].dt || vr_is_int(in[i].dt);
  if (vr_is_int(in[0].dt) && ib) { /* in int64: through double, values past 2^53 round */
    /* uint64 is read as int64: flipping the top bit maps its order onto
     * int64's (past 2^63 it compared as negative) */
    uint64_t flip = in[0].dt == VR_DT_U64 ? (uint64_t)1 << 63 : 0;
    int64_t ilo = n->nin > 1 && in[1].dt && in[1].data
                      ? (int64_t)((uint64_t)vr_tview_geti(&in[1], 0) ^ flip) : INT64_MIN;
    int64_t ihi = n->nin > 2 && in[2].dt && in[2].data
                      ? (int64_t)((uint64_t)vr_tview_geti(&in[2], 0) ^ flip) : INT64_MAX;
    if (ilo > ihi) ilo = ihi;
    for (int64_t i = 0; i < c; i++) {
      int64_t v = (int64_t)((uint64_t)vr_tview_geti(&in[0], i) ^ flip);
      v = v < ilo ? ilo : v > ihi ? ihi : v;
      vr_tview_seti(&out[0], i, (int64_t)((uint64_t)v ^ flip));
    }
    return 0;
  }
  for (int64_t i = 0; i < c; i++) {
    double v = vr_tview_getf(&in[0], i);
    vr_tview_setf(&out[0], i, v < lo ? lo : v > hi ? hi : v);
  }
  return 0;
}

/* ---- Cast -------------------------------------------------------------- */

static int infer_cast(const vr_node *n, const vr_tview *in, vr_tview *out,
                      vr_errbuf *err) {
  int64_t to = vr_attr_i(n, "to", 0);
  vr_dtype dt = (vr_dtype)to;
  if (!vr_is_float(dt) && !vr_is_int(dt) && dt != VR_DT_BOOL)
    return vr_bad(err, n, VR_EUNSUPPORTED, "cast to type %lld not supported",
                  (long long)to);
  if (!vr_is_float(in[0].dt) && !vr_is_int(in[0].dt) && in[0].dt != VR_DT_BOOL)
    return vr_bad(err, n, VR_EUNSUPPORTED, "cast from %s not supported",
                  vr_dtype_name(in[0].dt));
  out[0] = in[0];
  out[0].data = NULL;
  out[0].dt = dt;
  return 0;
}

static int eval_cast(const vr_node *n, const vr_tview *in, vr_tview *out,
                     vr_errbuf *err) {
  int64_t c = vr_tview_numel(&in[0]);
  if (vr_is_float(in[0].dt))
    for (int64_t i = 0; i < c; i++) vr_tview_setf(&out[0], i, vr_tview_getf(&in[0], i));
  else if (in[0].dt == VR_DT_U64 && out[0].dt == VR_DT_F32) /* as int64 past 2^63: negative */
    for (int64_t i = 0; i < c; i++) ((float *)out[0].data)[i] = (float)((const uint64_t *)in[0].data)[i];
  else if (in[0].dt == VR_DT_U64 && out[0].dt == VR_DT_F64)
    for (int64_t i = 0; i < c; i++) ((double *)out[0].data)[i] = (double)((const uint64_t *)in[0].data)[i];
  else
    for (int64_t i = 0; i < c; i++) vr_tview_seti(&out[0], i, vr_tview_geti(&in[0], i));
  return 0;
}

/* ---- binary with broadcasting ------------------------------------------ */

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MIN, B_MAX, B_MOD, B_EQ, B_LT,
       B_GT, B_LE, B_GE, B_AND, B_OR, B_XOR };

static int binop(const vr_node *n) {
  static const char *names[] = {"Add", "Sub", "Mul", "Div", "Pow", "Min",
                                "Max", "Mod", "Equal", "Less", "Greater",
                                "LessOrEqual", "GreaterOrEqual", "And", "Or",
                                "Xor"};
  for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
    if (!strcmp(n->op, names[i])) return i;
  return -1;
}

static int infer_binary(const vr_node *n, const vr_tview *in, vr_tview *out,
                        vr_errbuf *err) {
  int k = binop(n);
  if (n->nin != 2 || !in[0].dt || !in[1].dt)
    return vr_bad(err, n, VR_EINVAL, "needs two inputs");
  if (k >= B_AND) {
    if (in[0].dt != VR_DT_BOOL || in[1].dt != VR_DT_BOOL)
      return vr_bad(err, n, VR_ETYPE, "inputs must be bool");
  } else if (in[0].dt != in[1].dt && k != B_POW) {
    return vr_bad(err, n, VR_ETYPE, "input types differ (%s vs %s)",
                  vr_dtype_name(in[0].dt), vr_dtype_name(in[1].dt));
  } else if (!vr_is_float(in[0].dt) && !vr_is_int(in[0].dt)) {
    return vr_bad(err, n, VR_EUNSUPPORTED, "type %s not supported",
                  vr_dtype_name(in[0].dt));
  }
  if (vr_broadcast(&in[0], &in[1], &out[0]))
    return vr_bad(err, n, VR_ESHAPE, "shapes cannot be broadcast");
  out[0].data = NULL;
  out[0].dt = k >= B_EQ ? VR_DT_BOOL : in[0].dt;
  return 0;
}

static double fbin(int k, double a, double b, int fmod_) {
  switch (k) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    case B_POW: return pow(a, b);
    case B_MIN: return a < b ? a : b;
    case B_MAX: return a > b ? a : b;
    case B_MOD: {
      double r = fmod(a, b);
      if (!fmod_ && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
    case B_EQ: return a == b;
    case B_LT: return a < b;
    case B_GT: return a > b;
    case B_LE: return a <= b;
    case B_GE: return a >= b;
    case B_AND: return (a != 0) && (b != 0);
    case B_OR: return (a != 0) || (b != 0);
    default: return (a != 0) != (b != 0);
  }
}

/* Integer arithmetic wraps (two's complement), computed in uint64:
 * signed overflow is undefined, and a request's values or a folded
 * Shape -> Mul chain can overflow int64. */
static int64_t ibin(int k, int64_t a, int64_t b) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (k) {
    case B_ADD: return (int64_t)(ua + ub);
    case B_SUB: return (int64_t)(ua - ub);
    case B_MUL: return (int64_t)(ua * ub);
    /* INT64_MIN / -1 traps (SIGFPE) on x86: a request's values must not
     * kill the server. It wraps to INT64_MIN (two's complement). */
    case B_DIV: return !b ? 0 : b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;
    case B_POW: { /* by squaring: exact modulo 2^64 for any exponent */
      /* a negative exponent: 1 / a^-b truncated, 0 unless |a| is 1 (the
       * loop gave 1); 0^-b divides by zero, 0 as for Div */
      if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
      uint64_t r = 1;
      for (int64_t e = b; e > 0; e >>= 1, ua *= ua)
        if (e & 1) r *= ua;
      return (int64_t)r;
    }
    case B_MIN: return a < b ? a : b;
    case B_MAX: return a > b ? a : b;
    case B_MOD: {
      if (!b || b == -1) return 0; /* INT64_MIN % -1 traps like the division */
      int64_t r = a % b;
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
    /* compared as integers: through double, int64 values past 2^53 round
     * (2^53 + 1 == 2^53) */
    case B_EQ: return a == b;
    case B_LT: return a < b;
    case B_GT: return a > b;
    case B_LE: return a <= b;
    case B_GE: return a >= b;
    default: return (int64_t)fbin(k, (double)a, (double)b, 0);
  }
}

/* uint64 is read as int64 (vr_tview_geti), so a value past 2^63 is
 * negative: sums, differences and products wrap to the same bits, but
 * order, quotient, remainder and a Pow exponent must be unsigned. */
static int64_t ubin(int k, uint64_t a, uint64_t b) {
  switch (k) {
    case B_DIV: return b ? (int64_t)(a / b) : 0;
    case B_MOD: return b ? (int64_t)(a % b) : 0;
    case B_MIN: return (int64_t)(a < b ? a : b);
    case B_MAX: return (int64_t)(a > b ? a : b);
    case B_LT: return a < b;
    case B_GT: return a > b;
    case B_LE: return a <= b;
    case B_GE: return a >= b;
    case B_POW: {
      uint64_t r = 1;
      for (; b; b >>= 1, a *= a)
        if (b & 1) r *= a;
      return (int64_t)r;
    }
    default: return ibin(k, (int64_t)a, (int64_t)b);
  }
}

/* Mod with fmod=1 on integers: C's remainder, with the dividend's sign
 * (ibin's has the divisor's); 0 for b = 0 and -1 as there. */
static int64_t imod_c(int64_t a, int64_t b) { return !b || b == -1 ? 0 : a % b; }

/* Walks the output index space keeping the two broadcast input offsets. */
static int eval_binary(const vr_node *n, const vr_tview *in, vr_tview *out,
                       vr_errbuf *err) {
  int k = binop(n);
  const vr_tview *o = &out[0];
  int64_t sa[VR_MAX_DIMS], sb[VR_MAX_DIMS], idx[VR_MAX_DIMS] = {0};
  vr_bstrides(&in[0], o, sa);
  vr_bstrides(&in[1], o, sb);
  int64_t cnt = vr_tview_numel(o), ia = 0, ib = 0;
  int fl = vr_is_float(in[0].dt) || vr_is_float(in[1].dt), fm = (int)vr_attr_i(n, "fmod", 0);
  int fast = in[0].dt == VR_DT_F32 && in[1].dt == VR_DT_F32 && k <= B_DIV;
  /* Pow's exponent may be of another type than its base */
  int uns = in[k == B_POW].dt == VR_DT_U64;
  for (int64_t i = 0; i < cnt; i++) {
    if (fast) {
      float a = ((const float *)in[0].data)[ia], b = ((const float *)in[1].data)[ib];
      ((float *)o->data)[i] = k == B_ADD ? a + b : k == B_SUB ? a - b
                              : k == B_MUL ? a * b : a / b;
    } else if (fl) {
      vr_tview_setf(&out[0], i, fbin(k, vr_tview_getf(&in[0], ia),
                                     vr_tview_getf(&in[1], ib), fm));
    } else {
      int64_t a = vr_tview_geti(&in[0], ia), b = vr_tview_geti(&in[1], ib);
      vr_tview_seti(&out[0], i, uns ? ubin(k, (uint64_t)a, (uint64_t)b)
                                : k == B_MOD && fm ? imod_c(a, b) : ibin(k, a, b));
    }
    for (int d = o->ndim - 1; d >= 0; d--) {
      ia += sa[d];
      ib += sb[d];
      if (++idx[d] < o->shape[d]) break;
      ia -= sa[d] * o->shape[d];
      ib -= sb[d] * o->shape[d];
      idx[d] = 0;
    }
  }
  return 0;
}

static int64_t flops_numel(const vr_node *n, const vr_tview *in,
                           const vr_tview *out) {
  return vr_tview_numel(&out[0]);
}

/* ---- Where (three-way broadcast) ---------------------------------------- */

static int infer_where(const vr_node *n, const vr_tview *in, vr_tview *out,
                       vr_errbuf *err) {
  if (n->nin != 3 || in[0].dt != VR_DT_BOOL)
    return vr_bad(err, n, VR_EINVAL, "needs (bool cond, x, y)");
  if (in[1].dt != in[2].dt) return vr_bad(err, n, VR_ETYPE, "x and y types differ");
  vr_tview t;
  if (vr_broadcast(&in[0], &in[1], &t) || vr_broadcast(&t, &in[2], &out[0]))
    return vr_bad(err, n, VR_ESHAPE, "shapes cannot be broadcast");
  out[0].dt = in[1].dt;
  out[0].data = NULL;
  return 0;
}

static int eval_where(const vr_node *n, const vr_tview *in, vr_tview *out,
                      vr_errbuf *err) {
  const vr_tview *o = &out[0];
  int64_t s[3][VR_MAX_DIMS], idx[VR_MAX_DIMS] = {0}, off[3] = {0};
  for (int j = 0; j < 3; j++) vr_bstrides(&in[j], o, s[j]);
  size_t es = vr_dtype_size(o->dt);
  int64_t cnt = vr_tview_numel(o);
  for (int64_t i = 0; i < cnt; i++) {
    int c = ((const uint8_t *)in[0].data)[off[0]] != 0;
    const char *src = c ? (const char *)in[1].data + off[1] * es
                        : (const char *)in[2].data + off[2] * es;
    memcpy((char *)o->data + i * es, src, es);
    for (int d = o->ndim - 1; d >= 0; d--) {
      for (int j = 0; j < 3; j++) off[j] += s[j][d];
      if (++idx[d] < o->shape[d]) break;
      for (int j = 0; j < 3; j++) off[j] -= s[j][d] * o->shape[d];
      idx[d] = 0;
    }
  }
  return 0;
}

/* ---- variadic Max / Min / Sum / Mean: pairwise broadcast fold ---------- */

static int infer_variadic(const vr_node *n, const vr_tview *in, vr_tview *out,
                          vr_errbuf *err) {
  if (n->nin < 1 || !in[0].dt) return vr_bad(err, n, VR_EINVAL, "needs inputs");
  if (!vr_is_float(in[0].dt) && !vr_is_int(in[0].dt))
    return vr_bad(err, n, VR_EUNSUPPORTED, "type %s", vr_dtype_name(in[0].dt));
  vr_tview acc = in[0];
  for (int i = 1; i < n->nin; i++) {
    vr_tview t;
    if (in[i].dt != in[0].dt) return vr_bad(err, n, VR_ETYPE, "input types differ");
    if (vr_broadcast(&acc, &in[i], &t)) return vr_bad(err, n, VR_ESHAPE, "shapes cannot be broadcast");
    acc.ndim = t.ndim;
    memcpy(acc.shape, t.shape, sizeof t.shape);
  }
  out[0] = acc;
  out[0].data = NULL;
  return 0;
}

static int eval_variadic(const vr_node *n, const vr_tview *in, vr_tview *out,
                         vr_errbuf *err) {
  const vr_tview *o = &out[0];
  int64_t cnt = vr_tview_numel(o);
  int k = !strcmp(n->op, "Max") ? 0 : !strcmp(n->op, "Min") ? 1 : !strcmp(n->op, "Sum") ? 2 : 3;
  /* Max / Min / Sum of integers in int64: through double, values past
   * 2^53 round. */
  int integer = vr_is_int(o->dt) && k < 3;
  for (int64_t i = 0; i < cnt; i++) {
    double acc = 0;
    int64_t iacc = 0;
    for (int j = 0; j < n->nin; j++) {
      int64_t st[VR_MAX_DIMS], off = 0, rem = i;
      vr_bstrides(&in[j], o, st);
      for (int d = o->ndim - 1; d >= 0; d--) {
        off += (rem % o->shape[d]) * st[d];
        rem /= o->shape[d];
      }
      if (integer) {
        int64_t v = vr_tview_geti(&in[j], off);
        int op = k == 0 ? B_MAX : k == 1 ? B_MIN : B_ADD;
        iacc = j == 0 ? v : o->dt == VR_DT_U64 ? ubin(op, (uint64_t)iacc, (uint64_t)v)
                                               : ibin(op, iacc, v);
        continue;
      }
      double v = vr_tview_getf(&in[j], off);
      /* a NaN wins, as in numpy's maximum / minimum (ONNX, ORT); the
       * plain comparison kept the other operand */
      if (j == 0) acc = v;
      else if (k == 0) acc = v > acc || v != v ? v : acc;
      else if (k == 1) acc = v < acc || v != v ? v : acc;
      else acc += v;
    }
    if (k == 3) acc /= n->nin;
    if (integer) vr_tview_seti(&out[0], i, iacc);
    else vr_tview_setf(&out[0], i, acc);
  }
  return 0;
}

/* ---- PRelu: y = x < 0 ? slope * x : x, slope broadcast ------------------- */

static int infer_prelu(const vr_node *n, const vr_tview *in, vr_tview *out,
                       vr_errbuf *err) {
  vr_tview t;
  if (!vr_is_float(in[0].dt) || in[1].dt != in[0].dt)
    return vr_bad(err, n, VR_EUNSUPPORTED, "float inputs only");
  if (vr_broadcast(&in[0], &in[1], &t) || t.ndim != in[0].ndim ||
      vr_numel(t.ndim, t.shape) != vr_tview_numel(&in[0]))
    return vr_bad(err, n, VR_ESHAPE, "slope must broadcast to the input");
  return infer_same(n, in, out, err);
}

static int eval_prelu(const vr_node *n, const vr_tview *in, vr_tview *out,
                      vr_errbuf *err) {
  int64_t st[VR_MAX_DIMS], idx[VR_MAX_DIMS] = {0}, off = 0, cnt = vr_tview_numel(&out[0]);
  vr_bstrides(&in[1], &out[0], st);
  for (int64_t i = 0; i < cnt; i++) {
    double x = vr_tview_getf(&in[0], i);
    vr_tview_setf(&out[0], i, x < 0 ? x * vr_tview_getf(&in[1], off) : x);
    for (int d = out[0].ndim - 1; d >= 0; d--) {
      off += st[d];
      if (++idx[d] < out[0].shape[d]) break;
      off -= st[d] * out[0].shape[d];
      idx[d] = 0;
    }
  }
  return 0;
}

#define UN(name, inf) {name, inf, eval_unary, flops_numel, 1, 1, 0}
#define BIN(name) {name, infer_binary, eval_binary, flops_numel, 2, 2, 0}

const vr_op vr_ops_elem[] = {
    UN("Relu", infer_num_same), UN("LeakyRelu", infer_float_same),
    UN("Sigmoid", infer_float_same), UN("Tanh", infer_float_same),
    UN("HardSigmoid", infer_float_same), UN("HardSwish", infer_float_same),
    UN("Erf", infer_float_same), UN("Exp", infer_float_same),
    UN("Log", infer_float_same), UN("Sqrt", infer_float_same),
    UN("Neg", infer_num_same), UN("Abs", infer_num_same),
    UN("Reciprocal", infer_float_same), UN("Floor", infer_float_same),
    UN("Ceil", infer_float_same), UN("Round", infer_float_same),
    UN("Elu", infer_float_same), UN("Selu", infer_float_same),
    UN("Softplus", infer_float_same), UN("Softsign", infer_float_same),
    UN("Sin", infer_float_same), UN("Cos", infer_float_same),
    UN("Sign", infer_num_same), UN("Gelu", infer_float_same),
    UN("Swish", infer_float_same), /* internal, from Mul(x, Sigmoid(x)) */
    {"Identity", infer_same, eval_copy, NULL, 1, 1, 0},
    {"Not", infer_not, eval_not, flops_numel, 1, 1, 0},
    {"Clip", infer_clip, eval_clip, flops_numel, 1, 3, 0},
    {"Cast", infer_cast, eval_cast, NULL, 1, 1, 0},
    {"Where", infer_where, eval_where, flops_numel, 3, 3, 0},
    {"Max", infer_variadic, eval_variadic, flops_numel, 1, 64, 0},
    {"Min", infer_variadic, eval_variadic, flops_numel, 1, 64, 0},
    {"Sum", infer_variadic, eval_variadic, flops_numel, 1, 64, 0},
    {"Mean", infer_variadic, eval_variadic, flops_numel, 1, 64, 0},
    {"PRelu", infer_prelu, eval_prelu, flops_numel, 2, 2, 0},
    BIN("Add"), BIN("Sub"), BIN("Mul"), BIN("Div"), BIN("Pow"), BIN("Mod"),
    BIN("Equal"), BIN("Less"), BIN("Greater"), BIN("LessOrEqual"),
    BIN("GreaterOrEqual"), BIN("And"), BIN("Or"), BIN("Xor"),
    {NULL, NULL, NULL, NULL, 0, 0, 0},
};
