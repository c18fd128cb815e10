/*
 * vario serve over loopback with an injected backend of known behaviour
 * (tests/unit/rt_fake.h: y = 2x + 1, fixed latency): every endpoint, the
 * bad-input matrix, unload with requests in flight, client disconnects,
 * graceful shutdown. The same server code runs the real engine in
 * test_server_engine.c.
 */
#define _GNU_SOURCE
#include "vr_test.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <zlib.h>

#include "../unit/rt_fake.h"
#include "base/alloc.h"
#include "server/frontend.h"
#include "server/fwd.h"
#include "server/http.h"
#include "srv_util.h"

static rt_fake g_fake;
static vr_server *g_srv;
static char g_repo[512];
static int g_port;

static int setup(void **st) {
  (void)st;
  rt_fake_init(&g_fake, 200, 5, 3);
  assert_non_null(srv_tmpdir(g_repo, sizeof g_repo));
  srv_write_model(g_repo, "m", 4, 3, 8, 500);
  srv_write_model(g_repo, "slow", 4, 3, 4, 0);
  /* a directory the load API would refuse by name: never loaded, listed
   * or exported (a tab reached /metrics as \u0009) */
  srv_write_model(g_repo, "tab\there", 4, 3, 4, 0);
  char p[600];
  snprintf(p, sizeof p, "%s/broken", g_repo);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/broken/model.onnx", g_repo);
  srv_write_file(p, "");
  snprintf(p, sizeof p, "%s/broken/config.json", g_repo);
  srv_write_file(p, "{\"name\":\"broken\",\"inputs\":[]}");
  vr_server_opts o;
  vr_server_opts_init(&o);
  o.repo = g_repo;
  o.port = 0;
  o.load_all = 1;
  o.max_body = 1 << 20;
  o.rt.backend = &g_fake.be;
  o.rt.profile_runs = 1;
  o.admin_token = "test-token"; /* post_json sends it */
  vr_errbuf err = {0};
  if (vr_server_create(&o, &g_srv, &err)) fail_msg("%s", err.msg);
  g_port = vr_server_port(g_srv);
  return 0;
}

static int teardown(void **st) {
  (void)st;
  vr_server_free(g_srv);
  srv_rmtree(g_repo);
  return 0;
}

/* One request on a fresh keep-alive client; returns status, copies the
 * body (NUL-terminated) into out. */
static int req(const char *method, const char *path, const char *hdrs,
               const void *body, size_t len, char *out, size_t cap) {
  vr_httpc c;
  vr_errbuf err = {0};
  if (vr_httpc_open(&c, "127.0.0.1", g_port, &err)) fail_msg("%s", err.msg);
  vr_httpc_resp r;
  if (vr_httpc_request(&c, method, path, hdrs, body, len, &r, &err))
    fail_msg("%s %s: %s", method, path, err.msg);
  if (out) {
    size_t n = r.body_len < cap - 1 ? r.body_len : cap - 1;
    memcpy(out, r.body, n);
    out[n] = 0;
  }
  int st = r.head.status;
  vr_httpc_close(&c);
  return st;
}

/* method path with the admin token; the status, and its Allow header in
 * allow ("" when absent). */
static int req_allow(const char *method, const char *path, char *allow, size_t cap) {
  vr_httpc c;
  vr_errbuf err = {0};
  vr_httpc_resp r;
  if (vr_httpc_open(&c, "127.0.0.1", g_port, &err) ||
      vr_httpc_request(&c, method, path, "Authorization: Bearer test-token\r\n", NULL, 0,
                       &r, &err))
    fail_msg("%s %s: %s", method, path, err.msg);
  size_t vl = 0;
  const char *v = vr__http_head_value(r.body - r.head.head_len, r.head.head_len, "Allow", &vl);
  snprintf(allow, cap, "%.*s", v ? (int)vl : 0, v ? v : "");
  int st = r.head.status;
  vr_httpc_close(&c);
  return st;
}

static int post_json(const char *path, const char *json, char *out, size_t cap) {
  return req("POST", path, "Content-Type: application/json\r\n"
             "Authorization: Bearer test-token\r\n", json, strlen(json), out, cap);
}

static const char *k_infer =
    "{\"id\":\"r1\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
    "\"shape\":[2,4],\"data\":[[1,2,3,4],[5,6,7,8]]}]}";

static void test_health_and_metadata(void **st) {
  (void)st;
  char b[4096];
  assert_int_equal(req("GET", "/v2/health/live", NULL, NULL, 0, b, sizeof b), 200);
  /* the repository holds 'broken', which failed to load: as Triton, the
   * server is live but not ready: 400, Triton's answer and KServe v2's
   * "4xx = false" (a 503 read as the server failing) */
  assert_int_equal(req("GET", "/v2/health/ready", NULL, NULL, 0, b, sizeof b), 400);
  assert_int_equal(req("GET", "/v2", NULL, NULL, 0, b, sizeof b), 200);
  assert_non_null(strstr(b, "binary_tensor_data"));
  assert_int_equal(req("GET", "/v2/models/m", NULL, NULL, 0, b, sizeof b), 200);
  assert_non_null(strstr(b, "\"shape\":[-1,4]"));
  assert_int_equal(req("GET", "/v2/models/m/versions/1", NULL, NULL, 0, b, sizeof b), 200);
  assert_int_equal(req("GET", "/v2/models/m/ready", NULL, NULL, 0, b, sizeof b), 200);
  assert_int_equal(req("GET", "/v2/models/m/versions/1/ready", NULL, NULL, 0, b, sizeof b), 200);
  assert_int_equal(req("GET", "/v2/models/nope", NULL, NULL, 0, b, sizeof b), 404);
  assert_non_null(strstr(b, "\"error\""));
  assert_int_equal(req("GET", "/v2/models/m/versions/2", NULL, NULL, 0, b, sizeof b), 404);
  /* a model not ready: 400 with an error body, as Triton; also for a
   * version it does not have (gRPC ModelReady says ready=false there) */
  assert_int_equal(req("GET", "/v2/models/nope/ready", NULL, NULL, 0, b, sizeof b), 400);
  assert_non_null(strstr(b, "\"error\":\"model 'nope' is not ready\""));
  assert_int_equal(req("GET", "/v2/models/m/versions/2/ready", NULL, NULL, 0, b, sizeof b), 400);
  assert_non_null(strstr(b, "\"error\""));
  assert_int_equal(req("GET", "/nothing", NULL, NULL, 0, b, sizeof b), 404);
  assert_int_equal(req("DELETE", "/v2/models/m", NULL, NULL, 0, b, sizeof b), 401);
  assert_int_equal(req("DELETE", "/v2/models/m", "Authorization: Bearer test-token\r\n",
                       NULL, 0, b, sizeof b), 405);
  assert_int_equal(req("GET", "/v2/models/m/infer", NULL, NULL, 0, b, sizeof b), 405);
  /* a route of another method is 405 wherever it is, not 404 */
  const char *tok = "Authorization: Bearer test-token\r\n"; /* past the admin check */
  assert_int_equal(req("POST", "/metrics", tok, NULL, 0, b, sizeof b), 405);
  assert_int_equal(req("POST", "/v2/health/live", tok, NULL, 0, b, sizeof b), 405);
  assert_int_equal(req("POST", "/v2", tok, NULL, 0, b, sizeof b), 405);
  assert_int_equal(req("GET", "/v2/repository/models/m/load", tok, NULL, 0, b, sizeof b), 405);
  assert_int_equal(req("GET", "/v2/repository/models/m/unshadow", tok, NULL, 0, b, sizeof b),
                   405);
  assert_int_equal(req("POST", "/dashboard/app.js", tok, NULL, 0, b, sizeof b), 405);
  assert_int_equal(req("POST", "/v2/dashboard/data", tok, NULL, 0, b, sizeof b), 405);
  assert_int_equal(req("POST", "/v2/health/dead", tok, NULL, 0, b, sizeof b), 404);
  /* a 405 says what the path takes (Allow: RFC 9110 requires it) */
  static const struct { const char *method, *path, *allow; } allow[] = {
      {"POST", "/v2/health/ready", "GET, HEAD"},
      {"DELETE", "/v2/repository/index", "GET, HEAD, POST"},
      {"GET", "/v2/repository/models/m/load", "POST"},
      {"GET", "/v2/models/m/infer", "POST"},
      {"PUT", "/v2/models/m/versions/1/infer", "POST"},
      {"POST", "/v2/models/m/versions/1/ready", "GET, HEAD"},
      {"DELETE", "/v2/models/m", "GET, HEAD"},
      {"PUT", "/v2/models/m/config", "GET, HEAD"},
  };
  for (size_t i = 0; i < sizeof allow / sizeof *allow; i++) {
    char a[64];
    if (req_allow(allow[i].method, allow[i].path, a, sizeof a) != 405 ||
        strcmp(a, allow[i].allow))
      fail_msg("%s %s: Allow '%s', want '%s'", allow[i].method, allow[i].path, a,
               allow[i].allow);
  }
  /* a path that does not exist is 404 whatever the method (a PUT or
   * DELETE outside /v2/models was 405, with no Allow to say what) */
  assert_int_equal(req("PUT", "/v2/models/m/bogus", tok, NULL, 0, b, sizeof b), 404);
  assert_int_equal(req("PUT", "/nothing", tok, NULL, 0, b, sizeof b), 404);
  assert_int_equal(req("DELETE", "/v2/health/dead", tok, NULL, 0, b, sizeof b), 404);
  assert_int_equal(req("PUT", "/v2/bogus/x", tok, NULL, 0, b, sizeof b), 404);
  assert_int_equal(req("POST", "/v2/repository/models/m/reload", tok, NULL, 0, b, sizeof b),
                   404);
  assert_int_equal(req("GET", "/v2/repository/models/m/load/x", tok, NULL, 0, b, sizeof b), 404);
  /* "infer" is a valid model and pipeline name: only a POST to an
   * inference route goes without the token, not any path ending so. */
  assert_int_equal(req("DELETE", "/v2/apps/a/models/infer", NULL, NULL, 0, b, sizeof b), 401);
  assert_int_equal(req("DELETE", "/v2/pipelines/infer", NULL, NULL, 0, b, sizeof b), 401);
  assert_int_equal(req("PUT", "/v2/models/m/infer", NULL, NULL, 0, b, sizeof b), 401);
  assert_int_equal(req("POST", "/v2/repository/models/infer", NULL, NULL, 0, b, sizeof b),
                   401);
  /* the repository index lists server entries and load errors: GET too */
  assert_int_equal(req("GET", "/v2/repository/index", NULL, NULL, 0, b, sizeof b), 401);
  assert_int_equal(req("POST", "/v2/repository/index", NULL, NULL, 0, b, sizeof b), 401);
}

