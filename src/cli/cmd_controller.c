/*
 * vario controller --registry URL --repo DIR [--port N] [--replicas N]
 *                  [--models M,M] [--provider KIND --provider-opt K=V ...
 *                  --min-workers N --max-workers N --worker-arg ARG ...]
 *                  [--fetch-models] [--period-ms N] [--admin-token-file F]
 *                  [--policy infaas|clipper|sm|asyfunc [--slo-ms N]]
 * The cluster's control plane (issue 18). Every period it reads the live
 * workers and their loaded models from the registry (cluster/registry.h),
 * runs the placement policy (policy/cluster_plan.h), loads missing models
 * on workers through their repository API, asks the worker provider for
 * workers when fewer than --min-workers are alive (one that died is
 * replaced), and publishes the routing table front ends follow (table
 * "main", server/fwd.h JSON). With --policy it then runs that policy over
 * the cluster (control/cluster_driver.h; the remote actions and the glue
 * are in ctl_actions.c; who is listed, kept or gone in ctl_registry.c).
 * Under AsyFunc, models with a block profile
 * (<repo>/<model>/blocks.json) are loaded as bodies, MLS spreads bodies
 * over the workers with free cores, and LLS pairs shadows inside the
 * worker that holds the body (its repository API, server_shadow.c). It
 * serves its repository's model
 * directories to workers that fetch them (server/model_fetch.h) and its
 * state at GET /v2/cluster/state.
 *
 * All of its state is in Redis (workers, their models, the routing
 * table): a restarted controller carries on from there, and front ends and
 * workers keep serving on their last table while it is away.
 */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <dirent.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "cli/commands.h"
#include "cli/ctl_int.h"
#include "policy/cluster_plan.h"
#include "policy/pipe_policy.h"
#include "runtime/config.h"
#include "server/fwd.h"
#include "server/model_fetch.h"

void vr__ctl_event(ctl *c, const char *fmt, ...) {
  char msg[240];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  double t = (double)(vr_now_ns() - c->t0) / 1e9;
  vr_info("controller: %s", msg);
  int i = c->n_events % NEVENTS;
  snprintf(c->events[i], sizeof c->events[i], "%s", msg);
  c->ev_t[i] = t;
  c->n_events++;
}

static void state_json(ctl *c, vr_sbuf *b) {
  vr_sbuf pb;
  vr_sbuf_init(&pb);
  vr__ctl_policy_json(c, &pb); /* first: pol_mu is never taken under mu */
  vr__ctl_pipes_json(c, &pb);
  pthread_mutex_lock(&c->mu);
  vr_sbuf_printf(b, "{\"registry_ok\":%d,\"routes_version\":%lld,\"workers\":[",
                 c->registry_ok, (long long)c->routes_version);
  for (size_t i = 0; i < c->nw; i++) {
    vr_sbuf_puts(b, i ? ",{\"id\":" : "{\"id\":");
    vr_sbuf_json_str(b, c->w[i].id);
    vr_sbuf_puts(b, ",\"addr\":");
    vr_sbuf_json_str(b, c->w[i].addr);
    /* kept: missing from the registry, listed through its grace */
    vr_sbuf_printf(b, ",\"cores\":%d,\"lease_left_ms\":%lld,\"kept\":%s,\"models\":",
                   c->w[i].cores, (long long)c->w[i].lease_left_ms,
                   c->wkept_end[i] ? "true" : "false");
    vr_sbuf_json_str(b, c->wmodels[i]);
    vr_sbuf_puts(b, ",\"meta\":");
    vr_sbuf_json_str(b, c->w[i].meta);
    vr_sbuf_puts(b, "}");
  }
  vr_sbuf_printf(b, "],\"starting\":%d,\"loads\":{\"ok\":%lu,\"failed\":%lu},"
                 "\"unloads\":{\"ok\":%lu,\"failed\":%lu},\"workers_started\":%lu,"
                 "\"workers_died\":%lu,\"workers_removed\":%lu,\"events\":[",
                 c->starting, c->loads_ok, c->loads_failed, c->unloads_ok, c->unloads_failed,
                 c->workers_started, c->workers_died, c->workers_removed);
  int first = c->n_events > NEVENTS ? c->n_events - NEVENTS : 0;
  for (int k = first; k < c->n_events; k++) {
    vr_sbuf_printf(b, "%s{\"t_s\":%.3f,\"what\":", k > first ? "," : "", c->ev_t[k % NEVENTS]);
    vr_sbuf_json_str(b, c->events[k % NEVENTS]);
    vr_sbuf_puts(b, "}");
  }
  vr_sbuf_puts(b, "]");
  pthread_mutex_unlock(&c->mu);
  size_t n = 0;
  char *p = vr_sbuf_take(&pb, &n);
  if (p) vr_sbuf_add(b, p, n);
  vr_free(p);
  vr_sbuf_puts(b, "}");
}

