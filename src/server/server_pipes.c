/*
 * Pipelines API (Vario extension; docs/API.md "Pipelines"), mounted when
 * a pipeline registry is attached (vr_server_set_pipes):
 *
 *   POST   /v2/pipelines               register a spec (JSON body)
 *   GET    /v2/pipelines               registered pipelines
 *   GET    /v2/pipelines/{p}           tasks, candidate variants, instances,
 *                                      observed multiplicative factors, routing
 *   DELETE /v2/pipelines/{p}
 *   POST   /v2/pipelines/{p}/infer     KServe v2 body for the root task;
 *                                      parameters latency_ms, min_accuracy
 *                                      end to end
 *
 * This file only moves bytes: the pipeline decisions are in
 * control/pipes.h and policy/fanout.h.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/thread.h"
#include "control/pipes.h"
#include "server/kserve.h"
#include "server/server_int.h"

typedef struct pipe_ctx {
  vr_server *s;
  vr_http_req *http;
  vr_ks_request ks;
  vr_pipe_result *res;
  char *name;      /* the pipeline (the URL's copy is gone once deferred) */
  vr_pipe_query q; /* infer: the query, for the lookup thread */
  int describe;    /* a GET, not an infer */
  char *json;      /* describe: the answer the lookup thread found */
  int no_thread;   /* the lookup thread could not start */
} pipe_ctx;

static void ctx_free(void *p) {
  pipe_ctx *c = p;
  vr_ks_request_free(&c->ks);
  vr_pipe_result_free(c->res);
  vr_free(c->name);
  vr_free(c->json);
  vr_free(c);
}

static void fail(vr_server *s, vr_http_req *r, int status, const char *msg) {
  vr_server_count(s, status);
  vr_http_error(r, status, msg);
}

static void write_hop(vr_sbuf *b, const vr_pipe_result *res, int i) {
  const vr_pipe_hop_rec *h = res->hops[i];
  vr_sbuf_printf(b, "%s{\"hop\":%d,\"task\":", i ? "," : "", i);
  vr_sbuf_json_str(b, h->task_name);
  vr_sbuf_printf(b, ",\"parent\":%d,\"row\":%d,\"region\":%d", h->parent, h->row, h->region);
  if (h->label) {
    vr_sbuf_puts(b, ",\"label\":");
    vr_sbuf_json_str(b, h->label);
    vr_sbuf_printf(b, ",\"score\":%.6g", h->score);
  }
  vr_sbuf_printf(b, ",\"outcome\":\"%s\"", vr_pipe_outcome_name(h->outcome));
  if (h->outcome != VR_POUT_OK) {
    vr_sbuf_puts(b, ",\"error\":");
    vr_sbuf_json_str(b, h->msg);
  }
  /* The variant that served (or was queued and dropped); an infeasible
   * hop was never routed: its record holds only the closest candidate,
   * which the error names. */
  if (h->variant[0] && h->outcome != VR_POUT_INFEASIBLE) {
    vr_sbuf_puts(b, ",\"model\":");
    vr_sbuf_json_str(b, h->model);
    vr_sbuf_puts(b, ",\"variant\":");
    vr_sbuf_json_str(b, h->variant);
    vr_sbuf_printf(b, ",\"accuracy\":%.4f", h->accuracy);
  }
  if (h->worker[0]) { /* run on another worker (following the controller) */
    vr_sbuf_puts(b, ",\"worker\":");
    vr_sbuf_json_str(b, h->worker);
  }
  vr_sbuf_printf(b, ",\"start_ms\":%.3f,\"queue_ms\":%.3f,\"compute_ms\":%.3f,\"fanout\":%d",
                 h->start_ns / 1e6, h->queue_ns / 1e6, h->compute_ns / 1e6, h->fanout);
  if (h->outcome == VR_POUT_OK) {
    vr_sbuf_puts(b, ",\"outputs\":[");
    for (int o = 0; o < h->rt.n_out; o++) {
      const vr_tensor *t = &h->rt.out[o];
      vr_sbuf_puts(b, o ? ",{\"name\":" : "{\"name\":");
      vr_sbuf_json_str(b, t->name ? t->name : "");
      vr_sbuf_printf(b, ",\"datatype\":\"%s\",\"shape\":[", vr_dtype_kserve(t->dtype));
      for (int d = 0; d < t->ndim; d++)
        vr_sbuf_printf(b, "%s%lld", d ? "," : "", (long long)t->shape[d]);
      vr_sbuf_puts(b, "],\"data\":[");
      vr_ks_write_numbers(b, t->dtype, t->data, t->nbytes / vr_dtype_size(t->dtype));
      vr_sbuf_puts(b, "]}");
    }
    vr_sbuf_puts(b, "]");
  }
  vr_sbuf_puts(b, "}");
}

