/*
 * The kubernetes provider against recorded API conversations
 * (tests/data/k8s/NAME.json, written by hand from the Kubernetes API
 * reference — not captured from a live cluster) replayed by a loopback
 * HTTPS server that checks every request: method, path, query, recorded
 * headers and JSON body. The server's certificate is made here with
 * openssl and given to the provider as its CA, so TLS verification is on.
 * The last tests show that the replay catches a wrong path, body, header
 * and method, and that a wrong CA fails the handshake.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "cluster/provider.h"
#include "cluster/provider_int.h"
#include "../support/k8s_conv.h"
#include "../support/k8s_replay.h"
#include "vr_test.h"

static char tmp[256], cert[300], key[300], other[300], tokf[300];
static char *cert_pem, *key_pem;
static int have_tls;

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *b = calloc(1, 65536);
  if (b) fread(b, 1, 65535, f);
  fclose(f);
  return b;
}

static void write_token(const char *t) {
  FILE *f = fopen(tokf, "w");
  assert_non_null(f);
  fprintf(f, "%s\n", t); /* the trailing newline must not reach the header */
  fclose(f);
}

static int setup(void **st) {
  snprintf(tmp, sizeof tmp, "/tmp/vr_k8s_XXXXXX");
  if (!mkdtemp(tmp)) return -1;
  snprintf(cert, sizeof cert, "%s/cert.pem", tmp);
  snprintf(key, sizeof key, "%s/key.pem", tmp);
  snprintf(other, sizeof other, "%s/other.pem", tmp);
  snprintf(tokf, sizeof tokf, "%s/token", tmp);
  char cmd[1600];
  /* Throwaway certificates (never committed): the server's, valid for
   * 127.0.0.1, and an unrelated one to act as a wrong CA. */
  snprintf(cmd, sizeof cmd,
           "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1"
           " -nodes -keyout %s -out %s -days 1 -subj /CN=127.0.0.1"
           " -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1 &&"
           " openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1"
           " -nodes -keyout %s/other.key -out %s -days 1 -subj /CN=127.0.0.1"
           " -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
           key, cert, tmp, other);
  have_tls = system(cmd) == 0;
  if (have_tls) {
    cert_pem = slurp(cert);
    key_pem = slurp(key);
    have_tls = cert_pem && key_pem;
  }
  return 0;
}

static int teardown(void **st) {
  free(cert_pem);
  free(key_pem);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  return system(cmd) == 0 ? 0 : -1;
}

typedef struct {
  vr_kc_conv conv;
  vr_kr_server *srv;
  vr_provider *p;
  int port;
} rig;

static void load(rig *r, const char *name) {
  char path[1024], err[512];
  const char *src = getenv("VR_SOURCE_DIR");
  snprintf(path, sizeof path, "%s/tests/data/k8s/%s", src ? src : ".", name);
  if (vr_kc_load(path, &r->conv, err, sizeof err))
    fail_msg("%s: %s", path, err);
}

/* Starts the replay and a provider pointed at it; extra "key=value"
 * options override the defaults (later ones win). */
static void up(rig *r, const char *const *extra, size_t nextra) {
  if (!have_tls) skip();
  r->srv = vr_kr_start(&r->conv, cert_pem, key_pem, &r->port);
  if (!r->srv) skip(); /* libmicrohttpd without TLS */
  char api[64], t[320], ca[320];
  snprintf(api, sizeof api, "api=https://127.0.0.1:%d", r->port);
  snprintf(t, sizeof t, "token-file=%s", tokf);
  snprintf(ca, sizeof ca, "ca-file=%s", cert);
  const char *opts[16] = {api, t, ca, "namespace=vario",
                          "deployment=vario-worker", "timeout-ms=5000"};
  size_t n = 6;
  for (size_t i = 0; i < nextra && n < 16; i++) opts[n++] = extra[i];
  vr_errbuf err = {0};
  if (vr_provider_open("kubernetes", opts, n, &r->p, &err))
    fail_msg("open: %s", err.msg);
}