static int token_ok(ctl *c, vr_http_req *r) {
  if (!c->token) return 1;
  const char *a = vr_http_header(r, "Authorization");
  size_t n = strlen(c->token);
  if (!a || strncmp(a, "Bearer ", 7) || strlen(a + 7) != n) return 0;
  unsigned char d = 0; /* constant time */
  for (size_t i = 0; i < n; i++) d |= (unsigned char)(a[7 + i] ^ c->token[i]);
  return d == 0;
}

/* The paths handle() serves (all GET and HEAD). */
static int known_path(const char *url) {
  static const char pre[] = "/v2/cluster/models/";
  if (!strcmp(url, "/v2/health/live") || !strcmp(url, "/v2/health/ready") ||
      !strcmp(url, "/v2/cluster/state"))
    return 1;
  if (strncmp(url, pre, sizeof pre - 1)) return 0;
  const char *sl = strchr(url + (sizeof pre - 1), '/'); /* after the model */
  return sl && !strncmp(sl, "/files", 6) && (sl[6] == 0 || sl[6] == '/');
}

static void handle(vr_http_req *r, void *user) {
  ctl *c = user;
  const char *url = vr_http_url(r);
  const char *m = vr_http_method(r);
  /* HEAD as GET (the HTTP layer sends no body); a 405 names what the path
   * takes (RFC 9110 15.5.6), a path that does not exist is 404 */
  if (strcmp(m, "GET") && strcmp(m, "HEAD")) {
    if (!known_path(url)) return vr_http_error(r, 404, "unknown path");
    vr_http_error(r, 405, "method not allowed");
    return vr_http_add_header(r, "Allow", "GET, HEAD");
  }
  /* the probes are answered while it drains too: not ready then */
  if (!strcmp(url, "/v2/health/ready") && vr_http_draining(r))
    return vr_http_respond(r, 400, NULL, NULL, 0, (size_t)-1);
  if (!strcmp(url, "/v2/health/live") || !strcmp(url, "/v2/health/ready"))
    return vr_http_respond(r, 200, NULL, NULL, 0, (size_t)-1);
  if (!strcmp(url, "/v2/cluster/state")) {
    vr_sbuf b;
    vr_sbuf_init(&b);
    state_json(c, &b);
    size_t len;
    char *body = vr_sbuf_take(&b, &len);
    return vr_http_respond(r, 200, "application/json", body, len, (size_t)-1);
  }
  static const char pre[] = "/v2/cluster/models/";
  if (!strncmp(url, pre, sizeof pre - 1)) {
    if (!token_ok(c, r)) return vr_http_error(r, 401, "bearer token required");
    char name[256];
    const char *p = url + sizeof pre - 1, *sl = strchr(p, '/');
    if (!sl || (size_t)(sl - p) >= sizeof name) return vr_http_error(r, 404, "unknown path");
    memcpy(name, p, (size_t)(sl - p));
    name[sl - p] = 0;
    if (!strcmp(sl, "/files")) return vr_model_files_reply(r, c->repo, name, NULL);
    if (!strncmp(sl, "/files/", 7)) return vr_model_files_reply(r, c->repo, name, sl + 7);
  }
  vr_http_error(r, 404, "unknown path");
}

static int in_list(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; (p = strstr(p, name)); p += n)
    if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
  return 0;
}

static int scan_models(ctl *c, char names[][128], int cap) {
  int n = 0;
  if (c->models_opt && !strcmp(c->models_opt, "-")) return 0; /* place none */
  if (c->models_opt) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", c->models_opt);
    for (char *s = NULL, *t = strtok_r(buf, ",", &s); t && n < cap; t = strtok_r(NULL, ",", &s))
      snprintf(names[n++], 128, "%s", t);
    return n;
  }
  DIR *d = opendir(c->repo);
  struct dirent *e;
  while (d && (e = readdir(d)) && n < cap) {
    char dir[4096];
    size_t len = strlen(e->d_name);
    if (e->d_name[0] == '.' || len >= 128) continue;
    snprintf(dir, sizeof dir, "%s/%s", c->repo, e->d_name);
    /* memcpy of the measured name: snprintf's truncation warning (gcc -O0,
     * -Werror) cannot see the length check */
    if (vr_model_dir_is_model(dir)) memcpy(names[n++], e->d_name, len + 1);
  }
  if (d) closedir(d);
  for (int i = 1; i < n; i++) /* sorted: a stable routing table */
    for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
      char t[128];
      memcpy(t, names[j], 128);
      memcpy(names[j], names[j - 1], 128);
      memcpy(names[j - 1], t, 128);
    }
  return n;
}

static int cmp_worker(const void *a, const void *b) {
  return strcmp(((const vr_worker_info *)a)->id, ((const vr_worker_info *)b)->id);
}

