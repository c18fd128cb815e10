/*
 * Live pipelines under a pipeline policy (pipes.h, "pipeline policy"): the
 * live side of policy/pipe_policy.h. A thread ticks every tick_s: per
 * pipeline it fills the snapshot from what the server observed (demand,
 * per-task rates, multiplicative factors, the control plane's profiles,
 * instances and free cores), runs the pure policy when a replan is due,
 * applies the plan's actions through the control plane's live actuators
 * (vr_control_apply), rebuilds the routing and backup tables and publishes
 * them for the request path (vr__pipe_pol_pick, under the pipe's mutex).
 * What GET reports of it is pipes_pol_json.c.
 * The solve and the loads run off the request path, without the pipe's
 * mutex.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "control/pipes_pol.h"

void vr__pipe_pol_free(pl_pol *pol) {
  if (!pol) return;
  if (pol->ctx && pol->ctx_free) pol->ctx_free(pol->ctx);
  vr_pipeline_free(pol->view);
  vr_free(pol->prof);
  vr_free(pol->slot_var);
  vr_free(pol->slot_model);
  vr_free(pol->slot_ids);
  vr_free(pol->slot_n);
  vr_free(pol->slot_remote);
  vr_free(pol->slot_cap);
  vr_pipe_plan_free(&pol->plan);
  if (pol->have_routes) vr_pipe_routes_free(&pol->routes);
  vr_free(pol);
}

void vr__pipe_pol_drop(pl_pipe *pp) {
  pthread_mutex_lock(&pp->mu);
  pl_pol *old = pp->pol;
  pp->pol = NULL;
  pp->pol_gen++;
  pthread_mutex_unlock(&pp->mu);
  vr__pipe_pol_free(old);
}

/* ---- the planning view ------------------------------------------------------ */

/* Whether another candidate of the task is the same model, precision and
 * threads with a larger max batch: the planner sets the batch cap itself,
 * so only the largest of such variants is a candidate (a third of the
 * MILP when a model is registered at max batch 1, 2 and 4). */
static int dominated(vr_pipes *ps, const vr_pipe_task *t, const vr_profile *pr) {
  for (int v = 0; v < t->nvariants; v++) {
    vr_profile o;
    if (vr_control_variant(ps->ctl, t->variants[v].name, &o) >= 0 &&
        !strcmp(o.model, pr->model) && !strcmp(o.precision, pr->precision) &&
        o.threads == pr->threads && o.max_batch > pr->max_batch)
      return 1;
  }
  return 0;
}

/* Each task keeps the variants the control plane serves, at the fewest
 * threads among them (one instance = `threads` cores = one Loki worker). */
int vr__pipe_pol_build_view(vr_pipes *ps, pl_pipe *pp, pl_pol **out, vr_errbuf *err) {
  const vr_pipeline *sp = pp->spec;
  int threads = 0;
  for (int t = 0; t < sp->ntasks; t++)
    for (int v = 0; v < sp->tasks[t].nvariants; v++) {
      vr_profile pr;
      if (vr_control_variant(ps->ctl, sp->tasks[t].variants[v].name, &pr) >= 0 &&
          (!threads || pr.threads < threads))
        threads = pr.threads;
    }
  pl_pol *pol = vr_calloc(1, sizeof *pol);
  if (!pol) return vr_errf(err, VR_ENOMEM, "out of memory");
  pol->threads = threads > 0 ? threads : 1;
  pol->view = vr_pipeline_dup(sp);
  int rc = pol->view ? 0 : vr_errf(err, VR_ENOMEM, "out of memory");
  for (int t = 0; t < sp->ntasks && !rc; t++) {
    const char *names[VR_PIPE_MAX_VARIANTS];
    double acc[VR_PIPE_MAX_VARIANTS];
    int n = 0;
    for (int v = 0; v < sp->tasks[t].nvariants; v++) {
      vr_profile pr;
      const vr_pipe_variant *x = &sp->tasks[t].variants[v];
      if (vr_control_variant(ps->ctl, x->name, &pr) < 0 || pr.threads != pol->threads ||
          dominated(ps, &sp->tasks[t], &pr))
        continue;
      names[n] = x->name;
      acc[n++] = x->accuracy;
    }
    if (!n)
      rc = vr_errf(err, VR_ENOENT, "task '%s': no variant of app '%s' is served at %d thread(s)",
                   sp->tasks[t].name, sp->tasks[t].app, pol->threads);
    else
      rc = vr_pipe_task_set_variants(pol->view, t, names, acc, n, err);
  }
  if (!rc) {
    rc = vr_pipe_plan_init(&pol->plan, pol->view);
    pol->nslots = pol->plan.off[pol->view->ntasks];
  }
  if (!rc) {
    size_t n = (size_t)pol->nslots;
    pol->prof = vr_calloc(n, sizeof *pol->prof);
    pol->slot_var = vr_calloc(n, sizeof *pol->slot_var);
    pol->slot_model = vr_calloc(n, sizeof *pol->slot_model);
    pol->slot_ids = vr_calloc(n * PL_SLOT_INST, sizeof *pol->slot_ids);
    pol->slot_n = vr_calloc(n, sizeof *pol->slot_n);
    if (!pol->prof || !pol->slot_var || !pol->slot_model || !pol->slot_ids || !pol->slot_n)
      rc = vr_errf(err, VR_ENOMEM, "out of memory");
  }
  if (rc) {
    vr__pipe_pol_free(pol);
    return rc;
  }
  *out = pol;
  return 0;
}