static void test_infer_json(void **st) {
  (void)st;
  char b[4096];
  /* model-less parameters are refused by name here, never ignored */
  const char *ml[] = {"\"latency_ms\":5", "\"min_accuracy\":90", "\"max_cost\":1",
                      "\"model\":\"m\""};
  for (int i = 0; i < 4; i++) {
    char q[512];
    snprintf(q, sizeof q, "{\"parameters\":{%s},%s", ml[i], k_infer + 1);
    assert_int_equal(post_json("/v2/models/m/infer", q, b, sizeof b), 400);
    assert_non_null(strstr(b, "model-less"));
  }
  assert_int_equal(post_json("/v2/models/m/infer", k_infer, b, sizeof b), 200);
  json_t *j = json_loads(b, 0, NULL);
  assert_non_null(j);
  assert_string_equal(json_string_value(json_object_get(j, "id")), "r1");
  json_t *o = json_array_get(json_object_get(j, "outputs"), 0);
  assert_string_equal(json_string_value(json_object_get(o, "name")), "y");
  json_t *d = json_object_get(o, "data");
  assert_int_equal(json_array_size(d), 6);
  double want[6] = {3, 5, 7, 11, 13, 15}; /* 2x+1 of the first 3 of each row */
  for (int i = 0; i < 6; i++)
    assert_true(json_number_value(json_array_get(d, (size_t)i)) == want[i]);
  json_decref(j);
  /* Flat data and an explicit version path. */
  const char *flat = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
                     "\"shape\":[1,4],\"data\":[1,1,1,1]}],\"outputs\":"
                     "[{\"name\":\"y\"}]}";
  assert_int_equal(post_json("/v2/models/m/versions/1/infer", flat, b, sizeof b), 200);
  assert_non_null(strstr(b, "\"data\":[3,3,3]"));
}

static void test_infer_binary(void **st) {
  (void)st;
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  char hdr[512], body[1024], hh[128];
  int n = snprintf(hdr, sizeof hdr,
                   "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":"
                   "[2,4],\"parameters\":{\"binary_data_size\":32}}],"
                   "\"outputs\":[{\"name\":\"y\",\"parameters\":"
                   "{\"binary_data\":true}}]}");
  memcpy(body, hdr, (size_t)n);
  memcpy(body + n, x, sizeof x);
  snprintf(hh, sizeof hh, "Inference-Header-Content-Length: %d\r\n", n);
  vr_httpc c;
  vr_errbuf err = {0};
  assert_int_equal(vr_httpc_open(&c, "127.0.0.1", g_port, &err), 0);
  vr_httpc_resp r;
  assert_int_equal(vr_httpc_request(&c, "POST", "/v2/models/m/infer", hh, body,
                                    (size_t)n + sizeof x, &r, &err), 0);
  assert_int_equal(r.head.status, 200);
  assert_true(r.head.ihcl != (size_t)-1);
  assert_int_equal(r.body_len - r.head.ihcl, 24);
  const float *y = (const float *)(r.body + r.head.ihcl);
  float want[6] = {3, 5, 7, 11, 13, 15};
  assert_memory_equal(y, want, sizeof want);
  assert_non_null(memmem(r.body, r.head.ihcl, "\"binary_data_size\":24", 21));
  /* Triton's raw binary request: Inference-Header-Content-Length: 0 and
   * the one input's bytes alone, a batch of 1; every output binary (it
   * was read as an empty JSON header: 400 "malformed JSON") */
  const char *raw = "Inference-Header-Content-Length: 0\r\n";
  assert_int_equal(vr_httpc_request(&c, "POST", "/v2/models/m/infer", raw, x, 16, &r, &err), 0);
  assert_int_equal(r.head.status, 200);
  assert_true(r.head.ihcl != (size_t)-1);
  assert_int_equal(r.body_len - r.head.ihcl, 12);
  assert_memory_equal(r.body + r.head.ihcl, want, 12);
  assert_non_null(memmem(r.body, r.head.ihcl, "\"shape\":[1,3]", 13));
  assert_int_equal(vr_httpc_request(&c, "POST", "/v2/models/m/infer", raw, x, 12, &r, &err), 0);
  assert_int_equal(r.head.status, 400);
  assert_non_null(memmem(r.body, r.body_len, "takes 4 FP32 elements (16 bytes); the body has 12", 49));
  vr_httpc_close(&c);
}

/* The bad-input matrix: each gets the right status and a JSON error. */
static void test_bad_inputs(void **st) {
  (void)st;
  struct { const char *path, *body; int status; const char *msg; } cases[] = {
      {"/v2/models/m/infer", "{\"inputs\":[", 400, "malformed JSON"},
      {"/v2/models/m/infer", "[1,2]", 400, "JSON object"},
      /* not JSON, or cut short: the syntax error, not a member's */
      {"/v2/models/m/infer", "", 400, "malformed JSON at byte 0: the text ends before a value"},
      {"/v2/models/m/infer", "hello", 400, "malformed JSON at byte 0: expected a value"},
      {"/v2/models/m/infer", "{\"inputs\":[{\"name\":", 400, "malformed JSON at byte 19"},
      {"/v2/models/m/infer", "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":",
       400, "malformed JSON"},
      {"/v2/models/m/infer", "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
       "\"shape\":[1,5],\"data\":[1,2,3,4,5]}]}", 400, "dim 1"},
      {"/v2/models/m/infer", "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT32\","
       "\"shape\":[1,4],\"data\":[1,2,3,4]}]}", 400, "datatype"},
      /* KServe's string tensors are a known datatype, refused as such */
      {"/v2/models/m/infer", "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"BYTES\","
       "\"shape\":[1],\"data\":[\"a\"]}]}", 400, "BYTES (strings) is not supported"},
      {"/v2/models/m/infer", "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
       "\"shape\":[1,4],\"data\":[1,2,3]}]}", 400, "3 data elements"},
      {"/v2/models/m/infer", "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
       "\"shape\":[1,4],\"data\":[1,2,3,\"a\"]}]}", 400, "not a number"},
      {"/v2/models/m/infer", "{\"inputs\":[{\"name\":\"z\",\"datatype\":\"FP32\","
       "\"shape\":[1,4],\"data\":[1,2,3,4]}]}", 400, "missing input 'x'"},
      {"/v2/models/m/infer", "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
       "\"shape\":[9,4],\"data\":[1,2,3,4,1,2,3,4,1,2,3,4,1,2,3,4,1,2,3,4,1,2,3,4,"
       "1,2,3,4,1,2,3,4,1,2,3,4]}]}", 400, "max batch"},
      {"/v2/models/m/infer", "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
       "\"shape\":[1,4],\"data\":[1,2,3,4]}],\"outputs\":[{\"name\":\"q\"}]}",
       400, "no output 'q'"},
      {"/v2/models/m/infer", "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
       "\"shape\":[1,4],\"data\":[1,2,3,4]}],\"parameters\":{\"timeout\":-1}}",
       400, "timeout"},
      {"/v2/models/nope/infer", k_infer, 404, "not loaded"},
      {"/v2/models/m/versions/7/infer", k_infer, 404, "version"},
      {"/v2/models/m/infer", "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
       "\"shape\":[1,4],\"parameters\":{\"binary_data_size\":16}}]}", 400,
       "Inference-Header-Content-Length"},
  };
  char b[4096];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int s = post_json(cases[i].path, cases[i].body, b, sizeof b);
    if (s != cases[i].status || !strstr(b, "\"error\"") || !strstr(b, cases[i].msg))
      fail_msg("case %zu: status %d body %s", i, s, b);
  }
}

