/* The pipeline simulator (see psim.h). */
#include "sim/psim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/vec.h"
#include "policy/drop.h"
#include "policy/fanout.h"
#include "policy/route.h"
#include "sim/heap.h"
#include "sim/rng.h"

#include "policy/pipe_policy.h"
#include "sim/psim_int.h"

static const char *const DROP_NAMES[] = {"queue_full", "expired", "early",
                                         "no_instance", "past_deadline",
                                         "infeasible"};

const char *vr_pdrop_name(int r) {
  return r >= 0 && r < VR_PDROP__COUNT ? DROP_NAMES[r] : "?";
}


static int push(psim *s, int64_t t, int kind, int32_t a) {
  vr_event e = {.t_ns = t, .kind = kind, .a = a};
  if (kind == EV_DONE || kind == EV_READY) e.gen = INST(s, a)->gen;
  if (kind == EV_DONE && s->cfg->stage_rng) e.rank = s->depth[INST(s, a)->task];
  if (vr_heap_push(&s->heap, e))
    return vr_errf(s->err, VR_ENOMEM, "psim: out of memory");
  return 0;
}

static int32_t req_new(psim *s) {
  if (s->free_req >= 0) {
    int32_t i = s->free_req;
    s->free_req = REQ(s, i)->next;
    return i;
  }
  if (!vr_vec_grow(&s->reqs, 1)) return -1;
  return (int32_t)s->reqs.len - 1;
}

static void req_free(psim *s, int32_t i) {
  REQ(s, i)->next = s->free_req;
  s->free_req = i;
}

int vr__psim_row_of(const psim *s, int64_t t_ns) {
  int r = (int)(t_ns / (int64_t)(s->cfg->tick_s * 1e9));
  return r < s->nrows ? r : s->nrows - 1;
}

static void query_done(psim *s, int32_t qi) {
  pquery *q = QRY(s, qi);
  vr_psim_row *row = &s->rows[vr__psim_row_of(s, q->t_ns)];
  s->finished++;
  if (q->dropped) {
    s->bad++;
    row->dropped++;
    return;
  }
  float ms = (float)((q->last_ns - q->t_ns) / 1e6);
  if (s->cfg->stop_above_ms > 0 ? (double)ms > s->cfg->stop_above_ms
                                : q->last_ns > q->deadline_ns)
    s->bad++;
  double acc = q->paths ? 100 * q->acc_sum / q->paths : 0;
  row->accuracy += acc; /* a sum until the end */
  if (q->last_ns > q->deadline_ns) row->late++;
  else row->ok++;
  if (q->t_ns >= (int64_t)(s->cfg->warmup_s * 1e9)) vr_vec_push(&s->lat, &ms);
}

/* A request leaves the system: dropped (reason >= 0) or its path ended. */
static void report(psim *s, const preq *r, int reason) {
  if (!s->cfg->on_request) return;
  vr_psim_outcome o = {r->q, r->task, r->region, reason < 0, reason < 0 ? 0 : reason,
                       r->slot, s->now};
  s->cfg->on_request(s->cfg->on_request_ctx, &o);
}

void vr__psim_end(psim *s, int32_t ri, int reason) {
  preq *r = REQ(s, ri);
  pquery *q = QRY(s, r->q);
  if (reason >= 0) {
    report(s, r, reason);
    s->sum->task[r->task].drops[reason]++;
    s->rows[vr__psim_row_of(s, q->t_ns)].paths_bad++;
    s->rows[vr__psim_row_of(s, q->t_ns)].paths++;
    q->dropped = 1;
  }
  if (s->now > q->last_ns) q->last_ns = s->now;
  int32_t qi = r->q;
  req_free(s, ri);
  if (--q->pending == 0) query_done(s, qi);
}

static void path_end(psim *s, int32_t ri) {
  preq *r = REQ(s, ri);
  pquery *q = QRY(s, r->q);
  q->acc_sum += r->acc;
  q->paths++;
  vr_psim_row *row = &s->rows[vr__psim_row_of(s, q->t_ns)];
  row->paths++;
  row->paths_bad += s->now > q->deadline_ns;
  vr__psim_end(s, ri, -1);
}