/* The pipeline response: outcome, end-to-end latency and every hop. */
static void write_result(vr_sbuf *b, const pipe_ctx *c) {
  const vr_pipe_result *res = c->res;
  vr_sbuf_puts(b, "{");
  if (c->ks.id[0]) {
    vr_sbuf_puts(b, "\"id\":");
    vr_sbuf_json_str(b, c->ks.id);
    vr_sbuf_puts(b, ",");
  }
  vr_sbuf_puts(b, "\"pipeline\":");
  vr_sbuf_json_str(b, res->pipeline);
  vr_sbuf_printf(b, ",\"outcome\":\"%s\"", vr_pipe_outcome_name(res->outcome));
  if (res->outcome != VR_POUT_OK) {
    vr_sbuf_puts(b, ",\"error\":");
    vr_sbuf_json_str(b, res->msg);
  }
  vr_sbuf_printf(b, ",\"latency_ms\":%.3f,\"deadline_ms\":%.3f,\"hops\":[",
                 (res->end_ns - res->arrival_ns) / 1e6,
                 (res->deadline_ns - res->arrival_ns) / 1e6);
  for (int i = 0; i < res->n_hops; i++) write_hop(b, res, i);
  vr_sbuf_puts(b, "]}");
}

static int outcome_status(vr_pipe_outcome o) {
  switch (o) {
  case VR_POUT_OK: return 200;
  case VR_POUT_DROPPED: return 504;    /* as a model-less query past its deadline */
  case VR_POUT_INFEASIBLE: return 400; /* no variant can meet what was asked */
  case VR_POUT_REJECTED: return 503;
  default: return 500;
  }
}

static void not_found(vr_server *s, vr_http_req *r, const char *name) {
  char msg[200];
  snprintf(msg, sizeof msg, "no registered pipeline named '%.100s'", name);
  fail(s, r, 404, msg);
}

static void reply_text(vr_server *s, vr_http_req *r, int status, char *json);

static void on_resume(vr_http_req *r, void *user) {
  vr_server *s = user;
  pipe_ctx *c = vr_http_state(r);
  if (c->no_thread) return fail(s, r, 503, "cannot start a thread; retry later");
  if (c->describe) {
    char *j = c->json;
    c->json = NULL;
    return j ? reply_text(s, r, 200, j) : not_found(s, r, c->name);
  }
  vr_pipe_result *res = c->res;
  if (res->status) /* never started: unknown pipeline, bad input */
    return fail(s, r, vr_server_http_status(res->status), res->msg);
  vr_sbuf b;
  vr_sbuf_init(&b);
  write_result(&b, c);
  int status = outcome_status(res->outcome);
  vr_server_count(s, status);
  vr_server_reply_json(r, status, &b);
  if (status == 200) vr__srv_add_due(r, res->deadline_ns, res->batch_ns);
}

static void on_done(vr_pipe_result *res, void *tag) {
  pipe_ctx *c = tag;
  c->res = res;
  vr_http_wake(c->http);
}

/* A name this process does not serve is looked for in the store (another
 * server sharing it may have registered the pipeline) on a thread of its
 * own: a store read can block (a SQLite file another process holds locked
 * waits out the busy timeout, Redis away its retries), and on the event
 * thread it stalled every connection, probes included. */
