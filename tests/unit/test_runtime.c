/* Runtime: batching decisions (pure), config validation, instances
 * with an injected fake backend of known latency, and engine models whose
 * outputs do not carry the batch (refused at load). */
#include "vr_test.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "policy/drop.h"
#include "rt_fake.h"
#include "watchdog.h"
#include "runtime/runtime.h"

/* ---- batch rule (policy/batch.h, as the runtime uses it) ---------------- */

/* b = 2^k takes 1 ms + 0.125 ms x b (exact in binary, so ns are exact). */
static vr_latency prof_linear(void) {
  vr_latency p;
  vr_latency_init(&p);
  for (int k = 0; k < 7; k++) p.p50_ms[k] = 1 + 0.125 * (1 << k);
  return p;
}

static void test_batch_full(void **st) {
  (void)st;
  vr_latency p = prof_linear();
  vr_batch_state s = {1000, 8, 8, 900, VR_NO_DEADLINE, 1000000};
  assert_int_equal(vr_batch_decide(&s, &p).dispatch, 1);
  s.queued_rows = 7;
  vr_batch_decision d = vr_batch_decide(&s, &p);
  assert_int_equal(d.dispatch, 0);
  assert_int_equal(d.wake_at, 900 + 1000000); /* max queue delay */
  s.queued_rows = 0;
  assert_int_equal(vr_batch_decide(&s, &p).dispatch, 0);
}

static void test_batch_delay(void **st) {
  (void)st;
  vr_latency p = prof_linear();
  vr_batch_state s = {5000, 2, 8, 1000, VR_NO_DEADLINE, 4000};
  assert_int_equal(vr_batch_decide(&s, &p).dispatch, 1); /* 1000+4000 */
  s.now = 4999;
  assert_int_equal(vr_batch_decide(&s, &p).dispatch, 0);
}

static void test_batch_deadline(void **st) {
  (void)st;
  vr_latency p = prof_linear();
  /* 3 queued: next size 4 takes 1.5 ms. Deadline 10 ms: latest start
   * 8.5 ms, earlier than the max-delay time 1 us + 100 ms. */
  vr_batch_state s = {8000000, 3, 8, 1000, 10000000, 100000000};
  vr_batch_decision d = vr_batch_decide(&s, &p);
  assert_int_equal(d.dispatch, 0);
  assert_int_equal(d.wake_at, 8500000);
  s.now = 8500000;
  assert_int_equal(vr_batch_decide(&s, &p).dispatch, 1);
  assert_true(vr_batch_feasible(8500000, 10000000, &p, 4));
  assert_false(vr_batch_feasible(8875001, 10000000, &p, 1));
  assert_true(vr_drop_due(8875001, 10000000, &p, 1));
  /* A noisy profile where 2 rows measure faster than 1: a lone row waits
   * no later than the latest start of 1 row, so it is not dropped on
   * waking while the instance sat idle. */
  vr_latency q = prof_linear();
  q.p50_ms[0] = 1.0;
  q.p50_ms[1] = 0.9;
  vr_batch_state one = {0, 1, 8, 0, 10000000, 100000000};
  d = vr_batch_decide(&one, &q);
  assert_int_equal(d.dispatch, 0);
  assert_int_equal(d.wake_at, 9000000);
  assert_false(vr_drop_due(d.wake_at, 10000000, &q, 1));
}

static void test_lat_observe(void **st) {
  (void)st;
  vr_latency p;
  vr_latency_init(&p);
  p.p50_ms[2] = 0.8; /* b=4 */
  vr_latency_observe(&p, 4, 1.6);
  assert_true(fabs(p.p50_ms[2] - 0.9) < 1e-12); /* 0.8 + (1.6 - 0.8) / 8 */
  vr_latency_observe(&p, 3, 5);    /* not a slot size: ignored */
  assert_true(fabs(p.p50_ms[2] - 0.9) < 1e-12);
  vr_latency_observe(&p, 1, 0.05); /* unmeasured slot: taken as is */
  assert_true(p.p50_ms[0] == 0.05);
}

static void test_lat_estimate(void **st) {
  (void)st;
  vr_latency p;
  vr_latency_init(&p);
  assert_int_equal(vr_batch_est_ns(&p, 1), 0); /* nothing measured */
  p.p50_ms[0] = 0.125;
  p.p50_ms[3] = 0.5; /* b=8 */
  assert_int_equal(vr_batch_est_ns(&p, 1), 125000);
  /* between measured sizes: interpolated, as the simulator replays it */
  assert_int_equal(vr_batch_est_ns(&p, 4), 125000 + 375000 * 3 / 7);
  assert_int_equal(vr_batch_est_ns(&p, 8), 500000);
  assert_int_equal(vr_batch_est_ns(&p, 32), 2000000); /* scaled per row */
}

/* A queue as an array (one row per request unless rows[] says). */
typedef struct arr_q {
  vr_qitem it[16];
} arr_q;
static vr_qitem arr_at(void *q, size_t i) { return ((arr_q *)q)->it[i]; }

static void test_batch_form(void **st) {
  (void)st;
  vr_latency p = prof_linear(); /* b1 1.125 ms, b2 1.25, b4 1.5, b8 2 */
  arr_q a;
  const int64_t ms = 1000000;
  /* deadlines 0.5, 3, 3, 3, 1.4 ms at now = 0: the head cannot make it
   * even alone (1.125 ms) */
  int64_t dl[5] = {ms / 2, 3 * ms, 3 * ms, 3 * ms, ms + ms * 4 / 10};
  for (int i = 0; i < 5; i++) a.it[i] = (vr_qitem){1, dl[i]};
  vr_qview v = {&a, 5, arr_at};
  /* deadline mode: the 0.5 ms head is dropped; 3 ms requests grow to 3
   * (b3 interpolates to 1.375 ms); the 1.4 ms one would make it miss */
  vr_batch_pick k = vr_batch_form(VR_BATCH_DEADLINE, &p, 8, 0, &v);
  assert_int_equal(k.drop, 1);
  assert_int_equal(k.take, 3);
  assert_int_equal(k.rows, 3);
  /* the cap bounds it */
  k = vr_batch_form(VR_BATCH_DEADLINE, &p, 2, 0, &v);
  assert_int_equal(k.take, 2);
  /* greedy: min(queue, cap) rows; drop the head while that misses it */
  k = vr_batch_form(VR_BATCH_GREEDY, &p, 8, 0, &v);
  assert_int_equal(k.drop, 1);
  assert_int_equal(k.take, 4); /* b4 = 1.5 ms <= 3 ms (the last one is late) */
  /* a request of more rows than the cap runs alone */
  a.it[0] = (vr_qitem){5, VR_NO_DEADLINE};
  k = vr_batch_form(VR_BATCH_DEADLINE, &p, 4, 0, &v);
  assert_int_equal(k.drop, 0);
  assert_int_equal(k.take, 1);
  assert_int_equal(k.rows, 5);
}