static double slot_lat(const psim *s, int slot, int batch, double q) {
  return vr_profile_latency_ms(&s->prof[slot], batch, q);
}


/* Queue length as routing weighs it: an instance still loading serves
 * nothing for load_s, so it takes requests only when no instance of the
 * slot is serving, as a live replica joins its queue once loaded (a
 * request sent there waited out the load: with InferLine's 1-s load and a
 * 300-ms SLO every one was late). An instance not started for want of a
 * worker keeps Loki's rule (it may start as soon as a draining one
 * leaves): routed to by queue length, after the others on a hand-over. */
static int64_t route_len(const psim *s, const pinst *in) {
  int loading = in->started && s->now < in->ready_ns;
  return in->qlen + in->nb + (loading ? (int64_t)1 << 40 : 0);
}

/* The accepting instance of `slot` with the shortest queue (serving ones
 * first), or -1. */
static int pick_instance(psim *s, int slot) {
  int best = -1;
  int64_t bl = 0;
  for (size_t i = 0; i < s->inst.len; i++) {
    pinst *in = INST(s, i);
    if (in->slot != slot || !in->accepting) continue;
    int64_t l = route_len(s, in);
    if (best < 0 || l < bl) best = (int)i, bl = l;
  }
  return best;
}

static int enqueue(psim *s, int32_t ri, int slot) {
  preq *r = REQ(s, ri);
  int ii = pick_instance(s, slot);
  if (ii < 0) { /* planned but not started yet: any instance of the task */
    for (int k = 0; ii < 0 && k < s->p->tasks[r->task].nvariants; k++)
      ii = pick_instance(
          s, s->plan.off[r->task] + s->routes.order[s->plan.off[r->task] + k]);
  }
  s->sum->task[r->task].requests++;
  if (ii < 0) {
    vr__psim_end(s, ri, VR_PDROP_NO_INSTANCE);
    return 0;
  }
  pinst *in = INST(s, ii);
  if (in->qlen >= s->cfg->max_queue) {
    vr__psim_end(s, ri, VR_PDROP_QUEUE_FULL);
    return 0;
  }
  r->slot = (int16_t)in->slot;
  r->enq_ns = s->now;
  r->next = -1;
  if (in->qlen++) REQ(s, in->tail)->next = ri;
  else in->head = ri;
  in->tail = ri;
  if (!in->nb && in->started && s->now >= in->ready_ns)
    return vr__psim_start(s, ii);
  return 0;
}

/* Kills an instance that no longer accepts and has nothing left. */
static void maybe_retire(psim *s, pinst *in) {
  if (in->accepting || in->qlen || in->nb || in->dead) return;
  in->dead = 1;
  if (in->started) s->alive--;
}


/* Runs the nb requests in in->inflight: its end after the profiled time. */
int vr__psim_run(psim *s, int ii, int nb) {
  pinst *in = INST(s, ii);
  in->nb = nb;
  if (!nb) {
    maybe_retire(s, in);
    return 0;
  }
  vr_rng *g = s->cfg->stage_rng ? &s->trng[in->task] : &s->rng;
  double ms = slot_lat(s, in->slot, nb, vr__psim_quantile(g, s->cfg->noise));
  return push(s, s->now + (int64_t)(ms * 1e6), EV_DONE, ii);
}

int vr__psim_start(psim *s, int ii) {
  if (s->cfg->live_rules) return vr__psim_live_start(s, ii);
  pinst *in = INST(s, ii);
  int nb = 0;
  while (in->qlen && nb < in->batch) {
    int32_t ri = in->head;
    in->head = REQ(s, ri)->next;
    in->qlen--;
    /* the request path's rule (policy/drop.h), with the end-to-end
     * deadline the request carries, where the drop mode drops (last_task:
     * not before the last task) */
    if (vr_edrop_deadline_drops(s->cfg->drop_mode,
                                s->p->tasks[in->task].nchildren == 0) &&
        vr_drop_due(s->now, QRY(s, REQ(s, ri)->q)->deadline_ns,
                    &s->prof[in->slot].lat, 1)) {
      vr__psim_end(s, ri, VR_PDROP_EXPIRED);
      continue;
    }
    in = INST(s, ii);
    in->inflight[nb++] = ri;
  }
  return vr__psim_run(s, ii, nb);
}


