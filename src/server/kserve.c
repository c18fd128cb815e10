#include "server/kserve.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "runtime/labels.h"

void vr_ks_request_free(vr_ks_request *r) {
  for (int i = 0; i < r->n_in; i++)
    if (r->in[i].owned) vr_aligned_free(r->in[i].data);
  for (int i = 0; i < r->n_out; i++) vr_labels_release(r->out[i].labels);
  memset(r, 0, sizeof *r);
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

/* Element i of an array of T that may sit at any alignment. */
#define LOAD(T, p, i) ({ T v_; memcpy(&v_, (const char *)(p) + (i) * sizeof(T), sizeof v_); v_; })

void vr_ks_write_numbers(vr_sbuf *b, vr_dtype dt, const void *data, size_t n) {
  vr_sbuf_reserve(b, n * 12);
  for (size_t i = 0; i < n; i++) {
    if (i) vr_sbuf_add(b, ",", 1);
    switch (dt) {
    case VR_DT_F32: put_double(b, LOAD(float, data, i), 9); break;
    case VR_DT_F64: put_double(b, LOAD(double, data, i), 17); break;
    case VR_DT_BOOL: vr_sbuf_puts(b, LOAD(uint8_t, data, i) ? "true" : "false"); break;
    case VR_DT_I8: vr_sbuf_printf(b, "%d", LOAD(int8_t, data, i)); break;
    case VR_DT_U8: vr_sbuf_printf(b, "%u", LOAD(uint8_t, data, i)); break;
    case VR_DT_I16: vr_sbuf_printf(b, "%d", LOAD(int16_t, data, i)); break;
    case VR_DT_U16: vr_sbuf_printf(b, "%u", LOAD(uint16_t, data, i)); break;
    case VR_DT_I32: vr_sbuf_printf(b, "%d", LOAD(int32_t, data, i)); break;
    case VR_DT_U32: vr_sbuf_printf(b, "%u", LOAD(uint32_t, data, i)); break;
    case VR_DT_I64: vr_sbuf_printf(b, "%lld", (long long)LOAD(int64_t, data, i)); break;
    case VR_DT_U64: vr_sbuf_printf(b, "%llu", (unsigned long long)LOAD(uint64_t, data, i)); break;
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

/* The request's entry for output `name` (NULL: all outputs were asked for
 * implicitly); 0 when the output is not returned. */
static int wanted(const vr_ks_request *req, const char *name, int *binary,
                  const vr_ks_output_req **q) {
  *binary = req->binary_output;
  *q = NULL;
  if (req->n_out == 0) return 1;
  for (int i = 0; i < req->n_out; i++)
    if (!strcmp(req->out[i].name, name)) {
      if (req->out[i].binary >= 0) *binary = req->out[i].binary;
      *q = &req->out[i];
      return 1;
    }
  return 0;
}

/* Datatypes JSON cannot carry are always sent binary. */
static int json_capable(vr_dtype dt) {
  return dt != VR_DT_F16 && dt != VR_DT_BF16 && vr_dtype_kserve(dt);
}

/* Classification (kserve.h): k passes over each row, k is small. */
int vr_ks_classify(const vr_tensor *t, int k, const vr_labels *labels,
                   vr_sbuf *js, vr_sbuf *bin, int64_t *rows_out, int *k_out,
                   vr_errbuf *err) {
  if (t->dtype != VR_DT_F32 || t->ndim < 1)
    return vr_errf(err, VR_EUNSUPPORTED, "classification of output '%s' needs"
                   " FP32 scores", t->name);
  int64_t rows = t->ndim >= 2 ? t->shape[0] : 1, n = (int64_t)(t->nbytes / 4);
  int64_t per = rows ? n / rows : 0;
  if (k > per) k = (int)per;
  const float *x = t->data;
  vr_sbuf str;
  vr_sbuf_init(&str);
  for (int64_t r = 0; r < rows; r++) {
    const float *row = x + r * per;
    float last = INFINITY;
    int64_t last_i = -1;
    for (int j = 0; j < k; j++) { /* k passes: k is small */
      int64_t best = -1;
      for (int64_t i = 0; i < per; i++) {
        int after = row[i] < last || (row[i] == last && i > last_i);
        if (after && (best < 0 || row[i] > row[best])) best = i;
      }
      if (best < 0) break;
      last = row[best];
      last_i = best;
      str.len = 0;
      vr_sbuf_printf(&str, "%f:%lld", (double)row[best], (long long)best);
      const char *label = vr_labels_get(labels, best);
      if (label && *label) vr_sbuf_printf(&str, ":%s", label);
      if (str.oom) {
        vr_sbuf_free(&str);
        return vr_errf(err, VR_ENOMEM, "out of memory");
      }
      size_t len = str.len; /* sbufs stay NUL-terminated */
      if (bin) {
        uint32_t l = (uint32_t)len;
        vr_sbuf_add(bin, &l, 4);
        vr_sbuf_add(bin, str.p, len);
      } else {
        if (r || j) vr_sbuf_add(js, ",", 1);
        vr_sbuf_json_str(js, str.p);
      }
    }
  }
  vr_sbuf_free(&str);
  *rows_out = rows;
  *k_out = k;
  return 0;
}

static int put_classified(vr_sbuf *b, const vr_tensor *t, int k,
                          const vr_labels *labels, int binary, vr_sbuf *bin,
                          vr_errbuf *err) {
  vr_sbuf data;
  vr_sbuf_init(&data);
  int64_t rows;
  int rc = vr_ks_classify(t, k, labels, &data, binary ? bin : NULL, &rows, &k, err);
  if (!rc) {
    vr_sbuf_printf(b, ",\"datatype\":\"BYTES\",\"shape\":[%lld,%d]",
                   (long long)rows, k);
    if (binary)
      vr_sbuf_printf(b, ",\"parameters\":{\"binary_data_size\":%zu}}", bin->len);
    else {
      vr_sbuf_puts(b, ",\"data\":[");
      vr_sbuf_add(b, data.p, data.len);
      vr_sbuf_puts(b, "]}");
    }
  }
  vr_sbuf_free(&data);
  return rc;
}

int vr_ks_write_response(vr_sbuf *b, const char *model, const vr_ks_request *req,
                         const vr_tensor *outs, int n_out,
                         const vr_ks_resp_info *info, size_t *json_len,
                         vr_errbuf *err) {
  vr_sbuf_puts(b, "{\"model_name\":");
  vr_sbuf_json_str(b, model);
  vr_sbuf_printf(b, ",\"model_version\":\"%d\"",
                 info && info->version > 0 ? info->version : 1);
  if (req->id[0]) {
    vr_sbuf_puts(b, ",\"id\":");
    vr_sbuf_json_str(b, req->id);
  }
  if (info) {
    vr_sbuf_puts(b, ",\"parameters\":{\"variant\":");
    vr_sbuf_json_str(b, info->variant ? info->variant : "");
    vr_sbuf_printf(b, ",\"queue_us\":%lld,\"compute_us\":%lld,\"batch_size\":%d",
                   (long long)info->queue_us, (long long)info->compute_us,
                   info->batch_size);
    const vr_ks_app_info *a = info->app;
    if (a) {
      vr_sbuf_puts(b, ",\"model\":");
      vr_sbuf_json_str(b, a->model ? a->model : "");
      vr_sbuf_printf(b, ",\"accuracy\":%.4f,\"queue_ms\":%.3f,\"compute_ms\":%.3f,"
                     "\"latency_slo_ms\":%g,\"profile_p99_ms\":%.6g,"
                     "\"cost_per_1k\":%.6g,\"loaded_for_query\":%s",
                     a->accuracy, info->queue_us / 1e3, info->compute_us / 1e3,
                     a->latency_slo_ms, a->profile_p99_ms, a->cost_per_1k,
                     a->loaded_for_query ? "true" : "false");
    }
    vr_sbuf_puts(b, "}");
  }
  vr_sbuf_puts(b, ",\"outputs\":[");
  int first = 1, any_bin = 0, rc = 0;
  int bin_idx[VR_RT_MAX_IO], n_bin = 0;
  vr_sbuf cls[VR_RT_MAX_IO]; /* binary classification results */
  int is_cls[VR_RT_MAX_IO] = {0};
  for (int i = 0; i < n_out; i++) vr_sbuf_init(&cls[i]);
  for (int i = 0; i < n_out && !rc; i++) {
    int binary;
    const vr_ks_output_req *q;
    if (!wanted(req, outs[i].name, &binary, &q)) continue;
    if (!first) vr_sbuf_add(b, ",", 1);
    first = 0;
    vr_sbuf_puts(b, "{\"name\":");
    vr_sbuf_json_str(b, outs[i].name);
    if (q && q->classification > 0) {
      rc = put_classified(b, &outs[i], q->classification, q->labels, binary,
                          &cls[i], err);
      is_cls[i] = 1;
      if (binary) bin_idx[n_bin++] = i, any_bin = 1;
      continue;
    }
    if (!json_capable(outs[i].dtype)) binary = 1;
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
  for (int k = 0; !rc && any_bin && k < n_bin; k++) {
    int i = bin_idx[k];
    if (is_cls[i]) vr_sbuf_add(b, cls[i].p, cls[i].len);
    else vr_sbuf_add(b, outs[i].data, outs[i].nbytes);
  }
  for (int i = 0; i < n_out; i++) vr_sbuf_free(&cls[i]);
  if (rc) return rc;
  if (b->oom) return vr_errf(err, VR_ENOMEM, "out of memory");
  return 0;
}