/* Triton's preferred batch sizes on top of the deadline rule. */
static void test_batch_preferred(void **st) {
  (void)st;
  vr_latency p = prof_linear();
  int sizes[2] = {8, 4};
  vr_batch_pref pr = {sizes, 2};
  /* the cap: the largest preferred size under the instance's cap */
  assert_int_equal(vr_batch_pref_cap(&pr, 64), 8);
  assert_int_equal(vr_batch_pref_cap(&pr, 6), 4);
  assert_int_equal(vr_batch_pref_cap(&pr, 2), 2); /* none fits: the cap */
  assert_int_equal(vr_batch_pref_cap(NULL, 16), 16);
  arr_q a;
  for (int i = 0; i < 16; i++) a.it[i] = (vr_qitem){1, VR_NO_DEADLINE};
  vr_qview v = {&a, 3, arr_at};
  size_t take = 99;
  /* 3 rows: no preferred prefix; 5: 4; 9: 8 (the longest) */
  assert_int_equal(vr_batch_pref_prefix(&pr, 64, &v, &take), 0);
  assert_int_equal(take, 0);
  v.n = 5;
  assert_int_equal(vr_batch_pref_prefix(&pr, 64, &v, &take), 4);
  assert_int_equal(take, 4);
  v.n = 9;
  assert_int_equal(vr_batch_pref_prefix(&pr, 64, &v, &take), 8);
  assert_int_equal(vr_batch_pref_prefix(&pr, 6, &v, &take), 4); /* cap 6 */
  /* requests of several rows: 3 | 3 never sums to 4 or 8; 3 | 1 | 4 does */
  a.it[0].rows = 3, a.it[1].rows = 3;
  v.n = 2;
  assert_int_equal(vr_batch_pref_prefix(&pr, 64, &v, &take), 0);
  a.it[1].rows = 1, a.it[2].rows = 4;
  v.n = 3;
  assert_int_equal(vr_batch_pref_prefix(&pr, 64, &v, &take), 8);
  assert_int_equal(take, 3);
  for (int i = 0; i < 16; i++) a.it[i] = (vr_qitem){1, VR_NO_DEADLINE};

  /* when: a preferred prefix leaves at once, before max_delay */
  vr_batch_state s = {1000, 5, 8, 900, VR_NO_DEADLINE, 1000000, 4};
  assert_int_equal(vr_batch_decide(&s, &p).dispatch, 1);
  s.queued_rows = 3, s.preferred_rows = 0; /* otherwise it waits */
  vr_batch_decision d = vr_batch_decide(&s, &p);
  assert_int_equal(d.dispatch, 0);
  assert_int_equal(d.wake_at, 900 + 1000000);
  /* trim: until the oldest has waited max_delay; always with delay 0 */
  assert_true(vr_batch_pref_trim(&s));
  s.now = 900 + 1000000;
  assert_false(vr_batch_pref_trim(&s));
  s.max_delay_ns = 0;
  assert_true(vr_batch_pref_trim(&s));

  /* what: 5 queued -> 4 (trimmed) or all 5 (delay over); 12 -> 8 */
  v.n = 5;
  vr_batch_pick k = vr_batch_form_pref(VR_BATCH_DEADLINE, &p, 64, 0, &v, &pr, 1);
  assert_int_equal(k.take, 4);
  assert_int_equal(k.rows, 4);
  k = vr_batch_form_pref(VR_BATCH_DEADLINE, &p, 64, 0, &v, &pr, 0);
  assert_int_equal(k.take, 5);
  v.n = 12;
  k = vr_batch_form_pref(VR_BATCH_DEADLINE, &p, 64, 0, &v, &pr, 0);
  assert_int_equal(k.take, 8); /* never past the largest preferred size */
  /* the deadline rule still bounds it, and drops come first: a hopeless
   * head is dropped, then 4 of the rest make a preferred batch */
  a.it[0].deadline_ns = 1000;
  v.n = 6;
  k = vr_batch_form_pref(VR_BATCH_DEADLINE, &p, 64, 0, &v, &pr, 1);
  assert_int_equal(k.drop, 1);
  assert_int_equal(k.take, 4);
  /* no preferences: vr_batch_form */
  k = vr_batch_form_pref(VR_BATCH_DEADLINE, &p, 64, 0, &v, NULL, 1);
  assert_int_equal(k.take, 5);
}

/* ---- config --------------------------------------------------------------- */

static const char *k_good =
    "{\"name\":\"m\",\"app\":\"a\",\"accuracy\":90,\"extra\":[1,2],"
    "\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[-1,1,28,28]}],"
    "\"outputs\":[{\"name\":\"logits\",\"datatype\":\"FP32\",\"shape\":[-1,10]}],"
    "\"max_batch_size\":64,\"instances\":2,\"threads\":1,\"precision\":\"fp32\","
    "\"max_queue_delay_us\":2000}";

static void test_config_good(void **st) {
  (void)st;
  vr_model_config c;
  vr_errbuf err = {0};
  assert_int_equal(vr_model_config_parse(k_good, strlen(k_good), "/r/m", &c,
                                         &err), 0);
  assert_string_equal(c.name, "m");
  assert_int_equal(c.inputs[0].ndim, 4);
  assert_int_equal(c.inputs[0].shape[3], 28);
  assert_int_equal(vr_tensor_info_row_bytes(&c.inputs[0]), 28 * 28 * 4);
  assert_int_equal(c.max_batch_size, 64);
  assert_int_equal(c.instances, 2);
  assert_int_equal(c.max_queue_delay_us, 2000);
  assert_string_equal(c.model_path, "/r/m/model.onnx");
}

static void expect_bad(const char *from, const char *to, const char *msg) {
  char buf[2048];
  const char *p = strstr(k_good, from);
  assert_non_null(p);
  snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - k_good), k_good, to,
           p + strlen(from));
  vr_model_config c;
  vr_errbuf err = {0};
  int rc = vr_model_config_parse(buf, strlen(buf), NULL, &c, &err);
  assert_true(rc < 0);
  if (!strstr(err.msg, msg)) fail_msg("'%s' does not mention '%s'", err.msg, msg);
}

