/* The controller's remote actions (loads and unloads on workers, workers
 * through the provider) and the glue between the controller and its
 * policy driver (control/cluster_driver.h): the ops it calls and the
 * view it reads. See ctl_int.h. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "cli/ctl_int.h"
#include "runtime/config.h"
#include "server/httpc.h"

/* ---- actions --------------------------------------------------------------- */

typedef struct load_job {
  ctl *c;
  char model[128], worker[VR_REG_ID_MAX], addr[VR_REG_ADDR_MAX];
  int unload;
} load_job;

static void *unload_main(load_job *j);

/* POST /v2/repository/models/{model}/{verb} ("load" or "unload") to the
 * worker at addr ("host:port") with the admin token. 0 with *status set
 * to the HTTP status (err->msg holds it and the body's head when it is
 * not 200), or a VR_E* code when no answer came. */
static int repo_post(ctl *c, const char *addr, const char *model, const char *verb,
                     int timeout_ms, int *status, vr_errbuf *err) {
  char host[VR_REG_ADDR_MAX];
  snprintf(host, sizeof host, "%s", addr);
  char *colon = strrchr(host, ':');
  *status = 0;
  if (!colon) return VR_EINVAL;
  *colon = 0;
  vr_httpc h;
  int rc = vr_httpc_open(&h, host, atoi(colon + 1), err);
  if (rc) return rc;
  h.timeout_ms = timeout_ms;
  char path[300], auth[600] = "";
  snprintf(path, sizeof path, "/v2/repository/models/%s/%s", model, verb);
  if (c->token) snprintf(auth, sizeof auth, "Authorization: Bearer %.500s\r\n", c->token);
  vr_httpc_resp resp;
  rc = vr_httpc_request(&h, "POST", path, auth, "{}", 2, &resp, err);
  if (!rc) {
    *status = resp.head.status;
    if (*status != 200)
      snprintf(err->msg, sizeof err->msg, "HTTP %d %.*s", *status,
               (int)(resp.body_len < 300 ? resp.body_len : 300), resp.body ? resp.body : "");
  }
  vr_httpc_close(&h);
  return rc;
}

/* A remote load: the worker's repository API (it fetches the model from
 * us first when it has none). Runs on its own thread: a load takes as
 * long as the model's profiling. Its time is the variant's load time for
 * the policy. */
static void *load_main(void *arg) {
  load_job *j = arg;
  if (j->unload) return unload_main(j);
  ctl *c = j->c;
  int64_t t_start = vr_now_ns();
  vr_errbuf err = {0};
  int status;
  int rc = repo_post(c, j->addr, j->model, "load", 300000, &status, &err);
  /* 409: it is loaded already (a worker loads its repository at start) */
  int timed = !rc && status == 200;
  if (!rc && status != 200 && status != 409) rc = VR_EIO;
  pthread_mutex_lock(&c->mu);
  for (size_t i = 0; i < sizeof c->pend / sizeof c->pend[0]; i++)
    if (c->pend[i].active && !strcmp(c->pend[i].model, j->model) &&
        !strcmp(c->pend[i].worker, j->worker)) {
      /* success: pending until the worker publishes it (next heartbeat);
       * failure: retried after a back-off */
      c->pend[i].until_ns = vr_now_ns() + (rc ? 5000000000LL : 3000000000LL);
    }
  if (rc) {
    c->loads_failed++;
    vr__ctl_event(c, "load %s on %s failed: %s", j->model, j->worker, err.msg);
  } else {
    c->loads_ok++;
    vr__ctl_event(c, "loaded %s on %s", j->model, j->worker);
  }
  pthread_mutex_unlock(&c->mu);
  double ms = (double)(vr_now_ns() - t_start) / 1e6;
  if (!rc && c->cdrv && timed) {
    pthread_mutex_lock(&c->pol_mu);
    vr_cdrv_load_time(c->cdrv, j->model, ms);
    pthread_mutex_unlock(&c->pol_mu);
  }
  vr_free(j);
  return NULL;
}

/* A remote unload (the policy's scale-down): the worker drains the
 * model's queue, then frees it; its next heartbeat no longer lists it. */
static void *unload_main(load_job *j) {
  ctl *c = j->c;
  vr_errbuf err = {0};
  int status;
  int rc = repo_post(c, j->addr, j->model, "unload", 120000, &status, &err);
  if (!rc && status != 200) rc = VR_EIO;
  pthread_mutex_lock(&c->mu);
  if (rc) {
    c->unloads_failed++;
    vr__ctl_event(c, "unload %s on %s failed: %s", j->model, j->worker, err.msg);
  } else {
    c->unloads_ok++;
    vr__ctl_event(c, "unloaded %s on %s", j->model, j->worker);
  }
  pthread_mutex_unlock(&c->mu);
  vr_free(j);
  return NULL;
}

int vr__ctl_pending_for(ctl *c, const char *model, const char *worker, int64_t now) {
  for (size_t i = 0; i < sizeof c->pend / sizeof c->pend[0]; i++) {
    pending *p = &c->pend[i];
    if (p->active && p->until_ns < now) p->active = 0;
    if (p->active && !strcmp(p->model, model) && !strcmp(p->worker, worker)) return 1;
  }
  return 0;
}