/* The routing table from what workers report ready: model m -> workers
 * with m loaded; apps ("a:*") -> workers running a model-less control
 * plane. Workers with nothing ready are listed but route nothing. */
static char *build_routes(ctl *c, char models[][128], int nm) {
  vr_fwd_worker fw[MAXW];
  static vr_fwd_route rt[MAXM + 2];
  static int idx[MAXM + 2][MAXW]; /* the tick thread only */
  int nw = 0, nr = 0;
  for (size_t i = 0; i < c->nw && nw < MAXW; i++) {
    vr_fwd_worker *x = &fw[nw];
    char spec[VR_REG_ID_MAX + VR_REG_ADDR_MAX + 2];
    snprintf(spec, sizeof spec, "%s=%s", c->w[i].id, c->w[i].addr);
    vr_errbuf err = {0};
    if (vr_fwd_parse_worker(spec, x, &err)) continue; /* not IPv4: unroutable */
    nw++;
  }
  for (int m = 0; m < nm; m++) {
    rt[nr] = (vr_fwd_route){.workers = idx[nr]};
    snprintf(rt[nr].key, sizeof rt[nr].key, "m:%.150s", models[m]);
    for (int k = 0; k < nw; k++)
      for (size_t i = 0; i < c->nw; i++)
        if (!strcmp(c->w[i].id, fw[k].id) && in_list(c->wmodels[i], models[m]) &&
            !vr__ctl_unrouted(c, models[m], c->w[i].id))
          idx[nr][rt[nr].n++] = k;
    nr++;
  }
  /* apps and pipelines ("p:*": any worker with a control plane runs a
   * pipeline request, its hops go where the plan put them) */
  for (int pass = 0; pass < 2; pass++) {
    rt[nr] = (vr_fwd_route){.workers = idx[nr]};
    snprintf(rt[nr].key, sizeof rt[nr].key, pass ? "p:*" : "a:*");
    for (int k = 0; k < nw; k++)
      for (size_t i = 0; i < c->nw; i++)
        if (!strcmp(c->w[i].id, fw[k].id) && c->wapps[i]) idx[nr][rt[nr].n++] = k;
    nr++;
  }
  vr_fwd_table t = {0, nw, nr, fw, rt};
  return vr_fwd_table_json(&t);
}

/* One period: the registry's workers (a missing one kept through its
 * grace), their instances, placement by the policy or the fixed replicas,
 * the routing table (published when it changed), then the pipeline
 * policy's step. On the tick thread. */