static void down(rig *r) {
  vr_provider_destroy(r->p);
  vr_kr_stop(r->srv);
  vr_kc_free(&r->conv);
}

static void all_matched(rig *r) {
  const char *e = vr_kr_error(r->srv);
  if (e) fail_msg("replay: %s", e);
  assert_int_equal(vr_kr_consumed(r->srv), r->conv.n);
}

static const char *replay_err(rig *r) {
  const char *e = vr_kr_error(r->srv);
  return e ? e : "no mismatch";
}

static const vr_worker_info *find(const vr_worker_info *ws, size_t n,
                                  const char *id) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(ws[i].id, id)) return &ws[i];
  fail_msg("no worker %s", id);
  return NULL;
}

static void test_scale_up_and_list(void **st) {
  rig r = {0};
  write_token("vario-test-token-1");
  load(&r, "scale_up.json");
  up(&r, NULL, 0);
  assert_string_equal(vr_provider_kind(r.p), "kubernetes");
  char id[64];
  vr_worker_spec s = {0};
  vr_errbuf err = {0};
  if (vr_provider_start(r.p, &s, id, sizeof id, &err))
    fail_msg("start: %s (replay: %s)", err.msg, replay_err(&r));
  assert_string_equal(id, "vario-worker#2");
  vr_worker_info *ws = NULL;
  size_t n = 0;
  assert_int_equal(vr_provider_list(r.p, &ws, &n, &err), 0);
  assert_int_equal(n, 2);
  const vr_worker_info *a = find(ws, n, "vario-worker-7d9f8c6b5d-x2k4p");
  const vr_worker_info *b = find(ws, n, "vario-worker-7d9f8c6b5d-q8v2n");
  assert_int_equal(a->state, VR_PW_RUNNING);
  assert_int_equal(a->unexpected, 0);
  assert_int_equal(a->pid, -1);
  assert_non_null(strstr(a->detail, "ip=10.244.1.7"));
  assert_non_null(strstr(a->detail, "node=node-a"));
  assert_int_equal(b->state, VR_PW_STARTING);
  assert_non_null(strstr(b->detail, "waiting=ContainerCreating"));
  /* since_ns: from creationTimestamp (no Ready transition time here),
   * mapped onto CLOCK_MONOTONIC, so in the past. */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t mono = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  assert_true(a->since_ns != 0 && a->since_ns <= mono);
  char aid[64];
  snprintf(aid, sizeof aid, "%s", a->id);
  vr_free(ws);
  assert_int_equal(vr_provider_forget(r.p, aid, &err), VR_ESTATE);
  assert_int_equal(vr_provider_forget(r.p, "nope", &err), VR_ENOENT);
  /* 2 replicas asked for, 1 pod listed (the ReplicaSet has not created
   * the other, or a quota refuses it): the missing one is reported as
   * starting, so the controller does not ask again at every tick */
  assert_int_equal(vr_provider_list(r.p, &ws, &n, &err), 0);
  assert_int_equal(n, 2);
  const vr_worker_info *pend = find(ws, n, "vario-worker#2");
  assert_int_equal(pend->state, VR_PW_STARTING);
  assert_true(pend->since_ns > 0);
  assert_non_null(strstr(pend->detail, "no pod listed yet"));
  vr_free(ws);
  all_matched(&r);
  down(&r);
}

static void test_conflict_retried(void **st) {
  rig r = {0};
  write_token("vario-test-token-1");
  load(&r, "conflict.json");
  up(&r, NULL, 0);
  char id[64];
  vr_worker_spec s = {0};
  vr_errbuf err = {0};
  if (vr_provider_start(r.p, &s, id, sizeof id, &err))
    fail_msg("start: %s (replay: %s)", err.msg, replay_err(&r));
  assert_string_equal(id, "vario-worker#4");
  all_matched(&r);
  down(&r);
}

