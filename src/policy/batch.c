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
  if (s->queued_rows >= s->max_batch || s->preferred_rows > 0) {
    d.dispatch = 1;
    return d;
  }
  int64_t leave = s->oldest_arrival + s->max_delay_ns;
  if (s->earliest_deadline != VR_NO_DEADLINE) {
    /* Waiting for one more row must still leave time to run what is
     * queued: a measured profile may say one more row is faster (noise
     * at small batches), and waking at deadline - est(rows + 1) would
     * then be too late for the rows alone, which the drop rule takes. */
    int64_t now_rows = vr_batch_est_ns(l, s->queued_rows);
    int64_t more_rows = vr_batch_est_ns(l, s->queued_rows + 1);
    int64_t latest_start = s->earliest_deadline - (more_rows > now_rows ? more_rows : now_rows);
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

/* ---- preferred batch sizes ---------------------------------------------- */

static int is_pref(const vr_batch_pref *p, int cap, int rows) {
  for (int i = 0; i < p->n; i++)
    if (p->sizes[i] == rows && rows <= cap) return 1;
  return 0;
}

int vr_batch_pref_cap(const vr_batch_pref *p, int cap) {
  int best = 0;
  for (int i = 0; p && i < p->n; i++)
    if (p->sizes[i] <= cap && p->sizes[i] > best) best = p->sizes[i];
  return best ? best : cap;
}

int vr_batch_pref_prefix(const vr_batch_pref *p, int cap, const vr_qview *q,
                         size_t *take) {
  int rows = 0, best = 0;
  size_t best_take = 0;
  if (p && p->n) {
    cap = vr_batch_pref_cap(p, cap);
    for (size_t i = 0; i < q->n; i++) {
      rows += q->at(q->q, i).rows;
      if (rows > cap) break;
      if (is_pref(p, cap, rows)) best = rows, best_take = i + 1;
    }
  }
  if (take) *take = best_take;
  return best;
}

int vr_batch_pref_trim(const vr_batch_state *s) {
  return !(s->max_delay_ns > 0 && s->now - s->oldest_arrival >= s->max_delay_ns);
}

/* Item i of the queue after `skip` dropped heads. */
typedef struct skip_view {
  const vr_qview *q;
  size_t skip;
} skip_view;

static vr_qitem skip_at(void *v, size_t i) {
  skip_view *s = v;
  return s->q->at(s->q->q, s->skip + i);
}

vr_batch_pick vr_batch_form_pref(int mode, const vr_latency *l, int cap,
                                 int64_t now, const vr_qview *q,
                                 const vr_batch_pref *p, int trim) {
  if (cap < 1) cap = 1;
  if (!p || !p->n) return vr_batch_form(mode, l, cap, now, q);
  int pcap = vr_batch_pref_cap(p, cap);
  vr_batch_pick k = vr_batch_form(mode, l, pcap, now, q);
  if (!trim || !k.take) return k;
  /* the formed batch as a queue: its `take` items after the drops */
  skip_view sv = {q, k.drop};
  vr_qview b = {&sv, k.take, skip_at};
  size_t take;
  int rows = vr_batch_pref_prefix(p, pcap, &b, &take);
  if (rows > 0) k.take = take, k.rows = rows;
  return k;
}
