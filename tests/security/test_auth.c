/*
 * Issue 12: "any client can register a model / overwrite files / take over
 * an app" starts with any client being allowed to change state. Requests
 * that change state need the operator's bearer token; with none
 * configured they are off unless --insecure-admin; inference and health
 * stay open unless infer_auth. Admin jobs are capped (429 past it).
 */
#define _GNU_SOURCE
#include "vr_test.h"

#include "sec_util.h"
#include "server/server_int.h"

static char g_repo[512];
static rt_fake g_fake;

static vr_server *start(const char *token, int insecure, int infer_auth,
                        int max_jobs) {
  vr_server_opts o;
  vr_server_opts_init(&o);
  o.admin_token = token;
  o.insecure_admin = insecure;
  o.infer_auth = infer_auth;
  o.max_admin_jobs = max_jobs;
  return sec_server(&o, g_repo, &g_fake);
}

static int setup(void **st) {
  (void)st;
  rt_fake_init(&g_fake, 100, 0, 3);
  assert_non_null(srv_tmpdir(g_repo, sizeof g_repo));
  srv_write_model(g_repo, "m", 4, 3, 8, 0);
  srv_write_model(g_repo, "m2", 4, 3, 8, 0);
  return 0;
}

static int teardown(void **st) {
  (void)st;
  srv_rmtree(g_repo);
  return 0;
}

static const char *k_auth = "Authorization: Bearer s3cret-token\r\n";

static void test_token_required(void **st) {
  (void)st;
  vr_server *s = start("s3cret-token", 0, 0, 0);
  int p = vr_server_port(s);
  char b[4096];
  const char *admin[][2] = {
      {"POST", "/v2/repository/models/m/load"},
      {"POST", "/v2/repository/models/m/unload"},
      {"POST", "/v2/repository/index"},
      {"GET", "/v2/repository/index"},
      {"DELETE", "/v2/pipelines/infer"},
      {"DELETE", "/v2/apps/fashion/models/infer"},
      {"POST", "/v2/apps/fashion/models"},
      {"POST", "/v2/apps/fashion/jobs"},
      {"POST", "/v2/jobs"},
      {"GET", "/v2/jobs/1"},
      {"GET", "/v2/jobs/1/output"},
      {"DELETE", "/v2/apps/fashion/models/m"},
      {"POST", "/v2/pipelines/p"},
  };
  const char *bad[] = {NULL, "Authorization: Bearer wrong\r\n",
                       "Authorization: Bearer s3cret-toke\r\n",
                       "Authorization: Bearer s3cret-token-and-more\r\n",
                       "Authorization: Basic czNjcmV0LXRva2Vu\r\n",
                       "Authorization: s3cret-token\r\n"};
  for (size_t i = 0; i < sizeof admin / sizeof admin[0]; i++)
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
      int stc = sec_req(p, admin[i][0], admin[i][1], bad[k], "{}", b, sizeof b);
      if (stc != 401 || !strstr(b, "\"error\""))
        fail_msg("%s %s with %s: %d %s", admin[i][0], admin[i][1],
                 bad[k] ? bad[k] : "no token", stc, b);
    }
  /* The right token: the request is served. */
  assert_int_equal(sec_req(p, "POST", "/v2/repository/models/m/load", k_auth,
                           "", b, sizeof b), 200);
  assert_int_equal(sec_req(p, "POST", "/v2/repository/models/m/load",
                           "authorization: bearer   s3cret-token\r\n", "", b,
                           sizeof b), 200); /* authorised: a reload (Triton) */
  /* Inference, metadata and health stay open. */
  const char *q = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
                  "\"shape\":[1,4],\"data\":[1,2,3,4]}]}";
  assert_int_equal(sec_req(p, "POST", "/v2/models/m/infer", NULL, q, b, sizeof b), 200);
  assert_int_equal(sec_req(p, "GET", "/v2/models/m", NULL, NULL, b, sizeof b), 200);
  assert_int_equal(sec_req(p, "GET", "/v2/health/ready", NULL, NULL, b, sizeof b), 200);
  assert_int_equal(sec_req(p, "GET", "/metrics", NULL, NULL, b, sizeof b), 200);
  vr_server_free(s);
}