static void test_stop_named_pod(void **st) {
  rig r = {0};
  write_token("vario-test-token-1");
  load(&r, "scale_down_pick.json");
  const char *x[] = {"pick-pod=1"};
  up(&r, x, 1);
  vr_errbuf err = {0};
  if (vr_provider_stop(r.p, "vario-worker-7d9f8c6b5d-x2k4p", &err))
    fail_msg("stop: %s (replay: %s)", err.msg, replay_err(&r));
  all_matched(&r);
  down(&r);
}

static void test_errors_and_bounds(void **st) {
  rig r = {0};
  write_token("vario-test-token-1");
  load(&r, "errors.json");
  const char *x[] = {"max-replicas=3"};
  up(&r, x, 1);
  char id[64];
  vr_worker_spec s = {0};
  vr_errbuf err = {0};
  assert_int_equal(vr_provider_start(r.p, &s, id, sizeof id, &err), VR_EIO);
  assert_non_null(strstr(err.msg, "HTTP 403"));
  assert_non_null(strstr(err.msg, "Forbidden"));
  assert_non_null(strstr(err.msg, "cannot get resource"));
  /* At the bound: refused without a PATCH (a PATCH would be a request
   * beyond the recording, which the replay reports). */
  assert_int_equal(vr_provider_start(r.p, &s, id, sizeof id, &err),
                   VR_ELIMIT);
  assert_non_null(strstr(err.msg, "max-replicas is 3"));
  all_matched(&r);
  down(&r);
}

static void test_pod_states_and_token_rotation(void **st) {
  rig r = {0};
  write_token("vario-test-token-1");
  load(&r, "pod_states.json");
  up(&r, NULL, 0);
  vr_worker_info *ws = NULL;
  size_t n = 0;
  vr_errbuf err = {0};
  assert_int_equal(vr_provider_list(r.p, &ws, &n, &err), 0);
  assert_int_equal(n, 5);
  assert_int_equal(find(ws, n, "w-ready")->state, VR_PW_RUNNING);
  assert_int_equal(find(ws, n, "w-warming")->state, VR_PW_STARTING);
  const vr_worker_info *c = find(ws, n, "w-crashing");
  assert_int_equal(c->state, VR_PW_STARTING);
  assert_int_equal(c->unexpected, 1);
  assert_int_equal(c->exit_code, 137);
  assert_non_null(strstr(c->detail, "restarts=2"));
  assert_non_null(strstr(c->detail, "CrashLoopBackOff"));
  assert_int_equal(find(ws, n, "w-leaving")->state, VR_PW_STOPPING);
  const vr_worker_info *f = find(ws, n, "w-failed");
  assert_int_equal(f->state, VR_PW_EXITED);
  assert_int_equal(f->unexpected, 1);
  assert_int_equal(f->exit_code, 1);
  assert_int_equal(find(ws, n, "w-ready")->unexpected, 0);
  assert_int_equal(find(ws, n, "w-ready")->since_ns, 0); /* no timestamps */
  vr_free(ws);
  /* stop() of the Failed pod: it no longer counts among the replicas, so
   * scaling down for it would take a healthy pod; nothing is scaled */
  if (vr_provider_stop(r.p, "w-failed", &err))
    fail_msg("stop failed pod: %s (replay: %s)", err.msg, replay_err(&r));
  /* forget() hides the Failed pod from later lists (the API keeps listing
   * it): stop() no longer finds it. */
  assert_int_equal(vr_provider_forget(r.p, "w-failed", &err), 0);
  assert_int_equal(vr_provider_stop(r.p, "w-failed", &err), VR_ENOENT);
  assert_non_null(strstr(err.msg, "app=vario-worker"));
  assert_int_equal(vr_provider_stop(r.p, "w-leaving", &err), 0);
  /* The kubelet rotated the token: the next request must carry it. */
  write_token("vario-test-token-2");
  if (vr_provider_stop(r.p, "vario-worker#5", &err))
    fail_msg("stop: %s (replay: %s)", err.msg, replay_err(&r));
  all_matched(&r);
  down(&r);
}

