/* Thread limits: a session never uses more than its `threads` cores, even
 * with other sessions running in the process. Checked deterministically by
 * counting the process's OS threads (/proc/self/task): the OpenMP runtime
 * creates worker threads only for parallel regions wider than one, so
 * 1-thread sessions in two pthreads must add no workers, and a 2-thread
 * session exactly one. (bench/engine.sh shows the throughput side.) */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "engine_util.h"
#include "vr_test.h"

static int count_threads(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  struct dirent *de;
  while (d && (de = readdir(d)))
    if (de->d_name[0] != '.') n++;
  if (d) closedir(d);
  return n;
}

typedef struct job {
  vr_model *m;
  vr_npy *in;
  int threads, runs, rc, max_threads_seen;
  pthread_barrier_t *bar;
} job;

static void *worker(void *arg) {
  job *j = arg;
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.threads = j->threads;
  o.max_batch = (int)j->in->shape[0];
  vr_session *s;
  vr_errbuf e = {0};
  j->rc = vr_session_create(j->m, &o, &s, &e);
  if (j->bar) pthread_barrier_wait(j->bar);
  if (j->rc) return NULL;
  vr_tensor in = tensor_of(vr_model_input(j->m, 0)->name, j->in), out[2];
  for (int i = 0; i < j->runs && !j->rc; i++) {
    j->rc = vr_session_run(s, o.max_batch, &in, 1, out, 2, &e);
    int t = count_threads();
    if (t > j->max_threads_seen) j->max_threads_seen = t;
  }
  vr_session_free(s);
  return NULL;
}

static void load(vr_model **m, vr_npy *in) {
  vr_errbuf e = {0};
  if (vr_model_load(src_path("tests/data/engine/tiny_cnn.onnx"), m, &e)) fail_msg("%s", e.msg);
  assert_int_equal(vr_npy_read(src_path("tests/data/engine/tiny_cnn_in.npy"), in, &e), 0);
}

/* Two 1-thread sessions in two pthreads: only the two pthreads exist
 * besides the main thread — no OpenMP workers. Must run before any wider
 * session in this process (workers persist once created). */
static void test_two_single_thread_sessions(void **st) {
  vr_model *m;
  vr_npy in;
  load(&m, &in);
  int base = count_threads();
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, 2);
  job j[2] = {{m, &in, 1, 200, 0, 0, &bar}, {m, &in, 1, 200, 0, 0, &bar}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, &j[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&bar);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(j[i].rc, 0);
    if (j[i].max_threads_seen > base + 2)
      fail_msg("1-thread sessions: %d threads seen, expected at most %d", j[i].max_threads_seen,
               base + 2);
  }
  /* And one in the main thread adds nothing. */
  job solo = {m, &in, 1, 20, 0, 0, NULL};
  worker(&solo);
  assert_int_equal(solo.rc, 0);
  assert_int_equal(solo.max_threads_seen, base);
  vr_npy_free(&in);
  vr_model_free(m);
}

/* A 2-thread session in the main thread gets exactly one worker. */
static void test_two_thread_session(void **st) {
  vr_model *m;
  vr_npy in;
  load(&m, &in);
  int base = count_threads();
  job j = {m, &in, 2, 20, 0, 0, NULL};
  worker(&j);
  assert_int_equal(j.rc, 0);
  assert_int_equal(j.max_threads_seen, base + 1);
  vr_npy_free(&in);
  vr_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_single_thread_sessions),
      cmocka_unit_test(test_two_thread_session),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
