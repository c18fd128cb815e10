#define _GNU_SOURCE /* pthread_setname_np */
#include "server/http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "server/kserve.h"
#include "server/sbuf.h"

/* The event loop is ours, not MHD's internal thread: one thread waits on
 * MHD's epoll fd and an eventfd. Other threads never call into MHD; to
 * resume a parked request they queue it (wake list) and signal the
 * eventfd, and the loop resumes it between MHD runs. (Resuming from
 * another thread while the request's handler was still running on the
 * event thread lost wake-ups under load: MHD cancels a resume that
 * arrives before its suspension completes.) */
struct vr_http {
  struct MHD_Daemon *d;
  pthread_t thread;
  int efd;  /* eventfd: wake list non-empty or stop */
  int ep;   /* our epoll: MHD's epoll fd + efd */
  int stop;
  int quiesce;  /* 1: asked, 2: done (MHD calls stay on the event thread) */
  pthread_mutex_t wmu;
  vr_http_req **wake; /* parked requests to resume (guarded by wmu) */
  size_t nwake, capwake;
  vr_http_opts o;
  int port;
  int draining;
  int inflight; /* atomic */
  int conns;    /* open connections (atomic) */
};

struct vr_http_req {
  vr_http *h;
  struct MHD_Connection *conn;
  const char *url, *method; /* MHD keeps them valid for the request */
  char *body;
  size_t len, cap;
  int too_big;
  int started;
  int queued; /* a response was handed to MHD */
  int deferred;
  vr_http_handler resume_fn;
  struct MHD_Response *resp;
  int status;
  void *state;
  void (*state_free)(void *);
  int64_t t0; /* headers complete (monotonic ns) */
};

const char *vr_http_method(const vr_http_req *r) { return r->method; }
const char *vr_http_url(const vr_http_req *r) { return r->url; }
const char *vr_http_header(const vr_http_req *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}
const char *vr_http_query(const vr_http_req *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}
const char *vr_http_body(const vr_http_req *r, size_t *len) {
  *len = r->len;
  return r->body ? r->body : "";
}
void vr_http_set_state(vr_http_req *r, void *state, void (*fn)(void *)) {
  r->state = state;
  r->state_free = fn;
}
void *vr_http_state(const vr_http_req *r) { return r->state; }
int64_t vr_http_started_ns(const vr_http_req *r) { return r->t0; }

static void free_body(void *p) { vr_free(p); }

void vr_http_respond(vr_http_req *r, int status, const char *ctype, char *body,
                     size_t len, size_t header_len) {
  if (r->resp) { /* handler bug: answer once */
    vr_free(body);
    return;
  }
  struct MHD_Response *resp =
      body ? MHD_create_response_from_buffer_with_free_callback(len, body,
                                                                free_body)
           : MHD_create_response_from_buffer(0, (void *)"",
                                             MHD_RESPMEM_PERSISTENT);
  if (!resp) {
    vr_free(body);
    return; /* MHD closes the connection when nothing is queued */
  }
  if (ctype) MHD_add_response_header(resp, "Content-Type", ctype);
  if (header_len != (size_t)-1) {
    char v[32];
    snprintf(v, sizeof v, "%zu", header_len);
    MHD_add_response_header(resp, "Inference-Header-Content-Length", v);
  }
  if (r->h->draining) MHD_add_response_header(resp, "Connection", "close");
  r->resp = resp;
  r->status = status;
}

void vr_http_add_header(vr_http_req *r, const char *name, const char *value) {
  if (r->resp) MHD_add_response_header(r->resp, name, value);
}

void vr_http_error(vr_http_req *r, int status, const char *msg) {
  vr_sbuf b;
  vr_sbuf_init(&b);
  vr_ks_write_error(&b, msg);
  size_t len;
  char *p = vr_sbuf_take(&b, &len);
  vr_http_respond(r, status, "application/json", p, len, (size_t)-1);
}

void vr_http_defer(vr_http_req *r, vr_http_handler resume_fn) {
  r->deferred = 1;
  r->resume_fn = resume_fn;
  MHD_suspend_connection(r->conn);
}

void vr_http_wake(vr_http_req *r) {
  vr_http *h = r->h;
  pthread_mutex_lock(&h->wmu);
  if (h->nwake == h->capwake) {
    size_t cap = h->capwake ? h->capwake * 2 : 256;
    vr_http_req **p = vr_realloc(h->wake, cap * sizeof *p);
    /* Out of memory here would strand a request; abort loudly instead. */
    if (!p) abort();
    h->wake = p;
    h->capwake = cap;
  }
  h->wake[h->nwake++] = r;
  pthread_mutex_unlock(&h->wmu);
  uint64_t one = 1;
  ssize_t w = write(h->efd, &one, sizeof one);
  (void)w;
}