/* The replay must catch a provider that sends the wrong thing. */
static void expect_mismatch(rig *r, const char *needle) {
  char id[64];
  vr_worker_spec s = {0};
  vr_errbuf err = {0};
  assert_int_not_equal(vr_provider_start(r->p, &s, id, sizeof id, &err), 0);
  const char *e = vr_kr_error(r->srv);
  assert_non_null(e);
  if (!strstr(e, needle)) fail_msg("mismatch '%s' lacks '%s'", e, needle);
}

static void test_replay_catches_wrong_requests(void **st) {
  rig r = {0};
  /* wrong path: another deployment */
  write_token("vario-test-token-1");
  load(&r, "scale_up.json");
  const char *x[] = {"deployment=vario-workers"};
  up(&r, x, 1);
  expect_mismatch(&r, "path /apis/apps/v1/namespaces/vario/deployments/"
                      "vario-workers/scale");
  down(&r);
  /* wrong body: the recording expects 3 replicas, the provider sends 2 */
  memset(&r, 0, sizeof r);
  load(&r, "scale_up.json");
  json_object_set_new(json_object_get(r.conv.ex[1].body, "spec"), "replicas",
                      json_integer(3));
  up(&r, NULL, 0);
  expect_mismatch(&r, "body");
  assert_int_equal(vr_kr_consumed(r.srv), 1);
  down(&r);
  /* wrong header: another token */
  memset(&r, 0, sizeof r);
  write_token("not-the-token");
  load(&r, "scale_up.json");
  up(&r, NULL, 0);
  expect_mismatch(&r, "header Authorization");
  down(&r);
  write_token("vario-test-token-1");
  /* wrong method: recorded PUT */
  memset(&r, 0, sizeof r);
  load(&r, "scale_up.json");
  free(r.conv.ex[1].method);
  r.conv.ex[1].method = strdup("PUT");
  up(&r, NULL, 0);
  expect_mismatch(&r, "method PATCH, recorded PUT");
  down(&r);
}

static void test_tls_verified(void **st) {
  rig r = {0};
  write_token("vario-test-token-1");
  load(&r, "scale_up.json");
  char ca[320];
  snprintf(ca, sizeof ca, "ca-file=%s", other);
  const char *x[] = {ca};
  up(&r, x, 1);
  char id[64];
  vr_worker_spec s = {0};
  vr_errbuf err = {0};
  assert_int_equal(vr_provider_start(r.p, &s, id, sizeof id, &err), VR_EIO);
  assert_int_equal(vr_kr_consumed(r.srv), 0);
  down(&r);
}

