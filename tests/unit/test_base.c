/* Unit tests for src/base: status, allocation, vector, map, arena, clock,
 * EWMA and rate counter. (Histogram and npy have their own files.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/arena.h"
#include "base/clock.h"
#include "base/cpus.h"
#include "base/ewma.h"
#include "base/log.h"
#include "base/map.h"
#include "base/proc.h"
#include "base/rate.h"
#include "base/vec.h"
#include "vario/dtype.h"
#include "vario/status.h"
#include "vr_test.h"

static void test_status(void **st) {
  assert_string_equal(vr_strerror(VR_OK), "success");
  assert_string_equal(vr_strerror(VR_ESHAPE), "shape mismatch");
  assert_string_equal(vr_errname(VR_EFORMAT), "VR_EFORMAT");
  assert_string_equal(vr_strerror(-9999), "unknown error");
  vr_errbuf e = {0};
  assert_int_equal(vr_errf(&e, VR_EINVAL, "bad %s %d", "x", 3), VR_EINVAL);
  assert_string_equal(e.msg, "bad x 3");
  assert_int_equal(e.code, VR_EINVAL);
  vr_errctx(&e, VR_EINVAL, "loading %s", "m.onnx");
  assert_string_equal(e.msg, "loading m.onnx: bad x 3");
  assert_int_equal(vr_errf(NULL, VR_EIO, "ignored"), VR_EIO);
}

static void test_dtype(void **st) {
  assert_int_equal(vr_dtype_size(VR_DT_F32), 4);
  assert_int_equal(vr_dtype_size(VR_DT_I64), 8);
  assert_int_equal(vr_dtype_size(VR_DT_UNDEFINED), 0);
  assert_string_equal(vr_dtype_kserve(VR_DT_F32), "FP32");
  assert_int_equal(vr_dtype_from_kserve("INT64"), VR_DT_I64);
  assert_int_equal(vr_dtype_from_kserve("FP33"), VR_DT_UNDEFINED);
}

static void test_alloc_accounting(void **st) {
  int64_t used0 = vr_mem_used(), blocks0 = vr_mem_blocks();
  char *p = vr_malloc(1000);
  assert_non_null(p);
  assert_int_equal(vr_mem_used() - used0, 1000);
  p = vr_realloc(p, 5000);
  assert_non_null(p);
  assert_int_equal(vr_mem_used() - used0, 5000);
  assert_int_equal(vr_mem_blocks() - blocks0, 1);
  assert_true(vr_mem_peak() >= used0 + 5000);
  void *a = vr_aligned_alloc(64, 100);
  assert_non_null(a);
  assert_int_equal((uintptr_t)a % 64, 0);
  assert_int_equal(vr_mem_used() - used0, 5100);
  vr_aligned_free(a);
  vr_free(p);
  assert_int_equal(vr_mem_used(), used0);
  assert_int_equal(vr_mem_blocks(), blocks0);
  /* Overflowing requests fail cleanly instead of wrapping. */
  assert_null(vr_calloc(SIZE_MAX / 2, 4));
  assert_null(vr_malloc(SIZE_MAX - 4));
  assert_null(vr_aligned_alloc(3, 10));
  char *s = vr_strndup("hello world", 5);
  assert_string_equal(s, "hello");
  vr_free(s);
  vr_free(NULL);
}

static void test_vec(void **st) {
  vr_vec v;
  vr_vec_init(&v, sizeof(int));
  for (int i = 0; i < 1000; i++) assert_int_equal(vr_vec_push(&v, &i), 0);
  assert_int_equal(v.len, 1000);
  assert_int_equal(VR_VEC_AT(&v, int, 999), 999);
  vr_vec_remove(&v, 0);
  assert_int_equal(VR_VEC_AT(&v, int, 0), 1);
  vr_vec_swap_remove(&v, 0);
  assert_int_equal(VR_VEC_AT(&v, int, 0), 999);
  int x;
  assert_int_equal(vr_vec_pop(&v, &x), 0);
  assert_int_equal(x, 998);
  int *g = vr_vec_grow(&v, 3);
  assert_non_null(g);
  assert_int_equal(g[0] + g[1] + g[2], 0);
  vr_vec_clear(&v);
  assert_int_equal(vr_vec_pop(&v, NULL), -1);
  vr_vec_free(&v);
}

static void test_map_basic(void **st) {
  vr_map m;
  vr_map_init(&m);
  assert_null(vr_map_get(&m, "a"));
  int one = 1, two = 2;
  void *old = &one;
  assert_int_equal(vr_map_put(&m, "a", &one, &old), 0);
  assert_null(old);
  assert_int_equal(vr_map_put(&m, "a", &two, &old), 0);
  assert_ptr_equal(old, &one);
  assert_ptr_equal(vr_map_get(&m, "a"), &two);
  assert_int_equal(m.len, 1);
  assert_int_equal(vr_map_put(&m, "nullval", NULL, NULL), 0);
  assert_true(vr_map_has(&m, "nullval"));
  assert_false(vr_map_has(&m, "nope"));
  assert_ptr_equal(vr_map_del(&m, "a"), &two);
  assert_false(vr_map_has(&m, "a"));
  vr_map_free(&m);
}

