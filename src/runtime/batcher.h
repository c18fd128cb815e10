/*
 * Deadline-aware dynamic batching: the pure decision an executor takes
 * each time it is free. No clock, no locks: the instance passes in `now`
 * and the state of its queue, so the rule is unit-tested with exact times.
 *
 * A batch leaves when
 *   1. it is full (queued rows >= max batch), or
 *   2. its oldest request has waited max_delay, or
 *   3. waiting for one more request would make the earliest deadline in the
 *      queue miss: now + latency(rows + 1) >= earliest deadline, with
 *      latency(n) the profiled latency of the smallest power-of-two batch
 *      size >= n.
 * Otherwise the executor sleeps until the first of those times (or until a
 * new request arrives).
 */
#ifndef VR_RUNTIME_BATCHER_H
#define VR_RUNTIME_BATCHER_H

#include <stdint.h>

#define VR_LAT_SLOTS 11 /* batch sizes 1, 2, 4, ..., 1024 */
#define VR_NO_DEADLINE INT64_MAX

/* Profiled latency per power-of-two batch size (index k = batch 2^k);
 * 0 in a slot means "not measured" and falls back to the next measured
 * larger slot or, failing that, scales the largest measured one. */
typedef struct vr_lat_profile {
  int64_t ns[VR_LAT_SLOTS];
} vr_lat_profile;

/* Estimated service time of a batch of n rows (n >= 1). */
int64_t vr_lat_estimate(const vr_lat_profile *p, int n);
/* Folds an observed run of n rows into the profile (EWMA, weight 1/8)
 * when n is exactly a slot's batch size, so estimates follow the machine
 * (contention, interference) instead of staying at load-time values. */
void vr_lat_observe(vr_lat_profile *p, int n, int64_t ns);

typedef struct vr_batch_state {
  int64_t now;
  int queued_rows;
  int max_batch;
  int64_t oldest_arrival;    /* of the queue head; ignored when empty */
  int64_t earliest_deadline; /* VR_NO_DEADLINE when none */
  int64_t max_delay_ns;
} vr_batch_state;

typedef struct vr_batch_decision {
  int dispatch;    /* 1: form a batch now */
  int64_t wake_at; /* when not dispatching: re-decide at this time */
} vr_batch_decision;

vr_batch_decision vr_batch_decide(const vr_batch_state *s,
                                  const vr_lat_profile *p);

/* Whether a request with this deadline can still be served if it starts
 * now in a batch of `rows` rows. */
static inline int vr_batch_feasible(int64_t now, int64_t deadline,
                                    const vr_lat_profile *p, int rows) {
  return deadline == VR_NO_DEADLINE || now + vr_lat_estimate(p, rows) <= deadline;
}

#endif
