/* InferLine traffic envelopes and tuner on hand-made arrival series. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "vr_test.h"

#include "base/alloc.h"
#include "policy/envelope.h"

#define MS 1000000LL
#define SEC 1000000000LL

static void test_windows(void **st) {
  (void)st;
  vr_envelope e;
  assert_int_equal(vr_envelope_windows(&e, 7 * MS, 60 * SEC), 0);
  assert_int_equal(e.win_ns[0], 7 * MS);
  for (int i = 1; i < e.nwin - 1; i++)
    assert_int_equal(e.win_ns[i], 2 * e.win_ns[i - 1]);
  assert_int_equal(e.win_ns[e.nwin - 1], 60 * SEC);
  /* 7 ms * 2^13 = 57.3 s < 60 s, 2^14 beyond: 14 doublings + 60 s */
  assert_int_equal(e.nwin, 15);
  assert_int_equal(vr_envelope_windows(&e, 1000, 60 * SEC), 0);
  assert_int_equal(e.win_ns[0], MS); /* clamped */
  assert_int_equal(vr_envelope_windows(&e, 2 * SEC, SEC), VR_EINVAL);
}

static void test_compute_hand(void **st) {
  (void)st;
  vr_envelope e;
  assert_int_equal(vr_envelope_windows(&e, 10 * MS, 80 * MS), 0);
  assert_int_equal(e.nwin, 4); /* 10 20 40 80 ms */
  int64_t t[] = {0, 1 * MS, 2 * MS, 30 * MS, 31 * MS, 50 * MS, 100 * MS};
  assert_int_equal(vr_envelope_compute(&e, t, 7), 0);
  assert_int_equal(e.count[0], 3); /* (-8,2] */
  assert_int_equal(e.count[1], 3);
  assert_int_equal(e.count[2], 5); /* (-9,31] */
  assert_int_equal(e.count[3], 6); /* (-30,50] */
  assert_true(vr_envelope_rate(&e, 0) == 300.0);
  /* a window is half-open: an arrival exactly w earlier is outside */
  int64_t u[] = {0, 10 * MS, 20 * MS};
  assert_int_equal(vr_envelope_compute(&e, u, 3), 0);
  assert_int_equal(e.count[0], 1);
  assert_int_equal(e.count[1], 2);
  assert_int_equal(e.count[3], 3);
  int64_t bad[] = {5, 4};
  assert_int_equal(vr_envelope_compute(&e, bad, 2), VR_EINVAL);
  assert_int_equal(vr_envelope_compute(&e, NULL, 0), 0);
  assert_int_equal(e.count[0], 0);
}

/* A tuner over a plan of evenly spaced arrivals at `qps` for 60 s. */
static void mkcfg(vr_tuner_cfg *c, double qps) {
  vr_tuner_cfg_default(c);
  assert_int_equal(vr_envelope_windows(&c->plan, 20 * MS, 60 * SEC), 0);
  size_t n = (size_t)(qps * 60);
  int64_t *t = VR_NEWN(int64_t, n);
  for (size_t i = 0; i < n; i++) t[i] = (int64_t)(i * 1e9 / qps);
  assert_int_equal(vr_envelope_compute(&c->plan, t, n), 0);
  vr_free(t);
  c->plan_qps = qps;
  c->nstages = 2;
  /* stage 0: every request, 2 replicas of 80 qps; stage 1: 30% of the
   * requests, 1 replica of 50 qps */
  c->st[0] = (vr_tuner_stage){.k_plan = 2, .scale = 1, .mu_qps = 80};
  c->st[1] = (vr_tuner_stage){.k_plan = 1, .scale = 0.3, .mu_qps = 50};
  assert_int_equal(vr_tuner_cfg_validate(c, NULL), 0);
}

