/*
 * Model-less API (Vario extension; docs/API.md "Model-less API"), mounted
 * when a control plane is attached (vr_server_set_control):
 *
 *   POST /v2/apps/{app}/infer   KServe v2 body; parameters latency_ms,
 *                               min_accuracy, max_cost pick the variant
 *   GET  /v2/apps               apps, variants, states, instances
 *   GET  /v2/apps/{app}
 *   POST /v2/apps/{app}/models  register a model  } server_admin.c
 *   POST /v2/apps/{app}/jobs    offline job       } (uploads, admin
 *   POST /v2/jobs, GET /v2/jobs/{id}[/output]     } token)
 *
 * Written by the control-plane side; it reuses the KServe parser and
 * writer of this directory. The variant decision is the control plane's
 * (control/control.h); this file only moves bytes and wakes connections.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "policy/drop.h"
#include "server/kserve.h"
#include "server/server_int.h"

typedef struct app_ctx {
  vr_server *s;
  vr_http_req *http;
  vr_ks_request ks; /* the one parse of the body (parameters included) */
  vr_rt_request rt;
  vr_ctl_route route;
  int64_t arrived_ns; /* the deadline counts from here */
  char app[128];      /* for routing again (the URL's copy is gone) */
  int rerouted;       /* routed a second time once already */
} app_ctx;

static void ctx_free(void *p) {
  app_ctx *c = p;
  vr_rt_settle(c->s->rt, &c->rt, 0); /* served, whether answered or not */
  vr_ks_request_free(&c->ks);
  vr_rt_request_clear(&c->rt);
  vr_free(c);
}

static void fail(vr_server *s, vr_http_req *r, int status, const char *msg) {
  vr_server_count(s, status);
  vr_http_error(r, status, msg);
}

/* The answer: an error from the control plane or the runtime (VR_E*,
 * mapped to HTTP here: a query dropped for its deadline is a 504), or the
 * KServe response with the model-less facts in its "parameters". */
static void on_resume(vr_http_req *r, void *user) {
  vr_server *s = user;
  app_ctx *c = vr_http_state(r);
  const vr_ctl_route *rt = &c->route;
  const vr_rt_request *q = &c->rt;
  if (rt->status) return fail(s, r, vr_server_http_status(rt->status), rt->msg);
  if (q->status) return fail(s, r, vr_server_http_status(q->status), q->err.msg);
  vr_ks_app_info app = {rt->model, rt->accuracy, rt->slo_ms, rt->profile_ms,
                        rt->cost_per_1k, rt->loaded};
  vr_ks_resp_info info = {rt->variant_name, (q->start_ns - q->arrival_ns) / 1000,
                          (q->end_ns - q->start_ns) / 1000, q->batch_size, &app};
  vr_sbuf b;
  vr_sbuf_init(&b);
  size_t json_len = 0;
  vr_errbuf err = {0};
  if (vr_ks_write_response(&b, rt->model, &c->ks, q->out, q->n_out, &info,
                           &json_len, &err)) {
    vr_sbuf_free(&b);
    return fail(s, r, vr_server_http_status(err.code ? err.code : VR_EINVAL),
                err.msg);
  }
  size_t len;
  char *body = vr_sbuf_take(&b, &len);
  int binary = json_len < len;
  /* The response is complete: the last point it can still be dropped. */
  int64_t now = vr_now_ns();
  if (vr_drop_answer_due(now, q->deadline_ns, q->batch_ns)) {
    /* delayed after its batch beyond what the batch rule allows for */
    vr_free(body);
    vr_server_app_dropped_late(s, q->deadline_ns, q->start_ns);
    vr_rt_settle(s->rt, &c->rt, 1); /* dropped, not ok, in the metrics */
    char msg[200];
    snprintf(msg, sizeof msg, "dropped: the deadline cannot be met (the answer was ready "
             "%.3f ms after it, more than its batch's %.3f ms)", (now - q->deadline_ns) / 1e6,
             q->batch_ns / 1e6);
    return fail(s, r, 504, msg);
  }
  vr_server_count(s, 200);
  vr_server_app_lateness(s, q->deadline_ns, q->batch_ns, now);
  vr_http_respond(r, 200, binary ? "application/octet-stream" : "application/json",
                  body, len, binary ? json_len : (size_t)-1);
  vr__srv_add_due(r, q->deadline_ns, q->batch_ns);
}