/* Sends one output of request `ri` (just finished) to child index c; the
 * new request's identity is id (stage streams). */
static int forward(psim *s, int32_t ri, int c, int region, uint64_t id) {
  preq *r = REQ(s, ri);
  const vr_pipe_task *t = &s->p->tasks[r->task];
  int ct = t->children[c];
  int32_t ni = req_new(s);
  if (ni < 0) return vr_errf(s->err, VR_ENOMEM, "psim: out of memory");
  r = REQ(s, ri);
  pquery *q = QRY(s, r->q);
  q->pending++;
  preq *n = REQ(s, ni);
  *n = *r;
  n->task = (int16_t)ct;
  n->region = region;
  n->slot = -1;
  n->id = id;
  if (s->cfg->live_rules) return vr__psim_live_hop(s, ni, 0);
  double budget = vr_pipe_hop_budget_ms(&s->plan, &s->routes, s->prof, r->slot);
  n->budget_sum = r->budget_sum + (float)budget;
  int to = vr_pipe_route_pick(
      s->p, &s->routes, ct, r->slot,
      s->cfg->stage_rng ? vr__psim_route_u(id) : vr_rng_unif(&s->rng));
  if (to < 0) {
    s->sum->task[ct].requests++;
    vr__psim_end(s, ni, VR_PDROP_NO_INSTANCE);
    return 0;
  }
  vr_hop h = {.mode = s->cfg->drop_mode,
              .elapsed_ms = (s->now - q->t_ns) / 1e6,
              .spent_ms = (s->now - r->enq_ns) / 1e6,
              .budget_ms = budget,
              .budget_sum_ms = n->budget_sum,
              .slo_ms = s->p->slo_ms,
              .child_is_leaf = s->p->tasks[ct].nchildren == 0};
  int alt = -1, v = vr_pipe_hop(s->p, &s->plan, &s->routes, ct, to, &h, &alt);
  if (v == VR_HOP_DROP) {
    s->sum->task[ct].requests++;
    vr__psim_end(s, ni, VR_PDROP_EARLY);
    return 0;
  }
  if (v == VR_HOP_REROUTE) s->sum->task[ct].rerouted++, to = alt;
  double a = s->p->tasks[ct].variants[to - s->plan.off[ct]].accuracy;
  n->acc = r->acc * (float)(a >= 0 ? a / 100 : 1);
  return enqueue(s, ni, to);
}