/* Control variant indexes and profiles of the view's slots (they move
 * when the store reloads). 0, or VR_ENOENT when a variant went away.
 * Looked up first, then swapped in under pp->mu: the request path reads
 * the slots' profiles and models under it. */
int vr__pipe_pol_refresh_slots(vr_pipes *ps, pl_pipe *pp, pl_pol *pol) {
  const vr_pipeline *v = pol->view;
  int n = pol->plan.off[v->ntasks];
  vr_profile *prof = vr_calloc((size_t)n + 1, sizeof *prof);
  int *var = vr_calloc((size_t)n + 1, sizeof *var);
  int rc = prof && var ? 0 : VR_ENOMEM;
  for (int t = 0; !rc && t < v->ntasks; t++)
    for (int k = 0; !rc && k < v->tasks[t].nvariants; k++) {
      int s = pol->plan.off[t] + k;
      var[s] = vr_control_variant(ps->ctl, v->tasks[t].variants[k].name, &prof[s]);
      if (var[s] < 0) rc = VR_ENOENT;
    }
  if (!rc) {
    pthread_mutex_lock(&pp->mu);
    memcpy(pol->prof, prof, (size_t)n * sizeof *prof);
    memcpy(pol->slot_var, var, (size_t)n * sizeof *var);
    for (int s = 0; s < n; s++)
      snprintf(pol->slot_model[s], sizeof pol->slot_model[s], "%s", prof[s].model);
    pthread_mutex_unlock(&pp->mu);
  }
  vr_free(prof);
  vr_free(var);
  return rc;
}

/* The observed multiplicative factor and child shares of each variant
 * (after PL_MIN_OBS requests); a variant not yet observed takes the
 * largest observed factor of its task (planning for the most fan-out is
 * the safe side), else the spec's default. Caller holds pp->mu. */
static void observed_factors(pl_pipe *pp, pl_pol *pol) {
  vr_pipeline *v = pol->view;
  for (int t = 0; t < v->ntasks; t++) {
    vr_pipe_task *task = &v->tasks[t];
    if (!task->nchildren) continue;
    const pl_task *pt = &pp->t[t];
    const pl_vstat *best = NULL;
    for (int i = 0; i < pt->nvs; i++)
      if (pt->vs[i].in >= PL_MIN_OBS &&
          (!best || (double)pt->vs[i].out / pt->vs[i].in > (double)best->out / best->in))
        best = &pt->vs[i];
    for (int k = 0; k < task->nvariants; k++) {
      const pl_vstat *o = NULL;
      for (int i = 0; i < pt->nvs && !o; i++)
        if (!strcmp(pt->vs[i].variant, task->variants[k].name) && pt->vs[i].in >= PL_MIN_OBS)
          o = &pt->vs[i];
      if (!o) o = best;
      if (!o) continue;
      task->variants[k].mult = (double)o->out / o->in;
      for (int c = 0; c < task->nchildren; c++)
        task->variants[k].share[c] = o->out ? (double)o->out_child[c] / o->out : 0;
    }
  }
}

/* ---- the request path -------------------------------------------------------- */

int vr__pipe_pol_active(pl_pipe *pp) { return pp->pol && pp->pol->have_routes; }

/* An instance of slot *slot, else of the task's other slots in accuracy
 * order (plan changes: an instance may be loading); one on this worker
 * first, then (following the controller) PL_REMOTE_ID for a slot the plan
 * placed on other workers; -1 if none. */