static void *lookup_main(void *arg) {
  pipe_ctx *c = arg;
  vr_server *s = c->s; /* c may be freed once answered */
  if (c->describe) {
    c->json = vr_pipes_describe(s->pipes, c->name);
    vr_http_wake(c->http);
  } else {
    vr_pipes_infer(s->pipes, &c->q, on_done, c);
  }
  __atomic_fetch_sub(&s->pipe_lookups, 1, __ATOMIC_SEQ_CST); /* shutdown waits */
  return NULL;
}

/* One lookup at a time: while one runs, a name not served is answered 404
 * without a read, as the pipes' own limit on these reads (ten a second)
 * answers past it. */
static void lookup(vr_server *s, vr_http_req *r, pipe_ctx *c) {
  int idle = 0;
  if (!__atomic_compare_exchange_n(&s->pipe_lookups, &idle, 1, 0, __ATOMIC_SEQ_CST,
                                   __ATOMIC_SEQ_CST))
    return not_found(s, r, c->name);
  vr_http_defer(r, on_resume);
  if (vr_thread_detached(lookup_main, c)) {
    __atomic_fetch_sub(&s->pipe_lookups, 1, __ATOMIC_SEQ_CST);
    c->no_thread = 1;
    vr_http_wake(r);
  }
}

static pipe_ctx *new_ctx(vr_server *s, vr_http_req *r, const char *name) {
  pipe_ctx *c = VR_NEW(pipe_ctx);
  if (c && !(c->name = vr_strdup(name))) vr_free(c), c = NULL;
  if (!c) return NULL;
  c->s = s;
  c->http = r;
  vr_http_set_state(r, c, ctx_free);
  return c;
}

static void infer(vr_server *s, vr_http_req *r, const char *name) {
  pipe_ctx *c = new_ctx(s, r, name);
  if (!c) return fail(s, r, 500, "out of memory");
  vr_errbuf err = {0};
  size_t hlen, blen;
  const char *body = vr_http_body(r, &blen);
  int rc = vr_ks_header_len(vr_http_header(r, "Inference-Header-Content-Length"), &hlen, &err);
  if (!rc) rc = vr_ks_parse_request(body, blen, hlen, &c->ks, &err);
  if (!rc) rc = vr_ks_only_app_params(&c->ks, VR_KS_APP_LATENCY | VR_KS_APP_ACCURACY,
                                      "model-less queries (/v2/apps/{app}/infer)", &err);
  if (rc) return fail(s, r, vr_server_http_status(rc), err.msg);
  /* latency_ms / min_accuracy are checked by the KServe parser (< 0: not
   * given); end to end here. */
  vr_pipe_query q = {.pipeline = c->name,
                     .latency_ms = c->ks.latency_ms > 0 ? c->ks.latency_ms : 0,
                     .min_accuracy = c->ks.min_accuracy > 0 ? c->ks.min_accuracy : 0,
                     .arrived_ns = vr_http_arrived_ns(r)};
  q.n_in = c->ks.n_in;
  for (int i = 0; i < c->ks.n_in; i++) {
    const vr_ks_input *t = &c->ks.in[i];
    q.in[i] = (vr_tensor){t->name, t->dtype, t->ndim, {0}, t->data, t->nbytes};
    memcpy(q.in[i].shape, t->shape, sizeof t->shape);
  }
  c->q = q;
  if (!vr_pipes_serves(s->pipes, name)) return lookup(s, r, c);
  vr_http_defer(r, on_resume); /* hops finish on other threads */
  vr_pipes_infer(s->pipes, &c->q, on_done, c);
}

static void reply_text(vr_server *s, vr_http_req *r, int status, char *json) {
  if (!json) return fail(s, r, 500, "out of memory");
  vr_server_count(s, status);
  vr_http_respond(r, status, "application/json", json, strlen(json), (size_t)-1);
}

static void describe(vr_server *s, vr_http_req *r, const char *name) {
  if (name && !vr_pipes_serves(s->pipes, name)) {
    pipe_ctx *c = new_ctx(s, r, name);
    if (!c) return fail(s, r, 500, "out of memory");
    c->describe = 1;
    return lookup(s, r, c);
  }
  char *j = vr_pipes_describe(s->pipes, name);
  if (!j && name) return not_found(s, r, name);
  reply_text(s, r, 200, j);
}