static int post_binary(const char *json, size_t ihcl, const void *bin,
                       size_t bin_len, char *out, size_t cap) {
  char body[4096], hh[128];
  size_t n = strlen(json);
  memcpy(body, json, n);
  memcpy(body + n, bin, bin_len);
  snprintf(hh, sizeof hh, "Inference-Header-Content-Length: %zu\r\n", ihcl);
  return req("POST", "/v2/models/m/infer", hh, body, n + bin_len, out, cap);
}

static void test_lying_binary(void **st) {
  (void)st;
  float x[4] = {1, 2, 3, 4};
  const char *j = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":"
                  "[1,4],\"parameters\":{\"binary_data_size\":16}}]}";
  char b[2048];
  size_t n = strlen(j);
  assert_int_equal(post_binary(j, n, x, 16, b, sizeof b), 200);
  /* header length past the body */
  assert_int_equal(post_binary(j, n + 100, x, 16, b, sizeof b), 400);
  assert_non_null(strstr(b, "exceeds the body"));
  /* header length cutting the JSON: said so, wherever the cut falls */
  assert_int_equal(post_binary(j, n - 5, x, 16, b, sizeof b), 400);
  assert_non_null(strstr(b, "Inference-Header-Content-Length): malformed JSON"));
  assert_int_equal(post_binary(j, 19, x, 16, b, sizeof b), 400);
  assert_non_null(strstr(b, "(19 bytes by Inference-Header-Content-Length): malformed JSON"));
  /* fewer bytes than declared */
  assert_int_equal(post_binary(j, n, x, 12, b, sizeof b), 400);
  /* more bytes than declared */
  float x5[5] = {0};
  assert_int_equal(post_binary(j, n, x5, 20, b, sizeof b), 400);
  /* declared size disagrees with the shape */
  const char *j2 = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":"
                   "[1,4],\"parameters\":{\"binary_data_size\":12}}]}";
  assert_int_equal(post_binary(j2, strlen(j2), x, 12, b, sizeof b), 400);
  /* not a number */
  assert_int_equal(req("POST", "/v2/models/m/infer",
                       "Inference-Header-Content-Length: abc\r\n", j, n, b,
                       sizeof b), 400);
}

static int connect_raw(void);
static int read_status(int fd);

/* in[0..n) compressed as gzip (gzip != 0) or zlib ("deflate"); caller frees. */
static unsigned char *squeeze(const void *in, size_t n, int gzip, size_t *out_n) {
  z_stream z;
  memset(&z, 0, sizeof z);
  assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, gzip ? 31 : 15, 8, Z_DEFAULT_STRATEGY),
                   Z_OK);
  size_t cap = deflateBound(&z, (uLong)n);
  unsigned char *out = vr_malloc(cap);
  z.next_in = (Bytef *)in;
  z.avail_in = (uInt)n;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
  *out_n = cap - z.avail_out;
  deflateEnd(&z);
  return out;
}

/* Triton's Content-Encoding: a gzip or deflate body is inflated before
 * parsing; a bomb past the body limit is 413, garbage 400, another coding
 * 415. */
/* vario_http_responses_total{code="4xx"} now. */
static unsigned long long count_4xx(void) {
  static char m[1 << 16];
  assert_int_equal(req("GET", "/metrics", NULL, NULL, 0, m, sizeof m), 200);
  const char *p = strstr(m, "vario_http_responses_total{code=\"4xx\"} ");
  assert_non_null(p);
  return strtoull(p + strlen("vario_http_responses_total{code=\"4xx\"} "), NULL, 10);
}

static void test_content_encoding(void **st) {
  (void)st;
  char b[4096];
  size_t n;
  /* the HTTP layer's own answers (here 415) count in the metrics too */
  unsigned long long before = count_4xx();
  assert_int_equal(req("POST", "/v2/models/m/infer", "Content-Encoding: zstd\r\n", "{}", 2, b,
                       sizeof b), 415);
  assert_int_equal(count_4xx(), before + 1);
  for (int gz = 0; gz < 2; gz++) {
    unsigned char *z = squeeze(k_infer, strlen(k_infer), gz, &n);
    char hdr[200];
    snprintf(hdr, sizeof hdr, "Content-Type: application/json\r\nContent-Encoding: %s\r\n",
             gz ? "gzip" : "deflate");
    assert_int_equal(req("POST", "/v2/models/m/infer", hdr, z, n, b, sizeof b), 200);
    assert_non_null(strstr(b, "\"outputs\""));
    if (gz) { /* cut short: not a whole stream */
      assert_int_equal(req("POST", "/v2/models/m/infer", hdr, z, n / 2, b, sizeof b), 400);
      assert_non_null(strstr(b, "compressed"));
    }
    vr_free(z);
  }
  const char *gzh = "Content-Encoding: gzip\r\n";
  assert_int_equal(req("POST", "/v2/models/m/infer", gzh, "not gzip", 8, b, sizeof b), 400);
  assert_int_equal(req("POST", "/v2/models/m/infer", "Content-Encoding: br\r\n", k_infer,
                       strlen(k_infer), b, sizeof b), 415);
  /* 4 MiB of spaces squeeze to a few KiB; the limit here is 1 MiB */
  size_t big = 4 << 20;
  char *spaces = vr_malloc(big);
  memset(spaces, ' ', big);
  unsigned char *z = squeeze(spaces, big, 1, &n);
  vr_free(spaces);
  assert_true(n < 64 * 1024);
  assert_int_equal(req("POST", "/v2/models/m/infer", gzh, z, n, b, sizeof b), 413);
  vr_free(z);
}

static void test_oversized_body(void **st) {
  (void)st;
  /* Declared too large: refused from the headers, before any body. */
  int fd = connect_raw();
  const char *h = "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                  "Content-Length: 2000000\r\n\r\n";
  assert_true(send(fd, h, strlen(h), MSG_NOSIGNAL) == (ssize_t)strlen(h));
  assert_int_equal(read_status(fd), 413);
  close(fd);
  /* Chunked, no length: refused once the limit is crossed. */
  fd = connect_raw();
  const char *hc = "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n";
  assert_true(send(fd, hc, strlen(hc), MSG_NOSIGNAL) > 0);
  size_t n = 256 * 1024;
  char *chunk = vr_malloc(n + 32);
  int k = snprintf(chunk, 32, "%zx\r\n", n);
  memset(chunk + k, ' ', n);
  memcpy(chunk + k + n, "\r\n", 2);
  for (int i = 0; i < 5; i++) send(fd, chunk, (size_t)k + n + 2, MSG_NOSIGNAL);
  send(fd, "0\r\n\r\n", 5, MSG_NOSIGNAL);
  vr_free(chunk);
  assert_int_equal(read_status(fd), 413);
  close(fd);
  char b[512];
  assert_int_equal(req("GET", "/v2/health/live", NULL, NULL, 0, b, sizeof b), 200);
}

static void test_deadline_504(void **st) {
  (void)st;
  char b[2048];
  const char *j = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
                  "\"shape\":[1,4],\"data\":[1,2,3,4]}],\"parameters\":"
                  "{\"timeout\":10,\"priority\":1}}";
  assert_int_equal(post_json("/v2/models/m/infer", j, b, sizeof b), 504);
  assert_non_null(strstr(b, "deadline"));
  assert_int_equal(req("GET", "/metrics", NULL, NULL, 0, b, sizeof b), 200);
}

/* A front end's time on a query counts toward its deadline: it sends
 * Vario-Upstream-Us, and the worker counts the deadline from the query's
 * arrival at the front end (it counted from its own headers-in, so a
 * query that waited at the front end could be served after its deadline). */
static void test_upstream_wait(void **st) {
  (void)st;
  char b[2048];
  const char *j = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
                  "\"shape\":[1,4],\"data\":[1,2,3,4]}],\"parameters\":"
                  "{\"timeout\":300000}}";
  static const struct {
    const char *value;
    int status;
  } cases[] = {{"400000", 504}, /* 400 ms upstream of a 300-ms timeout */
               {"1000", 200},   {"abc", 200}, {"-5", 200}, {"99999999999", 200}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char h[256];
    snprintf(h, sizeof h, "Content-Type: application/json\r\nVario-Upstream-Us: %s\r\n",
             cases[i].value);
    int st_ = req("POST", "/v2/models/m/infer", h, j, strlen(j), b, sizeof b);
    if (st_ != cases[i].status) fail_msg("upstream %s: %d %s", cases[i].value, st_, b);
    if (cases[i].status == 504) assert_non_null(strstr(b, "deadline"));
  }
}

