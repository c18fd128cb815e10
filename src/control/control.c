/*
 * Live control loop: store + runtime monitoring -> vr_snapshot -> policy
 * -> actions -> runtime (see control.h).
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/cpus.h"
#include "base/clock.h"
#include "base/log.h"
#include "control/control_int.h"
#include "policy/place.h"
#include "control/history.h"

void vr_control_opts_init(vr_control_opts *o) {
  memset(o, 0, sizeof *o);
  o->autoscale = 1;
}

/* ---- variants from the store ------------------------------------------ */

static int has_calibration(const vr_model_rec *m) {
  vr_model_config cfg;
  vr_errbuf e = {0};
  return m && vr_model_config_load(m->dir, &cfg, &e) == 0 &&
         cfg.calibration_path[0];
}

static int load_variants(vr_control *c, vr_errbuf *err) {
  vr_store *s = c->o.store;
  vr_store_rdlock(s);
  size_t n = vr_store_num_variants(s), k = 0;
  ctl_var *var = VR_NEWN(ctl_var, n ? n : 1);
  int rc = var ? 0 : vr_errf(err, VR_ENOMEM, "out of memory");
  for (size_t a = 0; rc == 0 && a < vr_store_num_apps(s); a++) {
    size_t nv;
    const vr_variant_rec *const *v =
        vr_store_app_variants(s, vr_store_app_at(s, a), VR_ORDER_ACCURACY, &nv);
    for (size_t i = 0; rc == 0 && i < nv; i++) {
      const vr_model_rec *m = vr_store_model(s, v[i]->model);
      /* Models registered before registrations kept calibration.npy cannot
       * open int8 sessions: do not offer what would fail at load. */
      if (v[i]->precision == VR_PREC_INT8 && !has_calibration(m)) continue;
      json_error_t je;
      json_t *j = json_loads(v[i]->profile_json, 0, &je);
      rc = j ? vr_profile_from_json(j, &var[k].prof, err)
             : vr_errf(err, VR_EFORMAT, "profile of %s: %s", v[i]->name, je.text);
      json_decref(j);
      if (rc) break;
      /* The store's name is the key the runtime mapping uses. */
      snprintf(var[k].prof.variant, sizeof var[k].prof.variant, "%.127s", v[i]->name);
      snprintf(var[k].dir, sizeof var[k].dir, "%s", m ? m->dir : "");
      var[k].prec = v[i]->precision;
      k++;
    }
  }
  vr_store_unlock(s);
  if (rc) {
    vr_free(var);
    return rc;
  }
  /* Keep per-variant state of variants that survive a reload. */
  vr_map byname;
  vr_map_init(&byname);
  for (size_t i = 0; i < k; i++) {
    uintptr_t old = (uintptr_t)vr_map_get(&c->var_by_name, var[i].prof.variant);
    if (old) {
      ctl_var *o = &c->var[old - 1];
      var[i].state = o->state, var[i].slo_ms = o->slo_ms, var[i].loading = o->loading;
    }
    if (vr_map_put(&byname, var[i].prof.variant, (void *)(uintptr_t)(i + 1), NULL))
      rc = vr_errf(err, VR_ENOMEM, "out of memory");
  }
  if (rc) {
    vr_map_free(&byname);
    vr_free(var);
    return rc;
  }
  /* Instances and queued loads point at variant indices: remap them (a
   * load whose variant left the store fails by name when it runs). */
  for (size_t i = 0; i < c->insts.len; i++) {
    ctl_inst *in = vr_vec_at(&c->insts, i);
    uintptr_t nv = (uintptr_t)vr_map_get(&byname, c->var[in->var].prof.variant);
    in->var = nv ? (int)nv - 1 : -1;
  }
  ctl_load *lists[2] = {c->running, c->loads}; /* running's next is stale */
  for (int k = 0; k < 2; k++)
    for (ctl_load *l = lists[k]; l; l = k ? l->next : NULL) {
      uintptr_t nv = (uintptr_t)vr_map_get(&byname, l->name);
      l->var = nv ? (int)nv - 1 : -1;
    }
  vr_map_free(&c->var_by_name);
  c->var_by_name = byname;
  vr_free(c->var);
  c->var = var;
  c->nvar = k;
  return ctl_af_load(c, err);
}

