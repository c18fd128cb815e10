/*
 * The local provider with the real `vario worker` (not a stand-in): the
 * worker it spawns listens, answers health and model metadata over
 * HTTP, runs on exactly the cores the provider pinned it to, drains and
 * exits 0 on stop(), and a SIGKILL from outside shows as an unexpected
 * exit. Skipped (with the reason) when the binary's `worker` command does
 * not take the provider's flags yet.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "cluster/provider.h"
#include "provider_util.h"
#include "server/httpc.h"
#include "vr_test.h"

static char tmp[256], vario[1024];

/* Reads the port the worker wrote (up to 90 s: a sanitised build loads
 * the model slowly on a busy machine). */
static int wait_port(const char *path, vr_provider *p, const char *id) {
  for (int64_t t0 = now_ms(); now_ms() - t0 < 90000; sleep_ms(50)) {
    FILE *f = fopen(path, "r");
    int port = 0;
    if (f) {
      if (fscanf(f, "%d", &port) != 1) port = 0;
      fclose(f);
    }
    if (port > 0) return port;
    if (provider_get(p, id).state == VR_PW_EXITED) fail_msg("worker %s exited", id);
  }
  fail_msg("worker %s wrote no port", id);
  return -1;
}

static void test_real_worker(void **st) {
  const char *bin = getenv("VR_BINARY_DIR");
  snprintf(vario, sizeof vario, "%s/vario", bin ? bin : ".");
  if (access(vario, X_OK)) skip();
  char cmd[1400], help[8192] = {0};
  snprintf(cmd, sizeof cmd, "'%s' worker --help 2>&1", vario);
  FILE *h = popen(cmd, "r");
  assert_non_null(h);
  size_t got = fread(help, 1, sizeof help - 1, h);
  help[got] = 0;
  pclose(h);
  if (!strstr(help, "--worker-id") || !strstr(help, "--cores")) {
    print_message("skip: `vario worker` takes no --worker-id/--cores yet\n");
    skip();
  }
  snprintf(tmp, sizeof tmp, "/tmp/vr_provw_XXXXXX");
  assert_non_null(mkdtemp(tmp));
  const char *src = getenv("VR_SOURCE_DIR");
  snprintf(cmd, sizeof cmd, "mkdir -p '%s/repo' && cp -r '%s/models/fmnist/"
           "fmnist_linear' '%s/repo/'", tmp, src ? src : ".", tmp);
  assert_int_equal(system(cmd), 0);

  vr_local_cfg cfg = {0};
  cfg.binary = vario;
  cfg.log_dir = tmp;
  cfg.grace_ms = 30000;
  cfg.share_cores = 1;
  cfg.die_with_parent = 1;
  vr_provider *p = NULL;
  vr_errbuf err = {0};
  if (vr_provider_local(&cfg, &p, &err)) fail_msg("%s", err.msg);

  char repo[300], pf[300];
  snprintf(repo, sizeof repo, "%s/repo", tmp);
  snprintf(pf, sizeof pf, "%s/w1.port", tmp);
  const char *args[] = {"--repo", repo, "--port", "0", "--port-file", pf};
  vr_worker_spec s = {0};
  s.name = "w1";
  s.ncpus = 1;
  s.args = args;
  s.nargs = 6;
  char id[64];
  if (vr_provider_start(p, &s, id, sizeof id, &err))
    fail_msg("start: %s", err.msg);
  int port = wait_port(pf, p, id);
  vr_worker_info w = provider_get(p, id);
  assert_int_equal(w.state, VR_PW_RUNNING);

  /* It serves. */
  vr_httpc c;
  assert_int_equal(vr_httpc_open(&c, "127.0.0.1", port, &err), 0);
  vr_httpc_resp r;
  assert_int_equal(vr_httpc_request(&c, "GET", "/v2/health/live", NULL, NULL,
                                    0, &r, &err), 0);
  assert_int_equal(r.head.status, 200);
  int ready = 0;
  for (int64_t t0 = now_ms(); !ready && now_ms() - t0 < 60000; sleep_ms(50)) {
    assert_int_equal(vr_httpc_request(&c, "GET", "/v2/models/fmnist_linear/"
                                      "ready", NULL, NULL, 0, &r, &err), 0);
    ready = r.head.status == 200;
  }
  assert_true(ready);
  vr_httpc_close(&c);

  /* On the cores the provider gave it: the kernel's view of the process
   * (every thread inherits the mask set before exec). */
  char path[64], line[256], allowed[128] = "";
  snprintf(path, sizeof path, "/proc/%lld/status", (long long)w.pid);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "Cpus_allowed_list: %127s", allowed) == 1) break;
  fclose(f);
  assert_string_equal(allowed, w.cores);

  /* stop(): SIGTERM, the worker drains and exits 0 well within grace. */
  assert_int_equal(vr_provider_stop(p, id, NULL), 0);
  w = provider_wait_state(p, id, VR_PW_EXITED, 25000, 20);
  assert_int_equal(w.term_signal, 0);
  assert_int_equal(w.exit_code, 0);
  assert_int_equal(w.unexpected, 0);

  /* A worker killed from outside: noticed as unexpected. */
  snprintf(pf, sizeof pf, "%s/w2.port", tmp);
  s.name = "w2";
  if (vr_provider_start(p, &s, id, sizeof id, &err))
    fail_msg("start: %s", err.msg);
  wait_port(pf, p, id);
  assert_int_equal(kill((pid_t)provider_get(p, id).pid, SIGKILL), 0);
  w = provider_wait_state(p, id, VR_PW_EXITED, 10000, 20);
  assert_int_equal(w.term_signal, SIGKILL);
  assert_int_equal(w.unexpected, 1);
  vr_provider_destroy(p);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_real_worker)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
