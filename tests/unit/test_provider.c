/*
 * The local worker provider against real processes (worker_probe, a
 * stand-in for `vario worker` that records what it was given): core
 * pinning, argv/env, log capture, descriptor hygiene, stop with SIGTERM,
 * SIGKILL after the grace period, unexpected exits, spawn errors, limits,
 * and the option / config-file front door.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "cluster/provider.h"
#include "cluster/provider_int.h"
#include "provider_util.h"
#include "vr_test.h"

#ifndef VR_WORKER_PROBE
#error "VR_WORKER_PROBE must name the worker_probe binary"
#endif

static char tmpdir[256];
static int cpus[2], ncpus; /* up to two CPUs this process may use */

static int setup(void **st) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/vr_provider_XXXXXX");
  assert_non_null(mkdtemp(tmpdir));
  cpu_set_t set;
  assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
  ncpus = 0;
  for (int c = 0; c < CPU_SETSIZE && ncpus < 2; c++)
    if (CPU_ISSET(c, &set)) cpus[ncpus++] = c;
  return 0;
}

static int teardown(void **st) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

/* A provider of probes logging to log_dir. */
static vr_provider *mk_in(const char *log_dir, int grace_ms, int share, const int *pool,
                          size_t np) {
  static const char *pre[] = {"worker"};
  vr_local_cfg cfg = {0};
  cfg.binary = VR_WORKER_PROBE;
  cfg.argv_prefix = pre;
  cfg.nprefix = 1;
  cfg.log_dir = log_dir;
  cfg.grace_ms = grace_ms;
  cfg.pool = pool;
  cfg.npool = np;
  cfg.share_cores = share;
  cfg.die_with_parent = 1; /* a failed test leaves no probes behind */
  vr_provider *p = NULL;
  vr_errbuf err = {0};
  int rc = vr_provider_local(&cfg, &p, &err);
  if (rc) fail_msg("vr_provider_local: %s", err.msg);
  return p;
}

static vr_provider *mk(int grace_ms, int share, const int *pool, size_t np) {
  return mk_in(tmpdir, grace_ms, share, pool, np);
}

/* Reads key's value from OUT/ID.info, waiting up to 10 s for the file. */
static int info_get(const char *id, const char *key, char *val, size_t cap) {
  char path[512], line[1024];
  snprintf(path, sizeof path, "%s/%s.info", tmpdir, id);
  FILE *f = NULL;
  for (int64_t t0 = now_ms(); !(f = fopen(path, "r"));) {
    if (now_ms() - t0 > 10000) return -1;
    sleep_ms(5);
  }
  size_t kl = strlen(key);
  int found = -1;
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, key, kl) && line[kl] == '=') {
      line[strcspn(line, "\n")] = 0;
      snprintf(val, cap, "%s", line + kl + 1);
      found = 0;
      break;
    }
  }
  fclose(f);
  return found;
}