int ctl_find_var(const vr_control *c, const char *model, vr_precision p,
                 int threads, int max_batch) {
  char name[VR_STORE_VNAME_MAX];
  vr_variant_name(name, model, p, threads, max_batch);
  uintptr_t i = (uintptr_t)vr_map_get(&c->var_by_name, name);
  return i ? (int)i - 1 : -1;
}

ctl_inst *ctl_inst_by_id(vr_control *c, int id) {
  for (size_t i = 0; i < c->insts.len; i++) {
    ctl_inst *in = vr_vec_at(&c->insts, i);
    if (in->id == id) return in;
  }
  return NULL;
}

/* ---- snapshot ------------------------------------------------------------ */

static int istate_of(vr_rt_state s, int override) {
  switch (s) {
    case VR_INST_LOADING: return VR_IS_LOADING;
    case VR_INST_OVERLOADED: return VR_IS_OVERLOADED;
    case VR_INST_DRAINING: return VR_IS_DRAINING;
    default: return override >= 0 ? override : VR_IS_ACTIVE;
  }
}

/* Syncs c->insts with the runtime's instances; returns cores used by
 * instances that are not ours (loaded by name through the KServe API). */
static int sync_instances(vr_control *c, vr_rt_instance_stats *st, int n,
                          int *foreign_cores) {
  *foreign_cores = 0;
  for (size_t i = 0; i < c->insts.len;) { /* drop vanished instances */
    ctl_inst *in = vr_vec_at(&c->insts, i);
    int alive = 0;
    for (int k = 0; k < n && !alive; k++) alive = st[k].id == in->id;
    if (!alive || in->var < 0) vr_vec_swap_remove(&c->insts, i);
    else i++;
  }
  for (int k = 0; k < n; k++) {
    int v = ctl_find_var(c, st[k].model, st[k].precision, st[k].threads, st[k].max_batch);
    if (v < 0) {
      *foreign_cores += st[k].threads;
      continue;
    }
    if (!ctl_inst_by_id(c, st[k].id)) {
      ctl_inst x = {.id = st[k].id, .var = v, .istate = -1};
      if (vr_vec_push(&c->insts, &x)) return VR_ENOMEM;
    }
  }
  return 0;
}

static void fill_instance(vr_control *c, ctl_inst *in, const vr_rt_instance_stats *st,
                          double dt, vr_snap_instance *x) {
  memset(x, 0, sizeof *x);
  x->id = in->id;
  x->variant = in->var;
  x->worker = 0;
  x->state = in->removing ? VR_IS_DRAINING : istate_of(st->state, in->istate);
  x->max_batch = st->batch_cap;
  x->queue_len = st->queue_rows;
  x->arrival_qps = in->arrivals / dt;
  x->served_qps = st->served_qps;
  x->obs_batch = in->batches ? (double)in->items / in->batches : 0;
  in->lp = st->profile;
  if (in->nratio) {
    double med = vr_snap_median(in->ratio, in->nratio);
    if (in->base_ratio <= 0 && in->nratio >= 20) in->base_ratio = med;
    x->slowdown = in->base_ratio > 0 ? med / in->base_ratio : 1.0;
  }
  vr_snap_latency(x, in->lat, in->nlat);
  x->body = st->body;
  x->shadow_cores = st->shadow_threads;
  in->cap = st->batch_cap;
  in->shadow_cores = st->shadow_threads > 0 ? st->shadow_threads : 0;
}