static int pick_instance(pl_pol *pol, int t, int *slot) {
  if (*slot >= 0 && pol->slot_n[*slot] > 0)
    return pol->slot_ids[*slot * PL_SLOT_INST + pol->rr++ % (unsigned)pol->slot_n[*slot]];
  if (*slot >= 0 && pol->slot_remote && pol->slot_remote[*slot]) return PL_REMOTE_ID;
  const vr_pipe_routes *r = &pol->routes;
  for (int pass = 0; pass < (pol->slot_remote ? 2 : 1); pass++)
    for (int k = 0; k < pol->view->tasks[t].nvariants; k++) {
      int s = r->off[t] + r->order[r->off[t] + k];
      if (!pass && pol->slot_n[s] > 0) {
        *slot = s;
        return pol->slot_ids[s * PL_SLOT_INST + pol->rr++ % (unsigned)pol->slot_n[s]];
      }
      if (pass && pol->slot_remote[s]) {
        *slot = s;
        return PL_REMOTE_ID;
      }
    }
  return -1;
}

int vr__pipe_pol_pick(pl_pipe *pp, const pl_pick_in *in, pl_pick *out) {
  pl_pol *pol = pp->pol;
  memset(out, 0, sizeof *out);
  out->slot = -1;
  out->instance_id = -1;
  if (!pol || !pol->have_routes) return -1;
  const vr_pipeline *v = pol->view;
  int t = in->task;
  int mode = pol->follow ? pol->drop_mode : in->drop_mode;
  out->deadline_drops = vr_edrop_deadline_drops(mode, v->tasks[t].nchildren == 0);
  if (in->expired && out->deadline_drops) return out->expired = 1, 0;
  if (in->parent_slot < 0) {
    out->slot = vr_pipe_route_pick(v, &pol->routes, 0, -1, in->u);
  } else {
    double budget = vr_pipe_hop_budget_ms(&pol->plan, &pol->routes, pol->prof, in->parent_slot);
    out->budget_sum = in->parent_budget_sum + budget;
    out->slot = vr_pipe_route_pick(v, &pol->routes, t, in->parent_slot, in->u);
    if (out->slot >= 0) {
      vr_hop h = {.mode = mode,
                  .elapsed_ms = in->elapsed_ms,
                  .spent_ms = in->spent_ms,
                  .budget_ms = budget,
                  .budget_sum_ms = out->budget_sum,
                  .slo_ms = in->slo_ms,
                  .child_is_leaf = v->tasks[t].nchildren == 0};
      int alt = -1;
      out->verdict = vr_pipe_hop(v, &pol->plan, &pol->routes, t, out->slot, &h, &alt);
      out->behind_ms = in->elapsed_ms - out->budget_sum;
      if (out->verdict == VR_HOP_REROUTE) out->slot = alt, pol->rerouted++;
      if (out->verdict == VR_HOP_DROP) {
        pol->early++;
        return 0;
      }
    }
  }
  out->instance_id = pick_instance(pol, t, &out->slot);
  if (out->instance_id == -1) {
    pol->no_instance++;
    return 0;
  }
  const vr_pipe_variant *x = &v->tasks[t].variants[out->slot - pol->plan.off[t]];
  snprintf(out->model, sizeof out->model, "%s", pol->slot_model[out->slot]);
  snprintf(out->variant, sizeof out->variant, "%s", x->name);
  out->accuracy = x->accuracy;
  return 0;
}

/* ---- one tick ---------------------------------------------------------------- */

static void fmt_variants(const pl_pol *pol, const vr_pipe_plan *plan, char *buf, size_t cap) {
  size_t off = 0;
  buf[0] = 0;
  const vr_pipeline *v = pol->view;
  for (int t = 0; t < v->ntasks; t++) {
    int w = snprintf(buf + off, cap - off, "%s%s:", t ? " " : "", v->tasks[t].name);
    if (w < 0 || (size_t)w >= cap - off) return;
    off += (size_t)w;
    int first = 1;
    for (int k = 0; k < v->tasks[t].nvariants; k++) {
      const vr_pipe_alloc *a = &plan->a[plan->off[t] + k];
      if (a->inst <= 0) continue;
      w = snprintf(buf + off, cap - off, "%s%s*%d", first ? "" : ",", pol->prof[plan->off[t] + k].model,
                   a->inst);
      if (w < 0 || (size_t)w >= cap - off) return;
      off += (size_t)w;
      first = 0;
    }
  }
}