static void test_start_pin_stop(void **st) {
  vr_provider *p = mk(5000, ncpus < 2, cpus, (size_t)ncpus);
  const char *extra[] = {"--out", tmpdir};
  vr_worker_spec s = {0};
  s.ncpus = 1;
  s.controller_url = "http://127.0.0.1:9/";
  s.mem_bytes = 1 << 20;
  s.args = extra;
  s.nargs = 2;
  char a[64], b[64], v[1024];
  /* A descriptor without O_CLOEXEC must still not reach the worker. */
  int leak = open("/dev/null", O_RDONLY);
  assert_true(leak >= 0);
  assert_int_equal(vr_provider_start(p, &s, a, sizeof a, NULL), 0);
  close(leak);
  assert_string_equal(a, "local-1");
  s.name = "w-b";
  assert_int_equal(vr_provider_start(p, &s, b, sizeof b, NULL), 0);
  assert_string_equal(b, "w-b");

  vr_worker_info wa = provider_get(p, a), wb = provider_get(p, b);
  assert_int_equal(wa.state, VR_PW_RUNNING);
  assert_true(wa.pid > 0 && wb.pid > 0 && wa.pid != wb.pid);
  /* Each probe reports its own pid, the cores list() shows as its
   * affinity, and distinct cores when two are available. */
  assert_int_equal(info_get(a, "pid", v, sizeof v), 0);
  assert_int_equal(atoll(v), wa.pid);
  assert_int_equal(info_get(a, "affinity", v, sizeof v), 0);
  assert_string_equal(v, wa.cores);
  assert_int_equal(info_get(b, "affinity", v, sizeof v), 0);
  assert_string_equal(v, wb.cores);
  if (ncpus >= 2) assert_string_not_equal(wa.cores, wb.cores);
  /* Own process group. */
  assert_int_equal(info_get(a, "pgid", v, sizeof v), 0);
  assert_int_equal(atoll(v), wa.pid);
  /* Command line and environment. */
  char want[1024];
  snprintf(want, sizeof want, "worker --worker-id %s --controller "
           "http://127.0.0.1:9/ --cores %s --mem-bytes 1048576 --out %s",
           a, wa.cores, tmpdir);
  assert_int_equal(info_get(a, "argv", v, sizeof v), 0);
  assert_string_equal(v, want);
  assert_int_equal(info_get(b, "VARIO_WORKER_ID", v, sizeof v), 0);
  assert_string_equal(v, "w-b");
  assert_int_equal(info_get(b, "VARIO_WORKER_CORES", v, sizeof v), 0);
  assert_string_equal(v, wb.cores);
  assert_int_equal(info_get(b, "VARIO_CONTROLLER", v, sizeof v), 0);
  assert_string_equal(v, "http://127.0.0.1:9/");
  assert_int_equal(info_get(b, "VARIO_WORKER_MEM_BYTES", v, sizeof v), 0);
  assert_string_equal(v, "1048576");
  assert_int_equal(info_get(a, "fds", v, sizeof v), 0);
  assert_string_equal(v, "");

  /* Duplicate and malformed ids. */
  vr_errbuf err = {0};
  char c[64];
  assert_int_equal(vr_provider_start(p, &s, c, sizeof c, &err), VR_EEXIST);
  s.name = "../etc";
  assert_int_equal(vr_provider_start(p, &s, c, sizeof c, &err), VR_EINVAL);
  assert_non_null(strstr(err.msg, "bad worker id"));

  /* Stop: SIGTERM, the probe exits 0; an expected exit. */
  assert_int_equal(vr_provider_stop(p, a, NULL), 0);
  assert_int_equal(provider_get(p, a).state == VR_PW_STOPPING ||
                   provider_get(p, a).state == VR_PW_EXITED, 1);
  wa = provider_wait_state(p, a, VR_PW_EXITED, 10000, 5);
  assert_int_equal(wa.exit_code, 0);
  assert_int_equal(wa.term_signal, 0);
  assert_int_equal(wa.unexpected, 0);
  assert_int_equal(provider_get(p, b).state, VR_PW_RUNNING);
  /* The log holds both streams. */
  char path[512], log[4096] = {0};
  snprintf(path, sizeof path, "%s/%s.log", tmpdir, a);
  assert_string_equal(wa.detail, path);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t got = fread(log, 1, sizeof log - 1, f);
  fclose(f);
  assert_true(got > 0);
  assert_non_null(strstr(log, "probe local-1 started"));
  assert_non_null(strstr(log, "probe local-1 stderr line"));
  assert_non_null(strstr(log, "probe local-1 got SIGTERM"));
  /* Its core is free again: a new worker may take it. */
  s.name = NULL;
  assert_int_equal(vr_provider_start(p, &s, c, sizeof c, NULL), 0);
  assert_string_equal(provider_get(p, c).cores, wa.cores);
  /* forget() only for exited workers. */
  assert_int_equal(vr_provider_forget(p, b, &err), VR_ESTATE);
  assert_int_equal(vr_provider_forget(p, a, NULL), 0);
  assert_int_equal(provider_get(p, a).state, -1);
  assert_int_equal(vr_provider_stop(p, a, &err), VR_ENOENT);

  /* destroy() stops what runs. */
  pid_t pb = (pid_t)provider_get(p, b).pid, pc = (pid_t)provider_get(p, c).pid;
  vr_provider_destroy(p);
  assert_int_equal(kill(pb, 0), -1);
  assert_int_equal(kill(pc, 0), -1);
}

static void test_unexpected_exit(void **st) {
  vr_provider *p = mk(5000, 1, cpus, 1);
  const char *extra[] = {"--out", tmpdir, "--exit-after-ms", "30",
                         "--exit-code", "3"};
  vr_worker_spec s = {0};
  s.name = "crash";
  s.args = extra;
  s.nargs = 6;
  char id[64];
  assert_int_equal(vr_provider_start(p, &s, id, sizeof id, NULL), 0);
  vr_worker_info w = provider_wait_state(p, id, VR_PW_EXITED, 10000, 5);
  assert_int_equal(w.exit_code, 3);
  assert_int_equal(w.unexpected, 1);
  /* And one killed from outside. */
  const char *extra2[] = {"--out", tmpdir};
  s.name = "killed";
  s.args = extra2;
  s.nargs = 2;
  assert_int_equal(vr_provider_start(p, &s, id, sizeof id, NULL), 0);
  char v[64];
  assert_int_equal(info_get(id, "pid", v, sizeof v), 0);
  assert_int_equal(kill((pid_t)atoll(v), SIGKILL), 0);
  w = provider_wait_state(p, id, VR_PW_EXITED, 10000, 5);
  assert_int_equal(w.term_signal, SIGKILL);
  assert_int_equal(w.exit_code, -1);
  assert_int_equal(w.unexpected, 1);
  vr_provider_destroy(p);
}