int ctl_refresh_locked(vr_control *c, int64_t now_ns, double dt) {
  vr_rt_instance_stats st[CTL_MAX_INST];
  int n = vr_rt_instances(c->o.rt, NULL, st, CTL_MAX_INST);
  if (n > CTL_MAX_INST) n = CTL_MAX_INST;
  int foreign = 0, rc = sync_instances(c, st, n, &foreign);
  if (rc) return rc;
  vr_driver *d = &c->drv;
  vr_driver_begin(d, now_ns);
  for (size_t v = 0; v < c->nvar; v++) {
    ctl_var *cv = &c->var[v];
    if (cv->period_slo > 0) cv->slo_ms = cv->period_slo;
    double slo = cv->slo_ms > 0 ? cv->slo_ms : c->o.default_slo_ms;
    vr_snap_variant x = {cv->prof, cv->state, slo, cv->arrivals / dt,
                         cv->served / dt, cv->period_acc, cv->blocks};
    if (vr_driver_add_variant(d, &x) < 0) return VR_ENOMEM;
  }
  int used = foreign + c->loading_cores;
  int64_t mem = c->loading_mem;
  for (size_t i = 0; i < c->insts.len; i++) {
    ctl_inst *in = vr_vec_at(&c->insts, i);
    for (int k = 0; k < n; k++)
      if (st[k].id == in->id) {
        vr_snap_instance x;
        fill_instance(c, in, &st[k], dt, &x);
        if (vr_driver_add_instance(d, &x) < 0) return VR_ENOMEM;
        used += st[k].threads + st[k].shadow_threads;
        mem += c->var[in->var].prof.mem_bytes;
      }
  }
  vr_snap_worker *w = &c->worker;
  w->id = 0;
  w->state = VR_WS_UP;
  w->cores = c->o.cores;
  w->free_cores = c->o.cores - used;
  w->mem_bytes = c->o.mem_bytes;
  w->free_mem = c->o.mem_bytes - mem;
  w->price_per_s = c->o.cores * c->o.core_price_per_hour / 3600.0;
  if (d->snap.ninstances) w->idle_since = -1;
  else if (w->idle_since < 0) w->idle_since = now_ns;
  if (vr_driver_add_worker(d, w) < 0) return VR_ENOMEM;
  return vr_driver_index(d);
}

int ctl_fits_locked(const vr_control *c, int v) {
  const vr_profile *p = &c->var[v].prof;
  return vr_place_holds(c->worker.free_cores, c->worker.free_gpus,
                        c->worker.free_mem, p);
}

/* ---- actions --------------------------------------------------------------- */

static int ensure_model(vr_control *c, const ctl_var *v, vr_errbuf *err) {
  vr_model_config cfg;
  if (vr_rt_model_config(c->o.rt, v->prof.model, &cfg) == 0) return 0;
  int rc = vr_model_config_load(v->dir, &cfg, err);
  if (rc) return rc;
  snprintf(cfg.name, sizeof cfg.name, "%s", v->prof.model);
  cfg.instances = 0; /* the control plane adds instances itself */
  rc = vr_rt_load(c->o.rt, &cfg, err);
  return rc == VR_EEXIST ? 0 : rc; /* a concurrent load won the race */
}

int ctl_load_variant_named(vr_control *c, const char *name, vr_errbuf *err) {
  pthread_mutex_lock(&c->mu);
  uintptr_t vi = (uintptr_t)vr_map_get(&c->var_by_name, name);
  if (!vi) {
    pthread_mutex_unlock(&c->mu);
    return vr_errf(err, VR_ENOENT, "variant %s is no longer registered", name);
  }
  ctl_var cv = c->var[vi - 1];
  vr_rt_instance_opts io = {cv.prec, cv.prof.threads, cv.prof.max_batch,
                            c->o.max_queue_delay_us};
  ctl_af_body_opts(c, &cv, &io); /* under mu: cv.blocks is c->af's, freed by a reload */
  cv.blocks = NULL;
  pthread_mutex_unlock(&c->mu);
  int rc = ensure_model(c, &cv, err);
  if (rc) return rc;
  int id = vr_rt_add_instance(c->o.rt, cv.prof.model, &io, err);
  if (id > 0) vr_info("control: loaded %s as instance %d", cv.prof.variant, id);
  return id;
}

static void unload(vr_control *c, int64_t id) {
  vr_errbuf err = {0};
  if (vr_rt_remove_instance(c->o.rt, (int)id, &err))
    vr_warn("control: unload %lld: %s", (long long)id, err.msg);
  else
    vr_info("control: unloaded instance %lld", (long long)id);
}

/* A load the worker has no room for is said, never skipped silently: in
 * the log, the control plane's events (the dashboard) and c->act_err
 * (vr_control_apply hands it on; a pipeline shows it). `freed`: cores an
 * instance it replaces gives up. Caller holds mu. Returns VR_EBUSY. */