static void tick(ctl *c) {
  vr_errbuf err = {0};
  vr_worker_info *ws = NULL;
  size_t n = 0, nleft = 0;
  vr_worker_left *left = NULL; /* deregistered: not kept (keep_missing) */
  vr_redis *rd = vr_registry_redis(c->reg);
  uint64_t r0 = vr_redis_reconnects(rd);
  int rc = vr_registry_workers_left(c->reg, &ws, &n, &left, &nleft, &err);
  vr_worker_info *room = rc ? NULL : vr_realloc(ws, MAXW * sizeof *ws); /* keep_missing */
  if (room) ws = room;
  else if (!rc) rc = vr_errf(&err, VR_ENOMEM, "out of memory");
  uint64_t reconnects = vr_redis_reconnects(rd);
  int64_t waited = vr_redis_take_wait_ns(rd);
  pthread_mutex_lock(&c->mu);
  if (rc) {
    vr_free(ws);
    vr_free(left);
    vr__ctl_registry_lost(c, err.msg);
    pthread_mutex_unlock(&c->mu);
    return;
  }
  /* Back after a failed read, on a new connection (Redis restarted, maybe
   * empty, or the old one broke) or after a stall (Redis paused): what the
   * registry lists now may lack workers that had no chance to heartbeat
   * yet (keep_missing). */
  int back = !c->registry_ok || reconnects != c->reconnects || vr__ctl_stalled(c, waited) ||
             c->reread;
  c->reread = 0;
  if (back) c->back_ns = vr_now_ns();
  c->reconnects = reconnects;
  int recheck = back || ++c->ticks % 16 == 0;
  if (!c->registry_ok) vr__ctl_event(c, "registry reachable");
  c->registry_ok = 1;
  if (n > MAXW) n = MAXW;
  if (n > 1) qsort(ws, n, sizeof *ws, cmp_worker);
  pthread_mutex_unlock(&c->mu);
  /* A worker the provider saw exit is dead now, not when its lease ends:
   * take it out of the registry at once (front ends stop routing to it
   * with the next table) and out of this period's live set. */
  static char died[MAXW][64], stopped[MAXW][160]; /* the tick thread only */
  ctl_prov_out po = {0, died, 0, stopped, 0, MAXW};
  /* Workers an earlier controller started and left running when it
   * crashed: adopted, so that they can be scaled in, their cores are not
   * handed out twice and their death is seen at once. */
  for (size_t k = 0; c->prov && c->adopt && k < n; k++) {
    vr_errbuf e2 = {0};
    int arc = ctl_prov_adopt(c->prov, ws[k].id, ws[k].meta, &e2);
    if (arc == VR_EUNSUPPORTED) c->adopt = 0;
    if (arc) continue;
    pthread_mutex_lock(&c->mu);
    vr__ctl_event(c, "worker %s adopted: started by an earlier controller, still running",
                  ws[k].id);
    pthread_mutex_unlock(&c->mu);
  }
  if (c->prov) {
    const char *live[MAXW];
    int64_t lease[MAXW];
    for (size_t k = 0; k < n && k < MAXW; k++) live[k] = ws[k].id, lease[k] = ws[k].lease_ms;
    ctl_prov_view v = {live, lease, n < MAXW ? n : MAXW, (int64_t)c->start_timeout_s * 1000,
                       (int64_t)c->lost_timeout_s * 1000, c->back_ns};
    if (ctl_prov_poll(c->prov, &v, &po, &err)) vr_warn("controller: provider: %s", err.msg);
  }
  int starting = po.starting, n_died = po.n_died;
  pthread_mutex_lock(&c->mu);
  for (int i = 0; i < po.n_stopped; i++) vr__ctl_event(c, "%s", stopped[i]);
  for (int i = 0; i < n_died; i++) {
    c->workers_died++;
    vr__ctl_event(c, "worker %s exited unexpectedly (provider): removing it", died[i]);
    if (c->n_dead < MAXW) {
      memcpy(c->dead[c->n_dead], died[i], 63);
      c->dead[c->n_dead++][63] = 0;
    }
  }
  pthread_mutex_unlock(&c->mu);
  for (int i = 0; i < n_died; i++) {
    vr_errbuf e2 = {0};
    vr_registry_worker_deregister(c->reg, died[i], &e2); /* its lease ends anyway */
  }
  pthread_mutex_lock(&c->mu);
  /* forget the dead once neither the registry lists them nor the last
   * state holds them: one still in c->w and not listed is kept through a
   * grace by keep_missing, unless it is known dead */
  for (int i = 0; i < c->n_dead;) {
    int listed = 0;
    for (size_t k = 0; k < n; k++) listed |= !strcmp(c->dead[i], ws[k].id);
    for (size_t k = 0; k < c->nw; k++) listed |= !strcmp(c->dead[i], c->w[k].id);
    if (!listed) memmove(c->dead[i], c->dead[--c->n_dead], 64);
    else i++;
  }
  size_t alive = 0;
  for (size_t k = 0; k < n; k++)
    if (!vr__ctl_is_dead(c, ws[k].id)) ws[alive++] = ws[k];
  static int prev[MAXW]; /* the tick thread only */
  n = vr__ctl_keep_missing(c, ws, alive, prev, left, nleft, vr_now_ns());
  vr_free(left);
  pthread_mutex_unlock(&c->mu);
  /* Fault injection for the tests (VARIO_FAULT_REGISTRY_GAP_MS): the
   * window between the listing and the instance reads, where a Redis that
   * restarted or stalled made them disagree, held open. */
  if (c->fault_gap_ms) usleep((useconds_t)c->fault_gap_ms * 1000);
  /* their models (read outside the lock: network); kept for the policy */
  static vr_instance_info *got[MAXW];
  static size_t ngot[MAXW];
  int irc = vr__ctl_read_instances(c, ws, n, prev, got, ngot, &err);
  if (irc == VR_EIO) {
    pthread_mutex_lock(&c->mu);
    vr__ctl_registry_lost(c, err.msg);
    pthread_mutex_unlock(&c->mu);
    vr_free(ws);
    return;
  }
  int stale = vr_redis_reconnects(rd) != r0 || vr__ctl_stalled_since(c, rd);
  if (irc || stale) {
    /* The reads spanned a new connection (to a Redis that restarted empty
     * after the listing?) or a stall (Redis paused past the leases, which
     * then ended), or found a listed worker no longer live (its lease
     * ended after the listing: a Redis paused between running the listing
     * and sending it): a listed worker's instances read as none, its
     * models were placed again and the table routed them nowhere.
     * Dropped; the next period reads again, as one that is back
     * (keep_missing) after a new connection or a stall. A lease that
     * ended after the listing is not such a sign by itself (a worker may
     * just have died): when Redis stalled, the listing's own wait has
     * already made this period one that is back. */
    for (size_t k = 0; k < n; k++) vr_free(got[k]);
    pthread_mutex_lock(&c->mu);
    c->reread = stale;
    pthread_mutex_unlock(&c->mu);
    vr_free(ws);
    return;
  }
  static char wm[MAXW][1024];
  static int wa[MAXW];
  static int64_t ke[MAXW]; /* c->wkept_end to be */
  static vr_instance_info *old[MAXW]; /* last period's, aligned with c->w */
  static size_t nold[MAXW];
  for (size_t k = 0; k < MAXW; k++) {
    old[k] = c->vinst[k];
    nold[k] = c->nvinst[k];
    c->vinst[k] = NULL;
    c->nvinst[k] = 0;
  }
  for (size_t k = 0; k < n; k++) {
    vr_instance_info *in = got[k];
    size_t ni = ngot[k];
    wm[k][0] = 0;
    wa[k] = strstr(ws[k].meta, "\"apps\":1") != NULL;
    ke[k] = prev[k] >= 0 ? vr__ctl_grace_end(c, (size_t)prev[k]) : 0;
    if (prev[k] >= 0) { /* kept: what it held when last listed */
      memcpy(wm[k], c->wmodels[prev[k]], sizeof wm[k]);
      wa[k] = c->wapps[prev[k]];
      c->vinst[k] = old[prev[k]];
      c->nvinst[k] = nold[prev[k]];
      old[prev[k]] = NULL;
      continue;
    }
    size_t off = 0;
    for (size_t i = 0; i < ni; i++)
      if (!strcmp(in[i].state, "ready")) {
        int w = snprintf(wm[k] + off, sizeof wm[k] - off, "%s%s", off ? "," : "", in[i].variant);
        if (w > 0 && (size_t)w < sizeof wm[k] - off) off += (size_t)w;
      }
    c->vinst[k] = in;
    c->nvinst[k] = ni;
  }
  for (size_t k = 0; k < MAXW; k++) vr_free(old[k]);
  static char models[MAXM][128];
  int nm = scan_models(c, models, MAXM);
  nm = vr__ctl_pipes_exclude(c, models, nm); /* a pipeline policy's own */
  pthread_mutex_lock(&c->mu);
  vr__ctl_log_changes(c, ws, n, prev);
  if (n) memcpy(c->w, ws, n * sizeof *ws);
  c->nw = n;
  for (size_t k = 0; k < n; k++) {
    memcpy(c->wmodels[k], wm[k], sizeof wm[k]);
    c->wapps[k] = wa[k];
    c->wkept_end[k] = ke[k];
  }
  c->starting = starting;
  /* placement (a body under AsyFunc: the policy's model facts first) */
  if (c->cdrv) {
    pthread_mutex_unlock(&c->mu);
    vr__ctl_model_configs(c, models, nm);
    pthread_mutex_lock(&c->mu);
  }
  int64_t now = vr_now_ns();
  static unsigned char has[MAXM * MAXW];
  static int lm[MAXM * MAXW], lw[MAXM * MAXW];
  for (int m = 0; m < nm; m++)
    for (size_t k = 0; k < n; k++)
      has[m * (int)n + (int)k] = in_list(wm[k], models[m]) ? 1
                                 : vr__ctl_pending_for(c, models[m], ws[k].id, now) ? 2 : 0;
  vr_cplan_in in = {(int)n, nm, has, c->replicas, c->prov ? c->min_workers : 0,
                    c->max_workers, starting};
  vr_cplan_out out = {lm, lw, 0, 0};
  if (!vr_cluster_plan(&in, &out)) {
    for (int i = 0; i < out.n_loads; i++) {
      vr__ctl_event(c, "placing %s on %s", models[lm[i]], ws[lw[i]].id);
      vr__ctl_start_load(c, models[lm[i]], &ws[lw[i]], now);
    }
  }
  /* A Redis that restarted empty has no table: publish ours again. */
  if (recheck && c->routes_body) {
    pthread_mutex_unlock(&c->mu);
    int64_t v = 0;
    char *cur = NULL;
    int grc = vr_registry_get_routes(c->reg, TABLE, &v, &cur, &err);
    pthread_mutex_lock(&c->mu);
    if ((grc == VR_ENOENT || (!grc && v != c->routes_version)) && c->routes_body) {
      vr__ctl_event(c, "routing table missing or replaced in the registry: publishing again");
      vr_free(c->routes_body);
      c->routes_body = NULL;
    }
    vr_free(cur);
  }
  /* routes also name the models planned pipelines run (hops go by model) */
  static char rmodels[MAXM][128];
  if (nm) memcpy(rmodels, models, (size_t)nm * sizeof rmodels[0]);
  int nrm = vr__ctl_pipes_models(c, rmodels, nm, MAXM);
  char *body = build_routes(c, rmodels, nrm);
  int publish = body && (!c->routes_body || strcmp(body, c->routes_body));
  pthread_mutex_unlock(&c->mu);
  for (int i = 0; c->prov && i < out.add_workers; i++) {
    char why[96];
    snprintf(why, sizeof why, "%zu live, %d wanted", n, c->min_workers);
    if (vr__ctl_start_worker(c, why)) break;
  }
  if (publish) {
    int64_t ver = 0;
    if (vr_registry_put_routes(c->reg, TABLE, body, -1, &ver, &err)) {
      vr_warn("controller: publishing routes: %s", err.msg);
      vr_free(body);
    } else {
      pthread_mutex_lock(&c->mu);
      vr_free(c->routes_body);
      c->routes_body = body;
      c->routes_version = ver;
      vr__ctl_event(c, "routing table v%lld published", (long long)ver);
      pthread_mutex_unlock(&c->mu);
    }
  } else {
    vr_free(body);
  }
  pthread_mutex_lock(&c->mu);
  vr__ctl_unload_due(c, vr_now_ns());
  pthread_mutex_unlock(&c->mu);
  if (c->cdrv) vr__ctl_policy_step(c, ws, n, models, nm, starting + out.add_workers);
  if (c->pp) vr__ctl_pipes_step(c, ws, n, starting + out.add_workers);
  vr_free(ws);
}

