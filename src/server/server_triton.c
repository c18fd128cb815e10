/*
 * What a Triton user expects of the repository side of the server:
 * readiness (ready only when every model the repository says to load is
 * loaded), served versions, and GET /v2/models/{m}/config in Triton's JSON
 * form of ModelConfig.
 */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "server/kserve.h"
#include "server/server_int.h"

const char *const vr__srv_extensions[] = {
    "binary_tensor_data", "classification", "model_configuration",
    "model_repository", "statistics", "schedule_policy", "vario_instances",
    NULL};

void vr__srv_expect(vr_server *s, const char *name, int on) {
  void *old = NULL;
  pthread_mutex_lock(&s->expect_mu);
  if (on) {
    vr_map_put(&s->expected, name, (void *)1, NULL);
  } else {
    vr_map_del(&s->expected, name);
    old = vr_map_del(&s->load_errors, name);
  }
  pthread_mutex_unlock(&s->expect_mu);
  vr_free(old);
}

void vr__srv_load_error(vr_server *s, const char *name, const char *msg) {
  char *copy = msg ? vr_strdup(msg) : NULL;
  void *old = NULL;
  pthread_mutex_lock(&s->expect_mu);
  if (copy && vr_map_put(&s->load_errors, name, copy, &old)) {
    vr_free(copy); /* no memory to say why: the index says "unloaded" */
    copy = NULL;
  }
  if (!copy) old = vr_map_del(&s->load_errors, name);
  pthread_mutex_unlock(&s->expect_mu);
  vr_free(old);
}

int vr__srv_load_error_get(vr_server *s, const char *name, char *buf, size_t cap) {
  pthread_mutex_lock(&s->expect_mu);
  const char *why = vr_map_get(&s->load_errors, name);
  if (why) snprintf(buf, cap, "%s", why);
  pthread_mutex_unlock(&s->expect_mu);
  return why != NULL;
}

int vr__srv_ready(vr_server *s) {
  if (__atomic_load_n(&s->shutting_down, __ATOMIC_SEQ_CST) ||
      !__atomic_load_n(&s->started, __ATOMIC_SEQ_CST))
    return 0;
  int ok = 1;
  pthread_mutex_lock(&s->expect_mu);
  size_t it = 0;
  const char *name;
  void *v;
  while (ok && vr_map_next(&s->expected, &it, &name, &v))
    ok = vr_rt_model_ready(s->rt, name);
  pthread_mutex_unlock(&s->expect_mu);
  return ok;
}

int vr__srv_version(vr_server *s, const char *model) {
  return vr_rt_model_version(s->rt, model);
}

static void dims(vr_sbuf *b, const vr_tensor_info *t) {
  vr_sbuf_puts(b, ",\"dims\":[");
  for (int d = 1; d < t->ndim; d++)
    vr_sbuf_printf(b, d > 1 ? ",%lld" : "%lld", (long long)t->shape[d]);
  vr_sbuf_puts(b, "]");
}

/* labels: the outputs' label_filename (NULL for inputs). */
static void tensors(vr_sbuf *b, const char *key, const vr_tensor_info *t, int n,
                    const char (*labels)[128]) {
  vr_sbuf_printf(b, ",\"%s\":[", key);
  for (int i = 0; i < n; i++) {
    vr_sbuf_puts(b, i ? ",{\"name\":" : "{\"name\":");
    vr_sbuf_json_str(b, t[i].name);
    const char *dt = vr_dtype_kserve(t[i].dtype);
    vr_sbuf_printf(b, ",\"data_type\":\"TYPE_%s\"", !dt ? "INVALID"
                   : !strcmp(dt, "BYTES") ? "STRING" : dt);
    dims(b, &t[i]);
    if (labels) {
      vr_sbuf_puts(b, ",\"label_filename\":");
      vr_sbuf_json_str(b, labels[i]);
    } else {
      vr_sbuf_puts(b, ",\"format\":\"FORMAT_NONE\",\"optional\":false");
    }
    vr_sbuf_puts(b, ",\"is_shape_tensor\":false}");
  }
  vr_sbuf_puts(b, "]");
}

/* Triton's JSON form of ModelConfig for a loaded model. */
void vr__srv_config_json(const vr_model_config *c, vr_sbuf *b) {
  vr_sbuf_puts(b, "{\"name\":");
  vr_sbuf_json_str(b, c->name);
  vr_sbuf_puts(b, ",\"platform\":\"onnxruntime_onnx\",\"backend\":\"onnxruntime\"");
  if (c->n_versions) {
    vr_sbuf_puts(b, ",\"version_policy\":{\"specific\":{\"versions\":[");
    for (int i = 0; i < c->n_versions; i++)
      vr_sbuf_printf(b, i ? ",%d" : "%d", c->versions[i]);
    vr_sbuf_puts(b, "]}}");
  } else {
    vr_sbuf_puts(b, ",\"version_policy\":{\"latest\":{\"num_versions\":1}}");
  }
  vr_sbuf_printf(b, ",\"max_batch_size\":%d", c->max_batch_size);
  tensors(b, "input", c->inputs, c->n_inputs, NULL);
  tensors(b, "output", c->outputs, c->n_outputs, c->label_file);
  vr_sbuf_puts(b, ",\"dynamic_batching\":{\"preferred_batch_size\":[");
  for (int i = 0; i < c->n_preferred_batch; i++)
    vr_sbuf_printf(b, i ? ",%d" : "%d", c->preferred_batch[i]);
  vr_sbuf_printf(b, "],\"max_queue_delay_microseconds\":%lld,"
                 "\"preserve_ordering\":false}",
                 (long long)c->max_queue_delay_us);
  vr_sbuf_puts(b, ",\"instance_group\":[{\"name\":");
  vr_sbuf_json_str(b, c->name);
  vr_sbuf_printf(b, ",\"kind\":\"KIND_CPU\",\"count\":%d}]", c->instances);
  vr_sbuf_puts(b, ",\"default_model_filename\":");
  vr_sbuf_json_str(b, c->model_file[0] ? c->model_file : "model.onnx");
  /* Vario's own facts, where Triton keeps free-form ones. */
  vr_sbuf_printf(b, ",\"parameters\":{\"vario_precision\":{\"string_value\":\"%s\"},"
                 "\"vario_threads\":{\"string_value\":\"%d\"},"
                 "\"vario_autocompleted\":{\"string_value\":\"%s\"}}}",
                 vr_rt_precision_name(c->precision), c->threads,
                 c->autocompleted ? "true" : "false");
}

void vr_server_model_config(vr_server *s, vr_http_req *r, const char *model) {
  vr_model_config c;
  vr_sbuf b;
  vr_sbuf_init(&b);
  if (vr_rt_model_config(s->rt, model, &c)) {
    char msg[256];
    snprintf(msg, sizeof msg, "model '%.128s' is not loaded", model);
    vr_ks_write_error(&b, msg);
    vr_server_count(s, 404);
    vr_server_reply_json(r, 404, &b);
    return;
  }
  vr__srv_config_json(&c, &b);
  vr_server_count(s, 200);
  vr_server_reply_json(r, 200, &b);
}
