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
#include "base/thread.h"
#include "cli/ctl_int.h"
#include "policy/asyfunc.h"
#include "runtime/config.h"
#include "server/httpc.h"

/* ---- actions --------------------------------------------------------------- */

typedef struct load_job {
  ctl *c;
  char model[128], worker[VR_REG_ID_MAX], addr[VR_REG_ADDR_MAX];
  int unload;
  int pair_begin, pair_end; /* a load: an AsyFunc body's range (pair_end 0: plain) */
  char *body;               /* a shadow request's body (owned); NULL: {} */
  int shadow;               /* 1 pair, 2 release */
} load_job;

static void *unload_main(load_job *j);
static void *shadow_main(load_job *j);

/* POST /v2/repository/models/{model}/{verb} ("load", "unload", "shadow"
 * or "unshadow") with `body` (NULL: {}) to the worker at addr
 * ("host:port") with the admin token. 0 with *status set to the HTTP
 * status (err->msg holds it and the body's head when it is not 200), or
 * a VR_E* code when no answer came. */
static int repo_post(ctl *c, const char *addr, const char *model, const char *verb,
                     const char *body, int timeout_ms, int *status, vr_errbuf *err) {
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
  if (!body) body = "{}";
  rc = vr_httpc_request(&h, "POST", path, auth, body, strlen(body), &resp, err);
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
  if (j->shadow) return shadow_main(j);
  ctl *c = j->c;
  int64_t t_start = vr_now_ns();
  vr_errbuf err = {0};
  int status;
  char body[96] = "{}";
  if (j->pair_end > 0) /* an AsyFunc body (server/server_shadow.c) */
    snprintf(body, sizeof body, "{\"parameters\":{\"pair_range\":\"%d:%d\"}}", j->pair_begin,
             j->pair_end);
  int rc = repo_post(c, j->addr, j->model, "load", body, 300000, &status, &err);
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
  int rc = repo_post(c, j->addr, j->model, "unload", NULL, 120000, &status, &err);
  if (!rc && status != 200) rc = VR_EIO;
  pthread_mutex_lock(&c->mu);
  if (rc) {
    c->unloads_failed++;
    vr__ctl_event(c, "unload %s on %s failed: %s", j->model, j->worker, err.msg);
    /* the copy still serves: back into the routing table */
    for (int i = 0; i < MAXM; i++)
      if (c->unr[i].active && !strcmp(c->unr[i].model, j->model) &&
          !strcmp(c->unr[i].worker, j->worker))
        c->unr[i].active = 0;
  } else {
    c->unloads_ok++;
    vr__ctl_event(c, "unloaded %s on %s", j->model, j->worker);
  }
  pthread_mutex_unlock(&c->mu);
  vr_free(j);
  return NULL;
}

/* An AsyFunc shadow paired or released on the worker that holds the
 * body: the worker loads the shadow's blocks before it answers. */
static void *shadow_main(load_job *j) {
  ctl *c = j->c;
  vr_errbuf err = {0};
  int status, pair = j->shadow == 1;
  int rc = repo_post(c, j->addr, j->model, pair ? "shadow" : "unshadow", j->body, 120000,
                     &status, &err);
  if (!rc && status != 200) rc = VR_EIO;
  pthread_mutex_lock(&c->mu);
  if (rc) {
    if (pair) c->pairs_failed++;
    else c->unpairs_failed++;
    vr__ctl_event(c, "%s %s on %s failed: %s", pair ? "shadow for" : "shadow release of",
                  j->model, j->worker, err.msg);
  } else {
    if (pair) c->pairs_ok++;
    else c->unpairs_ok++;
    vr__ctl_event(c, "%s %s on %s", pair ? "shadow paired with" : "shadow released by",
                  j->model, j->worker);
  }
  pthread_mutex_unlock(&c->mu);
  vr_free(j->body);
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
  int rc = vr_thread_detached(load_main, j);
  if (rc) {
    vr_free(j->body);
    vr_free(j);
  }
  return rc ? -1 : 0;
}