static void test_options(void **st) {
  vr_provider *p = NULL;
  vr_errbuf err = {0};
  write_token("vario-test-token-1");
  char t[320], ca[320];
  snprintf(t, sizeof t, "token-file=%s", tokf);
  snprintf(ca, sizeof ca, "ca-file=%s", cert);
  struct {
    const char *opt, *needle;
  } bad[] = {
      {"namespace=Vario", "DNS label"},
      {"namespace=-x", "DNS label"},
      {"deployment=a..b", "DNS subdomain"},
      {"deployment=a/b", "DNS subdomain"},
      {"api=ftp://x", "https://"},
      {"max-replicas=0", "max-replicas"},
      {"pick-pod=perhaps", "boolean"},
      {"replicas=3", "unknown option"},
      {"token-file=/nonexistent/token", "token file"},
      {"ca-file=/nonexistent/ca.crt", "CA file"},
      {"selector=app=\x01", "selector"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    const char *o[] = {"api=https://127.0.0.1:1", t, ca, "namespace=vario",
                       bad[i].opt};
    memset(&err, 0, sizeof err);
    assert_int_equal(vr_provider_open("kubernetes", o, 5, &p, &err),
                     VR_EINVAL);
    assert_null(p);
    if (!strstr(err.msg, bad[i].needle))
      fail_msg("'%s': message '%s' lacks '%s'", bad[i].opt, err.msg,
               bad[i].needle);
  }
  /* min above max */
  const char *mm[] = {"api=https://127.0.0.1:1", t, ca, "namespace=vario",
                      "min-replicas=5", "max-replicas=2"};
  assert_int_equal(vr_provider_open("kubernetes", mm, 6, &p, &err),
                   VR_EINVAL);
  /* Not in a cluster and no api given. */
  unsetenv("KUBERNETES_SERVICE_HOST");
  const char *o[] = {t, ca, "namespace=vario"};
  assert_int_equal(vr_provider_open("kubernetes", o, 3, &p, &err), VR_EINVAL);
  assert_non_null(strstr(err.msg, "KUBERNETES_SERVICE_HOST"));
  /* In-cluster URL from the environment (IPv6 in brackets); nothing is
   * contacted at creation. */
  setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
  assert_int_equal(vr_provider_open("kubernetes", o, 3, &p, &err), 0);
  vr_provider_destroy(p);
  unsetenv("KUBERNETES_SERVICE_HOST");
  /* A config file. */
  char cfgp[320];
  snprintf(cfgp, sizeof cfgp, "%s/k8s.conf", tmp);
  FILE *f = fopen(cfgp, "w");
  assert_non_null(f);
  fprintf(f, "kind = kubernetes\napi = https://127.0.0.1:1\n%s\n%s\n"
          "namespace = vario\nselector = app=vario-worker,tier=cpu\n", t, ca);
  fclose(f);
  assert_int_equal(vr_provider_open_file(cfgp, &p, &err), 0);
  vr_provider_destroy(p);
}

static void test_parsers(void **st) {
  vr__k8s_scale s;
  vr_errbuf err = {0};
  const char *ok = "{\"kind\":\"Scale\",\"metadata\":{\"resourceVersion\":"
                   "\"7\"},\"spec\":{},\"status\":{\"replicas\":0}}";
  assert_int_equal(vr__k8s_parse_scale(ok, strlen(ok), &s, &err), 0);
  assert_int_equal(s.replicas, 0); /* omitted = 0 */
  assert_string_equal(s.resource_version, "7");
  const char *bad[] = {
      "", "[]", "{\"kind\":\"Pod\"}",
      "{\"kind\":\"Scale\",\"spec\":{\"replicas\":1}}",
      "{\"kind\":\"Scale\",\"metadata\":{\"resourceVersion\":\"1\"},"
      "\"spec\":{\"replicas\":-1}}",
      "{\"kind\":\"Scale\",\"metadata\":{\"resourceVersion\":\"1\"},"
      "\"spec\":{\"replicas\":\"2\"}}",
      "{\"kind\":\"Scale\",\"kind\":\"Scale\"}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    assert_int_equal(vr__k8s_parse_scale(bad[i], strlen(bad[i]), &s, &err),
                     VR_EFORMAT);
  vr_worker_info *ws;
  size_t n;
  const char *empty = "{\"kind\":\"PodList\",\"items\":null}";
  assert_int_equal(vr__k8s_parse_pods(empty, strlen(empty), &ws, &n, &err), 0);
  assert_int_equal(n, 0);
  const char *noname = "{\"kind\":\"PodList\",\"items\":[{\"metadata\":{}}]}";
  assert_int_equal(vr__k8s_parse_pods(noname, strlen(noname), &ws, &n, &err),
                   VR_EFORMAT);
  char msg[64];
  vr__k8s_status_msg("oops\n\x01", 6, msg, sizeof msg);
  assert_string_equal(msg, "oops..");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scale_up_and_list),
      cmocka_unit_test(test_conflict_retried),
      cmocka_unit_test(test_stop_named_pod),
      cmocka_unit_test(test_errors_and_bounds),
      cmocka_unit_test(test_pod_states_and_token_rotation),
      cmocka_unit_test(test_replay_catches_wrong_requests),
      cmocka_unit_test(test_tls_verified),
      cmocka_unit_test(test_options),
      cmocka_unit_test(test_parsers),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
