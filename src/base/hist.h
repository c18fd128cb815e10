/*
 * Latency histogram with log-linear buckets (the HdrHistogram layout).
 *
 * Values are non-negative integers (we record nanoseconds). Values below
 * 2^VR_HIST_SUB_BITS land in exact unit buckets; above that, each power of
 * two [2^e, 2^(e+1)) is split into 2^VR_HIST_SUB_BITS equal sub-buckets.
 *
 * Error bound: a reported percentile is the midpoint of the bucket that
 * holds the exact order statistic, so its relative error is at most
 * 2^-(VR_HIST_SUB_BITS+1) = 1/256 (0.39%) with SUB_BITS = 7. The unit test
 * checks this bound against exact percentiles of random data.
 *
 * Fixed size (no allocation); not thread-safe — wrap it or keep one per
 * thread and vr_hist_merge. Memory: ~ 57 * 128 * 8 bytes = 58 KiB.
 */
#ifndef VR_BASE_HIST_H
#define VR_BASE_HIST_H

#include <stdint.h>

#define VR_HIST_SUB_BITS 7
#define VR_HIST_SUB (1 << VR_HIST_SUB_BITS)
/* Exponents from SUB_BITS to 63, plus the linear range. */
#define VR_HIST_BUCKETS ((64 - VR_HIST_SUB_BITS + 1) * VR_HIST_SUB)

typedef struct vr_hist {
  uint64_t count;
  uint64_t min, max;
  double sum;
  uint64_t buckets[VR_HIST_BUCKETS];
} vr_hist;

void vr_hist_init(vr_hist *h);
void vr_hist_record(vr_hist *h, uint64_t value);
void vr_hist_record_n(vr_hist *h, uint64_t value, uint64_t n);
void vr_hist_merge(vr_hist *dst, const vr_hist *src);
/* q in [0, 1]; 0 when empty. Exact for min (q=0) and max (q=1). */
uint64_t vr_hist_quantile(const vr_hist *h, double q);
double vr_hist_mean(const vr_hist *h);

/* Bucket index of a value, and the [lo, hi] range a bucket covers. */
int vr_hist_index(uint64_t value);
void vr_hist_bucket_range(int index, uint64_t *lo, uint64_t *hi);

#endif