static int refuse_load(vr_control *c, const vr_profile *p, int freed, const char *why) {
  if (!p)
    snprintf(c->act_err, sizeof c->act_err, "load refused: the variant is no longer served");
  else
    snprintf(c->act_err, sizeof c->act_err,
             "load of %s refused: it needs %d core(s) and %lld MiB, the worker has %d "
             "core(s) and %lld MiB free", p->variant, p->threads,
             (long long)(p->mem_bytes >> 20), c->worker.free_cores + freed,
             (long long)(c->worker.free_mem >> 20));
  vr_warn("control: %s (%s)", c->act_err, why ? why : "");
  if (c->hist)
    vr__hist_add_act(c->hist, (vr_clock_now(c->o.clock) - c->t0_ns) / 1e9, "load refused",
                     p ? p->variant : "", c->act_err);
  return VR_EBUSY;
}

/* Loads decided by the policy: re-checked against the worker first, since
 * query-path loads may have taken the room meanwhile. `replaces` (an
 * instance id, or -1) is an instance about to give up its room (an
 * upgrade in place): its cores, and its shadow's, count as free (memory
 * does not: both are resident while the new one loads), and it keeps
 * serving meanwhile.
 * 0 when loaded, else VR_E* with c->act_err saying why. */
static int apply_load(vr_control *c, const vr_action *a, int64_t replaces) {
  pthread_mutex_lock(&c->mu);
  int ok = a->variant >= 0 && (size_t)a->variant < c->nvar, freed = 0;
  const vr_profile *p = ok ? &c->var[a->variant].prof : NULL;
  if (ok) {
    ctl_inst *old = replaces > 0 ? ctl_inst_by_id(c, (int)replaces) : NULL;
    const vr_profile *q = old && !old->removing ? &c->var[old->var].prof : NULL;
    /* a body's shadow goes with it: its cores are freed too */
    freed = q ? q->threads + old->shadow_cores : 0;
    /* cores are shared for the overlap; memory must hold both */
    ok = c->worker.free_cores + freed >= p->threads && c->worker.free_mem >= p->mem_bytes;
  }
  if (!ok) {
    int rc = refuse_load(c, p, freed, a->why);
    pthread_mutex_unlock(&c->mu);
    return rc;
  }
  c->loading_cores += p->threads;
  c->loading_mem += p->mem_bytes;
  c->worker.free_cores -= p->threads;
  c->worker.free_mem -= p->mem_bytes;
  int threads = p->threads;
  int64_t mem = p->mem_bytes;
  char vname[VR_VARIANT_MAX];
  snprintf(vname, sizeof vname, "%s", p->variant);
  pthread_mutex_unlock(&c->mu);
  vr_errbuf err = {0};
  int id = ctl_load_variant_named(c, vname, &err);
  if (id < 0)
    vr_warn("control: load (%s): %s", a->why ? a->why : "", err.msg);
  pthread_mutex_lock(&c->mu);
  c->loading_cores -= threads;
  c->loading_mem -= mem;
  if (id < 0) snprintf(c->act_err, sizeof c->act_err, "load of %.100s failed: %.130s", vname, err.msg);
  pthread_mutex_unlock(&c->mu);
  return id > 0 ? 0 : id < 0 ? id : VR_EINTERNAL;
}

static void apply_unload(vr_control *c, int64_t id) {
  pthread_mutex_lock(&c->mu);
  ctl_inst *in = ctl_inst_by_id(c, (int)id);
  if (in) {
    in->removing = 1;
    /* Route around it now, not after it drains (tens of ms under load):
     * until the index is rebuilt, selection still names its variant and
     * finds no instance to take the query. */
    if (ctl_refresh_locked(c, c->last_tick_ns, 1.0))
      vr_warn("control: could not rebuild routing before unloading %lld",
              (long long)id);
  }
  pthread_mutex_unlock(&c->mu);
  if (!in) return;
  unload(c, id);
  /* Its room counts at once: the count above still held it, and a load
   * decided before the next tick (a pipeline plan's) was refused. */
  pthread_mutex_lock(&c->mu);
  if (ctl_refresh_locked(c, c->last_tick_ns, 1.0))
    vr_warn("control: could not count the room of unloaded %lld", (long long)id);
  pthread_mutex_unlock(&c->mu);
}

/* ---- the live actuator table (policy/driver.h) ---- */

static int act_load(void *self, const vr_action *a) {
  return a->worker == 0 ? apply_load(self, a, -1) : 0;
}