static int on_done(psim *s, int ii) {
  pinst *in = INST(s, ii);
  int nb = in->nb, slot = in->slot;
  int32_t batch[VR_PROF_MAX_BATCH];
  memcpy(batch, in->inflight, nb * sizeof *batch);
  in->nb = 0;
  const vr_pipe_task *t = &s->p->tasks[in->task];
  const vr_pipe_variant *pv = &t->variants[slot - s->plan.off[in->task]];
  int rc = 0;
  for (int b = 0; !rc && b < nb; b++) {
    int32_t ri = batch[b];
    s->sum->task[in->task].served++;
    s->served_slot[slot]++;
    report(s, REQ(s, ri), -1);
    int sent = 0;
    if (t->nchildren && s->cfg->fanout) {
      vr_psim_emit em[1024];
      const preq *r = REQ(s, ri);
      int k = s->cfg->fanout(s->cfg->fanout_ctx, r->q, r->task, r->region, slot, em, 1024);
      if (k < 0 || k > 1024)
        rc = vr_errf(s->err, VR_EINVAL, "psim: the fan-out hook failed (%d)", k);
      for (int j = 0; !rc && j < k; j++) {
        if (em[j].child < 0 || em[j].child >= t->nchildren) {
          rc = vr_errf(s->err, VR_EINVAL, "psim: the fan-out hook named child %d of "
                       "task '%s' (%d children)", em[j].child, t->name, t->nchildren);
          break;
        }
        s->outputs[slot]++;
        rc = forward(s, ri, em[j].child, em[j].region,
                     vr__psim_id_child(REQ(s, ri)->id, j));
        sent++;
      }
    } else if (t->nchildren) {
      /* stage streams: the request's own stream, so its outputs do not
       * depend on what else the run drew before */
      vr_rng own, *g = &s->rng;
      uint64_t id = REQ(s, ri)->id;
      if (s->cfg->stage_rng) vr_rng_seed(&own, id), g = &own;
      int k = vr__psim_fan_count(g, pv, s->cfg->fanout_exact);
      s->outputs[slot] += k;
      for (int j = 0; !rc && j < k; j++) {
        int c = vr__psim_fan_child(g, pv, t->nchildren);
        if (c < 0) continue; /* it leaves the pipeline */
        rc = forward(s, ri, c, -1, vr__psim_id_child(id, j));
        sent++;
      }
    }
    if (!rc) {
      if (sent) vr__psim_end(s, ri, -1);
      else path_end(s, ri);
    }
  }
  if (!rc && s->cfg->live_rules) rc = vr__psim_live_touched(s);
  in = INST(s, ii);
  if (rc) return rc;
  if (in->qlen) return vr__psim_start(s, ii);
  maybe_retire(s, in);
  return 0;
}

static int on_arrival(psim *s, const vr_req *rq) {
  if (!vr_vec_grow(&s->queries, 1))
    return vr_errf(s->err, VR_ENOMEM, "psim: out of memory");
  int32_t qi = (int32_t)s->queries.len - 1;
  pquery *q = QRY(s, qi);
  q->t_ns = rq->t_ns;
  q->deadline_ns = rq->t_ns + (int64_t)(s->p->slo_ms * 1e6);
  if (s->cfg->live_rules) { /* the query's own SLO and floor */
    if (rq->deadline_ns > rq->t_ns && rq->deadline_ns != INT64_MAX)
      q->deadline_ns = rq->deadline_ns;
    q->min_acc = rq->min_acc;
  }
  q->last_ns = rq->t_ns;
  q->pending = 1;
  s->rows[vr__psim_row_of(s, rq->t_ns)].demand++;
  s->tick_arrivals++;
  s->arrived++;
  if (s->cfg->replan && vr_vec_push(&s->ctl_arr, &rq->t_ns))
    return vr_errf(s->err, VR_ENOMEM, "psim: out of memory");
  int32_t ri = req_new(s);
  if (ri < 0) return vr_errf(s->err, VR_ENOMEM, "psim: out of memory");
  preq *r = REQ(s, ri);
  memset(r, 0, sizeof *r);
  r->q = qi;
  r->task = 0;
  r->region = -1;
  r->slot = -1;
  r->id = vr__psim_id_root(s->cfg->seed, qi);
  if (s->cfg->live_rules) {
    r->acc = 1;
    return vr__psim_live_hop(s, ri, 1);
  }
  int to = vr_pipe_route_pick(
      s->p, &s->routes, 0, -1,
      s->cfg->stage_rng ? vr__psim_route_u(r->id) : vr_rng_unif(&s->rng));
  if (to < 0) {
    s->sum->task[0].requests++;
    vr__psim_end(s, ri, VR_PDROP_NO_INSTANCE);
    return 0;
  }
  double a = s->p->tasks[0].variants[to].accuracy;
  r->acc = (float)(a >= 0 ? a / 100 : 1);
  return enqueue(s, ri, to);
}

/* Starts instances planned but waiting for a free worker. */
static int start_pending(psim *s) {
  for (size_t i = 0; i < s->inst.len && s->alive < s->cfg->workers; i++) {
    pinst *in = INST(s, i);
    if (in->started || in->dead) continue;
    in->started = 1;
    int warm = s->cfg->warm_start && s->now == 0;
    in->ready_ns = s->now + (warm ? 0 : (int64_t)(s->cfg->load_s * 1e9));
    s->alive++;
    if (push(s, in->ready_ns, EV_READY, (int32_t)i)) return VR_ENOMEM;
  }
  return 0;
}

