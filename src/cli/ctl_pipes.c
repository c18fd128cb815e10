/*
 * The controller's pipeline policy (issue 18): `vario controller --store
 * URL --pipeline-policy loki|inferline|...` runs a pipeline policy
 * (policy/pipe_policy.h: the same pure plan functions `vario serve
 * --pipeline-policy` and the simulator run) over the whole cluster.
 *
 * Every pipeline tick, per pipeline in the metadata store:
 *   - the snapshot: the planning view (each task's variants of its app in
 *     the store, at the fewest threads, as a worker builds it), the
 *     stored profiles, the instances of the view's models on every live
 *     worker (registry; loads in flight count as held), the root and
 *     per-task demand from the arrival rates the workers measured, and
 *     the instances the cluster may hold (live workers' cores, plus what
 *     the provider may still add up to --max-workers);
 *   - the policy's plan when a replan is due (every tick for InferLine's
 *     tuner), and vr_pipe_plan_actions from instances to plan;
 *   - the actions through the cluster actuators: LOAD / MIGRATE load the
 *     variant's model on the live worker with the most free cores that
 *     does not hold it (a worker runs one copy per model, so replicas land
 *     on distinct workers; when none is left, a worker from the
 *     provider); UNLOAD unloads that worker's copy; SET_BATCH is left to
 *     the workers (counted): the plan text carries each slot's batch, and
 *     every worker following it caps the instances it holds
 *     (control/pipes_follow.c);
 *   - the plan as text in registry table "pipe.<name>", which the workers
 *     follow (control/pipes.h, "following the controller").
 *
 * Demand is what workers measured per model between heartbeats: the
 * controller sees rates, not arrival times, so InferLine's tuner gets
 * arrivals evenly spaced at the last tick's rate (no burstiness inside
 * one tick; the planner's sample trace keeps the configured CV).
 *
 * A stored pipeline that shares a model with one planned is not planned
 * (listed with why) until that one goes: each plan counts every instance
 * of its models as its own.
 *
 * Threads: vr__ctl_pipes_step on the tick thread; the JSON and the model
 * list from others (pp_mu).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "cli/ctl_int.h"
#include "control/pipes.h"
#include "control/store.h"
#include "policy/cluster_plan.h"
#include "policy/il_tick.h"
#include "policy/pipe_policy.h"
#include "sim/il_sim.h"

/* every pipeline a server registers (VR_PIPES_MAX): past 16 the rest were
 * never planned, without a word */
#define CP_MAX VR_PIPES_MAX
#define CP_INST 512
#define CP_ARR 4096
#define CP_MODELS (VR_PIPE_MAX_TASKS * 2)
#define CP_PENDING_ID (1LL << 40)

typedef struct cpipe {
  char name[VR_PIPE_NAME_MAX];
  char *body; /* the stored spec it was built from */
  vr_pipeline *view;
  vr_profile *prof; /* per slot */
  int *slot_var;    /* per slot: index into models */
  int nslots, threads;
  char models[CP_MODELS][VR_STORE_NAME_MAX];
  int nmodels;
  vr_pipe_plan plan;
  int have_plan;
  void *ctx;
  double ctx_retry_s, ewma, last_qps, planned_for, next_s, last_s;
  double task_ewma[VR_PIPE_MAX_TASKS];
  /* What vr__ctl_pipes_json shows: written under pp_mu (the tick thread
   * writes, the HTTP thread reads). */
  int replans, solve_fail, capacity, ninst, nworkers_used;
  char last_err[200];
  char *published;
  int64_t pub_ver;
  double pub_s;
  uint64_t loads, unloads, batch_by_workers, adds, no_room;
} cpipe;

/* A stored pipeline not planned because a planned one holds one of its
 * models (the last read of the store's documents). */
typedef struct cpipe_out {
  char name[VR_PIPE_NAME_MAX];
  char why[320];
} cpipe_out;

struct ctl_pipes {
  vr_store *store;
  const vr_pipe_policy_def *def;
  vr_il_live_opts il;
  vr_il_pipe_arg il_arg;
  cpipe *p[CP_MAX];
  int n;
  cpipe_out out[CP_MAX], out_prev[CP_MAX]; /* (out: under pp_mu) */
  int nout, nout_prev;
  double docs_s;
};

static double now_s(void) { return (double)vr_now_ns() / 1e9; }

/* One more of a counter vr__ctl_pipes_json shows (under pp_mu). */
static void bump(ctl *c, uint64_t *n) {
  pthread_mutex_lock(&c->pp_mu);
  (*n)++;
  pthread_mutex_unlock(&c->pp_mu);
}

