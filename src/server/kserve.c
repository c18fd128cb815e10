#include "server/kserve.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

void vr_ks_request_free(vr_ks_request *r) {
  for (int i = 0; i < r->n_in; i++)
    if (r->in[i].owned) vr_aligned_free(r->in[i].data);
  memset(r, 0, sizeof *r);
}

/* ---- JSON tensor data -------------------------------------------------- */

/* Stores JSON value v as element k of a dtype array. */
static int put_elem(vr_dtype dt, void *dst, int64_t k, json_t *v,
                    vr_errbuf *err) {
  if (dt == VR_DT_BOOL) {
    if (!json_is_boolean(v))
      return vr_errf(err, VR_ETYPE, "BOOL data must be true/false");
    ((uint8_t *)dst)[k] = json_is_true(v);
    return 0;
  }
  if (dt == VR_DT_F32 || dt == VR_DT_F64) {
    if (!json_is_number(v))
      return vr_errf(err, VR_ETYPE, "element %lld is not a number",
                     (long long)k);
    double x = json_number_value(v);
    if (dt == VR_DT_F32) ((float *)dst)[k] = (float)x;
    else ((double *)dst)[k] = x;
    return 0;
  }
  if (!json_is_integer(v))
    return vr_errf(err, VR_ETYPE, "element %lld is not an integer",
                   (long long)k);
  json_int_t x = json_integer_value(v);
  int64_t lo = 0, hi = 0;
  switch (dt) {
  case VR_DT_I8: lo = INT8_MIN; hi = INT8_MAX; break;
  case VR_DT_U8: hi = UINT8_MAX; break;
  case VR_DT_I16: lo = INT16_MIN; hi = INT16_MAX; break;
  case VR_DT_U16: hi = UINT16_MAX; break;
  case VR_DT_I32: lo = INT32_MIN; hi = INT32_MAX; break;
  case VR_DT_U32: hi = UINT32_MAX; break;
  case VR_DT_I64: lo = INT64_MIN; hi = INT64_MAX; break;
  case VR_DT_U64: hi = INT64_MAX; break; /* jansson is signed 64-bit */
  default:
    return vr_errf(err, VR_EUNSUPPORTED, "datatype %s needs binary data",
                   vr_dtype_kserve(dt));
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
  default: ((int64_t *)dst)[k] = (int64_t)x; break;
  }
  return 0;
}

/* Flattens nested arrays depth-first into dst; *k counts elements. Depth
 * is bounded so that a hostile nesting cannot exhaust the stack. */
static int flatten(json_t *v, vr_dtype dt, void *dst, int64_t n, int64_t *k,
                   int depth, vr_errbuf *err) {
  if (json_is_array(v)) {
    if (depth > VR_MAX_DIMS)
      return vr_errf(err, VR_ESHAPE, "data nested deeper than %d",
                     VR_MAX_DIMS);
    for (size_t i = 0; i < json_array_size(v); i++) {
      int rc = flatten(json_array_get(v, i), dt, dst, n, k, depth + 1, err);
      if (rc) return rc;
    }
    return 0;
  }
  if (*k >= n)
    return vr_errf(err, VR_ESHAPE, "data has more than %lld elements",
                   (long long)n);
  int rc = put_elem(dt, dst, *k, v, err);
  (*k)++;
  return rc;
}