/* Event thread: resume every queued request, outside any handler. */
static void resume_woken(vr_http *h) {
  uint64_t x;
  ssize_t rd = read(h->efd, &x, sizeof x);
  (void)rd;
  for (;;) {
    vr_http_req *batch[64];
    size_t n = 0;
    pthread_mutex_lock(&h->wmu);
    while (n < 64 && h->nwake) batch[n++] = h->wake[--h->nwake];
    pthread_mutex_unlock(&h->wmu);
    if (!n) break;
    for (size_t i = 0; i < n; i++) MHD_resume_connection(batch[i]->conn);
  }
}

static void *event_loop(void *arg) {
  vr_http *h = arg;
  pthread_setname_np(pthread_self(), "vr-http");
  struct epoll_event ev[4];
  while (!__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE)) {
    MHD_UNSIGNED_LONG_LONG to = 0;
    int timeout = 1000;
    if (MHD_get_timeout(h->d, &to) == MHD_YES && to < 1000) timeout = (int)to;
    int n = epoll_wait(h->ep, ev, 4, timeout);
    for (int i = 0; i < n; i++)
      if (ev[i].data.fd == h->efd) resume_woken(h);
    if (__atomic_load_n(&h->quiesce, __ATOMIC_ACQUIRE) == 1) {
      MHD_socket ls = MHD_quiesce_daemon(h->d);
      if (ls != MHD_INVALID_SOCKET) close(ls);
      __atomic_store_n(&h->quiesce, 2, __ATOMIC_RELEASE);
    }
    MHD_run(h->d);
  }
  return NULL;
}

static int append_body(vr_http_req *r, const char *data, size_t n) {
  if (r->len + n > r->h->o.max_body) return -1;
  if (r->len + n + 1 > r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 4096;
    while (cap < r->len + n + 1) cap *= 2;
    char *p = vr_realloc(r->body, cap);
    if (!p) return -1;
    r->body = p;
    r->cap = cap;
  }
  memcpy(r->body + r->len, data, n);
  r->len += n;
  r->body[r->len] = 0;
  return 0;
}

static enum MHD_Result queue(vr_http_req *r) {
  if (!r->resp) return MHD_YES; /* deferred: nothing to send yet */
  enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)r->status,
                                           r->resp);
  r->queued = 1;
  MHD_destroy_response(r->resp);
  r->resp = NULL;
  return ret;
}

/* First call for a request: headers only. Oversized bodies are refused
 * before they are read (MHD then closes the connection). */
static enum MHD_Result on_headers(vr_http *h, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  void **con_cls) {
  vr_http_req *r = VR_NEW(vr_http_req);
  if (!r) return MHD_NO;
  r->h = h;
  r->conn = conn;
  r->t0 = vr_now_ns();
  r->url = url;
  r->method = method;
  *con_cls = r;
  __atomic_fetch_add(&h->inflight, 1, __ATOMIC_SEQ_CST);
  const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                               "Content-Length");
  unsigned long long clen = cl ? strtoull(cl, NULL, 10) : 0;
  if (cl && clen > h->o.max_body) {
    char msg[128];
    snprintf(msg, sizeof msg, "request body larger than %zu bytes",
             h->o.max_body);
    r->started = 1;
    vr_http_error(r, 413, msg);
    return queue(r);
  }
  if (clen > 0 && (r->body = vr_malloc((size_t)clen + 1))) /* one copy */
    r->cap = (size_t)clen + 1;
  return MHD_YES;
}

static enum MHD_Result ahc(void *cls, struct MHD_Connection *conn,
                           const char *url, const char *method,
                           const char *version, const char *upload,
                           size_t *upload_size, void **con_cls) {
  (void)version;
  vr_http *h = cls;
  vr_http_req *r = *con_cls;
  if (!r) return on_headers(h, conn, url, method, con_cls);
  if (*upload_size) {
    if (!r->too_big && append_body(r, upload, *upload_size)) r->too_big = 1;
    *upload_size = 0;
    return MHD_YES;
  }
  if (r->queued) return MHD_YES; /* answered early (413): ignore the rest */
  if (r->deferred) { /* woken */
    r->deferred = 0;
    r->resume_fn(r, h->o.user);
  } else if (!r->started) {
    r->started = 1;
    if (r->too_big)
      vr_http_error(r, 413, "request body too large");
    else if (h->draining)
      vr_http_error(r, 503, "server is shutting down");
    else
      h->o.handler(r, h->o.user);
  }
  if (!r->resp && !r->deferred) /* handler forgot to answer */
    vr_http_error(r, 500, "internal error: no response");
  return queue(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn,
                         void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)conn;
  (void)toe;
  vr_http *h = cls;
  vr_http_req *r = *con_cls;
  if (!r) return;
  if (r->state_free) r->state_free(r->state);
  if (r->resp) MHD_destroy_response(r->resp);
  vr_free(r->body);
  vr_free(r);
  *con_cls = NULL;
  __atomic_fetch_sub(&h->inflight, 1, __ATOMIC_SEQ_CST);
}