static void route(app_ctx *c);

static void on_done(vr_rt_request *q, void *user) {
  app_ctx *c = user;
  vr_control_completed(c->s->ctl, &c->route, q);
  /* The instance the query was routed to went away before the query
   * reached it (scaled in meanwhile): route it again, once, instead of
   * answering 503 for a query the app can still serve. */
  if (q->status == VR_ESTATE && q->outcome == VR_OUT_REJECTED && !c->rerouted) {
    c->rerouted = 1;
    route(c);
    return;
  }
  vr_http_wake(c->http);
}

/* The live deadline of a model-less query: arrival + its latency SLO
 * (latency_ms, or the control plane's default), or arrival + Triton's
 * `timeout` when that is smaller. */
static int64_t app_timeout_ns(const app_ctx *c) {
  int64_t slo = (int64_t)(c->route.slo_ms * 1e6);
  int64_t t = c->ks.timeout_us * 1000;
  return t > 0 && t < slo ? t : slo;
}

/* The control plane picked an instance (or said no): submit or answer. */
static void on_routed(void *tag, const vr_ctl_route *route) {
  app_ctx *c = tag;
  c->route = *route;
  vr_model_config cfg;
  vr_errbuf err = {0};
  if (route->status) { /* nothing was routed: nothing to give back */
    vr_http_wake(c->http);
    return;
  }
  if (vr_rt_model_config(c->s->rt, route->model, &cfg))
    c->route.status = vr_errf(&err, VR_ENOENT, "model '%s' is not loaded", route->model);
  else if (vr_ks_check_outputs(&c->ks, &cfg, &err))
    c->route.status = VR_EINVAL;
  if (c->route.status) {
    if (c->route.status == VR_ENOENT) c->route.status = VR_ESTATE; /* app exists: 503 */
    /* The control plane counted the query in flight on its instance when
     * it routed it; it never reaches the runtime, so it is over now. */
    vr_control_not_run(c->s->ctl, route);
    if (err.msg[0]) snprintf(c->route.msg, sizeof c->route.msg, "%s", err.msg);
    vr_http_wake(c->http);
    return;
  }
  vr_rt_request *q = &c->rt;
  vr_rt_request_init(q);
  q->n_in = c->ks.n_in;
  for (int i = 0; i < c->ks.n_in; i++) {
    const vr_ks_input *t = &c->ks.in[i];
    q->in[i] = (vr_tensor){t->name, t->dtype, t->ndim, {0}, t->data, t->nbytes};
    memcpy(q->in[i].shape, t->shape, sizeof t->shape);
  }
  q->priority = c->ks.priority;
  q->arrived_ns = c->arrived_ns;
  q->timeout_ns = app_timeout_ns(c);
  q->settle_stats = 1; /* it may yet be dropped at answer time */
  q->done = on_done;
  q->user = c;
  vr_rt_submit_to(c->s->rt, route->instance_id, q);
}

static void app_infer(vr_server *s, vr_http_req *r, const char *app) {
  app_ctx *c = VR_NEW(app_ctx);
  if (!c) return fail(s, r, 500, "out of memory");
  c->s = s;
  c->http = r;
  c->arrived_ns = vr_http_arrived_ns(r); /* headers in (less a front end's time) */
  vr_http_set_state(r, c, ctx_free);
  vr_errbuf err = {0};
  size_t hlen, blen;
  const char *body = vr_http_body(r, &blen);
  int rc = vr_ks_header_len(vr_http_header(r, "Inference-Header-Content-Length"),
                            &hlen, &err);
  if (!rc) rc = vr_ks_parse_request(body, blen, hlen, &c->ks, &err);
  const vr_ks_request *k = &c->ks;
  snprintf(c->app, sizeof c->app, "%s", app);
  if (!rc && k->model[0]) { /* a pinned model must belong to the app */
    vr_store_rdlock(s->store);
    const vr_model_rec *m = vr_store_model(s->store, k->model);
    int mine = m && !strcmp(m->app, app);
    vr_store_unlock(s->store);
    if (!mine)
      rc = vr_errf(&err, VR_ENOENT, "app '%.64s' has no model '%.64s'", app, k->model);
  }
  if (rc) return fail(s, r, vr_server_http_status(rc), err.msg);
  vr_http_defer(r, on_resume); /* the answer may come from another thread */
  route(c);
}

