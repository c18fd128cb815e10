/* The live control loop under a load step, on the runtime with the fake
 * backend of known latency (base 2 ms + 0.5 ms per row, so profiles and
 * reality agree): one instance of the query-path variant cannot carry the
 * load, the autoscaler must add capacity (replicate or move to a bigger
 * batch), and after it reacts the SLO is met. Prints the reaction time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "control/control.h"
#include "control/fsutil.h"
#include "rt_fake.h"
#include "vr_test.h"

#define BASE_US 2000
#define ROW_US 500
#define RATE 700.0
#define SECONDS 5
#define SLO_MS 40.0

static char g_tmp[256];

static void write_repo(const char *dir) {
  char path[400];
  assert_int_equal(vr_mkdirs(dir, NULL), 0);
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  fprintf(f, "{\"name\":\"syn\",\"app\":\"syn\",\"inputs\":[{\"name\":\"x\",\"datatype\":"
             "\"FP32\",\"shape\":[-1,4]}],\"outputs\":[{\"name\":\"y\",\"datatype\":"
             "\"FP32\",\"shape\":[-1,2]}],\"max_batch_size\":8,\"instances\":1}");
  fclose(f);
  snprintf(path, sizeof path, "%s/model.onnx", dir); /* the fake ignores it */
  fclose(fopen(path, "w"));
}

/* Variants syn-fp32-t1-b{1,4,8} with the fake's true latency. */
static void register_synthetic(vr_store *s, const char *dir) {
  vr_model_rec m = {0};
  strcpy(m.name, "syn");
  strcpy(m.app, "syn");
  snprintf(m.dir, sizeof m.dir, "%s", dir);
  m.accuracy = 90;
  vr_variant_rec v[3];
  char *texts[3];
  int batches[3] = {1, 4, 8};
  for (int i = 0; i < 3; i++) {
    vr_profile p;
    vr_profile_init(&p);
    strcpy(p.model, "syn");
    strcpy(p.app, "syn");
    snprintf(p.variant, sizeof p.variant, "syn-fp32-t1-b%d", batches[i]);
    strcpy(p.precision, "fp32");
    p.threads = 1;
    p.max_batch = batches[i];
    p.load_ms = 50;
    p.mem_bytes = 1 << 20;
    for (int k = 0; (1 << k) <= batches[i]; k++) {
      double ms = (BASE_US + ROW_US * (1 << k)) / 1000.0;
      p.lat.p50_ms[k] = ms;
      p.lat.p90_ms[k] = ms * 1.05;
      p.lat.p99_ms[k] = ms * 1.1;
    }
    p.accuracy = 90;
    p.cost_per_s = 0.0425 / 3600;
    json_t *j = vr_profile_to_json(&p);
    texts[i] = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    memset(&v[i], 0, sizeof v[i]);
    snprintf(v[i].name, sizeof v[i].name, "%s", p.variant);
    strcpy(v[i].model, "syn");
    strcpy(v[i].app, "syn");
    v[i].precision = VR_PREC_FP32;
    v[i].threads = 1;
    v[i].max_batch = batches[i];
    v[i].accuracy = 90;
    v[i].lat_b1_ms = p.lat.p50_ms[0];
    v[i].load_ms = 50;
    v[i].memory_bytes = 1 << 20;
    v[i].profile_json = texts[i];
  }
  vr_errbuf e = {0};
  assert_int_equal(vr_store_add_model(s, &m, v, 3, &e), 0);
  for (int i = 0; i < 3; i++) free(texts[i]);
}

typedef struct query {
  vr_rt_request q;
  vr_ctl_route r;
  float x[4];
  vr_control *c;
  vr_runtime *rt;
  int late, failed, done;
} query;

static void on_done(vr_rt_request *q, void *user) {
  query *x = user;
  vr_control_completed(x->c, &x->r, q);
  if (q->status) x->failed = 1;
  else if ((q->end_ns - q->arrival_ns) / 1e6 > SLO_MS) x->late = 1;
  __atomic_store_n(&x->done, 1, __ATOMIC_RELEASE);
}