/* ---- main ------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
          "usage: vario controller --registry URL --repo DIR [--port N]\n"
          "         [--replicas N] [--models M,M] [--period-ms N]\n"
          "         [--admin-token-file F] [--port-file F]\n"
          "         [--provider local|kubernetes --provider-opt K=V ...\n"
          "          --min-workers N [--max-workers N] [--worker-arg ARG ...]]\n"
          "         [--policy infaas|clipper|sm|asyfunc [--slo-ms N]]\n"
          "         [--store URL --pipeline-policy NAME [--pipeline-period-ms T]\n"
          "          [--pipeline-slack S] [--inferline-rate Q [--inferline-cv CV]]]\n"
          "  --registry URL   redis://HOST:PORT shared with workers and front ends\n"
          "  --repo DIR       model repository: what is placed, and what workers\n"
          "                   without it fetch (GET /v2/cluster/models/...)\n"
          "  --replicas N     workers per model (default 0 = every worker)\n"
          "  --models M,M     place only these (default: every model in --repo;\n"
          "                   - = none: workers with --store load what their own\n"
          "                   model-less control plane picks)\n"
          "  --port N         HTTP port (default 8100; 0 = any)\n"
          "  --host ADDR      IPv4 address to bind (default 127.0.0.1)\n"
          "  --advertise HOST address workers it starts fetch models from\n"
          "                   (default 127.0.0.1)\n"
          "  --period-ms N    control period (default 250)\n"
          "  --admin-token-file F  token for the workers' load API and for model\n"
          "                   downloads (or VARIO_ADMIN_TOKEN)\n"
          "  --provider KIND  start workers through a provider (cluster/provider.h)\n"
          "  --provider-opt K=V  provider option (docs/API.md)\n"
          "  --min-workers N  keep at least N workers (a dead one is replaced)\n"
          "  --max-workers N  never more than N (default: no cap)\n"
          "  --worker-arg A   argument for started workers (repeat per word)\n"
          "  --worker-cores N cores of each started worker (default 1)\n"
          "  --start-timeout-s N  a started worker is stopped and replaced when not\n"
          "                   registered within N s (default 120; raise it where\n"
          "                   starts are slow, e.g. large image pulls)\n"
          "  --lost-timeout-s N   one that had registered and dropped out of the\n"
          "                   registry while it runs (hung, stopped) when not back\n"
          "                   within N s and two of its leases (default 10)\n"
          "  --policy KIND    infaas|clipper|sm|asyfunc: the policy acts on the\n"
          "                   workers (replicate/unload models on them, add and\n"
          "                   remove workers through the provider; asyfunc:\n"
          "                   bodies spread over workers, shadows paired in the\n"
          "                   body's worker, for models with a blocks.json);\n"
          "                   default: placement only (every model on --replicas\n"
          "                   workers)\n"
          "  --slo-ms N       latency SLO the policy plans for (default 100)\n"
          "  --af-mls-period-s N  asyfunc: model-level scaling period (60)\n"
          "  --af-release-ms N    asyfunc: release a shadow this long after the\n"
          "                   queue fell below gamma per body (1000)\n"
          "  --af-shadow-process  asyfunc: shadows in their own process on the\n"
          "                   body's host (shared memory), not a thread\n"
          "  --worker-idle-s N  policy removes a worker idle this long (30)\n"
          "  --store URL      the metadata store the workers share (redis://...):\n"
          "                   the pipelines and the profiles the pipeline policy reads\n"
          "  --pipeline-policy NAME  loki, inferline, ... (vario serve --help): plans\n"
          "                   every stored pipeline over the workers, loads and\n"
          "                   unloads its stage models on them, publishes the plan\n"
          "                   the workers route hops by (run them with --store)\n"
          "  --pipeline-period-ms T  its replan period (default 10000)\n"
          "  --pipeline-slack S  its headroom on demand (default 1.25)\n"
          "  --inferline-rate Q, --inferline-cv CV  InferLine's planning trace\n");
}

/* The policies that act across workers. */
static int cluster_policy(const char *s) {
  int k = vr_policy_parse(s);
  return k == VR_POL_INFAAS || k == VR_POL_CLIPPER || k == VR_POL_SM || k == VR_POL_ASYFUNC;
}