/* A failed solve, and why: shown by vr__ctl_pipes_json (under pp_mu). */
static void solve_failed(ctl *c, cpipe *p, const char *msg) {
  pthread_mutex_lock(&c->pp_mu);
  p->solve_fail++;
  snprintf(p->last_err, sizeof p->last_err, "%.199s", msg);
  pthread_mutex_unlock(&c->pp_mu);
}

static void cpipe_free(const ctl_pipes *cp, cpipe *p) {
  if (!p) return;
  if (p->ctx && cp->def->ctx_free) cp->def->ctx_free(p->ctx);
  vr_pipeline_free(p->view);
  vr_free(p->prof);
  vr_free(p->slot_var);
  vr_pipe_plan_free(&p->plan);
  vr_free(p->published);
  vr_free(p->body);
  vr_free(p);
}

/* ---- the planning view --------------------------------------------------------- */

static int dominated(const vr_variant_rec *const *v, size_t n, const vr_variant_rec *x) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(v[i]->model, x->model) && v[i]->precision == x->precision &&
        v[i]->threads == x->threads && v[i]->max_batch > x->max_batch)
      return 1;
  return 0;
}

static int slot_profile(vr_store *st, const char *variant, vr_profile *pr, vr_errbuf *err) {
  const vr_variant_rec *v = vr_store_variant(st, variant);
  json_error_t je;
  json_t *j = v && v->profile_json ? json_loads(v->profile_json, 0, &je) : NULL;
  int rc = j ? vr_profile_from_json(j, pr, err)
             : vr_errf(err, VR_ENOENT, "variant '%s' has no stored profile", variant);
  json_decref(j);
  return rc;
}

/* The view's candidates of app `app` at `threads` per instance (the
 * largest max batch of equal ones, in accuracy order, the first
 * VR_PIPE_MAX_VARIANTS) into v_out; returns how many. Under the store's
 * read lock: the records are the store's. */
static int view_candidates(vr_store *st, const char *app, int threads,
                           const vr_variant_rec **v_out) {
  size_t n;
  const vr_variant_rec *const *v = vr_store_app_variants(st, app, VR_ORDER_ACCURACY, &n);
  int k = 0;
  for (size_t i = 0; i < n && k < VR_PIPE_MAX_VARIANTS; i++)
    if (v[i]->threads == threads && !dominated(v, n, v[i])) v_out[k++] = v[i];
  return k;
}

/* Each task's variants of its app at the fewest threads among them (one
 * instance = `threads` cores), the largest max batch of equal ones: the
 * view a worker builds (control/pipes_policy.c), so slots match by name.
 * Under the store's read lock. */
static int build_view(vr_store *st, const vr_pipeline *spec, cpipe *p, vr_errbuf *err) {
  int threads = 0;
  for (int t = 0; t < spec->ntasks; t++) {
    size_t n;
    const vr_variant_rec *const *v = vr_store_app_variants(st, spec->tasks[t].app, VR_ORDER_ACCURACY, &n);
    if (!n) return vr_errf(err, VR_ENOENT, "task '%s': app '%s' has no registered model",
                           spec->tasks[t].name, spec->tasks[t].app);
    for (size_t i = 0; i < n; i++)
      if (!threads || v[i]->threads < threads) threads = v[i]->threads;
  }
  p->threads = threads > 0 ? threads : 1;
  if (!(p->view = vr_pipeline_dup(spec))) return vr_errf(err, VR_ENOMEM, "out of memory");
  int rc = 0;
  for (int t = 0; t < spec->ntasks && !rc; t++) {
    const vr_variant_rec *v[VR_PIPE_MAX_VARIANTS];
    const char *names[VR_PIPE_MAX_VARIANTS];
    double acc[VR_PIPE_MAX_VARIANTS];
    int k = view_candidates(st, spec->tasks[t].app, p->threads, v);
    for (int i = 0; i < k; i++) names[i] = v[i]->name, acc[i] = v[i]->accuracy;
    rc = vr_pipe_task_set_variants(p->view, t, names, acc, k, err);
  }
  if (!rc) rc = vr_pipe_plan_init(&p->plan, p->view);
  if (rc) return rc;
  p->nslots = p->plan.off[p->view->ntasks];
  p->prof = vr_calloc((size_t)p->nslots, sizeof *p->prof);
  p->slot_var = vr_calloc((size_t)p->nslots, sizeof *p->slot_var);
  if (!p->prof || !p->slot_var) return vr_errf(err, VR_ENOMEM, "out of memory");
  for (int t = 0; t < p->view->ntasks && !rc; t++)
    for (int k = 0; k < p->view->tasks[t].nvariants && !rc; k++) {
      int s = p->plan.off[t] + k;
      rc = slot_profile(st, p->view->tasks[t].variants[k].name, &p->prof[s], err);
      if (rc) break;
      int m = 0;
      while (m < p->nmodels && strcmp(p->models[m], p->prof[s].model)) m++;
      if (m == p->nmodels) {
        if (m == CP_MODELS) return vr_errf(err, VR_ELIMIT, "more than %d models", CP_MODELS);
        snprintf(p->models[p->nmodels++], VR_STORE_NAME_MAX, "%s", p->prof[s].model);
      }
      p->slot_var[s] = m;
    }
  return rc;
}

