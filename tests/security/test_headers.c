/*
 * Issue 12, item 6: request heads that were accepted and should not be —
 * two (different or equal) Content-Length headers, a Content-Length that
 * is not a number, an Inference-Header-Content-Length of -1, 2^64 or
 * "abc", a NUL (%00) or other control byte in a model name — each a
 * clear 400 with a JSON body.
 */
#define _GNU_SOURCE
#include "vr_test.h"

#include "sec_util.h"

static rt_fake g_fake;
static char g_repo[512];
static vr_server *g_srv;
static int g_port;

static int setup(void **st) {
  (void)st;
  rt_fake_init(&g_fake, 100, 0, 3);
  assert_non_null(srv_tmpdir(g_repo, sizeof g_repo));
  srv_write_model(g_repo, "m", 4, 3, 8, 0);
  vr_server_opts o;
  vr_server_opts_init(&o);
  o.load_all = 1;
  g_srv = sec_server(&o, g_repo, &g_fake);
  g_port = vr_server_port(g_srv);
  return 0;
}

static int teardown(void **st) {
  (void)st;
  vr_server_free(g_srv);
  srv_rmtree(g_repo);
  return 0;
}

static const char *k_q = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
                         "\"shape\":[1,4],\"data\":[1,2,3,4]}]}";

static int raw(const char *head_fmt, const char *a, char *b, size_t cap) {
  char buf[4096];
  int n = snprintf(buf, sizeof buf, head_fmt, a);
  return sec_raw(g_port, buf, (size_t)n, b, cap);
}

static void test_content_length(void **st) {
  (void)st;
  char b[1024], req[2048];
  size_t n = strlen(k_q);
  const char *twice[] = {"Content-Length: %zu\r\nContent-Length: 5\r\n",
                         "Content-Length: %zu\r\nContent-Length: %zu\r\n"};
  for (int i = 0; i < 2; i++) {
    char h[256];
    snprintf(h, sizeof h, twice[i], n, n);
    int k = snprintf(req, sizeof req, "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                     "%s\r\n%s", h, k_q);
    int stc = sec_raw(g_port, req, (size_t)k, b, sizeof b);
    if (stc != 400 || !strstr(b, "\"error\":\"more than one Content-Length"))
      fail_msg("case %d: %d %s", i, stc, b);
  }
  /* The same request with one header is served. */
  int k = snprintf(req, sizeof req, "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                   "Content-Length: %zu\r\n\r\n%s", n, k_q);
  assert_int_equal(sec_raw(g_port, req, (size_t)k, b, sizeof b), 200);
}

/* Transfer-Encoding beside a Content-Length: the framings disagree (a
 * proxy reading one and the server the other is request smuggling), so
 * 400 and the connection closed, not served and kept; an encoding other
 * than chunked: 501 at once (it waited 30 s for a body and said nothing). */
static void test_transfer_encoding(void **st) {
  (void)st;
  char b[1024];
  const char *both = "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                     "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"
                     "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n";
  int stc = sec_raw(g_port, both, strlen(both), b, sizeof b);
  if (stc != 400 || !strstr(b, "Transfer-Encoding and Content-Length"))
    fail_msg("TE + CL: %d %s", stc, b);
  const char *other[] = {"gzip, chunked", "identity"};
  for (int i = 0; i < 2; i++) {
    char req[512];
    int k = snprintf(req, sizeof req, "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                     "Transfer-Encoding: %s\r\n\r\n", other[i]);
    int64_t t0 = vr_now_ns();
    stc = sec_raw(g_port, req, (size_t)k, b, sizeof b);
    if (stc != 501 || vr_now_ns() - t0 > 5000000000LL)
      fail_msg("TE '%s': %d %s", other[i], stc, b);
  }
  /* chunked alone is served */
  char req[1024];
  int k = snprintf(req, sizeof req, "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n"
                   "Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n",
                   strlen(k_q), k_q);
  assert_int_equal(sec_raw(g_port, req, (size_t)k, b, sizeof b), 200);
}

/* A shape its JSON data cannot fill is refused before its memory is
 * taken: 2^28 INT64 elements from a 150-byte body asked for 2 GiB. */
static void test_shape_past_data(void **st) {
  (void)st;
  char b[1024];
  const char *q = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT64\","
                  "\"shape\":[268435456],\"data\":[1]}]}";
  int stc = sec_req(g_port, "POST", "/v2/models/m/infer", NULL, q, b, sizeof b);
  if (stc != 400 || !strstr(b, "cannot hold")) fail_msg("%d %s", stc, b);
}

static void test_inference_header_length(void **st) {
  (void)st;
  char b[1024];
  const char *bad[] = {"-1", "18446744073709551616", "abc", "", "12x",
                       "18446744073709551615", "+2"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char h[128];
    snprintf(h, sizeof h, "Inference-Header-Content-Length: %s\r\n", bad[i]);
    int stc = sec_req(g_port, "POST", "/v2/models/m/infer", h, k_q, b, sizeof b);
    if (stc != 400 || !strstr(b, "\"error\"") || !strstr(b, "Inference-Header-Content-Length"))
      fail_msg("IHCL '%s': %d %s", bad[i], stc, b);
  }
}

static void test_control_bytes_in_names(void **st) {
  (void)st;
  char b[1024];
  const char *paths[] = {"/v2/models/m%00/infer", "/v2/models/m%00x/infer",
                         "/v2/models/m%0a/infer", "/v2/models/m%7F", "/v2/models/m%01/ready"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    int stc = sec_req(g_port, i < 3 ? "POST" : "GET", paths[i], NULL, i < 3 ? k_q : NULL, b,
                      sizeof b);
    if (stc != 400 || !strstr(b, "control byte")) fail_msg("%s: %d %s", paths[i], stc, b);
  }
  assert_int_equal(sec_req(g_port, "POST", "/v2/models/m/infer", NULL, k_q, b, sizeof b), 200);
  assert_int_equal(raw("GET /v2/models/%%6d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n%s",
                       "", b, sizeof b), 200); /* %6d = 'm': decoding still works */
  /* bytes that are not UTF-8 are named in the error as U+FFFD: the body
   * stays JSON (it held the raw 0xFF, which no JSON parser takes) */
  assert_int_equal(sec_req(g_port, "POST", "/v2/models/a%FFb/infer", NULL, k_q, b, sizeof b),
                   404);
  assert_non_null(strstr(b, "a\\ufffdb"));
  assert_int_equal(sec_req(g_port, "POST", "/v2/models/a%C3%A9b/infer", NULL, k_q, b, sizeof b),
                   404);
  assert_non_null(strstr(b, "a\xc3\xa9" "b")); /* well-formed UTF-8 goes through */
}

int main(void) {
  const struct CMUnitTest t[] = {
      cmocka_unit_test(test_content_length),
      cmocka_unit_test(test_transfer_encoding),
      cmocka_unit_test(test_shape_past_data),
      cmocka_unit_test(test_inference_header_length),
      cmocka_unit_test(test_control_bytes_in_names),
  };
  return cmocka_run_group_tests(t, setup, teardown);
}