static void test_config_bad(void **st) {
  (void)st;
  expect_bad("\"name\":\"m\"", "\"nam\":\"m\"", "name");
  expect_bad("\"FP32\",\"shape\":[-1,1", "\"FP33\",\"shape\":[-1,1", "datatype");
  expect_bad("[-1,1,28,28]", "[1,1,28,28]", "dim 0 must be -1");
  expect_bad("[-1,1,28,28]", "[-1,0,28,28]", "shape[1]");
  expect_bad("\"max_batch_size\":64", "\"max_batch_size\":-3", "max_batch_size");
  expect_bad("\"max_batch_size\":64", "\"max_batch_size\":\"64\"", "integer");
  expect_bad("\"precision\":\"fp32\"", "\"precision\":\"fp64\"", "precision");
  expect_bad("\"accuracy\":90", "\"accuracy\":190", "accuracy");
  expect_bad("\"name\":\"m\"", "\"name\":\"../m\"", "name");
  expect_bad("\"name\":\"m\"", "\"name\":\"m\",\"name\":\"n\"", "duplicate");
  expect_bad("\"inputs\":[{", "\"inputs\":[],\"x\":[{", "inputs");
  expect_bad("{\"name\"", "[{\"name\"", "");
  vr_model_config c;
  vr_errbuf err = {0};
  assert_true(vr_model_config_parse("{", 1, NULL, &c, &err) < 0);
  assert_true(vr_model_config_parse("", 0, NULL, &c, &err) < 0);
}

/* ---- runtime with the fake backend -------------------------------------- */

typedef struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  int order[256];
} waiter;

static waiter g_w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0,
                     {0}};

static void on_done(vr_rt_request *r, void *user) {
  pthread_mutex_lock(&g_w.mu);
  if (g_w.done < 256) g_w.order[g_w.done] = (int)(intptr_t)user;
  g_w.done++;
  pthread_cond_broadcast(&g_w.cv);
  pthread_mutex_unlock(&g_w.mu);
  (void)r;
}

static void wait_done(int n) {
  pthread_mutex_lock(&g_w.mu);
  while (g_w.done < n) pthread_cond_wait(&g_w.cv, &g_w.mu);
  pthread_mutex_unlock(&g_w.mu);
}

static void reset_waiter(void) {
  pthread_mutex_lock(&g_w.mu);
  g_w.done = 0;
  pthread_mutex_unlock(&g_w.mu);
}

static vr_runtime *make_rt(rt_fake *f) {
  vr_runtime_opts o;
  vr_runtime_opts_init(&o);
  o.backend = &f->be;
  o.profile_runs = 1;
  vr_runtime *rt = NULL;
  vr_errbuf err = {0};
  assert_int_equal(vr_runtime_create(&o, &rt, &err), 0);
  return rt;
}

/* make_rt() with model "m" (rt_fake_config: in_row, out_row, max_batch,
 * delay_us) loaded. */
static vr_runtime *rt_with_m(rt_fake *f, int in_row, int out_row, int max_batch, int delay_us) {
  vr_runtime *rt = make_rt(f);
  vr_model_config c;
  rt_fake_config(&c, "m", in_row, out_row, max_batch, delay_us);
  vr_errbuf err = {0};
  assert_int_equal(vr_rt_load(rt, &c, &err), 0);
  return rt;
}

static void set_input(vr_rt_request *r, float *x, int rows, int in_row) {
  vr_rt_request_init(r);
  r->n_in = 1;
  r->in[0].name = "x";
  r->in[0].dtype = VR_DT_F32;
  r->in[0].ndim = 2;
  r->in[0].shape[0] = rows;
  r->in[0].shape[1] = in_row;
  r->in[0].data = x;
  r->in[0].nbytes = sizeof(float) * (size_t)(rows * in_row);
  r->done = on_done;
}

static void test_rt_batches_and_outputs(void **st) {
  (void)st;
  int64_t blocks0 = vr_mem_blocks();
  rt_fake f;
  rt_fake_init(&f, 2000, 10, 3);
  vr_runtime *rt = rt_with_m(&f, 4, 3, 8, 20000);
  assert_true(vr_rt_model_ready(rt, "m"));
  enum { N = 40 };
  static vr_rt_request req[N];
  static float x[N][4];
  reset_waiter();
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < 4; j++) x[i][j] = (float)(i * 10 + j);
    set_input(&req[i], x[i], 1, 4);
    req[i].user = (void *)(intptr_t)i;
    assert_int_equal(vr_rt_submit(rt, "m", &req[i]), 0);
  }
  wait_done(N);
  for (int i = 0; i < N; i++) {
    assert_int_equal(req[i].status, 0);
    assert_int_equal(req[i].n_out, 1);
    const float *y = req[i].out[0].data;
    assert_int_equal(req[i].out[0].shape[0], 1);
    for (int j = 0; j < 3; j++) assert_true(y[j] == 2 * x[i][j] + 1);
    vr_rt_request_clear(&req[i]);
  }
  /* 40 requests submitted at once with a 2 ms run: they must batch. */
  assert_true(f.max_batch_seen > 1);
  assert_true(f.max_batch_seen <= 8);
  vr_rt_instance_stats is[4];
  assert_int_equal(vr_rt_instances(rt, "m", is, 4), 1);
  assert_int_equal((int)is[0].served, N);
  assert_true(is[0].profile.p50_ms[0] >= 2.0);
  vr_runtime_free(rt);
  assert_int_equal(vr_mem_blocks(), blocks0);
}

static void test_rt_deadline_drop(void **st) {
  (void)st;
  rt_fake f;
  rt_fake_init(&f, 3000, 0, 1);
  vr_runtime *rt = rt_with_m(&f, 1, 1, 4, 0);
  float x = 1;
  vr_rt_request r;
  reset_waiter();
  set_input(&r, &x, 1, 1);
  r.timeout_ns = 1000 * 1000; /* 1 ms < 3 ms service time */
  assert_int_equal(vr_rt_submit(rt, "m", &r), 0);
  wait_done(1);
  assert_int_equal(r.status, VR_EDEADLINE);
  assert_int_equal(r.outcome, VR_OUT_DROPPED);
  assert_non_null(strstr(r.err.msg, "deadline"));
  /* A request that fits is served; one queued behind a running batch whose
   * deadline passes meanwhile is dropped by the executor, not lost. */
  vr_rt_request a, b;
  float xa = 1, xb = 2;
  reset_waiter();
  set_input(&a, &xa, 1, 1);
  set_input(&b, &xb, 1, 1);
  a.timeout_ns = 100 * 1000 * 1000;
  assert_int_equal(vr_rt_submit(rt, "m", &a), 0);
  usleep(500);
  b.timeout_ns = 4000 * 1000; /* feasible now, not after a's 3 ms run */
  assert_int_equal(vr_rt_submit(rt, "m", &b), 0);
  wait_done(2);
  assert_int_equal(a.status, 0);
  assert_true(b.status == VR_EDEADLINE || b.status == 0);
  vr_rt_request_clear(&a);
  vr_rt_request_clear(&b);
  /* A timeout past the clock's range ("timeout": 9e15 us, i.e. never) is
   * no deadline, not a sum that wraps into the past and drops at once. */
  vr_rt_request c;
  reset_waiter();
  set_input(&c, &xa, 1, 1);
  c.timeout_ns = INT64_MAX / 1000 * 1000;
  assert_int_equal(vr_rt_submit(rt, "m", &c), 0);
  wait_done(1);
  assert_int_equal(c.status, 0);
  assert_int_equal(c.outcome, VR_OUT_OK);
  vr_rt_request_clear(&c);
  vr_runtime_free(rt);
}