/* Whether the view build_view would make now differs from p's: a variant
 * of it unregistered (the old view kept planning the gone model), or one
 * registered into a task's app that the view would take (a new candidate:
 * a worker's view takes it too, vr_pipes_refresh). `what` says which.
 * Under the store's read lock. */
static void view_changed(vr_store *st, const cpipe *p, char *what, size_t cap) {
  const vr_pipeline *view = p->view;
  for (int k = 0; k < view->ntasks; k++) {
    for (int v = 0; v < view->tasks[k].nvariants; v++)
      if (!vr_store_variant(st, view->tasks[k].variants[v].name)) {
        snprintf(what, cap, "variant %s of its view was unregistered",
                 view->tasks[k].variants[v].name);
        return;
      }
    /* one at fewer threads changes every task's view */
    size_t n;
    const vr_variant_rec *const *all =
        vr_store_app_variants(st, view->tasks[k].app, VR_ORDER_ACCURACY, &n);
    for (size_t i = 0; i < n; i++)
      if (all[i]->threads < p->threads) {
        snprintf(what, cap, "variant %s was registered into app %s", all[i]->name,
                 view->tasks[k].app);
        return;
      }
    const vr_variant_rec *v[VR_PIPE_MAX_VARIANTS];
    int c = view_candidates(st, view->tasks[k].app, p->threads, v);
    for (int i = 0; i < c; i++)
      if (vr_pipe_task_variant(&view->tasks[k], v[i]->name) < 0) {
        snprintf(what, cap, "variant %s was registered into app %s", v[i]->name,
                 view->tasks[k].app);
        return;
      }
  }
}

typedef struct doc_ctx {
  ctl *c;
  ctl_pipes *cp;
  unsigned char seen[CP_MAX]; /* cp->p[i] is still stored */
} doc_ctx;

/* Whether a planned pipeline other than `name` holds a model of p's view
 * (-1: none; else its index, and the model in *model). Each plan counts
 * every instance of its models as its own (snap_instances), so two plans
 * of one model unloaded each other's instances. */
static int held_elsewhere(const ctl_pipes *cp, const cpipe *p, const char *name,
                          const char **model) {
  for (int j = 0; j < cp->n; j++) {
    if (!strcmp(cp->p[j]->name, name)) continue; /* its own older spec */
    for (int m = 0; m < p->nmodels; m++)
      for (int k = 0; k < cp->p[j]->nmodels; k++)
        if (!strcmp(p->models[m], cp->p[j]->models[k])) {
          *model = p->models[m];
          return j;
        }
  }
  return -1;
}

/* p, not planned: listed with why (an event the first time). */
static void not_planned(doc_ctx *d, const char *name, const char *why) {
  ctl_pipes *cp = d->cp;
  int before = 0;
  for (int i = 0; i < cp->nout_prev && !before; i++)
    before = !strcmp(cp->out_prev[i].name, name) && !strcmp(cp->out_prev[i].why, why);
  pthread_mutex_lock(&d->c->pp_mu);
  if (cp->nout < CP_MAX) {
    snprintf(cp->out[cp->nout].name, sizeof cp->out[0].name, "%s", name);
    snprintf(cp->out[cp->nout++].why, sizeof cp->out[0].why, "%s", why);
  }
  pthread_mutex_unlock(&d->c->pp_mu);
  if (before) return;
  pthread_mutex_lock(&d->c->mu);
  vr__ctl_event(d->c, "pipeline %s not planned: %s", name, why);
  pthread_mutex_unlock(&d->c->mu);
}