static void test_stats_metrics_repo(void **st) {
  (void)st;
  char *b = vr_malloc(1 << 16);
  assert_int_equal(post_json("/v2/models/m/infer", k_infer, b, 1 << 16), 200);
  assert_int_equal(req("GET", "/v2/models/m/stats", NULL, NULL, 0, b, 1 << 16), 200);
  assert_non_null(strstr(b, "\"model_stats\""));
  assert_non_null(strstr(b, "\"inference_count\""));
  assert_int_equal(req("GET", "/v2/models/stats", NULL, NULL, 0, b, 1 << 16), 200);
  assert_int_equal(req("GET", "/v2/models/m/instances", NULL, NULL, 0, b, 1 << 16), 200);
  assert_non_null(strstr(b, "\"profile_us\""));
  assert_int_equal(req("GET", "/v2/models/nope/instances", NULL, NULL, 0, b, 1 << 16), 404);
  assert_non_null(strstr(b, "model 'nope' is not loaded"));
  assert_int_equal(req("GET", "/metrics", NULL, NULL, 0, b, 1 << 16), 200);
  const char *names[] = {"vario_requests_total{model=\"m\"",
                         "vario_request_duration_seconds_bucket",
                         "vario_queue_duration_seconds_count",
                         "vario_compute_duration_seconds_sum",
                         "vario_queue_depth{", "vario_instances{",
                         "vario_slo_violations_total{",
                         "outcome=\"dropped\"} ",
                         "vario_server_overhead_seconds{quantile=\"0.5\"}"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strstr(b, names[i])) fail_msg("metrics lack %s", names[i]);
  assert_null(strstr(b, "tab"));
  assert_int_equal(post_json("/v2/repository/index", "", b, 1 << 16), 200);
  assert_non_null(strstr(b, "{\"name\":\"m\",\"version\":\"1\",\"state\":\"READY\""));
  assert_non_null(strstr(b, "\"broken\",\"version\":\"1\",\"state\":\"UNAVAILABLE\""));
  assert_null(strstr(b, "tab"));
  assert_non_null(strstr(b, "inputs"));
  /* Triton's {"ready": true} lists only the models ready for inference */
  assert_int_equal(post_json("/v2/repository/index", "{\"ready\":true}", b, 1 << 16), 200);
  assert_non_null(strstr(b, "{\"name\":\"m\",\"version\":\"1\",\"state\":\"READY\""));
  assert_null(strstr(b, "UNAVAILABLE"));
  assert_int_equal(post_json("/v2/repository/index", "{\"ready\":false}", b, 1 << 16), 200);
  assert_non_null(strstr(b, "\"broken\",\"version\":\"1\",\"state\":\"UNAVAILABLE\""));
  assert_int_equal(post_json("/v2/repository/index", "{\"ready\":1}", b, 1 << 16), 400);
  assert_non_null(strstr(b, "must be a boolean"));
  vr_free(b);
}

/* Dashboard files: the page without its charting library is unavailable
 * (503, not a page that never loads); a directory is no file (404, not
 * 500); types by suffix. */
static void test_dashboard_files(void **st) {
  (void)st;
  char web[600], p[700], b[1024];
  snprintf(web, sizeof web, "%s/web", g_repo);
  mkdir(web, 0755);
  snprintf(p, sizeof p, "%s/dashboard.html", web);
  srv_write_file(p, "<html></html>");
  snprintf(p, sizeof p, "%s/dashboard.js", web);
  srv_write_file(p, "1;");
  snprintf(p, sizeof p, "%s/npm", web);
  mkdir(p, 0755);
  setenv("VARIO_WEB_ROOT", web, 1);
  assert_int_equal(req("GET", "/dashboard", NULL, NULL, 0, b, sizeof b), 503);
  assert_non_null(strstr(b, "Chart.js"));
  assert_int_equal(req("GET", "/dashboard/dashboard.js", NULL, NULL, 0, b, sizeof b), 200);
  assert_int_equal(req("GET", "/dashboard/npm", NULL, NULL, 0, b, sizeof b), 404);
  snprintf(p, sizeof p, "%s/chart.umd.js", web);
  srv_write_file(p, "2;");
  assert_int_equal(req("GET", "/dashboard", NULL, NULL, 0, b, sizeof b), 200);
  assert_string_equal(b, "<html></html>");
  unsetenv("VARIO_WEB_ROOT");
}

/* A response head announcing more than the clients buffer is refused
 * (a peer could otherwise grow their buffers until memory ran out). */
static void test_http_head_limits(void **st) {
  (void)st;
  /* a path longer than the router's buffer is not cut to a shorter one:
   * "/v2/health/live" + 1100 slashes + "x" was routed as /v2/health/live */
  char url[1200], b[512];
  int k = snprintf(url, sizeof url, "/v2/health/live");
  memset(url + k, '/', 1100);
  snprintf(url + k + 1100, sizeof url - (size_t)k - 1100, "x");
  assert_int_equal(req("GET", url, NULL, NULL, 0, b, sizeof b), 404);
  vr_http_head h;
  const char *ok = "HTTP/1.1 200 OK\r\nContent-Length: 4294967296\r\n\r\n";
  const char *big = "HTTP/1.1 200 OK\r\nContent-Length: 4294967297\r\n\r\n";
  assert_int_equal(vr_http_parse_head(ok, strlen(ok), &h), 1);
  assert_int_equal(vr_http_parse_head(big, strlen(big), &h), VR_EFORMAT);
}

static void test_load_unload(void **st) {
  (void)st;
  char b[2048];
  assert_int_equal(post_json("/v2/repository/models/m/unload", "", b, sizeof b), 200);
  assert_int_equal(post_json("/v2/models/m/infer", k_infer, b, sizeof b), 404);
  /* unloaded already, or never known: nothing to unload, 200 as Triton
   * (a client unloading every model of the index must not fail) */
  assert_int_equal(post_json("/v2/repository/models/m/unload", "", b, sizeof b), 200);
  assert_int_equal(post_json("/v2/repository/models/never/unload", "", b, sizeof b), 200);
  assert_int_equal(post_json("/v2/repository/models/m/load", "", b, sizeof b), 200);
  assert_int_equal(post_json("/v2/models/m/infer", k_infer, b, sizeof b), 200);
  /* Triton: loading a loaded model reloads it (no 409); it keeps serving */
  assert_int_equal(post_json("/v2/repository/models/m/load", "", b, sizeof b), 200);
  assert_int_equal(post_json("/v2/models/m/infer", k_infer, b, sizeof b), 200);
  assert_int_equal(post_json("/v2/repository/models/broken/load", "", b, sizeof b), 400);
  assert_non_null(strstr(b, "inputs"));
  assert_int_equal(post_json("/v2/repository/models/absent/load", "", b, sizeof b), 404);
  assert_non_null(strstr(b, "absent: no such model directory"));
  assert_int_equal(post_json("/v2/repository/models/a%20b/load", "", b, sizeof b), 400);
  /* readiness: 'broken' is still wanted; unloading it says it is not */
  assert_int_equal(req("GET", "/v2/health/ready", NULL, NULL, 0, b, sizeof b), 400);
  post_json("/v2/repository/models/broken/unload", "", b, sizeof b);
  assert_int_equal(req("GET", "/v2/health/ready", NULL, NULL, 0, b, sizeof b), 200);
}

/* A model whose config reads fine but which the backend refuses (here an
 * INT32 input): the index gives that reason, not "unloaded", until it is
 * unloaded. */
static void test_index_load_error(void **st) {
  (void)st;
  char p[600], b[1 << 14];
  snprintf(p, sizeof p, "%s/int_in", g_repo);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/int_in/model.onnx", g_repo);
  srv_write_file(p, "");
  snprintf(p, sizeof p, "%s/int_in/config.json", g_repo);
  srv_write_file(p, "{\"name\":\"int_in\",\"inputs\":[{\"name\":\"x\",\"datatype\":"
                    "\"INT32\",\"shape\":[-1,4]}],\"outputs\":[{\"name\":\"y\","
                    "\"datatype\":\"FP32\",\"shape\":[-1,3]}],\"max_batch_size\":4}");
  assert_true(post_json("/v2/repository/models/int_in/load", "", b, sizeof b) >= 400);
  assert_int_equal(post_json("/v2/repository/index", "", b, sizeof b), 200);
  const char *e = strstr(b, "\"int_in\"");
  assert_non_null(e);
  assert_non_null(strstr(e, "\"state\":\"UNAVAILABLE\",\"reason\":\"fake backend: FP32 only"));
  /* unloaded on purpose: that is the reason now */
  post_json("/v2/repository/models/int_in/unload", "", b, sizeof b);
  assert_int_equal(post_json("/v2/repository/index", "", b, sizeof b), 200);
  assert_non_null(strstr(b, "\"int_in\",\"version\":\"1\",\"state\":\"UNAVAILABLE\","
                            "\"reason\":\"unloaded\""));
  snprintf(p, sizeof p, "%s/int_in", g_repo);
  srv_rmtree(p);
}