/* Runs j on a detached thread (which frees it); -1 when none started. */
static int spawn(load_job *j) {
  pthread_t t;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &a, load_main, j);
  pthread_attr_destroy(&a);
  if (rc) vr_free(j);
  return rc ? -1 : 0;
}

void vr__ctl_start_load(ctl *c, const char *model, const vr_worker_info *w, int64_t now) {
  pending *slot = NULL;
  for (size_t i = 0; i < sizeof c->pend / sizeof c->pend[0] && !slot; i++)
    if (!c->pend[i].active) slot = &c->pend[i];
  load_job *j = slot ? VR_NEW(load_job) : NULL;
  if (!j) return;
  *slot = (pending){.until_ns = now + 600000000000LL, .active = 1};
  snprintf(slot->model, sizeof slot->model, "%s", model);
  snprintf(slot->worker, sizeof slot->worker, "%s", w->id);
  j->c = c;
  snprintf(j->model, sizeof j->model, "%s", model);
  snprintf(j->worker, sizeof j->worker, "%s", w->id);
  snprintf(j->addr, sizeof j->addr, "%s", w->addr);
  if (spawn(j)) slot->active = 0;
}

/* Under c->mu. */
void vr__ctl_start_unload(ctl *c, const char *model, const vr_worker_info *w) {
  load_job *j = VR_NEW(load_job);
  if (!j) return;
  j->c = c;
  j->unload = 1;
  snprintf(j->model, sizeof j->model, "%s", model);
  snprintf(j->worker, sizeof j->worker, "%s", w->id);
  snprintf(j->addr, sizeof j->addr, "%s", w->addr);
  spawn(j);
}

int vr__ctl_start_worker(ctl *c, const char *why) {
  char id[64];
  vr_errbuf err = {0};
  pthread_mutex_lock(&c->mu);
  snprintf(id, sizeof id, "w%d-%lld", ++c->next_worker, (long long)(vr_now_ns() / 1000000 % 100000));
  pthread_mutex_unlock(&c->mu);
  char url[64];
  snprintf(url, sizeof url, "http://%.40s:%d", c->advertise ? c->advertise : "127.0.0.1",
           vr_http_port(c->http));
  if (ctl_prov_start(c->prov, id, c->worker_cores, url, c->wargs, (size_t)c->n_wargs, &err)) {
    vr_warn("controller: provider start: %s", err.msg);
    return -1;
  }
  pthread_mutex_lock(&c->mu);
  c->workers_started++;
  c->starting++;
  vr__ctl_event(c, "autoscaler: started worker %s (%s)", id, why);
  pthread_mutex_unlock(&c->mu);
  return 0;
}

/* ---- the policy (control/cluster_driver.h) --------------------------------- */

static const vr_worker_info *live_worker(ctl *c, const char *id) {
  for (size_t i = 0; i < c->nw; i++)
    if (!strcmp(c->w[i].id, id)) return &c->w[i];
  return NULL;
}

static int op_load(void *u, const char *model, const char *worker, const char *why) {
  ctl *c = u;
  pthread_mutex_lock(&c->mu);
  const vr_worker_info *w = live_worker(c, worker);
  int64_t now = vr_now_ns();
  int rc = -1;
  if (w && !vr__ctl_pending_for(c, model, worker, now)) {
    vr__ctl_event(c, "policy %s: load %s on %s (%s)", c->policy, model, worker, why);
    vr__ctl_start_load(c, model, w, now);
    rc = 0;
  }
  pthread_mutex_unlock(&c->mu);
  return rc;
}

static int op_unload(void *u, const char *model, const char *worker, const char *why) {
  ctl *c = u;
  pthread_mutex_lock(&c->mu);
  const vr_worker_info *w = live_worker(c, worker);
  if (w) {
    vr__ctl_event(c, "policy %s: unload %s on %s (%s)", c->policy, model, worker, why);
    vr__ctl_start_unload(c, model, w);
  }
  pthread_mutex_unlock(&c->mu);
  return w ? 0 : -1;
}

static int op_add_worker(void *u, const char *why) {
  ctl *c = u;
  char w[160];
  snprintf(w, sizeof w, "policy %s: %s", c->policy, why);
  return c->prov ? vr__ctl_start_worker(c, w) : -1;
}

static int op_remove_worker(void *u, const char *worker, const char *why) {
  ctl *c = u;
  vr_errbuf err = {0};
  if (!c->prov || ctl_prov_stop(c->prov, worker, &err)) {
    if (c->prov) vr_warn("controller: provider stop %s: %s", worker, err.msg);
    return -1;
  }
  pthread_mutex_lock(&c->mu);
  c->workers_removed++;
  vr__ctl_event(c, "policy %s: removing worker %s (%s)", c->policy, worker, why);
  pthread_mutex_unlock(&c->mu);
  return 0; /* it deregisters itself on SIGTERM, then drains */
}

