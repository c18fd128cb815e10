/* See worker_pipes.h. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "cli/worker_pipes.h"
#include "control/pipes.h"
#include "server/fwd.h"
#include "server/kserve.h"
#include "server/sbuf.h"


/* A hop under way on another worker. */
typedef struct rhop {
  vr_fwd_call c;
  vr_rt_request *r;
  char *served_by; /* VR_PIPE_WORKER_MAX bytes, the hop record's */
  char *body;
  char path[VR_NAME_MAX + 32];
  char hdr[96];
} rhop;

static void fail(vr_rt_request *r, int status, vr_rt_outcome o, const char *msg) {
  r->status = status;
  r->outcome = o;
  snprintf(r->err.msg, sizeof r->err.msg, "%.500s", msg);
  r->end_ns = vr_now_ns();
  r->done(r, r->user);
}

/* The answer's outputs into one aligned block the request owns (names
 * first, then each tensor's bytes at 64-byte offsets). */
static int take_outputs(vr_rt_request *r, const vr_ks_request *a, vr_errbuf *err) {
  size_t need = 0;
  for (int i = 0; i < a->n_in; i++) need += VR_NAME_MAX + ((a->in[i].nbytes + 63) & ~(size_t)63);
  char *blk = vr_aligned_alloc(64, need ? need : 64);
  if (!blk) return vr_errf(err, VR_ENOMEM, "out of memory for the outputs");
  char *names = blk, *data = blk + (size_t)a->n_in * VR_NAME_MAX;
  data = blk + (((size_t)(data - blk) + 63) & ~(size_t)63);
  for (int i = 0; i < a->n_in && i < VR_RT_MAX_IO; i++) {
    const vr_ks_input *x = &a->in[i];
    snprintf(names + (size_t)i * VR_NAME_MAX, VR_NAME_MAX, "%s", x->name);
    memcpy(data, x->data, x->nbytes);
    r->out[i] = (vr_tensor){names + (size_t)i * VR_NAME_MAX, x->dtype, x->ndim, {0}, data,
                            x->nbytes};
    memcpy(r->out[i].shape, x->shape, sizeof x->shape);
    data += (x->nbytes + 63) & ~(size_t)63;
  }
  r->n_out = a->n_in < VR_RT_MAX_IO ? a->n_in : VR_RT_MAX_IO;
  r->out_block = blk;
  return 0;
}

static void on_answer(vr_fwd_call *c, void *user) {
  rhop *h = user;
  vr_rt_request *r = h->r;
  char msg[600];
  if (c->worker[0]) snprintf(h->served_by, VR_PIPE_WORKER_MAX, "%.63s", c->worker);
  if (c->status != 200) {
    /* 504: the remote queue dropped it (deadline); 503/429: no room, or
     * no worker left; 404: the model left that worker (a plan moved it
     * after the table was read): rejected, as by a draining queue */
    vr_rt_outcome o = c->status == 504 ? VR_OUT_DROPPED
                      : c->status == 503 || c->status == 429 || c->status == 404 ||
                              c->status == 400
                          ? VR_OUT_REJECTED
                          : VR_OUT_FAILED;
    snprintf(msg, sizeof msg, "worker %s: HTTP %d %.*s", c->worker[0] ? c->worker : "?",
             c->status, c->resp ? (int)(c->resp_len < 300 ? c->resp_len : 300) : 300,
             c->resp ? c->resp : c->msg);
    static int logged; /* the first few: a plan change shows here */
    if (o != VR_OUT_DROPPED && __atomic_fetch_add(&logged, 1, __ATOMIC_RELAXED) < 8)
      vr_info("remote pipeline hop: %s", msg);
    /* 400: that runtime refused the hop's inputs, as the local one would
     * (VR_EINVAL, rejected): at the root the client's (400), below it the
     * adapter's crops (failed), as pipes_run.c classifies both */
    fail(r, o == VR_OUT_DROPPED ? VR_EDEADLINE : c->status == 400 ? VR_EINVAL : VR_EIO, o, msg);
  } else {
    vr_ks_request a;
    vr_errbuf err = {0};
    int rc = vr_ks_parse_response(c->resp, c->resp_len, c->resp_ihcl, &a, &err);
    if (!rc) {
      rc = take_outputs(r, &a, &err);
      vr_ks_request_free(&a);
    }
    if (rc) {
      snprintf(msg, sizeof msg, "worker %s answered: %s", c->worker, err.msg);
      fail(r, VR_EIO, VR_OUT_FAILED, msg);
    } else {
      r->status = 0;
      r->outcome = VR_OUT_OK;
      r->end_ns = vr_now_ns();
      r->batch_ns = r->end_ns - r->start_ns; /* the remote's queue and run, as before */
      r->done(r, r->user);
    }
  }
  vr_fwd_call_clear(c);
  vr_free(h->body);
  vr_free(h);
}