/* Random inserts and deletes checked against a shadow array: exercises
 * resizing and backward-shift deletion across wrapped probe runs. */
static void test_map_random(void **st) {
  enum { N = 2000 };
  static int present[N];
  memset(present, 0, sizeof present);
  vr_map m;
  vr_map_init(&m);
  srand(42);
  char key[32];
  for (int step = 0; step < 50000; step++) {
    int k = rand() % N;
    snprintf(key, sizeof key, "key-%d", k);
    if (rand() % 3) {
      assert_int_equal(vr_map_put(&m, key, (void *)(intptr_t)(k + 1), NULL), 0);
      present[k] = 1;
    } else {
      void *v = vr_map_del(&m, key);
      assert_ptr_equal(v, present[k] ? (void *)(intptr_t)(k + 1) : NULL);
      present[k] = 0;
    }
  }
  size_t count = 0;
  for (int k = 0; k < N; k++) {
    snprintf(key, sizeof key, "key-%d", k);
    assert_int_equal(vr_map_has(&m, key), present[k]);
    if (present[k]) {
      assert_ptr_equal(vr_map_get(&m, key), (void *)(intptr_t)(k + 1));
      count++;
    }
  }
  assert_int_equal(m.len, count);
  size_t it = 0, seen = 0;
  const char *k;
  void *v;
  while (vr_map_next(&m, &it, &k, &v)) seen++;
  assert_int_equal(seen, count);
  vr_map_free(&m);
}

static void test_arena(void **st) {
  vr_arena a;
  vr_arena_init(&a, 256);
  for (int i = 0; i < 100; i++) {
    char *p = vr_arena_alloc(&a, 1 + i);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 16, 0);
    memset(p, 0xab, 1 + i);
  }
  char *big = vr_arena_alloc(&a, 10000); /* larger than a block */
  assert_non_null(big);
  memset(big, 1, 10000);
  assert_string_equal(vr_arena_strdup(&a, "xyz"), "xyz");
  int *z = vr_arena_calloc(&a, 10, sizeof(int));
  for (int i = 0; i < 10; i++) assert_int_equal(z[i], 0);
  assert_null(vr_arena_calloc(&a, SIZE_MAX / 2, 4));
  vr_arena_reset(&a);
  assert_int_equal(a.used, 0);
  assert_non_null(vr_arena_alloc(&a, 8));
  vr_arena_free(&a);
}

static void test_clock(void **st) {
  vr_clock *m = vr_clock_monotonic();
  int64_t t0 = vr_clock_now(m), t1 = vr_clock_now(m);
  assert_true(t1 >= t0);
  vr_clock v;
  vr_vclock_init(&v, 5 * VR_NS_PER_S);
  assert_int_equal(vr_clock_now(&v), 5 * VR_NS_PER_S);
  vr_vclock_advance(&v, 10);
  assert_int_equal(vr_clock_now(&v), 5 * VR_NS_PER_S + 10);
  vr_vclock_set(&v, 0); /* never backwards */
  assert_int_equal(vr_clock_now(&v), 5 * VR_NS_PER_S + 10);
}

static void test_ewma(void **st) {
  vr_ewma e;
  vr_ewma_init_alpha(&e, 0.5);
  vr_ewma_add(&e, 10, 0);
  assert_float_equal(vr_ewma_get(&e), 10, 1e-12);
  vr_ewma_add(&e, 20, 1);
  assert_float_equal(vr_ewma_get(&e), 15, 1e-12);
  /* Time-constant form: after dt = tau the old value keeps weight 1/e. */
  vr_ewma_init_tau(&e, VR_NS_PER_S);
  vr_ewma_add(&e, 0, 0);
  vr_ewma_add(&e, 1, VR_NS_PER_S);
  assert_float_equal(vr_ewma_get(&e), 1 - 0.36787944117, 1e-9);
  /* Converges to a constant input. */
  for (int i = 2; i < 100; i++) vr_ewma_add(&e, 1, i * VR_NS_PER_S);
  assert_float_equal(vr_ewma_get(&e), 1, 1e-9);
}

static void test_rate(void **st) {
  vr_rate r;
  vr_rate_init(&r, 10, 100 * VR_NS_PER_MS); /* 1 s window */
  int64_t t = 0;
  for (int i = 0; i < 100; i++, t += 10 * VR_NS_PER_MS) vr_rate_add(&r, 1, t);
  /* 100 events spread over the last second. */
  assert_float_equal(vr_rate_per_sec(&r, t - 1), 100, 1e-9);
  /* Half a second later half the slots have expired. */
  assert_float_equal(vr_rate_count(&r, t + 400 * VR_NS_PER_MS), 50, 1e-9);
  /* Long idle clears everything. */
  assert_float_equal(vr_rate_count(&r, t + 10 * VR_NS_PER_S), 0, 1e-9);
  vr_rate_add(&r, 3, t + 10 * VR_NS_PER_S);
  assert_float_equal(vr_rate_count(&r, t + 10 * VR_NS_PER_S), 3, 1e-9);
}

