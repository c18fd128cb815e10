/*
 * Simulator control path: every tick, build the same vr_snapshot the live
 * control loop builds, run the policy, apply its actions, record a row of
 * the time series, and rebuild the selection index.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "sim/sim_int.h"

/* Frees instances that died since the last tick. */
static void compact(vr_sim *s) {
  size_t j = 0;
  for (size_t i = 0; i < s->insts.len; i++) {
    sim_inst *in = VR_VEC_AT(&s->insts, sim_inst *, i);
    if (in->dead) {
      vr_free(in->q);
      vr_free(in);
    } else {
      VR_VEC_AT(&s->insts, sim_inst *, j++) = in;
    }
  }
  s->insts.len = j;
}

static int build_snapshot(vr_sim *s, double dt) {
  vr_driver *d = &s->drv;
  vr_driver_begin(d, vr_driver_now(d));
  for (size_t t = 0; t < s->cfg->nwtypes; t++) {
    const vr_sim_wtype *wt = &s->cfg->wtypes[t];
    vr_snap_wtype x = {wt->cores, wt->gpus, wt->mem_bytes, wt->price_per_s,
                       wt->max, 0};
    if (vr_driver_add_wtype(d, &x) < 0) return VR_ENOMEM;
  }
  for (size_t i = 0; i < s->workers.len; i++) {
    sim_worker *w = VR_VEC_AT(&s->workers, sim_worker *, i);
    w->snap = -1;
    if (w->state == WS_REMOVED) continue;
    d->snap.wtypes[w->type].count++;
    vr_snap_worker x = {.id = w->id, .state = w->state, .cores = w->cores,
                        .free_cores = w->free_cores, .gpus = w->gpus,
                        .free_gpus = w->free_gpus, .mem_bytes = w->mem,
                        .free_mem = w->free_mem, .price_per_s = w->price,
                        .type = w->type,
                        .idle_since = w->ninst == 0 ? w->idle_since : -1};
    if ((w->snap = vr_driver_add_worker(d, &x)) < 0) return VR_ENOMEM;
  }
  for (size_t v = 0; v < s->nvar; v++) {
    sim_variant *sv = &s->var[v];
    if (isfinite(sv->min_slo)) sv->slo_ms = sv->min_slo;
    vr_snap_variant x = {sv->prof, sv->state, sv->slo_ms,
                         (double)sv->arrivals / dt, (double)sv->served / dt,
                         sv->max_acc};
    if (vr_driver_add_variant(d, &x) < 0) return VR_ENOMEM;
  }
  for (size_t i = 0; i < s->insts.len; i++) {
    sim_inst *in = VR_VEC_AT(&s->insts, sim_inst *, i);
    vr_snap_instance x = {
        .id = in->id, .variant = in->variant, .worker = in->w->snap,
        .state = in->state, .max_batch = in->max_batch,
        .queue_len = (int)in->qlen, .arrival_qps = (double)in->arrivals / dt,
        .served_qps = (double)in->served / dt,
        .obs_batch = in->batches ? (double)in->items / in->batches : 0,
        .ready_ns = in->ready_ns};
    vr_snap_latency(&x, in->lat, in->nlat);
    x.slowdown = vr_snap_median(in->ratio, in->nlat);
    if (vr_driver_add_instance(d, &x) < 0) return VR_ENOMEM;
  }
  return 0;
}

static sim_inst *find_inst(vr_sim *s, int64_t id) {
  for (size_t i = 0; i < s->insts.len; i++) {
    sim_inst *in = VR_VEC_AT(&s->insts, sim_inst *, i);
    if (in->id == id && !in->dead) return in;
  }
  return NULL;
}

static sim_worker *snap_worker(vr_sim *s, int idx) {
  for (size_t i = 0; i < s->workers.len; i++) {
    sim_worker *w = VR_VEC_AT(&s->workers, sim_worker *, i);
    if (w->snap == idx && idx >= 0) return w;
  }
  return NULL;
}

/* Adds (sign 1) or takes back (-1) a profile's compute on w (not its
 * memory: both instances are resident while the new one loads). */
static void sim_worker_credit(sim_worker *w, const vr_profile *p, int sign) {
  w->free_cores += sign * p->threads;
  if (p->device == VR_DEV_GPU) w->free_gpus += sign;
}

