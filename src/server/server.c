/*
 * Server lifecycle and routing of KServe v2 paths to handlers.
 */
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"
#include "policy/batch.h"
#include "server/kserve.h"
#include "server/grpc.h"
#include "server/server_int.h"

void vr_server_opts_init(vr_server_opts *o) {
  memset(o, 0, sizeof *o);
  o->spin_us = 50;
  o->grpc_port = -1;
  vr_runtime_opts_init(&o->rt);
}

int vr_server_http_status(int code) {
  switch (code) {
  case 0: return 200;
  case VR_ENOENT: return 404;
  case VR_EBUSY:
  case VR_ESHUTDOWN:
  case VR_ESTATE: return 503;
  case VR_EDEADLINE:
  case VR_ETIMEDOUT: return 504;
  case VR_EEXIST: return 409;
  case VR_ENOMEM:
  case VR_EIO:
  case VR_EBACKEND:
  case VR_EINTERNAL: return 500;
  default: return 400; /* EINVAL, EFORMAT, ESHAPE, ETYPE, ERANGE, ELIMIT,
                          EUNSUPPORTED, EINFEASIBLE */
  }
}

void vr_server_count(vr_server *s, int status) {
  int k = status / 100;
  if (k < 0 || k > 5) k = 0;
  __atomic_fetch_add(&s->http_status[k], 1, __ATOMIC_RELAXED);
}

int vr_server_spawn_admin(vr_server *s, vr_http_req *r, vr_http_handler done,
                          void *(*fn)(void *), void *arg) {
  int max = s->o.max_admin_jobs > 0 ? s->o.max_admin_jobs : 4;
  if (__atomic_add_fetch(&s->admin_jobs, 1, __ATOMIC_SEQ_CST) > max) {
    __atomic_fetch_sub(&s->admin_jobs, 1, __ATOMIC_SEQ_CST);
    char msg[128];
    snprintf(msg, sizeof msg, "%d admin jobs (loads, registrations) are already"
             " running; retry later", max);
    vr_server_count(s, 429);
    vr_http_error(r, 429, msg);
    vr_http_add_header(r, "Retry-After", "5");
    return 1;
  }
  vr_http_defer(r, done);
  if (vr_thread_detached(fn, arg)) {
    __atomic_fetch_sub(&s->admin_jobs, 1, __ATOMIC_SEQ_CST);
    vr_http_wake(r);
    return -1;
  }
  return 0;
}

void vr_server_reply_json(vr_http_req *r, int status, vr_sbuf *b) {
  size_t len;
  char *p = vr_sbuf_take(b, &len);
  if (!p) {
    vr_http_error(r, 500, "out of memory");
    return;
  }
  vr_http_respond(r, status, "application/json", p, len, (size_t)-1);
}

void vr__srv_add_due(vr_http_req *r, int64_t deadline_ns, int64_t batch_ns) {
  if (deadline_ns <= 0 || deadline_ns == VR_NO_DEADLINE) return;
  /* rounded up: the front end must not drop what this server would serve */
  int64_t due = deadline_ns - vr_http_arrived_ns(r) + (batch_ns > 0 ? batch_ns : 0);
  char v[32];
  snprintf(v, sizeof v, "%lld", (long long)(due > 0 ? (due + 999) / 1000 : 0));
  vr_http_add_header(r, VR_HTTP_DUE_HEADER, v);
}

static void reply_error(vr_server *s, vr_http_req *r, int status,
                        const char *msg) {
  vr_server_count(s, status);
  vr_http_error(r, status, msg);
}

static void reply_empty(vr_server *s, vr_http_req *r, int status) {
  vr_server_count(s, status);
  vr_http_respond(r, status, NULL, NULL, 0, (size_t)-1);
}