static int act_migrate(void *self, const vr_action *a) {
  /* load the replacement first (the old instance serves meanwhile), then
   * drain the old one; a failed load keeps the old instance */
  int rc = a->worker == 0 ? apply_load(self, a, a->instance) : 0;
  if (a->worker == 0 && !rc) apply_unload(self, a->instance);
  return rc;
}

static int act_unload(void *self, const vr_action *a) {
  apply_unload(self, a->instance);
  return 0;
}

static int act_set_vstate(void *self, const vr_action *a) {
  vr_control *c = self;
  pthread_mutex_lock(&c->mu);
  if (a->variant >= 0 && (size_t)a->variant < c->nvar) c->var[a->variant].state = a->value;
  pthread_mutex_unlock(&c->mu);
  return 0;
}

static int act_set_istate(void *self, const vr_action *a) {
  vr_control *c = self;
  pthread_mutex_lock(&c->mu);
  ctl_inst *in = ctl_inst_by_id(c, (int)a->instance);
  if (in) in->istate = a->value;
  pthread_mutex_unlock(&c->mu);
  return 0;
}

static int act_set_batch(void *self, const vr_action *a) {
  vr_control *c = self;
  /* a cap under the variant's max batch (its identity stays) */
  vr_errbuf err = {0};
  if (vr_rt_set_batch_cap(c->o.rt, (int)a->instance, a->value, &err))
    vr_debug("control: set batch: %s", err.msg);
  return 0;
}

/* Worker actions have no slot: this process is one worker. */
static const vr_actuator live_actuator = {
    .load = act_load,
    .unload = act_unload,
    .set_batch = act_set_batch,
    .migrate = act_migrate,
    .set_vstate = act_set_vstate,
    .set_istate = act_set_istate,
    .pair_shadow = ctl_af_pair,
    .unpair_shadow = ctl_af_unpair,
};

/* ---- tick ------------------------------------------------------------------ */

/* Per app: what was routed and served this period, on how many instances
 * at what cost, the accuracy of the variants that served, and its own
 * end-to-end p99 and SLO attainment (null / 1 when it served nothing). */
static void app_breakdown(vr_control *c, const int *inst_of, FILE *out) {
  int first = 1;
  for (size_t v = 0; v < c->nvar; v++) {
    const char *app = c->var[v].prof.app;
    int seen = 0;
    for (size_t u = 0; u < v && !seen; u++) seen = !strcmp(c->var[u].prof.app, app);
    if (seen) continue;
    uint64_t arr = 0, srv = 0;
    int k = 0;
    double cost = 0, acc = 0;
    for (size_t u = v; u < c->nvar; u++) {
      if (strcmp(c->var[u].prof.app, app)) continue;
      arr += c->var[u].arrivals;
      srv += c->var[u].served;
      k += inst_of[u];
      cost += inst_of[u] * c->var[u].prof.cost_per_s;
      acc += (double)c->var[u].served * c->var[u].prof.accuracy;
    }
    const ctl_app_period *ap = NULL;
    for (int i = 0; i < c->napps && !ap; i++)
      if (!strcmp(c->apps[i]->app, app)) ap = c->apps[i];
    char p99[32] = "null";
    if (ap && ap->served)
      snprintf(p99, sizeof p99, "%.3f", vr_hist_quantile(&ap->lat, 0.99) / 1000.0);
    double att = ap && ap->served ? 1.0 - (double)ap->late / (double)ap->served : 1.0;
    fprintf(out, "%s\"%s\":{\"arrivals\":%llu,\"served\":%llu,"
            "\"instances\":%d,\"cost_per_s\":%.8f,\"accuracy\":%.3f,"
            "\"p99_ms\":%s,\"slo_attainment\":%.4f}",
            first ? "{" : ",", app, (unsigned long long)arr, (unsigned long long)srv,
            k, cost, srv ? acc / (double)srv : 0.0, p99, att);
    first = 0;
  }
  if (!first) fputc('}', out);
}