/* A retiring instance's queue moves to the accepting instances of its task
 * (shortest queue first; the path accuracy follows the new variant), so a
 * plan change costs no more than the batch in flight. */
static int hand_over(psim *s, int ii) {
  pinst *in = INST(s, ii);
  const vr_pipe_task *t = &s->p->tasks[in->task];
  while (in->qlen) {
    int best = -1;
    int64_t bl = 0;
    for (size_t j = 0; j < s->inst.len; j++) {
      pinst *o = INST(s, j);
      if (o->task != in->task || !o->accepting) continue;
      int64_t l = route_len(s, o) + (o->started ? 0 : 1000000);
      if (best < 0 || l < bl) best = (int)j, bl = l;
    }
    if (best < 0) return 0;
    int32_t ri = in->head;
    preq *r = REQ(s, ri);
    in->head = r->next;
    in->qlen--;
    pinst *o = INST(s, best);
    double a0 = t->variants[in->slot - s->plan.off[in->task]].accuracy;
    double a1 = t->variants[o->slot - s->plan.off[in->task]].accuracy;
    if (a0 > 0 && a1 >= 0) r->acc = (float)(r->acc / (a0 / 100) * (a1 / 100));
    r->slot = (int16_t)o->slot;
    r->next = -1;
    if (o->qlen++) REQ(s, o->tail)->next = ri;
    else o->head = ri;
    o->tail = ri;
    if (!o->nb && o->started && s->now >= o->ready_ns) {
      int rc = vr__psim_start(s, best);
      if (rc) return rc;
    }
    in = INST(s, ii);
  }
  return 0;
}

/* Moves the live instances to the plan: keeps what it can, retires the
 * surplus (draining) and queues the new ones for free workers. */
static int apply_plan(psim *s) {
  for (int t = 0; t < s->p->ntasks; t++)
    for (int v = 0; v < s->p->tasks[t].nvariants; v++) {
      int slot = s->plan.off[t] + v, have = 0;
      const vr_pipe_alloc *a = &s->plan.a[slot];
      /* the profiles' largest batch at most, as psim_stage.c estimates:
       * an instance's in-flight rows are that many */
      int batch = a->batch < 1 ? 1 : a->batch > VR_PROF_MAX_BATCH ? VR_PROF_MAX_BATCH : a->batch;
      for (size_t i = 0; i < s->inst.len; i++) {
        pinst *in = INST(s, i);
        if (in->slot != slot || !in->accepting) continue;
        if (have < a->inst) {
          have++;
          in->batch = batch;
        } else {
          in->accepting = 0;
        }
      }
      for (; have < a->inst; have++) {
        pinst *in = NULL;
        for (size_t i = 0; !in && i < s->inst.len; i++) /* reuse the dead */
          if (INST(s, i)->dead) in = INST(s, i);
        if (!in && !(in = vr_vec_grow(&s->inst, 1)))
          return vr_errf(s->err, VR_ENOMEM, "psim: out of memory");
        int64_t gen = in->gen + 1;
        memset(in, 0, sizeof *in);
        in->gen = gen;
        in->slot = slot, in->task = t, in->batch = batch;
        in->accepting = 1;
      }
    }
  for (size_t i = 0; i < s->inst.len; i++) {
    pinst *in = INST(s, i);
    if (in->accepting || in->dead) continue;
    int rc = hand_over(s, (int)i);
    if (rc) return rc;
    in = INST(s, i);
    if (!in->started && !in->qlen) in->dead = 1;
    else maybe_retire(s, in);
  }
  int rc = start_pending(s);
  return rc ? rc : vr__psim_live_index(s);
}