static int op_pending(void *u, const char *model, const char *worker) {
  ctl *c = u;
  pthread_mutex_lock(&c->mu);
  int p = vr__ctl_pending_for(c, model, worker, vr_now_ns());
  pthread_mutex_unlock(&c->mu);
  return p;
}

/* The models' repository configs (re-read every 40 periods: a model
 * copied into the repository shows up without a restart). */
static void model_configs(ctl *c, char models[][128], int nm) {
  int same = nm == c->n_mcfg && c->ticks % 40;
  for (int m = 0; same && m < nm; m++) same = !strcmp(models[m], c->mcfg[m].name);
  if (same) return;
  c->n_mcfg = 0;
  for (int m = 0; m < nm && m < MAXM; m++) {
    vr_cdrv_model *x = &c->mcfg[c->n_mcfg++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%.127s", models[m]);
    x->threads = x->max_batch = 1;
    char dir[4096];
    snprintf(dir, sizeof dir, "%.3900s/%.127s", c->repo, models[m]);
    vr_model_config cfg;
    vr_errbuf e = {0};
    if (vr_model_config_load(dir, &cfg, &e)) continue; /* a worker will say why */
    snprintf(x->app, sizeof x->app, "%s", cfg.app);
    snprintf(x->precision, sizeof x->precision, "%s", vr_precision_name(cfg.precision));
    x->threads = cfg.threads > 0 ? cfg.threads : 1;
    x->max_batch = cfg.max_batch_size > 0 ? cfg.max_batch_size : 1;
    x->accuracy = cfg.accuracy > 0 ? cfg.accuracy : 0;
  }
}

/* One period of the policy over this period's view of the cluster. */
void vr__ctl_policy_step(ctl *c, const vr_worker_info *ws, size_t n, char models[][128], int nm,
                         int starting) {
  model_configs(c, models, nm);
  vr_cdrv_view v = {
      .now_ns = vr_now_ns(), .workers = ws, .nworkers = n,
      .inst = (const vr_instance_info *const *)c->vinst, .ninst = c->nvinst,
      .models = c->mcfg, .nmodels = (size_t)c->n_mcfg, .starting = starting,
      .growable = c->prov != NULL, .worker_cores = c->worker_cores,
      .max_workers = c->max_workers, .slo_ms = c->slo_ms,
      .fixed_instances = c->replicas > 0 ? c->replicas : 1,
      .core_price_per_hour = 0.0425, .pending = op_pending, .u = c};
  vr_errbuf err = {0};
  pthread_mutex_lock(&c->pol_mu);
  if (vr_cdrv_tick(c->cdrv, &v, &err)) vr_warn("controller: %s", err.msg);
  pthread_mutex_unlock(&c->pol_mu);
}

void vr__ctl_policy_json(ctl *c, vr_sbuf *b) {
  if (!c->cdrv) return;
  vr_cdrv_stats st;
  pthread_mutex_lock(&c->pol_mu);
  vr_cdrv_get_stats(c->cdrv, &st);
  pthread_mutex_unlock(&c->pol_mu);
  vr_sbuf_puts(b, ",\"policy\":{\"kind\":");
  vr_sbuf_json_str(b, c->policy);
  for (int pass = 0; pass < 2; pass++) {
    vr_sbuf_puts(b, pass ? ",\"skipped\":{" : ",\"applied\":{");
    int first = 1;
    for (int k = 1; k < VR_ACT__COUNT; k++) {
      uint64_t x = pass ? st.skipped[k] : st.applied[k];
      if (!x) continue;
      vr_sbuf_printf(b, "%s\"%s\":%llu", first ? "" : ",", vr_action_name(k),
                     (unsigned long long)x);
      first = 0;
    }
    vr_sbuf_puts(b, "}");
  }
  vr_sbuf_printf(b, ",\"kept_last_copy\":%llu,\"not_yet\":%llu,\"snapshot\":{\"variants\":%d,"
                 "\"instances\":%d,\"workers\":%d}}",
                 (unsigned long long)st.kept_last, (unsigned long long)st.not_yet, st.nvariants,
                 st.ninstances, st.nworkers);
}

int vr__ctl_policy_open(ctl *c, vr_errbuf *err) {
  /* Requests name their model: no cross-model moves, no burst upgrades
   * to another model. */
  vr_policy_cfg pc;
  vr_policy_cfg_default(&pc, vr_policy_parse(c->policy));
  pc.cross_model = 0;
  pc.burst_upgrade = 0;
  pc.min_workers = c->min_workers > 0 ? c->min_workers : 1;
  pc.worker_idle_ns = (int64_t)c->worker_idle_s * 1000000000LL;
  if (pc.kind == VR_POL_INFAAS) pc.backlog_step = 1.25; /* as vario serve */
  vr_cdrv_ops ops = {op_load, op_unload, op_add_worker, op_remove_worker, c};
  return vr_cdrv_new(&pc, &ops, &c->cdrv) ? vr_errf(err, VR_ENOMEM, "out of memory") : 0;
}
