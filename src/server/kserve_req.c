/*
 * KServe v2 inference request parsing on the kjson pull parser. Keys may
 * come in any order, so an input's "data" is first skipped (its span is
 * remembered) and decoded once the object's datatype and shape are known.
 * Unknown keys are skipped; repeated known keys are errors.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "server/kjson.h"
#include "server/kserve.h"

/* ---- tensor data --------------------------------------------------------- */

static int put_int(vr_dtype dt, void *dst, int64_t k, int64_t x,
                   vr_errbuf *err) {
  int64_t lo = 0, hi = 0;
  switch (dt) {
  case VR_DT_I8: lo = INT8_MIN; hi = INT8_MAX; break;
  case VR_DT_U8: hi = UINT8_MAX; break;
  case VR_DT_I16: lo = INT16_MIN; hi = INT16_MAX; break;
  case VR_DT_U16: hi = UINT16_MAX; break;
  case VR_DT_I32: lo = INT32_MIN; hi = INT32_MAX; break;
  case VR_DT_U32: hi = UINT32_MAX; break;
  case VR_DT_I64: lo = INT64_MIN; hi = INT64_MAX; break;
  case VR_DT_U64: hi = INT64_MAX; break;
  default: return VR_EINTERNAL;
  }
  if (x < lo || x > hi)
    return vr_errf(err, VR_ERANGE, "element %lld = %lld out of range for %s",
                   (long long)k, (long long)x, vr_dtype_kserve(dt));
  switch (dt) {
  case VR_DT_I8: ((int8_t *)dst)[k] = (int8_t)x; break;
  case VR_DT_U8: ((uint8_t *)dst)[k] = (uint8_t)x; break;
  case VR_DT_I16: ((int16_t *)dst)[k] = (int16_t)x; break;
  case VR_DT_U16: ((uint16_t *)dst)[k] = (uint16_t)x; break;
  case VR_DT_I32: ((int32_t *)dst)[k] = (int32_t)x; break;
  case VR_DT_U32: ((uint32_t *)dst)[k] = (uint32_t)x; break;
  default: ((int64_t *)dst)[k] = x; break;
  }
  return 0;
}

/* One scalar at the cursor into element k. */
static int put_elem(vr_kj *j, vr_dtype dt, void *dst, int64_t k) {
  if (dt == VR_DT_BOOL) {
    int b;
    int rc = vr_kj_bool(j, &b);
    if (rc) return vr_errf(j->err, VR_ETYPE, "BOOL data must be true/false");
    ((uint8_t *)dst)[k] = (uint8_t)b;
    return 0;
  }
  int c = vr_kj_peek(j);
  if (c != '-' && (c < '0' || c > '9'))
    return vr_errf(j->err, VR_ETYPE, "element %lld is not a number",
                   (long long)k);
  double d;
  int64_t i;
  int is_int;
  int rc = vr_kj_number(j, &d, &i, &is_int);
  if (rc) return rc;
  if (dt == VR_DT_F32 || dt == VR_DT_F64) {
    if (!isfinite(d) || (dt == VR_DT_F32 && !isfinite((float)d)))
      return vr_errf(j->err, VR_ERANGE, "element %lld out of range for %s",
                     (long long)k, vr_dtype_kserve(dt));
    if (dt == VR_DT_F32) ((float *)dst)[k] = (float)d;
    else ((double *)dst)[k] = d;
    return 0;
  }
  if (!is_int)
    return vr_errf(j->err, VR_ETYPE, "element %lld is not an integer",
                   (long long)k);
  return put_int(dt, dst, k, i, j->err);
}