static void server_metadata(vr_server *s, vr_http_req *r) {
  vr_sbuf b;
  vr_sbuf_init(&b);
  vr_sbuf_puts(&b, "{\"name\":\"vario\",\"version\":\"" VR_SRV_VERSION "\","
               "\"extensions\":[");
  for (int i = 0; vr__srv_extensions[i]; i++)
    vr_sbuf_printf(&b, i ? ",\"%s\"" : "\"%s\"", vr__srv_extensions[i]);
  vr_sbuf_puts(&b, "]}");
  vr_server_count(s, 200);
  vr_server_reply_json(r, 200, &b);
}

static void put_tensor_infos(vr_sbuf *b, const vr_tensor_info *t, int n) {
  for (int i = 0; i < n; i++) {
    vr_sbuf_puts(b, i ? ",{\"name\":" : "{\"name\":");
    vr_sbuf_json_str(b, t[i].name);
    vr_sbuf_printf(b, ",\"datatype\":\"%s\",\"shape\":[",
                   vr_dtype_kserve(t[i].dtype));
    for (int d = 0; d < t[i].ndim; d++)
      vr_sbuf_printf(b, d ? ",%lld" : "%lld", (long long)t[i].shape[d]);
    vr_sbuf_puts(b, "]}");
  }
}

static void model_metadata(vr_server *s, vr_http_req *r, const char *model) {
  vr_model_config c;
  if (vr_rt_model_config(s->rt, model, &c)) {
    char msg[256];
    snprintf(msg, sizeof msg, "model '%.128s' is not loaded", model);
    reply_error(s, r, 404, msg);
    return;
  }
  vr_sbuf b;
  vr_sbuf_init(&b);
  vr_sbuf_puts(&b, "{\"name\":");
  vr_sbuf_json_str(&b, c.name);
  vr_sbuf_printf(&b, ",\"versions\":[\"%d\"],\"platform\":\"onnxruntime_onnx\","
                 "\"inputs\":[", c.version > 0 ? c.version : 1);
  put_tensor_infos(&b, c.inputs, c.n_inputs);
  vr_sbuf_puts(&b, "],\"outputs\":[");
  put_tensor_infos(&b, c.outputs, c.n_outputs);
  vr_sbuf_printf(&b, "],\"parameters\":{\"max_batch_size\":%d,\"precision\":"
                 "\"%s\",\"threads\":%d,\"instances\":%d,"
                 "\"max_queue_delay_us\":%lld",
                 c.max_batch_size, vr_rt_precision_name(c.precision),
                 c.threads, c.instances, (long long)c.max_queue_delay_us);
  if (c.app[0]) {
    vr_sbuf_puts(&b, ",\"app\":");
    vr_sbuf_json_str(&b, c.app);
  }
  if (c.accuracy >= 0) vr_sbuf_printf(&b, ",\"accuracy\":%.6g", c.accuracy);
  vr_sbuf_printf(&b, ",\"queue_policy\":{\"max_queue_size\":%lld,"
                 "\"default_timeout_microseconds\":%lld,\"timeout_action\":\"%s\","
                 "\"allow_timeout_override\":%s}",
                 (long long)c.queue.max_queue_size, (long long)c.queue.default_timeout_us,
                 c.queue.delay ? "DELAY" : "REJECT",
                 c.queue.allow_timeout_override ? "true" : "false");
  vr_sbuf_puts(&b, "}}");
  vr_server_count(s, 200);
  vr_server_reply_json(r, 200, &b);
}

static void metrics(vr_server *s, vr_http_req *r) {
  vr_sbuf b;
  vr_sbuf_init(&b);
  vr_server_metrics(s, &b);
  size_t len;
  char *p = vr_sbuf_take(&b, &len);
  vr_server_count(s, 200);
  vr_http_respond(r, 200, "text/plain; version=0.0.4", p, len, (size_t)-1);
}

/* GET /v2/models/{m}/ready: 200 ready, 400 not (unknown, loading, no
 * instance). KServe v2 says 4xx means false and Triton answers 400 with an
 * error body (http_server.cc HandleModelReady); a 5xx would read as the
 * server failing, not as the model's answer. */