static void write_plan(psim *s, double now_s) {
  for (int t = 0; t < s->p->ntasks; t++)
    for (int v = 0; v < s->p->tasks[t].nvariants; v++) {
      const vr_pipe_alloc *a = &s->plan.a[s->plan.off[t] + v];
      if (a->inst > 0)
        fprintf(s->cfg->plans_csv, "%.3f,%s,%s,%d,%d,%.3f,%d,%d\n", now_s,
                s->p->tasks[t].name, s->p->tasks[t].variants[v].name,
                a->inst, a->batch, a->lat_ms, s->plan.accuracy_scaled,
                s->plan.feasible);
    }
}

static int replan(psim *s, int first) {
  const vr_psim_cfg *c = s->cfg;
  double now_s = s->now / 1e9;
  int due = vr_pipe_replan_due(first, now_s, s->next_ctl_s, s->ewma, s->planned_for,
                               c->ctl_change);
  if (!due || !c->replan) return 0;
  vr_psim_view v = {.now_s = now_s, .demand_ewma = s->ewma,
                    .demand_last = s->last_qps, .workers = c->workers,
                    .open_queries = s->arrived - s->finished,
                    .arrived = s->arrived,
                    .arrivals = s->ctl_arr.data,
                    .narrivals = (int)s->ctl_arr.len};
  memcpy(v.task_qps, s->task_ewma, sizeof v.task_qps);
  int rc = c->replan(c->replan_ctx, &v, &s->plan, s->err);
  vr_vec_clear(&s->ctl_arr);
  if (rc) return rc;
  s->sum->replans++;
  s->planned_for = s->ewma;
  if (c->plans_csv) write_plan(s, now_s);
  s->next_ctl_s = now_s + c->ctl_period_s;
  return apply_plan(s);
}

static int rebuild_routes(psim *s) {
  if (s->routes_ok) vr_pipe_routes_free(&s->routes);
  s->routes_ok = 0;
  if (vr_pipe_route_build(s->p, &s->plan, s->ewma, &s->routes))
    return vr_errf(s->err, VR_ENOMEM, "psim: out of memory");
  s->routes_ok = 1;
  return 0;
}

static int on_tick(psim *s) {
  double tick = s->cfg->tick_s;
  s->last_qps = s->tick_arrivals / tick;
  s->tick_arrivals = 0;
  s->ewma = 0.5 * s->ewma + 0.5 * s->last_qps;
  for (int t = 0; t < s->p->ntasks; t++) {
    int64_t n = s->sum->task[t].requests;
    s->task_ewma[t] = 0.5 * s->task_ewma[t] + 0.5 * (n - s->task_seen[t]) / tick;
    s->task_seen[t] = n;
  }
  int r = vr__psim_row_of(s, s->now - 1);
  s->rows[r].workers = s->alive;
  s->rows[r].demand_est = s->ewma;
  int rc = replan(s, 0);
  if (!rc) rc = rebuild_routes(s);
  if (!rc && s->now + (int64_t)(tick * 1e9) <= (int64_t)(s->cfg->duration_s * 1e9))
    rc = push(s, s->now + (int64_t)(tick * 1e9), EV_TICK, 0);
  return rc;
}

static int check_cfg(const vr_psim_cfg *c, vr_errbuf *err) {
  if (!c->data || !c->data->pipe || !c->data->prof || !c->arrivals)
    return vr_errf(err, VR_EINVAL, "psim: pipeline data and arrivals needed");
  if (!c->plan == !c->replan)
    return vr_errf(err, VR_EINVAL, "psim: give a static plan or a replan "
                   "callback (not both)");
  if (c->workers < 1 || c->workers > 100000)
    return vr_errf(err, VR_EINVAL, "psim: workers %d not in 1..100000",
                   c->workers);
  /* a tick of at least 1 ms: rows are whole nanoseconds of it */
  if (!(c->duration_s > 0 && c->duration_s <= 1e6) || !(c->tick_s >= 1e-3) ||
      !(c->warmup_s >= 0) || c->duration_s / c->tick_s > 1e7)
    return vr_errf(err, VR_EINVAL, "psim: bad duration, tick or warm-up");
  if (c->drop_mode < 0 || c->drop_mode > VR_EDROP_REROUTE)
    return vr_errf(err, VR_EINVAL, "psim: unknown drop mode %d", c->drop_mode);
  if (c->replay_ns && c->live_rules)
    return vr_errf(err, VR_EINVAL, "psim: replayed arrivals carry no "
                   "deadline or accuracy floor for the live rules");
  if (c->max_queue < 1 || !(c->load_s >= 0) || !(c->ctl_period_s > 0) ||
      c->stop_bad < 0 || !(c->stop_above_ms >= 0))
    return vr_errf(err, VR_EINVAL, "psim: bad max_queue, load_s, period, "
                   "stop_bad or stop_above_ms");
  return 0;
}