static void on_routed(void *tag, const vr_ctl_route *r) {
  query *x = tag;
  x->r = *r;
  if (r->status) {
    x->failed = 1;
    __atomic_store_n(&x->done, 1, __ATOMIC_RELEASE);
    return;
  }
  vr_rt_request_init(&x->q);
  x->q.n_in = 1;
  x->q.in[0] = (vr_tensor){"x", VR_DT_F32, 2, {1, 4}, x->x, sizeof x->x};
  x->q.done = on_done;
  x->q.user = x;
  vr_rt_submit_to(x->rt, r->instance_id, &x->q);
}

static int instances(vr_runtime *rt, int *max_batch) {
  vr_rt_instance_stats st[16];
  int n = vr_rt_instances(rt, NULL, st, 16);
  *max_batch = 0;
  for (int i = 0; i < n && i < 16; i++)
    if (st[i].max_batch > *max_batch) *max_batch = st[i].max_batch;
  return n;
}

typedef struct fixture {
  vr_store *s;
  rt_fake fake; /* the runtime's backend: stays put while it runs */
  vr_runtime *rt;
} fixture;

/* A scratch store (g_tmp) with the synthetic app registered, a runtime on
 * the fake backend (BASE_US + ROW_US per row), and control options over
 * both for a worker of `cores` with a 1 ms queue delay (the caller sets
 * the policy). */
static void fixture_open(fixture *x, int cores, vr_control_opts *co) {
  strcpy(g_tmp, "/tmp/vr_scale_XXXXXX");
  assert_non_null(mkdtemp(g_tmp));
  char db[300], dir[300];
  snprintf(db, sizeof db, "%s/store.db", g_tmp);
  snprintf(dir, sizeof dir, "%s/syn", g_tmp);
  write_repo(dir);
  vr_errbuf e = {0};
  assert_int_equal(vr_store_open_path(db, &x->s, &e), 0);
  register_synthetic(x->s, dir);
  rt_fake_init(&x->fake, BASE_US, ROW_US, 2);
  vr_runtime_opts ro;
  vr_runtime_opts_init(&ro);
  ro.backend = &x->fake.be;
  ro.profile_runs = 1;
  assert_int_equal(vr_runtime_create(&ro, &x->rt, &e), 0);
  vr_control_opts_init(co);
  co->store = x->s;
  co->rt = x->rt;
  co->cores = cores;
  co->max_queue_delay_us = 1000;
}

static void fixture_close(fixture *x) {
  vr_runtime_free(x->rt);
  vr_store_close(x->s);
  vr_rmtree(g_tmp);
}

/* Offers `total` queries for app syn at RATE (open loop), ticking the
 * control plane every 250 ms, and waits for every answer; -> the queries
 * (vr_free them). With reacted_ns: the time from the start to the first
 * tick that saw more than one instance or a batch above 1 (-1: none). */
static query *offer(vr_control *c, vr_runtime *rt, int total, int64_t *reacted_ns) {
  vr_errbuf e = {0};
  query *qs = VR_NEWN(query, total);
  int64_t t0 = vr_now_ns(), next_tick = t0 + 250 * VR_NS_PER_MS;
  if (reacted_ns) *reacted_ns = -1;
  for (int i = 0; i < total; i++) {
    int64_t due = t0 + (int64_t)(i * 1e9 / RATE);
    for (int64_t now; (now = vr_now_ns()) < due;) {
      if (now >= next_tick) {
        assert_int_equal(vr_control_tick(c, now, &e), 0);
        next_tick += 250 * VR_NS_PER_MS;
        int mb;
        if (reacted_ns && *reacted_ns < 0 && (instances(rt, &mb) > 1 || mb > 1))
          *reacted_ns = now - t0;
      }
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
    }
    qs[i].c = c;
    qs[i].rt = rt;
    vr_ctl_query q = {.app = "syn", .latency_ms = SLO_MS, .min_accuracy = 80};
    vr_control_route(c, &q, on_routed, &qs[i]);
  }
  for (int i = 0; i < total; i++)
    while (!__atomic_load_n(&qs[i].done, __ATOMIC_ACQUIRE)) usleep(1000);
  return qs;
}

/* cores: the worker's size. 8 leaves room to replicate or load a bigger
 * variant beside the old one; 1 leaves none, so the upgrade must replace
 * the instance in place (MIGRATE to the bigger batch on the same core). */