/* A stored pipeline: served from now on if new (its view built). */
static int on_doc(void *u, const char *name, const char *body) {
  doc_ctx *d = u;
  ctl_pipes *cp = d->cp;
  for (int i = 0; i < cp->n; i++)
    if (!strcmp(cp->p[i]->name, name)) {
      /* the same spec: planned on; another one under the name (deleted
       * and registered again between two reads): the old one is dropped
       * below as unseen, and this one planned afresh */
      if (cp->p[i]->body && !strcmp(cp->p[i]->body, body)) {
        d->seen[i] = 1;
        return 0;
      }
      pthread_mutex_lock(&d->c->mu);
      vr__ctl_event(d->c, "pipeline %s changed in the store: planned afresh", name);
      pthread_mutex_unlock(&d->c->mu);
      break;
    }
  if (cp->n == CP_MAX) return 0;
  vr_pipeline *spec = NULL;
  vr_errbuf err = {0};
  cpipe *p = VR_NEW(cpipe);
  int rc = p && (p->body = vr_strdup(body)) ? vr_pipeline_parse(body, strlen(body), &spec, &err)
                                             : VR_ENOMEM;
  if (!rc) rc = build_view(cp->store, spec, p, &err);
  vr_pipeline_free(spec);
  if (rc) {
    cpipe_free(cp, p);
    vr_warn("controller: pipeline '%s' not planned yet: %s", name, err.msg);
    return 0;
  }
  const char *model = NULL;
  int j = held_elsewhere(cp, p, name, &model);
  if (j >= 0) {
    char why[320];
    snprintf(why, sizeof why, "model '%.100s' is planned for pipeline '%.100s' (a plan holds "
             "every instance of its models: register them under another app for this one)",
             model, cp->p[j]->name);
    cpipe_free(cp, p);
    not_planned(d, name, why);
    return 0;
  }
  snprintf(p->name, sizeof p->name, "%s", name);
  p->last_s = now_s();
  pthread_mutex_lock(&d->c->pp_mu);
  d->seen[cp->n] = 1;
  cp->p[cp->n++] = p;
  pthread_mutex_unlock(&d->c->pp_mu);
  pthread_mutex_lock(&d->c->mu);
  vr__ctl_event(d->c, "pipeline %s: %s plans it over %d slot(s), %d model(s)", name,
                cp->def->name, p->nslots, p->nmodels);
  pthread_mutex_unlock(&d->c->mu);
  return 0;
}

/* ---- one tick ---------------------------------------------------------------- */

typedef struct cview {
  const vr_worker_info *ws;
  size_t n;
  int free_cores[MAXW]; /* after what runs and is loading there */
  vr_pipe_snap_inst inst[CP_INST];
  int inst_w[CP_INST];
  int ninst;
  int added; /* workers asked of the provider this tick */
  int starting;
} cview;

static int holds(ctl *c, const cview *v, int k, const char *model) {
  for (size_t i = 0; i < c->nvinst[k]; i++)
    if (!strcmp(c->vinst[k][i].variant, model)) return 1;
  return vr__ctl_pending_for(c, model, v->ws[k].id, vr_now_ns());
}

/* Loads model m of p on the best worker: free cores for it, not holding
 * it, fewest of this pipeline's instances (spread), most free cores. */
static void place(ctl *c, cpipe *p, cview *v, int m, const char *why) {
  unsigned char held[MAXW];
  int mine[MAXW];
  pthread_mutex_lock(&c->mu);
  for (size_t k = 0; k < v->n; k++) {
    held[k] = (unsigned char)holds(c, v, (int)k, p->models[m]);
    mine[k] = 0;
    for (int i = 0; i < v->ninst; i++) mine[k] += v->inst_w[i] == (int)k;
  }
  int best = vr_cluster_pick_worker((int)v->n, v->free_cores, held, mine, p->threads);
  if (best >= 0) {
    vr__ctl_event(c, "pipeline %s: load %s on %s (%s)", p->name, p->models[m],
                  v->ws[best].id, why);
    vr__ctl_start_load(c, p->models[m], &v->ws[best], vr_now_ns());
    v->free_cores[best] -= p->threads;
    if (v->ninst < CP_INST) v->inst_w[v->ninst++] = best; /* counted for the spread */
    bump(c, &p->loads);
  }
  pthread_mutex_unlock(&c->mu);
  if (best >= 0) return;
  int can_grow = c->prov && !v->added && !v->starting &&
                 (!c->max_workers || (int)v->n < c->max_workers);
  if (can_grow) {
    char w[256]; /* room for the longest names: the reason is logged whole */
    snprintf(w, sizeof w, "pipeline %s: no worker has room for %s", p->name, p->models[m]);
    if (!vr__ctl_start_worker(c, w)) v->added = 1, bump(c, &p->adds);
  } else {
    bump(c, &p->no_room);
  }
}

/* The instances of p's models on the live workers, sorted by id; loads
 * in flight as instances too (ids past CP_PENDING_ID), so none is asked
 * twice. */