/* Submits a 1-row blocker to model "m" and waits until it runs, so that
 * what is submitted next queues up and forms batches; resets the waiter
 * and the fake's batch record. */
static void block_instance(vr_runtime *rt, rt_fake *f, vr_rt_request *blocker,
                           float *x) {
  reset_waiter();
  set_input(blocker, x, 1, 1);
  assert_int_equal(vr_rt_submit(rt, "m", blocker), 0);
  vr_rt_instance_stats is;
  do {
    usleep(100);
    vr_rt_instances(rt, "m", &is, 1);
  } while (is.busy_rows == 0 && g_w.done == 0);
  __atomic_store_n(&f->max_batch_seen, 0, __ATOMIC_RELAXED);
}

/* A batch only grows while every request in it still meets its deadline
 * at the profiled latency of the larger batch. */
static void test_rt_deadline_caps_batch(void **st) {
  (void)st;
  rt_fake f;
  rt_fake_init(&f, 0, 10000, 1); /* 10 ms per row: b4 = 40, b8 = 80 ms */
  vr_runtime *rt = rt_with_m(&f, 1, 1, 8, 0);
  static vr_rt_request blocker, r[8];
  static float x[9];
  block_instance(rt, &f, &blocker, &x[8]);
  for (int i = 0; i < 8; i++) {
    set_input(&r[i], &x[i], 1, 1);
    r[i].timeout_ns = 60 * 1000 * 1000;
    assert_int_equal(vr_rt_submit(rt, "m", &r[i]), 0);
  }
  wait_done(9);
  /* <= 50 ms left when the batch starts: 8 rows (80 ms) would make all
   * miss; the batch rule stops at 5 (the profile interpolates between
   * measured sizes: 50 ms), or fewer on a slow machine. */
  assert_true(f.max_batch_seen >= 1 && f.max_batch_seen <= 5);
  int served = 0, dropped = 0;
  for (int i = 0; i < 8; i++) {
    served += r[i].status == 0;
    dropped += r[i].status == VR_EDEADLINE;
    vr_rt_request_clear(&r[i]);
  }
  assert_int_equal(served + dropped, 8); /* every request answered */
  assert_true(served >= 1);
  vr_rt_request_clear(&blocker);
  vr_runtime_free(rt);
}

/* SET_BATCH: a cap under the max batch holds for every batch formed
 * after it; a request of more rows than the cap runs alone; stats show
 * the cap and keep the max batch (the variant's identity). */
static void test_rt_batch_cap(void **st) {
  (void)st;
  rt_fake f;
  rt_fake_init(&f, 5000, 100, 1);
  vr_runtime *rt = rt_with_m(&f, 1, 1, 8, 0);
  vr_errbuf err = {0};
  vr_rt_instance_stats is;
  assert_int_equal(vr_rt_instances(rt, "m", &is, 1), 1);
  assert_int_equal(vr_rt_set_batch_cap(rt, is.id, 2, &err), 0);
  assert_int_not_equal(vr_rt_set_batch_cap(rt, 9999, 2, &err), 0);
  vr_rt_instances(rt, "m", &is, 1);
  assert_int_equal(is.batch_cap, 2);
  assert_int_equal(is.max_batch, 8);
  static vr_rt_request blocker, r[8], big;
  static float x[9], xb[4];
  block_instance(rt, &f, &blocker, &x[8]);
  for (int i = 0; i < 8; i++) {
    set_input(&r[i], &x[i], 1, 1);
    assert_int_equal(vr_rt_submit(rt, "m", &r[i]), 0);
  }
  set_input(&big, xb, 4, 1);
  assert_int_equal(vr_rt_submit(rt, "m", &big), 0);
  wait_done(10);
  for (int i = 0; i < 8; i++) {
    assert_int_equal(r[i].status, 0);
    vr_rt_request_clear(&r[i]);
  }
  assert_int_equal(big.status, 0);
  assert_int_equal(f.max_batch_seen, 4); /* the 4-row request, alone */
  /* the cap clamps to the max batch */
  assert_int_equal(vr_rt_set_batch_cap(rt, is.id, 100, &err), 0);
  vr_rt_instances(rt, "m", &is, 1);
  assert_int_equal(is.batch_cap, 8);
  vr_rt_request_clear(&big);
  vr_rt_request_clear(&blocker);
  vr_runtime_free(rt);
}

static void test_rt_priority(void **st) {
  (void)st;
  rt_fake f;
  rt_fake_init(&f, 5000, 0, 1);
  vr_runtime *rt = rt_with_m(&f, 1, 1, 1, 0); /* batch 1: strict order */
  static vr_rt_request r[4];
  static float x[4];
  reset_waiter();
  for (int i = 0; i < 4; i++) {
    set_input(&r[i], &x[i], 1, 1);
    r[i].user = (void *)(intptr_t)i;
    r[i].priority = i == 3 ? 1 : 0; /* the last one is urgent */
    assert_int_equal(vr_rt_submit(rt, "m", &r[i]), 0);
    if (i == 0) { /* wait until 0 is running, so 1..3 queue behind it */
      vr_rt_instance_stats is;
      do {
        usleep(100);
        vr_rt_instances(rt, "m", &is, 1);
      } while (is.busy_rows == 0 && g_w.done == 0);
    }
  }
  wait_done(4);
  assert_int_equal(g_w.order[0], 0);
  assert_int_equal(g_w.order[1], 3);
  for (int i = 0; i < 4; i++) vr_rt_request_clear(&r[i]);
  vr_runtime_free(rt);
}