/* ---- the simulator's actuator table ---- */

static void trace(vr_sim *s, const vr_action *a) {
  if (!s->trace || a->kind == VR_ACT_SET_BATCH) return;
  fprintf(stderr, "t=%.3f %s variant=%s instance=%lld worker=%d value=%d "
          "(%s)\n", (double)vr_clock_now(&s->clock) / 1e9,
          vr_action_name(a->kind),
          a->variant >= 0 && (size_t)a->variant < s->nvar
              ? s->var[a->variant].prof.variant : "-",
          (long long)a->instance, a->worker, a->value, a->why ? a->why : "");
}

static sim_inst *act_inst(vr_sim *s, const vr_action *a) {
  trace(s, a);
  return a->instance >= 0 ? find_inst(s, a->instance) : NULL;
}

/* LOAD and MIGRATE: a new instance of the variant on the worker. */
static int act_load(void *self, const vr_action *a) {
  vr_sim *s = self;
  sim_inst *in = act_inst(s, a);
  int64_t now = vr_clock_now(&s->clock);
  sim_worker *w = snap_worker(s, a->worker);
  if (!w || a->variant < 0 || (size_t)a->variant >= s->nvar) return 0;
  /* the cluster is provisioned before the run starts: t = 0 loads are
   * warm */
  /* an upgrade in place: the old instance's cores count as free (they
   * are shared while the new one loads, as live) */
  int credit = a->kind == VR_ACT_MIGRATE && in && in->w == w && !in->dead;
  if (credit) sim_worker_credit(w, &s->var[in->variant].prof, 1);
  sim_inst *n = sim_inst_new(s, a->variant, w, now == 0);
  if (credit) sim_worker_credit(w, &s->var[in->variant].prof, -1);
  if (!n) return 0; /* no room */
  /* the old instance serves until its replacement is ready */
  if (a->kind == VR_ACT_MIGRATE && in) n->replaces = in->id;
  return 0;
}

static int act_unload(void *self, const vr_action *a) {
  vr_sim *s = self;
  sim_inst *in = act_inst(s, a);
  if (in) sim_inst_drain(s, in);
  return 0;
}

static int act_set_batch(void *self, const vr_action *a) {
  sim_inst *in = act_inst(self, a);
  if (in && a->value >= 1 && a->value <= VR_PROF_MAX_BATCH) {
    in->max_batch = a->value;
    sim_serving_fix(self, in); /* its load per batch row changed */
  }
  return 0;
}

static int act_set_istate(void *self, const vr_action *a) {
  vr_sim *s = self;
  sim_inst *in = act_inst(s, a);
  if (in && in->state != VR_IS_DRAINING && in->state != VR_IS_LOADING &&
      a->value >= VR_IS_ACTIVE && a->value <= VR_IS_INTERFERED) {
    in->state = a->value;
    sim_serving_fix(s, in); /* interfered instances sink in the heap */
  }
  return 0;
}

static int act_set_vstate(void *self, const vr_action *a) {
  vr_sim *s = self;
  trace(s, a);
  if (a->variant >= 0 && (size_t)a->variant < s->nvar)
    s->var[a->variant].state = a->value;
  return 0;
}

static int act_add_worker(void *self, const vr_action *a) {
  vr_sim *s = self;
  trace(s, a);
  int64_t now = vr_clock_now(&s->clock);
  if (a->wtype < 0 || (size_t)a->wtype >= s->cfg->nwtypes) return 0;
  const vr_sim_wtype *t = &s->cfg->wtypes[a->wtype];
  int64_t ready = now + (now == 0 ? 0 : (int64_t)(t->start_s * 1e9));
  return sim_worker_new(s, a->wtype, ready) ? 0 : VR_ENOMEM;
}

static int act_remove_worker(void *self, const vr_action *a) {
  vr_sim *s = self;
  trace(s, a);
  sim_worker *w = snap_worker(s, a->worker);
  if (w && w->ninst == 0 && w->state != VR_WS_STARTING) w->state = WS_REMOVED;
  return 0;
}

static const vr_actuator sim_actuator = {
    .load = act_load,
    .unload = act_unload,
    .set_batch = act_set_batch,
    .migrate = act_load,
    .add_worker = act_add_worker,
    .remove_worker = act_remove_worker,
    .set_vstate = act_set_vstate,
    .set_istate = act_set_istate,
};