static void row_plan(pl_pol *pol);

/* Demand and factors from the counters; the history row. Caller holds
 * pp->mu. */
static void observe(pl_pipe *pp, pl_pol *pol, double now_s, double dt) {
  pol->narr = 0; /* the root arrivals since the last tick, for a tuner */
  for (; pp->arr_n > 0; pp->arr_n--) {
    pol->arr[pol->narr++] = pp->arr_t[pp->arr_head];
    pp->arr_head = (pp->arr_head + 1) % PL_ARR_RING;
  }
  double qps = (double)(pp->arrivals - pol->arr_seen) / dt;
  pol->arr_seen = pp->arrivals;
  pol->last_qps = qps;
  pol->ewma = pol->nhist ? 0.5 * pol->ewma + 0.5 * qps : qps;
  for (int t = 0; t < pp->spec->ntasks; t++) {
    double r = (double)(pp->t[t].in - pol->task_seen[t]) / dt;
    pol->task_seen[t] = pp->t[t].in;
    pol->task_ewma[t] = pol->nhist ? 0.5 * pol->task_ewma[t] + 0.5 * r : r;
  }
  observed_factors(pp, pol);
  uint64_t req = 0;
  for (int o = 0; o < VR_POUT_COUNT; o++) req += pp->outcomes[o];
  pl_row *row = &pol->hist[pol->hhead];
  pol->hhead = (pol->hhead + 1) % PL_HIST;
  if (pol->nhist < PL_HIST) pol->nhist++;
  memset(row, 0, sizeof *row);
  row->t_s = now_s - pol->t0_s;
  row->demand = qps;
  row->ewma = pol->ewma;
  row->req = req - pol->req_seen;
  row->met = pp->met - pol->met_seen;
  row->dropped = pp->outcomes[VR_POUT_DROPPED] - pol->drop_seen;
  row->early = pol->early - pol->early_seen;
  row->rerouted = pol->rerouted - pol->rr_seen;
  row->accuracy = pp->acc_n > pol->accn_seen
                      ? (pp->acc_sum - pol->accsum_seen) / (double)(pp->acc_n - pol->accn_seen)
                      : NAN;
  pol->req_seen = req, pol->met_seen = pp->met, pol->drop_seen = pp->outcomes[VR_POUT_DROPPED];
  pol->early_seen = pol->early, pol->rr_seen = pol->rerouted;
  pol->accsum_seen = pp->acc_sum, pol->accn_seen = pp->acc_n;
  row_plan(pol); /* the plan in force until this tick decides */
}

/* The plan in force after this tick into its history row. Caller holds
 * pp->mu. */
static void row_plan(pl_pol *pol) {
  pl_row *row = &pol->hist[(pol->hhead + PL_HIST - 1) % PL_HIST];
  row->workers = pol->workers;
  if (!pol->have_plan) return;
  row->plan_acc = pol->plan.accuracy;
  row->scaled = pol->plan.accuracy_scaled;
  row->feasible = pol->plan.feasible;
  fmt_variants(pol, &pol->plan, row->variants, sizeof row->variants);
}

/* Whether an instance is the plan's to keep, replace or unload: one of a
 * view's variant, or of any other variant of the pipeline's apps (another
 * batch size or thread count, loaded by INFaaS selection before the first
 * plan or by a view since dropped). The control loop leaves those alone
 * (managed) and vr_control_managed_cores counts their cores as the plan's:
 * left out, nobody ever unloaded them and the plan's loads found no room. */
static int plan_holds(const pl_pipe *pp, const pl_pol *pol, const vr_ctl_inst_info *in) {
  for (int s = 0; s < pol->nslots; s++)
    if (pol->slot_var[s] == in->var) return 1;
  for (int t = 0; t < pp->spec->ntasks; t++)
    if (!strcmp(pp->spec->tasks[t].app, in->app)) return 1;
  return 0;
}

/* Cores this pipeline's plan may fill: those the managed apps may fill
 * (vr_control_managed_cores) less those the instances of another
 * pipeline's apps hold. Every pipeline planned with all of them, and the
 * loads of the one applied last found no room. */
static int plan_cores(vr_pipes *ps, const pl_pipe *pp, const pl_pol *pol) {
  vr_ctl_inst_info info[256];
  int n = vr_control_instances(ps->ctl, info, 256), cores = vr_control_managed_cores(ps->ctl);
  if (n > 256) n = 256;
  for (int i = 0; i < n; i++) {
    int managed = 0;
    for (int j = 0; j < ps->nmanaged && !managed; j++) managed = !strcmp(ps->managed[j], info[i].app);
    if (managed && !plan_holds(pp, pol, &info[i])) cores -= info[i].cores;
  }
  return cores > 0 ? cores : 0;
}