/* The model's config and block profile for the policy (NULL: none). */
static const vr_cdrv_model *model_cfg(ctl *c, const char *model) {
  for (int i = 0; i < c->n_mcfg; i++)
    if (!strcmp(c->mcfg[i].name, model)) return &c->mcfg[i];
  return NULL;
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
  /* Under AsyFunc a model with a block profile is loaded as a body: a
   * shadow can pair with it later (no block worth one: plain). */
  const vr_cdrv_model *mc = c->cdrv && vr_cdrv_cfg(c->cdrv)->kind == VR_POL_ASYFUNC
                                ? model_cfg(c, model) : NULL;
  if (mc && mc->blocks && vr_cdrv_body_range(mc, c->slo_ms, &j->pair_begin, &j->pair_end))
    j->pair_begin = j->pair_end = 0;
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

/* The policy's unload: the copy leaves the routing table first and is
 * unloaded once a table without it is out and a period has passed (a
 * front end on the old table would otherwise send it requests that find
 * the model gone: 404s, not a scale-in). */
int vr__ctl_unload_routed(ctl *c, const char *model, const char *worker, const char *who,
                          const char *why) {
  pthread_mutex_lock(&c->mu);
  const vr_worker_info *w = live_worker(c, worker);
  unrouting *e = NULL;
  for (int i = 0; w && i < MAXM; i++) {
    if (c->unr[i].active && !strcmp(c->unr[i].model, model) && !strcmp(c->unr[i].worker, worker)) {
      e = &c->unr[i]; /* under way already */
      break;
    }
    if (!e && !c->unr[i].active) e = &c->unr[i];
  }
  if (e && !e->active) {
    int64_t now = vr_now_ns(), period = (int64_t)c->period_ms * 1000000;
    *e = (unrouting){.at_ns = now + 2 * period, .after_ver = c->routes_version,
                     .until_ns = now + 120000000000LL, .active = 1};
    snprintf(e->model, sizeof e->model, "%s", model);
    snprintf(e->worker, sizeof e->worker, "%s", worker);
    vr__ctl_event(c, "%s: unload %s on %s (%s): out of the routing table first", who, model,
                  worker, why);
  }
  pthread_mutex_unlock(&c->mu);
  return e ? 0 : -1;
}

static int op_unload(void *u, const char *model, const char *worker, const char *why) {
  ctl *c = u;
  char who[64];
  snprintf(who, sizeof who, "policy %s", c->policy);
  return vr__ctl_unload_routed(c, model, worker, who, why);
}

int vr__ctl_unrouted(ctl *c, const char *model, const char *worker) {
  for (int i = 0; i < MAXM; i++)
    if (c->unr[i].active && !strcmp(c->unr[i].model, model) && !strcmp(c->unr[i].worker, worker))
      return 1;
  return 0;
}

/* Whether worker (by id) lists model ready (c->wmodels). */
static int worker_lists(ctl *c, const char *worker, const char *model) {
  for (size_t i = 0; i < c->nw; i++) {
    if (strcmp(c->w[i].id, worker)) continue;
    size_t n = strlen(model);
    for (const char *p = c->wmodels[i]; (p = strstr(p, model)); p += n)
      if ((p == c->wmodels[i] || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
  }
  return 0;
}

void vr__ctl_unload_due(ctl *c, int64_t now) {
  for (int i = 0; i < MAXM; i++) {
    unrouting *e = &c->unr[i];
    if (!e->active) continue;
    const vr_worker_info *w = live_worker(c, e->worker);
    if (!w || now > e->until_ns || (e->started && !worker_lists(c, e->worker, e->model))) {
      e->active = 0; /* gone, done, or given up (the policy asks again) */
    } else if (!e->started && now >= e->at_ns &&
               (c->routes_version > e->after_ver || now >= e->at_ns + 10000000000LL)) {
      e->started = 1; /* no new table in 10 s (registry away?): unload anyway */
      vr__ctl_start_unload(c, e->model, w);
    }
  }
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

static int shadow_op(ctl *c, const char *model, const char *worker, char *body,
                     const char *why) {
  pthread_mutex_lock(&c->mu);
  const vr_worker_info *w = live_worker(c, worker);
  load_job *j = w ? VR_NEW(load_job) : NULL;
  if (j) {
    vr__ctl_event(c, "policy %s: %s %s on %s (%s)", c->policy,
                  body ? "shadow for" : "release the shadow of", model, worker, why);
    j->c = c;
    j->shadow = body ? 1 : 2;
    j->body = body;
    body = NULL;
    snprintf(j->model, sizeof j->model, "%s", model);
    snprintf(j->worker, sizeof j->worker, "%s", w->id);
    snprintf(j->addr, sizeof j->addr, "%s", w->addr);
  }
  int rc = j ? spawn(j) : -1;
  pthread_mutex_unlock(&c->mu);
  vr_free(body);
  return rc;
}

static int op_pair(void *u, const char *model, const char *worker, int cores, const int *split,
                   int nsplit, const char *why) {
  vr_sbuf b;
  vr_sbuf_init(&b);
  vr_sbuf_printf(&b, "{\"cores\":%d,%s\"split\":[", cores,
                 ((ctl *)u)->af_shadow_process ? "\"process\":true," : "");
  for (int i = 0; i < nsplit; i++) vr_sbuf_printf(&b, "%s%d", i ? "," : "", split[i]);
  vr_sbuf_puts(&b, "]}");
  size_t n;
  char *body = vr_sbuf_take(&b, &n);
  if (!body) return VR_ENOMEM;
  char w[96];
  snprintf(w, sizeof w, "%s, %d core%s", why, cores, cores == 1 ? "" : "s");
  return shadow_op(u, model, worker, body, w);
}

static int op_unpair(void *u, const char *model, const char *worker, const char *why) {
  return shadow_op(u, model, worker, NULL, why);
}

static int op_pending(void *u, const char *model, const char *worker) {
  ctl *c = u;
  pthread_mutex_lock(&c->mu);
  int p = vr__ctl_pending_for(c, model, worker, vr_now_ns());
  pthread_mutex_unlock(&c->mu);
  return p;
}

/* <dir>/blocks.json, the model's AsyFunc block profile (docs/API.md
 * "AsyFunc block profile", as `vario perf --blocks --json` prints it):
 * a copy (vr_free), or NULL when there is none or it does not parse. */
static vr_af_model *read_blocks(const char *dir, const char *model) {
  char path[4200];
  snprintf(path, sizeof path, "%s/blocks.json", dir);
  json_error_t je;
  json_t *j = json_load_file(path, 0, &je);
  if (!j) return NULL; /* none: not an AsyFunc model */
  vr_af_model *m = VR_NEW(vr_af_model);
  vr_errbuf e = {0};
  int rc = m ? vr_af_model_from_json(j, m, &e) : VR_ENOMEM;
  json_decref(j);
  if (rc) {
    vr_warn("controller: %s: %s (AsyFunc off for %s)", path, m ? e.msg : "out of memory", model);
    vr_free(m);
    return NULL;
  }
  return m;
}

/* The models' repository configs (re-read every 40 periods: a model
 * copied into the repository shows up without a restart). */
void vr__ctl_model_configs(ctl *c, char models[][128], int nm) {
  int same = nm == c->n_mcfg && c->ticks % 40;
  for (int m = 0; same && m < nm; m++) same = !strcmp(models[m], c->mcfg[m].name);
  if (same) return;
  pthread_mutex_lock(&c->pol_mu); /* the driver may hold a profile until its tick ends */
  for (int m = 0; m < MAXM; m++) {
    vr_free(c->mblk[m]);
    c->mblk[m] = NULL;
  }
  c->n_mcfg = 0;
  for (int m = 0; m < nm && m < MAXM; m++) {
    vr_cdrv_model *x = &c->mcfg[c->n_mcfg++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%.127s", models[m]);
    x->threads = x->max_batch = 1;
    char dir[4096];
    snprintf(dir, sizeof dir, "%.3900s/%.127s", c->repo, models[m]);
    if (c->cdrv && vr_cdrv_cfg(c->cdrv)->kind == VR_POL_ASYFUNC)
      x->blocks = c->mblk[m] = read_blocks(dir, models[m]);
    vr_model_config cfg;
    vr_errbuf e = {0};
    if (vr_model_config_load(dir, &cfg, &e)) continue; /* a worker will say why */
    snprintf(x->app, sizeof x->app, "%s", cfg.app);
    snprintf(x->precision, sizeof x->precision, "%s", vr_precision_name(cfg.precision));
    x->threads = cfg.threads > 0 ? cfg.threads : 1;
    x->max_batch = cfg.max_batch_size > 0 ? cfg.max_batch_size : 1;
    x->accuracy = cfg.accuracy > 0 ? cfg.accuracy : 0;
  }
  pthread_mutex_unlock(&c->pol_mu);
}

/* One period of the policy over this period's view of the cluster. */
void vr__ctl_policy_step(ctl *c, const vr_worker_info *ws, size_t n, char models[][128], int nm,
                         int starting) {
  vr__ctl_model_configs(c, models, nm);
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
  pthread_mutex_lock(&c->mu);
  vr_sbuf_printf(b, ",\"shadows\":{\"paired\":%lu,\"pair_failed\":%lu,\"released\":%lu,"
                 "\"release_failed\":%lu}",
                 c->pairs_ok, c->pairs_failed, c->unpairs_ok, c->unpairs_failed);
  pthread_mutex_unlock(&c->mu);
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
  /* AsyFunc: a worker serves a model under its name once, so one body
   * per worker; bodies spread over the workers */
  pc.af_body_per_worker = 1;
  if (c->af_mls_period_s > 0) pc.af_mls_period_ns = (int64_t)c->af_mls_period_s * 1000000000LL;
  if (c->af_release_ms > 0) pc.af_release_idle_ms = c->af_release_ms;
  vr_cdrv_ops ops = {op_load, op_unload, op_add_worker, op_remove_worker, c, op_pair, op_unpair};
  return vr_cdrv_new(&pc, &ops, &c->cdrv) ? vr_errf(err, VR_ENOMEM, "out of memory") : 0;
}