/* Closes the period that ends now: one CSV row, run totals. */
static void record(vr_sim *s, double dt) {
  vr_sim_row *r = &s->row;
  int workers = 0, insts = 0;
  double cost = 0;
  for (size_t i = 0; i < s->workers.len; i++) {
    sim_worker *w = VR_VEC_AT(&s->workers, sim_worker *, i);
    if (w->state == WS_REMOVED) continue;
    workers++;
    if (!s->cfg->bill_instances) cost += w->price * dt;
  }
  for (size_t i = 0; i < s->insts.len; i++) {
    sim_inst *in = VR_VEC_AT(&s->insts, sim_inst *, i);
    insts += !in->dead && in->state != VR_IS_DRAINING;
    if (s->cfg->bill_instances && !in->dead)
      cost += s->var[in->variant].prof.cost_per_s * dt;
  }
  r->t_s = (double)vr_clock_now(&s->clock) / 1e9;
  r->p99_ms = (double)vr_hist_quantile(s->hist_period, 0.99) / 1e6;
  r->accuracy = r->served ? s->acc_period / (double)r->served : 0;
  r->cost = cost;
  r->workers = workers;
  r->instances = insts;
  if (s->out && s->out->csv)
    fprintf(s->out->csv, "%.3f,%lld,%lld,%lld,%lld,%.3f,%.3f,%.6f,%d,%d\n",
            r->t_s, (long long)r->demand, (long long)r->served,
            (long long)r->dropped, (long long)r->late, r->p99_ms, r->accuracy,
            r->cost, r->workers, r->instances);
  if (s->out && s->out->instances_csv)
    for (size_t v = 0; v < s->nvar; v++) {
      int n = 0;
      for (size_t i = 0; i < s->insts.len; i++) {
        sim_inst *in = VR_VEC_AT(&s->insts, sim_inst *, i);
        n += in->variant == (int)v && !in->dead && in->state != VR_IS_DRAINING;
      }
      if (n)
        fprintf(s->out->instances_csv, "%.3f,%s,%d\n", r->t_s,
                s->var[v].prof.variant, n);
    }
  /* requests are counted one by one (sim.c counted); the cluster's
   * figures by period, from the first one past the warm-up */
  vr_sim_summary *u = &s->sum;
  s->last_record_ns = vr_clock_now(&s->clock);
  if (r->t_s > s->cfg->warmup_s + 1e-9) {
    u->cost += cost;
    s->inst_sum += insts * dt;
    s->worker_sum += workers * dt;
    s->counted_s += dt;
    if (insts > u->max_instances) u->max_instances = insts;
  }
  memset(r, 0, sizeof *r);
  s->acc_period = 0;
  vr_hist_init(s->hist_period);
}

void sim_finish(vr_sim *s) {
  int64_t end = vr_clock_now(&s->clock);
  if (end > s->last_record_ns) record(s, (double)(end - s->last_record_ns) / 1e9);
  vr_sim_summary *u = &s->sum;
  for (size_t i = 0; i < s->insts.len; i++) {
    const sim_inst *in = VR_VEC_AT(&s->insts, sim_inst *, i);
    for (uint32_t k = 0; k < in->qlen; k++) {
      const vr_req *r = &in->q[(in->qhead + k) & (in->qcap - 1)];
      if (r->t_ns < s->warm_ns) continue;
      u->unfinished++;
      u->unfinished_overdue += r->deadline_ns <= end;
    }
  }
  if (s->counted_s > 0) {
    u->mean_instances = s->inst_sum / s->counted_s;
    u->mean_workers = s->worker_sum / s->counted_s;
  }
  u->violation_rate =
      u->demand ? (double)(u->late + u->dropped + u->unfinished_overdue) / u->demand : 0;
  u->accuracy = u->served ? s->acc_all / (double)u->served : 0;
  u->p50_ms = (double)vr_hist_quantile(s->hist_all, 0.5) / 1e6;
  u->p99_ms = (double)vr_hist_quantile(s->hist_all, 0.99) / 1e6;
  u->mean_ms = vr_hist_mean(s->hist_all) / 1e6;
}