/* Asks the control plane for an instance; on_routed submits there. */
static void route(app_ctx *c) {
  const vr_ks_request *k = &c->ks;
  vr_ctl_query q = {.app = k->model[0] ? NULL : c->app,
                    .model = k->model[0] ? k->model : NULL,
                    .latency_ms = k->latency_ms > 0 ? k->latency_ms : 0,
                    .min_accuracy = k->min_accuracy > 0 ? k->min_accuracy : 0,
                    .max_cost = k->max_cost > 0 ? k->max_cost : 0};
  vr_control_route(c->s->ctl, &q, on_routed, c);
}

static void describe(vr_server *s, vr_http_req *r, const char *app) {
  char *j = vr_control_describe(s->ctl, app);
  if (!j) {
    char msg[200];
    snprintf(msg, sizeof msg, "no registered app named '%.100s'", app ? app : "");
    return fail(s, r, 404, msg);
  }
  vr_server_count(s, 200);
  vr_http_respond(r, 200, "application/json", j, strlen(j), (size_t)-1);
}

/* The methods a /v2/apps or /v2/jobs path takes (an Allow value); NULL
 * where there is no such path. DELETE of an app's model is routed before
 * (server.c). */
static const char *apps_allow(const vr_server *s, char **seg, int n) {
  if (!strcmp(seg[1], "jobs"))
    return n == 2 ? "POST" : n == 3 || (n == 4 && !strcmp(seg[3], "output")) ? "GET, HEAD" : NULL;
  if (n == 2 || n == 3) return "GET, HEAD";
  if (n == 4 && (!strcmp(seg[3], "infer") || !strcmp(seg[3], "models") ||
                 (!strcmp(seg[3], "jobs") && s->jobs)))
    return "POST";
  if (n == 5 && !strcmp(seg[3], "models")) return "DELETE";
  return NULL;
}

void vr_server_apps(vr_server *s, vr_http_req *r, const char *method, char **seg, int n) {
  int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
  if (!s->ctl) return fail(s, r, 404, "no control plane (start vario serve with --store)");
  if (!strcmp(seg[1], "jobs")) {
    if (!s->jobs) return fail(s, r, 404, "offline jobs are not enabled");
    if (n == 2 && post) return vr__server_job_submit(s, r, NULL);
    if (n == 3 && get) return vr__server_job_get(s, r, seg[2]);
    if (n == 4 && get && !strcmp(seg[3], "output"))
      return vr__server_job_output(s, r, seg[2]);
  } else {
    if (n == 4 && post && !strcmp(seg[3], "jobs") && s->jobs)
      return vr__server_job_submit(s, r, seg[2]);
    if (n == 2 && get) return describe(s, r, NULL);
    if (n == 3 && get) return describe(s, r, seg[2]);
    if (n == 4 && post && !strcmp(seg[3], "infer")) return app_infer(s, r, seg[2]);
    if (n == 4 && post && !strcmp(seg[3], "models")) return vr__server_app_register(s, r, seg[2]);
  }
  /* 405 only for a path that exists for other methods, saying which */
  const char *allow = apps_allow(s, seg, n);
  if (!allow) return fail(s, r, 404, "unknown path");
  vr__srv_reply_405(s, r, allow);
}

void vr_server_set_jobs(vr_server *s, struct vr_jobs *jobs) { s->jobs = jobs; }

void vr_server_set_control(vr_server *s, vr_control *ctl, vr_store *store) {
  s->ctl = ctl;
  s->store = store;
}

void vr_server_attached(vr_server *s) {
  __atomic_store_n(&s->started, 1, __ATOMIC_SEQ_CST); /* publishes ctl, jobs, pipes */
}

int vr_server_has_control(const vr_server *s) { return s->ctl != NULL; }
