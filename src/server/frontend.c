/* `vario frontend` (frontend.h): KServe v2 HTTP in, forwarded to workers. */
#include "server/frontend.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/hist.h"
#include "server/http.h"
#include "server/sbuf.h"

struct vr_frontend {
  vr_frontend_opts o;
  vr_http *http;
  vr_fwd *fwd;
  /* front-end overhead of forwarded requests: headers complete -> response
   * queued, minus the worker's round trip (event thread only) */
  vr_hist overhead;
  vr_hist round_trip;
  uint64_t by_class[6]; /* responses by status class (event thread) */
};

typedef struct fe_req {
  vr_frontend *fe;
  vr_http_req *http;
  vr_fwd_call call;
  char path[1024];
  char *headers; /* vr_malloc'd: a bearer token alone may be kilobytes */
  int64_t sent_ns, done_ns;
  int state; /* RUNNING -> DONE or PARKED, as in server_infer.c */
  int job;   /* a job's creation or record: its id is made WORKER.N */
} fe_req;

enum { RUNNING = 0, DONE = 1, PARKED = 2 };

void vr_frontend_opts_init(vr_frontend_opts *o) {
  memset(o, 0, sizeof *o);
  o->spin_us = 500;
  vr_fwd_opts_init(&o->fwd);
}

static void req_free(void *p) {
  fe_req *q = p;
  vr_fwd_call_clear(&q->call);
  vr_free(q->headers);
  vr_free(q);
}

static void reply(vr_frontend *fe, vr_http_req *r, int status, const char *ct,
                  char *body, size_t len, size_t ihcl) {
  int k = status / 100;
  fe->by_class[k >= 0 && k <= 5 ? k : 0]++;
  vr_http_respond(r, status, ct, body, len, ihcl);
}

static void reply_error(vr_frontend *fe, vr_http_req *r, int status, const char *msg) {
  int k = status / 100;
  fe->by_class[k >= 0 && k <= 5 ? k : 0]++;
  vr_http_error(r, status, msg);
}

static void reply_json(vr_frontend *fe, vr_http_req *r, int status, vr_sbuf *b) {
  size_t len;
  char *body = vr_sbuf_take(b, &len);
  reply(fe, r, status, "application/json", body, len, (size_t)-1);
}

/* The worker's answer headers the client needs too (fwd.h resp_headers:
 * Content-Type, WWW-Authenticate, Retry-After, Allow). */
static void pass_headers(vr_http_req *r, const char *lines) {
  for (const char *p = lines; p && *p;) {
    const char *colon = strchr(p, ':'), *eol = strstr(p, "\r\n");
    if (!colon || !eol || colon > eol) break;
    char name[64], value[1024];
    snprintf(name, sizeof name, "%.*s", (int)(colon - p), p);
    snprintf(value, sizeof value, "%.*s", (int)(eol - colon - 2), colon + 2);
    vr_http_add_header(r, name, value);
    p = eol + 2;
  }
}

/* ---- offline jobs -----------------------------------------------------
 * A job runs, and keeps its record and output, on the worker that took it,
 * whose ids (1, 2, ...) mean nothing to another worker. Through a front end
 * a job's id is "WORKER.N" (the worker's id, its own number): the answers
 * that carry one (201 of POST /v2/apps/{app}/jobs, 200 of GET /v2/jobs/{id})
 * are rewritten so, and GET /v2/jobs/WORKER.N[/output] goes to WORKER as
 * /v2/jobs/N[/output]. */

static int id_chars_ok(const char *s) {
  return *s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") ==
                   strlen(s);
}

/* The worker's job JSON with "id" and "output" naming WORKER.N; NULL when
 * it has no integer id (then it goes to the client as it is). */
static char *job_rewrite(const vr_fwd_call *c, size_t *len) {
  json_t *j = json_loadb(c->resp, c->resp_len, 0, NULL);
  json_t *id = json_is_object(j) ? json_object_get(j, "id") : NULL;
  char *out = NULL;
  if (json_is_integer(id) && id_chars_ok(c->worker)) {
    char gid[VR_FWD_ID_MAX + 24], url[VR_FWD_ID_MAX + 48];
    snprintf(gid, sizeof gid, "%s.%lld", c->worker, (long long)json_integer_value(id));
    snprintf(url, sizeof url, "/v2/jobs/%s/output", gid);
    json_object_set_new(j, "id", json_string(gid));
    if (json_object_get(j, "output")) json_object_set_new(j, "output", json_string(url));
    char *t = json_dumps(j, JSON_COMPACT);
    if (t && (out = vr_strdup(t))) *len = strlen(out);
    free(t);
  }
  json_decref(j);
  return out;
}