/* "instances": 0 in a repository config is refused by name, not loaded
 * as a model that never serves (and then taken for the control plane's). */
static void test_load_zero_instances(void **st) {
  (void)st;
  char p[600], b[2048];
  srv_write_model(g_repo, "zero", 4, 3, 4, 0);
  snprintf(p, sizeof p, "%s/zero/config.json", g_repo);
  srv_write_file(p, "{\"name\":\"zero\",\"inputs\":[{\"name\":\"x\",\"datatype\":"
                    "\"FP32\",\"shape\":[-1,4]}],\"outputs\":[{\"name\":\"y\","
                    "\"datatype\":\"FP32\",\"shape\":[-1,3]}],\"max_batch_size\":4,"
                    "\"instances\":0}");
  for (int i = 0; i < 2; i++) { /* the second: not "managed by the control plane" */
    assert_int_equal(post_json("/v2/repository/models/zero/load", "", b, sizeof b), 400);
    assert_non_null(strstr(b, "instances"));
  }
  post_json("/v2/repository/models/zero/unload", "", b, sizeof b);
  snprintf(p, sizeof p, "%s/zero", g_repo);
  srv_rmtree(p);
}

static int connect_raw(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)g_port);
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  return fd;
}

/* Raw socket: send an infer request without reading the answer. */
static int send_raw(const char *path, const char *json, int partial) {
  int fd = connect_raw();
  char buf[4096];
  size_t n = strlen(json);
  int h = snprintf(buf, sizeof buf, "POST %s HTTP/1.1\r\nHost: x\r\n"
                   "Content-Length: %zu\r\n\r\n%s", path, n + (partial ? 100 : 0),
                   json);
  assert_true(send(fd, buf, (size_t)h, MSG_NOSIGNAL) == h);
  return fd;
}

static int read_status(int fd) {
  char buf[4096];
  size_t len = 0;
  vr_http_head h;
  while (len < sizeof buf) {
    ssize_t n = recv(fd, buf + len, sizeof buf - len, 0);
    if (n <= 0) return -1;
    len += (size_t)n;
    if (vr_http_parse_head(buf, len, &h) == 1) return h.status;
  }
  return -1;
}

static void test_disconnects(void **st) {
  (void)st;
  /* Mid-body, and right after a full request (answer never read). */
  for (int i = 0; i < 20; i++) close(send_raw("/v2/models/slow/infer", k_infer, i & 1));
  char b[512];
  assert_int_equal(req("GET", "/v2/health/live", NULL, NULL, 0, b, sizeof b), 200);
  assert_int_equal(post_json("/v2/models/slow/infer", k_infer, b, sizeof b), 200);
}

static void test_unload_in_flight(void **st) {
  (void)st;
  g_fake.base_us = 3000; /* slow enough that requests queue */
  enum { N = 12 };
  int fd[N];
  for (int i = 0; i < N; i++) fd[i] = send_raw("/v2/models/slow/infer", k_infer, 0);
  /* Unload once some are in the runtime (queued or running). */
  for (int k = 0; k < 2000; k++) {
    vr_rt_instance_stats is[2];
    int n = vr_rt_instances(vr_server_runtime(g_srv), "slow", is, 2);
    if (n == 1 && is[0].queue_rows + is[0].busy_rows > 0) break;
    usleep(500);
  }
  char b[512];
  assert_int_equal(post_json("/v2/repository/models/slow/unload", "", b, sizeof b), 200);
  int served = 0;
  for (int i = 0; i < N; i++) {
    int s = read_status(fd[i]);
    served += s == 200;
    /* served before the unload finished, or refused as not loaded if it
     * arrived after: never left hanging */
    if (s != 200 && s != 404) fail_msg("request %d: status %d", i, s);
    close(fd[i]);
  }
  assert_true(served >= 1); /* the queue was drained, not dropped */
  g_fake.base_us = 200;
  assert_int_equal(post_json("/v2/repository/models/slow/load", "", b, sizeof b), 200);
}

static void *shutdown_main(void *arg) {
  vr_server_shutdown(arg);
  return NULL;
}

/* SIGTERM path of `vario serve`: stop accepting, answer every accepted
 * request, then stop. Runs its own server so the shared one stays up. */
static void test_graceful_shutdown(void **st) {
  (void)st;
  rt_fake f;
  rt_fake_init(&f, 2000, 0, 3);
  vr_server_opts o;
  vr_server_opts_init(&o);
  o.repo = g_repo;
  o.load_all = 1;
  o.rt.backend = &f.be;
  o.rt.profile_runs = 1;
  vr_server *s;
  vr_errbuf err = {0};
  assert_int_equal(vr_server_create(&o, &s, &err), 0);
  int saved = g_port;
  g_port = vr_server_port(s);
  enum { N = 10 };
  int fd[N];
  for (int i = 0; i < N; i++) fd[i] = send_raw("/v2/models/slow/infer", k_infer, 0);
  /* Wait until all are accepted (in the runtime): requests still unread
   * when shutdown starts would rightly get 503. 10 x 2 rows, 2 ms per
   * batch of 4 rows. */
  vr_runtime *rt = vr_server_runtime(s);
  for (int k = 0; k < 2000; k++) {
    vr_rt_instance_stats is[4];
    int n = vr_rt_instances(rt, "slow", is, 4);
    if (n == 1 && is[0].queue_rows + is[0].busy_rows + (int)is[0].served >= 2 * N)
      break;
    usleep(1000);
  }
  pthread_t t;
  pthread_create(&t, NULL, shutdown_main, s);
  for (int i = 0; i < N; i++) {
    assert_int_equal(read_status(fd[i]), 200);
    close(fd[i]);
  }
  pthread_join(t, NULL);
  /* No longer accepting. */
  int nfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)g_port);
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  assert_true(connect(nfd, (struct sockaddr *)&sa, sizeof sa) != 0);
  close(nfd);
  vr_server_free(s);
  g_port = saved;
}

/* While it drains (vr_server_shutdown), a server still answers probes on
 * the connections it has: live 200, ready 400 (not ready, as Triton while
 * it exits and KServe v2's 4xx = false); any other request 503. The
 * probes were 503 "server is shutting down" there too, though the docs
 * and bdcd68b say not ready is 400 while draining. */
static void test_probes_while_draining(void **st) {
  (void)st;
  rt_fake f;
  rt_fake_init(&f, 0, 0, 3);
  vr_server_opts o;
  vr_server_opts_init(&o);
  o.rt.backend = &f.be;
  vr_server *s;
  vr_errbuf err = {0};
  assert_int_equal(vr_server_create(&o, &s, &err), 0);
  int saved = g_port;
  g_port = vr_server_port(s);
  const char *live = "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n";
  const char *ready = "GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n";
  const char *meta = "GET /v2 HTTP/1.1\r\nHost: x\r\n\r\n";
  int fd[3];
  for (int i = 0; i < 3; i++) { /* open and in use before the drain */
    fd[i] = connect_raw();
    send(fd[i], live, strlen(live), MSG_NOSIGNAL);
    assert_int_equal(read_status(fd[i]), 200);
  }
  vr_server_shutdown(s);
  const char *after[3] = {ready, live, meta};
  int want[3] = {400, 200, 503}, got[3];
  for (int i = 0; i < 3; i++) {
    send(fd[i], after[i], strlen(after[i]), MSG_NOSIGNAL);
    got[i] = read_status(fd[i]);
    close(fd[i]);
  }
  vr_server_free(s);
  g_port = saved; /* before any failure: the next tests use the shared server */
  for (int i = 0; i < 3; i++)
    if (got[i] != want[i])
      fail_msg("draining: %.24s answered %d, want %d", after[i], got[i], want[i]);
}

/* How many of fds[0..n) the server has closed (EOF: readable with no
 * request sent), without reading them. */
static int closed_by_peer(const int *fds, int n) {
  int closed = 0;
  for (int i = 0; i < n; i++) {
    struct pollfd p = {fds[i], POLLIN, 0};
    closed += poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP | POLLERR));
  }
  return closed;
}

/* --max-conns: past the limit the server closes the oldest idle
 * connections to make room (on_accept in http.c); the ones it keeps all
 * work. The test waits until the server has accepted all five before it
 * sends anything: sent earlier, a request could be answered before the
 * accept that closes its connection (CI: 4 answered, not 3). */