static void test_rt_unload_in_flight(void **st) {
  (void)st;
  rt_fake f;
  rt_fake_init(&f, 1000, 0, 1);
  vr_runtime *rt = rt_with_m(&f, 1, 1, 2, 0);
  vr_errbuf err = {0};
  enum { N = 20 };
  static vr_rt_request r[N];
  static float x[N];
  reset_waiter();
  for (int i = 0; i < N; i++) {
    set_input(&r[i], &x[i], 1, 1);
    assert_int_equal(vr_rt_submit(rt, "m", &r[i]), 0);
  }
  assert_int_equal(vr_rt_unload(rt, "m", &err), 0);
  wait_done(N); /* every request answered */
  for (int i = 0; i < N; i++) {
    assert_int_equal(r[i].status, 0);
    vr_rt_request_clear(&r[i]);
  }
  /* After unload: not found, answered at once. */
  reset_waiter();
  set_input(&r[0], &x[0], 1, 1);
  assert_int_equal(vr_rt_submit(rt, "m", &r[0]), 0);
  wait_done(1);
  assert_int_equal(r[0].status, VR_ENOENT);
  assert_int_equal(vr_rt_unload(rt, "m", &err), VR_ENOENT);
  vr_runtime_free(rt);
}

static void test_rt_validation(void **st) {
  (void)st;
  rt_fake f;
  rt_fake_init(&f, 0, 0, 1);
  vr_runtime *rt = make_rt(&f);
  vr_model_config c;
  rt_fake_config(&c, "m", 2, 1, 4, 0);
  vr_errbuf err = {0};
  assert_int_equal(vr_rt_load(rt, &c, &err), 0);
  assert_int_equal(vr_rt_load(rt, &c, &err), VR_EEXIST);
  float x[16] = {0};
  vr_rt_request r;
  struct { int field, val, rc; } cases[] = {
      {0, 3, VR_ESHAPE},  /* wrong inner dim */
      {1, VR_DT_I32, VR_ETYPE},
      {2, 5, VR_ELIMIT},  /* rows > max batch */
      {3, 7, VR_ESHAPE},  /* byte count lies */
      {4, 0, VR_EINVAL},  /* wrong name */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    reset_waiter();
    set_input(&r, x, 1, 2);
    if (cases[i].field == 0) r.in[0].shape[1] = cases[i].val;
    if (cases[i].field == 1) r.in[0].dtype = cases[i].val;
    if (cases[i].field == 2) {
      r.in[0].shape[0] = cases[i].val;
      r.in[0].nbytes = sizeof(float) * 10;
    }
    if (cases[i].field == 3) r.in[0].nbytes = (size_t)cases[i].val;
    if (cases[i].field == 4) r.in[0].name = "z";
    assert_int_equal(vr_rt_submit(rt, "m", &r), 0);
    wait_done(1);
    assert_int_equal(r.status, cases[i].rc);
    assert_true(strlen(r.err.msg) > 0);
  }
  vr_runtime_free(rt);
}

static void test_rt_instances_api(void **st) {
  (void)st;
  rt_fake f;
  rt_fake_init(&f, 500, 0, 1);
  vr_runtime *rt = rt_with_m(&f, 1, 1, 4, 0);
  vr_errbuf err = {0};
  vr_rt_instance_opts o = {VR_PREC_FP32, 1, 2, 100};
  int id = vr_rt_add_instance(rt, "m", &o, &err);
  assert_true(id > 0);
  assert_true(vr_rt_add_instance(rt, "nope", &o, &err) == VR_ENOENT);
  vr_rt_instance_stats is[4];
  assert_int_equal(vr_rt_instances(rt, NULL, is, 4), 2);
  /* Route to the chosen instance. */
  float x = 3;
  vr_rt_request r;
  reset_waiter();
  set_input(&r, &x, 1, 1);
  assert_int_equal(vr_rt_submit_to(rt, id, &r), 0);
  wait_done(1);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.instance_id, id);
  assert_non_null(strstr(r.variant, "-b2"));
  vr_rt_request_clear(&r);
  assert_int_equal(vr_rt_remove_instance(rt, id, &err), 0);
  assert_int_equal(vr_rt_remove_instance(rt, id, &err), VR_ENOENT);
  assert_int_equal(vr_rt_instances(rt, "m", is, 4), 1);
  /* Routed to an instance removed meanwhile (scale-in racing the route):
   * a retryable VR_ESTATE (503), not "not found" for a model that exists. */
  reset_waiter();
  set_input(&r, &x, 1, 1);
  assert_int_equal(vr_rt_submit_to(rt, id, &r), 0);
  wait_done(1);
  assert_int_equal(r.status, VR_ESTATE);
  assert_int_equal(r.outcome, VR_OUT_REJECTED);
  assert_non_null(strstr(r.err.msg, "removed"));
  vr_rt_request_clear(&r);
  vr_runtime_free(rt);
}

static void count_variant(const vr_rt_variant_stats *s, void *u) {
  *(uint64_t *)u += s->outcomes[VR_OUT_OK];
}

static void test_rt_stats_survive_unload(void **st) {
  (void)st;
  rt_fake f;
  rt_fake_init(&f, 0, 0, 1);
  vr_runtime *rt = rt_with_m(&f, 1, 1, 4, 0);
  vr_errbuf err = {0};
  float x = 0;
  vr_rt_request r;
  reset_waiter();
  set_input(&r, &x, 1, 1);
  vr_rt_submit(rt, "m", &r);
  wait_done(1);
  vr_rt_request_clear(&r);
  assert_int_equal(vr_rt_unload(rt, "m", &err), 0);
  uint64_t ok = 0;
  vr_rt_foreach_variant(rt, "m", count_variant, &ok);
  assert_int_equal(ok, 1);
  vr_runtime_free(rt);
}

static void copy_variant(const vr_rt_variant_stats *s, void *u) {
  *(vr_rt_variant_stats *)u = *s;
}

/* A request submitted with settle_stats is counted by its caller: served
 * (answered) or dropped at answer time (server_apps.c, vr_drop_answer_due)
 * as dropped and one SLO violation, outside the served-request
 * histograms. Nothing is counted before it is settled, so no counter ever
 * goes down (a Prometheus counter that does reads as a reset). */
