/*
 * Variant selection latency (INFaaS per-query selection) with 10, 100 and
 * 1000 variants in one app: p50/p99 of single vr_select calls on random
 * requirements, over an index built once per snapshot (build time too).
 *
 *   build-rel/bench/bench_policy_select [queries]
 *
 * Each call is timed with clock_gettime (vDSO); the timer's own cost is
 * measured the same way and reported, not subtracted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "bench_util.h"
#include "policy/select.h"
#include "sim/rng.h"

static void make(vr_snapshot *s, vr_snap_variant *v, vr_snap_instance *in,
                 int n, vr_rng *r) {
  memset(s, 0, sizeof *s);
  size_t ni = 0;
  for (int i = 0; i < n; i++) {
    vr_profile *p = &v[i].prof;
    vr_profile_init(p);
    snprintf(p->model, sizeof p->model, "model%d", i / 10);
    snprintf(p->app, sizeof p->app, "app");
    snprintf(p->variant, sizeof p->variant, "model%d/v%d", i / 10, i);
    p->max_batch = 16;
    double b1 = 1 + 200 * vr_rng_unif(r);
    for (int k = 0; k < 5; k++) {
      p->lat.p50_ms[k] = b1 * (1 + 0.6 * k);
      p->lat.p99_ms[k] = p->lat.p50_ms[k] * 1.3;
    }
    p->accuracy = 50 + 50 * vr_rng_unif(r);
    p->cost_per_s = 0.001 * (1 + vr_rng_unif(r));
    p->load_ms = 100 + 2000 * vr_rng_unif(r);
    v[i].state = VR_VS_INACTIVE;
    if (vr_rng_unif(r) < 0.3) { /* 30% loaded */
      v[i].state = vr_rng_unif(r) < 0.8 ? VR_VS_ACTIVE : VR_VS_OVERLOADED;
      in[ni] = (vr_snap_instance){.id = i, .variant = i,
                                  .state = VR_IS_ACTIVE};
      ni++;
    }
  }
  s->variants = v, s->nvariants = (size_t)n;
  s->instances = in, s->ninstances = ni;
}

int main(int argc, char **argv) {
  int q = argc > 1 ? atoi(argv[1]) : 200000;
  if (q < 1000) q = 1000;
  int64_t *lat = malloc((size_t)q * sizeof *lat);
  int64_t t0, t1;
  /* timer overhead */
  for (int i = 0; i < q; i++) {
    t0 = now_ns();
    t1 = now_ns();
    lat[i] = t1 - t0;
  }
  qsort(lat, (size_t)q, sizeof *lat, cmp_i64);
  printf("timer overhead: p50 %lld ns\n", (long long)lat[q / 2]);
  printf("%8s %10s %10s %10s %10s  %s\n", "variants", "build_us", "p50_ns",
         "p99_ns", "mean_ns", "outcomes active/load/infeasible");
  int sizes[3] = {10, 100, 1000};
  for (int si = 0; si < 3; si++) {
    int n = sizes[si];
    vr_rng r;
    vr_rng_seed(&r, 42 + (uint64_t)n);
    vr_snap_variant *v = calloc((size_t)n, sizeof *v);
    vr_snap_instance *in = calloc((size_t)n, sizeof *in);
    vr_snapshot s;
    make(&s, v, in, n, &r);
    vr_select_index *ix = vr_select_new();
    t0 = now_ns();
    for (int k = 0; k < 10; k++) vr_select_build(ix, &s);
    double build_us = (double)(now_ns() - t0) / 10 / 1000;
    int g = vr_select_group(ix, 'a', "app");
    int outc[3] = {0};
    double sum = 0;
    volatile int sink = 0;
    for (int i = 0; i < q; i++) {
      vr_query_req rq = {g, 20 + 300 * vr_rng_unif(&r),
                         50 + 50 * vr_rng_unif(&r)};
      vr_selection out;
      t0 = now_ns();
      vr_select(ix, &rq, &out);
      t1 = now_ns();
      lat[i] = t1 - t0;
      sum += (double)lat[i];
      outc[out.outcome]++;
      sink += out.variant;
    }
    (void)sink;
    qsort(lat, (size_t)q, sizeof *lat, cmp_i64);
    printf("%8d %10.1f %10lld %10lld %10.1f  %d/%d/%d\n", n, build_us,
           (long long)lat[q / 2], (long long)lat[(size_t)(q * 0.99)], sum / q,
           outc[0], outc[1], outc[2]);
    vr_select_free(ix);
    free(v);
    free(in);
  }
  free(lat);
  return 0;
}