/* The instances the plan holds (plan_holds), sorted by id. */
static int held_instances(vr_pipes *ps, const pl_pipe *pp, pl_pol *pol, vr_pipe_snap_inst *out,
                          int *ready, int cap) {
  vr_ctl_inst_info info[256];
  int n = vr_control_instances(ps->ctl, info, 256), k = 0;
  if (n > 256) n = 256;
  for (int i = 0; i < n && k < cap; i++) {
    if (!plan_holds(pp, pol, &info[i])) continue;
    ready[k] = info[i].ready;
    out[k++] = (vr_pipe_snap_inst){info[i].id, info[i].var, info[i].batch_cap};
  }
  return k;
}

/* A solve's outcome into what GET reads (under pp->mu: the HTTP thread
 * reads these while the policy thread writes them): its time (ms < 0: no
 * solve ran), and a failure's message or NULL for a plan. */
static void note_solve(pl_pipe *pp, pl_pol *pol, double ms, const char *failed) {
  pthread_mutex_lock(&pp->mu);
  if (ms >= 0) pol->last_solve_ms = ms;
  if (failed) {
    pol->solve_fail++;
    snprintf(pol->last_err, sizeof pol->last_err, "%.199s", failed);
  } else {
    pol->replans++;
  }
  pthread_mutex_unlock(&pp->mu);
}

/* An action of the plan the control plane did not carry out (a load with
 * no room on the worker, a failed load): logged, and counted with its
 * reason for GET, so a task left without an instance says why. */
static void note_act_failed(pl_pipe *pp, pl_pol *pol, const vr_action *a, int rc,
                            const vr_errbuf *err) {
  const char *why = err->msg[0] ? err->msg : vr_strerror(rc);
  vr_warn("pipeline '%s': plan's %s not carried out: %s", pp->spec->name,
          vr_action_name(a->kind), why);
  if (a->kind != VR_ACT_LOAD && a->kind != VR_ACT_MIGRATE) return;
  pthread_mutex_lock(&pp->mu);
  pol->loads_failed++;
  snprintf(pol->load_err, sizeof pol->load_err, "%.*s", (int)sizeof pol->load_err - 1, why);
  pthread_mutex_unlock(&pp->mu);
}

/* Re-reads the instances (into s) and publishes the slot -> instance
 * lists for the plan in force (inst: 256 entries, s->inst's buffer): each instance on the slot the plan assigns
 * it; one the plan replaces stays listed on every slot of its variant
 * (the fallback while its replacement loads), unless `acts` unloads it
 * outright. */
static void publish(vr_pipes *ps, pl_pipe *pp, pl_pol *pol, vr_pipe_snap *s,
                    vr_pipe_snap_inst *inst, const vr_actions *acts) {
  int ready[256], assign[256];
  s->inst = inst;
  s->ninst = held_instances(ps, pp, pol, inst, ready, 256);
  vr_actions scratch;
  vr_actions_init(&scratch);
  int rc = vr_pipe_plan_actions(s, &pol->plan, assign, &scratch);
  vr_actions_free(&scratch);
  if (rc) return;
  pthread_mutex_lock(&pp->mu);
  memset(pol->slot_n, 0, (size_t)pol->nslots * sizeof *pol->slot_n);
  for (int i = 0; i < s->ninst; i++) {
    if (!ready[i]) continue;
    int gone = 0;
    for (size_t k = 0; acts && k < acts->len && !gone; k++)
      gone = vr_actions_at(acts, k)->kind == VR_ACT_UNLOAD &&
             vr_actions_at(acts, k)->instance == inst[i].id;
    if (gone) continue;
    for (int sl = 0; sl < pol->nslots; sl++) {
      int on = assign[i] >= 0 ? sl == assign[i] : pol->slot_var[sl] == inst[i].var;
      if (on && pol->slot_n[sl] < PL_SLOT_INST)
        pol->slot_ids[sl * PL_SLOT_INST + pol->slot_n[sl]++] = (int)inst[i].id;
    }
  }
  pthread_mutex_unlock(&pp->mu);
}