static void model_ready(vr_server *s, vr_http_req *r, const char *m) {
  if (vr_rt_model_ready(s->rt, m)) return reply_empty(s, r, 200);
  char msg[256];
  snprintf(msg, sizeof msg, "model '%.128s' is not ready", m);
  reply_error(s, r, 400, msg);
}

enum { M_GET = 1, M_POST = 2 }; /* a request's method; a route's, or'ed */

void vr__srv_reply_405(vr_server *s, vr_http_req *r, const char *allow) {
  reply_error(s, r, 405, "method not allowed");
  vr_http_add_header(r, "Allow", allow);
}

/* 405 with the methods the path takes in Allow, which HTTP requires of a
 * 405 (RFC 9110 15.5.6); HEAD goes wherever GET does. */
static void reply_405(vr_server *s, vr_http_req *r, int methods) {
  vr__srv_reply_405(s, r, methods == M_POST ? "POST"
                          : methods == M_GET ? "GET, HEAD"
                                             : "GET, HEAD, POST");
}

/* The methods /v2/models/{m}/<rest> takes; 0 for no such path. */
static int model_methods(const char *rest) {
  static const char *const gets[] = {"", "ready", "stats", "config", "instances"};
  if (!strcmp(rest, "infer")) return M_POST;
  for (size_t i = 0; i < sizeof gets / sizeof *gets; i++)
    if (!strcmp(rest, gets[i])) return M_GET;
  return 0;
}

/* Routes /v2/models/{m}[/versions/{v}]/<rest>; method: M_GET, M_POST or 0. */
static void route_model(vr_server *s, vr_http_req *r, int method, char **seg,
                        int n) {
  int get = method == M_GET;
  const char *m = seg[2];
  int k = 3;
  if (n >= 5 && !strcmp(seg[3], "versions")) {
    char want[16];
    snprintf(want, sizeof want, "%d", vr__srv_version(s, m));
    if (strcmp(seg[4], want) && n == 6 && !strcmp(seg[5], "ready") && get) {
      /* a readiness question answered false, as for any model not ready */
      char msg[300];
      snprintf(msg, sizeof msg, "model '%.128s' version '%.64s' is not ready", m, seg[4]);
      reply_error(s, r, 400, msg);
      return;
    }
    if (strcmp(seg[4], want)) {
      char msg[300];
      snprintf(msg, sizeof msg, "model '%.128s' has no version '%.64s' (only"
               " \"%s\")", m, seg[4], want);
      reply_error(s, r, 404, msg);
      return;
    }
    k = 5;
  }
  const char *rest = k < n ? seg[k] : "";
  if (k + 1 < n) {
    reply_error(s, r, 404, "unknown path");
    return;
  }
  int takes = model_methods(rest);
  if (!takes) reply_error(s, r, 404, "unknown path");
  else if (!(takes & method)) reply_405(s, r, takes);
  else if (!*rest) model_metadata(s, r, m);
  else if (!strcmp(rest, "ready")) model_ready(s, r, m);
  else if (!strcmp(rest, "infer")) vr_server_infer(s, r, m);
  else if (!strcmp(rest, "stats")) vr_server_model_stats(s, r, m);
  else if (!strcmp(rest, "config")) vr_server_model_config(s, r, m);
  else vr_server_model_instances(s, r, m);
}

/* Triton's HTTP extensions Vario does not implement: a client that calls
 * one (tritonclient's get_system_shared_memory_status, ...) gets 400 with
 * the extension named, not a bare 404. NULL for any other path. */