static void reset_period(vr_sim *s) {
  for (size_t i = 0; i < s->insts.len; i++) {
    sim_inst *in = VR_VEC_AT(&s->insts, sim_inst *, i);
    in->arrivals = in->served = in->batches = in->items = 0;
    in->nlat = 0;
  }
  for (size_t v = 0; v < s->nvar; v++) {
    s->var[v].arrivals = s->var[v].served = 0;
    s->var[v].min_slo = INFINITY;
    s->var[v].max_acc = 0;
  }
}

int sim_tick(vr_sim *s) {
  double dt = s->cfg->tick_s;
  int64_t now = vr_clock_now(&s->clock);
  compact(s);
  if (now > 0) record(s, dt);
  if (now == 0 && s->cfg->warm_start) sim_prime(s);
  int rc = build_snapshot(s, dt);
  if (rc) return rc;
  /* At t = 0 the cluster is provisioned before traffic starts: workers the
   * policy adds are up at once, and the policy runs again (bounded) to
   * place its loads on them, warm. */
  for (int round = 0; round < (now == 0 ? 8 : 1); round++) {
    if (round && (rc = build_snapshot(s, dt))) return rc;
    rc = vr_driver_decide(&s->drv);
    if (rc)
      return vr_errf(s->err, rc, "policy %s failed at t=%.3f s: %s",
                     vr_policy_name(s->cfg->policy.kind), (double)now / 1e9,
                     vr_strerror(rc));
    const vr_actions *acts = &s->drv.acts;
    s->sum.actions += (int64_t)acts->len;
    int added = 0;
    for (size_t i = 0; i < acts->len && !rc; i++) {
      added |= vr_actions_at(acts, i)->kind == VR_ACT_ADD_WORKER;
      rc = vr_driver_apply(&s->drv, vr_actions_at(acts, i));
    }
    if (rc || !added) break;
  }
  if (rc) return rc;
  reset_period(s);
  if (!rc) rc = build_snapshot(s, dt);
  if (!rc) rc = vr_driver_index(&s->drv);
  return rc;
}

int sim_ctl_init(vr_sim *s) {
  /* VARIO_SIM_TRACE=1: every policy action on stderr (debugging aid) */
  const char *tr = getenv("VARIO_SIM_TRACE");
  s->trace = tr && *tr && strcmp(tr, "0");
  vr_actuator act = sim_actuator;
  act.self = s;
  if (vr_driver_init(&s->drv, &s->cfg->policy, &act, &s->clock))
    return VR_ENOMEM;
  int rc = build_snapshot(s, s->cfg->tick_s);
  if (!rc) rc = vr_driver_index(&s->drv);
  if (rc) return rc;
  for (size_t i = 0; i < s->cfg->nstreams; i++) {
    sim_stream *st = &s->st[i];
    vr_workload *w = &s->cfg->streams[i];
    st->wl = w;
    st->group = vr_select_group(s->drv.ix, w->target_kind, w->target);
    st->fixed = -1;
    const vr_policy_cfg *pc = &s->cfg->policy;
    for (int k = 0; k < pc->nfixed && st->fixed < 0; k++) {
      const vr_profile *p = &s->var[pc->fixed[k].variant].prof;
      if (!strcmp(w->target_kind == 'm' ? p->model : p->app, w->target))
        st->fixed = pc->fixed[k].variant;
    }
    if (pc->kind == VR_POL_INFAAS && st->group < 0)
      return vr_errf(s->err, VR_EINVAL,
                     "workload %zu: no variant serves %s \"%s\"", i,
                     w->target_kind == 'm' ? "model" : "app", w->target);
    if (pc->kind != VR_POL_INFAAS && st->fixed < 0)
      return vr_errf(s->err, VR_EINVAL,
                     "workload %zu: no fixed variant of the %s policy serves "
                     "\"%s\"", i, vr_policy_name(pc->kind), w->target);
  }
  if (s->out && s->out->csv)
    fprintf(s->out->csv, "t_s,demand,served,dropped,late,p99_ms,accuracy,"
                         "cost,workers,instances\n");
  if (s->out && s->out->instances_csv)
    fprintf(s->out->instances_csv, "t_s,variant,instances\n");
  return 0;
}

void sim_ctl_free(vr_sim *s) { vr_driver_free(&s->drv); }
