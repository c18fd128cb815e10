/* Registration: the real engine on a committed Fashion-MNIST model; bad
 * input of every kind is rejected with nothing left in the store or the
 * repository. */
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/npy.h"
#include "base/proc.h"
#include "control/fsutil.h"
#include "control/register.h"
#include "runtime/config.h"
#include "vr_test.h"

static char g_src[1024], g_tmp[256], g_db[300], g_repo[300];
static char g_model[1200], g_x[1200], g_y[1200];

static int setup(void **st) {
  const char *src = getenv("VR_SOURCE_DIR");
  snprintf(g_src, sizeof g_src, "%s", src ? src : ".");
  snprintf(g_model, sizeof g_model, "%s/models/fmnist/fmnist_linear/model.onnx", g_src);
  snprintf(g_x, sizeof g_x, "%s/models/fmnist-data/val_inputs.npy", g_src);
  snprintf(g_y, sizeof g_y, "%s/models/fmnist-data/val_labels.npy", g_src);
  strcpy(g_tmp, "/tmp/vr_reg_XXXXXX");
  if (!mkdtemp(g_tmp)) return -1;
  snprintf(g_db, sizeof g_db, "%s/store.db", g_tmp);
  snprintf(g_repo, sizeof g_repo, "%s/repo", g_tmp);
  return 0;
}

static int teardown(void **st) {
  vr_rmtree(g_tmp);
  return 0;
}

/* Small, fast limits: 1 thread, max batch 4, 3 timed runs. */
static vr_register_req base_req(const char *name) {
  vr_register_req r;
  vr_register_req_init(&r);
  r.app = "fashion";
  r.model_path = g_model;
  r.name = name;
  r.repo_dir = g_repo;
  r.val_inputs = g_x;
  r.val_labels = g_y;
  r.gen.max_threads = 1;
  r.gen.max_batch = 4;
  r.prof.runs = 3;
  r.quiet = 1;
  return r;
}