static const char *unsupported_extension(char **seg, int n) {
  if (n < 2 || strcmp(seg[0], "v2")) return NULL;
  if (!strcmp(seg[1], "systemsharedmemory"))
    return "the system shared-memory extension (/v2/systemsharedmemory) is not supported";
  if (!strcmp(seg[1], "cudasharedmemory"))
    return "the CUDA shared-memory extension (/v2/cudasharedmemory) is not supported";
  if (!strcmp(seg[1], "logging"))
    return "the logging extension (/v2/logging) is not supported";
  int k = n >= 6 && !strcmp(seg[1], "models") && !strcmp(seg[3], "versions") ? 5 : 3;
  if (!strcmp(seg[1], "trace") ||
      (!strcmp(seg[1], "models") && n > k && !strcmp(seg[k], "trace")))
    return "the trace extension (/v2/trace, /v2/models/{m}/trace) is not supported";
  return NULL;
}

/* The routes of fixed shape ('*' matches one segment), with the methods
 * each takes; the others (/v2/models/..., /v2/apps/..., /v2/pipelines/...)
 * have routers of their own. One table, so that a path of another method
 * is answered 405, as HTTP asks, from the same list that routes it. */
enum { RT_METRICS, RT_DASH, RT_DASH_FILE, RT_DASH_DATA, RT_META, RT_LIVE, RT_READY, RT_STATS,
       RT_INDEX, RT_LOAD, RT_UNLOAD, RT_SHADOW, RT_UNSHADOW };
static const struct fixed_route {
  const char *path;
  int methods, id;
} fixed_routes[] = {
    {"metrics", M_GET, RT_METRICS},
    {"dashboard", M_GET, RT_DASH},
    {"dashboard/*", M_GET, RT_DASH_FILE},
    {"v2/dashboard/data", M_GET, RT_DASH_DATA},
    {"v2", M_GET, RT_META},
    {"v2/health/live", M_GET, RT_LIVE},
    {"v2/health/ready", M_GET, RT_READY},
    {"v2/models/stats", M_GET, RT_STATS},
    {"v2/repository/index", M_GET | M_POST, RT_INDEX},
    {"v2/repository/models/*/load", M_POST, RT_LOAD},
    {"v2/repository/models/*/unload", M_POST, RT_UNLOAD},
    {"v2/repository/models/*/shadow", M_POST, RT_SHADOW},
    {"v2/repository/models/*/unshadow", M_POST, RT_UNSHADOW},
};

static int path_is(const char *pat, char **seg, int n) {
  int i = 0;
  for (const char *p = pat; *p; i++) {
    size_t len = strcspn(p, "/");
    if (i >= n || (!(len == 1 && *p == '*') &&
                   (strlen(seg[i]) != len || memcmp(seg[i], p, len))))
      return 0;
    p += len + (p[len] == '/');
  }
  return i == n;
}

static const struct fixed_route *fixed_route(char **seg, int n) {
  for (size_t i = 0; i < sizeof fixed_routes / sizeof *fixed_routes; i++)
    if (path_is(fixed_routes[i].path, seg, n)) return &fixed_routes[i];
  return NULL;
}

static void run_fixed(vr_server *s, vr_http_req *r, int id, char **seg) {
  switch (id) {
  case RT_METRICS: return metrics(s, r);
  case RT_DASH: return vr_server_dashboard_file(s, r, "dashboard.html");
  case RT_DASH_FILE: return vr_server_dashboard_file(s, r, seg[1]);
  case RT_DASH_DATA: return vr_server_dashboard_data(s, r);
  case RT_META: return server_metadata(s, r);
  case RT_LIVE: return reply_empty(s, r, 200);
  /* not ready is 400 with no body, as Triton (HandleServerHealth) and
   * KServe v2 (4xx = false); probes and curl -f fail on it all the same */
  case RT_READY: return reply_empty(s, r, vr__srv_ready(s) ? 200 : 400);
  case RT_STATS: return vr_server_model_stats(s, r, NULL);
  case RT_INDEX: return vr_server_repo_index(s, r);
  case RT_LOAD: case RT_UNLOAD: return vr_server_repo_load(s, r, seg[3], id == RT_LOAD);
  default: return vr_server_repo_shadow(s, r, seg[3], id == RT_SHADOW);
  }
}

