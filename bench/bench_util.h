/* Helpers shared by the C benchmarks: a monotonic clock in ns and an
 * int64 comparator for qsort (percentiles of timed calls). */
#ifndef VR_BENCH_UTIL_H
#define VR_BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

static inline int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static inline int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

#endif
