/* The controller's policy driver (cluster_driver.h). */
#include "control/cluster_driver.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "policy/asyfunc.h"
#include "policy/driver.h"

#define MAXV 128   /* models */
#define MAXK 1024  /* (worker, model) pairs remembered */
#define MAXM 64    /* migrations and unloads in flight */
#define UNLOAD_WAIT_NS (30 * 1000000000LL)
#define MIGRATE_WAIT_NS (300 * 1000000000LL)
#define SHADOW_WAIT_NS (10 * 1000000000LL) /* a pair or release the worker has not shown */

/* A (worker, model) pair: its stable instance id, its recorded state. */
typedef struct pair {
  char worker[VR_REG_ID_MAX], model[128];
  int64_t id;
  int istate;      /* SET_ISTATE, -1 = none */
  int64_t seen_ns; /* the view's time when a tick last looked it up */
} pair;

typedef struct inflight {
  char model[128], from[VR_REG_ID_MAX], to[VR_REG_ID_MAX];
  int64_t until_ns;
  int used, cores;
} inflight;

typedef struct mvar {
  char name[128];
  int vstate;
  double load_ms;
} mvar;

struct vr_cdrv {
  vr_driver drv;
  vr_clock clock; /* virtual: set to the view's now each tick */
  vr_cdrv_ops ops;
  const vr_cdrv_view *v; /* during a tick */
  /* per tick: snapshot index -> names */
  const char *vname[MAXV];
  int vmodel[MAXV];          /* snapshot variant -> view model index */
  const char *wname[256];    /* snapshot worker -> id; NULL = starting */
  size_t nsw;
  /* remembered */
  mvar var[MAXV];
  int nvar;
  pair pairs[MAXK];
  int npairs;
  int64_t next_id;
  char idle_w[256][VR_REG_ID_MAX];
  int64_t idle_since[256];
  int nidle;
  inflight unloads[MAXM], migrations[MAXM];
  inflight pairing[MAXM], unpairing[MAXM]; /* AsyFunc: from = the body's worker */
  uint64_t kept_last, not_yet;
};

/* ---- remembered tables ------------------------------------------------------ */

static mvar *var_of(vr_cdrv *d, const char *model) {
  for (int i = 0; i < d->nvar; i++)
    if (!strcmp(d->var[i].name, model)) return &d->var[i];
  if (d->nvar == MAXV) return NULL;
  mvar *m = &d->var[d->nvar++];
  memset(m, 0, sizeof *m);
  snprintf(m->name, sizeof m->name, "%s", model);
  m->load_ms = 1000; /* until a load was timed */
  return m;
}

static pair *pair_of(vr_cdrv *d, const char *worker, const char *model) {
  int64_t now = d->v ? d->v->now_ns : 0;
  for (int i = 0; i < d->npairs; i++)
    if (!strcmp(d->pairs[i].worker, worker) && !strcmp(d->pairs[i].model, model)) {
      d->pairs[i].seen_ns = now;
      return &d->pairs[i];
    }
  /* Full: the pair looked up longest ago goes (a worker gone since, as a
   * provider's churn leaves behind); the live ones keep their ids and
   * their states. Ids stay unique: next_id only grows. */
  pair *p = &d->pairs[0];
  if (d->npairs < MAXK) p = &d->pairs[d->npairs++];
  else
    for (int i = 1; i < MAXK; i++)
      if (d->pairs[i].seen_ns < p->seen_ns) p = &d->pairs[i];
  snprintf(p->worker, sizeof p->worker, "%s", worker);
  snprintf(p->model, sizeof p->model, "%s", model);
  p->id = ++d->next_id;
  p->istate = -1;
  p->seen_ns = now;
  return p;
}

static const pair *pair_by_id(const vr_cdrv *d, int64_t id) {
  for (int i = 0; i < d->npairs; i++)
    if (d->pairs[i].id == id) return &d->pairs[i];
  return NULL;
}

static int64_t *idle_of(vr_cdrv *d, const char *worker) {
  for (int i = 0; i < d->nidle; i++)
    if (!strcmp(d->idle_w[i], worker)) return &d->idle_since[i];
  if (d->nidle == 256) d->nidle = 0;
  snprintf(d->idle_w[d->nidle], VR_REG_ID_MAX, "%s", worker);
  d->idle_since[d->nidle] = -1;
  return &d->idle_since[d->nidle++];
}