static void load_step(int cores) {
  fixture x;
  vr_control_opts co;
  fixture_open(&x, cores, &co); /* the fake sleeps: cores are bookkeeping here */
  /* The autoscaler alone: with other tests sharing the CPU, the fake's
   * sleeps overrun and interference detection would (rightly) move
   * traffic around, which is not what this test measures. */
  vr_policy_cfg_default(&co.policy, VR_POL_INFAAS);
  co.policy.interference_factor = 1e9;
  co.policy_set = 1;
  vr_control *c;
  vr_errbuf e = {0};
  assert_int_equal(vr_control_create(&co, &c, &e), 0);

  int total = (int)(RATE * SECONDS);
  int64_t reacted_ns;
  query *qs = offer(c, x.rt, total, &reacted_ns);
  /* SLO attainment over the last two seconds, after the reaction. */
  int from = (int)(RATE * (SECONDS - 2)), late = 0, failed = 0;
  for (int i = from; i < total; i++) late += qs[i].late, failed += qs[i].failed;
  int mb, n = instances(x.rt, &mb);
  double overrun = rt_fake_overrun(&x.fake);
  printf("load step to %.0f qps on %d core(s): reaction after %.2f s; %d instance(s), "
         "max batch %d; last 2 s: %d late, %d failed of %d; fake's sleeps took "
         "%.2fx their profile\n", RATE, cores, reacted_ns / 1e9, n, mb, late, failed,
         total - from, overrun);
  assert_true(reacted_ns > 0);
  assert_true(n > 1 || mb > 1);
  if (cores == 1) { /* replaced in place: one instance, a bigger batch */
    assert_int_equal(n, 1);
    assert_true(mb > 1);
  }
  assert_int_equal(failed, 0);
  /* >= 99% attainment, when the host ran the fake as profiled (its sleeps
   * within 5%). At 700 qps a b4 instance is 70% busy; on a loaded host the
   * sleeps overrun and the executor and generator threads wait for a CPU,
   * which pushes it towards 100% whatever the policy does, so the lateness
   * is then reported, not asserted (a timing target belongs in a
   * benchmark: bench/ and docs/BENCHMARKS.md). */
  if (overrun <= 1.05)
    assert_true(late <= (total - from) / 100);
  else
    printf("lateness not asserted: the host slowed the fake by %.0f%%\n",
           (overrun - 1) * 100);
  for (int i = 0; i < total; i++) vr_rt_request_clear(&qs[i].q);
  vr_free(qs);
  vr_control_free(c);
  fixture_close(&x);
}

static void test_load_step(void **st) {
  (void)st;
  load_step(8);
}

static void test_load_step_full_worker(void **st) {
  (void)st;
  load_step(1);
}

/* Route step 3c live (policy/route.h): under a policy that never scales
 * (Clipper+ holding one b1 instance), b1 Overloaded and behind, with no
 * other serving variant to spill to, makes the query path start loading
 * the Inactive variant INFaaS would pick (b4 or b8: same load + inference
 * time), and the overflow goes to it once it serves. Nothing else in the
 * control plane loads a second variant here, so without the rule the
 * test fails. Asserts no timing: the fake may run slow on a loaded host. */
static void test_overload_loads_inactive(void **st) {
  (void)st;
  fixture x;
  vr_control_opts co;
  fixture_open(&x, 8, &co);
  vr_policy_cfg_default(&co.policy, VR_POL_CLIPPER);
  co.policy.nfixed = 1;
  co.policy.fixed[0].variant = 0; /* syn-fp32-t1-b1 (registration order) */
  co.policy.fixed[0].instances = 1;
  co.policy.interference_factor = 1e9;
  co.policy_set = 1;
  vr_control *c;
  vr_errbuf e = {0};
  assert_int_equal(vr_control_create(&co, &c, &e), 0);
  assert_int_equal(vr_control_tick(c, vr_now_ns(), &e), 0); /* provision b1 */
  int total = (int)(RATE * 3);
  query *qs = offer(c, x.rt, total, NULL);
  int mb, n = instances(x.rt, &mb);
  printf("Clipper+ b1 at %.0f qps: %d instance(s), max batch %d\n", RATE, n, mb);
  assert_true(n >= 2);
  assert_true(mb > 1); /* a b4 or b8 instance: the query path loaded it */
  for (int i = 0; i < total; i++) vr_rt_request_clear(&qs[i].q);
  vr_free(qs);
  vr_control_free(c);
  fixture_close(&x);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_load_step),
                                     cmocka_unit_test(test_load_step_full_worker),
                                     cmocka_unit_test(test_overload_loads_inactive)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
