#include "runtime/batcher.h"

static int slot_of(int n) {
  int k = 0;
  while (k < VR_LAT_SLOTS - 1 && (1 << k) < n) k++;
  return k;
}

int64_t vr_lat_estimate(const vr_lat_profile *p, int n) {
  if (n < 1) n = 1;
  int k = slot_of(n);
  for (int j = k; j < VR_LAT_SLOTS; j++)
    if (p->ns[j] > 0) return p->ns[j];
  /* Larger than anything measured: scale the largest measurement linearly
   * in the batch size (pessimistic for a sub-linear curve, which is the
   * safe side for deadlines). */
  for (int j = k - 1; j >= 0; j--)
    if (p->ns[j] > 0) return p->ns[j] * (int64_t)n / (1 << j);
  return 0;
}

void vr_lat_observe(vr_lat_profile *p, int n, int64_t ns) {
  int k = slot_of(n);
  if (n != (1 << k) || ns <= 0) return;
  int64_t old = __atomic_load_n(&p->ns[k], __ATOMIC_RELAXED);
  /* Relaxed store: admission on other threads may read either value. */
  __atomic_store_n(&p->ns[k], old > 0 ? old + (ns - old) / 8 : ns,
                   __ATOMIC_RELAXED);
}

vr_batch_decision vr_batch_decide(const vr_batch_state *s,
                                  const vr_lat_profile *p) {
  vr_batch_decision d = {0, INT64_MAX};
  if (s->queued_rows <= 0) return d; /* nothing to do: sleep until work */
  if (s->queued_rows >= s->max_batch) {
    d.dispatch = 1;
    return d;
  }
  int64_t leave = s->oldest_arrival + s->max_delay_ns;
  if (s->earliest_deadline != VR_NO_DEADLINE) {
    int64_t next = vr_lat_estimate(p, s->queued_rows + 1);
    int64_t latest_start = s->earliest_deadline - next;
    if (latest_start < leave) leave = latest_start;
  }
  if (s->now >= leave) {
    d.dispatch = 1;
    return d;
  }
  d.wake_at = leave;
  return d;
}