static inflight *find_inflight(inflight *t, const char *model, const char *from) {
  for (int i = 0; i < MAXM; i++)
    if (t[i].used && !strcmp(t[i].model, model) && !strcmp(t[i].from, from)) return &t[i];
  return NULL;
}

static void add_inflight(inflight *t, const char *model, const char *from, const char *to,
                         int64_t until) {
  inflight *s = find_inflight(t, model, from);
  for (int i = 0; i < MAXM && !s; i++)
    if (!t[i].used) s = &t[i];
  if (!s) return; /* full: forgotten, the policy asks again */
  *s = (inflight){.until_ns = until, .used = 1};
  snprintf(s->model, sizeof s->model, "%s", model);
  snprintf(s->from, sizeof s->from, "%s", from);
  snprintf(s->to, sizeof s->to, "%s", to ? to : "");
}

/* ---- reading the view -------------------------------------------------------- */

static const vr_instance_info *ready_on(const vr_cdrv_view *v, size_t w, const char *model) {
  for (size_t i = 0; i < v->ninst[w]; i++)
    if (!strcmp(v->inst[w][i].variant, model) && !strcmp(v->inst[w][i].state, "ready"))
      return &v->inst[w][i];
  return NULL;
}

static int worker_index(const vr_cdrv_view *v, const char *id) {
  for (size_t w = 0; w < v->nworkers; w++)
    if (!strcmp(v->workers[w].id, id)) return (int)w;
  return -1;
}

/* Copies of a model that serve and are not being unloaded. */
static int serving_copies(vr_cdrv *d, const char *model) {
  const vr_cdrv_view *v = d->v;
  int n = 0;
  for (size_t w = 0; w < v->nworkers; w++)
    n += ready_on(v, w, model) && !find_inflight(d->unloads, model, v->workers[w].id);
  return n;
}

/* The measured latency of a model: the first worker that reports it. */
static const vr_instance_info *measured(const vr_cdrv_view *v, const char *model) {
  for (size_t w = 0; w < v->nworkers; w++) {
    const vr_instance_info *x = ready_on(v, w, model);
    if (x && x->nlat > 0 && x->p50_ms[0] > 0) return x;
  }
  return NULL;
}

static void fill_profile(vr_cdrv *d, const vr_cdrv_model *m, const vr_instance_info *x,
                         vr_profile *p) {
  vr_profile_init(p);
  snprintf(p->model, sizeof p->model, "%.63s", m->name);
  snprintf(p->app, sizeof p->app, "%.63s", m->app[0] ? m->app : m->name);
  snprintf(p->variant, sizeof p->variant, "%.127s", m->name);
  snprintf(p->precision, sizeof p->precision, "%s", m->precision[0] ? m->precision : "fp32");
  p->threads = m->threads > 0 ? m->threads : 1;
  p->max_batch = m->max_batch > 0 && m->max_batch <= 64 ? m->max_batch : 1;
  mvar *mv = var_of(d, m->name);
  p->load_ms = mv ? mv->load_ms : 1000;
  p->accuracy = m->accuracy > 0 && m->accuracy <= 100 ? m->accuracy : 0;
  p->cost_per_s = p->threads * d->v->core_price_per_hour / 3600.0;
  for (int b = 0; b < x->nlat && b < VR_PROF_NB; b++) {
    double p50 = x->p50_ms[b], p99 = fmax(x->p99_ms[b], p50);
    p->lat.p50_ms[b] = p50;
    p->lat.p90_ms[b] = p50 + 0.8 * (p99 - p50); /* not published: between */
    p->lat.p99_ms[b] = p99;
  }
}

/* ---- the snapshot -------------------------------------------------------------- */

