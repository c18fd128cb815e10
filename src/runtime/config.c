#include "runtime/config.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"

/* The engine owns the precision names; these keep the runtime's naming. */
const char *vr_rt_precision_name(vr_precision p) {
  return vr_precision_name(p);
}

int vr_rt_precision_parse(const char *s, vr_precision *out) {
  return vr_precision_parse(s, out);
}

void vr_rt_variant_name(char *out, size_t cap, const char *model,
                        vr_precision p, int threads, int max_batch) {
  snprintf(out, cap, "%s-%s-t%d-b%d", model, vr_precision_name(p), threads,
           max_batch);
}

int64_t vr_tensor_info_row_bytes(const vr_tensor_info *t) {
  int64_t n = (int64_t)vr_dtype_size(t->dtype);
  for (int d = 1; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

static int copy_str(json_t *o, const char *key, char *dst, size_t cap,
                    int required, vr_errbuf *err) {
  json_t *v = json_object_get(o, key);
  if (!v) {
    if (required) return vr_errf(err, VR_EFORMAT, "missing \"%s\"", key);
    dst[0] = 0;
    return 0;
  }
  if (!json_is_string(v))
    return vr_errf(err, VR_EFORMAT, "\"%s\" must be a string", key);
  const char *s = json_string_value(v);
  if (strlen(s) >= cap || (required && !*s))
    return vr_errf(err, VR_EFORMAT, "\"%s\" is empty or longer than %zu",
                   key, cap - 1);
  memcpy(dst, s, strlen(s) + 1);
  return 0;
}

/* Optional positive integer in [lo, hi]; keeps *dst when absent. */
static int get_int(json_t *o, const char *key, int64_t lo, int64_t hi,
                   int64_t *dst, vr_errbuf *err) {
  json_t *v = json_object_get(o, key);
  if (!v) return 0;
  if (!json_is_integer(v))
    return vr_errf(err, VR_EFORMAT, "\"%s\" must be an integer", key);
  int64_t x = json_integer_value(v);
  if (x < lo || x > hi)
    return vr_errf(err, VR_ERANGE, "\"%s\" = %lld outside [%lld, %lld]", key,
                   (long long)x, (long long)lo, (long long)hi);
  *dst = x;
  return 0;
}

static int parse_tensors(json_t *root, const char *key, vr_tensor_info *t,
                         int *n, vr_errbuf *err) {
  json_t *arr = json_object_get(root, key);
  if (!json_is_array(arr) || json_array_size(arr) == 0)
    return vr_errf(err, VR_EFORMAT, "\"%s\" must be a non-empty array", key);
  if (json_array_size(arr) > VR_RT_MAX_IO)
    return vr_errf(err, VR_ELIMIT, "\"%s\": more than %d tensors", key,
                   VR_RT_MAX_IO);
  *n = (int)json_array_size(arr);
  for (int i = 0; i < *n; i++) {
    json_t *o = json_array_get(arr, i);
    vr_tensor_info *ti = &t[i];
    memset(ti, 0, sizeof *ti);
    if (!json_is_object(o))
      return vr_errf(err, VR_EFORMAT, "%s[%d] must be an object", key, i);
    int rc = copy_str(o, "name", ti->name, sizeof ti->name, 1, err);
    if (rc) return vr_errctx(err, rc, "%s[%d]", key, i);
    for (int j = 0; j < i; j++)
      if (!strcmp(t[j].name, ti->name))
        return vr_errf(err, VR_EFORMAT, "%s: duplicate name '%s'", key,
                       ti->name);
    json_t *dt = json_object_get(o, "datatype");
    ti->dtype = vr_dtype_from_kserve(json_string_value(dt));
    if (ti->dtype == VR_DT_UNDEFINED)
      return vr_errf(err, VR_EFORMAT, "%s '%s': unknown datatype", key,
                     ti->name);
    json_t *sh = json_object_get(o, "shape");
    size_t nd = json_array_size(sh);
    if (!json_is_array(sh) || nd < 1 || nd > VR_MAX_DIMS)
      return vr_errf(err, VR_EFORMAT, "%s '%s': shape must have 1..%d dims",
                     key, ti->name, VR_MAX_DIMS);
    ti->ndim = (int)nd;
    int64_t row = 1;
    for (size_t d = 0; d < nd; d++) {
      json_t *x = json_array_get(sh, d);
      if (!json_is_integer(x))
        return vr_errf(err, VR_EFORMAT, "%s '%s': shape[%zu] not an integer",
                       key, ti->name, d);
      int64_t v = json_integer_value(x);
      /* The batch dim is dynamic; every other dim must be concrete so the
       * server can validate requests without asking the engine. */
      if (d == 0 ? v != -1 : (v < 1 || v > (1 << 24)))
        return vr_errf(err, VR_ESHAPE,
                       "%s '%s': shape[%zu] = %lld (dim 0 must be -1, others"
                       " positive)", key, ti->name, d, (long long)v);
      ti->shape[d] = v;
      if (d) row *= v;
      if (row > ((int64_t)1 << 28))
        return vr_errf(err, VR_ELIMIT, "%s '%s': sample too large", key,
                       ti->name);
    }
  }
  return 0;
}

/* "queue_policy": {"max_queue_size", "default_timeout_microseconds",
 * "timeout_action": "REJECT" | "DELAY", "allow_timeout_override"} (the
 * names of Triton's ModelQueuePolicy); every key optional, others refused. */
void vr_model_config_queue_defaults(vr_model_config *c) {
  c->queue.max_queue_size = 0;
  c->queue.default_timeout_us = 100000;
  c->queue.delay = 0;
  c->queue.allow_timeout_override = 1;
}

static int parse_queue(json_t *root, vr_model_config *c, vr_errbuf *err) {
  vr_model_config_queue_defaults(c);
  json_t *q = json_object_get(root, "queue_policy");
  if (!q) return 0;
  if (!json_is_object(q)) return vr_errf(err, VR_EFORMAT, "\"queue_policy\" must be an object");
  const char *k;
  json_t *v;
  json_object_foreach(q, k, v) {
    if (strcmp(k, "max_queue_size") && strcmp(k, "default_timeout_microseconds") &&
        strcmp(k, "timeout_action") && strcmp(k, "allow_timeout_override"))
      return vr_errf(err, VR_EFORMAT, "queue_policy: unknown key \"%s\"", k);
  }
  int rc;
  if ((rc = get_int(q, "max_queue_size", 0, 1 << 20, &c->queue.max_queue_size, err)) ||
      (rc = get_int(q, "default_timeout_microseconds", 0, (int64_t)3600 * 1000000,
                    &c->queue.default_timeout_us, err)))
    return rc;
  json_t *a = json_object_get(q, "timeout_action");
  if (a && !(json_is_string(a) && (!strcmp(json_string_value(a), "REJECT") ||
                                   !strcmp(json_string_value(a), "DELAY"))))
    return vr_errf(err, VR_EFORMAT, "queue_policy.timeout_action must be \"REJECT\" or"
                   " \"DELAY\"");
  c->queue.delay = a && !strcmp(json_string_value(a), "DELAY");
  json_t *o = json_object_get(q, "allow_timeout_override");
  if (o && !json_is_boolean(o))
    return vr_errf(err, VR_EFORMAT, "queue_policy.allow_timeout_override must be a boolean");
  if (o) c->queue.allow_timeout_override = json_is_true(o);
  return 0;
}

static int parse_root(json_t *root, vr_model_config *c, vr_errbuf *err) {
  int rc;
  if (!json_is_object(root))
    return vr_errf(err, VR_EFORMAT, "config must be a JSON object");
  if ((rc = copy_str(root, "name", c->name, sizeof c->name, 1, err)) ||
      (rc = copy_str(root, "app", c->app, sizeof c->app, 0, err)) ||
      (rc = copy_str(root, "task", c->task, sizeof c->task, 0, err)))
    return rc;
  for (const char *p = c->name; *p; p++)
    if (!(*p == '_' || *p == '-' || *p == '.' || (*p >= '0' && *p <= '9') ||
          (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
      return vr_errf(err, VR_EFORMAT,
                     "\"name\" '%s' may use only [A-Za-z0-9_.-]", c->name);
  json_t *acc = json_object_get(root, "accuracy");
  c->accuracy = -1;
  if (acc) {
    if (!json_is_number(acc) || json_number_value(acc) < 0 ||
        json_number_value(acc) > 100)
      return vr_errf(err, VR_ERANGE,
                     "\"accuracy\" must be a number in [0,100] (percent)");
    c->accuracy = json_number_value(acc);
  }
  if ((rc = parse_tensors(root, "inputs", c->inputs, &c->n_inputs, err)) ||
      (rc = parse_tensors(root, "outputs", c->outputs, &c->n_outputs, err)))
    return rc;
  int64_t mb = 1, inst = 1, thr = 1, delay = 0;
  if ((rc = get_int(root, "max_batch_size", 1, VR_RT_MAX_BATCH, &mb, err)) ||
      (rc = get_int(root, "instances", 0, VR_RT_MAX_INSTANCES, &inst, err)) ||
      (rc = get_int(root, "threads", 1, VR_RT_MAX_THREADS, &thr, err)) ||
      (rc = get_int(root, "max_queue_delay_us", 0, 10 * 1000 * 1000, &delay,
                    err)))
    return rc;
  c->max_batch_size = (int)mb;
  c->instances = (int)inst;
  c->threads = (int)thr;
  c->max_queue_delay_us = delay;
  json_t *cal = json_object_get(root, "calibration");
  if (cal && (!json_is_string(cal) || !*json_string_value(cal) ||
              strlen(json_string_value(cal)) >= sizeof c->calibration_path))
    return vr_errf(err, VR_EFORMAT,
                   "\"calibration\" must be a non-empty path to a .npy file");
  if (cal)
    memcpy(c->calibration_path, json_string_value(cal),
           strlen(json_string_value(cal)) + 1);
  if ((rc = parse_queue(root, c, err))) return rc;
  c->precision = VR_PREC_FP32;
  json_t *prec = json_object_get(root, "precision");
  if (prec && vr_rt_precision_parse(json_string_value(prec), &c->precision))
    return vr_errf(err, VR_EFORMAT,
                   "\"precision\" must be \"fp32\", \"bf16\" or \"int8\"");
  return 0;
}

int vr_model_config_parse(const char *text, size_t len, const char *dir,
                          vr_model_config *out, vr_errbuf *err) {
  memset(out, 0, sizeof *out);
  json_error_t je;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!root)
    return vr_errf(err, VR_EFORMAT, "config.json line %d: %s", je.line,
                   je.text);
  int rc = parse_root(root, out, err);
  json_decref(root);
  if (rc) return rc;
  if (dir) {
    int n = snprintf(out->model_path, sizeof out->model_path, "%s/model.onnx",
                     dir);
    if (n < 0 || (size_t)n >= sizeof out->model_path)
      return vr_errf(err, VR_ELIMIT, "model directory path too long");
    if (out->calibration_path[0] && out->calibration_path[0] != '/') {
      char rel[sizeof out->calibration_path];
      memcpy(rel, out->calibration_path, sizeof rel);
      n = snprintf(out->calibration_path, sizeof out->calibration_path,
                   "%s/%s", dir, rel);
      if (n < 0 || (size_t)n >= sizeof out->calibration_path)
        return vr_errf(err, VR_ELIMIT, "\"calibration\" path too long");
    }
  }
  return 0;
}

int vr_model_config_load(const char *dir, vr_model_config *out,
                         vr_errbuf *err) {
  char path[4200];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "rb");
  if (!f) return vr_errf(err, VR_ENOENT, "%s: cannot open", path);
  char *buf = vr_malloc(1 << 20);
  if (!buf) {
    fclose(f);
    return vr_errf(err, VR_ENOMEM, "out of memory");
  }
  size_t n = fread(buf, 1, 1 << 20, f);
  int big = !feof(f);
  fclose(f);
  int rc = big ? vr_errf(err, VR_ELIMIT, "%s: larger than 1 MiB", path)
               : vr_model_config_parse(buf, n, dir, out, err);
  vr_free(buf);
  if (rc) return vr_errctx(err, rc, "%s", path);
  struct stat st;
  if (stat(out->model_path, &st) != 0 || !S_ISREG(st.st_mode))
    return vr_errf(err, VR_ENOENT, "%s: missing", out->model_path);
  if (out->calibration_path[0] &&
      (stat(out->calibration_path, &st) != 0 || !S_ISREG(st.st_mode)))
    return vr_errf(err, VR_ENOENT, "%s/config.json: \"calibration\" file '%s'"
                   " missing", dir, out->calibration_path);
  return 0;
}