static void handle(vr_http_req *r, void *user) {
  vr_server *s = user;
  const char *method = vr_http_method(r);
  int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
  int post = !strcmp(method, "POST");
  char buf[1024], *seg[10];
  int n = vr_http_path_segments(vr_http_url(r), buf, sizeof buf, seg, 10);
  const char *ext = unsupported_extension(seg, n);
  if (ext) { /* before the access check: there is no such endpoint */
    reply_error(s, r, 400, ext);
    return;
  }
  int admin = vr__access_is_admin(method, seg, n);
  int open_path = n >= 1 && (!strcmp(seg[0], "metrics") ||
                             (n >= 2 && !strcmp(seg[1], "health")));
  if (!(open_path && !admin) && vr__access_check(s, r, admin)) return;
  /* The control plane, jobs and pipelines are attached after the listener
   * starts; the handlers read them unlocked, so nothing but the probes runs
   * before they are (the acquire pairs with vr_server_attached). */
  if (s->o.control_later && !(n >= 2 && !strcmp(seg[1], "health")) &&
      !__atomic_load_n(&s->started, __ATOMIC_ACQUIRE))
    return reply_error(s, r, 503, "the server is starting (its control plane is not attached yet)");
  if (!strcmp(method, "DELETE") && n == 5 && !strcmp(seg[0], "v2") &&
      !strcmp(seg[1], "apps") && !strcmp(seg[3], "models"))
    return vr__server_app_unregister(s, r, seg[2], seg[4]);
  if (n >= 2 && !strcmp(seg[0], "v2") && !strcmp(seg[1], "pipelines"))
    return vr_server_pipes(s, r, method, seg, n);
  const struct fixed_route *fr = fixed_route(seg, n);
  int m = get ? M_GET : post ? M_POST : 0;
  if (fr && (fr->methods & m)) return run_fixed(s, r, fr->id, seg);
  if (fr) return reply_405(s, r, fr->methods);
  if (n >= 3 && !strcmp(seg[0], "v2") && !strcmp(seg[1], "models"))
    return route_model(s, r, m, seg, n);
  /* any other path is 404 whatever the method (a 405 says the path
   * exists, and names its methods) */
  if (n >= 2 && !strcmp(seg[0], "v2") && (!strcmp(seg[1], "apps") || !strcmp(seg[1], "jobs")))
    return vr_server_apps(s, r, method, seg, n);
  reply_error(s, r, 404, "unknown path");
}

static void load_all(vr_server *s) {
  DIR *d = opendir(s->repo);
  if (!d) {
    vr_error("repository %s: cannot open", s->repo);
    return;
  }
  struct dirent *e;
  int models = 0;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue; /* .uploads, .jobs: the server's own */
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", s->repo, e->d_name);
    struct stat st;
    if (stat(path, &st) || !S_ISDIR(st.st_mode)) continue; /* README, ... */
    if (!vr__srv_valid_name(e->d_name)) {
      /* the names the load API takes: one with a tab, a newline or bytes
       * that are not UTF-8 would reach /metrics and JSON as it is, and
       * could not be unloaded over HTTP */
      vr_warn("%s: not a valid model name (the repository API's rule); skipped", path);
      continue;
    }
    if (!vr_model_dir_is_model(path)) {
      /* Said, not skipped silently: a repository one level off (models in
       * DIR/x/<model>/) would otherwise start serving nothing. */
      vr_warn("%s: not a model directory (no model.onnx, config.pbtxt or "
              "<version>/model.onnx); skipped", path);
      continue;
    }
    models++;
    vr_errbuf err = {0};
    vr__srv_expect(s, e->d_name, 1); /* failed loads keep it not ready */
    if (vr_server_load(s, e->d_name, &err))
      vr_error("model '%s' not loaded: %s", e->d_name, err.msg);
  }
  closedir(d);
  if (!models) /* ready (nothing to wait for, as Triton), but said */
    vr_warn("repository %s holds no model directory: serving no model (load "
            "models with POST /v2/repository/models/{m}/load)", s->repo);
}