/* A worker that died since the last list() and is then asked to stop
 * died unexpectedly: the controller must count it and deregister it at
 * once, not take it for the stop it asked for. */
static void test_stop_after_death(void **st) {
  vr_provider *p = mk(5000, 1, cpus, 1);
  const char *extra[] = {"--out", tmpdir, "--exit-after-ms", "1", "--exit-code", "4"};
  vr_worker_spec s = {0};
  s.name = "gone";
  s.args = extra;
  s.nargs = 6;
  char id[64], v[64];
  assert_int_equal(vr_provider_start(p, &s, id, sizeof id, NULL), 0);
  assert_int_equal(info_get(id, "pid", v, sizeof v), 0);
  pid_t pid = (pid_t)atoll(v);
  /* exited (a zombie until reaped): kill(0) still finds it */
  for (int64_t t0 = now_ms(); now_ms() - t0 < 10000; sleep_ms(5)) {
    char stat[64], buf[256] = {0};
    snprintf(stat, sizeof stat, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(stat, "r");
    if (f) {
      if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
      fclose(f);
    }
    char *rp = strrchr(buf, ')');
    if (rp && rp[1] == ' ' && rp[2] == 'Z') break;
  }
  assert_int_equal(vr_provider_stop(p, id, NULL), 0);
  vr_worker_info w = provider_wait_state(p, id, VR_PW_EXITED, 10000, 5);
  assert_int_equal(w.exit_code, 4);
  assert_int_equal(w.unexpected, 1);
  vr_provider_destroy(p);
}

/* A worker left running by an earlier controller (it crashed) is adopted
 * by the next one's provider: listed, its cores taken, stopped on demand,
 * its death noticed; a process that is not that worker, or not one this
 * provider's configuration started, is refused. */
static void test_adopt(void **st) {
  vr_provider *old = mk_in(tmpdir, 5000, 0, cpus, 1);
  const char *extra[] = {"--out", tmpdir};
  vr_worker_spec s = {0};
  s.name = "left";
  s.args = extra;
  s.nargs = 2;
  char id[64], v[64];
  assert_int_equal(vr_provider_start(old, &s, id, sizeof id, NULL), 0);
  s.name = "left2";
  s.ncpus = 0;
  vr_provider *old2 = mk_in(tmpdir, 5000, 0, cpus, 1); /* a second one: the pool's core is taken */
  assert_int_equal(vr_provider_start(old2, &s, id, sizeof id, NULL), 0);
  vr_worker_info w1 = provider_get(old, "left"), w2 = provider_get(old2, "left2");
  assert_int_equal(info_get("left", "pid", v, sizeof v), 0);
  assert_int_equal(info_get("left2", "pid", v, sizeof v), 0);

  vr_provider *p = mk_in(tmpdir, 5000, 0, cpus, 1);
  vr_errbuf err = {0};
  assert_int_equal(vr_provider_adopt(p, "left", w1.pid, w1.cores, &err), 0);
  vr_worker_info a = provider_get(p, "left");
  assert_int_equal(a.state, VR_PW_RUNNING);
  assert_int_equal(a.pid, w1.pid);
  assert_string_equal(a.cores, w1.cores);
  /* its core counts as taken: nothing left in a one-core pool */
  s.name = "new";
  assert_int_equal(vr_provider_start(p, &s, id, sizeof id, &err), VR_ELIMIT);
  /* refusals */
  assert_int_equal(vr_provider_adopt(p, "left", w1.pid, w1.cores, &err), VR_EEXIST);
  assert_int_equal(vr_provider_adopt(p, "other", w1.pid, "", &err), VR_ENOENT);
  assert_int_equal(vr_provider_adopt(p, "me", getpid(), "", &err), VR_ENOENT);
  assert_int_equal(vr_provider_adopt(p, "../x", w1.pid, "", &err), VR_EINVAL);
  assert_int_equal(vr_provider_adopt(p, "left2", w2.pid, "0-", &err), VR_EINVAL);
  char other[300];
  snprintf(other, sizeof other, "%s/elsewhere", tmpdir);
  assert_int_equal(mkdir(other, 0755), 0);
  vr_provider *q = mk_in(other, 5000, 0, cpus, 1);
  assert_int_equal(vr_provider_adopt(q, "left2", w2.pid, w2.cores, &err), VR_ENOENT);
  assert_non_null(strstr(err.msg, "not started by this provider"));
  vr_provider_destroy(q);
  /* stop: an expected exit, seen although the process is not our child's
   * child (old started it; here a zombie until old reaps it) */
  assert_int_equal(vr_provider_stop(p, "left", NULL), 0);
  a = provider_wait_state(p, "left", VR_PW_EXITED, 10000, 5);
  assert_int_equal(a.unexpected, 0);
  /* a death nobody asked for */
  assert_int_equal(vr_provider_adopt(p, "left2", w2.pid, w2.cores, &err), 0);
  assert_int_equal(kill((pid_t)w2.pid, SIGKILL), 0);
  a = provider_wait_state(p, "left2", VR_PW_EXITED, 10000, 5);
  assert_int_equal(a.unexpected, 1);
  vr_provider_destroy(p);
  vr_provider_destroy(old);
  vr_provider_destroy(old2);
}

static void test_sigkill_after_grace(void **st) {
  vr_provider *p = mk(200, 1, cpus, 1);
  const char *extra[] = {"--out", tmpdir, "--ignore-term"};
  vr_worker_spec s = {0};
  s.name = "stubborn";
  s.args = extra;
  s.nargs = 3;
  char id[64], v[64];
  assert_int_equal(vr_provider_start(p, &s, id, sizeof id, NULL), 0);
  /* The probe must have installed SIG_IGN before we signal it. */
  assert_int_equal(info_get(id, "pid", v, sizeof v), 0);
  sleep_ms(50);
  int64_t t0 = now_ms();
  assert_int_equal(vr_provider_stop(p, id, NULL), 0);
  vr_worker_info w = provider_wait_state(p, id, VR_PW_EXITED, 10000, 5);
  assert_true(now_ms() - t0 >= 200); /* not before the grace period */
  assert_int_equal(w.term_signal, SIGKILL);
  assert_int_equal(w.unexpected, 0);
  vr_provider_destroy(p);
}

static void test_errors(void **st) {
  vr_errbuf err = {0};
  vr_provider *p = NULL;
  /* A binary that is not there: refused at creation. */
  vr_local_cfg cfg = {0};
  cfg.binary = "/nonexistent/vario";
  cfg.log_dir = tmpdir;
  assert_int_equal(vr_provider_local(&cfg, &p, &err), VR_EINVAL);
  assert_non_null(strstr(err.msg, "/nonexistent/vario"));
  /* One that exists but cannot be exec'd (a directory is not X_OK-proof:
   * use a non-ELF executable file): start() fails synchronously. */
  char bad[512];
  snprintf(bad, sizeof bad, "%s/notelf", tmpdir);
  FILE *f = fopen(bad, "w");
  assert_non_null(f);
  fputs("\x7f" "garbage", f);
  fclose(f);
  assert_int_equal(chmod(bad, 0755), 0);
  cfg.binary = bad;
  assert_int_equal(vr_provider_local(&cfg, &p, &err), 0);
  vr_worker_spec s = {0};
  char id[64];
  assert_int_equal(vr_provider_start(p, &s, id, sizeof id, &err), VR_EIO);
  assert_non_null(strstr(err.msg, "exec"));
  vr_worker_info *ws;
  size_t n = 9;
  assert_int_equal(vr_provider_list(p, &ws, &n, NULL), 0);
  assert_int_equal(n, 0);
  vr_provider_destroy(p);

  /* Two consecutive cores are written as a range, the form --cores
   * takes (a comma list of a wide worker was cut at 63 bytes). */
  if (ncpus >= 2 && cpus[1] == cpus[0] + 1) {
    p = mk(5000, 0, cpus, 2);
    s.ncpus = 2;
    assert_int_equal(vr_provider_start(p, &s, id, sizeof id, &err), 0);
    char want[32];
    snprintf(want, sizeof want, "%d-%d", cpus[0], cpus[1]);
    assert_string_equal(provider_get(p, id).cores, want);
    vr_provider_destroy(p);
    s.ncpus = 0;
  }
  /* Pool of one core, no sharing: the second worker does not fit. */
  p = mk(5000, 0, cpus, 1);
  const char *extra[] = {"--out", tmpdir};
  s.args = extra;
  s.nargs = 2;
  assert_int_equal(vr_provider_start(p, &s, id, sizeof id, NULL), 0);
  assert_int_equal(vr_provider_start(p, &s, id, sizeof id, &err), VR_ELIMIT);
  assert_non_null(strstr(err.msg, "share-cores"));
  s.ncpus = 2;
  assert_int_equal(vr_provider_start(p, &s, id, sizeof id, &err), VR_ELIMIT);
  int outside = VR_PROV_MAX_CPU;
  s.cores = &outside;
  s.ncores = 1;
  assert_int_equal(vr_provider_start(p, &s, id, sizeof id, &err), VR_EINVAL);
  assert_non_null(strstr(err.msg, "pool"));
  vr_provider_destroy(p);
}

static void test_options(void **st) {
  vr_errbuf err = {0};
  vr_provider *p = NULL;
  char pool[32], logd[300];
  snprintf(pool, sizeof pool, "pool=%d", cpus[0]);
  snprintf(logd, sizeof logd, "log-dir=%s/logs/sub", tmpdir);
  const char *ok[] = {"binary=" VR_WORKER_PROBE, "arg=worker", logd,
                      "grace-ms=300", pool, "share-cores=yes",
                      "die-with-parent=1"};
  assert_int_equal(vr_provider_open("local", ok, 7, &p, &err), 0);
  assert_string_equal(vr_provider_kind(p), "local");
  vr_provider_destroy(p);
  char sub[320];
  snprintf(sub, sizeof sub, "%s/logs/sub", tmpdir);
  struct stat sb;
  assert_int_equal(stat(sub, &sb), 0); /* created */

  struct {
    const char *opt, *needle;
  } bad[] = {
      {"grace-ms=abc", "grace-ms"},  {"grace-ms=0", "grace-ms"},
      {"pool=1-0", "CPU list"},      {"pool=0,0", "twice"},
      {"pool=", "empty"},            {"pool=0-99999", "CPU list"},
      {"share-cores=maybe", "boolean"}, {"colour=blue", "unknown option"},
      {"=x", "key=value"},           {"novalue", "key=value"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    const char *o[] = {"binary=" VR_WORKER_PROBE, bad[i].opt};
    memset(&err, 0, sizeof err);
    assert_int_equal(vr_provider_open("local", o, 2, &p, &err), VR_EINVAL);
    assert_null(p);
    if (!strstr(err.msg, bad[i].needle))
      fail_msg("'%s': message '%s' lacks '%s'", bad[i].opt, err.msg,
               bad[i].needle);
  }
  assert_int_equal(vr_provider_open("ec2", NULL, 0, &p, &err), VR_EINVAL);
  assert_non_null(strstr(err.msg, "unknown provider 'ec2'"));

  int cpu[8];
  size_t n;
  assert_int_equal(vr__prov_parse_cpus("0-2,5,7-7", cpu, 8, &n, NULL), 0);
  assert_int_equal(n, 5);
  assert_int_equal(cpu[3], 5);
  assert_int_equal(cpu[4], 7);
  assert_int_equal(vr__prov_parse_cpus("0-8", cpu, 8, &n, &err), VR_EINVAL);
  assert_int_equal(vr__prov_parse_cpus("1,", cpu, 8, &n, &err), VR_EINVAL);
  assert_int_equal(vr__prov_parse_cpus("-1", cpu, 8, &n, &err), VR_EINVAL);

  /* Config file: comments, blanks, spaces around '='. */
  char cfgp[300];
  snprintf(cfgp, sizeof cfgp, "%s/prov.conf", tmpdir);
  FILE *f = fopen(cfgp, "w");
  assert_non_null(f);
  fprintf(f, "# local workers\n\nkind = local\nbinary = %s  # probe\n"
          "grace-ms=250\n", VR_WORKER_PROBE);
  fclose(f);
  assert_int_equal(vr_provider_open_file(cfgp, &p, &err), 0);
  vr_provider_destroy(p);
  f = fopen(cfgp, "w");
  fprintf(f, "binary = /bin/true\n");
  fclose(f);
  assert_int_equal(vr_provider_open_file(cfgp, &p, &err), VR_EFORMAT);
  assert_non_null(strstr(err.msg, "kind"));
  f = fopen(cfgp, "w");
  fprintf(f, "kind = local\njust words\n");
  fclose(f);
  assert_int_equal(vr_provider_open_file(cfgp, &p, &err), VR_EFORMAT);
  assert_non_null(strstr(err.msg, "line 2"));
  assert_int_equal(vr_provider_open_file("/nonexistent.conf", &p, &err),
                   VR_ENOENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_start_pin_stop),
      cmocka_unit_test(test_unexpected_exit),
      cmocka_unit_test(test_sigkill_after_grace),
      cmocka_unit_test(test_stop_after_death),
      cmocka_unit_test(test_adopt),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_options),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