/* Whether an app of pipes[i] is one a plan of another pipeline holds
 * (VR_EEXIST, naming both). Two plans holding one app's instances fought:
 * each unloaded what the other loaded, every tick. The pipeline planned
 * first keeps it while it holds a plan (until it is deleted or its view
 * is dropped: then whichever builds a view first takes it). */
static int planned_elsewhere(pl_pipe **pipes, int n, int i, vr_errbuf *err) {
  const vr_pipeline *a = pipes[i]->spec;
  for (int j = 0; j < n; j++) {
    if (j == i || !pipes[j]->pol) continue;
    const vr_pipeline *b = pipes[j]->spec;
    for (int t = 0; t < a->ntasks; t++)
      for (int u = 0; u < b->ntasks; u++)
        if (!strcmp(a->tasks[t].app, b->tasks[u].app))
          return vr_errf(err, VR_EEXIST,
                         "app '%s' (task '%s') is planned by pipeline '%s': a pipeline policy "
                         "plans an app for one pipeline (register the models under another "
                         "app for this one)",
                         a->tasks[t].app, a->tasks[t].name, b->name);
  }
  return 0;
}

static void pol_tick(vr_pipes *ps, pl_pipe **pipes, int n, int i, double now_s, double dt) {
  vr_errbuf err = {0};
  pl_pipe *pp = pipes[i];
  if (!pp->pol && pp->refreshed) { /* as after a dropped view: planned next tick */
    pp->refreshed = 0;
    return;
  }
  if (!pp->pol) {
    pl_pol *pol = NULL;
    if (planned_elsewhere(pipes, n, i, &err) || vr__pipe_pol_build_view(ps, pp, &pol, &err)) {
      if (strcmp(pp->nopol, err.msg))
        vr_warn("pipeline '%s': no policy (its hops are routed by selection): %s",
                pp->spec->name, err.msg);
      pthread_mutex_lock(&pp->mu);
      snprintf(pp->nopol, sizeof pp->nopol, "%s", err.msg);
      pthread_mutex_unlock(&pp->mu);
      return;
    }
    pthread_mutex_lock(&pp->mu);
    pp->nopol[0] = '\0';
    pthread_mutex_unlock(&pp->mu);
    pol->t0_s = now_s;
    pthread_mutex_lock(&pp->mu);
    pol->arr_seen = pp->arrivals;
    for (int t = 0; t < pp->spec->ntasks; t++) pol->task_seen[t] = pp->t[t].in;
    pp->pol = pol;
    pthread_mutex_unlock(&pp->mu);
  }
  pl_pol *pol = pp->pol;
  if (vr__pipe_pol_refresh_slots(ps, pp, pol)) {
    /* Its model was unregistered: the plan's tables would keep sending
     * hops to it (every one rejected) and no plan could be made again on
     * this view. The next tick builds the view from what is served. */
    vr_warn("pipeline '%s': a variant of its planning view is no longer served: planning "
            "afresh", pp->spec->name);
    vr__pipe_pol_drop(pp);
    return;
  }
  pthread_mutex_lock(&pp->mu);
  observe(pp, pol, now_s, dt);
  vr_pipe_snap s = {.now_s = now_s, .p = pol->view, .prof = pol->prof,
                    .slot_var = pol->slot_var, .demand_ewma = pol->ewma,
                    .demand_last = pol->last_qps, .slack = ps->popts.slack,
                    .cur = pol->have_plan ? &pol->plan : NULL,
                    .arrivals = pol->arr, .narrivals = pol->narr};
  memcpy(s.task_qps, pol->task_ewma, sizeof s.task_qps);
  uint64_t done = 0;
  for (int o = 0; o < VR_POUT_COUNT; o++) done += pp->outcomes[o];
  s.open_queries = pp->requests > done ? (int64_t)(pp->requests - done) : 0;
  pthread_mutex_unlock(&pp->mu);
  s.workers = plan_cores(ps, pp, pol) / pol->threads;
  pthread_mutex_lock(&pp->mu); /* what GET reads, under the lock it reads it */
  pol->workers = s.workers;
  pthread_mutex_unlock(&pp->mu);
  vr_pipe_snap_inst inst[256];
  int ready[256];
  s.inst = inst;
  s.ninst = held_instances(ps, pp, pol, inst, ready, 256);

  vr_pipe_plan next = {0};
  int have_next = 0;
  if (ps->pdef->ctx_new && !pol->ctx && now_s >= pol->ctx_retry_s && s.workers > 0) {
    /* once per pipeline (InferLine: plans its configuration here) */
    int rc = ps->pdef->ctx_new(&s, ps->popts.arg, &pol->ctx, &err);
    if (rc) {
      pol->ctx = NULL;
      pol->ctx_retry_s = now_s + ps->popts.period_s;
      note_solve(pp, pol, -1, err.msg);
      vr_warn("pipeline '%s': %s: %s", pp->spec->name, ps->pdef->name, err.msg);
    } else {
      pol->ctx_free = ps->pdef->ctx_free;
      vr_info("pipeline '%s': %s configured", pp->spec->name, ps->pdef->name);
    }
  }
  int ready_ctx = !ps->pdef->ctx_new || pol->ctx;
  if (ready_ctx && s.workers > 0 &&
      (ps->pdef->every_tick ||
       vr_pipe_replan_due(!pol->have_plan, now_s, pol->next_s, pol->ewma, pol->planned_for,
                          ps->popts.change))) {
    vr_pipe_plan_init(&next, pol->view);
    int64_t t0 = vr_clock_now(vr_clock_monotonic());
    int rc = ps->pdef->plan(pol->ctx, &s, &next, &err);
    double ms = (vr_clock_now(vr_clock_monotonic()) - t0) / 1e6;
    note_solve(pp, pol, ms, rc ? err.msg : NULL);
    if (rc) {
      vr_warn("pipeline '%s': %s plan: %s", pp->spec->name, ps->pdef->name, err.msg);
      vr_pipe_plan_free(&next);
    } else {
      have_next = 1;
      pol->planned_for = pol->ewma;
      pol->next_s = now_s + ps->popts.period_s;
      /* a tuner plans every tick: say so only when the plan changes */
      if (!ps->pdef->every_tick || !pol->have_plan || next.workers != pol->plan.workers)
        vr_info("pipeline '%s': %s plan for %.1f req/s on %d worker(s): %d instance(s), "
                "accuracy %.2f%%%s%s (%.1f ms)", pp->spec->name, ps->pdef->name, pol->ewma,
                s.workers, next.workers, next.accuracy,
                next.accuracy_scaled ? ", accuracy scaled" : "",
                next.feasible ? "" : ", best effort", pol->last_solve_ms);
    }
  }
  const vr_pipe_plan *target = have_next ? &next : pol->have_plan ? &pol->plan : NULL;
  if (!target) {
    pthread_mutex_lock(&pp->mu);
    row_plan(pol);
    pthread_mutex_unlock(&pp->mu);
    return;
  }
  /* The new plan and its tables first: hops go to its slots as soon as
   * they have instances, to the old instances (still listed) until then. */
  vr_pipe_routes routes = {0};
  int rrc = vr_pipe_route_build(pol->view, target, pol->ewma, &routes);
  pthread_mutex_lock(&pp->mu);
  if (have_next) {
    vr_pipe_plan_free(&pol->plan);
    pol->plan = next; /* moved */
    pol->have_plan = 1;
  }
  if (rrc == 0) {
    if (pol->have_routes) vr_pipe_routes_free(&pol->routes);
    pol->routes = routes;
    pol->have_routes = 1;
  }
  row_plan(pol); /* GET shows the row and the plan alike */
  pthread_mutex_unlock(&pp->mu);
  /* Reconcile every tick: a load refused for want of room is retried, an
   * instance loaded by the query path is returned. */
  vr_actions acts;
  vr_actions_init(&acts);
  if (vr_pipe_plan_actions(&s, &pol->plan, NULL, &acts) == 0) {
    publish(ps, pp, pol, &s, inst, &acts);
    for (size_t i = 0; i < acts.len; i++) {
      const vr_action *a = vr_actions_at(&acts, i);
      vr_errbuf aerr = {0};
      int rc = vr_control_apply(ps->ctl, a, &aerr);
      if (rc) note_act_failed(pp, pol, a, rc, &aerr);
      if (a->kind == VR_ACT_LOAD || a->kind == VR_ACT_MIGRATE)
        publish(ps, pp, pol, &s, inst, &acts); /* use it now; forget the replaced */
    }
    if (acts.len) publish(ps, pp, pol, &s, inst, NULL);
  }
  vr_actions_free(&acts);
  pthread_mutex_lock(&pp->mu);
  row_plan(pol);
  pthread_mutex_unlock(&pp->mu);
}