int vr_server_load(vr_server *s, const char *name, vr_errbuf *err) {
  return vr_server_load_pair(s, name, 0, 0, err);
}

static int load_pair(vr_server *s, const char *name, int pair_begin, int pair_end,
                     vr_errbuf *err) {
  if (!s->repo) return vr_errf(err, VR_ENOENT, "no model repository");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", s->repo, name);
  struct stat st;
  if (s->o.fetch && stat(dir, &st) != 0) {
    int frc = s->o.fetch(s->o.fetch_user, s->repo, name, err);
    if (frc) return frc;
  }
  vr_model_config c;
  /* Instances of a model the control plane loaded (model-less serving,
   * config instances 0) are its to manage: a reload would pull them away. */
  if (vr_rt_model_config(s->rt, name, &c) == 0 && c.instances == 0)
    return vr_errf(err, VR_EEXIST, "model '%s' is managed by the control plane"
                   " (model-less serving); it is not reloaded from the repository", name);
  int rc = vr_model_dir_load(dir, &c, err);
  if (rc) return rc;
  /* 0 is the control plane's (it adds instances itself): from the
   * repository it made a model that never served, kept the server not
   * ready, and could not be reloaded (taken for the control plane's) */
  if (c.instances == 0)
    return vr_errf(err, VR_EINVAL, "%s: \"instances\" is 0: a repository model needs"
                   " 1..%d", dir, VR_RT_MAX_INSTANCES);
  /* The directory names the model (as Triton); an auto-completed config
   * (bare model.onnx) has no name of its own to differ. */
  if (c.name[0] && strcmp(c.name, name))
    vr_warn("%s: config name '%s' differs; serving it as '%s'", dir, c.name,
            name);
  snprintf(c.name, sizeof c.name, "%s", name);
  c.pair_begin = pair_end > 0 ? pair_begin : 0;
  c.pair_end = pair_end > 0 ? pair_end : 0;
  /* Triton: loading a loaded model reloads it (new versions, a changed
   * config), without a gap; a config that fails leaves the old one. */
  return vr_rt_reload(s->rt, &c, err);
}

int vr_server_load_pair(vr_server *s, const char *name, int pair_begin, int pair_end,
                        vr_errbuf *err) {
  vr_errbuf mine = {0};
  if (!err) err = &mine;
  int rc = load_pair(s, name, pair_begin, pair_end, err);
  /* kept for the repository index; a model the control plane manages
   * (VR_EEXIST) was not refused for what it is */
  if (rc != VR_EEXIST) vr__srv_load_error(s, name, rc ? err->msg : NULL);
  return rc;
}