static void test_rt_answer_dropped(void **st) {
  (void)st;
  rt_fake f;
  rt_fake_init(&f, 0, 0, 1);
  vr_runtime *rt = rt_with_m(&f, 1, 1, 4, 0);
  float x[3] = {0, 0, 0};
  vr_rt_request r[3];
  reset_waiter();
  for (int i = 0; i < 3; i++) {
    set_input(&r[i], &x[i], 1, 1);
    r[i].timeout_ns = 10LL * 1000000000; /* served well in time */
    r[i].settle_stats = i > 0;
    assert_int_equal(vr_rt_submit(rt, "m", &r[i]), 0);
  }
  wait_done(3);
  vr_rt_variant_stats v;
  memset(&v, 0, sizeof v);
  vr_rt_foreach_variant(rt, "m", copy_variant, &v);
  assert_int_equal(v.outcomes[VR_OUT_OK], 1); /* only the runtime's own */
  assert_int_equal(v.request.count, 1);
  vr_rt_settle(rt, &r[1], 1);
  assert_int_equal(r[1].outcome, VR_OUT_DROPPED);
  vr_rt_settle(rt, &r[1], 1); /* once only */
  vr_rt_settle(rt, &r[2], 0);
  vr_rt_settle(rt, &r[2], 0);
  vr_rt_foreach_variant(rt, "m", copy_variant, &v);
  assert_int_equal(v.outcomes[VR_OUT_OK], 2);
  assert_int_equal(v.outcomes[VR_OUT_DROPPED], 1);
  assert_int_equal(v.slo_violations, 1);
  assert_int_equal(v.request.count, 2);
  assert_int_equal(v.queue.count, 2);
  assert_int_equal(v.compute.count, 2);
  for (int i = 0; i < 3; i++) vr_rt_request_clear(&r[i]);
  vr_runtime_free(rt);
}

/* ---- callbacks never run under the runtime's lock ----------------------- */

/* A done() that changes the runtime: loads a model (the write lock). */
typedef struct reentry {
  vr_runtime *rt;
  int calls, rc[4];
} reentry;

static void load_on_done(vr_rt_request *r, void *user) {
  reentry *x = user;
  vr_model_config c;
  char name[16];
  snprintf(name, sizeof name, "re%d", x->calls);
  rt_fake_config(&c, name, 1, 1, 4, 0);
  vr_errbuf e = {0};
  if (x->calls < 4) x->rc[x->calls] = vr_rt_load(x->rt, &c, &e);
  x->calls++;
  (void)r;
}

/* Requests answered at submission (bad input, a full queue, a deadline
 * already out of reach) get their done() after the runtime's lock is
 * released. Shown with a callback that takes the runtime's write lock (a
 * load; runtime.h advises callbacks not to, for drains): under the read
 * lock it deadlocked. The control plane's mutex, taken in such callbacks
 * and held around vr_rt_instances elsewhere, made the same a lock-order
 * cycle. A watchdog fails the test if it hangs. */
static void test_rt_callback_outside_lock(void **st) {
  (void)st;
  rt_fake f;
  rt_fake_init(&f, 3000, 0, 1);
  vr_runtime *rt = rt_with_m(&f, 1, 1, 4, 0);
  watchdog_arm(30, "a done() callback deadlocked on the runtime's lock");
  reentry x = {rt, 0, {0}};
  float v[8] = {0};
  vr_rt_request r;
  /* bad input: 2 values a row where the model takes 1 */
  vr_rt_request_init(&r);
  r.n_in = 1;
  r.in[0] = (vr_tensor){"x", VR_DT_F32, 2, {1, 2}, v, sizeof(float) * 2};
  r.done = load_on_done;
  r.user = &x;
  assert_int_equal(vr_rt_submit(rt, "m", &r), 0);
  assert_int_equal(x.calls, 1); /* answered before submit returned */
  assert_int_equal(r.outcome, VR_OUT_REJECTED);
  /* a deadline no batch can meet: dropped at admission, to one instance */
  vr_rt_instance_stats is;
  assert_int_equal(vr_rt_instances(rt, "m", &is, 1), 1);
  vr_rt_request_init(&r);
  r.n_in = 1;
  r.in[0] = (vr_tensor){"x", VR_DT_F32, 2, {1, 1}, v, sizeof(float)};
  r.timeout_ns = 1000; /* 1 us against a 3-ms batch */
  r.done = load_on_done;
  r.user = &x;
  assert_int_equal(vr_rt_submit_to(rt, is.id, &r), 0);
  assert_int_equal(x.calls, 2);
  assert_int_equal(r.status, VR_EDEADLINE);
  assert_int_equal(r.outcome, VR_OUT_DROPPED);
  assert_non_null(strstr(r.err.msg, "dropped: the deadline cannot be met"));
  watchdog_disarm();
  assert_int_equal(x.rc[0], 0);
  assert_int_equal(x.rc[1], 0);
  assert_true(vr_rt_model_ready(rt, "re0") && vr_rt_model_ready(rt, "re1"));
  /* the drop counts for the variant, the bad input for nobody */
  vr_rt_variant_stats vs;
  memset(&vs, 0, sizeof vs);
  vr_rt_foreach_variant(rt, "m", copy_variant, &vs);
  assert_int_equal(vs.outcomes[VR_OUT_DROPPED], 1);
  assert_int_equal(vs.outcomes[VR_OUT_REJECTED], 0);
  vr_rt_request_clear(&r);
  vr_runtime_free(rt);
}

/* ---- a body whose shadow gets stuck (AsyFunc, runtime/pair.h) ----------- */

/* The fake as a body: a paired run sends rows to a "shadow" that, when
 * g_stuck_us is set, answers nothing for that long and then counts as
 * failed (pair.c's timeout on a stuck process): the body runs every row
 * and reports -1. */
static long g_stuck_us;

static int stats_of_id(vr_runtime *rt, int id, vr_rt_instance_stats *s) {
  vr_rt_instance_stats all[4];
  int n = vr_rt_instances(rt, "m", all, 4);
  for (int i = 0; i < n && i < 4; i++)
    if (all[i].id == id) return *s = all[i], 1;
  return 0;
}

static int stuck_body_open(void *self, void *model, vr_precision prec, int threads,
                           int max_batch, int pb, int pe, void **sess, vr_errbuf *err) {
  (void)pb;
  (void)pe;
  return rt_fake_session_open(self, model, prec, threads, max_batch, sess, err);
}
static int stuck_attach(void *self, void *sess, int threads, int process, double *load_ms,
                        vr_errbuf *err) {
  (void)self; (void)sess; (void)threads; (void)process; (void)err;
  if (load_ms) *load_ms = 0;
  return 0;
}
static void stuck_release(void *self, void *sess) {
  (void)self;
  (void)sess;
}
static int64_t g_give_up; /* what the last paired run was given */
static int g_paired_rows; /* and its rows */
static int stuck_run_paired(void *self, void *sess, int batch, int bs, int64_t give_up,
                            const vr_tensor *in, int n_in, vr_tensor *out, int n_out,
                            int *shadow_rows, vr_errbuf *err) {
  /* stuck past give_up too: a backend whose wait overran (test_shm_pair
   * checks that the engine's keeps it) */
  __atomic_store_n(&g_give_up, give_up, __ATOMIC_RELAXED);
  __atomic_store_n(&g_paired_rows, batch, __ATOMIC_RELAXED);
  long us = __atomic_load_n(&g_stuck_us, __ATOMIC_RELAXED);
  if (us) usleep((useconds_t)us);
  *shadow_rows = us ? -1 : bs;
  return rt_fake_run(self, sess, batch, in, n_in, out, n_out, err);
}

