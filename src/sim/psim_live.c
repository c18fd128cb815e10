/* The pipeline simulator under the live executor's rules (psim.h,
 * cfg->live_rules): each rule is the one control/pipes_run.c and the
 * runtime call, from src/policy. */
#include <stdlib.h>
#include <string.h>

#include "policy/drop.h"
#include "policy/fanout.h"
#include "policy/route.h"
#include "sim/psim_int.h"

/* ---- the live executor's rules (cfg->live_rules; psim.h) ---------------- */

/* What the route rule asks about room (policy/route.h): an instance of v
 * takes requests now or once loaded; nothing is loaded on demand (the plan
 * places the instances). */
static int live_available(void *self, int v) {
  psim *s = self;
  for (size_t i = 0; i < s->inst.len; i++)
    if (INST(s, i)->slot == v && INST(s, i)->accepting) return 1;
  return 0;
}
static int live_fits(void *self, int v) {
  (void)self, (void)v;
  return 0;
}

/* Rebuilds the selection index from the instances now: a variant serves
 * once one of its instances is ready. One group per task: its variants
 * are its own slots, even where two tasks share an app live. */
int vr__psim_live_index(psim *s) {
  if (!s->cfg->live_rules) return 0;
  size_t n = 0;
  for (size_t i = 0; i < s->inst.len; i++) n += INST(s, i)->accepting;
  if (n > s->sinst_cap) {
    vr_snap_instance *x = realloc(s->sinst, n * sizeof *x);
    if (!x) return vr_errf(s->err, VR_ENOMEM, "psim: out of memory");
    s->sinst = x, s->sinst_cap = n;
  }
  int ns = s->cfg->data->off[s->p->ntasks];
  for (int v = 0; v < ns; v++) s->svar[v].state = VR_VS_INACTIVE;
  n = 0;
  for (size_t i = 0; i < s->inst.len; i++) {
    const pinst *in = INST(s, i);
    if (!in->accepting) continue;
    int ready = in->started && s->now >= in->ready_ns;
    s->sinst[n++] = (vr_snap_instance){.id = (int64_t)i, .variant = in->slot,
                                       .state = ready ? VR_IS_ACTIVE : VR_IS_LOADING,
                                       .max_batch = in->batch, .queue_len = in->qlen};
    if (ready) s->svar[in->slot].state = VR_VS_ACTIVE;
  }
  s->snap = (vr_snapshot){.now_ns = s->now, .variants = s->svar, .nvariants = (size_t)ns,
                          .instances = s->sinst, .ninstances = n};
  if (vr_select_build(s->ix, &s->snap))
    return vr_errf(s->err, VR_ENOMEM, "psim: out of memory");
  for (int t = 0; t < s->p->ntasks; t++)
    s->group[t] = vr_select_group(s->ix, 'a', s->p->tasks[t].name);
  return 0;
}

static int live_enqueue(psim *s, int32_t ri, int ii, int start) {
  preq *r = REQ(s, ri);
  pinst *in = INST(s, ii);
  if (in->qlen >= s->cfg->max_queue) {
    vr__psim_end(s, ri, VR_PDROP_QUEUE_FULL);
    return 0;
  }
  if (vr_drop_due(s->now, QRY(s, r->q)->deadline_ns, &s->prof[in->slot].lat, 1)) {
    vr__psim_end(s, ri, VR_PDROP_EXPIRED); /* as the runtime's admission */
    return 0;
  }
  r->enq_ns = s->now;
  r->next = -1;
  if (in->qlen++) REQ(s, in->tail)->next = ri;
  else in->head = ri;
  in->tail = ri;
  if (!start) {
    int32_t k = ii;
    return vr_vec_push(&s->touched, &k) ? vr_errf(s->err, VR_ENOMEM, "psim: out of memory")
                                        : 0;
  }
  if (!in->nb && in->started && s->now >= in->ready_ns) return vr__psim_start(s, ii);
  return 0;
}

/* One hop of a request: dropped past its deadline, or routed as the live
 * executor routes it (control/pipes_run.c start_hop) and queued. start 0:
 * the instance starts later (the batch that emitted it is still being
 * answered). */