/* Registration and deletion write the store, which can block (a SQLite
 * file another process holds locked, Redis away): as the other admin
 * jobs, on a thread of their own; on the event thread they stalled every
 * connection. */
typedef struct pipe_job {
  vr_server *s;
  vr_http_req *http;
  char *name; /* delete: the pipeline (the URL's copy is gone once deferred) */
  int rc;
  vr_errbuf err;
  char *out;  /* the answer's JSON */
} pipe_job;

static void job_free(void *p) {
  pipe_job *j = p;
  vr_free(j->name);
  vr_free(j->out);
  vr_free(j);
}

static void *job_main(void *arg) {
  pipe_job *j = arg;
  vr_server *s = j->s;
  if (j->name) { /* delete */
    j->rc = vr_pipes_delete(s->pipes, j->name, &j->err);
    vr_sbuf b;
    vr_sbuf_init(&b);
    vr_sbuf_puts(&b, "{\"deleted\":");
    vr_sbuf_json_str(&b, j->name); /* names may hold quotes and backslashes */
    vr_sbuf_puts(&b, "}");
    if (!j->rc) j->out = vr_sbuf_take(&b, NULL);
    else vr_sbuf_free(&b);
  } else {
    size_t len;
    const char *body = vr_http_body(j->http, &len); /* the request's, until answered */
    char name[64];
    j->rc = vr_pipes_register(s->pipes, body, len, name, &j->err);
    if (!j->rc) j->out = vr_pipes_describe(s->pipes, name);
  }
  __atomic_fetch_sub(&s->admin_jobs, 1, __ATOMIC_SEQ_CST); /* as unreg_main */
  vr_http_wake(j->http);
  return NULL;
}

static void job_done(vr_http_req *r, void *user) {
  vr_server *s = user;
  pipe_job *j = vr_http_state(r);
  if (j->rc) return fail(s, r, vr_server_http_status(j->rc), j->err.msg);
  char *out = j->out;
  j->out = NULL;
  reply_text(s, r, j->name ? 200 : 201, out);
}

static void admin_job(vr_server *s, vr_http_req *r, const char *del_name) {
  pipe_job *j = VR_NEW(pipe_job);
  if (j && del_name && !(j->name = vr_strdup(del_name))) vr_free(j), j = NULL;
  if (!j) return fail(s, r, 500, "out of memory");
  j->s = s;
  j->http = r;
  vr_http_set_state(r, j, job_free);
  if (vr_server_spawn_admin(s, r, job_done, job_main, j) < 0)
    j->rc = vr_errf(&j->err, VR_EINTERNAL, "cannot start a thread");
}

void vr_server_pipes(vr_server *s, vr_http_req *r, const char *method, char **seg, int n) {
  if (!s->pipes) return fail(s, r, 404, "no pipelines (start vario serve with --store)");
  int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
  int post = !strcmp(method, "POST"), del = !strcmp(method, "DELETE");
  if (n == 2 && get) return describe(s, r, NULL);
  if (n == 2 && post) return admin_job(s, r, NULL);
  if (n == 3 && get) return describe(s, r, seg[2]);
  if (n == 3 && del) return admin_job(s, r, seg[2]);
  if (n == 4 && post && !strcmp(seg[3], "infer")) return infer(s, r, seg[2]);
  if (n == 4 && strcmp(seg[3], "infer")) return fail(s, r, 404, "unknown path");
  if (n <= 4) /* what the path takes, as HTTP asks of a 405 */
    return vr__srv_reply_405(s, r, n == 2 ? "GET, HEAD, POST" : n == 3 ? "GET, HEAD, DELETE"
                                                                        : "POST");
  fail(s, r, 404, "unknown path");
}

void vr_server_set_pipes(vr_server *s, vr_pipes *p) { s->pipes = p; }
vr_pipes *vr_server_get_pipes(vr_server *s) { return s->pipes; }