static void snap_instances(ctl *c, cpipe *p, cview *v) {
  v->ninst = 0;
  for (size_t k = 0; k < v->n; k++)
    for (size_t i = 0; i < c->nvinst[k] && v->ninst < CP_INST; i++) {
      const vr_instance_info *x = &c->vinst[k][i];
      for (int m = 0; m < p->nmodels; m++)
        if (!strcmp(x->variant, p->models[m])) {
          int j = v->ninst++;
          v->inst_w[j] = (int)k;
          v->inst[j] = (vr_pipe_snap_inst){(int64_t)k * 4096 + (int64_t)i + 1, m,
                                           x->max_batch > 0 ? x->max_batch : 1};
        }
    }
  pthread_mutex_lock(&c->mu);
  int64_t now = vr_now_ns();
  for (int m = 0; m < p->nmodels; m++)
    for (size_t k = 0; k < v->n && v->ninst < CP_INST; k++) {
      int listed = 0;
      for (size_t i = 0; i < c->nvinst[k]; i++) listed |= !strcmp(c->vinst[k][i].variant, p->models[m]);
      if (listed || !vr__ctl_pending_for(c, p->models[m], v->ws[k].id, now)) continue;
      int j = v->ninst++;
      v->inst_w[j] = (int)k;
      v->inst[j] = (vr_pipe_snap_inst){CP_PENDING_ID + (int64_t)m * MAXW + (int64_t)k, m, 1};
    }
  pthread_mutex_unlock(&c->mu);
}

/* Rows per second the workers measured at the models of task t. */
static double task_rate(ctl *c, const cview *v, const cpipe *p, int t) {
  double r = 0;
  for (size_t k = 0; k < v->n; k++)
    for (size_t i = 0; i < c->nvinst[k]; i++)
      for (int s = p->plan.off[t]; s < p->plan.off[t + 1]; s++)
        if (!strcmp(c->vinst[k][i].variant, p->models[p->slot_var[s]])) {
          r += c->vinst[k][i].arrival_qps;
          break;
        }
  return r;
}

static void apply(ctl *c, cpipe *p, cview *v, const vr_actions *acts) {
  for (size_t i = 0; i < acts->len; i++) {
    const vr_action *a = vr_actions_at(acts, i);
    if (a->kind == VR_ACT_LOAD || a->kind == VR_ACT_MIGRATE) {
      place(c, p, v, a->variant, a->kind == VR_ACT_LOAD ? "plan: more instances"
                                                        : "plan: replaces a surplus one");
    } else if (a->kind == VR_ACT_UNLOAD && a->instance < CP_PENDING_ID) {
      int k = (int)((a->instance - 1) / 4096), idx = (int)((a->instance - 1) % 4096);
      if (k < 0 || (size_t)k >= v->n || (size_t)idx >= c->nvinst[k]) continue;
      char who[96];
      snprintf(who, sizeof who, "pipeline %s", p->name);
      if (!vr__ctl_unload_routed(c, c->vinst[k][idx].variant, v->ws[k].id, who,
                                 "not in the plan"))
        bump(c, &p->unloads);
    } else if (a->kind == VR_ACT_SET_BATCH) { /* the workers follow the plan's batch */
      bump(c, &p->batch_by_workers);
    }
  }
}

/* The plan for the workers (registry table "pipe.<name>"): when it
 * changed, and every 10 s (a Redis that lost it). */
static void publish(ctl *c, cpipe *p, double t) {
  char *text = vr_pipe_plan_text(p->view, &p->plan, round(p->ewma * 10) / 10,
                                 c->pp->def->drop_mode);
  if (!text) return;
  if (p->published && !strcmp(text, p->published) && t - p->pub_s < 10) {
    vr_free(text);
    return;
  }
  char table[VR_REG_ID_MAX];
  vr_pipe_plan_table(p->name, table);
  int64_t ver = 0;
  vr_errbuf err = {0};
  if (vr_registry_put_routes(c->reg, table, text, -1, &ver, &err)) {
    vr_warn("controller: publishing %s: %s", table, err.msg);
    vr_free(text);
    return;
  }
  pthread_mutex_lock(&c->pp_mu);
  vr_free(p->published);
  p->published = text;
  p->pub_ver = ver;
  p->pub_s = t;
  pthread_mutex_unlock(&c->pp_mu);
}