int vr__psim_live_hop(psim *s, int32_t ri, int start) {
  preq *r = REQ(s, ri);
  const pquery *q = QRY(s, r->q);
  int t = r->task;
  s->sum->task[t].requests++;
  r->slot = -1;
  if (vr_fanout_hop_expired(s->now, q->deadline_ns)) {
    vr__psim_end(s, ri, VR_PDROP_PAST_DEADLINE);
    return 0;
  }
  vr_route_env env = {s->ix, &s->snap, 'a', s->p->tasks[t].name, live_available, live_fits,
                      NULL, NULL, s};
  vr_query_req qr = {
      .group = s->group[t],
      .latency_ms = vr_fanout_hop_slo_ms((q->deadline_ns - s->now) / 1e6, s->levels[t]),
      .min_accuracy = vr_fanout_task_min_accuracy(q->min_acc, s->levels[0])};
  vr_route rt;
  if (qr.group < 0 || vr_route_decide(&env, &qr, &rt)) rt.outcome = VR_ROUTE_NO_ROOM;
  /* LOAD comes only for a variant whose instance is still loading (nothing
   * else fits): the request joins it, as a live query joins a load */
  if (rt.outcome != VR_ROUTE_SERVE && rt.outcome != VR_ROUTE_LOAD) {
    vr__psim_end(s, ri, rt.outcome == VR_ROUTE_INFEASIBLE ? VR_PDROP_INFEASIBLE
                                                     : VR_PDROP_NO_INSTANCE);
    return 0;
  }
  int best = -1;
  for (size_t i = 0; i < s->inst.len; i++) {
    const pinst *in = INST(s, i), *b = best >= 0 ? INST(s, best) : NULL;
    if (in->slot != rt.variant || !in->accepting) continue;
    if (!b || vr_route_lighter(0, in->qlen + in->nb, in->batch, 0, b->qlen + b->nb, b->batch))
      best = (int)i;
  }
  if (best < 0) {
    vr__psim_end(s, ri, VR_PDROP_NO_INSTANCE);
    return 0;
  }
  r->slot = (int16_t)rt.variant;
  double a = s->p->tasks[t].variants[rt.variant - s->plan.off[t]].accuracy;
  r->acc *= (float)(a >= 0 ? a / 100 : 1);
  return live_enqueue(s, ri, best, start);
}

/* The runtime's queue as the batch rule reads it (policy/batch.h). */
typedef struct live_view {
  psim *s;
  int32_t cur;
  size_t i;
} live_view;
static vr_qitem live_at(void *q, size_t i) {
  live_view *v = q;
  while (v->i < i) v->cur = REQ(v->s, v->cur)->next, v->i++;
  return (vr_qitem){1, QRY(v->s, REQ(v->s, v->cur)->q)->deadline_ns};
}

static int32_t live_pop(psim *s, pinst *in) {
  int32_t ri = in->head;
  in->head = REQ(s, ri)->next;
  in->qlen--;
  return ri;
}

/* A free instance: what is due leaves the queue dropped (the runtime's
 * sweep before each batch), then the batch rule forms the batch. */
int vr__psim_live_start(psim *s, int ii) {
  pinst *in = INST(s, ii);
  if (in->nb || !in->started || s->now < in->ready_ns) return 0;
  const vr_latency *lat = &s->prof[in->slot].lat;
  int32_t keep = -1, tail = -1;
  int n = 0;
  while (in->qlen) {
    int32_t ri = live_pop(s, in);
    if (vr_drop_due(s->now, QRY(s, REQ(s, ri)->q)->deadline_ns, lat, 1)) {
      vr__psim_end(s, ri, VR_PDROP_EXPIRED);
      in = INST(s, ii);
      continue;
    }
    REQ(s, ri)->next = -1;
    if (tail >= 0) REQ(s, tail)->next = ri;
    else keep = ri;
    tail = ri, n++;
  }
  in->head = keep, in->tail = tail, in->qlen = n;
  live_view v = {s, in->head, 0};
  vr_qview qv = {&v, (size_t)in->qlen, live_at};
  vr_batch_pick pick = vr_batch_form(VR_BATCH_DEADLINE, lat, in->batch, s->now, &qv);
  for (size_t k = 0; k < pick.drop; k++) {
    vr__psim_end(s, live_pop(s, in), VR_PDROP_EXPIRED);
    in = INST(s, ii);
  }
  for (size_t k = 0; k < pick.take; k++) in->inflight[k] = live_pop(s, in);
  return vr__psim_run(s, ii, (int)pick.take);
}

/* After a batch was answered: the instances its outputs joined start. */
int vr__psim_live_touched(psim *s) {
  int rc = 0;
  for (size_t k = 0; !rc && k < s->touched.len; k++) {
    int ii = VR_VEC_AT(&s->touched, int32_t, k);
    if (!INST(s, ii)->nb && INST(s, ii)->qlen) rc = vr__psim_start(s, ii);
  }
  s->touched.len = 0;
  return rc;
}
