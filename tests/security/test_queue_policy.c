/*
 * Issue 12, item 5: without a client "timeout" nothing was shed on
 * /v2/models/{m}/infer — at 2.6x capacity p99 was 12 s. Triton's queue
 * policy per model (config.json "queue_policy") with a shedding default:
 * a request that cannot be served within default_timeout_microseconds is
 * answered 504 at once; max_queue_size caps the queue (503); DELAY
 * serves late instead; allow_timeout_override says whether a client's
 * own timeout wins.
 */
#define _GNU_SOURCE
#include "vr_test.h"

#include "base/clock.h"
#include "sec_util.h"

static rt_fake g_fake;
static char g_repo[512];

/* model `name`: x[4] -> y[3], batch 1, 20 ms per run, with a policy. */
static void write_model(const char *name, const char *policy) {
  char p[700];
  srv_write_model(g_repo, name, 4, 3, 1, 0);
  snprintf(p, sizeof p, "%s/%s/config.json", g_repo, name);
  char cfg[1024];
  snprintf(cfg, sizeof cfg,
           "{\"name\":\"%s\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
           "\"shape\":[-1,4]}],\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\","
           "\"shape\":[-1,3]}],\"max_batch_size\":1,\"instances\":1,\"threads\":1%s%s}\n",
           name, policy ? ",\"queue_policy\":" : "", policy ? policy : "");
  srv_write_file(p, cfg);
}

static vr_server *g_srv;
static int g_port;

static int setup(void **st) {
  (void)st;
  rt_fake_init(&g_fake, 20000, 0, 3);
  assert_non_null(srv_tmpdir(g_repo, sizeof g_repo));
  write_model("dflt", NULL); /* default: REJECT after 100 ms */
  write_model("short", "{\"default_timeout_microseconds\":50000}");
  write_model("capped", "{\"max_queue_size\":2,\"default_timeout_microseconds\":0}");
  write_model("delay", "{\"default_timeout_microseconds\":30000,\"timeout_action\":\"DELAY\"}");
  write_model("strict", "{\"default_timeout_microseconds\":50000,"
                        "\"allow_timeout_override\":false}");
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

typedef struct tally {
  int ok, s503, s504, other;
  double max_ok_ms;
} tally;

/* N requests at once to model, each on its own connection; body extra
 * parameters (e.g. a timeout) in `params` (or NULL). */
static tally burst(const char *model, int n, const char *params) {
  char path[128], body[512];
  snprintf(path, sizeof path, "/v2/models/%s/infer", model);
  snprintf(body, sizeof body, "{%s\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
           "\"shape\":[1,4],\"data\":[1,2,3,4]}]}", params ? params : "");
  int fd[64];
  int64_t t0 = vr_now_ns();
  for (int i = 0; i < n; i++) {
    char req[1024];
    int k = snprintf(req, sizeof req, "POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%s", path, strlen(body), body);
    fd[i] = sec_connect(g_port);
    send(fd[i], req, (size_t)k, MSG_NOSIGNAL);
  }
  tally t = {0};
  for (int i = 0; i < n; i++) {
    char b[1024];
    int stc = sec_read(fd[i], b, sizeof b);
    double ms = (vr_now_ns() - t0) / 1e6;
    close(fd[i]);
    if (stc == 200) {
      t.ok++;
      if (ms > t.max_ok_ms) t.max_ok_ms = ms;
    } else if (stc == 503) t.s503++;
    else if (stc == 504 && strstr(b, "\"error\":\"dropped")) t.s504++;
    else t.other++;
  }
  return t;
}

static void test_default_sheds(void **st) {
  (void)st;
  /* 30 requests of 20 ms on one instance: 600 ms of work; the default
   * 100 ms timeout serves a handful and answers the rest 504 at once. */
  tally t = burst("dflt", 30, NULL);
  print_message("dflt: %d ok (last %.0f ms), %d x 504, %d x 503\n", t.ok, t.max_ok_ms,
                t.s504, t.s503);
  assert_int_equal(t.other, 0);
  assert_true(t.ok >= 1 && t.s504 >= 15);
  assert_int_equal(t.ok + t.s504 + t.s503, 30);
  t = burst("short", 30, NULL);
  assert_true(t.ok >= 1 && t.s504 >= 20 && t.other == 0);
  /* A client's own, longer timeout wins when overrides are allowed... */
  t = burst("short", 10, "\"parameters\":{\"timeout\":5000000},");
  assert_int_equal(t.ok, 10);
  /* ... and is ignored when they are not. */
  t = burst("strict", 10, "\"parameters\":{\"timeout\":5000000},");
  assert_true(t.s504 >= 3 && t.ok + t.s504 == 10);
}

static void test_max_queue_size(void **st) {
  (void)st;
  tally t = burst("capped", 12, NULL);
  print_message("capped: %d ok, %d x 503\n", t.ok, t.s503);
  assert_true(t.s503 >= 6 && t.ok >= 1 && t.ok + t.s503 == 12 && t.other == 0);
}

static void test_delay(void **st) {
  (void)st;
  tally t = burst("delay", 10, NULL); /* 200 ms of work, 30 ms timeout */
  assert_int_equal(t.ok, 10);         /* served late, none dropped */
}

static void test_bad_policy(void **st) {
  (void)st;
  const char *bad[] = {"[]", "{\"timeout_action\":\"DROP\"}", "{\"max_queue_size\":-1}",
                       "{\"allow_timeout_override\":1}", "{\"default_timeout\":5}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    write_model("bad", bad[i]);
    vr_errbuf err = {0};
    if (vr_server_load(g_srv, "bad", &err) == 0) fail_msg("policy %s accepted", bad[i]);
  }
}

int main(void) {
  const struct CMUnitTest t[] = {
      cmocka_unit_test(test_default_sheds),
      cmocka_unit_test(test_max_queue_size),
      cmocka_unit_test(test_delay),
      cmocka_unit_test(test_bad_policy),
  };
  return cmocka_run_group_tests(t, setup, teardown);
}
