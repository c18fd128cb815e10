#include "policy/batch.h"

#include <math.h>

#include "policy/drop.h"

int64_t vr_batch_est_ns(const vr_latency *l, int n) {
  double ms = vr_latency_ms(l, n < 1 ? 1 : n, 0.5);
  return isfinite(ms) && ms > 0 ? (int64_t)(ms * 1e6) : 0;
}

vr_batch_decision vr_batch_decide(const vr_batch_state *s, const vr_latency *l) {
  vr_batch_decision d = {0, INT64_MAX};
  if (s->queued_rows <= 0) return d; /* nothing to do: sleep until work */
  if (s->queued_rows >= s->max_batch) {
    d.dispatch = 1;
    return d;
  }
  int64_t leave = s->oldest_arrival + s->max_delay_ns;
  if (s->earliest_deadline != VR_NO_DEADLINE) {
    int64_t latest_start =
        s->earliest_deadline - vr_batch_est_ns(l, s->queued_rows + 1);
    if (latest_start < leave) leave = latest_start;
  }
  if (s->now >= leave) {
    d.dispatch = 1;
    return d;
  }
  d.wake_at = leave;
  return d;
}

static vr_batch_pick form_deadline(const vr_latency *l, int cap, int64_t now,
                                   const vr_qview *q) {
  vr_batch_pick p = {0, 0, 0};
  size_t i = 0;
  for (; i < q->n; i++) {
    vr_qitem it = q->at(q->q, i);
    if (!vr_drop_due(now, it.deadline_ns, l, it.rows)) break;
    p.drop++;
  }
  int64_t dl = VR_NO_DEADLINE;
  for (; i < q->n; i++) {
    vr_qitem it = q->at(q->q, i);
    int n = p.rows + it.rows;
    int64_t d = it.deadline_ns < dl ? it.deadline_ns : dl;
    if (p.take && (n > cap || !vr_batch_feasible(now, d, l, n))) break;
    p.rows = n;
    dl = d;
    p.take++;
  }
  return p;
}

/* One row per request (the simulator's queues). */
static vr_batch_pick form_greedy(const vr_latency *l, int cap, int64_t now,
                                 const vr_qview *q) {
  vr_batch_pick p = {0, 0, 0};
  for (size_t i = 0; i < q->n; i++) {
    size_t left = q->n - i;
    int b = left < (size_t)cap ? (int)left : cap;
    if (vr_batch_feasible(now, q->at(q->q, i).deadline_ns, l, b)) {
      p.take = (size_t)b;
      p.rows = b;
      break;
    }
    p.drop++;
  }
  return p;
}

vr_batch_pick vr_batch_form(int mode, const vr_latency *l, int cap,
                            int64_t now, const vr_qview *q) {
  if (cap < 1) cap = 1;
  return mode == VR_BATCH_GREEDY ? form_greedy(l, cap, now, q)
                                 : form_deadline(l, cap, now, q);
}