static void pipe_tick(ctl *c, cpipe *p, cview *v, double t) {
  ctl_pipes *cp = c->pp;
  double dt = t - p->last_s;
  if (dt < 0.9) return; /* one pipeline tick a second, as `vario serve` */
  p->last_s = t;
  snap_instances(c, p, v);
  double qps = task_rate(c, v, p, 0);
  pthread_mutex_lock(&c->pp_mu);
  p->last_qps = qps;
  p->ewma = p->replans || p->have_plan ? 0.5 * p->ewma + 0.5 * qps : qps;
  pthread_mutex_unlock(&c->pp_mu);
  vr_pipe_snap s = {.now_s = t, .p = p->view, .prof = p->prof, .slot_var = p->slot_var,
                    .inst = v->inst, .ninst = v->ninst, .demand_ewma = p->ewma,
                    .demand_last = qps, .slack = c->pipe_slack > 0 ? c->pipe_slack : 1.25,
                    .cur = p->have_plan ? &p->plan : NULL};
  for (int k = 0; k < p->view->ntasks; k++) {
    double r = task_rate(c, v, p, k);
    p->task_ewma[k] = p->have_plan ? 0.5 * p->task_ewma[k] + 0.5 * r : r;
    s.task_qps[k] = p->task_ewma[k];
  }
  /* what the cluster may hold: its workers' cores, and the provider's */
  int cap = 0;
  for (size_t k = 0; k < v->n; k++) cap += v->ws[k].cores / p->threads;
  if (c->prov && c->max_workers > (int)v->n)
    cap += (c->max_workers - (int)v->n) * (c->worker_cores / p->threads);
  pthread_mutex_lock(&c->pp_mu);
  s.workers = p->capacity = cap;
  pthread_mutex_unlock(&c->pp_mu);
  /* a tuner's arrivals: evenly spaced at the last tick's rate */
  static int64_t arr[CP_ARR];
  int na = (int)fmin(CP_ARR, round(qps * dt));
  int64_t t1 = vr_now_ns();
  for (int i = 0; i < na; i++) arr[i] = t1 - (int64_t)((dt * 1e9) * (na - i) / na);
  s.arrivals = arr;
  s.narrivals = na;
  vr_errbuf err = {0};
  if (cp->def->ctx_new && !p->ctx && t >= p->ctx_retry_s && cap > 0) {
    if (cp->def->ctx_new(&s, &cp->il_arg, &p->ctx, &err)) {
      p->ctx = NULL;
      p->ctx_retry_s = t + (c->pipe_period_ms > 0 ? c->pipe_period_ms / 1e3 : 10);
      solve_failed(c, p, err.msg);
      vr_warn("controller: pipeline '%s': %s: %s", p->name, cp->def->name, err.msg);
    }
  }
  double period = c->pipe_period_ms > 0 ? c->pipe_period_ms / 1e3 : 10;
  if ((!cp->def->ctx_new || p->ctx) && cap > 0 &&
      (cp->def->every_tick ||
       vr_pipe_replan_due(!p->have_plan, t, p->next_s, p->ewma, p->planned_for, 0.3))) {
    vr_pipe_plan next = {0};
    vr_pipe_plan_init(&next, p->view);
    if (cp->def->plan(p->ctx, &s, &next, &err)) {
      solve_failed(c, p, err.msg);
      vr_pipe_plan_free(&next);
    } else {
      if (!p->have_plan || next.workers != p->plan.workers) {
        pthread_mutex_lock(&c->mu);
        vr__ctl_event(c, "pipeline %s: %s plan for %.1f req/s: %d instance(s), accuracy "
                      "%.2f%%%s", p->name, cp->def->name, p->ewma, next.workers, next.accuracy,
                      next.accuracy_scaled ? ", accuracy scaled" : "");
        pthread_mutex_unlock(&c->mu);
      }
      pthread_mutex_lock(&c->pp_mu);
      vr_pipe_plan_free(&p->plan);
      p->plan = next; /* moved */
      p->have_plan = 1;
      p->replans++;
      pthread_mutex_unlock(&c->pp_mu);
      p->planned_for = p->ewma;
      p->next_s = t + period;
    }
  }
  if (!p->have_plan) return;
  vr_actions acts;
  vr_actions_init(&acts);
  if (!vr_pipe_plan_actions(&s, &p->plan, NULL, &acts)) apply(c, p, v, &acts);
  vr_actions_free(&acts);
  int used = 0;
  for (size_t k = 0; k < v->n; k++) {
    int on = 0;
    for (int i = 0; i < v->ninst; i++) on |= v->inst_w[i] == (int)k;
    used += on;
  }
  pthread_mutex_lock(&c->pp_mu);
  p->ninst = v->ninst;
  p->nworkers_used = used;
  pthread_mutex_unlock(&c->pp_mu);
  publish(c, p, t);
}