static void test_no_token_means_off(void **st) {
  (void)st;
  vr_server *s = start(NULL, 0, 0, 0);
  int p = vr_server_port(s);
  char b[4096];
  assert_int_equal(sec_req(p, "POST", "/v2/repository/models/m/load", NULL, "",
                           b, sizeof b), 403);
  assert_non_null(strstr(b, "--admin-token-file"));
  /* A token sent to a server that has none does not open anything. */
  assert_int_equal(sec_req(p, "POST", "/v2/repository/models/m/load", k_auth,
                           "", b, sizeof b), 403);
  assert_int_equal(sec_req(p, "GET", "/v2/health/live", NULL, NULL, b, sizeof b), 200);
  vr_server_free(s);
  s = start(NULL, 1, 0, 0); /* --insecure-admin: the operator's choice */
  p = vr_server_port(s);
  assert_int_equal(sec_req(p, "POST", "/v2/repository/models/m/load", NULL, "",
                           b, sizeof b), 200);
  vr_server_free(s);
}

static void test_infer_auth(void **st) {
  (void)st;
  vr_server *s = start("s3cret-token", 0, 1, 0);
  int p = vr_server_port(s);
  char b[4096];
  assert_int_equal(sec_req(p, "POST", "/v2/repository/models/m/load", k_auth,
                           "", b, sizeof b), 200);
  const char *q = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
                  "\"shape\":[1,4],\"data\":[1,2,3,4]}]}";
  assert_int_equal(sec_req(p, "POST", "/v2/models/m/infer", NULL, q, b, sizeof b), 401);
  assert_int_equal(sec_req(p, "GET", "/v2/models/m", NULL, NULL, b, sizeof b), 401);
  assert_int_equal(sec_req(p, "POST", "/v2/models/m/infer", k_auth, q, b, sizeof b), 200);
  assert_int_equal(sec_req(p, "GET", "/v2/health/ready", NULL, NULL, b, sizeof b), 200);
  assert_int_equal(sec_req(p, "GET", "/metrics", NULL, NULL, b, sizeof b), 200);
  vr_server_free(s);
}

/* Each registration/load starts a thread: past max_admin_jobs, 429. */
static void test_admin_job_cap(void **st) {
  (void)st;
  g_fake.base_us = 100000; /* profiling takes a while: the job stays open */
  vr_server *s = start("s3cret-token", 0, 0, 1);
  int p = vr_server_port(s);
  char buf[512], b[4096];
  int n = snprintf(buf, sizeof buf, "POST /v2/repository/models/m/load HTTP/1.1\r\n"
                   "Host: x\r\nContent-Length: 0\r\n%s\r\n", k_auth);
  int fd = sec_connect(p);
  assert_true(send(fd, buf, (size_t)n, MSG_NOSIGNAL) == n);
  for (int i = 0; i < 500 && __atomic_load_n(&s->admin_jobs, __ATOMIC_SEQ_CST) < 1; i++)
    usleep(10000); /* until the first load's thread runs */
  assert_int_equal(sec_req(p, "POST", "/v2/repository/models/m2/load", k_auth,
                           "", b, sizeof b), 429);
  assert_non_null(strstr(b, "retry later"));
  assert_int_equal(sec_read(fd, b, sizeof b), 200);
  close(fd);
  assert_int_equal(sec_req(p, "POST", "/v2/repository/models/m2/load", k_auth,
                           "", b, sizeof b), 200);
  g_fake.base_us = 100;
  vr_server_free(s);
}

static void test_ct_equal(void **st) {
  (void)st;
  assert_true(vr__ct_equal("abc", 3, "abc", 3));
  assert_false(vr__ct_equal("abc", 3, "abd", 3));
  assert_false(vr__ct_equal("abc", 3, "ab", 2));
  assert_false(vr__ct_equal("", 0, "a", 1));
  assert_true(vr__ct_equal("", 0, "", 0));
}

int main(void) {
  const struct CMUnitTest t[] = {
      cmocka_unit_test(test_token_required),
      cmocka_unit_test(test_no_token_means_off),
      cmocka_unit_test(test_infer_auth),
      cmocka_unit_test(test_admin_job_cap),
      cmocka_unit_test(test_ct_equal),
  };
  return cmocka_run_group_tests(t, setup, teardown);
}