int vr_server_create(const vr_server_opts *o, vr_server **out,
                     vr_errbuf *err) {
  vr_server *s = VR_NEW(vr_server);
  if (!s) return vr_errf(err, VR_ENOMEM, "out of memory");
  s->o = *o;
  if (o->repo && !(s->repo = vr_strdup(o->repo))) {
    vr_free(s);
    return vr_errf(err, VR_ENOMEM, "out of memory");
  }
  if (o->data_root) {
    char rp[4096];
    if (!realpath(o->data_root, rp) || !(s->data_root = vr_strdup(rp))) {
      vr_free(s->repo);
      vr_free(s);
      return vr_errf(err, VR_EINVAL, "--data-root '%s': not a directory", o->data_root);
    }
  }
  s->overhead = vr_malloc(sizeof *s->overhead);
  if (s->overhead) vr_hist_init(s->overhead);
  int rc = vr_runtime_create(&o->rt, &s->rt, err);
  if (rc) {
    vr_free(s->overhead);
    vr_free(s->data_root);
    vr_free(s->repo);
    vr_free(s);
    return rc;
  }
  pthread_mutex_init(&s->expect_mu, NULL);
  vr_map_init(&s->expected);
  vr_map_init(&s->load_errors);
  s->t0_ns = vr_now_ns();
  /* Listen first, load after (as Triton): a taken port fails at once, not
   * after every model loaded, and /v2/health/ready says 400 while loading. */
  vr_http_opts ho = {.host = o->host, .port = o->port, .max_body = o->max_body,
                     .max_conns = o->max_conns, .handler = handle, .user = s,
                     .header_timeout_ms = o->header_timeout_ms,
                     .body_timeout_ms = o->body_timeout_ms, .reserve = o->conn_reserve,
                     .max_per_client = o->max_conns_per_client,
                     .cap_loopback = o->cap_loopback, .tls_key_pem = o->tls_key_pem,
                     .tls_cert_pem = o->tls_cert_pem};
  rc = vr_http_start(&ho, &s->http, err);
  if (!rc && o->grpc_port >= 0 &&
      (rc = vr_grpc_start(s, o->host, o->grpc_port, &s->grpc, err)))
    vr_http_stop(s->http);
  if (rc) {
    vr_map_free(&s->expected);
    vr_map_free(&s->load_errors);
    pthread_mutex_destroy(&s->expect_mu);
    vr_runtime_free(s->rt);
    vr_free(s->overhead);
    vr_free(s->data_root);
    vr_free(s->repo);
    vr_free(s);
    return rc;
  }
  if (s->repo && o->load_all) load_all(s);
  if (!o->control_later) __atomic_store_n(&s->started, 1, __ATOMIC_SEQ_CST);
  *out = s;
  return 0;
}

int vr_server_port(const vr_server *s) { return vr_http_port(s->http); }
int vr_server_grpc_port(const vr_server *s) { return vr_grpc_port(s->grpc); }
vr_runtime *vr_server_runtime(vr_server *s) { return s->rt; }
const char *vr_server_repo(const vr_server *s) { return s->repo; }

void vr_server_shutdown(vr_server *s) {
  if (!s || s->shutting_down) return;
  __atomic_store_n(&s->shutting_down, 1, __ATOMIC_SEQ_CST);
  vr_http_drain(s->http);        /* 1. stop accepting */
  while (__atomic_load_n(&s->admin_jobs, __ATOMIC_SEQ_CST) > 0 ||
         __atomic_load_n(&s->pipe_lookups, __ATOMIC_SEQ_CST) > 0)
    usleep(1000);                /* 2. let loads/unloads, lookups finish */
  vr_rt_shutdown(s->rt);         /* 3. answer every queued request */
  vr_grpc_stop(s->grpc);         /*    gRPC: send those answers, close */
  s->grpc = NULL;
  /* 4. give the event thread time to send those answers (bounded). */
  int64_t until = vr_now_ns() + 5 * VR_NS_PER_S;
  while (vr_http_inflight(s->http) > 0 && vr_now_ns() < until) usleep(1000);
  if (vr_http_inflight(s->http) > 0)
    vr_warn("shutdown: %d request(s) still open after 5 s (clients that"
            " stopped sending mid-request); closing them",
            vr_http_inflight(s->http));
}

void vr_server_free(vr_server *s) {
  if (!s) return;
  vr_server_shutdown(s);
  vr_http_stop(s->http);
  vr_runtime_free(s->rt);
  vr_map_free(&s->expected);
  size_t it = 0;
  const char *k;
  void *why;
  while (vr_map_next(&s->load_errors, &it, &k, &why)) vr_free(why);
  vr_map_free(&s->load_errors);
  pthread_mutex_destroy(&s->expect_mu);
  vr_free(s->overhead);
  vr_free(s->data_root);
  vr_free(s->repo);
  vr_free(s);
}
