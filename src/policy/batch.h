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
 * Preferred sizes (Triton's dynamic_batching.preferred_batch_size), on
 * top of either "when" and the deadline "what", as Triton's dynamic
 * batcher applies them:
 *   - no batch grows past the largest preferred size (vr_batch_pref_cap;
 *     the instance's cap when no preferred size fits under it);
 *   - a batch leaves at once when a prefix of the queue holds exactly a
 *     preferred number of rows (vr_batch_state.preferred_rows > 0), and
 *     then holds the longest such prefix, unless the oldest request has
 *     waited max_delay already (then it takes what fits, preferred or
 *     not: vr_batch_pref_trim);
 *   - otherwise the batch waits (max_delay, deadlines) as without them.
 * With max_delay 0 every batch leaves at once and is cut to the longest
 * preferred prefix when there is one (Triton's pending_batch_delay 0).
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
  /* rows of the longest queue prefix that is a preferred batch size
   * (vr_batch_pref_prefix); 0: none, or no preferred sizes */
  int preferred_rows;
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

/* ---- preferred batch sizes (Triton) ------------------------------------- */

/* A model's preferred batch sizes, any order; n == 0: none. Borrowed. */
typedef struct vr_batch_pref {
  const int *sizes;
  int n;
} vr_batch_pref;

/* The batch cap under preferences: the largest preferred size <= cap;
 * cap when p is NULL, empty, or has no size <= cap. */
int vr_batch_pref_cap(const vr_batch_pref *p, int cap);

/* Rows of the longest prefix of q (in service order) whose rows sum to a
 * preferred size <= cap; 0 when none. *take (may be NULL): its requests. */
int vr_batch_pref_prefix(const vr_batch_pref *p, int cap, const vr_qview *q,
                         size_t *take);

/* Whether a batch formed now should be cut to a preferred size: yes
 * unless the oldest request has waited max_delay (> 0) already. */
int vr_batch_pref_trim(const vr_batch_state *s);

/* vr_batch_form under preferences: the batch vr_batch_form makes under
 * vr_batch_pref_cap(p, cap), then, when trim, cut to the longest prefix
 * of it that is a preferred size (if any). p NULL: vr_batch_form. */
vr_batch_pick vr_batch_form_pref(int mode, const vr_latency *l, int cap,
                                 int64_t now, const vr_qview *q,
                                 const vr_batch_pref *p, int trim);

#endif