/* Whether r is GET (HEAD) /v2/models/{m}[/versions/{v}]/ready. */
static int is_model_ready(vr_http_req *r) {
  char buf[1024], *seg[10];
  int n = vr_http_path_segments(vr_http_url(r), buf, sizeof buf, seg, 10);
  const char *m = vr_http_method(r);
  return (!strcmp(m, "GET") || !strcmp(m, "HEAD")) && n >= 4 && !strcmp(seg[1], "models") &&
         !strcmp(seg[n - 1], "ready") && (n == 4 || (n == 6 && !strcmp(seg[3], "versions")));
}

/* Event thread: the worker answered (or no worker could). */
static void on_resume(vr_http_req *r, void *user) {
  vr_frontend *fe = user;
  fe_req *q = vr_http_state(r);
  vr_fwd_call *c = &q->call;
  if (!c->resp && is_model_ready(r)) {
    /* no worker of the model could say: it is not ready here (400, a
     * worker's answer), not the front end failing (502/503/504) */
    char msg[sizeof c->msg + 32];
    snprintf(msg, sizeof msg, "not ready: %s", c->msg[0] ? c->msg : "no answer");
    reply_error(fe, r, 400, msg);
  } else if (!c->resp) {
    reply_error(fe, r, c->status ? c->status : 502, c->msg[0] ? c->msg : "no answer");
  } else {
    /* the worker's Content-Type (none for an empty answer), else a guess */
    const char *ct = c->resp_ihcl != (size_t)-1 ? "application/octet-stream"
                                                 : "application/json";
    if (!c->resp_len || (c->resp_headers && !strncmp(c->resp_headers, "Content-Type:", 13)))
      ct = NULL;
    char *body = c->resp;
    size_t len = c->resp_len;
    char *job = q->job && (c->status == 200 || c->status == 201) && c->resp_ihcl == (size_t)-1
                    ? job_rewrite(c, &len)
                    : NULL;
    if (job) { /* the worker's body goes; the rewritten one is answered */
      vr_free(body);
      body = job;
    }
    c->resp = NULL; /* vr_http_respond takes it */
    reply(fe, r, c->status, ct, body, len, c->resp_ihcl);
    pass_headers(r, c->resp_headers);
  }
  if (c->worker[0]) vr_http_add_header(r, "Vario-Worker", c->worker);
  if (c->resp_len || c->status < 500) {
    int64_t now = vr_now_ns();
    int64_t rt = q->done_ns - q->sent_ns;
    int64_t over = now - vr_http_started_ns(r) - rt;
    vr_hist_record(&fe->overhead, (uint64_t)(over > 0 ? over : 0));
    vr_hist_record(&fe->round_trip, (uint64_t)(rt > 0 ? rt : 0));
  }
}