/* A fake backend of 2 ms a batch whose paired runs are stuck_run_paired. */
static void stuck_fake_init(rt_fake *f) {
  rt_fake_init(f, 2000, 0, 1);
  f->be.body_open = stuck_body_open;
  f->be.shadow_attach = stuck_attach;
  f->be.shadow_release = stuck_release;
  f->be.run_paired = stuck_run_paired;
}

/* A batch whose shadow got stuck waited for it before the body re-ran its
 * rows: its answers come that long after the batch started. The wait is
 * no execution, so the answer-time check (policy/drop.h) must not excuse
 * it: batch_ns is the batch's profiled time then, and an answer later than
 * that past its deadline is due for dropping (a 504 at the server), not
 * served up to the shadow's 2-s timeout late. A healthy paired batch keeps
 * its measured time. */
static void test_rt_stuck_shadow(void **st) {
  (void)st;
  rt_fake f;
  stuck_fake_init(&f);
  vr_runtime *rt = rt_with_m(&f, 1, 1, 4, 0);
  vr_rt_instance_opts io = {.precision = VR_PREC_FP32, .threads = 1, .max_batch = 4,
                            .pair_begin = 0, .pair_end = 1};
  vr_errbuf e = {0};
  int id = vr_rt_add_instance(rt, "m", &io, &e);
  assert_true(id > 0);
  static const int split[5] = {0, 1, 1, 1, 1}; /* the shadow takes a row */
  vr_rt_shadow_opts so = {.threads = 1, .process = 0, .split = split};
  assert_int_equal(vr_rt_pair_shadow(rt, id, &so, NULL, &e), 0);
  float x = 1;
  vr_rt_request r;
  /* healthy: the measured time */
  reset_waiter();
  set_input(&r, &x, 1, 1);
  r.timeout_ns = 100 * 1000000LL;
  assert_int_equal(vr_rt_submit_to(rt, id, &r), 0);
  wait_done(1);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.batch_ns, r.end_ns - r.start_ns);
  /* the shadow is waited for until the deadline less twice the batch's
   * time (2 ms here, more on a loaded machine), past the 50-ms overrun floor;
   * 0 or the 2-s bound would be far outside */
  int64_t gu = __atomic_load_n(&g_give_up, __ATOMIC_RELAXED);
  if (gu > r.deadline_ns || gu < r.deadline_ns - 60 * 1000000LL)
    fail_msg("give-up %.1f ms from the deadline", (double)(gu - r.deadline_ns) / 1e6);
  vr_rt_request_clear(&r);
  /* stuck for 300 ms against a 100-ms deadline and a 2-ms batch */
  __atomic_store_n(&g_stuck_us, 300 * 1000L, __ATOMIC_RELAXED);
  reset_waiter();
  set_input(&r, &x, 1, 1);
  r.timeout_ns = 100 * 1000000LL;
  assert_int_equal(vr_rt_submit_to(rt, id, &r), 0);
  /* q, queued behind the stuck batch with a 50-ms deadline, is dropped
   * when it becomes due (the reaper), not when the batch ends 250 ms
   * after that */
  vr_rt_instance_stats is;
  do {
    usleep(100);
    assert_true(stats_of_id(rt, id, &is));
  } while (is.busy_rows == 0);
  vr_rt_request q;
  float xq = 2;
  set_input(&q, &xq, 1, 1);
  q.timeout_ns = 50 * 1000000LL;
  assert_int_equal(vr_rt_submit_to(rt, id, &q), 0);
  wait_done(2);
  __atomic_store_n(&g_stuck_us, 0, __ATOMIC_RELAXED);
  assert_int_equal(q.status, VR_EDEADLINE);
  assert_int_equal(q.outcome, VR_OUT_DROPPED);
  if (q.end_ns >= r.end_ns - 100 * 1000000LL)
    fail_msg("q answered %.1f ms after its deadline, %.1f ms before the stuck batch ended",
             (double)(q.end_ns - q.deadline_ns) / 1e6, (double)(r.end_ns - q.end_ns) / 1e6);
  vr_rt_request_clear(&q);
  assert_int_equal(r.status, 0); /* the runtime served it; the answer is judged later */
  int64_t took = r.end_ns - r.start_ns;
  assert_true(took >= 300 * 1000000LL);
  assert_true(r.batch_ns > 0 && r.batch_ns < took - 250 * 1000000LL);
  assert_true(vr_drop_answer_due(r.end_ns, r.deadline_ns, r.batch_ns));
  assert_false(vr_drop_answer_due(r.end_ns, r.deadline_ns, took)); /* what it was judged by */
  assert_true(stats_of_id(rt, id, &is));
  assert_int_equal(is.shadow_threads, 0); /* released after failing */
  vr_rt_request_clear(&r);
  vr_runtime_free(rt);
}

/* A paired batch gives up on its shadow by its *earliest* deadline: once
 * that request would be late, waiting on only loses its answer (and each
 * later one in turn). Two requests in one batch, the second with the
 * nearer deadline; the rule itself is test_policy's test_drop_stuck. */
static void test_rt_give_up_first_deadline(void **st) {
  (void)st;
  rt_fake f;
  stuck_fake_init(&f);
  vr_runtime *rt = rt_with_m(&f, 1, 1, 2, 20000); /* a batch of 2 waits up to 20 ms */
  vr_rt_instance_opts io = {.precision = VR_PREC_FP32, .threads = 1, .max_batch = 2,
                            .pair_begin = 0, .pair_end = 1};
  vr_errbuf e = {0};
  int id = vr_rt_add_instance(rt, "m", &io, &e);
  assert_true(id > 0);
  static const int split[3] = {0, 1, 1};
  vr_rt_shadow_opts so = {.threads = 1, .process = 0, .split = split};
  assert_int_equal(vr_rt_pair_shadow(rt, id, &so, NULL, &e), 0);
  __atomic_store_n(&g_stuck_us, 0, __ATOMIC_RELAXED);
  float x[2] = {1, 2};
  vr_rt_request r[2];
  reset_waiter();
  for (int i = 0; i < 2; i++) {
    set_input(&r[i], &x[i], 1, 1);
    r[i].timeout_ns = (i ? 200 : 400) * 1000000LL;
    assert_int_equal(vr_rt_submit_to(rt, id, &r[i]), 0);
  }
  wait_done(2);
  assert_int_equal(r[0].status, 0);
  assert_int_equal(r[1].status, 0);
  assert_int_equal(__atomic_load_n(&g_paired_rows, __ATOMIC_RELAXED), 2); /* one batch */
  int64_t gu = __atomic_load_n(&g_give_up, __ATOMIC_RELAXED);
  if (gu > r[1].deadline_ns || gu < r[1].deadline_ns - 60 * 1000000LL)
    fail_msg("give-up %.1f ms from the earliest deadline (%.1f from the last)",
             (double)(gu - r[1].deadline_ns) / 1e6, (double)(gu - r[0].deadline_ns) / 1e6);
  for (int i = 0; i < 2; i++) vr_rt_request_clear(&r[i]);
  vr_runtime_free(rt);
}