void vr__ctl_pipes_step(ctl *c, const vr_worker_info *ws, size_t n, int starting) {
  ctl_pipes *cp = c->pp;
  if (!cp) return;
  double t = now_s();
  vr_errbuf err = {0};
  if (t - cp->docs_s >= 2) { /* pipelines and models registered meanwhile */
    cp->docs_s = t;
    int changed = 0;
    if (vr_store_refresh(cp->store, &changed, &err))
      vr_warn("controller: store: %s", err.msg);
    /* A pipeline whose view is not the one build_view makes now (a model
     * unregistered or registered into one of its apps) is planned afresh,
     * its view built again below as for a new one. */
    for (int i = cp->n - 1; changed && i >= 0; i--) {
      cpipe *p = cp->p[i];
      char what[512] = "";
      vr_store_rdlock(cp->store);
      view_changed(cp->store, p, what, sizeof what);
      vr_store_unlock(cp->store);
      if (!what[0]) continue;
      pthread_mutex_lock(&c->mu);
      vr__ctl_event(c, "pipeline %s: %s: planned afresh", p->name, what);
      pthread_mutex_unlock(&c->mu);
      pthread_mutex_lock(&c->pp_mu);
      cp->p[i] = cp->p[--cp->n];
      pthread_mutex_unlock(&c->pp_mu);
      cpipe_free(cp, p);
    }
    doc_ctx d = {c, cp, {0}}; /* on_doc runs under the store's read lock */
    memcpy(cp->out_prev, cp->out, sizeof cp->out); /* (this thread writes out) */
    cp->nout_prev = cp->nout;
    pthread_mutex_lock(&c->pp_mu);
    cp->nout = 0;
    pthread_mutex_unlock(&c->pp_mu);
    if (vr_store_load_docs(cp->store, "pipeline", on_doc, &d, &err)) {
      vr_warn("controller: pipelines: %s", err.msg);
    } else { /* deleted: no longer planned (their models stay where they are) */
      for (int i = cp->n - 1; i >= 0; i--) {
        if (d.seen[i]) continue;
        pthread_mutex_lock(&c->mu);
        vr__ctl_event(c, "pipeline %s deleted from the store: no longer planned",
                      cp->p[i]->name);
        pthread_mutex_unlock(&c->mu);
        pthread_mutex_lock(&c->pp_mu);
        cpipe *gone = cp->p[i];
        cp->p[i] = cp->p[--cp->n];
        pthread_mutex_unlock(&c->pp_mu);
        cpipe_free(cp, gone);
      }
    }
  }
  static cview v;
  memset(&v, 0, sizeof v);
  v.ws = ws;
  v.n = n < MAXW ? n : MAXW;
  v.starting = starting;
  for (size_t k = 0; k < v.n; k++) {
    int used = 0;
    for (size_t i = 0; i < c->nvinst[k]; i++)
      used += c->vinst[k][i].cores > 0 ? c->vinst[k][i].cores : 1;
    v.free_cores[k] = ws[k].cores - used;
  }
  for (int i = 0; i < cp->n; i++) pipe_tick(c, cp->p[i], &v, t);
}

int vr__ctl_pipes_models(ctl *c, char models[][128], int have, int cap) {
  if (!c->pp) return have;
  pthread_mutex_lock(&c->pp_mu);
  for (int i = 0; i < c->pp->n; i++)
    for (int m = 0; m < c->pp->p[i]->nmodels && have < cap; m++) {
      int dup = 0;
      for (int k = 0; k < have; k++) dup |= !strcmp(models[k], c->pp->p[i]->models[m]);
      if (!dup) snprintf(models[have++], 128, "%.127s", c->pp->p[i]->models[m]);
    }
  pthread_mutex_unlock(&c->pp_mu);
  return have;
}

int vr__ctl_pipes_exclude(ctl *c, char models[][128], int n) {
  if (!c->pp) return n;
  pthread_mutex_lock(&c->pp_mu);
  int k = 0;
  for (int i = 0; i < n; i++) {
    int mine = 0;
    for (int j = 0; j < c->pp->n && !mine; j++)
      for (int m = 0; m < c->pp->p[j]->nmodels && !mine; m++)
        mine = !strcmp(models[i], c->pp->p[j]->models[m]);
    if (!mine && k != i) memcpy(models[k], models[i], 128);
    k += !mine;
  }
  pthread_mutex_unlock(&c->pp_mu);
  return k;
}

