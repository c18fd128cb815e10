/*
 * POST /v2/models/{m}/infer: parse (JSON or binary extension), validate the
 * requested outputs, submit to the runtime and park the connection (or,
 * when the server is otherwise idle, wait briefly for the answer); the
 * executor's done() only flags or wakes it, and the response is serialised
 * on the event thread so executors spend their time on batches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "server/kserve.h"
#include "server/server_int.h"

typedef struct infer_ctx {
  vr_server *s;
  vr_http_req *http;
  char model[VR_NAME_MAX];
  vr_ks_request ks;
  vr_rt_request rt;
  int version; /* the model version it was submitted to */
  /* Who answers: RUNNING until the runtime is done (DONE) or the event
   * thread parks the connection (PARKED); the loser of the race acts. */
  int state;
} infer_ctx;

enum { RUNNING = 0, DONE = 1, PARKED = 2 };

static void ctx_free(void *p) {
  infer_ctx *c = p;
  vr_ks_request_free(&c->ks);
  vr_rt_request_clear(&c->rt);
  vr_free(c);
}

static void on_done(vr_rt_request *r, void *user) {
  (void)r;
  infer_ctx *c = user;
  int expect = RUNNING;
  if (!__atomic_compare_exchange_n(&c->state, &expect, DONE, 0,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    vr_http_wake(c->http); /* already parked: resume it */
}

static void fail(vr_server *s, vr_http_req *r, int status, const char *msg) {
  vr_server_count(s, status);
  vr_http_error(r, status, msg);
}

/* Runs on the event thread once the runtime has answered. */
static void on_resume(vr_http_req *r, void *user) {
  vr_server *s = user;
  infer_ctx *c = vr_http_state(r);
  vr_rt_request *q = &c->rt;
  if (q->status) {
    fail(s, r, vr_server_http_status(q->status), q->err.msg);
    return;
  }
  vr_ks_resp_info info = {q->variant, (q->start_ns - q->arrival_ns) / 1000,
                          (q->end_ns - q->start_ns) / 1000, q->batch_size, NULL,
                          c->version};
  vr_sbuf b;
  vr_sbuf_init(&b);
  size_t json_len = 0;
  vr_errbuf err = {0};
  int wrc = vr_ks_write_response(&b, c->model, &c->ks, q->out, q->n_out, &info,
                                 &json_len, &err);
  if (wrc) { /* a classification the output cannot give is the client's */
    vr_sbuf_free(&b);
    fail(s, r, vr_server_http_status(wrc), err.msg);
    return;
  }
  size_t len;
  char *body = vr_sbuf_take(&b, &len);
  int binary = json_len < len;
  vr_server_count(s, 200);
  vr_http_respond(r, 200, binary ? "application/octet-stream"
                                 : "application/json",
                  body, len, binary ? json_len : (size_t)-1);
  /* No Vario-Due-Us here: Triton's timeout bounds the time in the queue,
   * and a request served at its queue deadline ends a batch later, so a
   * front end adding its own hops to that due dropped most of an
   * overloaded model's answers (integration_cluster_asyfunc, CI). The
   * time a query waits unread in a socket is not queue time there. */
  int64_t over = vr_now_ns() - vr_http_started_ns(r) - (q->end_ns - q->start_ns);
  if (s->overhead) vr_hist_record(s->overhead, (uint64_t)(over > 0 ? over : 0));
}

static void fill_rt(const vr_ks_request *ks, vr_rt_request *q) {
  vr_rt_request_init(q);
  q->n_in = ks->n_in;
  for (int i = 0; i < ks->n_in; i++) {
    const vr_ks_input *t = &ks->in[i];
    q->in[i].name = t->name;
    q->in[i].dtype = t->dtype;
    q->in[i].ndim = t->ndim;
    memcpy(q->in[i].shape, t->shape, sizeof t->shape);
    q->in[i].data = t->data;
    q->in[i].nbytes = t->nbytes;
  }
  q->priority = ks->priority;
  q->timeout_ns = ks->timeout_us * 1000;
  q->queue_policy = 1; /* the model's default timeout when none is given */
}

int vr__srv_submit(vr_server *s, const char *model, vr_ks_request *ks,
                   vr_rt_request *q, int64_t arrived_ns,
                   void (*done)(vr_rt_request *, void *), void *user, vr_errbuf *err) {
  int rc = 0;
  /* Named outputs are checked before queueing (the runtime answers for
   * unknown models itself, so the common case skips the config copy). */
  if (ks->n_out > 0) {
    vr_model_config cfg;
    /* During shutdown the runtime has let its models go: that is a 503 a
     * client retries elsewhere (as the runtime answers), not a 404. */
    if (vr_rt_model_config(s->rt, model, &cfg))
      rc = __atomic_load_n(&s->shutting_down, __ATOMIC_SEQ_CST)
               ? vr_errf(err, VR_ESHUTDOWN, "server is shutting down")
               : vr_errf(err, VR_ENOENT, "model '%.128s' is not loaded", model);
    else
      rc = vr_ks_check_outputs(ks, &cfg, err);
    /* Labels travel with the request: the model may be unloaded before
     * the response is written. */
    for (int i = 0; !rc && i < ks->n_out; i++)
      if (ks->out[i].classification > 0 && !ks->out[i].labels)
        ks->out[i].labels = vr_rt_model_labels(s->rt, model, ks->out[i].name);
  }
  if (rc) {
    __atomic_fetch_add(&s->invalid, 1, __ATOMIC_RELAXED);
    return rc;
  }
  fill_rt(ks, q);
  q->arrived_ns = arrived_ns;
  q->done = done;
  q->user = user;
  vr_rt_submit(s->rt, model, q);
  return 0;
}

/* Inference-Header-Content-Length: 0 is Triton's raw binary request: the
 * body is the one input's data, its shape the model's (kserve.h). */
static int raw_request(vr_server *s, const char *model, const char *body, size_t len,
                       vr_ks_request *ks, vr_errbuf *err) {
  vr_model_config cfg;
  if (vr_rt_model_config(s->rt, model, &cfg))
    return __atomic_load_n(&s->shutting_down, __ATOMIC_SEQ_CST)
               ? vr_errf(err, VR_ESHUTDOWN, "server is shutting down")
               : vr_errf(err, VR_ENOENT, "model '%.128s' is not loaded", model);
  return vr_ks_raw_request(body, len, &cfg, ks, err);
}

void vr_server_infer(vr_server *s, vr_http_req *r, const char *model) {
  infer_ctx *c = VR_NEW(infer_ctx);
  if (!c) return fail(s, r, 500, "out of memory");
  c->s = s;
  c->http = r;
  snprintf(c->model, sizeof c->model, "%s", model);
  vr_http_set_state(r, c, ctx_free);
  vr_errbuf err = {0};
  size_t hlen, blen;
  const char *body = vr_http_body(r, &blen);
  int rc = vr_ks_header_len(
      vr_http_header(r, "Inference-Header-Content-Length"), &hlen, &err);
  if (!rc && hlen == 0) rc = raw_request(s, model, body, blen, &c->ks, &err);
  else if (!rc) rc = vr_ks_parse_request(body, blen, hlen, &c->ks, &err);
  if (!rc) rc = vr_ks_only_app_params(&c->ks, 0, "model-less queries (/v2/apps/{app}/infer)",
                                      &err);
  if (rc) __atomic_fetch_add(&s->invalid, 1, __ATOMIC_RELAXED);
  else {
    c->version = vr__srv_version(s, model);
    rc = vr__srv_submit(s, model, &c->ks, &c->rt, vr_http_arrived_ns(r), on_done, c, &err);
  }
  if (rc) return fail(s, r, vr_server_http_status(rc), err.msg);
  /* Low-load fast path: when this is the only request in the server, the
   * event thread has nothing else to do, so it waits a little for the
   * answer instead of parking the connection; that saves the park/resume
   * round trip through the event loop (two epoll_ctl calls and a thread
   * wake-up). Under load (other requests in flight) it parks at once. */
  if (s->o.spin_us > 0 && vr_http_inflight(s->http) == 1) {
    int64_t until = vr_now_ns() + (int64_t)s->o.spin_us * 1000;
    do {
      if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == DONE)
        return on_resume(r, s);
      __builtin_ia32_pause();
    } while (vr_now_ns() < until);
  }
  vr_http_defer(r, on_resume);
  int expect = RUNNING;
  if (!__atomic_compare_exchange_n(&c->state, &expect, PARKED, 0,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    vr_http_wake(r); /* answered meanwhile: resume right away */
}