static int add_variants(vr_cdrv *d, vr_errbuf *err) {
  const vr_cdrv_view *v = d->v;
  int nv = 0;
  for (size_t m = 0; m < v->nmodels && nv < MAXV; m++) {
    const vr_instance_info *x = measured(v, v->models[m].name);
    if (!x) continue;
    vr_snap_variant sv = {0};
    fill_profile(d, &v->models[m], x, &sv.prof);
    sv.blocks = v->models[m].blocks;
    vr_errbuf e2 = {0};
    if (vr_profile_validate(&sv.prof, &e2)) continue; /* a worker's odd numbers */
    mvar *mv = var_of(d, v->models[m].name);
    sv.state = mv ? mv->vstate : VR_VS_INACTIVE;
    sv.slo_ms = v->slo_ms;
    for (size_t w = 0; w < v->nworkers; w++) {
      const vr_instance_info *r = ready_on(v, w, v->models[m].name);
      if (r) sv.arrival_qps += r->arrival_qps, sv.served_qps += r->served_qps;
    }
    if (vr_driver_add_variant(&d->drv, &sv) < 0) return vr_errf(err, VR_ENOMEM, "out of memory");
    d->vname[nv] = v->models[m].name;
    d->vmodel[nv++] = (int)m;
  }
  return 0;
}

static int add_instance(vr_cdrv *d, int var, size_t w, const vr_instance_info *r, int state,
                        vr_errbuf *err) {
  const vr_cdrv_view *v = d->v;
  pair *p = pair_of(d, v->workers[w].id, d->vname[var]);
  vr_snap_instance x = {.id = p->id, .variant = var, .worker = (int)w, .state = state};
  if (r) {
    if (state == VR_IS_ACTIVE && p->istate >= 0) x.state = p->istate;
    x.max_batch = r->max_batch > 0 ? r->max_batch : 1;
    x.queue_len = r->queue;
    x.arrival_qps = r->arrival_qps;
    x.served_qps = r->served_qps;
    x.slowdown = r->slowdown; /* the worker's measure (runtime/slowdown.h) */
    x.body = r->body;
    x.shadow_cores = r->shadow_cores;
    /* a pair asked for and not yet shown counts: no second one */
    const inflight *pf = find_inflight(d->pairing, p->model, p->worker);
    if (pf && x.shadow_cores < pf->cores) x.shadow_cores = pf->cores;
  } else {
    x.max_batch = v->models[d->vmodel[var]].max_batch;
  }
  if (vr_driver_add_instance(&d->drv, &x) < 0) return vr_errf(err, VR_ENOMEM, "out of memory");
  return 0;
}

static int add_workers(vr_cdrv *d, vr_errbuf *err) {
  const vr_cdrv_view *v = d->v;
  const vr_snapshot *s = &d->drv.snap;
  double price = v->core_price_per_hour / 3600.0;
  d->nsw = 0;
  for (size_t w = 0; w < v->nworkers && d->nsw < 200; w++) {
    int cores = v->workers[w].cores > 0 ? v->workers[w].cores : 1, used = 0, ninst = 0;
    for (size_t i = 0; i < s->ninstances; i++)
      if (s->instances[i].worker == (int)w) {
        used += s->variants[s->instances[i].variant].prof.threads + s->instances[i].shadow_cores;
        ninst++;
      }
    /* models it holds that the policy does not see count too */
    for (size_t i = 0; i < v->ninst[w]; i++) {
      int seen = 0;
      for (int k = 0; k < (int)s->nvariants && !seen; k++) seen = !strcmp(d->vname[k], v->inst[w][i].variant);
      if (!seen) used += v->inst[w][i].cores > 0 ? v->inst[w][i].cores : 1, ninst++;
    }
    int64_t *idle = idle_of(d, v->workers[w].id);
    if (ninst) *idle = -1;
    else if (*idle < 0) *idle = v->now_ns;
    vr_snap_worker x = {.id = (int64_t)w, .state = VR_WS_UP, .cores = cores,
                        .free_cores = cores - used, .price_per_s = cores * price,
                        .type = 0, .idle_since = *idle};
    if (vr_driver_add_worker(&d->drv, &x) < 0) return vr_errf(err, VR_ENOMEM, "out of memory");
    d->wname[d->nsw++] = v->workers[w].id;
  }
  /* workers being started: their room is on the way (no second add) */
  int wc = v->worker_cores > 0 ? v->worker_cores : 1;
  for (int k = 0; k < v->starting && d->nsw < 256; k++) {
    vr_snap_worker x = {.id = 100000 + k, .state = VR_WS_STARTING, .cores = wc,
                        .free_cores = wc, .price_per_s = wc * price, .type = 0,
                        .idle_since = -1};
    if (vr_driver_add_worker(&d->drv, &x) < 0) return vr_errf(err, VR_ENOMEM, "out of memory");
    d->wname[d->nsw++] = NULL;
  }
  if (v->growable) {
    vr_snap_wtype t = {.cores = wc, .price_per_s = wc * price, .max_count = v->max_workers,
                       .count = (int)(v->nworkers + (size_t)v->starting)};
    if (vr_driver_add_wtype(&d->drv, &t) < 0) return vr_errf(err, VR_ENOMEM, "out of memory");
  }
  return 0;
}

