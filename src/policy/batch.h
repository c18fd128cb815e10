/*
 * Batching: the request path's rules for when a batch leaves and what it
 * holds. Pure (no clock, no locks, no I/O): the live instance
 * (runtime/instance.c) and the simulator (sim/sim.c) pass in `now`, the
 * instance's vr_latency and a view of their queue, and act on the answer,
 * so both serve exactly the same batches from the same queue.
 *
 * When (vr_batch_decide): a batch leaves when
 *   1. it is full (queued rows >= batch cap), or
 *   2. its oldest request has waited max_delay, or
 *   3. waiting for one more request would make the earliest deadline in the
 *      queue miss: now + latency(rows + 1) >= earliest deadline.
 * Otherwise the executor sleeps until the first of those times (or until a
 * new request arrives).
 *
 * What (vr_batch_form), two modes:
 *   VR_BATCH_DEADLINE (live; the simulator's "batching": "runtime"): drop
 *     from the head what cannot meet its deadline even alone
 *     (vr_drop_due), then grow the batch from the head, in queue order,
 *     while every request in it still meets its deadline at the latency of
 *     the grown batch. The head always goes; a request of more rows than
 *     the cap runs alone.
 *   VR_BATCH_GREEDY (the simulator's default, INFaaS-style): the batch is
 *     min(queue, cap); while it would make the head miss its deadline, the
 *     head is dropped.
 *
 * Latency: vr_batch_est_ns, the profile's median at that batch size
 * (vr_latency_ms at q = 0.5, interpolated between measured sizes).
 */
#ifndef VR_POLICY_BATCH_H
#define VR_POLICY_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "policy/profile.h"

#define VR_NO_DEADLINE INT64_MAX

/* Estimated service time (ns) of a batch of n rows; 0 while nothing is
 * measured (an instance before its load-time profile: every deadline
 * looks feasible). */
int64_t vr_batch_est_ns(const vr_latency *l, int n);

/* Whether a request with this deadline can still be served if it starts
 * now in a batch of `rows` rows. */
static inline int vr_batch_feasible(int64_t now, int64_t deadline,
                                    const vr_latency *l, int rows) {
  return deadline == VR_NO_DEADLINE || now + vr_batch_est_ns(l, rows) <= deadline;
}

typedef struct vr_batch_state {
  int64_t now;
  int queued_rows;
  int max_batch;             /* the instance's batch cap now */
  int64_t oldest_arrival;    /* of the queue head; ignored when empty */
  int64_t earliest_deadline; /* VR_NO_DEADLINE when none */
  int64_t max_delay_ns;
} vr_batch_state;

typedef struct vr_batch_decision {
  int dispatch;    /* 1: form a batch now */
  int64_t wake_at; /* when not dispatching: re-decide at this time */
} vr_batch_decision;

vr_batch_decision vr_batch_decide(const vr_batch_state *s, const vr_latency *l);

/* ---- formation ---------------------------------------------------------- */

typedef enum { VR_BATCH_DEADLINE = 0, VR_BATCH_GREEDY = 1 } vr_batch_mode;

/* One queued request as the batch rules see it. */
typedef struct vr_qitem {
  int rows;
  int64_t deadline_ns; /* VR_NO_DEADLINE: none */
} vr_qitem;

/* A queue in service order, supplied by its owner: item i (i < n).
 * Formation reads items in increasing i from 0, so a linked list can
 * answer from a cursor kept in q. */
typedef struct vr_qview {
  void *q;
  size_t n;
  vr_qitem (*at)(void *q, size_t i);
} vr_qview;

typedef struct vr_batch_pick {
  size_t drop; /* answer this many from the head as dropped, first */
  size_t take; /* then serve this many (from the new head) as one batch */
  int rows;    /* rows of that batch */
} vr_batch_pick;

/* The next batch of a free instance whose batch cap is `cap`. take is 0
 * only when the queue is (or becomes, after drops) empty. */
vr_batch_pick vr_batch_form(int mode, const vr_latency *l, int cap,
                            int64_t now, const vr_qview *q);

#endif
