#define _GNU_SOURCE
/* Shadows in another process (runtime/shm_pair.h, vr_pair_attach_process):
 * the job checks a shadow applies to what another process wrote; a body
 * paired with a `vario shadow` process computes bit for bit what the
 * unpaired model computes for every b_B/b_S; a shadow process killed
 * mid-service loses no request (its rows re-run on the body) and is
 * released; a shadow that cannot load is reported, not waited for. */
#include <pthread.h>
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "pair_fx.h"
#include "runtime/pair.h"
#include "runtime/shm_pair.h"
#include "vr_test.h"
#include "watchdog.h"

static const char *bin_exe(const char *name) {
  static char b[2][1024];
  static int k;
  const char *d = getenv("VR_BINARY_DIR");
  k = !k;
  snprintf(b[k], sizeof b[k], "%s/%s", d ? d : ".", name);
  return b[k];
}
static const char *vario_exe(void) { return bin_exe("vario"); }

/* Whether process pid has a library whose path holds `lib` mapped. */
static int maps_lib(int pid, const char *lib) {
  char path[64], line[1024];
  snprintf(path, sizeof path, "/proc/%d/maps", pid);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, lib) != NULL;
  fclose(f);
  return found;
}

static void test_check_job(void **st) {
  (void)st;
  vr__shm_job j = {2, VR_DT_F32, 2, {2, 3}, 24, "x"};
  vr_errbuf e = {0};
  assert_int_equal(vr__shm_check_job(&j, 24, &e), 0);
  assert_int_equal(vr__shm_check_job(&j, 23, &e), VR_EFORMAT); /* does not fit */
  vr__shm_job k = j;
  k.nbytes = 20;
  assert_int_equal(vr__shm_check_job(&k, 1024, &e), VR_EFORMAT);
  k = j, k.dtype = 99;
  assert_int_equal(vr__shm_check_job(&k, 1024, &e), VR_EFORMAT);
  k = j, k.ndim = 0;
  assert_int_equal(vr__shm_check_job(&k, 1024, &e), VR_EFORMAT);
  k = j, k.ndim = VR_MAX_DIMS + 1;
  assert_int_equal(vr__shm_check_job(&k, 1024, &e), VR_EFORMAT);
  k = j, k.shape[0] = 3; /* rows disagree */
  assert_int_equal(vr__shm_check_job(&k, 1024, &e), VR_EFORMAT);
  k = j, k.shape[1] = -3, k.nbytes = (uint64_t)-24;
  assert_int_equal(vr__shm_check_job(&k, 1024, &e), VR_EFORMAT);
  k = j, k.shape[1] = INT64_MAX / 2; /* overflow guarded by the cap */
  assert_int_equal(vr__shm_check_job(&k, 1024, &e), VR_EFORMAT);
  k = j;
  memset(k.name, 'a', sizeof k.name);
  assert_int_equal(vr__shm_check_job(&k, 1024, &e), VR_EFORMAT);
  /* a region that is not a channel is refused */
  vr_shm_chan *c;
  assert_int_equal(vr_shm_chan_create(0, 8, &c, &e), VR_ERANGE);
  int fd = memfd_create("junk", 0);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, 65536), 0);
  assert_int_equal(vr_shm_chan_open(fd, &c, &e), VR_EFORMAT);
  close(fd);
}

/* Open descriptors of process pid whose target holds `what`. */
static int fds_to(int pid, const char *what) {
  char dir[64], lnk[512], tgt[512];
  snprintf(dir, sizeof dir, "/proc/%d/fd", pid);
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *de; (de = readdir(d));) {
    snprintf(lnk, sizeof lnk, "%s/%s", dir, de->d_name);
    ssize_t k = readlink(lnk, tgt, sizeof tgt - 1);
    if (k <= 0) continue;
    tgt[k] = 0;
    n += strstr(tgt, what) != NULL;
  }
  closedir(d);
  return n;
}

/* exe: `vario` or `vario-shadow`, both started as `EXE shadow ...`;
 * file: the shadow loads the ONNX file (1) or takes the packed slice (0:
 * what bodies do) */
