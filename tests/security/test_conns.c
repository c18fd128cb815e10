/*
 * Issue 12, "holding connections locks everyone out": header and body
 * read timeouts (slowloris), the reserve that keeps health answering and
 * the 503 JSON past it, idle connections given up under pressure, the
 * per-client cap. (The 1500-socket soak is conn_soak.py.)
 */
#define _GNU_SOURCE
#include "vr_test.h"

#include <errno.h>

#include "base/clock.h"
#include "sec_util.h"

static rt_fake g_fake;
static char g_repo[512];

static vr_server *start(unsigned max_conns, unsigned reserve, unsigned per_client,
                        int cap_loopback) {
  vr_server_opts o;
  vr_server_opts_init(&o);
  o.load_all = 1;
  o.max_conns = max_conns;
  o.conn_reserve = reserve;
  o.max_conns_per_client = per_client;
  o.cap_loopback = cap_loopback;
  o.header_timeout_ms = 800;
  o.body_timeout_ms = 800;
  return sec_server(&o, g_repo, &g_fake);
}

static int setup(void **st) {
  (void)st;
  rt_fake_init(&g_fake, 100, 0, 3);
  assert_non_null(srv_tmpdir(g_repo, sizeof g_repo));
  srv_write_model(g_repo, "m", 4, 3, 8, 0);
  return 0;
}

static int teardown(void **st) {
  (void)st;
  srv_rmtree(g_repo);
  return 0;
}

/* Seconds until the server closes fd (recv 0 / reset), sending one byte
 * of `drip` every 100 ms meanwhile; -1 if still open after `limit` s. */
static double closed_after(int fd, const char *drip, double limit) {
  int64_t t0 = vr_now_ns();
  size_t k = 0;
  while ((vr_now_ns() - t0) / 1e9 < limit) {
    if (drip && drip[k]) send(fd, drip + k++, 1, MSG_NOSIGNAL);
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 100) == 1) {
      char b[4096];
      ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN)) return (vr_now_ns() - t0) / 1e9;
    }
  }
  return -1;
}

static void test_slow_headers_and_body(void **st) {
  (void)st;
  vr_server *s = start(0, 0, 0, 0);
  int p = vr_server_port(s);
  /* Headers at 10 bytes/s: cut at the 0.8 s header timeout. */
  int fd = sec_connect(p);
  double t = closed_after(fd, "GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 6);
  close(fd);
  assert_true(t > 0.5 && t < 4);
  /* An idle connection: the same. */
  fd = sec_connect(p);
  t = closed_after(fd, NULL, 6);
  close(fd);
  assert_true(t > 0.5 && t < 4);
  /* A truncated body on an open socket: cut at the body timeout. */
  fd = sec_connect(p);
  const char *h = "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                  "\r\n{\"inputs\":";
  send(fd, h, strlen(h), MSG_NOSIGNAL);
  t = closed_after(fd, NULL, 6);
  close(fd);
  assert_true(t > 0.5 && t < 4);
  /* A normal client is unaffected. */
  char b[512];
  assert_int_equal(sec_req(p, "GET", "/v2/health/live", NULL, NULL, b, sizeof b), 200);
  vr_server_free(s);
}

/* Every pool slot busy with a request (bodies still arriving): a new
 * connection lands in the reserve; health answers, anything else gets a
 * JSON 503. */
static void test_reserve(void **st) {
  (void)st;
  enum { POOL = 16 };
  vr_server *s = start(POOL, 4, 0, 0);
  int p = vr_server_port(s);
  int fd[POOL];
  const char *h = "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                  "\r\n{";
  for (int i = 0; i < POOL; i++) {
    fd[i] = sec_connect(p);
    send(fd[i], h, strlen(h), MSG_NOSIGNAL);
  }
  usleep(100000);
  char b[512];
  assert_int_equal(sec_req(p, "GET", "/v2/health/ready", NULL, NULL, b, sizeof b), 200);
  assert_int_equal(sec_req(p, "GET", "/metrics", NULL, NULL, b, sizeof b), 200);
  assert_int_equal(sec_req(p, "GET", "/v2/models/m", NULL, NULL, b, sizeof b), 503);
  assert_non_null(strstr(b, "\"error\":\"server at its connection limit"));
  for (int i = 0; i < POOL; i++) close(fd[i]);
  usleep(200000);
  assert_int_equal(sec_req(p, "GET", "/v2/models/m", NULL, NULL, b, sizeof b), 200);
  vr_server_free(s);
}

/* A full pool of idle sockets does not keep a new client out: the oldest
 * idle one is closed to make room. */
static void test_idle_evicted(void **st) {
  (void)st;
  enum { POOL = 16 };
  vr_server *s = start(POOL, 2, 0, 0);
  int p = vr_server_port(s);
  int fd[3 * POOL];
  for (int i = 0; i < 3 * POOL; i++) fd[i] = sec_connect(p);
  char b[512];
  for (int k = 0; k < 5; k++)
    assert_int_equal(sec_req(p, "GET", "/v2/models/m", NULL, NULL, b, sizeof b), 200);
  for (int i = 0; i < 3 * POOL; i++) close(fd[i]);
  vr_server_free(s);
}

static void test_per_client_cap(void **st) {
  (void)st;
  vr_server *s = start(0, 0, 4, 1); /* loopback counted, for the test */
  int p = vr_server_port(s);
  int fd[5];
  const char *get = "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n";
  int ok = 0, refused = 0;
  for (int i = 0; i < 5; i++) fd[i] = sec_connect(p);
  for (int i = 0; i < 5; i++) {
    send(fd[i], get, strlen(get), MSG_NOSIGNAL);
    int stc = sec_read(fd[i], NULL, 0);
    ok += stc == 200;
    refused += stc < 0;
  }
  assert_int_equal(ok, 4);
  assert_int_equal(refused, 1);
  for (int i = 0; i < 5; i++) close(fd[i]);
  vr_server_free(s);
}

int main(void) {
  const struct CMUnitTest t[] = {
      cmocka_unit_test(test_slow_headers_and_body),
      cmocka_unit_test(test_reserve),
      cmocka_unit_test(test_idle_evicted),
      cmocka_unit_test(test_per_client_cap),
  };
  return cmocka_run_group_tests(t, setup, teardown);
}