static void test_connection_limit(void **st) {
  (void)st;
  rt_fake f;
  rt_fake_init(&f, 0, 0, 3);
  vr_server_opts o;
  vr_server_opts_init(&o);
  o.max_conns = 3;
  o.rt.backend = &f.be;
  vr_server *s;
  vr_errbuf err = {0};
  assert_int_equal(vr_server_create(&o, &s, &err), 0);
  int saved = g_port;
  g_port = vr_server_port(s);
  int fd[5];
  for (int i = 0; i < 5; i++) fd[i] = connect_raw();
  for (int t = 0; t < 1000 && closed_by_peer(fd, 5) < 2; t++) usleep(10000);
  assert_int_equal(closed_by_peer(fd, 5), 2);
  assert_int_equal(closed_by_peer(fd, 2), 2); /* the oldest two */
  const char *get = "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n";
  int ok = 0, refused = 0;
  for (int i = 0; i < 5; i++) {
    send(fd[i], get, strlen(get), MSG_NOSIGNAL);
    int st = read_status(fd[i]);
    ok += st == 200;
    refused += st < 0;
  }
  assert_int_equal(ok, 3);
  assert_int_equal(refused, 2);
  for (int i = 0; i < 5; i++) close(fd[i]);
  vr_server_free(s);
  g_port = saved;
}

/* The routers' path split (vr_http_path_segments): query dropped, empty
 * segments skipped, too many segments refused, a long URL cut to buf. */
static void test_path_segments(void **st) {
  (void)st;
  char buf[64], *seg[4];
  assert_int_equal(vr_http_path_segments("/v2/models//m/infer?x=/a/b", buf, sizeof buf, seg, 4),
                   4);
  assert_string_equal(seg[0], "v2");
  assert_string_equal(seg[2], "m");
  assert_string_equal(seg[3], "infer");
  assert_int_equal(vr_http_path_segments("/", buf, sizeof buf, seg, 4), 0);
  assert_int_equal(vr_http_path_segments("/a/b/c/d/e", buf, sizeof buf, seg, 4), -1);
  /* a path that does not fit is refused, not cut ("/abcd" would have
   * named another path) */
  assert_int_equal(vr_http_path_segments("/abcdef/gh", buf, 6, seg, 4), -1);
  assert_int_equal(vr_http_path_segments("/abcd?long=query", buf, 6, seg, 4), 1);
  assert_string_equal(seg[0], "abcd");
}

/* ---- the front end's forwarder (server/fwd.h) against fake workers ----- */

/* A fake worker on loopback: it answers each request (keep-alive) with its
 * name as the body after delay_ms, or, with close_ms > 0, closes the
 * connection that long after a request without answering (a worker that
 * dies mid-request). Static: its connection threads may outlive a test. */
typedef struct fake_worker {
  int lfd, port;
  const char *name;
  int delay_ms, close_ms;
  int max_conns, open; /* > 0: more connections are closed at accept */
  int requests;        /* requests read whole (atomic) */
  long long upstream_us; /* the last request's Vario-Upstream-Us, or -1 */
  pthread_t th;
} fake_worker;

typedef struct {
  fake_worker *w;
  int fd;
} fake_conn_arg;

static void *fake_conn(void *arg) {
  fake_conn_arg a = *(fake_conn_arg *)arg;
  free(arg);
  char buf[8192];
  size_t len = 0;
  for (;;) {
    char *end;
    while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
      ssize_t r = len < sizeof buf ? recv(a.fd, buf + len, sizeof buf - len, 0) : -1;
      if (r <= 0) goto out;
      len += (size_t)r;
    }
    size_t head = (size_t)(end + 4 - buf);
    const char *cl = strcasestr(buf, "Content-Length:");
    size_t n = cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0;
    while (len < head + n) {
      ssize_t r = len < sizeof buf ? recv(a.fd, buf + len, sizeof buf - len, 0) : -1;
      if (r <= 0) goto out;
      len += (size_t)r;
    }
    const char *up = memmem(buf, head, "Vario-Upstream-Us:", 18);
    __atomic_store_n(&a.w->upstream_us, up ? strtoll(up + 18, NULL, 10) : -1, __ATOMIC_SEQ_CST);
    memmove(buf, buf + head + n, len - head - n);
    len -= head + n;
    __atomic_fetch_add(&a.w->requests, 1, __ATOMIC_SEQ_CST);
    if (a.w->close_ms) {
      usleep((useconds_t)a.w->close_ms * 1000);
      goto out;
    }
    usleep((useconds_t)a.w->delay_ms * 1000);
    char resp[256];
    int m = snprintf(resp, sizeof resp, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(a.w->name), a.w->name);
    if (send(a.fd, resp, (size_t)m, MSG_NOSIGNAL) != m) goto out;
  }