static void process_shadow_with(const char *exe, int file) {
  pair_fx f = {0};
  pair_fx_setup(&f);
  vr_pair *p;
  vr_errbuf e = {0};
  if (vr_pair_create(f.m, f.pb, f.pe, 1, f.batch, &p, &e)) fail_msg("%s", e.msg);
  double ms = -1;
  int64_t body0 = vr_pair_body_bytes(p);
  if (vr_pair_attach_process(p, exe, file ? f.path : NULL, 1, 30000000000LL, &ms, &e))
    fail_msg("%s", e.msg);
  /* the pack the body keeps for its process shadows is its memory */
  if (file) assert_true(vr_pair_body_bytes(p) == body0);
  else assert_true(vr_pair_body_bytes(p) > body0);
  int pid = vr_pair_shadow_pid(p);
  /* the shadow keeps no descriptor of the pack once loaded */
  assert_int_equal(fds_to(pid, "vario-shadow-model"), 0);
  assert_true(pid > 0 && pid != getpid() && ms > 0);
  assert_true(vr_pair_shadow_bytes(p) > 0);
  /* the small binary is small: none of the server's libraries */
  if (strstr(exe, "vario-shadow"))
    assert_false(maps_lib(pid, "libgrpc") || maps_lib(pid, "libCbc") ||
                 maps_lib(pid, "libmicrohttpd") || maps_lib(pid, "libhiredis"));
  else
    assert_true(maps_lib(pid, "libgrpc")); /* what makes `vario` slow to start */
  vr_tensor in = tensor_of("input", &f.in), out[2];
  int rows;
  for (int rep = 0; rep < 2; rep++)
    for (int bs = 0; bs <= f.batch; bs++) {
      if (vr_pair_run(p, f.batch, bs, 0, &in, 1, out, 2, &rows, &e)) fail_msg("bs=%d: %s", bs, e.msg);
      assert_int_equal(rows, bs);
      if (memcmp(out[0].data, f.ref, f.ref_bytes))
        fail_msg("b_S=%d: the process shadow's rows differ from the unpaired model", bs);
    }
  /* the shadow process stops: a run told to give up on it 100 ms from now
   * does so (not after the 2-s bound), and answers right from the body */
  kill(pid, SIGSTOP);
  int64_t t0 = vr_now_ns();
  if (vr_pair_run(p, f.batch, f.batch / 2, t0 + 100 * 1000000LL, &in, 1, out, 2, &rows, &e))
    fail_msg("%s", e.msg);
  int64_t waited = vr_now_ns() - t0;
  if (waited < 100 * 1000000LL || waited > 1000 * 1000000LL)
    fail_msg("a stopped shadow held the run %.1f ms, given up on at 100", (double)waited / 1e6);
  assert_memory_equal(out[0].data, f.ref, f.ref_bytes);
  assert_int_equal(rows, -1);
  assert_false(vr_pair_has_shadow(p));
  assert_int_equal(kill(pid, 0), -1); /* killed and reaped, stopped as it was */
  if (vr_pair_attach_process(p, exe, file ? f.path : NULL, 1, 30000000000LL, NULL, &e))
    fail_msg("%s", e.msg);
  pid = vr_pair_shadow_pid(p);
  /* the shadow process dies: the next paired run still answers, right,
   * and the dead shadow is released */
  kill(pid, SIGKILL);
  usleep(50000);
  if (vr_pair_run(p, f.batch, f.batch / 2, 0, &in, 1, out, 2, &rows, &e)) fail_msg("%s", e.msg);
  assert_memory_equal(out[0].data, f.ref, f.ref_bytes);
  assert_int_equal(rows, -1); /* the body ran them; the runtime drops the shadow */
  assert_false(vr_pair_has_shadow(p));
  assert_int_equal(vr_pair_run(p, f.batch, 1, 0, &in, 1, out, 2, &rows, &e), 0);
  assert_int_equal(rows, 0);
  assert_memory_equal(out[0].data, f.ref, f.ref_bytes);
  /* attach again, release cleanly: the process exits */
  if (vr_pair_attach_process(p, exe, file ? f.path : NULL, 1, 30000000000LL, NULL, &e))
    fail_msg("%s", e.msg);
  pid = vr_pair_shadow_pid(p);
  vr_pair_release(p);
  assert_int_equal(kill(pid, 0), -1); /* reaped */
  /* a shadow that cannot load: the error comes back, nothing attached */
  assert_int_not_equal(vr_pair_attach_process(p, exe, "/nonexistent.onnx", 1,
                                              30000000000LL, NULL, &e), 0);
  assert_non_null(strstr(e.msg, "load"));
  assert_false(vr_pair_has_shadow(p));
  vr_pair_free(p);
  pair_fx_teardown(&f);
}

