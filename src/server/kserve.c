#include "server/kserve.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

void vr_ks_request_free(vr_ks_request *r) {
  for (int i = 0; i < r->n_in; i++)
    if (r->in[i].owned) vr_aligned_free(r->in[i].data);
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