static int build(vr_cdrv *d, vr_errbuf *err) {
  const vr_cdrv_view *v = d->v;
  vr_driver_begin(&d->drv, v->now_ns);
  int rc = add_variants(d, err);
  int nv = (int)d->drv.snap.nvariants;
  /* Clipper+ and SM+ serve a fixed set of variants: here every model's
   * one variant (Clipper+ with fixed_instances each; SM+ scales them) */
  vr_policy_cfg *cfg = &d->drv.cfg;
  cfg->nfixed = 0;
  for (int k = 0; k < nv && k < VR_POL_MAX_FIXED; k++)
    cfg->fixed[cfg->nfixed++] =
        (vr_policy_fixed){k, v->fixed_instances > 0 ? v->fixed_instances : 1};
  for (size_t w = 0; !rc && w < v->nworkers && w < 200; w++)
    for (int k = 0; !rc && k < nv; k++) {
      const char *m = d->vname[k];
      const vr_instance_info *r = ready_on(v, w, m);
      if (r)
        rc = add_instance(d, k, w, r,
                          find_inflight(d->unloads, m, v->workers[w].id) ? VR_IS_DRAINING
                                                                         : VR_IS_ACTIVE,
                          err);
      else if (v->pending && v->pending(v->u, m, v->workers[w].id))
        rc = add_instance(d, k, w, NULL, VR_IS_LOADING, err);
    }
  return rc ? rc : add_workers(d, err);
}

/* ---- the cluster actuator table ------------------------------------------------ */

static const char *wname_of(vr_cdrv *d, int w) {
  return w >= 0 && (size_t)w < d->nsw ? d->wname[w] : NULL;
}

static int a_load(void *self, const vr_action *a) {
  vr_cdrv *d = self;
  if (a->variant < 0 || a->variant >= (int)d->drv.snap.nvariants) return 0;
  const char *w = wname_of(d, a->worker);
  if (!w) { /* unplaced, or a worker still starting: asked again next period */
    d->not_yet++;
    return 0;
  }
  d->ops.load(d->ops.u, d->vname[a->variant], w, a->why ? a->why : "policy");
  return 0;
}

static int unload_pair(vr_cdrv *d, const pair *p, const char *why) {
  if (serving_copies(d, p->model) <= 1) {
    d->kept_last++;
    return 0;
  }
  if (!d->ops.unload(d->ops.u, p->model, p->worker, why))
    add_inflight(d->unloads, p->model, p->worker, NULL, d->v->now_ns + UNLOAD_WAIT_NS);
  return 0;
}

static int a_unload(void *self, const vr_action *a) {
  vr_cdrv *d = self;
  const pair *p = pair_by_id(d, a->instance);
  if (p) unload_pair(d, p, a->why ? a->why : "policy");
  return 0;
}

static int a_migrate(void *self, const vr_action *a) {
  vr_cdrv *d = self;
  const pair *p = pair_by_id(d, a->instance);
  const char *to = wname_of(d, a->worker);
  if (!p || !to || a->variant < 0 || a->variant >= (int)d->drv.snap.nvariants) {
    d->not_yet++;
    return 0;
  }
  /* the old copy serves until the new one is ready (see finish_migrations) */
  if (!d->ops.load(d->ops.u, d->vname[a->variant], to, a->why ? a->why : "migrate"))
    add_inflight(d->migrations, p->model, p->worker, to, d->v->now_ns + MIGRATE_WAIT_NS);
  return 0;
}

static int a_add_worker(void *self, const vr_action *a) {
  vr_cdrv *d = self;
  d->ops.add_worker(d->ops.u, a->why ? a->why : "policy");
  return 0;
}

static int a_remove_worker(void *self, const vr_action *a) {
  vr_cdrv *d = self;
  const char *w = wname_of(d, a->worker);
  if (w) d->ops.remove_worker(d->ops.u, w, a->why ? a->why : "policy");
  return 0;
}