static void write_row(vr_control *c, int64_t now_ns, double dt) {
  double cost = 0;
  int ninst = 0;
  /* every variant and app, however many: the dashboard dropped what did
   * not fit fixed buffers (about eight apps) without a sign */
  char *vars = NULL, *apps = NULL;
  size_t vlen = 0, alen = 0;
  FILE *vf = open_memstream(&vars, &vlen); /* glibc; malloc'd */
  int *inst_of = c->nvar ? vr_calloc(c->nvar, sizeof *inst_of) : NULL;
  for (size_t v = 0; v < c->nvar; v++) {
    int k = 0;
    for (size_t i = 0; i < c->insts.len; i++) {
      ctl_inst *in = vr_vec_at(&c->insts, i);
      k += in->var == (int)v && !in->removing;
    }
    if (inst_of) inst_of[v] = k;
    if (!k) continue;
    ninst += k;
    cost += k * c->var[v].prof.cost_per_s;
    if (vf) fprintf(vf, "%s%s*%d", ninst > k ? " " : "", c->var[v].prof.variant, k);
  }
  if (vf) fclose(vf);
  double att = c->p_served ? 1.0 - (double)c->p_late / c->p_served : 1.0;
  double p99 = vr_hist_quantile(&c->p_hist, 0.99) / 1000.0;
  double acc = c->p_served ? c->p_acc_sum / c->p_served : 0.0;
  int cores = c->o.cores - c->worker.free_cores;
  if (c->hist) {
    vr_hist_row r = {(now_ns - c->t0_ns) / 1e9, c->p_arrivals, c->p_served, c->p_late,
                     c->p_failed + c->p_infeasible, att, p99, acc, cost, ninst, cores,
                     NULL, NULL};
    FILE *af = inst_of ? open_memstream(&apps, &alen) : NULL;
    if (af) {
      app_breakdown(c, inst_of, af);
      fclose(af);
    }
    r.variants = vr_strdup(vars ? vars : "");
    r.apps = vr_strdup(apps ? apps : "");
    vr__hist_add_row(c->hist, &r); /* takes the two strings */
  }
  free(apps);
  vr_free(inst_of);
  if (c->o.csv) {
    fprintf(c->o.csv, "%.3f,%llu,%llu,%llu,%llu,%.4f,%.3f,%.3f,%.8f,%d,%d,%s\n",
            (now_ns - c->t0_ns) / 1e9, (unsigned long long)c->p_arrivals,
            (unsigned long long)c->p_served, (unsigned long long)c->p_late,
            (unsigned long long)(c->p_failed + c->p_infeasible), att, p99, acc, cost, ninst,
            cores, vars ? vars : "");
    fflush(c->o.csv);
  }
  free(vars);
  (void)dt;
}

static void reset_period(vr_control *c) {
  for (size_t v = 0; v < c->nvar; v++) {
    c->var[v].arrivals = c->var[v].served = 0;
    c->var[v].period_slo = 0;
    c->var[v].period_acc = 0;
  }
  for (size_t i = 0; i < c->insts.len; i++) {
    ctl_inst *in = vr_vec_at(&c->insts, i);
    in->arrivals = in->items = in->batches = 0;
    in->nlat = 0;
    in->nratio = 0;
  }
  c->last_late = c->p_late;
  c->total_late += c->p_late;
  c->total_infeasible += c->p_infeasible;
  c->p_arrivals = c->p_served = c->p_late = c->p_failed = c->p_infeasible = 0;
  c->p_acc_sum = 0;
  vr_hist_init(&c->p_hist);
  for (int i = 0; i < c->napps; i++) {
    c->apps[i]->served = c->apps[i]->late = 0;
    vr_hist_init(&c->apps[i]->lat);
  }
}

static int tick_locked(vr_control *c, int64_t now_ns, vr_errbuf *err);

int vr_control_tick(vr_control *c, int64_t now_ns, vr_errbuf *err) {
  pthread_rwlock_rdlock(&c->reload_rw); /* the actions' indices stay valid */
  int rc = tick_locked(c, now_ns, err);
  pthread_rwlock_unlock(&c->reload_rw);
  return rc;
}

