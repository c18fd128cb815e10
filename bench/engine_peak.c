/* Measures the machine's peak fp32 FLOP/s with a register-resident AVX-512
 * FMA loop (12 independent accumulators, enough to cover FMA latency x
 * throughput), on 1 thread and on N pthreads at once.
 *
 *   build/bench/bench_engine_peak [threads] [seconds]
 *
 * Prints FLOP/cycle-free numbers: GFLOP/s per thread and in total, and the
 * implied FMA throughput if the clock from /proc/cpuinfo is right. This is
 * the denominator of "share of peak" in docs/BENCHMARKS.md. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"

#if defined(__x86_64__)
#include <immintrin.h>

/* Twelve named accumulators so that they stay in registers (an array
 * indexed in a loop is kept in memory at -O2). */
__attribute__((target("avx512f"))) static double fma_loop(int64_t iters) {
  __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  __m512 a0 = _mm512_set1_ps(0), a1 = _mm512_set1_ps(1), a2 = _mm512_set1_ps(2),
         a3 = _mm512_set1_ps(3), a4 = _mm512_set1_ps(4), a5 = _mm512_set1_ps(5),
         a6 = _mm512_set1_ps(6), a7 = _mm512_set1_ps(7), a8 = _mm512_set1_ps(8),
         a9 = _mm512_set1_ps(9), a10 = _mm512_set1_ps(10), a11 = _mm512_set1_ps(11);
  for (int64_t k = 0; k < iters; k++) {
#define F(a) a = _mm512_fmadd_ps(a, x, y)
    F(a0); F(a1); F(a2); F(a3); F(a4); F(a5); F(a6); F(a7); F(a8); F(a9); F(a10); F(a11);
#undef F
  }
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                           _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0];
}
#define FLOP_PER_ITER (12.0 * 16 * 2)
#else
static double fma_loop(int64_t iters) { return (double)iters; }
#define FLOP_PER_ITER 0.0
#endif

typedef struct job {
  double seconds, gflops, gflops_cpu, sink;
} job;

static double thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* gflops: per wall second (what this thread got on a shared machine);
 * gflops_cpu: per second of CPU time the thread actually ran, i.e. the
 * core's peak regardless of other load. */
static void *run(void *arg) {
  job *j = arg;
  int64_t iters = 1 << 20, total = 0;
  int64_t t0 = vr_now_ns(), dl = t0 + (int64_t)(j->seconds * 1e9);
  double c0 = thread_cpu_ns();
  while (vr_now_ns() < dl) {
    j->sink += fma_loop(iters);
    total += iters;
  }
  j->gflops = (double)total * FLOP_PER_ITER / (double)(vr_now_ns() - t0);
  j->gflops_cpu = (double)total * FLOP_PER_ITER / (thread_cpu_ns() - c0);
  return NULL;
}

int main(int argc, char **argv) {
  int nt = argc > 1 ? atoi(argv[1]) : 2;
  double secs = argc > 2 ? atof(argv[2]) : 1.0;
  if (nt < 1 || nt > 256) nt = 2;
  job one = {secs, 0, 0};
  run(&one);
  job *js = calloc((size_t)nt, sizeof(job));
  pthread_t *t = calloc((size_t)nt, sizeof(pthread_t));
  for (int i = 0; i < nt; i++) {
    js[i].seconds = secs;
    pthread_create(&t[i], NULL, run, &js[i]);
  }
  double tot = 0;
  for (int i = 0; i < nt; i++) {
    pthread_join(t[i], NULL);
    tot += js[i].gflops;
  }
  printf("{\"peak_gflops_1thread\":%.2f,\"peak_gflops_total\":%.2f,\"threads\":%d,"
         "\"peak_gflops_per_cpu_second\":%.2f}\n",
         one.gflops, tot, nt, one.gflops_cpu);
  free(js);
  free(t);
  return one.sink + tot < 0; /* keep the loops alive */
}