void vr__pipes_manage_apps(vr_pipes *p, pl_pipe **pipes, int n) {
  char (*now)[VR_PIPE_NAME_MAX] = vr_calloc(VR_PIPE_MAX_TASKS * 64, sizeof *now);
  if (!now) return;
  int k = 0;
  for (int i = 0; i < n; i++) {
    /* A pipeline with an app another's plan holds (planned_elsewhere,
     * as of now: once that plan is gone, it is planned this tick, pol_tick
     * running after this, and its apps are its plan's from this tick on)
     * leaves its apps to the control loop, but for the held ones. */
    if (!pipes[i]->pol && planned_elsewhere(pipes, n, i, NULL)) continue;
    for (int t = 0; t < pipes[i]->spec->ntasks; t++) {
      const char *app = pipes[i]->spec->tasks[t].app;
      int seen = 0;
      for (int j = 0; j < k && !seen; j++) seen = !strcmp(now[j], app);
      if (!seen && k < VR_PIPE_MAX_TASKS * 64) {
        snprintf(now[k++], VR_PIPE_NAME_MAX, "%s", app);
        vr_control_set_managed(p->ctl, app, 1);
      }
    }
  }
  for (int j = 0; j < p->nmanaged; j++) {
    int kept = 0;
    for (int i = 0; i < k && !kept; i++) kept = !strcmp(now[i], p->managed[j]);
    if (!kept) vr_control_set_managed(p->ctl, p->managed[j], 0);
  }
  vr_free(p->managed);
  p->managed = now;
  p->nmanaged = k;
}