/* ---- outputs that do not carry the batch (engine models) --------------- */

/* A config for tests/data/engine/<file>.onnx: input "x" [-1, in...], the
 * outputs given as names with their non-batch dims. */
typedef struct eng_out {
  const char *name;
  int ndim;
  int64_t dims[4];
} eng_out;

static void engine_config(vr_model_config *c, const char *file, int in_ndim,
                          const int64_t *in_dims, const eng_out *outs, int n_out,
                          int max_batch) {
  const char *root = getenv("VR_SOURCE_DIR") ? getenv("VR_SOURCE_DIR") : ".";
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s", file);
  snprintf(c->model_path, sizeof c->model_path, "%s/tests/data/engine/%s.onnx", root, file);
  c->accuracy = -1;
  c->n_inputs = 1;
  strcpy(c->inputs[0].name, "x");
  c->inputs[0].dtype = VR_DT_F32;
  c->inputs[0].ndim = in_ndim;
  c->inputs[0].shape[0] = -1;
  for (int d = 1; d < in_ndim; d++) c->inputs[0].shape[d] = in_dims[d - 1];
  c->n_outputs = n_out;
  for (int o = 0; o < n_out; o++) {
    vr_tensor_info *t = &c->outputs[o];
    snprintf(t->name, sizeof t->name, "%s", outs[o].name);
    t->dtype = VR_DT_F32;
    t->ndim = outs[o].ndim;
    t->shape[0] = -1;
    for (int d = 1; d < t->ndim; d++) t->shape[d] = outs[o].dims[d - 1];
  }
  c->max_batch_size = max_batch;
  c->instances = 1;
  c->threads = 1;
}

static vr_runtime *engine_rt(void) {
  vr_runtime_opts o;
  vr_runtime_opts_init(&o);
  o.profile_runs = 1;
  vr_runtime *rt = NULL;
  vr_errbuf err = {0};
  assert_int_equal(vr_runtime_create(&o, &rt, &err), 0);
  return rt;
}

static void expect_refused(vr_runtime *rt, const vr_model_config *c, const char *want) {
  vr_errbuf err = {0};
  int rc = vr_rt_load(rt, c, &err);
  if (rc == 0) fail_msg("%s loaded; its requests would all fail", c->name);
  assert_int_equal(rc, VR_EUNSUPPORTED);
  if (!strstr(err.msg, want)) fail_msg("'%s' does not say '%s'", err.msg, want);
  assert_false(vr_rt_model_ready(rt, c->name));
}

/* alias_output's 'y' is its [N, 8] input reshaped to [2N, 4]; reduce_rows'
 * 'y' is one row whatever the batch. The runtime splits a batched result
 * into the requests' rows by dim 0, so such a model was loaded and then
 * failed every request ("backend output 1 has bad shape"); it is refused
 * at load, naming the output and its shape (Triton refuses it too for a
 * max_batch_size > 0). reduce_rows at max batch 1 has one row for the one
 * request, and serves. */
static void test_rt_outputs_not_batch_major(void **st) {
  (void)st;
  if (!vr_rt_backend_engine()) skip();
  vr_runtime *rt = engine_rt();
  vr_model_config c;
  int64_t in8[] = {8}, img[] = {1, 28, 28};
  eng_out alias[] = {{"a", 2, {8}}, {"y", 2, {4}}}, rows[] = {{"y", 4, {1, 28, 28}}};
  engine_config(&c, "alias_output", 2, in8, alias, 2, 4);
  expect_refused(rt, &c, "output 'y' has shape [2,4] at batch 1");
  c.max_batch_size = 1; /* batch 1 shows it already */
  expect_refused(rt, &c, "output 'y' has shape [2,4] at batch 1");
  engine_config(&c, "reduce_rows", 4, img, rows, 1, 4);
  expect_refused(rt, &c, "output 'y' has shape [1,1,28,28] at batch 2");
  c.max_batch_size = 1;
  vr_errbuf err = {0};
  if (vr_rt_load(rt, &c, &err)) fail_msg("reduce_rows at max batch 1: %s", err.msg);
  static float x[28 * 28];
  for (int i = 0; i < 28 * 28; i++) x[i] = (float)i;
  vr_rt_request r;
  reset_waiter();
  set_input(&r, x, 1, 28 * 28);
  r.in[0].ndim = 4;
  r.in[0].shape[1] = 1;
  r.in[0].shape[2] = r.in[0].shape[3] = 28;
  assert_int_equal(vr_rt_submit(rt, "reduce_rows", &r), 0);
  wait_done(1);
  if (r.status) fail_msg("reduce_rows request: %s", r.err.msg);
  assert_true(((const float *)r.out[0].data)[5] == 5.0f);
  vr_rt_request_clear(&r);
  vr_runtime_free(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batch_full),
      cmocka_unit_test(test_batch_delay),
      cmocka_unit_test(test_batch_deadline),
      cmocka_unit_test(test_lat_estimate),
      cmocka_unit_test(test_batch_form),
      cmocka_unit_test(test_batch_preferred),
      cmocka_unit_test(test_lat_observe),
      cmocka_unit_test(test_config_good),
      cmocka_unit_test(test_config_bad),
      cmocka_unit_test(test_rt_batches_and_outputs),
      cmocka_unit_test(test_rt_deadline_drop),
      cmocka_unit_test(test_rt_deadline_caps_batch),
      cmocka_unit_test(test_rt_batch_cap),
      cmocka_unit_test(test_rt_priority),
      cmocka_unit_test(test_rt_unload_in_flight),
      cmocka_unit_test(test_rt_validation),
      cmocka_unit_test(test_rt_instances_api),
      cmocka_unit_test(test_rt_stats_survive_unload),
      cmocka_unit_test(test_rt_answer_dropped),
      cmocka_unit_test(test_rt_stuck_shadow),
      cmocka_unit_test(test_rt_give_up_first_deadline),
      cmocka_unit_test(test_rt_callback_outside_lock),
      cmocka_unit_test(test_rt_outputs_not_batch_major),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