void vr__ctl_pipes_json(ctl *c, vr_sbuf *b) {
  if (!c->pp) return;
  pthread_mutex_lock(&c->pp_mu);
  vr_sbuf_puts(b, ",\"pipelines\":{\"policy\":");
  vr_sbuf_json_str(b, c->pp->def->name);
  vr_sbuf_puts(b, ",\"pipelines\":[");
  for (int i = 0; i < c->pp->n; i++) {
    const cpipe *p = c->pp->p[i];
    vr_sbuf_puts(b, i ? ",{\"name\":" : "{\"name\":");
    vr_sbuf_json_str(b, p->name);
    vr_sbuf_printf(b, ",\"state\":\"%s\",\"demand_qps\":%.3f,\"demand_ewma\":%.3f,\"capacity\":%d,"
                   "\"instances\":%d,\"workers_used\":%d,\"replans\":%d,\"solve_failures\":%d,"
                   "\"loads\":%llu,\"unloads\":%llu,\"set_batch_by_workers\":%llu,"
                   "\"workers_added\":%llu,\"no_room\":%llu,\"plan_version\":%lld",
                   p->have_plan ? "planned" : "no plan yet", p->last_qps, p->ewma, p->capacity,
                   p->ninst, p->nworkers_used, p->replans,
                   p->solve_fail, (unsigned long long)p->loads, (unsigned long long)p->unloads,
                   (unsigned long long)p->batch_by_workers, (unsigned long long)p->adds,
                   (unsigned long long)p->no_room, (long long)p->pub_ver);
    if (p->last_err[0]) {
      vr_sbuf_puts(b, ",\"last_error\":");
      vr_sbuf_json_str(b, p->last_err);
    }
    if (p->have_plan) {
      vr_sbuf_printf(b, ",\"plan\":{\"accuracy\":%.4f,\"instances\":%d,\"accuracy_scaled\":%s,"
                     "\"feasible\":%s,\"slots\":[", p->plan.accuracy, p->plan.workers,
                     p->plan.accuracy_scaled ? "true" : "false",
                     p->plan.feasible ? "true" : "false");
      int first = 1;
      for (int t = 0; t < p->view->ntasks; t++)
        for (int k = 0; k < p->view->tasks[t].nvariants; k++) {
          const vr_pipe_alloc *a = &p->plan.a[p->plan.off[t] + k];
          if (a->inst <= 0) continue;
          vr_sbuf_puts(b, first ? "{\"task\":" : ",{\"task\":");
          vr_sbuf_json_str(b, p->view->tasks[t].name);
          vr_sbuf_puts(b, ",\"variant\":");
          vr_sbuf_json_str(b, p->view->tasks[t].variants[k].name);
          vr_sbuf_puts(b, ",\"model\":");
          vr_sbuf_json_str(b, p->models[p->slot_var[p->plan.off[t] + k]]);
          vr_sbuf_printf(b, ",\"instances\":%d,\"batch\":%d}", a->inst, a->batch);
          first = 0;
        }
      vr_sbuf_puts(b, "]}");
    }
    vr_sbuf_puts(b, "}");
  }
  for (int i = 0; i < c->pp->nout; i++) {
    vr_sbuf_puts(b, c->pp->n || i ? ",{\"name\":" : "{\"name\":");
    vr_sbuf_json_str(b, c->pp->out[i].name);
    vr_sbuf_puts(b, ",\"state\":\"not planned\",\"reason\":");
    vr_sbuf_json_str(b, c->pp->out[i].why);
    vr_sbuf_puts(b, "}");
  }
  vr_sbuf_puts(b, "]}");
  pthread_mutex_unlock(&c->pp_mu);
}

int vr__ctl_pipes_open(ctl *c, vr_errbuf *err) {
  ctl_pipes *cp = VR_NEW(ctl_pipes);
  if (!cp) return vr_errf(err, VR_ENOMEM, "out of memory");
  cp->def = vr_pipe_policy_find(c->pipe_policy, err);
  int rc = cp->def ? 0 : VR_ENOENT;
  if (!rc && cp->def->ctx_new && !(c->il_rate > 0))
    rc = vr_errf(err, VR_EINVAL, "--pipeline-policy %s plans for a rate: give --inferline-rate "
                 "QPS (and --inferline-cv CV)", cp->def->name);
  if (!rc) rc = vr_store_open_path(c->store_url, &cp->store, err);
  if (rc) {
    vr_free(cp);
    return rc;
  }
  if (c->il_rate > 0) { /* InferLine's planner, run once per pipeline */
    cp->il.rate_qps = c->il_rate;
    cp->il.cv = c->il_cv;
    cp->il_arg.configure = vr_il_sim_configure;
    cp->il_arg.self = &cp->il;
  }
  pthread_mutex_init(&c->pp_mu, NULL);
  c->pp = cp;
  return 0;
}

void vr__ctl_pipes_close(ctl *c) {
  ctl_pipes *cp = c->pp;
  if (!cp) return;
  for (int i = 0; i < cp->n; i++) cpipe_free(cp, cp->p[i]);
  vr_store_close(cp->store);
  vr_free(cp);
  c->pp = NULL;
}