/* Flattens nested arrays depth-first; *k counts elements. */
static int flatten(vr_kj *j, vr_dtype dt, void *dst, int64_t n, int64_t *k,
                   int depth) {
  if (vr_kj_peek(j) != '[') {
    if (*k >= n)
      return vr_errf(j->err, VR_ESHAPE, "data has more than %lld elements",
                     (long long)n);
    int rc = put_elem(j, dt, dst, *k);
    (*k)++;
    return rc;
  }
  if (depth > VR_MAX_DIMS)
    return vr_errf(j->err, VR_ESHAPE, "data nested deeper than %d",
                   VR_MAX_DIMS);
  int rc = vr_kj_arr_begin(j), first = 1;
  while (!rc && (rc = vr_kj_arr_next(j, &first)) == 1)
    rc = flatten(j, dt, dst, n, k, depth + 1);
  return rc;
}

static int64_t numel(const vr_ks_input *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

static int decode_data(vr_ks_input *t, const char *s, const char *e,
                       vr_errbuf *err) {
  int64_t n = numel(t);
  if (t->dtype == VR_DT_F16 || t->dtype == VR_DT_BF16)
    return vr_errf(err, VR_EUNSUPPORTED, "input '%s': datatype %s needs"
                   " binary data", t->name, vr_dtype_kserve(t->dtype));
  /* each element takes a character and a separator at least: a shape
   * its data cannot fill is refused before its memory is taken (a 150-byte
   * body could ask for 2 GiB) */
  if (n > (int64_t)(e - s) / 2 + 1)
    return vr_errf(err, VR_ESHAPE, "input '%s': %lld bytes of data cannot hold the %lld "
                   "elements its shape needs", t->name, (long long)(e - s), (long long)n);
  t->data = vr_aligned_alloc(64, t->nbytes ? t->nbytes : 64);
  if (!t->data) return vr_errf(err, VR_ENOMEM, "out of memory");
  t->owned = 1;
  vr_kj j;
  vr_kj_init(&j, s, (size_t)(e - s), err);
  int64_t k = 0;
  int rc = flatten(&j, t->dtype, t->data, n, &k, 0);
  if (rc) return vr_errctx(err, rc, "input '%s'", t->name);
  if (k != n)
    return vr_errf(err, VR_ESHAPE, "input '%s': %lld data elements, shape"
                   " needs %lld", t->name, (long long)k, (long long)n);
  return 0;
}

/* ---- objects --------------------------------------------------------------- */

static int get_uint(vr_kj *j, int64_t lo, int64_t hi, int64_t *out,
                    const char *what) {
  double d;
  int64_t i;
  int is_int;
  int c = vr_kj_peek(j);
  int rc = (c == '-' || (c >= '0' && c <= '9'))
               ? vr_kj_number(j, &d, &i, &is_int)
               : VR_EINVAL;
  if (rc == VR_EFORMAT) return rc;
  if (rc || !is_int || i < lo || i > hi)
    return vr_errf(j->err, VR_EINVAL, "%s must be an integer in [%lld, %lld]",
                   what, (long long)lo, (long long)hi);
  *out = i;
  return 0;
}

static int parse_shape(vr_kj *j, vr_ks_input *t) {
  int rc = vr_kj_peek(j) == '[' ? vr_kj_arr_begin(j) : VR_EINVAL, first = 1;
  int64_t n = 1;
  t->ndim = 0;
  while (!rc && (rc = vr_kj_arr_next(j, &first)) == 1) {
    if (t->ndim == VR_MAX_DIMS) { rc = VR_EINVAL; break; }
    int64_t v = 0;
    rc = get_uint(j, 0, VR_KS_MAX_ELEMS, &v, "a shape dim");
    if (rc == VR_EFORMAT) return rc;
    if (rc) break;
    t->shape[t->ndim++] = v;
    n *= v;
    if (n > VR_KS_MAX_ELEMS)
      return vr_errf(j->err, VR_ELIMIT, "input '%s': more than 2^28"
                     " elements", t->name);
  }
  if (rc == VR_EFORMAT) return rc;
  if (rc || t->ndim < 1)
    return vr_errf(j->err, VR_ESHAPE, "input shape must be an array of 1..%d"
                   " integers in [0, 2^28]", VR_MAX_DIMS);
  return 0;
}

/* A parameter Vario does not honour is refused by name, never ignored:
 * the client that sent it expects a behaviour (shared memory, sequences,
 * something newer) it would silently not get. */
int vr_ks_refuse_param(const char *key, const char *where, vr_errbuf *err) {
  const char *ext = !strncmp(key, "shared_memory_", 14) ? "shared-memory"
                    : !strncmp(key, "sequence_", 9)     ? "sequence"
                                                        : NULL;
  if (ext)
    return vr_errf(err, VR_EUNSUPPORTED, "parameter \"%.40s\"%s: the %s"
                   " extension is not supported", key, where, ext);
  return vr_errf(err, VR_EUNSUPPORTED, "unknown parameter \"%.40s\"%s", key,
                 where);
}

int vr_ks_bad_dtype(const char *input, const char *dt, vr_errbuf *err) {
  if (!strcmp(dt, "BYTES"))
    return vr_errf(err, VR_EUNSUPPORTED, "input '%s': datatype BYTES (strings) is not"
                   " supported: the models served take numeric tensors", input);
  return vr_errf(err, VR_ETYPE, "input '%s': unknown datatype '%.32s'", input, dt);
}

static int refuse_param(vr_kj *j, const char *where, const char *key) {
  return vr_ks_refuse_param(key, where, j->err);
}

/* parameters of an input: binary_data_size. */
static int input_params(vr_kj *j, const char *name, int64_t *bsz) {
  char key[64], where[VR_NAME_MAX + 16];
  snprintf(where, sizeof where, " in input '%s'", name);
  if (vr_kj_peek(j) != '{')
    return vr_errf(j->err, VR_EFORMAT, "\"parameters\"%s must be an object", where);
  int rc = vr_kj_obj_begin(j), first = 1;
  while (!rc && (rc = vr_kj_obj_next(j, key, sizeof key, &first)) == 1)
    rc = !strcmp(key, "binary_data_size")
             ? get_uint(j, 0, INT64_MAX, bsz, "binary_data_size")
             : refuse_param(j, where, key);
  return rc;
}

enum { K_NAME = 1, K_DTYPE = 2, K_SHAPE = 4, K_DATA = 8, K_PARAMS = 16 };

static int dup_key(vr_kj *j, unsigned *seen, unsigned bit, const char *key) {
  if (*seen & bit)
    return vr_errf(j->err, VR_EFORMAT, "duplicate key \"%s\"", key);
  *seen |= bit;
  return 0;
}

/* Reads the members of one input object (data kept as a span). */
static int input_members(vr_kj *j, vr_ks_input *t, const char **ds,
                         const char **de, int64_t *bsz) {
  char key[64], dt[32];
  unsigned seen = 0;
  int rc = vr_kj_obj_begin(j), first = 1;
  while (!rc && (rc = vr_kj_obj_next(j, key, sizeof key, &first)) == 1) {
    unsigned bit = !strcmp(key, "name")         ? K_NAME
                   : !strcmp(key, "datatype")   ? K_DTYPE
                   : !strcmp(key, "shape")      ? K_SHAPE
                   : !strcmp(key, "data")       ? K_DATA
                   : !strcmp(key, "parameters") ? K_PARAMS : 0;
    if (bit && (rc = dup_key(j, &seen, bit, key))) break;
    if (bit == K_NAME) {
      rc = vr_kj_peek(j) == '"' ? vr_kj_string(j, t->name, sizeof t->name) : VR_EINVAL;
      if (rc && rc != VR_EFORMAT)
        rc = vr_errf(j->err, VR_EFORMAT, "input \"name\" must be a string"
                     " under %d bytes", VR_NAME_MAX);
    } else if (bit == K_DTYPE) {
      rc = vr_kj_peek(j) == '"' ? vr_kj_string(j, dt, sizeof dt) : VR_EINVAL;
      if (rc == VR_EFORMAT) return rc;
      t->dtype = rc ? VR_DT_UNDEFINED : vr_dtype_from_kserve(dt);
      if (t->dtype == VR_DT_UNDEFINED)
        return vr_ks_bad_dtype(t->name, rc ? "?" : dt, j->err);
    } else if (bit == K_SHAPE) {
      rc = parse_shape(j, t);
    } else if (bit == K_DATA) {
      vr_kj_peek(j);
      *ds = j->p;
      rc = vr_kj_skip(j);
      *de = j->p;
    } else if (bit == K_PARAMS) {
      rc = input_params(j, t->name, bsz);
    } else {
      rc = vr_kj_skip(j);
    }
  }
  if (rc) return rc;
  if (!(seen & K_NAME) || !t->name[0])
    return vr_errf(j->err, VR_EFORMAT, "input needs a \"name\" string");
  if (!(seen & K_DTYPE))
    return vr_errf(j->err, VR_ETYPE, "input '%s': unknown datatype '(missing)'",
                   t->name);
  if (!(seen & K_SHAPE))
    return vr_errf(j->err, VR_ESHAPE, "input '%s': shape must be an array of"
                   " 1..%d dims", t->name, VR_MAX_DIMS);
  return 0;
}

/* One entry of "inputs". *bin_off walks the binary section. */
static int parse_input(vr_kj *j, vr_ks_input *t, const char *bin,
                       size_t bin_len, size_t *bin_off) {
  if (vr_kj_peek(j) != '{') {
    int rc = vr_kj_skip(j); /* report a syntax error as such */
    return rc ? rc : vr_errf(j->err, VR_EFORMAT, "input not an object");
  }
  const char *ds = NULL, *de = NULL;
  int64_t bsz = -1;
  int rc = input_members(j, t, &ds, &de, &bsz);
  if (rc) return rc;
  t->nbytes = (size_t)numel(t) * vr_dtype_size(t->dtype);
  if (bsz >= 0) {
    if (ds)
      return vr_errf(j->err, VR_EFORMAT, "input '%s': both \"data\" and"
                     " binary_data_size", t->name);
    if (!bin)
      return vr_errf(j->err, VR_EFORMAT, "input '%s': binary_data_size"
                     " without Inference-Header-Content-Length", t->name);
    if ((size_t)bsz != t->nbytes)
      return vr_errf(j->err, VR_ESHAPE, "input '%s': binary_data_size %lld"
                     " but shape and datatype need %zu bytes", t->name,
                     (long long)bsz, t->nbytes);
    if ((size_t)bsz > bin_len - *bin_off)
      return vr_errf(j->err, VR_EFORMAT, "input '%s': binary data runs past"
                     " the end of the body", t->name);
    t->data = (void *)(bin + *bin_off);
    *bin_off += (size_t)bsz;
    return 0;
  }
  if (!ds) return vr_errf(j->err, VR_EFORMAT, "input '%s': no \"data\"", t->name);
  return decode_data(t, ds, de, j->err);
}

static int parse_inputs(vr_kj *j, vr_ks_request *r, const char *bin,
                        size_t bin_len) {
  if (vr_kj_peek(j) != '[')
    return vr_errf(j->err, VR_EFORMAT, "\"inputs\" must be a non-empty array");
  size_t off = 0;
  int rc = vr_kj_arr_begin(j), first = 1;
  while (!rc && (rc = vr_kj_arr_next(j, &first)) == 1) {
    if (r->n_in == VR_RT_MAX_IO)
      return vr_errf(j->err, VR_ELIMIT, "more than %d inputs", VR_RT_MAX_IO);
    vr_ks_input *t = &r->in[r->n_in++];
    if ((rc = parse_input(j, t, bin, bin_len, &off))) return rc;
    for (int k = 0; k < r->n_in - 1; k++)
      if (!strcmp(r->in[k].name, t->name))
        return vr_errf(j->err, VR_EFORMAT, "duplicate input '%s'", t->name);
  }
  if (rc) return rc;
  if (r->n_in == 0)
    return vr_errf(j->err, VR_EFORMAT, "\"inputs\" must be a non-empty array");
  if (bin && off != bin_len)
    return vr_errf(j->err, VR_EFORMAT, "binary section has %zu bytes, inputs"
                   " declare %zu", bin_len, off);
  return 0;
}

static int get_bool(vr_kj *j, const char *what, int *out) {
  int c = vr_kj_peek(j);
  if (c != 't' && c != 'f')
    return vr_errf(j->err, VR_EINVAL, "parameter \"%s\" must be a boolean", what);
  return vr_kj_bool(j, out);
}

/* binary_data, classification (Triton's classification extension: the
 * top-k classes instead of the tensor). */
static int output_params(vr_kj *j, vr_ks_output_req *q, int idx) {
  char key[64], where[32];
  snprintf(where, sizeof where, " in outputs[%d]", idx);
  if (vr_kj_peek(j) != '{')
    return vr_errf(j->err, VR_EFORMAT, "\"parameters\"%s must be an object", where);
  int rc = vr_kj_obj_begin(j), first = 1;
  while (!rc && (rc = vr_kj_obj_next(j, key, sizeof key, &first)) == 1) {
    int64_t k = 0;
    if (!strcmp(key, "binary_data")) {
      rc = get_bool(j, "binary_data", &q->binary);
    } else if (!strcmp(key, "classification")) {
      rc = get_uint(j, 1, 1 << 20, &k, "parameter \"classification\" (top-k)");
      q->classification = (int)k;
    } else {
      rc = refuse_param(j, where, key);
    }
  }
  return rc;
}

static int parse_outputs(vr_kj *j, vr_ks_request *r) {
  int rc = vr_kj_peek(j) == '[' ? vr_kj_arr_begin(j)
           : vr_errf(j->err, VR_EFORMAT, "\"outputs\" must be an array"),
      first = 1;
  while (!rc && (rc = vr_kj_arr_next(j, &first)) == 1) {
    if (r->n_out == VR_RT_MAX_IO)
      return vr_errf(j->err, VR_EFORMAT, "\"outputs\" must be an array of at"
                     " most %d", VR_RT_MAX_IO);
    vr_ks_output_req *q = &r->out[r->n_out++];
    q->binary = -1;
    char key[64];
    int f2 = 1;
    rc = vr_kj_peek(j) == '{' ? vr_kj_obj_begin(j)
         : vr_errf(j->err, VR_EFORMAT, "outputs[%d] must be an object", r->n_out - 1);
    while (!rc && (rc = vr_kj_obj_next(j, key, sizeof key, &f2)) == 1) {
      if (!strcmp(key, "name")) {
        rc = vr_kj_peek(j) == '"' ? vr_kj_string(j, q->name, sizeof q->name) : VR_EINVAL;
        if (rc && rc != VR_EFORMAT)
          rc = vr_errf(j->err, VR_EFORMAT, "outputs[%d] needs a \"name\"", r->n_out - 1);
      } else if (!strcmp(key, "parameters")) {
        rc = output_params(j, q, r->n_out - 1);
      } else {
        rc = vr_kj_skip(j);
      }
    }
    if (!rc && !q->name[0])
      return vr_errf(j->err, VR_EFORMAT, "outputs[%d] needs a \"name\"", r->n_out - 1);
  }
  return rc;
}

int vr_ks_only_app_params(const vr_ks_request *r, unsigned allowed, const char *for_route,
                          vr_errbuf *err) {
  const char *bad = !(allowed & VR_KS_APP_LATENCY) && r->latency_ms >= 0    ? "latency_ms"
                    : !(allowed & VR_KS_APP_ACCURACY) && r->min_accuracy >= 0 ? "min_accuracy"
                    : !(allowed & VR_KS_APP_COST) && r->max_cost >= 0        ? "max_cost"
                    : !(allowed & VR_KS_APP_MODEL) && r->model[0]            ? "model"
                                                                             : NULL;
  if (!bad) return 0;
  return vr_errf(err, VR_EINVAL, "parameter \"%s\" is for %s, not this endpoint", bad,
                 for_route);
}

/* latency_ms (> 0), min_accuracy ([0, 100]), max_cost (> 0: a 0 was taken
 * for "no limit" below, the opposite of what it says). */
static int app_param(vr_kj *j, const char *key, vr_ks_request *r) {
  double d;
  int64_t i;
  int is_int;
  int rc = vr_kj_peek(j) == '-' || (vr_kj_peek(j) >= '0' && vr_kj_peek(j) <= '9')
               ? vr_kj_number(j, &d, &i, &is_int) : VR_EINVAL;
  if (rc == VR_EFORMAT) return rc;
  if (!rc && is_int) d = (double)i;
  if (!strcmp(key, "latency_ms")) {
    if (rc || !(d > 0) || d > 1e9)
      return vr_errf(j->err, VR_EINVAL, "parameter \"latency_ms\" must be a"
                     " positive number of milliseconds");
    r->latency_ms = d;
  } else if (!strcmp(key, "min_accuracy")) {
    if (rc || !(d >= 0 && d <= 100))
      return vr_errf(j->err, VR_EINVAL, "parameter \"min_accuracy\" must be a"
                     " percentage in [0, 100]");
    r->min_accuracy = d;
  } else {
    if (rc || !(d > 0) || d > 1e18)
      return vr_errf(j->err, VR_EINVAL, "parameter \"max_cost\" must be a"
                     " positive number (dollars per 1000 queries)");
    r->max_cost = d;
  }
  return 0;
}

static int parse_params(vr_kj *j, vr_ks_request *r) {
  if (vr_kj_peek(j) != '{')
    return vr_errf(j->err, VR_EFORMAT, "\"parameters\" must be an object");
  char key[64];
  int rc = vr_kj_obj_begin(j), first = 1;
  while (!rc && (rc = vr_kj_obj_next(j, key, sizeof key, &first)) == 1) {
    int64_t v = 0;
    if (!strcmp(key, "binary_data_output")) {
      rc = get_bool(j, key, &r->binary_output);
    } else if (!strcmp(key, "timeout")) {
      rc = get_uint(j, 0, INT64_MAX / 1000, &v, "parameter \"timeout\""
                    " (microseconds)");
      r->timeout_us = v;
    } else if (!strcmp(key, "priority")) {
      rc = get_uint(j, 0, 1000000, &v, "parameter \"priority\"");
      r->priority = (int)v;
    } else if (!strcmp(key, "latency_ms") || !strcmp(key, "min_accuracy") ||
               !strcmp(key, "max_cost")) {
      rc = app_param(j, key, r);
    } else if (!strcmp(key, "model")) {
      rc = vr_kj_peek(j) == '"' ? vr_kj_string(j, r->model, sizeof r->model)
                                : VR_EINVAL;
      if (rc && rc != VR_EFORMAT)
        rc = vr_errf(j->err, VR_EINVAL, "parameter \"model\" must be a model"
                     " name (a string under %zu bytes)", sizeof r->model);
    } else {
      rc = refuse_param(j, " in the request", key);
    }
  }
  return rc;
}

/* A request, or (resp) a response: its "outputs" are read as tensors
 * into r->in, everything else but "id" skipped. */
static int parse_root(vr_kj *j, const char *bin, size_t bin_len,
                      vr_ks_request *r, int resp) {
  if (vr_kj_peek(j) != '{') {
    int rc = vr_kj_skip(j); /* syntax errors first, as a JSON parser would */
    return rc ? rc : vr_errf(j->err, VR_EFORMAT, "request must be a JSON object");
  }
  char key[64];
  unsigned seen = 0;
  int rc = vr_kj_obj_begin(j), first = 1;
  while (!rc && (rc = vr_kj_obj_next(j, key, sizeof key, &first)) == 1) {
    unsigned bit = !strcmp(key, "id")           ? 1
                   : resp                       ? (!strcmp(key, "outputs") ? 4 : 0)
                   : !strcmp(key, "parameters") ? 2
                   : !strcmp(key, "inputs")     ? 4
                   : !strcmp(key, "outputs")    ? 8 : 0;
    if (bit && (rc = dup_key(j, &seen, bit, key))) break;
    if (bit == 1) {
      rc = vr_kj_peek(j) == '"' ? vr_kj_string(j, r->id, sizeof r->id) : VR_EINVAL;
      if (rc && rc != VR_EFORMAT)
        rc = vr_errf(j->err, VR_EFORMAT, "\"id\" must be a string under %zu"
                     " bytes", sizeof r->id);
    } else if (bit == 2) {
      rc = parse_params(j, r);
    } else if (bit == 4) {
      rc = parse_inputs(j, r, bin, bin_len);
    } else if (bit == 8) {
      rc = parse_outputs(j, r);
    } else {
      rc = vr_kj_skip(j);
    }
  }
  if (!rc) rc = vr_kj_finish(j);
  if (!rc && !(seen & 4))
    rc = vr_errf(j->err, VR_EFORMAT, "\"%s\" must be a non-empty array",
                 resp ? "outputs" : "inputs");
  return rc;
}

int vr_ks_header_len(const char *h, size_t *out, vr_errbuf *err) {
  *out = (size_t)-1;
  if (!h) return 0;
  char *end;
  errno = 0;
  /* digits only (strtoull would skip leading white space and a sign);
   * SIZE_MAX is the "absent" mark, and no body is that long */
  if (*h < '0' || *h > '9')
    return vr_errf(err, VR_EFORMAT, "Inference-Header-Content-Length '%.32s'"
                   " is not a number", h);
  unsigned long long v = strtoull(h, &end, 10);
  if (*end || errno || v >= (unsigned long long)SIZE_MAX)
    return vr_errf(err, VR_EFORMAT, "Inference-Header-Content-Length '%.32s'"
                   " is not a number", h);
  *out = (size_t)v;
  return 0;
}

/* A body refused on its content may not be JSON at all, or be cut short
 * (an Inference-Header-Content-Length too small cuts it anywhere): its
 * syntax error, when it has one, is the message (not the member that
 * happened to be missing where the text stopped). Only on the error path. */
static int syntax_first(const char *text, size_t len, int bin, int rc,
                        vr_errbuf *err) {
  vr_errbuf e = {0};
  vr_kj j;
  vr_kj_init(&j, text, len, &e);
  if (!vr_kj_skip(&j) && !vr_kj_finish(&j)) return rc;
  if (err) *err = e;
  if (bin)
    return vr_errctx(err, VR_EFORMAT, "the JSON header (%zu bytes by"
                     " Inference-Header-Content-Length)", len);
  return VR_EFORMAT;
}

static int parse_body(const char *body, size_t len, size_t header_len,
                      vr_ks_request *out, int resp, vr_errbuf *err) {
  memset(out, 0, sizeof *out);
  out->latency_ms = out->min_accuracy = out->max_cost = -1;
  const char *bin = NULL;
  size_t bin_len = 0, json_len = len;
  if (header_len != (size_t)-1) {
    if (header_len > len)
      return vr_errf(err, VR_EFORMAT, "Inference-Header-Content-Length %zu"
                     " exceeds the body (%zu bytes)", header_len, len);
    json_len = header_len;
    bin = body + header_len;
    bin_len = len - header_len;
  }
  vr_kj j;
  vr_kj_init(&j, body, json_len, err);
  int rc = parse_root(&j, bin, bin_len, out, resp);
  if (rc) {
    vr_ks_request_free(out);
    rc = syntax_first(body, json_len, bin != NULL, rc, err);
  }
  return rc;
}

int vr_ks_parse_request(const char *body, size_t len, size_t header_len,
                        vr_ks_request *out, vr_errbuf *err) {
  return parse_body(body, len, header_len, out, 0, err);
}

int vr_ks_parse_response(const char *body, size_t len, size_t header_len,
                         vr_ks_request *out, vr_errbuf *err) {
  return parse_body(body, len, header_len, out, 1, err);
}

int vr_ks_raw_request(const char *body, size_t len, const vr_model_config *c,
                      vr_ks_request *out, vr_errbuf *err) {
  memset(out, 0, sizeof *out);
  out->latency_ms = out->min_accuracy = out->max_cost = -1;
  if (c->n_inputs != 1)
    return vr_errf(err, VR_EINVAL, "a raw binary request (Inference-Header-Content-Length: 0)"
                   " needs a model with one input; '%.128s' has %d", c->name, c->n_inputs);
  const vr_tensor_info *t = &c->inputs[0];
  vr_ks_input *in = &out->in[0];
  size_t es = vr_dtype_size(t->dtype);
  snprintf(in->name, sizeof in->name, "%s", t->name);
  in->dtype = t->dtype;
  in->ndim = t->ndim;
  /* a batching model gets a batch of 1 (the header that would say more is
   * absent); one other variable dimension is deduced from the size */
  int var = -1;
  int64_t fixed = 1;
  for (int d = 0; d < t->ndim; d++) {
    int64_t v = d == 0 && c->max_batch_size > 0 ? 1 : t->shape[d];
    if (v < 0 && var >= 0)
      return vr_errf(err, VR_ESHAPE, "a raw binary request needs input '%s' to have at most"
                     " one variable dimension", t->name);
    if (v < 0) var = d;
    in->shape[d] = v < 0 ? 1 : v;
    fixed *= in->shape[d];
  }
  const char *dt = vr_dtype_kserve(t->dtype);
  if (!dt) dt = vr_dtype_name(t->dtype); /* (a type KServe has no name for) */
  if (!es)
    return vr_errf(err, VR_EUNSUPPORTED, "raw binary request: input '%s' is %s, which has no"
                   " fixed element size", t->name, dt);
  int64_t n = (int64_t)(len / es);
  if (var < 0 && (len % es || n != fixed))
    return vr_errf(err, VR_ESHAPE, "raw binary request: input '%s' takes %lld %s elements"
                   " (%lld bytes); the body has %zu bytes", t->name, (long long)fixed, dt,
                   (long long)fixed * (long long)es, len);
  if (var >= 0 && (len % es || (fixed ? n % fixed : n)))
    return vr_errf(err, VR_ESHAPE, "raw binary request: %zu bytes are not a whole number of"
                   " input '%s''s %lld-element %s steps (dim %d is variable)", len, t->name,
                   (long long)fixed, dt, var);
  if (var >= 0) in->shape[var] = fixed ? n / fixed : 0;
  /* the bound a JSON request's shape has (parse_shape): the body's size
   * alone, which --max-body-mb lets reach 4 GiB, is no bound on it */
  if (fixed * (var >= 0 ? in->shape[var] : 1) > VR_KS_MAX_ELEMS)
    return vr_errf(err, VR_ELIMIT, "raw binary request: input '%s': more than 2^28 elements",
                   t->name);
  in->data = (void *)body; /* the caller's body, as binary inputs */
  in->nbytes = len;
  out->n_in = 1;
  out->binary_output = 1; /* every output binary, as Triton answers it */
  return 0;
}