static int setup(psim *s, const vr_psim_cfg *c, vr_psim_summary *sum,
                 vr_errbuf *err) {
  s->cfg = c, s->p = c->data->pipe, s->prof = c->data->prof;
  s->sum = sum, s->err = err, s->free_req = -1;
  vr_rng_seed(&s->rng, c->seed);
  if (c->stage_rng) {
    for (int t = 0; t < s->p->ntasks; t++) vr__psim_task_rng(&s->trng[t], c->seed, t);
    vr__psim_depths(s->p, s->depth);
  }
  vr_heap_init(&s->heap);
  vr_vec_init(&s->reqs, sizeof(preq));
  vr_vec_init(&s->queries, sizeof(pquery));
  vr_vec_init(&s->inst, sizeof(pinst));
  vr_vec_init(&s->lat, sizeof(float));
  s->nrows = (int)ceil(c->duration_s / c->tick_s) + 1;
  s->rows = calloc(s->nrows, sizeof *s->rows);
  int ns = c->data->off[s->p->ntasks];
  s->outputs = calloc(ns + 1, sizeof *s->outputs);
  s->served_slot = calloc(ns + 1, sizeof *s->served_slot);
  if (!s->rows || !s->outputs || !s->served_slot ||
      vr_pipe_plan_init(&s->plan, s->p))
    return vr_errf(err, VR_ENOMEM, "psim: out of memory");
  for (int i = 0; i < s->nrows; i++) s->rows[i].t_s = i * c->tick_s;
  /* replayed arrivals: one query and at most one latency each; sized once
   * instead of grown by doubling on every estimator run */
  if (c->replay_ns && (vr_vec_reserve(&s->queries, c->replay_n) ||
                       vr_vec_reserve(&s->lat, c->replay_n)))
    return vr_errf(err, VR_ENOMEM, "psim: out of memory");
  vr_vec_init(&s->touched, sizeof(int32_t));
  vr_vec_init(&s->ctl_arr, sizeof(int64_t));
  vr_pipeline_levels(s->p, s->levels);
  if (c->live_rules) {
    s->ix = vr_select_new();
    s->svar = calloc(ns + 1, sizeof *s->svar);
    if (!s->ix || !s->svar) return vr_errf(err, VR_ENOMEM, "psim: out of memory");
    for (int t = 0; t < s->p->ntasks; t++)
      for (int v = c->data->off[t]; v < c->data->off[t + 1]; v++) {
        s->svar[v].prof = s->prof[v];
        snprintf(s->svar[v].prof.app, sizeof s->svar[v].prof.app, "%s", s->p->tasks[t].name);
      }
  }
  if (c->plan) {
    if (c->plan->off[s->p->ntasks] != ns ||
        vr_pipe_plan_copy(&s->plan, c->plan))
      return vr_errf(err, VR_EINVAL, "psim: plan does not fit the pipeline");
  }
  /* warm start: the workload's rate at t = 0 where it has one */
  s->ewma = vr_wl_rate_at(c->arrivals, 0);
  if (!(s->ewma >= 0) || !isfinite(s->ewma)) s->ewma = 0;
  return 0;
}