static int64_t numel(const vr_ks_input *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

/* ---- request ----------------------------------------------------------- */

static int get_bool_param(json_t *params, const char *key, int *out,
                          vr_errbuf *err) {
  json_t *v = json_object_get(params, key);
  if (!v) return 0;
  if (!json_is_boolean(v))
    return vr_errf(err, VR_EINVAL, "parameter \"%s\" must be a boolean", key);
  *out = json_is_true(v);
  return 0;
}

static int parse_shape(json_t *sh, vr_ks_input *t, vr_errbuf *err) {
  size_t nd = json_array_size(sh);
  if (!json_is_array(sh) || nd < 1 || nd > VR_MAX_DIMS)
    return vr_errf(err, VR_ESHAPE, "input '%s': shape must be an array of"
                   " 1..%d dims", t->name, VR_MAX_DIMS);
  t->ndim = (int)nd;
  int64_t n = 1;
  for (size_t d = 0; d < nd; d++) {
    json_t *x = json_array_get(sh, d);
    if (!json_is_integer(x) || json_integer_value(x) < 0 ||
        json_integer_value(x) > VR_KS_MAX_ELEMS)
      return vr_errf(err, VR_ESHAPE, "input '%s': shape[%zu] must be an"
                     " integer in [0, 2^28]", t->name, d);
    t->shape[d] = json_integer_value(x);
    n *= t->shape[d];
    if (n > VR_KS_MAX_ELEMS)
      return vr_errf(err, VR_ELIMIT, "input '%s': more than 2^28 elements",
                     t->name);
  }
  return 0;
}

/* One entry of "inputs". *bin_off walks the binary section. */
static int parse_input(json_t *o, vr_ks_input *t, const char *bin,
                       size_t bin_len, size_t *bin_off, vr_errbuf *err) {
  if (!json_is_object(o)) return vr_errf(err, VR_EFORMAT, "input not an object");
  const char *name = json_string_value(json_object_get(o, "name"));
  if (!name || !*name || strlen(name) >= VR_NAME_MAX)
    return vr_errf(err, VR_EFORMAT, "input needs a \"name\" string");
  strcpy(t->name, name);
  const char *dt = json_string_value(json_object_get(o, "datatype"));
  t->dtype = vr_dtype_from_kserve(dt);
  if (t->dtype == VR_DT_UNDEFINED)
    return vr_errf(err, VR_ETYPE, "input '%s': unknown datatype '%s'", name,
                   dt ? dt : "(missing)");
  int rc = parse_shape(json_object_get(o, "shape"), t, err);
  if (rc) return rc;
  int64_t n = numel(t);
  size_t esz = vr_dtype_size(t->dtype);
  t->nbytes = (size_t)n * esz;
  json_t *params = json_object_get(o, "parameters");
  json_t *bsz = params ? json_object_get(params, "binary_data_size") : NULL;
  json_t *data = json_object_get(o, "data");
  if (bsz) {
    if (data)
      return vr_errf(err, VR_EFORMAT, "input '%s': both \"data\" and"
                     " binary_data_size", name);
    if (!json_is_integer(bsz) || json_integer_value(bsz) < 0)
      return vr_errf(err, VR_EFORMAT, "input '%s': bad binary_data_size",
                     name);
    size_t sz = (size_t)json_integer_value(bsz);
    if (!bin)
      return vr_errf(err, VR_EFORMAT, "input '%s': binary_data_size without"
                     " Inference-Header-Content-Length", name);
    if (sz != t->nbytes)
      return vr_errf(err, VR_ESHAPE, "input '%s': binary_data_size %zu but"
                     " shape and datatype need %zu bytes", name, sz,
                     t->nbytes);
    if (sz > bin_len - *bin_off)
      return vr_errf(err, VR_EFORMAT, "input '%s': binary data runs past"
                     " the end of the body", name);
    t->data = (void *)(bin + *bin_off);
    *bin_off += sz;
    return 0;
  }
  if (!data) return vr_errf(err, VR_EFORMAT, "input '%s': no \"data\"", name);
  t->data = vr_aligned_alloc(64, t->nbytes ? t->nbytes : 64);
  if (!t->data) return vr_errf(err, VR_ENOMEM, "out of memory");
  t->owned = 1;
  int64_t k = 0;
  rc = flatten(data, t->dtype, t->data, n, &k, 0, err);
  if (rc) return vr_errctx(err, rc, "input '%s'", name);
  if (k != n)
    return vr_errf(err, VR_ESHAPE, "input '%s': %lld data elements, shape"
                   " needs %lld", name, (long long)k, (long long)n);
  return 0;
}

static int parse_outputs(json_t *arr, vr_ks_request *r, vr_errbuf *err) {
  if (!arr) return 0;
  if (!json_is_array(arr) || json_array_size(arr) > VR_RT_MAX_IO)
    return vr_errf(err, VR_EFORMAT, "\"outputs\" must be an array of at"
                   " most %d", VR_RT_MAX_IO);
  for (size_t i = 0; i < json_array_size(arr); i++) {
    json_t *o = json_array_get(arr, i);
    const char *name = json_string_value(json_object_get(o, "name"));
    if (!name || strlen(name) >= VR_NAME_MAX)
      return vr_errf(err, VR_EFORMAT, "outputs[%zu] needs a \"name\"", i);
    vr_ks_output_req *q = &r->out[r->n_out++];
    strcpy(q->name, name);
    q->binary = -1;
    json_t *p = json_object_get(o, "parameters");
    int rc = p ? get_bool_param(p, "binary_data", &q->binary, err) : 0;
    if (rc) return rc;
  }
  return 0;
}

static int parse_params(json_t *p, vr_ks_request *r, vr_errbuf *err) {
  if (!p) return 0;
  if (!json_is_object(p))
    return vr_errf(err, VR_EFORMAT, "\"parameters\" must be an object");
  int rc = get_bool_param(p, "binary_data_output", &r->binary_output, err);
  if (rc) return rc;
  json_t *t = json_object_get(p, "timeout");
  if (t && (!json_is_integer(t) || json_integer_value(t) < 0))
    return vr_errf(err, VR_EINVAL, "parameter \"timeout\" must be a"
                   " non-negative integer (microseconds)");
  if (t) r->timeout_us = json_integer_value(t);
  json_t *pr = json_object_get(p, "priority");
  if (pr && (!json_is_integer(pr) || json_integer_value(pr) < 0 ||
             json_integer_value(pr) > 1000000))
    return vr_errf(err, VR_EINVAL, "parameter \"priority\" must be an"
                   " integer in [0, 1000000]");
  if (pr) r->priority = (int)json_integer_value(pr);
  return 0;
}

static int parse_root(json_t *root, const char *bin, size_t bin_len,
                      vr_ks_request *r, vr_errbuf *err) {
  if (!json_is_object(root))
    return vr_errf(err, VR_EFORMAT, "request must be a JSON object");
  json_t *id = json_object_get(root, "id");
  if (id && (!json_is_string(id) || strlen(json_string_value(id)) >= sizeof r->id))
    return vr_errf(err, VR_EFORMAT, "\"id\" must be a string under %zu bytes",
                   sizeof r->id);
  if (id) strcpy(r->id, json_string_value(id));
  int rc = parse_params(json_object_get(root, "parameters"), r, err);
  if (rc) return rc;
  json_t *ins = json_object_get(root, "inputs");
  if (!json_is_array(ins) || json_array_size(ins) == 0)
    return vr_errf(err, VR_EFORMAT, "\"inputs\" must be a non-empty array");
  if (json_array_size(ins) > VR_RT_MAX_IO)
    return vr_errf(err, VR_ELIMIT, "more than %d inputs", VR_RT_MAX_IO);
  size_t off = 0;
  for (size_t i = 0; i < json_array_size(ins); i++) {
    r->n_in++;
    rc = parse_input(json_array_get(ins, i), &r->in[i], bin, bin_len, &off,
                     err);
    if (rc) return rc;
    for (size_t j = 0; j < i; j++)
      if (!strcmp(r->in[j].name, r->in[i].name))
        return vr_errf(err, VR_EFORMAT, "duplicate input '%s'", r->in[i].name);
  }
  if (bin && off != bin_len)
    return vr_errf(err, VR_EFORMAT, "binary section has %zu bytes, inputs"
                   " declare %zu", bin_len, off);
  return parse_outputs(json_object_get(root, "outputs"), r, err);
}

int vr_ks_parse_request(const char *body, size_t len, size_t header_len,
                        vr_ks_request *out, vr_errbuf *err) {
  memset(out, 0, sizeof *out);
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
  json_error_t je;
  json_t *root = json_loadb(body, json_len, JSON_REJECT_DUPLICATES, &je);
  if (!root)
    return vr_errf(err, VR_EFORMAT, "malformed JSON at line %d column %d: %s",
                   je.line, je.column, je.text);
  int rc = parse_root(root, bin, bin_len, out, err);
  json_decref(root);
  if (rc) vr_ks_request_free(out);
  return rc;
}

/* ---- response ---------------------------------------------------------- */

void vr_ks_write_error(vr_sbuf *b, const char *msg) {
  vr_sbuf_puts(b, "{\"error\":");
  vr_sbuf_json_str(b, msg);
  vr_sbuf_puts(b, "}");
}

static void put_double(vr_sbuf *b, double x, int digits) {
  if (!isfinite(x)) { /* JSON has no NaN/Inf: emit null */
    vr_sbuf_add(b, "null", 4);
    return;
  }
  vr_sbuf_printf(b, "%.*g", digits, x);
}

void vr_ks_write_numbers(vr_sbuf *b, vr_dtype dt, const void *data, size_t n) {
  vr_sbuf_reserve(b, n * 12);
  for (size_t i = 0; i < n; i++) {
    if (i) vr_sbuf_add(b, ",", 1);
    switch (dt) {
    case VR_DT_F32: put_double(b, ((const float *)data)[i], 9); break;
    case VR_DT_F64: put_double(b, ((const double *)data)[i], 17); break;
    case VR_DT_BOOL: vr_sbuf_puts(b, ((const uint8_t *)data)[i] ? "true" : "false"); break;
    case VR_DT_I8: vr_sbuf_printf(b, "%d", ((const int8_t *)data)[i]); break;
    case VR_DT_U8: vr_sbuf_printf(b, "%u", ((const uint8_t *)data)[i]); break;
    case VR_DT_I16: vr_sbuf_printf(b, "%d", ((const int16_t *)data)[i]); break;
    case VR_DT_U16: vr_sbuf_printf(b, "%u", ((const uint16_t *)data)[i]); break;
    case VR_DT_I32: vr_sbuf_printf(b, "%d", ((const int32_t *)data)[i]); break;
    case VR_DT_U32: vr_sbuf_printf(b, "%u", ((const uint32_t *)data)[i]); break;
    case VR_DT_I64: vr_sbuf_printf(b, "%lld", (long long)((const int64_t *)data)[i]); break;
    case VR_DT_U64: vr_sbuf_printf(b, "%llu", (unsigned long long)((const uint64_t *)data)[i]); break;
    default: vr_sbuf_add(b, "null", 4); break;
    }
  }
}

int vr_ks_check_outputs(const vr_ks_request *req, const vr_model_config *c,
                        vr_errbuf *err) {
  for (int i = 0; i < req->n_out; i++) {
    int found = 0;
    for (int j = 0; j < c->n_outputs && !found; j++)
      found = !strcmp(req->out[i].name, c->outputs[j].name);
    if (!found)
      return vr_errf(err, VR_EINVAL, "model '%s' has no output '%s'", c->name,
                     req->out[i].name);
  }
  return 0;
}

/* Whether output t is returned, and in binary form. */
static int wanted(const vr_ks_request *req, const char *name, int *binary) {
  *binary = req->binary_output;
  if (req->n_out == 0) return 1;
  for (int i = 0; i < req->n_out; i++)
    if (!strcmp(req->out[i].name, name)) {
      if (req->out[i].binary >= 0) *binary = req->out[i].binary;
      return 1;
    }
  return 0;
}

/* Datatypes JSON cannot carry are always sent binary. */
static int json_capable(vr_dtype dt) {
  return dt != VR_DT_F16 && dt != VR_DT_BF16 && vr_dtype_kserve(dt);
}

int vr_ks_write_response(vr_sbuf *b, const char *model, const vr_ks_request *req,
                         const vr_tensor *outs, int n_out,
                         const vr_ks_resp_info *info, size_t *json_len,
                         vr_errbuf *err) {
  vr_sbuf_puts(b, "{\"model_name\":");
  vr_sbuf_json_str(b, model);
  vr_sbuf_puts(b, ",\"model_version\":\"1\"");
  if (req->id[0]) {
    vr_sbuf_puts(b, ",\"id\":");
    vr_sbuf_json_str(b, req->id);
  }
  if (info) {
    vr_sbuf_puts(b, ",\"parameters\":{\"variant\":");
    vr_sbuf_json_str(b, info->variant ? info->variant : "");
    vr_sbuf_printf(b, ",\"queue_us\":%lld,\"compute_us\":%lld,\"batch_size\":%d}",
                   (long long)info->queue_us, (long long)info->compute_us,
                   info->batch_size);
  }
  vr_sbuf_puts(b, ",\"outputs\":[");
  int first = 1, any_bin = 0;
  int bin_idx[VR_RT_MAX_IO], n_bin = 0;
  for (int i = 0; i < n_out; i++) {
    int binary;
    if (!wanted(req, outs[i].name, &binary)) continue;
    if (!json_capable(outs[i].dtype)) binary = 1;
    if (!first) vr_sbuf_add(b, ",", 1);
    first = 0;
    vr_sbuf_puts(b, "{\"name\":");
    vr_sbuf_json_str(b, outs[i].name);
    vr_sbuf_printf(b, ",\"datatype\":\"%s\",\"shape\":[",
                   vr_dtype_kserve(outs[i].dtype) ? vr_dtype_kserve(outs[i].dtype) : "BYTES");
    for (int d = 0; d < outs[i].ndim; d++)
      vr_sbuf_printf(b, d ? ",%lld" : "%lld", (long long)outs[i].shape[d]);
    vr_sbuf_puts(b, "]");
    if (binary) {
      vr_sbuf_printf(b, ",\"parameters\":{\"binary_data_size\":%zu}}",
                     outs[i].nbytes);
      bin_idx[n_bin++] = i;
      any_bin = 1;
    } else {
      vr_sbuf_puts(b, ",\"data\":[");
      vr_ks_write_numbers(b, outs[i].dtype, outs[i].data,
                          outs[i].nbytes / vr_dtype_size(outs[i].dtype));
      vr_sbuf_puts(b, "]}");
    }
  }
  vr_sbuf_puts(b, "]}");
  *json_len = b->len;
  for (int k = 0; any_bin && k < n_bin; k++)
    vr_sbuf_add(b, outs[bin_idx[k]].data, outs[bin_idx[k]].nbytes);
  if (b->oom) return vr_errf(err, VR_ENOMEM, "out of memory");
  return 0;
}