void vr_pipes_policy_tick(vr_pipes *p) {
  if (!p->pdef) return;
  vr_pipes_refresh(p); /* a model registered into an app: a new candidate */
  /* the slots' variant indexes stay those of the view until its loads and
   * lists are made: a store reload (a registration) waits for the tick */
  vr_control_hold_indexes(p->ctl);
  /* references: a pipeline deleted meanwhile stays alive until we finish */
  pl_pipe *pipes[VR_PIPES_MAX];
  int n = vr__pipes_ref_all(p, pipes, VR_PIPES_MAX, 0);
  double now_s = vr_clock_now(vr_clock_monotonic()) / 1e9;
  double dt = p->plast > 0 ? now_s - p->plast : p->popts.tick_s;
  if (dt <= 1e-3) dt = 1e-3;
  p->plast = now_s;
  vr__pipes_manage_apps(p, pipes, n);
  for (int i = 0; i < n; i++) {
    pol_tick(p, pipes, n, i, now_s, dt);
    vr__pipe_unref(pipes[i]);
  }
  vr_control_release_indexes(p->ctl);
}

/* ---- the thread ------------------------------------------------------------ */

static void *policy_main(void *arg) {
  vr_pipes *p = arg;
  pthread_mutex_lock(&p->mu);
  while (!p->pstop) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t t = ts.tv_sec * VR_NS_PER_S + ts.tv_nsec + (int64_t)(p->popts.tick_s * 1e9);
    ts.tv_sec = t / VR_NS_PER_S;
    ts.tv_nsec = t % VR_NS_PER_S;
    while (!p->pstop && pthread_cond_timedwait(&p->pcv, &p->mu, &ts) == 0) {}
    if (p->pstop) break;
    pthread_mutex_unlock(&p->mu);
    vr_pipes_policy_tick(p);
    pthread_mutex_lock(&p->mu);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

int vr_pipes_set_policy(vr_pipes *p, const vr_pipes_policy_opts *o, vr_errbuf *err) {
  if (p->pdef) return vr_errf(err, VR_EINVAL, "a pipeline policy is already set");
  const vr_pipe_policy_def *def = vr_pipe_policy_find(o->policy, err);
  if (!def) return VR_ENOENT;
  p->popts = *o;
  if (p->popts.period_s <= 0) p->popts.period_s = 10;
  if (p->popts.tick_s <= 0) p->popts.tick_s = 1;
  if (p->popts.change <= 0) p->popts.change = 0.3;
  if (p->popts.slack <= 0) p->popts.slack = 1.25;
  p->popts.policy = def->name;
  p->pdef = def;
  p->pstop = 0;
  if (pthread_create(&p->pthread, NULL, policy_main, p)) {
    p->pdef = NULL;
    return vr_errf(err, VR_ENOMEM, "cannot start the pipeline policy thread");
  }
  p->prunning = 1;
  return 0;
}

void vr__pipes_stop_policy(vr_pipes *p) {
  if (!p->prunning) return;
  pthread_mutex_lock(&p->mu);
  p->pstop = 1;
  pthread_cond_broadcast(&p->pcv);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->pthread, NULL);
  p->prunning = 0;
}