static int a_set_vstate(void *self, const vr_action *a) {
  vr_cdrv *d = self;
  if (a->variant < 0 || a->variant >= (int)d->drv.snap.nvariants) return 0;
  mvar *m = var_of(d, d->vname[a->variant]);
  if (m) m->vstate = a->value;
  return 0;
}

static int a_set_istate(void *self, const vr_action *a) {
  vr_cdrv *d = self;
  for (int i = 0; i < d->npairs; i++)
    if (d->pairs[i].id == a->instance) d->pairs[i].istate = a->value;
  return 0;
}

/* AsyFunc: the body's blocks and split table for a shadow of cs cores
 * (the range the body was loaded with, vr_cdrv_body_range). */
static int pair_split(vr_cdrv *d, int var, int max_batch, int cs, int *split) {
  const vr_cdrv_model *m = &d->v->models[d->vmodel[var]];
  int pb, pe;
  if (vr_cdrv_body_range(m, d->v->slo_ms, &pb, &pe)) return VR_ENOENT;
  uint32_t mask = 0;
  for (int i = 0; i < m->blocks->nblocks; i++)
    if (m->blocks->blk[i].node_begin >= pb && m->blocks->blk[i].node_end <= pe) mask |= 1u << i;
  vr_af_split_table(m->blocks, mask, m->threads > 0 ? m->threads : 1, cs, max_batch, split);
  return 0;
}

static int a_pair(void *self, const vr_action *a) {
  vr_cdrv *d = self;
  const pair *p = pair_by_id(d, a->instance);
  int w = p ? worker_index(d->v, p->worker) : -1;
  const vr_instance_info *r = w >= 0 ? ready_on(d->v, (size_t)w, p->model) : NULL;
  if (!r || !d->ops.pair || a->variant < 0 || a->variant >= (int)d->drv.snap.nvariants ||
      find_inflight(d->pairing, p->model, p->worker))
    return 0;
  int mb = r->max_batch > 0 && r->max_batch <= 1024 ? r->max_batch : 1;
  int cs = a->value > 0 ? a->value : 1;
  int *split = vr_calloc((size_t)mb + 1, sizeof(int));
  if (!split) return VR_ENOMEM;
  if (!pair_split(d, a->variant, mb, cs, split) &&
      !d->ops.pair(d->ops.u, p->model, p->worker, cs, split, mb + 1, a->why ? a->why : "policy")) {
    add_inflight(d->pairing, p->model, p->worker, NULL, d->v->now_ns + SHADOW_WAIT_NS);
    inflight *f = find_inflight(d->pairing, p->model, p->worker);
    if (f) f->cores = cs;
  }
  vr_free(split);
  return 0;
}

static int a_unpair(void *self, const vr_action *a) {
  vr_cdrv *d = self;
  const pair *p = pair_by_id(d, a->instance);
  if (!p || !d->ops.unpair || find_inflight(d->unpairing, p->model, p->worker)) return 0;
  if (!d->ops.unpair(d->ops.u, p->model, p->worker, a->why ? a->why : "policy"))
    add_inflight(d->unpairing, p->model, p->worker, NULL, d->v->now_ns + SHADOW_WAIT_NS);
  return 0;
}

static const vr_actuator cluster_actuator = {
    .load = a_load,
    .unload = a_unload,
    .migrate = a_migrate,
    .add_worker = a_add_worker,
    .remove_worker = a_remove_worker,
    .set_vstate = a_set_vstate,
    .set_istate = a_set_istate,
    .pair_shadow = a_pair,
    .unpair_shadow = a_unpair,
};

/* Migrations whose new copy is ready: unload the old one. Unloads the
 * worker no longer lists (or that took too long): forgotten. */