/* The incremental envelope of vr_tuner_observe equals the batch one. */
static void test_observe_matches_compute(void **st) {
  (void)st;
  vr_tuner_cfg c;
  mkcfg(&c, 100);
  vr_tuner_state s;
  vr_tuner_state_init(&s, &c, 0);
  size_t n = 20000;
  int64_t *t = VR_NEWN(int64_t, n);
  uint64_t x = 12345;
  int64_t now = 0;
  for (size_t i = 0; i < n; i++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    /* bursty gaps: mostly 0..2 ms, sometimes up to 200 ms */
    int64_t gap = (x >> 33) % 16 ? (int64_t)((x >> 20) % (2 * MS))
                                  : (int64_t)((x >> 20) % (200 * MS));
    now += gap;
    t[i] = now;
    assert_int_equal(vr_tuner_observe(&c, &s, now), 0);
  }
  vr_envelope e = c.plan;
  assert_int_equal(vr_envelope_compute(&e, t, n), 0);
  for (int i = 0; i < e.nwin; i++) assert_int_equal(s.peak[i], e.count[i]);
  /* the ring keeps only what the largest window can see */
  assert_true(s.len <= n);
  assert_int_equal(vr_tuner_observe(&c, &s, now - 1), VR_EINVAL);
  vr_free(t);
  vr_tuner_state_free(&s);
}

/* What the decisions of one feed did. */
typedef struct fed {
  int ups, downs;
  int64_t first_up, first_down; /* -1: none */
} fed;

/* Feeds evenly spaced arrivals at qps over [t0, t1) and decides every
 * 100 ms; returns the first arrival time not fed. */
static int64_t feed(const vr_tuner_cfg *c, vr_tuner_state *s, double qps,
                    int64_t t0, int64_t t1, fed *f) {
  *f = (fed){0, 0, -1, -1};
  int64_t gap = (int64_t)(1e9 / qps), next_dec = t0 + 100 * MS, t = t0;
  for (; t < t1; t += gap) {
    while (next_dec <= t) {
      vr_tuner_decision d;
      vr_tuner_decide(c, s, next_dec, &d);
      if (d.up > 0 && !f->ups++) f->first_up = next_dec;
      if (d.up < 0 && !f->downs++) f->first_down = next_dec;
      next_dec += 100 * MS;
    }
    assert_int_equal(vr_tuner_observe(c, s, t), 0);
  }
  return t;
}

static void test_tuner_steady_burst_quiet(void **st) {
  (void)st;
  vr_tuner_cfg c;
  mkcfg(&c, 100);
  vr_tuner_state s;
  vr_tuner_state_init(&s, &c, 0);
  fed f;
  /* the planned workload: nothing to do */
  int64_t t = feed(&c, &s, 100, 0, 60 * SEC, &f);
  assert_int_equal(f.ups, 0);
  assert_int_equal(f.downs, 0);
  assert_int_equal(s.k[0], 2);
  assert_int_equal(s.k[1], 1);
  /* 2.5x the rate: scale up within the first decision after the shortest
   * window overflows, proportionally (ceil(2 * 2.5), ceil(1 * 2.5)) */
  int64_t burst0 = t;
  t = feed(&c, &s, 250, burst0, burst0 + 10 * SEC, &f);
  assert_true(f.first_up > 0 && f.first_up - burst0 <= 200 * MS);
  assert_true(s.k[0] >= 5 && s.k[0] <= 6);
  assert_true(s.k[1] >= 3);
  int k_burst0 = s.k[0];
  /* back to the planned rate: no scale-down before 15 s of calm, then
   * down in steps 15 s apart, first to what the long windows (still
   * holding the burst) ask for, then, once the burst has left the 60-s
   * window, to the plan (not below: the plan's own rate needs it) */
  int64_t calm0 = t;
  t = feed(&c, &s, 100, calm0, calm0 + 45 * SEC, &f);
  assert_int_equal(f.ups, 0);
  assert_true(f.downs >= 1);
  assert_true(f.first_down - calm0 >= 15 * SEC);
  assert_true(s.k[0] > 2 && s.k[0] < k_burst0);
  t = feed(&c, &s, 100, t, calm0 + 90 * SEC, &f);
  assert_int_equal(f.ups, 0);
  assert_true(f.downs >= 1);
  assert_true(s.k[0] < k_burst0);
  assert_int_equal(s.k[0], 2);
  assert_true(s.k[1] >= 1 && s.k[1] <= 2);
  /* load gone: conservative scale down to one replica per stage */
  feed(&c, &s, 2, t, t + 60 * SEC, &f);
  assert_int_equal(f.ups, 0);
  assert_int_equal(s.k[0], 1);
  assert_int_equal(s.k[1], 1);
  vr_tuner_state_free(&s);
}