static int tick_locked(vr_control *c, int64_t now_ns, vr_errbuf *err) {
  pthread_mutex_lock(&c->mu);
  double dt = c->last_tick_ns ? (now_ns - c->last_tick_ns) / 1e9 : 1.0;
  if (dt <= 0) dt = 1e-3;
  c->last_tick_ns = now_ns;
  int rc = ctl_refresh_locked(c, now_ns, dt);
  vr_vec_clear(&c->drv.acts);
  if (rc == 0 && c->o.autoscale) rc = vr_driver_decide(&c->drv);
  if (rc == 0) write_row(c, now_ns, dt);
  reset_period(c);
  /* Apply outside the lock: loads and drains take milliseconds. */
  size_t n = c->drv.acts.len;
  vr_action *acts = n ? vr_malloc(n * sizeof *acts) : NULL;
  if (acts) memcpy(acts, c->drv.acts.data, n * sizeof *acts);
  pthread_mutex_unlock(&c->mu);
  if (rc) return vr_errf(err, rc, "control tick: %s", vr_strerror(rc));
  for (size_t i = 0; i < n && acts; i++) {
    const vr_action *a = &acts[i];
    pthread_mutex_lock(&c->mu);
    int managed = ctl_managed_locked(c, a); /* a pipeline policy's instances */
    pthread_mutex_unlock(&c->mu);
    if (managed) continue;
    if (a->kind != VR_ACT_SET_VSTATE && a->kind != VR_ACT_SET_ISTATE &&
        a->kind != VR_ACT_SET_BATCH) {
      char vn[sizeof c->var[0].prof.variant] = ""; /* copied: a reload frees c->var */
      pthread_mutex_lock(&c->mu);
      if (a->variant >= 0 && (size_t)a->variant < c->nvar)
        snprintf(vn, sizeof vn, "%s", c->var[a->variant].prof.variant);
      vr_info("control: %s %s (%s)", vr_action_name(a->kind), vn, a->why ? a->why : "");
      if (c->hist)
        vr__hist_add_act(c->hist, (now_ns - c->t0_ns) / 1e9, vr_action_name(a->kind), vn,
                         a->why);
      pthread_mutex_unlock(&c->mu);
    }
    vr_driver_apply(&c->drv, a);
  }
  vr_free(acts);
  pthread_mutex_lock(&c->mu);
  /* the tick has seen any crowd routing noted: the next one is new */
  for (size_t v = 0; v < c->nvar; v++) c->var[v].af_cross_ns = 0;
  rc = ctl_refresh_locked(c, now_ns, dt); /* route to what now exists */
  pthread_mutex_unlock(&c->mu);
  return rc ? vr_errf(err, rc, "control refresh: %s", vr_strerror(rc)) : 0;
}

/* ---- lifecycle ------------------------------------------------------------- */

int vr_control_reload_store(vr_control *c, vr_errbuf *err) {
  pthread_rwlock_wrlock(&c->reload_rw); /* not in the middle of a tick's actions */
  pthread_mutex_lock(&c->mu);
  int rc = load_variants(c, err);
  if (rc == 0) rc = ctl_refresh_locked(c, c->last_tick_ns, 1.0);
  pthread_mutex_unlock(&c->mu);
  pthread_rwlock_unlock(&c->reload_rw);
  return rc;
}

int vr_control_create(const vr_control_opts *o, vr_control **out,
                      vr_errbuf *err) {
  *out = NULL;
  if (!o->store || !o->rt) return vr_errf(err, VR_EINVAL, "control needs a store and a runtime");
  vr_control *c = VR_NEW(vr_control);
  if (!c) return vr_errf(err, VR_ENOMEM, "out of memory");
  c->o = *o;
  if (c->o.cores <= 0) c->o.cores = vr_cpus_usable(NULL); /* a container's limit */
  if (c->o.mem_bytes <= 0) c->o.mem_bytes = (int64_t)8 << 30;
  if (c->o.core_price_per_hour <= 0) c->o.core_price_per_hour = 0.0425;
  if (c->o.period_ns <= 0) c->o.period_ns = VR_NS_PER_S;
  if (c->o.default_slo_ms <= 0) c->o.default_slo_ms = 100;
  /* Short: at low load a batch-b variant would otherwise hold a lone
   * query for the whole delay waiting for company. */
  if (c->o.max_queue_delay_us <= 0) c->o.max_queue_delay_us = 500;
  if (!o->policy_set) {
    vr_policy_cfg_default(&c->o.policy, VR_POL_INFAAS);
    /* live, profiles run optimistic (the front end shares the cores): a
     * lasting backlog also counts as overload */
    c->o.policy.backlog_step = 1.25;
  }
  pthread_mutex_init(&c->mu, NULL);
  pthread_rwlock_init(&c->reload_rw, NULL);
  pthread_cond_init(&c->cv, NULL);
  c->af_provision_ms = -1;
  c->af_kick_gap_ns = CTL_AF_KICK_NS;
  vr_map_init(&c->var_by_name);
  vr_vec_init(&c->insts, sizeof(ctl_inst));
  vr_hist_init(&c->p_hist);
  vr_hist_init(&c->sel_hist);
  c->worker.idle_since = -1;
  if (!c->o.clock) c->o.clock = vr_clock_monotonic();
  c->t0_ns = vr_clock_now(c->o.clock);
  c->hist = VR_NEW(vr_ctl_history); /* optional: no dashboard data without it */
  vr_actuator act = live_actuator;
  act.self = c;
  int rc = vr_driver_init(&c->drv, &c->o.policy, &act, c->o.clock)
               ? vr_errf(err, VR_ENOMEM, "out of memory") : 0;
  if (rc == 0) rc = vr_control_reload_store(c, err);
  if (rc) {
    vr_control_free(c);
    return rc;
  }
  *out = c;
  return 0;
}