/* I/O thread (or the event thread when nothing could be sent). */
static void on_done(vr_fwd_call *c, void *user) {
  fe_req *q = user;
  q->done_ns = vr_now_ns();
  int expect = RUNNING;
  if (!__atomic_compare_exchange_n(&q->state, &expect, DONE, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    vr_http_wake(q->http);
}

/* Forwards r to a worker of key: to path, or (NULL) to the target as the
 * client sent it. job: the answer may carry a job id (rewritten). */
static void forward_to(vr_frontend *fe, vr_http_req *r, const char *key, const char *path,
                       int job) {
  fe_req *q = VR_NEW(fe_req);
  if (!q) return reply_error(fe, r, 500, "out of memory");
  q->fe = fe;
  q->http = r;
  q->job = job;
  vr_http_set_state(r, q, req_free);
  /* The target as the client sent it: path encoded again, query kept
   * (registration and jobs take their fields from it). */
  if (path) snprintf(q->path, sizeof q->path, "%s", path);
  else if (vr_http_target(r, q->path, sizeof q->path))
    return reply_error(fe, r, 414, "request target too long to forward");
  /* The headers a worker needs: the binary extension's split, the body's
   * type, and the client's credentials (a worker may require them). */
  static const char *const pass[] = {"Inference-Header-Content-Length",
                                     "Content-Type", "Authorization"};
  size_t cap = 1; /* sized to what the client sent (its head is bounded) */
  for (int i = 0; i < 3; i++) {
    const char *v = vr_http_header(r, pass[i]);
    if (v) cap += strlen(pass[i]) + strlen(v) + 4;
  }
  if (!(q->headers = vr_malloc(cap))) return reply_error(fe, r, 500, "out of memory");
  size_t hl = 0;
  q->headers[0] = 0;
  for (int i = 0; i < 3; i++) {
    const char *v = vr_http_header(r, pass[i]);
    if (v) hl += (size_t)snprintf(q->headers + hl, cap - hl, "%s: %s\r\n", pass[i], v);
  }
  vr_fwd_call *c = &q->call;
  /* HEAD goes on as GET: the worker's Content-Length then comes with its
   * body, and the client's HEAD answer (headers only) is that GET's. */
  c->method = strcmp(vr_http_method(r), "HEAD") ? vr_http_method(r) : "GET";
  c->path = q->path;
  c->headers = q->headers;
  c->body = vr_http_body(r, &c->body_len);
  c->origin_ns = vr_http_arrived_ns(r);
  c->done = on_done;
  c->user = q;
  q->sent_ns = vr_now_ns();
  /* Idle fast path: alone in the front end, the event thread waits (asleep
   * on the worker's socket, fwd.h sync_us) for the answer instead of
   * parking the connection and being woken by the I/O thread. */
  c->sync_us = fe->o.spin_us > 0 && vr_http_inflight(fe->http) == 1 ? fe->o.spin_us : 0;
  vr_fwd_send(fe->fwd, key, c);
  if (__atomic_load_n(&q->state, __ATOMIC_ACQUIRE) == DONE) return on_resume(r, fe);
  vr_http_defer(r, on_resume);
  int expect = RUNNING;
  if (!__atomic_compare_exchange_n(&q->state, &expect, PARKED, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    vr_http_wake(r);
}

static void forward(vr_frontend *fe, vr_http_req *r, const char *key) {
  forward_to(fe, r, key, NULL, 0);
}

/* GET /v2/jobs/WORKER.N[/output] -> WORKER's /v2/jobs/N[/output]. */
static void forward_job(vr_frontend *fe, vr_http_req *r, const char *gid, int output) {
  const char *dot = strrchr(gid, '.');
  char key[VR_FWD_KEY_MAX], path[96];
  if (!dot || dot == gid || !dot[1] || strspn(dot + 1, "0123456789") != strlen(dot + 1) ||
      strlen(dot + 1) > 10 || (size_t)(dot - gid) >= VR_FWD_ID_MAX)
    return reply_error(fe, r, 404, "no such job (a front end's job ids are WORKER.N)");
  snprintf(key, sizeof key, "w:%.*s", (int)(dot - gid), gid);
  if (!vr_fwd_has_worker(fe->fwd, key + 2)) /* its record went with it */
    return reply_error(fe, r, 404, "no such job (its worker is not in the routing table)");
  snprintf(path, sizeof path, "/v2/jobs/%s%s", dot + 1, output ? "/output" : "");
  forward_to(fe, r, key, path, !output);
}

static void routes_json(vr_frontend *fe, vr_http_req *r) {
  char *j = vr_fwd_table_current_json(fe->fwd);
  if (!j) return reply_error(fe, r, 500, "out of memory");
  reply(fe, r, 200, "application/json", j, strlen(j), (size_t)-1);
}

static void metrics(vr_frontend *fe, vr_http_req *r) {
  vr_fwd_stats st;
  vr_fwd_get_stats(fe->fwd, &st);
  vr_sbuf b;
  vr_sbuf_init(&b);
  vr_sbuf_printf(&b,
                 "# HELP vario_frontend_forwarded_total Requests forwarded to workers, by outcome.\n"
                 "# TYPE vario_frontend_forwarded_total counter\n"
                 "vario_frontend_forwarded_total{outcome=\"answered\"} %llu\n"
                 "vario_frontend_forwarded_total{outcome=\"failed\"} %llu\n"
                 "vario_frontend_forwarded_total{outcome=\"timeout\"} %llu\n"
                 "vario_frontend_forwarded_total{outcome=\"dropped\"} %llu\n"
                 "# HELP vario_frontend_retries_total Requests sent again to another worker.\n"
                 "# TYPE vario_frontend_retries_total counter\n"
                 "vario_frontend_retries_total %llu\n"
                 "# HELP vario_frontend_routing_version Version of the routing table in use.\n"
                 "# TYPE vario_frontend_routing_version gauge\n"
                 "vario_frontend_routing_version %lld\n",
                 (unsigned long long)st.ok, (unsigned long long)st.failed,
                 (unsigned long long)st.timeouts, (unsigned long long)st.dropped,
                 (unsigned long long)st.retried,
                 (long long)vr_fwd_table_version(fe->fwd));
  static const double qs[] = {0.5, 0.9, 0.99};
  const char *names[2] = {"vario_frontend_overhead_seconds", "vario_frontend_worker_seconds"};
  const char *help[2] = {"Time the front end adds to a forwarded request.",
                         "Round trip to the worker of a forwarded request."};
  vr_hist *hs[2] = {&fe->overhead, &fe->round_trip};
  for (int h = 0; h < 2; h++) {
    vr_sbuf_printf(&b, "# HELP %s %s\n# TYPE %s summary\n", names[h], help[h], names[h]);
    for (int i = 0; i < 3; i++)
      vr_sbuf_printf(&b, "%s{quantile=\"%g\"} %.9f\n", names[h], qs[i],
                     vr_hist_quantile(hs[h], qs[i]) / 1e9);
    vr_sbuf_printf(&b, "%s_sum %.9f\n%s_count %llu\n", names[h], hs[h]->sum / 1e9, names[h],
                   (unsigned long long)hs[h]->count);
  }
  size_t len;
  char *body = vr_sbuf_take(&b, &len);
  reply(fe, r, 200, "text/plain; version=0.0.4", body, len, (size_t)-1);
}

/* A model the table has no route for: unknown to the whole cluster (a
 * controller's table names every model of its repository, even with no
 * worker up, which stays 503 "no worker serves"). Answered as a worker
 * answers a model it does not have, so that a Triton client sees the same
 * code through the front end: 400 for readiness (false), else 404. */
static void unknown_model(vr_frontend *fe, vr_http_req *r, const char *model) {
  char msg[300];
  int ready = is_model_ready(r);
  snprintf(msg, sizeof msg, ready ? "model '%.128s' is not ready (unknown to the cluster)"
                                  : "model '%.128s' is not loaded (unknown to the cluster)",
           model);
  reply_error(fe, r, ready ? 400 : 404, msg);
}

static void handle(vr_http_req *r, void *user) {
  vr_frontend *fe = user;
  const char *method = vr_http_method(r);
  int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
  char buf[1024], *seg[10];
  int n = vr_http_path_segments(vr_http_url(r), buf, sizeof buf, seg, 10);
  char key[VR_FWD_KEY_MAX];
  if (n == 1 && !strcmp(seg[0], "metrics") && get) return metrics(fe, r);
  if (n < 1 || strcmp(seg[0], "v2")) return reply_error(fe, r, 404, "unknown path");
  if (n == 1 && get) {
    vr_sbuf b;
    vr_sbuf_init(&b);
    /* the extensions whose paths and parameters it forwards to the workers
     * as they are; not model_repository (not forwarded) nor statistics
     * (its every-model /v2/models/stats is not merged) */
    vr_sbuf_puts(&b, "{\"name\":\"vario-frontend\",\"version\":\"0.1.0\","
                     "\"extensions\":[\"binary_tensor_data\",\"classification\","
                     "\"model_configuration\",\"schedule_policy\",\"vario_instances\","
                     "\"model_less\"]}");
    return reply_json(fe, r, 200, &b);
  }
  if (n == 3 && !strcmp(seg[1], "health") && get) {
    if (!strcmp(seg[2], "live")) return reply(fe, r, 200, NULL, NULL, 0, (size_t)-1);
    if (!strcmp(seg[2], "ready"))
      /* a table with no worker (all of them gone, none started yet) can
       * serve nothing: a load balancer should send clients elsewhere. Not
       * ready is 400, as a worker's (KServe v2: 4xx = false; Triton),
       * and so while it drains (asked first: vr_frontend_free frees the
       * forwarder before the HTTP server stops) */
      return reply(fe, r,
                   !vr_http_draining(r) && vr_fwd_table_version(fe->fwd) > 0 &&
                           vr_fwd_table_workers(fe->fwd) > 0
                       ? 200
                       : 400,
                   NULL, NULL, 0, (size_t)-1);
  }
  if (n == 3 && !strcmp(seg[1], "cluster") && !strcmp(seg[2], "routes") && get)
    return routes_json(fe, r);
  /* /v2/models/{m}[/...], /v2/apps/{app}[/...] and /v2/pipelines[/{p}...]:
   * the workers of m, app or p (a pipeline request runs on one worker with
   * a control plane; its hops go where the controller's plan put them) */
  /* Triton's every-model statistics: each worker has its own, and none
   * serves a model named "stats" (it would be the key) */
  if (n == 3 && !strcmp(seg[1], "models") && !strcmp(seg[2], "stats") && get)
    return reply_error(fe, r, 404, "a front end does not merge the workers' statistics:"
                                   " ask for /v2/models/{m}/stats, or a worker's /v2/models/stats");
  if ((n == 3 || (n == 4 && !strcmp(seg[3], "output"))) && !strcmp(seg[1], "jobs") && get)
    return forward_job(fe, r, seg[2], n == 4);
  if (n >= 3 && (!strcmp(seg[1], "models") || !strcmp(seg[1], "apps") ||
                 !strcmp(seg[1], "pipelines"))) {
    snprintf(key, sizeof key, "%c:%s", seg[1][0], seg[2]);
    if (seg[1][0] == 'm' && vr_fwd_table_version(fe->fwd) > 0 &&
        !vr_fwd_table_routes(fe->fwd, key))
      return unknown_model(fe, r, seg[2]);
    /* an app's job: the answer's id names the worker that took it */
    int job = n == 4 && seg[1][0] == 'a' && !strcmp(seg[3], "jobs");
    return forward_to(fe, r, key, NULL, job);
  }
  if (n == 2 && !strcmp(seg[1], "pipelines")) return forward(fe, r, "p:*");
  reply_error(fe, r, 404, "unknown path (a front end forwards /v2/models/...,"
                          " /v2/apps/... and /v2/pipelines/...)");
}

int vr_frontend_create(const vr_frontend_opts *o, vr_frontend **out, vr_errbuf *err) {
  vr_frontend *fe = VR_NEW(vr_frontend);
  if (!fe) return vr_errf(err, VR_ENOMEM, "out of memory");
  if (o) fe->o = *o;
  else vr_frontend_opts_init(&fe->o);
  vr_hist_init(&fe->overhead);
  vr_hist_init(&fe->round_trip);
  int rc = vr_fwd_create(&fe->o.fwd, &fe->fwd, err);
  if (rc) {
    vr_free(fe);
    return rc;
  }
  vr_http_opts ho = {.host = fe->o.host, .port = fe->o.port, .max_body = fe->o.max_body,
                     .max_conns = fe->o.max_conns, .handler = handle, .user = fe};
  rc = vr_http_start(&ho, &fe->http, err);
  if (rc) {
    vr_fwd_free(fe->fwd);
    vr_free(fe);
    return rc;
  }
  *out = fe;
  return 0;
}

int vr_frontend_port(const vr_frontend *f) { return vr_http_port(f->http); }
vr_fwd *vr_frontend_fwd(vr_frontend *f) { return f->fwd; }

void vr_frontend_shutdown(vr_frontend *f) {
  vr_http_drain(f->http);
  int64_t until = vr_now_ns() + 5000000000LL;
  while (vr_http_inflight(f->http) > 0 && vr_now_ns() < until) usleep(1000);
}

void vr_frontend_free(vr_frontend *f) {
  if (!f) return;
  /* The forwarder first: it answers what is still under way (waking the
   * parked connections), then the HTTP server may stop. */
  vr_fwd_free(f->fwd);
  vr_http_stop(f->http);
  vr_free(f);
}
