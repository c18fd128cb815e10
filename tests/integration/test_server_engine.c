/*
 * vario serve on the committed models (models/fmnist) with the real
 * engine: outputs through HTTP (JSON and binary) equal the engine's own
 * outputs for the same inputs. Skips (passes with a message) when the
 * models or the engine are absent.
 */
#include "vr_test.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>

#include "base/alloc.h"
#include "base/npy.h"
#include "runtime/runtime.h"
#include "server/sbuf.h"
#include "srv_util.h"

static const char *k_models[] = {"fmnist_mlp", "fmnist_cnn_s"};

static int have_models(char *repo, size_t cap) {
  const char *src = getenv("VR_SOURCE_DIR");
  snprintf(repo, cap, "%s/models/fmnist", src ? src : ".");
  char p[1200];
  if (snprintf(p, sizeof p, "%s/fmnist_mlp/model.onnx", repo) >= (int)sizeof p)
    return 0;
  return vr_rt_backend_engine() && access(p, R_OK) == 0;
}

/* The engine's own outputs for `rows` rows of x, at batch = rows. */
static float *engine_ref(const char *repo, const char *name, const float *x,
                         int rows) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/%s", repo, name);
  vr_model_config c;
  vr_errbuf err = {0};
  if (vr_model_config_load(dir, &c, &err)) fail_msg("%s", err.msg);
  vr_model *m;
  if (vr_model_load(c.model_path, &m, &err)) fail_msg("%s", err.msg);
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.max_batch = rows;
  vr_session *s;
  if (vr_session_create(m, &o, &s, &err)) fail_msg("%s", err.msg);
  vr_tensor in = {c.inputs[0].name, VR_DT_F32, 4, {rows, 1, 28, 28},
                  (void *)x, sizeof(float) * 784 * (size_t)rows};
  vr_tensor out[4];
  if (vr_session_run(s, rows, &in, 1, out, 4, &err)) fail_msg("%s", err.msg);
  float *y = vr_malloc(out[0].nbytes);
  memcpy(y, out[0].data, out[0].nbytes);
  vr_session_free(s);
  vr_model_free(m);
  return y;
}

static void check_model(vr_server *srv, const char *repo, const char *name,
                        const float *x, int rows) {
  int port = vr_server_port(srv);
  float *ref = engine_ref(repo, name, x, rows);
  vr_httpc c;
  vr_errbuf err = {0};
  assert_int_equal(vr_httpc_open(&c, "127.0.0.1", port, &err), 0);
  char path[256];
  snprintf(path, sizeof path, "/v2/models/%s/infer", name);
  /* JSON, nested by rows; %.9g round-trips float exactly. */
  vr_sbuf b;
  vr_sbuf_init(&b);
  vr_sbuf_printf(&b, "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\","
                 "\"shape\":[%d,1,28,28],\"data\":[", rows);
  for (int r = 0; r < rows; r++) {
    vr_sbuf_puts(&b, r ? ",[" : "[");
    for (int i = 0; i < 784; i++)
      vr_sbuf_printf(&b, i ? ",%.9g" : "%.9g", x[r * 784 + i]);
    vr_sbuf_puts(&b, "]");
  }
  vr_sbuf_puts(&b, "]}]}");
  vr_httpc_resp resp;
  assert_int_equal(vr_httpc_request(&c, "POST", path, NULL, b.p, b.len, &resp,
                                    &err), 0);
  assert_int_equal(resp.head.status, 200);
  json_t *j = json_loadb(resp.body, resp.body_len, 0, NULL);
  json_t *d = json_object_get(json_array_get(json_object_get(j, "outputs"), 0),
                              "data");
  assert_int_equal(json_array_size(d), (size_t)rows * 10);
  for (int i = 0; i < rows * 10; i++) {
    float v = (float)json_number_value(json_array_get(d, (size_t)i));
    if (v != ref[i]) fail_msg("%s JSON output %d: %.9g != engine %.9g", name,
                              i, v, ref[i]);
  }
  json_decref(j);
  /* Binary in and out. */
  b.len = 0;
  vr_sbuf_printf(&b, "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\","
                 "\"shape\":[%d,1,28,28],\"parameters\":{\"binary_data_size\":"
                 "%d}}],\"parameters\":{\"binary_data_output\":true}}",
                 rows, rows * 784 * 4);
  size_t hl = b.len;
  vr_sbuf_add(&b, x, (size_t)rows * 784 * 4);
  char hh[96];
  snprintf(hh, sizeof hh, "Inference-Header-Content-Length: %zu\r\n", hl);
  assert_int_equal(vr_httpc_request(&c, "POST", path, hh, b.p, b.len, &resp,
                                    &err), 0);
  assert_int_equal(resp.head.status, 200);
  assert_int_equal(resp.body_len - resp.head.ihcl, (size_t)rows * 40);
  assert_memory_equal(resp.body + resp.head.ihcl, ref, (size_t)rows * 40);
  vr_sbuf_free(&b);
  vr_httpc_close(&c);
  vr_free(ref);
}

static void test_engine_outputs(void **st) {
  (void)st;
  char repo[1024];
  if (!have_models(repo, sizeof repo)) {
    print_message("skipped: models/fmnist or the engine not available\n");
    return;
  }
  char npy[1200];
  snprintf(npy, sizeof npy, "%s/../fmnist-data/val_inputs.npy", repo);
  vr_npy x;
  vr_errbuf err = {0};
  if (vr_npy_read(npy, &x, &err)) fail_msg("%s", err.msg);
  vr_server_opts o;
  vr_server_opts_init(&o);
  o.repo = repo;
  o.port = 0;
  o.rt.profile_runs = 1;
  o.rt.profile_max_batch = 8;
  vr_server *srv;
  if (vr_server_create(&o, &srv, &err)) fail_msg("%s", err.msg);
  for (size_t i = 0; i < sizeof k_models / sizeof *k_models; i++) {
    if (vr_server_load(srv, k_models[i], &err)) fail_msg("%s", err.msg);
    check_model(srv, repo, k_models[i], x.data, 1);
    check_model(srv, repo, k_models[i], x.data, 8);
  }
  vr_server_free(srv);
  vr_npy_free(&x);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_engine_outputs)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
