/*
 * Dropping: the request path's rule for a request that can no longer meet
 * its deadline, and what then happens to it. Pure; used by the live
 * runtime (admission and the executor) and the simulator alike.
 *
 * The rule (vr_drop_due): a request is due for dropping when, started now
 * alone, it would still finish after its deadline (at the profiled median
 * of a batch of its rows). Such a request is never served late: the
 * caller answers it with an explicit "dropped" outcome (live: HTTP 504,
 * counted in vario_requests_total{outcome="dropped"}), unless a
 * caller-supplied reroute hook takes it elsewhere (another variant, another
 * branch of a pipeline); vr_drop_resolve says which.
 */
#ifndef VR_POLICY_DROP_H
#define VR_POLICY_DROP_H

#include <stdint.h>

#include "policy/batch.h"

static inline int vr_drop_due(int64_t now, int64_t deadline,
                              const vr_latency *l, int rows) {
  return !vr_batch_feasible(now, deadline, l, rows);
}

/* The last point a request can be dropped: its batch has run and its
 * answer is about to be written. The batch rule starts a batch only when
 * its estimate fits before the deadline, so an answer can be later than
 * the deadline by at most the batch's own overrun; one later than the
 * deadline plus the whole batch's execution time was delayed after the
 * batch (an answer path behind under overload, an executor descheduled
 * between deciding and starting), which no rule before it could foresee.
 * Such an answer is due for dropping: answered as dropped rather than
 * served late (live: 504). The work is lost, the contract kept: a query is
 * served within deadline + one batch, or dropped. */
static inline int vr_drop_answer_due(int64_t answered, int64_t deadline,
                                     int64_t batch_ns) {
  return deadline != VR_NO_DEADLINE && answered - deadline > batch_ns;
}

/* A batch stuck past its time: one that has run for est (its profiled
 * time) plus VR_DROP_OVERRUN_NS and plus est again. Only a batch waiting
 * on something outside it (a stopped shadow process) gets there; the
 * simulator's batches take their profiled time and never do. While a
 * batch is stuck, what waits behind it is dropped when it becomes due
 * (vr_drop_due; live: runtime/reaper.c), not when the batch ends. */
#define VR_DROP_OVERRUN_NS (50 * 1000000LL)
static inline int64_t vr_drop_stuck_after(int64_t est) {
  return est + (est > VR_DROP_OVERRUN_NS ? est : VR_DROP_OVERRUN_NS);
}
static inline int vr_drop_batch_stuck(int64_t now, int64_t started, int64_t est) {
  return now - started > vr_drop_stuck_after(est);
}

/* When a batch stops waiting for a helper that runs part of it (a shadow
 * process) and does that part itself: at its earliest deadline less twice
 * its own time est. After giving up the batch still runs the helper's
 * rows and the rest, up to est by the profile, and est again because the
 * profile is a median, not a bound; waiting past that point makes the
 * batch's first answer late, and each later one in turn (the later
 * deadlines would keep a stuck helper only to lose the earlier answers).
 * Never before the batch is stuck (above), so that a helper only a little
 * slow is not given up on. deadline VR_NO_DEADLINE (no request of the
 * batch has one): 0, no bound of the rule's. */
static inline int64_t vr_drop_give_up_at(int64_t started, int64_t est, int64_t deadline) {
  if (deadline == VR_NO_DEADLINE) return 0;
  int64_t floor = started + vr_drop_stuck_after(est);
  return deadline - 2 * est > floor ? deadline - 2 * est : floor;
}

typedef enum {
  VR_DROP_DROPPED = 1, /* answer it now as dropped (deadline) */
  VR_DROP_REROUTED,    /* the hook took it; the caller forgets it */
} vr_drop_outcome;

/* Reroute hook: called for a request due for dropping; returns 1 when it
 * took the request (it owns it from then on, and answers it), 0 to let it
 * be dropped. It runs on the caller's thread and must not block. */
typedef struct vr_drop_hook {
  int (*reroute)(void *user, void *req, int64_t now);
  void *user;
} vr_drop_hook;

/* The outcome for a request due for dropping: REROUTED when hook (may be
 * NULL) took it, else DROPPED. */
static inline vr_drop_outcome vr_drop_resolve(const vr_drop_hook *hook,
                                              void *req, int64_t now) {
  return hook && hook->reroute && hook->reroute(hook->user, req, now)
             ? VR_DROP_REROUTED
             : VR_DROP_DROPPED;
}

#endif