static void teardown(psim *s) {
  if (s->routes_ok) vr_pipe_routes_free(&s->routes);
  vr_pipe_plan_free(&s->plan);
  vr_heap_free(&s->heap);
  vr_vec_free(&s->reqs), vr_vec_free(&s->queries), vr_vec_free(&s->inst);
  vr_vec_free(&s->lat);
  vr_vec_free(&s->touched);
  vr_vec_free(&s->ctl_arr);
  if (s->ix) vr_select_free(s->ix);
  free(s->svar), free(s->sinst);
  free(s->rows), free(s->outputs), free(s->served_slot);
}

/* The next root arrival: drawn from the workload, or replayed
 * (cfg->replay_ns; Loki's rules read only t_ns, the rest is what
 * vr_wl_next sets for a synthetic workload). */
static int next_arrival(psim *s, size_t *pos, vr_req *out) {
  const vr_psim_cfg *c = s->cfg;
  if (!c->replay_ns) return vr_wl_next(c->arrivals, c->duration_s, out, s->err);
  if (*pos >= c->replay_n) return 0;
  memset(out, 0, sizeof *out);
  out->t_ns = c->replay_ns[(*pos)++];
  out->deadline_ns = out->t_ns + (int64_t)llround(c->arrivals->slo_ms * 1e6);
  out->min_acc = (float)c->arrivals->min_accuracy;
  return 1;
}

static int run_events(psim *s) {
  int64_t end = (int64_t)(s->cfg->duration_s * 1e9);
  vr_req next;
  size_t pos = 0;
  int have = next_arrival(s, &pos, &next);
  if (have < 0) return have;
  int rc = 0;
  vr_event e;
  while (!rc) {
    const vr_event *top = vr_heap_top(&s->heap);
    if (have && (!top || next.t_ns < top->t_ns)) {
      s->now = next.t_ns;
      if ((rc = on_arrival(s, &next))) break;
      have = next_arrival(s, &pos, &next);
      if (have < 0) return have;
      continue;
    }
    if (!vr_heap_pop(&s->heap, &e)) break;
    s->now = e.t_ns;
    if ((e.kind == EV_DONE || e.kind == EV_READY) && INST(s, e.a)->gen != e.gen)
      continue; /* an earlier life of a reused instance */
    if (e.kind == EV_DONE) rc = on_done(s, e.a);
    else if (e.kind == EV_TICK) rc = on_tick(s);
    else if (e.kind == EV_READY) {
      pinst *in = INST(s, e.a);
      rc = vr__psim_live_index(s); /* it serves now */
      if (!rc && !in->dead && in->qlen && !in->nb) rc = vr__psim_start(s, e.a);
    }
    if (!rc && s->alive < s->cfg->workers) rc = start_pending(s);
    if (s->now > end + (int64_t)(600 * 1e9)) break; /* runaway queues */
    if (s->cfg->stop_bad > 0 && s->bad >= s->cfg->stop_bad) {
      s->sum->stopped = 1;
      break;
    }
  }
  return rc;
}

int vr_psim_run(const vr_psim_cfg *cfg, FILE *csv, vr_psim_summary *sum,
                vr_errbuf *err) {
  memset(sum, 0, sizeof *sum);
  int rc = check_cfg(cfg, err);
  if (rc) return rc;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  psim s;
  memset(&s, 0, sizeof s);
  if (!(rc = setup(&s, cfg, sum, err)) &&
      !(rc = vr_wl_open(cfg->arrivals, cfg->seed ^ 0x5eed, err))) {
    if (!(rc = replan(&s, 1)) && !(rc = apply_plan(&s)) &&
        !(rc = rebuild_routes(&s)) &&
        !(rc = push(&s, (int64_t)(cfg->tick_s * 1e9), EV_TICK, 0)))
      rc = run_events(&s);
    if (cfg->arrivals->f) fclose(cfg->arrivals->f); /* the rest is the
                                                        caller's */
    cfg->arrivals->f = NULL;
  }
  if (!rc) vr__psim_summarise(&s, csv);
  teardown(&s);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  sum->wall_s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  if (rc) vr_psim_summary_free(sum);
  return rc;
}