static void test_log_levels(void **st) {
  assert_int_equal(vr_log_parse_level("warn"), VR_LOG_WARN);
  assert_int_equal(vr_log_parse_level("bogus"), -1);
  int old = vr_log_level();
  vr_log_set_level(VR_LOG_OFF);
  vr_error("not printed");
  vr_log_set_level(old);
}

/* CPUs usable: the affinity mask's, capped by a cgroup v2 quota (a
 * container's CPU limit), not the machine's online count. */
static void write_cpu_max(const char *dir, const char *text) {
  char p[300];
  snprintf(p, sizeof p, "%s/cpu.max", dir);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_cpus_usable(void **st) {
  (void)st;
  char dir[] = "/tmp/vr_cpus_XXXXXX";
  assert_non_null(mkdtemp(dir));
  int all = vr_cpus_usable(dir); /* no cpu.max: the affinity mask */
  assert_true(all >= 1);
  write_cpu_max(dir, "max 100000\n");
  assert_int_equal(vr_cpus_usable(dir), all);
  write_cpu_max(dir, "50000 100000\n"); /* half a CPU: one */
  assert_int_equal(vr_cpus_usable(dir), 1);
  write_cpu_max(dir, "100000000 100000\n"); /* 1000 CPUs: the mask's */
  assert_int_equal(vr_cpus_usable(dir), all);
  char p[300];
  snprintf(p, sizeof p, "%s/cpu.max", dir);
  unlink(p);
  rmdir(dir);
}

/* The executable helpers are started with: $VARIO_EXE when set (a
 * wrapper through a carried loader), else this process's own binary;
 * one that does not fit is refused, not cut. */
static void test_self_exe(void **st) {
  (void)st;
  char buf[4096], want[4096];
  unsetenv("VARIO_EXE");
  ssize_t n = readlink("/proc/self/exe", want, sizeof want - 1);
  assert_true(n > 0);
  want[n] = 0;
  assert_int_equal(vr_proc_self_exe(buf, sizeof buf), 0);
  assert_string_equal(buf, want);
  assert_int_equal(vr_proc_self_exe(buf, (size_t)n), -1); /* no room for it */
  setenv("VARIO_EXE", "/opt/pack/bin/vario", 1);
  assert_int_equal(vr_proc_self_exe(buf, sizeof buf), 0);
  assert_string_equal(buf, "/opt/pack/bin/vario");
  assert_int_equal(vr_proc_self_exe(buf, 8), -1);
  setenv("VARIO_EXE", "", 1); /* empty: as unset */
  assert_int_equal(vr_proc_self_exe(buf, sizeof buf), 0);
  assert_string_equal(buf, want);
  unsetenv("VARIO_EXE");
}

/* The shadow executable: $VARIO_SHADOW_EXE, else vario-shadow beside
 * vario when executable, else vario. */
static void test_shadow_exe(void **st) {
  (void)st;
  char dir[] = "/tmp/vr_shexe_XXXXXX", vario[128], shadow[128], buf[4096];
  assert_non_null(mkdtemp(dir));
  snprintf(vario, sizeof vario, "%s/vario", dir);
  snprintf(shadow, sizeof shadow, "%s/vario-shadow", dir);
  setenv("VARIO_EXE", vario, 1);
  unsetenv("VARIO_SHADOW_EXE");
  assert_int_equal(vr_proc_shadow_exe(buf, sizeof buf), 0);
  assert_string_equal(buf, vario); /* none beside it */
  FILE *f = fopen(shadow, "w");
  assert_non_null(f);
  fclose(f);
  assert_int_equal(vr_proc_shadow_exe(buf, sizeof buf), 0);
  assert_string_equal(buf, vario); /* there, but not executable */
  assert_int_equal(chmod(shadow, 0755), 0);
  assert_int_equal(vr_proc_shadow_exe(buf, sizeof buf), 0);
  assert_string_equal(buf, shadow);
  /* no room for the longer name: vario, which fits */
  assert_int_equal(vr_proc_shadow_exe(buf, strlen(vario) + 2), 0);
  assert_string_equal(buf, vario);
  setenv("VARIO_SHADOW_EXE", "/opt/x/vario-shadow", 1);
  assert_int_equal(vr_proc_shadow_exe(buf, sizeof buf), 0);
  assert_string_equal(buf, "/opt/x/vario-shadow");
  assert_int_equal(vr_proc_shadow_exe(buf, 8), -1);
  unsetenv("VARIO_SHADOW_EXE");
  unsetenv("VARIO_EXE");
  unlink(shadow);
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status),     cmocka_unit_test(test_dtype),
      cmocka_unit_test(test_alloc_accounting), cmocka_unit_test(test_vec),
      cmocka_unit_test(test_map_basic),  cmocka_unit_test(test_map_random),
      cmocka_unit_test(test_arena),      cmocka_unit_test(test_clock),
      cmocka_unit_test(test_ewma),       cmocka_unit_test(test_rate),
      cmocka_unit_test(test_log_levels), cmocka_unit_test(test_cpus_usable),
      cmocka_unit_test(test_self_exe),   cmocka_unit_test(test_shadow_exe),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
