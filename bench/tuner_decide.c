/*
 * InferLine tuner speed: time of one vr_tuner_decide (target <= 10 us) and
 * of one vr_tuner_observe, for a 3-stage pipeline planned on a 60 s Gamma
 * CV=4 trace at 1000 qps (windows from 5 ms doubling to 60 s), then fed a
 * live Gamma CV=4 stream at 1500 qps with a decision every 100 ms.
 *
 *   build/bench/bench_tuner_decide [seconds_of_live_traffic]
 *
 * Decisions are timed one by one with clock_gettime (p50/p99/max);
 * observations in bulk (mean, including drawing the Gamma gap). The
 * timer's cost is not subtracted.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/alloc.h"
#include "bench_util.h"
#include "policy/envelope.h"
#include "sim/rng.h"


/* Gamma inter-arrival with mean 1/qps and coefficient of variation cv. */
static double gap_s(vr_rng *r, double qps, double cv) {
  double k = 1.0 / (cv * cv);
  return vr_rng_gamma(r, k) / (k * qps);
}

int main(int argc, char **argv) {
  double live_s = argc > 1 ? atof(argv[1]) : 120;
  if (!(live_s > 0)) live_s = 120;
  vr_rng r;
  vr_rng_seed(&r, 7);
  vr_tuner_cfg c;
  vr_tuner_cfg_default(&c);
  vr_envelope_windows(&c.plan, 5000000, VR_ENV_HORIZON_NS);
  size_t n = 0, cap = 1 << 16;
  int64_t *t = malloc(cap * sizeof *t);
  double at = 0;
  while (at < 60) {
    at += gap_s(&r, 1000, 4);
    if (n == cap) t = realloc(t, (cap *= 2) * sizeof *t);
    t[n++] = (int64_t)(at * 1e9);
  }
  int64_t t0 = now_ns();
  vr_envelope_compute(&c.plan, t, n);
  int64_t env_ns = now_ns() - t0;
  c.plan_qps = n / 60.0;
  c.nstages = 3;
  for (int m = 0; m < 3; m++)
    c.st[m] = (vr_tuner_stage){.k_plan = 4 + m, .scale = 1.0 / (m + 1),
                               .mu_qps = 150};
  vr_errbuf err;
  if (vr_tuner_cfg_validate(&c, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  vr_tuner_state s;
  vr_tuner_state_init(&s, &c, 0);
  size_t ndec = (size_t)(live_s * 10), nd = 0, nobs = 0;
  int64_t *dec = malloc(ndec * sizeof *dec), obs_ns = 0;
  int ups = 0, downs = 0;
  at = 0;
  for (size_t i = 1; i <= ndec; i++) {
    int64_t until = (int64_t)i * 100000000LL;
    int64_t a = now_ns();
    while ((int64_t)(at * 1e9) < until) {
      vr_tuner_observe(&c, &s, (int64_t)(at * 1e9));
      nobs++;
      at += gap_s(&r, 1500, 4);
    }
    int64_t b = now_ns();
    vr_tuner_decision d;
    vr_tuner_decide(&c, &s, until, &d);
    int64_t e = now_ns();
    obs_ns += b - a;
    dec[nd++] = e - b;
    ups += d.up > 0;
    downs += d.up < 0;
  }
  qsort(dec, nd, sizeof *dec, cmp_i64);
  printf("plan: %zu arrivals, %d windows, envelope %.2f ms\n", n, c.plan.nwin,
         env_ns / 1e6);
  printf("live: %.0f s at 1500 qps CV 4, %zu decisions (%d up, %d down), "
         "replicas now %d/%d/%d\n", live_s, nd, ups, downs, s.k[0], s.k[1],
         s.k[2]);
  printf("decide_us p50=%.3f p99=%.3f max=%.3f\n", dec[nd / 2] / 1e3,
         dec[nd * 99 / 100] / 1e3, dec[nd - 1] / 1e3);
  printf("observe_ns mean=%.1f\n", nobs ? (double)obs_ns / nobs : 0.0);
  vr_tuner_state_free(&s);
  free(dec);
  free(t);
  return 0;
}