static void follow_up(vr_cdrv *d) {
  const vr_cdrv_view *v = d->v;
  for (int i = 0; i < MAXM; i++) {
    inflight *m = &d->migrations[i];
    if (!m->used) continue;
    int to = worker_index(v, m->to), from = worker_index(v, m->from);
    if (from < 0 || v->now_ns > m->until_ns) {
      m->used = 0;
    } else if (to >= 0 && ready_on(v, (size_t)to, m->model)) {
      m->used = 0;
      pair *p = pair_of(d, m->from, m->model);
      unload_pair(d, p, "migrated");
    }
  }
  for (int i = 0; i < MAXM; i++) {
    inflight *u = &d->unloads[i];
    if (!u->used) continue;
    int w = worker_index(v, u->from);
    if (w < 0 || !ready_on(v, (size_t)w, u->model) || v->now_ns > u->until_ns) u->used = 0;
  }
  /* AsyFunc: a pair is done once the worker shows the shadow, a release
   * once it shows none (or the body is gone, or it took too long) */
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < MAXM; i++) {
      inflight *f = k ? &d->unpairing[i] : &d->pairing[i];
      if (!f->used) continue;
      int w = worker_index(v, f->from);
      const vr_instance_info *r = w >= 0 ? ready_on(v, (size_t)w, f->model) : NULL;
      if (!r || v->now_ns > f->until_ns || (k ? r->shadow_cores == 0 : r->shadow_cores > 0))
        f->used = 0;
    }
}

/* ---- public ------------------------------------------------------------------ */

int vr_cdrv_new(const vr_policy_cfg *cfg, const vr_cdrv_ops *ops, vr_cdrv **out) {
  vr_cdrv *d = VR_NEW(vr_cdrv);
  if (!d) return VR_ENOMEM;
  vr_vclock_init(&d->clock, 0);
  d->ops = *ops;
  vr_actuator act = cluster_actuator;
  act.self = d;
  if (vr_driver_init(&d->drv, cfg, &act, &d->clock)) {
    vr_free(d);
    return VR_ENOMEM;
  }
  *out = d;
  return 0;
}

void vr_cdrv_free(vr_cdrv *d) {
  if (!d) return;
  vr_driver_free(&d->drv);
  vr_free(d);
}

int vr_cdrv_body_range(const vr_cdrv_model *m, double slo_ms, int *pb, int *pe) {
  if (!m->blocks) return VR_ENOENT;
  vr_af_scale_cfg sc;
  vr_af_scale_cfg_init(&sc, slo_ms > 0 ? slo_ms : vr_af_default_slo(m->blocks));
  /* as a live body (control/control_asyfunc.c): room for a shadow of
   * half the profiled cores */
  int cs = m->blocks->cmax / 2 > 0 ? m->blocks->cmax / 2 : 1;
  uint32_t mask;
  return vr_af_body_range(m->blocks, &sc, m->threads > 0 ? m->threads : 1, cs, pb, pe, &mask);
}

void vr_cdrv_load_time(vr_cdrv *d, const char *model, double ms) {
  mvar *m = var_of(d, model);
  if (m && ms > 0) m->load_ms = ms;
}

int vr_cdrv_tick(vr_cdrv *d, const vr_cdrv_view *v, vr_errbuf *err) {
  d->v = v;
  vr_vclock_set(&d->clock, v->now_ns);
  follow_up(d);
  int rc = build(d, err);
  int baseline = d->drv.cfg.kind == VR_POL_CLIPPER || d->drv.cfg.kind == VR_POL_SM;
  if (!rc && baseline && !d->drv.cfg.nfixed) { /* nothing measured yet */
    d->v = NULL;
    return 0;
  }
  if (!rc && (rc = vr_driver_decide(&d->drv)))
    vr_errf(err, rc, "policy %s: %s", vr_policy_name(d->drv.cfg.kind), vr_strerror(rc));
  if (!rc) rc = vr_driver_apply_all(&d->drv);
  d->v = NULL;
  return rc;
}

void vr_cdrv_get_stats(const vr_cdrv *d, vr_cdrv_stats *s) {
  memset(s, 0, sizeof *s);
  for (int k = 0; k < VR_ACT__COUNT; k++) {
    s->applied[k] = __atomic_load_n(&d->drv.applied[k], __ATOMIC_RELAXED);
    s->skipped[k] = __atomic_load_n(&d->drv.skipped[k], __ATOMIC_RELAXED);
  }
  s->kept_last = d->kept_last;
  s->not_yet = d->not_yet;
  s->nvariants = (int)d->drv.snap.nvariants;
  s->ninstances = (int)d->drv.snap.ninstances;
  s->nworkers = (int)d->drv.snap.nworkers;
}

const vr_policy_cfg *vr_cdrv_cfg(const vr_cdrv *d) {
  return &d->drv.cfg;
}