static void *tick_main(void *arg) {
  vr_control *c = arg;
  pthread_mutex_lock(&c->mu);
  while (!c->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t t = ts.tv_sec * VR_NS_PER_S + ts.tv_nsec + c->o.period_ns;
    ts.tv_sec = t / VR_NS_PER_S;
    ts.tv_nsec = t % VR_NS_PER_S;
    while (!c->stop && !c->kick && pthread_cond_timedwait(&c->cv, &c->mu, &ts) != ETIMEDOUT) {}
    if (c->stop) break;
    int kicked = c->kick;
    uint64_t pairs = c->af_pairs;
    c->kick = 0;
    pthread_mutex_unlock(&c->mu);
    vr_errbuf err = {0};
    vr__control_sync_store(c); /* `vario register [--remove]` meanwhile */
    if (vr_control_tick(c, vr_driver_now(&c->drv), &err)) vr_warn("%s", err.msg);
    pthread_mutex_lock(&c->mu);
    int64_t gap = c->af_kick_gap_ns * 2;
    c->af_kick_gap_ns = kicked && c->af_pairs == pairs
                            ? (gap < c->o.period_ns ? gap : c->o.period_ns)
                            : CTL_AF_KICK_NS;
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

int vr_control_start(vr_control *c, vr_errbuf *err) {
  if (c->started) return 0;
  /* Set first: the loader waits for work only while started. */
  pthread_mutex_lock(&c->mu);
  c->started = 1;
  c->stop = 0;
  pthread_mutex_unlock(&c->mu);
  if (pthread_create(&c->tick_thread, NULL, tick_main, c)) {
    c->started = 0;
    return vr_errf(err, VR_ENOMEM, "cannot start the control thread");
  }
  if (pthread_create(&c->load_thread, NULL, ctl_loader_main, c)) {
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->tick_thread, NULL);
    c->started = 0;
    return vr_errf(err, VR_ENOMEM, "cannot start the loader thread");
  }
  return 0;
}

void vr_control_stop(vr_control *c) {
  if (!c || !c->started) return;
  pthread_mutex_lock(&c->mu);
  c->stop = 1;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  pthread_join(c->tick_thread, NULL);
  pthread_join(c->load_thread, NULL);
  pthread_mutex_lock(&c->mu);
  c->started = 0;
  pthread_mutex_unlock(&c->mu);
}

void vr_control_free(vr_control *c) {
  if (!c) return;
  vr_control_stop(c);
  /* The loader answered every waiter before it exited (see its loop). */
  if (c->hist) vr__hist_free(c->hist);
  vr_free(c->hist);
  for (int i = 0; i < c->napps; i++) vr_free(c->apps[i]);
  vr_driver_free(&c->drv);
  vr_vec_free(&c->insts);
  vr_map_free(&c->var_by_name);
  vr_free(c->var);
  vr_free(c->af);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  pthread_rwlock_destroy(&c->reload_rw);
  vr_free(c);
}

char *vr_control_history(vr_control *c, double since_s) {
  pthread_mutex_lock(&c->mu);
  char *s = c->hist ? vr__hist_json(c->hist, since_s) : NULL;
  pthread_mutex_unlock(&c->mu);
  return s;
}