static int pipe_policy(const char *s) {
  vr_errbuf e = {0};
  if (vr_pipe_policy_find(s, &e)) return 1;
  fprintf(stderr, "vario controller: %s\n", e.msg);
  return 0;
}


static char *read_token(const char *path) {
  char buf[1024];
  return vr__cli_read_token(path, buf, sizeof buf) ? vr_strdup(buf) : NULL;
}

/* Options that take a string, a bounded int or a positive number: one
 * row each, so that the loop below stays short. */
typedef struct str_opt {
  const char *name;
  const char **dst;
  int (*valid)(const char *); /* NULL: any */
} str_opt;
typedef struct int_opt {
  const char *name;
  long lo, hi;
  int *dst, *set; /* set (may be NULL) becomes 1 when given */
} int_opt;
typedef struct pos_opt {
  const char *name;
  double hi, *dst;
} pos_opt;

/* 1: argv[*i] was one of the tables' options (and *i moved past its
 * value), 0: it is none of them, -1: its value is missing or bad. */
static int table_opt(ctl *c, int argc, char **argv, int *i, int *slo, int *slo_set) {
  const str_opt strs[] = {
      {"--registry", &c->registry, NULL},         {"--repo", &c->repo, NULL},
      {"--models", &c->models_opt, NULL},         {"--admin-token-file", &c->token_file, NULL},
      {"--port-file", &c->port_file, NULL},       {"--advertise", &c->advertise, NULL},
      {"--host", &c->host, NULL},                 {"--provider", &c->provider, NULL},
      {"--store", &c->store_url, NULL},           {"--policy", &c->policy, cluster_policy},
      {"--pipeline-policy", &c->pipe_policy, pipe_policy},
  };
  const int_opt ints[] = {
      {"--port", 0, 65535, &c->port, NULL},
      {"--slo-ms", 1, 600000, slo, slo_set},
      {"--replicas", 0, 1000, &c->replicas, &c->replicas_set},
      {"--af-mls-period-s", 1, 86400, &c->af_mls_period_s, NULL},
      {"--af-release-ms", 1, 3600000, &c->af_release_ms, NULL},
      {"--worker-cores", 1, 1024, &c->worker_cores, NULL},
      {"--start-timeout-s", 1, 3600, &c->start_timeout_s, NULL},
      {"--lost-timeout-s", 1, 3600, &c->lost_timeout_s, NULL},
      {"--worker-idle-s", 1, 86400, &c->worker_idle_s, NULL},
      {"--period-ms", 10, 60000, &c->period_ms, NULL},
      {"--min-workers", 0, MAXW, &c->min_workers, NULL},
      {"--max-workers", 0, MAXW, &c->max_workers, NULL},
  };
  const pos_opt poss[] = {
      {"--pipeline-period-ms", 1e7, &c->pipe_period_ms},
      {"--pipeline-slack", 1e7, &c->pipe_slack},
      {"--inferline-rate", 1e7, &c->il_rate},
      {"--inferline-cv", 1e7, &c->il_cv},
  };
  const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
  for (size_t k = 0; k < sizeof strs / sizeof *strs; k++)
    if (!strcmp(a, strs[k].name)) {
      if (!v || (strs[k].valid && !strs[k].valid(v))) return -1;
      *strs[k].dst = v;
      return ++*i, 1;
    }
  for (size_t k = 0; k < sizeof ints / sizeof *ints; k++)
    if (!strcmp(a, ints[k].name)) {
      if (!v || vr__cli_parse_int(v, ints[k].lo, ints[k].hi, ints[k].dst)) return -1;
      if (ints[k].set) *ints[k].set = 1;
      return ++*i, 1;
    }
  for (size_t k = 0; k < sizeof poss / sizeof *poss; k++)
    if (!strcmp(a, poss[k].name)) {
      if (!v || vr__cli_parse_pos(v, poss[k].hi, poss[k].dst)) return -1;
      return ++*i, 1;
    }
  return 0;
}