/* Entries in the repository dir, hidden temporaries included. */
static int repo_entries(void) {
  DIR *d = opendir(g_repo);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static void test_register_ok_and_restart(void **st) {
  vr_errbuf e = {0};
  vr_store *s;
  assert_int_equal(vr_store_open_path(g_db, &s, &e), 0);
  vr_register_req r = base_req("lin");
  vr_register_result res;
  int rc = vr_register(s, &r, &res, &e);
  if (rc) fprintf(stderr, "%s\n", e.msg);
  assert_int_equal(rc, 0);
  /* fp32 (+ bf16/int8 where they run) x 1 thread x {1,2,4}. */
  assert_true(res.n_variants >= 3 && res.n_variants % 3 == 0);
  assert_true(res.accuracy_pct[VR_PREC_FP32] > 70);
  const vr_model_rec *m = vr_store_model(s, "lin");
  assert_non_null(m);
  assert_true(m->accuracy > 70 && !m->accuracy_declared);
  const vr_variant_rec *v = vr_store_variant(s, "lin-fp32-t1-b4");
  assert_non_null(v);
  assert_true(v->lat_b1_ms > 0 && v->memory_bytes > 0 && v->load_ms > 0);
  assert_non_null(strstr(v->profile_json, "\"p99_ms\""));
  char path[1400];
  snprintf(path, sizeof path, "%s/lin/profiles/lin-fp32-t1-b2.json", g_repo);
  assert_true(vr_path_exists(path));
  /* int8 variants: the calibration rows are kept next to the model and
   * named in config.json, so the runtime can serve them. */
  vr_model_config cfg;
  snprintf(path, sizeof path, "%s/lin", g_repo);
  if (vr_model_config_load(path, &cfg, &e)) fail_msg("%s", e.msg);
  snprintf(path, sizeof path, "%s/lin/calibration.npy", g_repo);
  if (res.accuracy_pct[VR_PREC_INT8] >= 0) {
    assert_true(vr_path_exists(path));
    assert_string_equal(cfg.calibration_path, path);
    vr_npy cal;
    assert_int_equal(vr_npy_read(path, &cal, &e), 0);
    assert_true(cal.dtype == VR_DT_F32 && cal.ndim == 4 && cal.shape[0] >= 1);
    vr_npy_free(&cal);
  } else {
    assert_false(vr_path_exists(path));
    assert_string_equal(cfg.calibration_path, "");
  }
  snprintf(path, sizeof path, "%s/lin/.vario-registering", g_repo);
  assert_false(vr_path_exists(path)); /* the in-progress marker is gone */
  snprintf(path, sizeof path, "%s/lin/model.onnx", g_repo);
  assert_true(vr_path_exists(path));
  /* The same name again is refused and changes nothing. */
  assert_int_equal(vr_register(s, &r, NULL, &e), VR_EEXIST);
  size_t nv = vr_store_num_variants(s);
  vr_store_close(s);
  assert_int_equal(vr_store_open_path(g_db, &s, &e), 0);
  assert_non_null(vr_store_model(s, "lin"));
  assert_int_equal(vr_store_num_variants(s), nv);
  assert_int_equal(vr_unregister(s, "lin", &e), 0);
  assert_false(vr_path_exists(path));
  vr_store_close(s);
}

/* An entry in the repository that the store does not know blocks the name,
 * and the refusal does not give the server's paths away (it reaches HTTP
 * clients through POST /v2/apps/{app}/models). */
static void test_stray_entry(void **st) {
  (void)st;
  vr_errbuf e = {0};
  vr_store *s;
  assert_int_equal(vr_store_open_path(g_db, &s, &e), 0);
  char dir[1400];
  snprintf(dir, sizeof dir, "%s/stray", g_repo);
  assert_int_equal(mkdir(dir, 0755), 0);
  vr_register_req r = base_req("stray");
  assert_int_equal(vr_register(s, &r, NULL, &e), VR_EEXIST);
  assert_non_null(strstr(e.msg, "'stray'"));
  assert_null(strstr(e.msg, g_repo));
  assert_null(vr_store_model(s, "stray"));
  assert_int_equal(rmdir(dir), 0);
  vr_store_close(s);
}

/* What the marker records besides the pid. */
static unsigned long long start_of(pid_t pid) {
  unsigned long long t = 0;
  return vr_proc_stat(pid, NULL, &t) ? 0 : t;
}

static void boot_and_host(char *boot, size_t bcap, char *host, size_t hcap) {
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  assert_non_null(f);
  assert_int_equal(fscanf(f, "%63s", boot), 1);
  fclose(f);
  assert_int_equal(gethostname(host, hcap), 0);
  (void)bcap;
}

/* A repository entry as a registration leaves it when its process dies
 * between the rename and the store: its marker names pid, on this host
 * (host "elsewhere": another host's). */
static void leave_entry_on(const char *name, pid_t pid, unsigned long long start,
                           const char *on) {
  char boot[64], host[256];
  boot_and_host(boot, sizeof boot, host, sizeof host);
  char path[1400];
  snprintf(path, sizeof path, "%s/%s", g_repo, name);
  assert_int_equal(vr_mkdirs(path, NULL), 0);
  snprintf(path, sizeof path, "%s/%s/.vario-registering", g_repo, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "%d %llu %s %s\n", (int)pid, start, boot, on ? on : host);
  fclose(f);
  snprintf(path, sizeof path, "%s/%s/model.onnx", g_repo, name);
  assert_int_equal(vr_copy_file(g_model, path, NULL), 0);
}

static void leave_entry(const char *name, pid_t pid, unsigned long long start) {
  leave_entry_on(name, pid, start, NULL);
}

/* A registration that crashed after the rename left an entry the store
 * does not know: it blocked the name for good. Its marker's process is
 * gone, so the next registration removes it; one whose process lives is
 * still running and keeps the name. */
static void test_interrupted_entry(void **st) {
  (void)st;
  vr_errbuf e = {0};
  vr_store *s;
  assert_int_equal(vr_store_open_path(g_db, &s, &e), 0);
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  unsigned long long dead_start = start_of(dead);
  assert_int_equal(waitpid(dead, NULL, 0), dead);
  leave_entry("crashed", dead, dead_start ? dead_start : 1);
  vr_register_req r = base_req("crashed");
  if (vr_register(s, &r, NULL, &e)) fail_msg("%s", e.msg);
  assert_non_null(vr_store_model(s, "crashed"));
  char path[1400];
  snprintf(path, sizeof path, "%s/crashed/.vario-registering", g_repo);
  assert_false(vr_path_exists(path));
  assert_int_equal(vr_unregister(s, "crashed", &e), 0);
  /* a live process's registration: refused, and its entry left alone */
  pid_t busy = fork();
  if (busy == 0) {
    pause();
    _exit(0);
  }
  leave_entry("busy", busy, start_of(busy));
  r = base_req("busy");
  assert_int_equal(vr_register(s, &r, NULL, &e), VR_EEXIST);
  assert_non_null(strstr(e.msg, "being registered"));
  snprintf(path, sizeof path, "%s/busy/model.onnx", g_repo);
  assert_true(vr_path_exists(path));
  kill(busy, SIGKILL);
  assert_int_equal(waitpid(busy, NULL, 0), busy);
  /* its process is gone now: the entry is a leftover */
  if (vr_register(s, &r, NULL, &e)) fail_msg("%s", e.msg);
  assert_int_equal(vr_unregister(s, "busy", &e), 0);
  /* another host's marker: its pid means nothing here, so it is kept */
  leave_entry_on("remote", dead, dead_start ? dead_start : 1, "elsewhere");
  r = base_req("remote");
  assert_int_equal(vr_register(s, &r, NULL, &e), VR_EEXIST);
  snprintf(path, sizeof path, "%s/remote/model.onnx", g_repo);
  assert_true(vr_path_exists(path));
  vr_store_close(s);
}

static void test_declared_accuracy(void **st) {
  vr_errbuf e = {0};
  vr_store *s;
  assert_int_equal(vr_store_open_path(g_db, &s, &e), 0);
  vr_register_req r = base_req("decl");
  r.val_inputs = r.val_labels = NULL;
  assert_int_equal(vr_register(s, &r, NULL, &e), VR_EINVAL); /* neither */
  r.declared_accuracy = 80; /* percent */
  vr_register_result res;
  assert_int_equal(vr_register(s, &r, &res, &e), 0);
  assert_int_equal(res.n_variants, 3); /* fp32 only: nothing to measure others */
  assert_true(vr_store_model(s, "decl")->accuracy_declared);
  assert_true(vr_store_variant(s, "decl-fp32-t1-b1")->accuracy == 80.0);
  assert_int_equal(vr_unregister(s, "decl", &e), 0);
  vr_store_close(s);
}

/* Writes a small .npy into the temp dir and returns its path. */
static const char *npy(const char *name, vr_dtype dt, const int64_t *shape,
                       int ndim) {
  static char path[4][400];
  static int k;
  char *p = path[k++ % 4];
  snprintf(p, 400, "%s/%s", g_tmp, name);
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  void *data = calloc(n ? n : 1, 8);
  vr_errbuf e = {0};
  assert_int_equal(vr_npy_write(p, dt, shape, ndim, data, &e), 0);
  free(data);
  return p;
}

static void expect_rejected(vr_store *s, vr_register_req *r, int code,
                            const char *needle) {
  vr_errbuf e = {0};
  int before = repo_entries();
  size_t nm = vr_store_num_models(s);
  int rc = vr_register(s, r, NULL, &e);
  if (rc != code) fprintf(stderr, "got %d: %s\n", rc, e.msg);
  assert_int_equal(rc, code);
  if (needle && !strstr(e.msg, needle)) fprintf(stderr, "message: %s\n", e.msg);
  if (needle) assert_non_null(strstr(e.msg, needle));
  assert_int_equal(vr_store_num_models(s), nm);
  assert_int_equal(repo_entries(), before);
}

static void test_bad_input(void **st) {
  vr_errbuf e = {0};
  vr_store *s;
  assert_int_equal(vr_store_open_path(g_db, &s, &e), 0);
  vr_register_req r = base_req("bad");

  /* Corrupt ONNX: random bytes. */
  char onnx[400];
  snprintf(onnx, sizeof onnx, "%s/corrupt.onnx", g_tmp);
  FILE *f = fopen(onnx, "wb");
  for (int i = 0; i < 1000; i++) fputc((i * 7919) & 0xff, f);
  fclose(f);
  r.model_path = onnx;
  expect_rejected(s, &r, VR_EFORMAT, "corrupt.onnx");
  r.model_path = "/nonexistent/model.onnx";
  expect_rejected(s, &r, VR_ENOENT, "does not exist");
  r.model_path = g_model;

  int64_t x_ok[] = {10, 1, 28, 28}, x_empty[] = {0, 1, 28, 28};
  int64_t x_flat[] = {10, 784}, y10[] = {10}, y9[] = {9}, y_2d[] = {10, 3};
  /* Labels that do not match the inputs. */
  r.val_inputs = npy("x.npy", VR_DT_F32, x_ok, 4);
  r.val_labels = npy("y9.npy", VR_DT_I64, y9, 1);
  expect_rejected(s, &r, VR_ESHAPE, "9 validation labels for 10");
  r.val_labels = npy("y2d.npy", VR_DT_I64, y_2d, 2);
  expect_rejected(s, &r, VR_ESHAPE, "N or N x 1");
  r.val_labels = npy("yf.npy", VR_DT_F32, y10, 1);
  expect_rejected(s, &r, VR_ETYPE, "integer");
  /* Empty validation set. */
  r.val_inputs = npy("x0.npy", VR_DT_F32, x_empty, 4);
  r.val_labels = npy("y0.npy", VR_DT_I64, (int64_t[]){0}, 1);
  expect_rejected(s, &r, VR_EINVAL, "empty");
  /* Rows shaped unlike the model's input. */
  r.val_inputs = npy("xflat.npy", VR_DT_F32, x_flat, 2);
  r.val_labels = npy("y10.npy", VR_DT_I64, y10, 1);
  expect_rejected(s, &r, VR_ESHAPE, "do not match model input");
  /* Only one half of a validation set; bad names; bad limits. */
  r.val_inputs = g_x;
  r.val_labels = NULL;
  expect_rejected(s, &r, VR_EINVAL, "both");
  r.val_labels = g_y;
  r.name = "../escape";
  expect_rejected(s, &r, VR_EINVAL, "not 1..48");
  r.name = "ok";
  r.app = "";
  expect_rejected(s, &r, VR_EINVAL, "app name");
  vr_store_close(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_register_ok_and_restart),
      cmocka_unit_test(test_declared_accuracy),
      cmocka_unit_test(test_stray_entry),
      cmocka_unit_test(test_interrupted_entry),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
