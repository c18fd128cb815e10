#include "base/hist.h"

#include <string.h>

void vr_hist_init(vr_hist *h) {
  memset(h, 0, sizeof *h);
  h->min = UINT64_MAX;
}

int vr_hist_index(uint64_t v) {
  if (v < VR_HIST_SUB) return (int)v;
  int e = 63 - __builtin_clzll(v); /* e >= SUB_BITS */
  int shift = e - VR_HIST_SUB_BITS;
  int sub = (int)((v >> shift) & (VR_HIST_SUB - 1));
  return (shift + 1) * VR_HIST_SUB + sub;
}

void vr_hist_bucket_range(int index, uint64_t *lo, uint64_t *hi) {
  if (index < VR_HIST_SUB) {
    *lo = *hi = (uint64_t)index;
    return;
  }
  int shift = index / VR_HIST_SUB - 1;
  uint64_t sub = (uint64_t)(index % VR_HIST_SUB);
  uint64_t base = ((uint64_t)VR_HIST_SUB + sub) << shift;
  *lo = base;
  *hi = base + (((uint64_t)1 << shift) - 1);
}

void vr_hist_record_n(vr_hist *h, uint64_t v, uint64_t n) {
  if (!n) return;
  h->buckets[vr_hist_index(v)] += n;
  h->count += n;
  h->sum += (double)v * (double)n;
  if (v < h->min) h->min = v;
  if (v > h->max) h->max = v;
}

void vr_hist_record(vr_hist *h, uint64_t v) { vr_hist_record_n(h, v, 1); }

void vr_hist_merge(vr_hist *dst, const vr_hist *src) {
  for (int i = 0; i < VR_HIST_BUCKETS; i++) dst->buckets[i] += src->buckets[i];
  dst->count += src->count;
  dst->sum += src->sum;
  if (src->count) {
    if (src->min < dst->min) dst->min = src->min;
    if (src->max > dst->max) dst->max = src->max;
  }
}

uint64_t vr_hist_quantile(const vr_hist *h, double q) {
  if (!h->count) return 0;
  if (q <= 0) return h->min;
  if (q >= 1) return h->max;
  /* Nearest-rank: the smallest value with at least ceil(q*n) at or below. */
  uint64_t rank = (uint64_t)(q * (double)h->count);
  if ((double)rank < q * (double)h->count) rank++;
  if (rank < 1) rank = 1;
  uint64_t seen = 0;
  for (int i = 0; i < VR_HIST_BUCKETS; i++) {
    seen += h->buckets[i];
    if (seen >= rank) {
      uint64_t lo, hi;
      vr_hist_bucket_range(i, &lo, &hi);
      uint64_t mid = lo + (hi - lo) / 2;
      if (mid < h->min) mid = h->min;
      if (mid > h->max) mid = h->max;
      return mid;
    }
  }
  return h->max;
}

double vr_hist_mean(const vr_hist *h) {
  return h->count ? h->sum / (double)h->count : 0.0;
}