/* Burstier arrivals at the same mean rate trip a short window only. */
static void test_tuner_burstiness(void **st) {
  (void)st;
  vr_tuner_cfg c;
  mkcfg(&c, 100);
  vr_tuner_state s;
  vr_tuner_state_init(&s, &c, 0);
  /* 10 arrivals at once every 100 ms: 100 qps on average */
  for (int64_t t = 0; t < 5 * SEC; t += 100 * MS)
    for (int j = 0; j < 10; j++) vr_tuner_observe(&c, &s, t);
  vr_tuner_decision d;
  vr_tuner_decide(&c, &s, 5 * SEC, &d);
  assert_int_equal(d.up, 1);
  assert_int_equal(d.window, 0); /* 20 ms: 10 arrivals vs 2 planned */
  assert_true(d.rate_qps == 500);
  assert_int_equal(d.k[0], 10);
  assert_int_equal(d.k[1], 5);
  vr_tuner_state_free(&s);
}

/* The scale-down reference replayed over the planning trace: for evenly
 * spaced arrivals its 5-s peak is the rate itself; and no scale-down
 * before the tuner has seen a full look-back (30 s), however quiet. */
static void test_tuner_down_reference(void **st) {
  (void)st;
  vr_tuner_cfg c;
  mkcfg(&c, 100);
  size_t n = 7000;
  int64_t *t = VR_NEWN(int64_t, n);
  for (size_t i = 0; i < n; i++) t[i] = (int64_t)(i * 1e9 / 100);
  double r = vr_tuner_plan_down_qps(&c, t, n);
  assert_true(fabs(r - 100) <= 0.2 + 1e-9);
  /* 100 qps for 30 s, then 20 qps for 40 s: the minimum is at the end,
   * whose look-back (30 s of 5-s windows) holds only the quiet part */
  size_t m = 0;
  for (size_t i = 0; i < 3000; i++) t[m++] = (int64_t)(i * 1e9 / 100);
  for (size_t i = 0; i < 800; i++) t[m++] = 30 * SEC + (int64_t)(i * 1e9 / 20);
  r = vr_tuner_plan_down_qps(&c, t, m);
  assert_true(fabs(r - 20) <= 0.2 + 1e-9);
  assert_true(vr_tuner_plan_down_qps(&c, NULL, 0) == 0);
  vr_free(t);
  c.plan_down_qps = 100;
  assert_int_equal(vr_tuner_cfg_validate(&c, NULL), 0);
  vr_tuner_state s;
  vr_tuner_state_init(&s, &c, 0);
  c.settle_ns = 0;
  fed f;
  /* a tenth of the planned rate from t = 0: down only once 30 s are seen */
  feed(&c, &s, 10, 0, 40 * SEC, &f);
  assert_true(f.downs >= 1);
  assert_true(f.first_down >= 30 * SEC);
  assert_int_equal(s.k[0], 1);
  vr_tuner_state_free(&s);
}

static void test_tuner_cfg_errors(void **st) {
  (void)st;
  vr_tuner_cfg c;
  vr_errbuf err = {0};
  vr_tuner_cfg_default(&c);
  assert_int_equal(vr_tuner_cfg_validate(&c, &err), VR_EINVAL);
  mkcfg(&c, 10);
  c.st[1].mu_qps = 0;
  assert_int_equal(vr_tuner_cfg_validate(&c, &err), VR_EINVAL);
  assert_non_null(strstr(err.msg, "stage 1"));
  mkcfg(&c, 10);
  c.plan.count[0] = 0;
  assert_int_equal(vr_tuner_cfg_validate(&c, &err), VR_EINVAL);
  mkcfg(&c, 10);
  c.max_replicas = 3;
  vr_tuner_state s;
  vr_tuner_state_init(&s, &c, 0);
  for (int j = 0; j < 100; j++) vr_tuner_observe(&c, &s, SEC);
  vr_tuner_decision d;
  vr_tuner_decide(&c, &s, SEC, &d);
  assert_int_equal(d.k[0], 3); /* capped */
  vr_tuner_state_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_windows),
      cmocka_unit_test(test_compute_hand),
      cmocka_unit_test(test_observe_matches_compute),
      cmocka_unit_test(test_tuner_steady_burst_quiet),
      cmocka_unit_test(test_tuner_burstiness),
      cmocka_unit_test(test_tuner_down_reference),
      cmocka_unit_test(test_tuner_cfg_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