/* Connection limit: MHD's own limit leaves extra clients waiting in the
 * listen backlog; refusing them at accept gives a prompt, visible answer
 * (the socket is closed) instead. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr,
                                 socklen_t len) {
  (void)addr;
  (void)len;
  vr_http *h = cls;
  return __atomic_load_n(&h->conns, __ATOMIC_SEQ_CST) < (int)h->o.max_conns
             ? MHD_YES : MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code) {
  (void)c;
  (void)socket_ctx;
  vr_http *h = cls;
  __atomic_fetch_add(&h->conns, code == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1,
                     __ATOMIC_SEQ_CST);
}

int vr_http_start(const vr_http_opts *o, vr_http **out, vr_errbuf *err) {
  vr_http *h = VR_NEW(vr_http);
  if (!h) return vr_errf(err, VR_ENOMEM, "out of memory");
  h->o = *o;
  if (!h->o.host) h->o.host = "127.0.0.1";
  if (!h->o.max_body) h->o.max_body = 64u << 20;
  if (!h->o.max_conns) h->o.max_conns = 1024;
  if (!h->o.idle_timeout_s) h->o.idle_timeout_s = 60;
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)o->port);
  if (inet_pton(AF_INET, h->o.host, &sa.sin_addr) != 1) {
    vr_free(h);
    return vr_errf(err, VR_EINVAL, "--host '%s' is not an IPv4 address",
                   o->host);
  }
  unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO;
  h->d = MHD_start_daemon(
      flags, (uint16_t)o->port, on_accept, h, ahc, h, MHD_OPTION_SOCK_ADDR, &sa,
      MHD_OPTION_CONNECTION_LIMIT, h->o.max_conns + 16,
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
      MHD_OPTION_CONNECTION_TIMEOUT, h->o.idle_timeout_s,
      /* MHD zeroes its per-connection pool for every request: keep it small
       * (headers only; bodies go to our own buffer). */
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(16 * 1024),
      MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_END);
  if (!h->d) {
    vr_free(h);
    return vr_errf(err, VR_EIO, "cannot listen on %s:%d (in use?)",
                   o->host ? o->host : "127.0.0.1", o->port);
  }
  const union MHD_DaemonInfo *di =
      MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
  h->port = di ? di->port : o->port;
  const union MHD_DaemonInfo *de =
      MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD);
  pthread_mutex_init(&h->wmu, NULL);
  h->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  h->ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event e1 = {EPOLLIN, {.fd = de ? de->epoll_fd : -1}};
  struct epoll_event e2 = {EPOLLIN, {.fd = h->efd}};
  if (!de || h->efd < 0 || h->ep < 0 ||
      epoll_ctl(h->ep, EPOLL_CTL_ADD, de->epoll_fd, &e1) ||
      epoll_ctl(h->ep, EPOLL_CTL_ADD, h->efd, &e2) ||
      pthread_create(&h->thread, NULL, event_loop, h)) {
    MHD_stop_daemon(h->d);
    if (h->efd >= 0) close(h->efd);
    if (h->ep >= 0) close(h->ep);
    pthread_mutex_destroy(&h->wmu);
    vr_free(h);
    return vr_errf(err, VR_EIO, "cannot start the HTTP event thread");
  }
  *out = h;
  return 0;
}

int vr_http_port(const vr_http *h) { return h->port; }

void vr_http_drain(vr_http *h) {
  __atomic_store_n(&h->draining, 1, __ATOMIC_SEQ_CST);
  __atomic_store_n(&h->quiesce, 1, __ATOMIC_RELEASE);
  uint64_t one = 1;
  ssize_t w = write(h->efd, &one, sizeof one);
  (void)w;
  for (int i = 0; i < 2000 && __atomic_load_n(&h->quiesce, __ATOMIC_ACQUIRE) != 2; i++)
    usleep(500); /* the event thread closes the listening socket */
}

int vr_http_inflight(vr_http *h) {
  return __atomic_load_n(&h->inflight, __ATOMIC_SEQ_CST);
}

void vr_http_stop(vr_http *h) {
  if (!h) return;
  __atomic_store_n(&h->stop, 1, __ATOMIC_RELEASE);
  uint64_t one = 1;
  ssize_t w = write(h->efd, &one, sizeof one);
  (void)w;
  pthread_join(h->thread, NULL);
  resume_woken(h); /* MHD must not be stopped with parked connections */
  MHD_run(h->d);
  MHD_stop_daemon(h->d);
  close(h->efd);
  close(h->ep);
  vr_free(h->wake);
  pthread_mutex_destroy(&h->wmu);
  vr_free(h);
}