static void test_process_shadow(void **st) {
  (void)st;
  process_shadow_with(vario_exe(), 1);
  process_shadow_with(vario_exe(), 0);
}

/* The same through `vario-shadow`, which bodies prefer (base/proc.h),
 * with the packed slice, as bodies send it. */
static void test_process_shadow_small(void **st) {
  (void)st;
  process_shadow_with(bin_exe("vario-shadow"), 0);
  process_shadow_with(bin_exe("vario-shadow"), 1);
}

/* The shadow can write the whole region, the header's layout fields
 * included: the body must keep using the layout it created (a shadow that
 * rewrote in_off/in_cap made the body's next post copy to wherever they
 * pointed). */
static void test_header_not_trusted(void **st) {
  (void)st;
  vr_shm_chan *c;
  vr_errbuf e = {0};
  assert_int_equal(vr_shm_chan_create(256, 256, &c, &e), 0);
  size_t cap = 0;
  char *buf = vr_shm_chan_in_buf(c, &cap);
  pid_t kid = fork();
  assert_true(kid >= 0);
  if (kid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves no child behind */
    vr_shm_chan *k;
    vr_errbuf ke = {0};
    if (vr_shm_chan_open(vr_shm_chan_fd(c), &k, &ke)) _exit(2);
    vr_shm_chan_ready(k, 0, 1.0, NULL);
    /* magic, version, then in_off, in_cap, out_off, out_cap, total */
    uint64_t bad[5] = {(uint64_t)1 << 44, UINT64_MAX, (uint64_t)1 << 45, UINT64_MAX, UINT64_MAX};
    char *base = mmap(NULL, vr_shm_chan_bytes(c), PROT_READ | PROT_WRITE, MAP_SHARED,
                      vr_shm_chan_fd(c), 0);
    if (base == MAP_FAILED) _exit(3);
    memcpy(base + 8, bad, sizeof bad);
    pause();
    _exit(0);
  }
  vr_shm_chan_set_child(c, (int)kid);
  assert_int_equal(vr_shm_chan_wait_ready(c, 10000000000LL, NULL, &e), 0);
  usleep(100000); /* the child has rewritten the header by now */
  float rows[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  vr_tensor t = {.name = "x", .dtype = VR_DT_F32, .ndim = 2, .shape = {2, 4},
                 .nbytes = sizeof rows, .data = rows};
  assert_ptr_equal(vr_shm_chan_in_buf(c, &cap), buf);
  assert_int_equal(cap, 256);
  assert_int_equal(vr_shm_chan_post(c, &t, 2, &e), 0);
  assert_memory_equal(buf, rows, sizeof rows);
  /* more than the buffer the body made is refused, whatever the header says */
  float big[128] = {0};
  vr_tensor b = {.name = "x", .dtype = VR_DT_F32, .ndim = 2, .shape = {2, 64},
                 .nbytes = sizeof big, .data = big};
  kill(kid, SIGKILL);
  waitpid(kid, NULL, 0);
  assert_int_equal(vr_shm_chan_post(c, &b, 2, &e), VR_ERANGE);
  vr_shm_chan_free(c);
}

/* The shadow can also write over the control block's synchronisation
 * words (a stray write, a broken or stopped peer): the body's post and
 * wait must still come back within their timeout, never block for ever.
 * The child readies the channel, then fills everything between the
 * layout fields and the row buffers with 0xFF and stays alive. A watchdog
 * (alarm) fails the test if the body hangs. */
static void test_sync_words_not_trusted(void **st) {
  (void)st;
  vr_shm_chan *c;
  vr_errbuf e = {0};
  assert_int_equal(vr_shm_chan_create(256, 256, &c, &e), 0);
  pid_t kid = fork();
  assert_true(kid >= 0);
  if (kid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    vr_shm_chan *k;
    vr_errbuf ke = {0};
    if (vr_shm_chan_open(vr_shm_chan_fd(c), &k, &ke)) _exit(2);
    vr_shm_chan_ready(k, 0, 1.0, NULL);
    usleep(200000); /* the body has seen it ready */
    char *base = mmap(NULL, vr_shm_chan_bytes(c), PROT_READ | PROT_WRITE, MAP_SHARED,
                      vr_shm_chan_fd(c), 0);
    if (base == MAP_FAILED) _exit(3);
    uint64_t in_off;
    memcpy(&in_off, base + 8, sizeof in_off); /* magic, version, in_off */
    memset(base + 48, 0xFF, in_off - 48);     /* past the 5 layout fields */
    pause();
    _exit(0);
  }
  vr_shm_chan_set_child(c, (int)kid);
  assert_int_equal(vr_shm_chan_wait_ready(c, 10000000000LL, NULL, &e), 0);
  usleep(400000); /* the child has written over the header by now */
  watchdog_arm(20, "the body hung on a control block its shadow wrote over");
  float rows[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  vr_tensor t = {.name = "x", .dtype = VR_DT_F32, .ndim = 2, .shape = {2, 4},
                 .nbytes = sizeof rows, .data = rows};
  int64_t t0 = vr_now_ns();
  int rc = vr_shm_chan_post(c, &t, 2, &e);
  vr_tensor out;
  if (!rc) rc = vr_shm_chan_wait(c, &out, 200000000LL, &e);
  assert_int_not_equal(rc, 0); /* nothing a garbage header says is an answer */
  assert_true(vr_now_ns() - t0 < 5000000000LL);
  vr_shm_chan_close(c);
  watchdog_disarm();
  kill(kid, SIGKILL);
  waitpid(kid, NULL, 0);
  vr_shm_chan_free(c);
}

/* A shadow process that exits before it opens its channel (here: not a
 * vario at all) is reported at once, not after the attach timeout; and a
 * shadow started by a server that blocks SIGINT/SIGTERM (its signal thread
 * takes them) does not inherit that mask. */
static void test_spawn_hygiene(void **st) {
  (void)st;
  pair_fx f = {0};
  pair_fx_setup(&f);
  vr_pair *p;
  vr_errbuf e = {0};
  if (vr_pair_create(f.m, f.pb, f.pe, 1, f.batch, &p, &e)) fail_msg("%s", e.msg);
  int64_t t0 = vr_now_ns();
  assert_int_not_equal(vr_pair_attach_process(p, "/bin/true", f.path, 1, 20000000000LL, NULL, &e),
                       0);
  assert_true(vr_now_ns() - t0 < 5000000000LL);
  assert_non_null(strstr(e.msg, "exited"));
  assert_false(vr_pair_has_shadow(p));
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  int rc = vr_pair_attach_process(p, vario_exe(), f.path, 1, 30000000000LL, NULL, &e);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc) fail_msg("%s", e.msg);
  char path[64], line[256], blk[64] = "";
  snprintf(path, sizeof path, "/proc/%d/status", vr_pair_shadow_pid(p));
  FILE *fp = fopen(path, "r");
  assert_non_null(fp);
  while (fgets(line, sizeof line, fp))
    if (!strncmp(line, "SigBlk:", 7)) sscanf(line + 7, "%63s", blk);
  fclose(fp);
  assert_string_equal(blk, "0000000000000000");
  vr_pair_release(p);
  vr_pair_free(p);
  pair_fx_teardown(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_check_job),
      cmocka_unit_test(test_process_shadow),
      cmocka_unit_test(test_process_shadow_small),
      cmocka_unit_test(test_header_not_trusted),
      cmocka_unit_test(test_sync_words_not_trusted),
      cmocka_unit_test(test_spawn_hygiene),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