int vr_cmd_controller(int argc, char **argv) {
  static ctl c; /* large; one per process */
  memset(&c, 0, sizeof c);
  c.port = 8100;
  c.period_ms = 250;
  c.worker_cores = 1;
  c.start_timeout_s = 120;
  c.lost_timeout_s = 10;
  c.slo_ms = 100;
  c.worker_idle_s = 30;
  int slo = 0, slo_set = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc, t;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if ((t = table_opt(&c, argc, argv, &i, &slo, &slo_set)) > 0) {
      continue;
    } else if (!t && !strcmp(a, "--provider-opt") && has && c.n_pargs < MAXARGS) {
      c.pargs[c.n_pargs++] = argv[++i];
    } else if (!t && !strcmp(a, "--worker-arg") && has && c.n_wargs < MAXARGS) {
      c.wargs[c.n_wargs++] = argv[++i];
    } else if (!t && !strcmp(a, "--af-shadow-process")) {
      c.af_shadow_process = 1;
    } else {
      fprintf(stderr, "vario controller: bad or incomplete option '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (slo_set) c.slo_ms = slo;
  if (!c.registry || !c.repo) {
    fprintf(stderr, "vario controller: --registry URL and --repo DIR are required\n");
    return 2;
  }
  if (c.token_file && !(c.token = read_token(c.token_file))) {
    fprintf(stderr, "vario controller: --admin-token-file %s: cannot read it\n", c.token_file);
    return 2;
  }
  const char *env = getenv("VARIO_ADMIN_TOKEN");
  if (!c.token && env && *env) c.token = vr_strdup(env);
  env = getenv("VARIO_FAULT_REGISTRY_GAP_MS");
#ifdef VR_FAULT_INJECTION
  if (env && *env && vr__cli_parse_int(env, 0, 10000, &c.fault_gap_ms)) {
    fprintf(stderr, "vario controller: VARIO_FAULT_REGISTRY_GAP_MS=%s: not 0..10000\n", env);
    return 2;
  }
#else
  if (env && *env)
    fprintf(stderr, "vario controller: VARIO_FAULT_REGISTRY_GAP_MS ignored: a test knob, and "
            "this build has no fault injection (cmake -DVR_FAULT_INJECTION=ON)\n");
#endif
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  vr_errbuf err = {0};
  pthread_mutex_init(&c.mu, NULL);
  pthread_mutex_init(&c.pol_mu, NULL);
  c.t0 = vr_now_ns();
  int rc = vr_registry_open(c.registry, NULL, &c.reg, &err);
  if (!rc && c.policy) {
    /* the policy replicates; the base placement keeps one copy each */
    if (!c.replicas_set) c.replicas = 1;
    rc = vr__ctl_policy_open(&c, &err);
  }
  if (!rc && c.pipe_policy && !c.store_url)
    rc = vr_errf(&err, VR_EINVAL, "--pipeline-policy needs --store URL (the workers' store)");
  if (!rc && c.pipe_policy) rc = vr__ctl_pipes_open(&c, &err);
  if (!rc && c.provider)
    rc = ctl_prov_open(c.provider, c.pargs, (size_t)c.n_pargs, &c.prov, &err);
  c.adopt = 1;
  vr_http_opts ho = {.host = c.host, .port = c.port, .handler = handle, .user = &c};
  if (!rc) rc = vr_http_start(&ho, &c.http, &err);
  if (rc) {
    fprintf(stderr, "vario controller: %s\n", err.msg);
    ctl_prov_close(c.prov);
    if (c.reg) vr_registry_close(c.reg);
    vr_cdrv_free(c.cdrv);
    vr__ctl_pipes_close(&c);
    vr_free(c.token);
    return 1;
  }
  /* Recovery: the routing table in Redis is the one in force; the first
   * tick republishes only if what workers report differs from it. */
  int64_t ver = 0;
  char *body = NULL;
  if (!vr_registry_get_routes(c.reg, TABLE, &ver, &body, &err)) {
    c.routes_body = body;
    c.routes_version = ver;
    vr__ctl_event(&c, "recovered routing table v%lld from the registry", (long long)ver);
  }
  if (c.port_file && vr__cli_write_port_file(c.port_file, vr_http_port(c.http)))
    fprintf(stderr, "vario controller: --port-file %s: cannot write it\n", c.port_file);
  fprintf(stderr, "vario controller: listening on http://%s:%d (registry %s)\n",
          c.host ? c.host : "127.0.0.1", vr_http_port(c.http), c.registry);
  for (;;) {
    tick(&c);
    struct timespec ts = {c.period_ms / 1000, (long)(c.period_ms % 1000) * 1000000};
    int sig = sigtimedwait(&set, NULL, &ts);
    if (sig == SIGINT || sig == SIGTERM) break;
  }
  /* local workers are stopped with the provider (the controller's
   * children); a Deployment's pods keep running */
  fprintf(stderr, "vario controller: stopping\n");
  vr_http_drain(c.http);
  vr_http_stop(c.http);
  ctl_prov_close(c.prov);
  vr_registry_close(c.reg);
  vr_free(c.routes_body);
  vr_free(c.token);
  vr_cdrv_free(c.cdrv);
  vr__ctl_pipes_close(&c);
  for (size_t k = 0; k < MAXW; k++) vr_free(c.vinst[k]);
  for (size_t k = 0; k < MAXM; k++) vr_free(c.mblk[k]);
  /* load threads still running hold &c: let them finish with the process */
  fprintf(stderr, "vario controller: stopped\n");
  return 0;
}