out:
  close(a.fd);
  __atomic_fetch_sub(&a.w->open, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

static void *fake_accept(void *arg) {
  fake_worker *w = arg;
  for (;;) {
    int fd = accept(w->lfd, NULL, NULL);
    if (fd < 0) return NULL; /* fake_stop */
    /* as vario serve's per-client cap (--max-conns-per-client) does */
    if (w->max_conns && __atomic_load_n(&w->open, __ATOMIC_SEQ_CST) >= w->max_conns) {
      close(fd);
      continue;
    }
    __atomic_fetch_add(&w->open, 1, __ATOMIC_SEQ_CST);
    fake_conn_arg *a = malloc(sizeof *a);
    pthread_t t;
    if (!a) {
      close(fd);
      __atomic_fetch_sub(&w->open, 1, __ATOMIC_SEQ_CST);
      continue;
    }
    *a = (fake_conn_arg){w, fd};
    if (pthread_create(&t, NULL, fake_conn, a)) {
      close(fd);
      __atomic_fetch_sub(&w->open, 1, __ATOMIC_SEQ_CST);
      free(a);
      continue;
    }
    pthread_detach(t);
  }
}

static void fake_start(fake_worker *w, const char *name, int delay_ms, int close_ms) {
  *w = (fake_worker){.name = name, .delay_ms = delay_ms, .close_ms = close_ms};
  w->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(w->lfd >= 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t sl = sizeof sa;
  assert_int_equal(bind(w->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(w->lfd, 16), 0);
  assert_int_equal(getsockname(w->lfd, (struct sockaddr *)&sa, &sl), 0);
  w->port = ntohs(sa.sin_port);
  assert_int_equal(pthread_create(&w->th, NULL, fake_accept, w), 0);
}

static void fake_stop(fake_worker *w) {
  shutdown(w->lfd, SHUT_RDWR); /* accept() returns */
  pthread_join(w->th, NULL);
  close(w->lfd);
}

/* A table of nw workers (ids[i] at 127.0.0.1:ports[i]) with one route. */
static void fwd_table(vr_fwd *f, int64_t version, int nw, const char *const *ids,
                      const int *ports, const char *key, int nr, int *route) {
  vr_fwd_worker ws[4];
  for (int i = 0; i < nw; i++) {
    memset(&ws[i], 0, sizeof ws[i]);
    snprintf(ws[i].id, sizeof ws[i].id, "%s", ids[i]);
    snprintf(ws[i].host, sizeof ws[i].host, "127.0.0.1");
    ws[i].port = ports[i];
  }
  vr_fwd_route r = {.n = nr, .workers = route};
  snprintf(r.key, sizeof r.key, "%s", key);
  vr_fwd_table t = {version, nw, 1, ws, &r};
  vr_errbuf err = {0};
  assert_int_equal(vr_fwd_set_table(f, &t, &err), 0);
}

static void fwd_done(vr_fwd_call *c, void *user) {
  (void)c;
  __atomic_store_n((int *)user, 1, __ATOMIC_RELEASE);
}

/* Sends a GET of key on a fresh call; returns at once (done sets *flag). */
static void fwd_get(vr_fwd *f, const char *key, vr_fwd_call *c, int *flag) {
  memset(c, 0, sizeof *c);
  *flag = 0;
  c->method = "GET";
  c->path = "/v2/models/m";
  c->done = fwd_done;
  c->user = flag;
  vr_fwd_send(f, key, c);
}

static void fwd_wait(int *flag) {
  for (int i = 0; i < 10000 && !__atomic_load_n(flag, __ATOMIC_ACQUIRE); i++) usleep(1000);
  assert_true(__atomic_load_n(flag, __ATOMIC_ACQUIRE));
}

/* A new routing table while a request is under way: the worker it was
 * sent to leaves the table and then fails it. The retry goes to a worker
 * of the new table (it was refused as "no other worker left": the workers
 * it had tried were remembered by their index in the old table, which
 * names another worker in the new one). */
static void test_fwd_retry_after_table_change(void **st) {
  (void)st;
  static fake_worker a, b;
  fake_start(&a, "A", 0, 300);
  fake_start(&b, "B", 0, 0);
  vr_fwd *f;
  vr_errbuf err = {0};
  assert_int_equal(vr_fwd_create(NULL, &f, &err), 0);
  const char *ids1[] = {"a", "b"}, *ids2[] = {"b"};
  int ports1[] = {a.port, b.port}, ports2[] = {b.port};
  int r1[] = {0}, r2[] = {0};
  fwd_table(f, 1, 2, ids1, ports1, "m:m", 1, r1);
  vr_fwd_call c;
  int flag;
  fwd_get(f, "m:m", &c, &flag);
  usleep(100 * 1000);
  fwd_table(f, 2, 1, ids2, ports2, "m:m", 1, r2); /* a left; b is worker 0 */
  fwd_wait(&flag);
  assert_int_equal(c.status, 200);
  assert_string_equal(c.worker, "b");
  assert_true(c.resp_len == 1 && c.resp[0] == 'B');
  vr_fwd_call_clear(&c);
  vr_fwd_free(f);
  fake_stop(&a);
  fake_stop(&b);
}

/* GET path on a fresh connection to port; the status, the body in out. */
static int fe_get(int port, const char *path, char *out, size_t cap) {
  vr_httpc c;
  vr_httpc_resp resp;
  vr_errbuf err = {0};
  if (vr_httpc_open(&c, "127.0.0.1", port, &err) ||
      vr_httpc_request(&c, "GET", path, NULL, NULL, 0, &resp, &err))
    fail_msg("%s: %s", path, err.msg);
  size_t n = resp.body_len < cap - 1 ? resp.body_len : cap - 1;
  memcpy(out, resp.body, n);
  out[n] = 0;
  int st = resp.head.status;
  vr_httpc_close(&c);
  return st;
}

/* A front end with the default options on a free port, no table yet. */
static vr_frontend *fe_default(void) {
  vr_frontend_opts o;
  vr_frontend_opts_init(&o);
  o.port = 0;
  vr_frontend *fe;
  vr_errbuf err = {0};
  if (vr_frontend_create(&o, &fe, &err)) fail_msg("%s", err.msg);
  return fe;
}

/* Through a front end, a model the table has no route for is unknown to
 * the cluster: answered as a worker answers a model it does not have (404;
 * readiness 400), not 503 "no worker serves", which a Triton client takes
 * for the server failing. A model the table names with no worker up stays
 * 503, except its readiness: not ready, 400. */
static void test_frontend_unknown_model(void **st) {
  (void)st;
  vr_frontend *fe = fe_default();
  int port = vr_frontend_port(fe);
  char b[1024];
  /* no table yet: the cluster cannot say what it knows (503) */
  assert_int_equal(fe_get(port, "/v2/models/nope", b, sizeof b), 503);
  const char *ids[] = {"w"};
  int ports[] = {1}, none[] = {0};
  fwd_table(vr_frontend_fwd(fe), 1, 1, ids, ports, "m:known", 0, none);
  assert_int_equal(fe_get(port, "/v2/models/nope", b, sizeof b), 404);
  assert_non_null(strstr(b, "model 'nope' is not loaded (unknown to the cluster)"));
  assert_int_equal(fe_get(port, "/v2/models/nope/versions/1/infer", b, sizeof b), 404);
  assert_int_equal(fe_get(port, "/v2/models/nope/ready", b, sizeof b), 400);
  assert_int_equal(fe_get(port, "/v2/models/nope/versions/1/ready", b, sizeof b), 400);
  assert_int_equal(fe_get(port, "/v2/models/known", b, sizeof b), 503);
  assert_non_null(strstr(b, "no worker serves 'm:known'"));
  /* its readiness is an answer (false), not the front end failing */
  assert_int_equal(fe_get(port, "/v2/models/known/ready", b, sizeof b), 400);
  assert_non_null(strstr(b, "not ready: no worker serves 'm:known'"));
  /* the same with its worker down (nothing listens on port 1) */
  int one[] = {0};
  fwd_table(vr_frontend_fwd(fe), 2, 1, ids, ports, "m:known", 1, one);
  assert_int_equal(fe_get(port, "/v2/models/known/versions/1/ready", b, sizeof b), 400);
  assert_int_equal(fe_get(port, "/v2/models/known", b, sizeof b), 503);
  vr_frontend_shutdown(fe);
  vr_frontend_free(fe);
}

/* A worker's 405 keeps its Allow through a front end. */
static void test_frontend_allow(void **st) {
  (void)st;
  vr_frontend *fe = fe_default();
  vr_errbuf err = {0};
  const char *ids[] = {"w"};
  int ports[] = {g_port}, one[] = {0};
  fwd_table(vr_frontend_fwd(fe), 1, 1, ids, ports, "*", 1, one);
  vr_httpc c;
  vr_httpc_resp r;
  if (vr_httpc_open(&c, "127.0.0.1", vr_frontend_port(fe), &err) ||
      vr_httpc_request(&c, "GET", "/v2/models/m/infer", NULL, NULL, 0, &r, &err))
    fail_msg("%s", err.msg);
  assert_int_equal(r.head.status, 405);
  size_t vl = 0;
  const char *v = vr__http_head_value(r.body - r.head.head_len, r.head.head_len, "Allow", &vl);
  assert_non_null(v);
  assert_int_equal(vl, 4);
  assert_memory_equal(v, "POST", 4);
  vr_httpc_close(&c);
  vr_frontend_shutdown(fe);
  vr_frontend_free(fe);
}

/* A front end is ready while its table names a worker (frontend.h); a
 * table with none (every worker gone) said ready too. */
static void test_frontend_ready(void **st) {
  (void)st;
  vr_frontend *fe = fe_default();
  vr_errbuf err = {0};
  int port = vr_frontend_port(fe);
  /* no table, no worker, one; not ready is 400 as a worker's */
  static const int want[3] = {400, 400, 200};
  for (int i = 0; i < 3; i++) {
    if (i > 0) {
      const char *ids[] = {"w"};
      int ports[] = {1}, r[] = {0};
      fwd_table(vr_frontend_fwd(fe), i, i - 1, ids, ports, "*", i - 1, r);
    }
    vr_httpc c;
    vr_httpc_resp resp;
    if (vr_httpc_open(&c, "127.0.0.1", port, &err)) fail_msg("%s", err.msg);
    if (vr_httpc_request(&c, "GET", "/v2/health/ready", NULL, NULL, 0, &resp, &err))
      fail_msg("%s", err.msg);
    if (resp.head.status != want[i]) fail_msg("table %d: ready %d", i, resp.head.status);
    vr_httpc_close(&c);
  }
  /* its server metadata claims what it forwards (classification, a
   * model's config, ...), which a client may check before using it */
  char mb[512];
  assert_int_equal(fe_get(port, "/v2", mb, sizeof mb), 200);
  assert_non_null(strstr(mb, "\"classification\",\"model_configuration\",\"schedule_policy\""));
  assert_null(strstr(mb, "model_repository"));
  /* every model's statistics are per worker: said so, not routed as a
   * model named "stats" (503 "no worker serves 'm:stats'") */
  vr_httpc c;
  vr_httpc_resp resp;
  if (vr_httpc_open(&c, "127.0.0.1", port, &err) ||
      vr_httpc_request(&c, "GET", "/v2/models/stats", NULL, NULL, 0, &resp, &err))
    fail_msg("%s", err.msg);
  assert_int_equal(resp.head.status, 404);
  assert_non_null(memmem(resp.body, resp.body_len, "/v2/models/{m}/stats", 20));
  /* draining, on a connection it has: not ready (its table with a worker
   * said 200) */
  vr_frontend_shutdown(fe);
  if (vr_httpc_request(&c, "GET", "/v2/health/ready", NULL, NULL, 0, &resp, &err))
    fail_msg("%s", err.msg);
  int drained = resp.head.status;
  vr_httpc_close(&c);
  vr_frontend_free(fe);
  assert_int_equal(drained, 400);
}

/* Each try tells the worker how long the front end has had the query. */
static void test_fwd_upstream_header(void **st) {
  (void)st;
  static fake_worker a;
  fake_start(&a, "A", 0, 0);
  vr_fwd *f;
  vr_errbuf err = {0};
  assert_int_equal(vr_fwd_create(NULL, &f, &err), 0);
  const char *ids[] = {"a"};
  int ports[] = {a.port}, r[] = {0};
  fwd_table(f, 1, 1, ids, ports, "*", 1, r);
  vr_fwd_call c;
  int flag = 0;
  memset(&c, 0, sizeof c);
  c.method = "GET";
  c.path = "/v2/models/m";
  c.origin_ns = vr_now_ns() - 20 * 1000000LL; /* it came in 20 ms ago */
  c.done = fwd_done;
  c.user = &flag;
  vr_fwd_send(f, "m:m", &c);
  fwd_wait(&flag);
  assert_int_equal(c.status, 200);
  long long up = __atomic_load_n(&a.upstream_us, __ATOMIC_SEQ_CST);
  if (up < 20000 || up > 20000000) fail_msg("Vario-Upstream-Us: %lld", up);
  vr_fwd_call_clear(&c);
  vr_fwd_free(f);
  fake_stop(&a);
}

/* Workers that close the connection after reading a request (killed
 * mid-request). Inference goes to the next worker; a registration, which
 * the first worker may have carried out, is not sent again (it was, and
 * the second answered 409 "already registered" for a model that the first
 * had registered, or registered it twice). */
static void test_fwd_no_replay_of_writes(void **st) {
  (void)st;
  static fake_worker a, b;
  fake_start(&a, "A", 0, 50);
  fake_start(&b, "B", 0, 50);
  vr_fwd *f;
  vr_errbuf err = {0};
  assert_int_equal(vr_fwd_create(NULL, &f, &err), 0);
  const char *ids[] = {"a", "b"};
  int ports[] = {a.port, b.port}, r[] = {0, 1};
  fwd_table(f, 1, 2, ids, ports, "a:x", 2, r);
  static const char *const paths[] = {"/v2/apps/x/models?name=n", "/v2/apps/x/infer"};
  for (int i = 0; i < 2; i++) {
    vr_fwd_call c;
    int flag = 0;
    memset(&c, 0, sizeof c);
    c.method = "POST";
    c.path = paths[i];
    c.body = "{}";
    c.body_len = 2;
    c.done = fwd_done;
    c.user = &flag;
    int before = __atomic_load_n(&a.requests, __ATOMIC_SEQ_CST) +
                 __atomic_load_n(&b.requests, __ATOMIC_SEQ_CST);
    vr_fwd_send(f, "a:x", &c);
    fwd_wait(&flag);
    int got = __atomic_load_n(&a.requests, __ATOMIC_SEQ_CST) +
              __atomic_load_n(&b.requests, __ATOMIC_SEQ_CST) - before;
    assert_int_equal(c.status, 502);
    assert_int_equal(got, i == 0 ? 1 : 2); /* the write once, inference on each */
    if (i == 0) assert_non_null(strstr(c.msg, "not sent again"));
    vr_fwd_call_clear(&c);
    usleep(1100 * 1000); /* down_ms: both workers up again */
  }
  vr_fwd_free(f);
  fake_stop(&a);
  fake_stop(&b);
}

/* A worker that moved (same id, new address) while a request was under
 * way there: later requests go to the new address (the old connection
 * went back to the pool of the moved worker and was used again). */
static void test_fwd_moved_worker(void **st) {
  (void)st;
  static fake_worker a, b;
  fake_start(&a, "A", 300, 0);
  fake_start(&b, "B", 0, 0);
  vr_fwd *f;
  vr_errbuf err = {0};
  assert_int_equal(vr_fwd_create(NULL, &f, &err), 0);
  const char *ids[] = {"w"};
  int p1[] = {a.port}, p2[] = {b.port};
  int r[] = {0};
  fwd_table(f, 1, 1, ids, p1, "*", 1, r);
  vr_fwd_call c;
  int flag;
  fwd_get(f, "m:m", &c, &flag);
  usleep(100 * 1000);
  fwd_table(f, 2, 1, ids, p2, "*", 1, r); /* w moved to b */
  fwd_wait(&flag);
  assert_int_equal(c.status, 200);
  assert_true(c.resp_len == 1 && c.resp[0] == 'A'); /* sent before the move */
  vr_fwd_call_clear(&c);
  fwd_get(f, "m:m", &c, &flag);
  fwd_wait(&flag);
  assert_int_equal(c.status, 200);
  assert_true(c.resp_len == 1 && c.resp[0] == 'B');
  vr_fwd_call_clear(&c);
  vr_fwd_free(f);
  fake_stop(&a);
  fake_stop(&b);
}

/* A worker that closes connections past its cap at accept, as vario serve
 * does past --max-conns-per-client (256) for one address, i.e. for a front
 * end on another host. The forwarder keeps at most max_conns connections
 * to a worker and has the requests past them wait for one to come free:
 * they failed, the worker was marked down, and then every request failed
 * with 503 until down_ms had passed. One that waits past timeout_ms is
 * answered 504. */
static void test_fwd_conn_cap(void **st) {
  (void)st;
  static fake_worker a;
  fake_start(&a, "A", 30, 0);
  a.max_conns = 2;
  vr_fwd_opts o;
  vr_fwd_opts_init(&o);
  o.max_conns = 2;
  vr_fwd *f;
  vr_errbuf err = {0};
  assert_int_equal(vr_fwd_create(&o, &f, &err), 0);
  const char *ids[] = {"w"};
  int ports[] = {a.port}, r[] = {0};
  fwd_table(f, 1, 1, ids, ports, "*", 1, r);
  enum { N = 12 };
  static vr_fwd_call c[N];
  static int flag[N];
  for (int i = 0; i < N; i++) fwd_get(f, "m:m", &c[i], &flag[i]);
  for (int i = 0; i < N; i++) {
    fwd_wait(&flag[i]);
    if (c[i].status != 200) fprintf(stderr, "call %d: %d %s\n", i, c[i].status, c[i].msg);
    assert_int_equal(c[i].status, 200);
    assert_true(c[i].resp_len == 1 && c[i].resp[0] == 'A');
    vr_fwd_call_clear(&c[i]);
  }
  vr_fwd_free(f);
  /* waiting counts toward the timeout (once the worker has seen the
   * connections above closed) */
  for (int i = 0; i < 5000 && __atomic_load_n(&a.open, __ATOMIC_SEQ_CST) > 0; i++) usleep(1000);
  a.delay_ms = 400;
  o.max_conns = 1;
  o.timeout_ms = 200;
  /* The waiter's time runs out a few microseconds after the request it
   * waits behind times out (it was queued after that one was sent). The
   * forwarder finds both in its 100-ms scan, the waiter first (504, "came
   * free"), unless the scan falls between the two: then the timed-out
   * request marks the worker down first and the waiter, released, finds
   * every worker down (503). Either way it is answered in its time;
   * "came free" must show in one of three tries. */
  int came_free = 0;
  for (int t = 0; t < 3 && !came_free; t++) {
    assert_int_equal(vr_fwd_create(&o, &f, &err), 0);
    fwd_table(f, 1, 1, ids, ports, "*", 1, r);
    int64_t t0 = vr_now_ns();
    fwd_get(f, "m:m", &c[0], &flag[0]);
    fwd_get(f, "m:m", &c[1], &flag[1]);
    fwd_wait(&flag[1]);
    int64_t took_ms = (vr_now_ns() - t0) / 1000000;
    if (took_ms > 1500) fail_msg("the waiter answered after %lld ms", (long long)took_ms);
    came_free = c[1].status == 504 && strstr(c[1].msg, "came free");
    if (!came_free) {
      if (c[1].status != 503) fail_msg("waiter: %d %s", c[1].status, c[1].msg);
      fprintf(stderr, "try %d: the scan fell between the two: %s\n", t, c[1].msg);
    }
    fwd_wait(&flag[0]);
    vr_fwd_call_clear(&c[0]);
    vr_fwd_call_clear(&c[1]);
    vr_fwd_free(f);
    for (int i = 0; i < 5000 && __atomic_load_n(&a.open, __ATOMIC_SEQ_CST) > 0; i++) usleep(1000);
  }
  assert_true(came_free);
  fake_stop(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_health_and_metadata),
      cmocka_unit_test(test_infer_json),
      cmocka_unit_test(test_infer_binary),
      cmocka_unit_test(test_bad_inputs),
      cmocka_unit_test(test_lying_binary),
      cmocka_unit_test(test_oversized_body),
      cmocka_unit_test(test_content_encoding),
      cmocka_unit_test(test_deadline_504),
      cmocka_unit_test(test_upstream_wait),
      cmocka_unit_test(test_stats_metrics_repo),
      cmocka_unit_test(test_dashboard_files),
      cmocka_unit_test(test_http_head_limits),
      cmocka_unit_test(test_load_unload),
      cmocka_unit_test(test_index_load_error),
      cmocka_unit_test(test_load_zero_instances),
      cmocka_unit_test(test_disconnects),
      cmocka_unit_test(test_unload_in_flight),
      cmocka_unit_test(test_graceful_shutdown),
      cmocka_unit_test(test_connection_limit),
      cmocka_unit_test(test_probes_while_draining),
      cmocka_unit_test(test_path_segments),
      cmocka_unit_test(test_fwd_retry_after_table_change),
      cmocka_unit_test(test_fwd_moved_worker),
      cmocka_unit_test(test_fwd_no_replay_of_writes),
      cmocka_unit_test(test_fwd_upstream_header),
      cmocka_unit_test(test_frontend_ready),
      cmocka_unit_test(test_frontend_unknown_model),
      cmocka_unit_test(test_frontend_allow),
      cmocka_unit_test(test_fwd_conn_cap),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