/* The request as KServe v2 binary tensors: JSON header (names escaped:
 * a client's input name may hold a quote), then the bytes. */
static char *encode(const vr_rt_request *r, size_t *len, size_t *hlen) {
  vr_sbuf h;
  vr_sbuf_init(&h);
  vr_sbuf_puts(&h, "{\"inputs\":[");
  size_t bytes = 0;
  for (int i = 0; i < r->n_in; i++) {
    const vr_tensor *t = &r->in[i];
    vr_sbuf_puts(&h, i ? ",{\"name\":" : "{\"name\":");
    vr_sbuf_json_str(&h, t->name ? t->name : "");
    vr_sbuf_printf(&h, ",\"datatype\":\"%s\",\"shape\":[", vr_dtype_kserve(t->dtype));
    for (int d = 0; d < t->ndim; d++)
      vr_sbuf_printf(&h, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    vr_sbuf_printf(&h, "],\"parameters\":{\"binary_data_size\":%zu}}", t->nbytes);
    bytes += t->nbytes;
  }
  /* A hop its pipeline's drop mode keeps (timeout 0: no deadline) must
   * not take the remote model's default queue timeout, nor be sent as 1 us
   * (every such hop was dropped there): the largest timeout a server
   * accepts is no deadline there (runtime.c deadline_after). */
  long long us = r->timeout_ns > 0 ? r->timeout_ns / 1000 : INT64_MAX / 1000;
  vr_sbuf_printf(&h, "],\"parameters\":{\"binary_data_output\":true,\"timeout\":%lld}}",
                 us > 0 ? us : 1);
  size_t off;
  char *head = vr_sbuf_take(&h, &off);
  char *b = head ? vr_realloc(head, off + bytes + 1) : NULL;
  if (!b) {
    vr_free(head);
    return NULL;
  }
  size_t at = off;
  for (int i = 0; i < r->n_in; i++) {
    memcpy(b + at, r->in[i].data, r->in[i].nbytes);
    at += r->in[i].nbytes;
  }
  *len = at;
  *hlen = off;
  return b;
}

static void remote_hop(void *user, const char *model, vr_rt_request *r, char *served_by) {
  worker_pipes *w = user;
  int64_t now = vr_now_ns();
  r->arrival_ns = r->start_ns = now; /* its queue and run are the remote's */
  r->deadline_ns = r->timeout_ns > 0 ? now + r->timeout_ns : 0;
  rhop *h = VR_NEW(rhop);
  size_t len = 0, hlen = 0;
  if (h) h->body = encode(r, &len, &hlen);
  if (!h || !h->body) {
    vr_free(h);
    return fail(r, VR_ENOMEM, VR_OUT_FAILED, "out of memory for a remote hop");
  }
  h->r = r;
  h->served_by = served_by;
  snprintf(h->path, sizeof h->path, "/v2/models/%s/infer", model);
  snprintf(h->hdr, sizeof h->hdr, "Inference-Header-Content-Length: %zu\r\n", hlen);
  h->c = (vr_fwd_call){.method = "POST", .path = h->path, .headers = h->hdr, .body = h->body,
                       .body_len = len, .done = on_answer, .user = h};
  char key[VR_FWD_KEY_MAX];
  snprintf(key, sizeof key, "m:%.150s", model);
  pthread_rwlock_rdlock(&w->lk);
  int sent = w->fwd != NULL;
  if (sent) vr_fwd_send(w->fwd, key, &h->c);
  pthread_rwlock_unlock(&w->lk);
  if (!sent) { /* stopping (failed outside the lock: the hop may start others) */
    vr_free(h->body);
    vr_free(h);
    fail(r, VR_ESHUTDOWN, VR_OUT_REJECTED, "worker stopping: no remote hops");
  }
}

static int remote_has(void *user, const char *model) {
  worker_pipes *w = user;
  size_t n = strlen(model);
  pthread_rwlock_rdlock(&w->lk);
  int found = 0;
  for (const char *p = w->remote_models; !found && (p = strstr(p, model)); p += n)
    found = (p == w->remote_models || p[-1] == ',') && (p[n] == 0 || p[n] == ',');
  pthread_rwlock_unlock(&w->lk);
  return found;
}

int wp_init(worker_pipes *w, vr_registry *reg, vr_pipes *pipes, const char *self_id) {
  memset(w, 0, sizeof *w);
  vr_fwd_opts o;
  vr_fwd_opts_init(&o);
  o.timeout_ms = 10000; /* hops carry their own deadline as "timeout" */
  vr_errbuf err = {0};
  if (vr_fwd_create(&o, &w->fwd, &err)) {
    vr_warn("worker: no remote pipeline hops: %s", err.msg);
    return -1;
  }
  pthread_rwlock_init(&w->lk, NULL);
  w->reg = reg;
  w->pipes = pipes;
  snprintf(w->self, sizeof w->self, "%s", self_id);
  vr_pipes_set_remote(pipes, remote_hop, remote_has, w);
  return 0;
}

/* Table "main" into the forwarder, less this worker (a hop comes here
 * only when this worker holds none of its variant). */
static void sync_main(worker_pipes *w) {
  int64_t v = 0;
  char *body = NULL;
  vr_errbuf err = {0};
  if (vr_registry_get_routes(w->reg, "main", &v, &body, &err) || v == w->main_ver) {
    vr_free(body);
    return;
  }
  vr_fwd_table t;
  if (!vr_fwd_table_parse(body, strlen(body), v, &t, &err)) {
    char models[sizeof w->remote_models];
    size_t off = 0;
    models[0] = 0;
    for (int r = 0; r < t.n_routes; r++) {
      int k = 0;
      for (int i = 0; i < t.routes[r].n; i++)
        if (strcmp(t.workers[t.routes[r].workers[i]].id, w->self))
          t.routes[r].workers[k++] = t.routes[r].workers[i];
      t.routes[r].n = k;
      int wr = k && !strncmp(t.routes[r].key, "m:", 2)
                   ? snprintf(models + off, sizeof models - off, "%s%s", off ? "," : "",
                              t.routes[r].key + 2)
                   : 0;
      if (wr > 0 && (size_t)wr < sizeof models - off) off += (size_t)wr;
    }
    pthread_rwlock_wrlock(&w->lk);
    int rc = w->fwd ? vr_fwd_set_table(w->fwd, &t, &err) : 0;
    if (!rc) {
      w->main_ver = v;
      memcpy(w->remote_models, models, off + 1);
    }
    pthread_rwlock_unlock(&w->lk);
    if (!rc) vr_info("worker: routing table main v%lld in use (%d routes)", (long long)v, t.n_routes);
    vr_fwd_table_free(&t);
  }
  if (err.msg[0]) vr_warn("worker: routing table v%lld: %s", (long long)v, err.msg);
  vr_free(body);
}

static void sync_tables(worker_pipes *w, int pipes_too) {
  vr_errbuf err = {0};
  if (pipes_too && vr_pipes_sync(w->pipes, &err))
    vr_warn("worker: pipelines from the store: %s", err.msg);
  sync_main(w);
  char names[WP_MAX][VR_PIPE_NAME_MAX];
  int n = vr_pipes_names(w->pipes, names, WP_MAX);
  if (n > WP_MAX) n = WP_MAX;
  /* forget the plan versions of pipelines no longer served: their slots
   * are free for new ones (a full table reused slot 0, another
   * pipeline's version, and a fresh plan could be taken as seen) */
  for (int k = 0; k < WP_MAX; k++) {
    int live = 0;
    for (int i = 0; i < n && !live && w->names[k][0]; i++) live = !strcmp(w->names[k], names[i]);
    if (!live) w->names[k][0] = 0, w->ver[k] = 0;
  }
  for (int i = 0; i < n; i++) {
    char table[VR_REG_ID_MAX];
    vr_pipe_plan_table(names[i], table);
    int64_t v = 0;
    char *body = NULL;
    err.msg[0] = 0;
    if (vr_registry_get_routes(w->reg, table, &v, &body, &err)) continue; /* not planned */
    int k = 0, free_k = -1;
    for (; k < WP_MAX && strcmp(w->names[k], names[i]); k++)
      if (free_k < 0 && !w->names[k][0]) free_k = k;
    if (k == WP_MAX) { /* n <= WP_MAX live names: a slot is free */
      k = free_k >= 0 ? free_k : 0;
      snprintf(w->names[k], sizeof w->names[k], "%.63s", names[i]);
      w->ver[k] = 0;
    }
    int fresh = v != w->ver[k];
    if (vr_pipes_follow(w->pipes, names[i], fresh ? body : NULL, fresh ? strlen(body) : 0, &err)) {
      if (fresh) vr_warn("worker: pipeline '%s': plan v%lld: %s", names[i], (long long)v, err.msg);
    } else if (fresh) {
      w->ver[k] = v;
    }
    vr_free(body);
  }
  vr_pipes_follow_manage(w->pipes); /* a deleted pipeline's apps go back to the control loop */
}

void wp_sync(worker_pipes *w) { sync_tables(w, w->beats++ % 8 == 0); }

void wp_sync_now(worker_pipes *w) { sync_tables(w, 1); }

void wp_stop(worker_pipes *w) {
  pthread_rwlock_wrlock(&w->lk);
  vr_fwd *f = w->fwd;
  w->fwd = NULL;
  pthread_rwlock_unlock(&w->lk);
  vr_fwd_free(f); /* hops under way end 503; w stays valid for later ones */
}
