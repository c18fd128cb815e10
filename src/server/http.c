#define _GNU_SOURCE /* pthread_setname_np */
#include "server/http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "server/encoding.h"
#include "server/kserve.h"
#include "server/sbuf.h"

/* The event loop is ours, not MHD's internal thread: one thread waits on
 * MHD's epoll fd and an eventfd. Other threads never call into MHD; to
 * resume a parked request they queue it (wake list) and signal the
 * eventfd, and the loop resumes it between MHD runs. (Resuming from
 * another thread while the request's handler was still running on the
 * event thread lost wake-ups under load: MHD cancels a resume that
 * arrives before its suspension completes.) */
/* One open connection (event thread only): what the timeouts and the
 * connection caps look at. Linked oldest first. */
typedef struct vr_http_conn {
  struct vr_http_conn *prev, *next;
  int fd;
  uint32_t ip;        /* IPv4, network order; 0 = other */
  int reserve;        /* accepted past max_conns: health and metrics only */
  int closing;        /* shut down by us; MHD closes it */
  int bad_url;        /* the request line decoded to a control byte */
  int64_t idle_since; /* opened, or its last response finished (ns) */
  int64_t headers_at; /* the current request's headers complete (ns) */
  struct vr_http_req *req; /* the request under way, or NULL */
} vr_http_conn;

struct vr_http {
  struct MHD_Daemon *d;
  vr_http_conn *head, *tail; /* open connections, oldest first */
  int64_t next_sweep;
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
  int draining; /* atomic: set by vr_http_drain, read by the event thread */
  int inflight; /* atomic */
  int conns;    /* open connections (atomic) */
  uint64_t own[6]; /* answers this layer gave itself, by status class (atomic) */
};

struct vr_http_req {
  vr_http *h;
  vr_http_conn *hc; /* its connection's record (NULL once closed) */
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

int64_t vr_http_arrived_ns(const vr_http_req *r) {
  const char *v = vr_http_header(r, VR_HTTP_UPSTREAM_HEADER);
  if (!v || !*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 8) return r->t0;
  long long us = atoll(v);
  return us <= 60000000 ? r->t0 - us * 1000 : r->t0;
}
const char *vr_http_url(const vr_http_req *r) { return r->url; }
const char *vr_http_header(const vr_http_req *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}
const char *vr_http_query(const vr_http_req *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}
typedef struct query_scan {
  const char *const *known;
  size_t n;
  const char *bad;
} query_scan;

static enum MHD_Result scan_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value) {
  (void)kind, (void)value;
  query_scan *q = cls;
  for (size_t i = 0; i < q->n; i++)
    if (!strcmp(key, q->known[i])) return MHD_YES;
  q->bad = key;
  return MHD_NO;
}

const char *vr_http_query_unknown(const vr_http_req *r, const char *const *known, size_t n) {
  query_scan q = {known, n, NULL};
  MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, scan_arg, &q);
  return q.bad;
}
int vr_http_pct_encode(char *b, size_t cap, size_t *n, const char *s, int keep_slash) {
  static const char hex[] = "0123456789ABCDEF";
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                (*p >= '0' && *p <= '9') || strchr("-._~", *p) || (keep_slash && *p == '/');
    if (*n + (plain ? 1 : 3) >= cap) return -1;
    if (plain) b[(*n)++] = (char)*p;
    else {
      b[(*n)++] = '%';
      b[(*n)++] = hex[*p >> 4];
      b[(*n)++] = hex[*p & 15];
    }
  }
  b[*n] = 0;
  return 0;
}

typedef struct target_acc {
  char *b;
  size_t cap, n;
  int args, bad;
} target_acc;

static int put_char(target_acc *t, char c) {
  if (t->n + 1 >= t->cap) return -1;
  t->b[t->n++] = c;
  t->b[t->n] = 0;
  return 0;
}

static enum MHD_Result put_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value) {
  (void)kind;
  target_acc *t = cls;
  if (put_char(t, t->args++ ? '&' : '?') || vr_http_pct_encode(t->b, t->cap, &t->n, key, 0) ||
      (value && (put_char(t, '=') || vr_http_pct_encode(t->b, t->cap, &t->n, value, 0)))) {
    t->bad = 1;
    return MHD_NO;
  }
  return MHD_YES;
}

int vr_http_target(const vr_http_req *r, char *out, size_t cap) {
  target_acc t = {out, cap, 0, 0, 0};
  if (!cap) return -1;
  out[0] = 0;
  if (vr_http_pct_encode(out, cap, &t.n, r->url, 1)) return -1;
  MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, put_arg, &t);
  return t.bad ? -1 : 0;
}

const char *vr_http_body(const vr_http_req *r, size_t *len) {
  *len = r->len;
  return r->body ? r->body : "";
}
int vr_http_path_segments(const char *url, char *buf, size_t cap, char **seg, int max) {
  if (strcspn(url, "?") >= cap) return -1; /* cut, it could name another path */
  snprintf(buf, cap, "%s", url);
  char *q = strchr(buf, '?');
  if (q) *q = 0;
  int n = 0;
  for (char *save = NULL, *t = strtok_r(buf, "/", &save); t;
       t = strtok_r(NULL, "/", &save)) {
    if (n == max) return -1;
    seg[n++] = t;
  }
  return n;
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
  if (__atomic_load_n(&r->h->draining, __ATOMIC_SEQ_CST))
    MHD_add_response_header(resp, "Connection", "close");
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
/* An answer of this layer's own (limits, bad heads, encodings), before
 * any handler: counted here, as the server counts its handlers' answers. */
static void own_error(vr_http_req *r, int status, const char *msg) {
  int k = status / 100;
  __atomic_fetch_add(&r->h->own[k >= 0 && k <= 5 ? k : 0], 1, __ATOMIC_RELAXED);
  vr_http_error(r, status, msg);
}

void vr_http_own_counts(vr_http *h, uint64_t out[6]) {
  for (int k = 0; k < 6; k++) out[k] = __atomic_load_n(&h->own[k], __ATOMIC_RELAXED);
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

/* Closes a connection from our side: MHD sees the shutdown as the peer
 * going away and releases it (there is no MHD call to drop one). */
static void conn_kill(vr_http_conn *hc) {
  if (hc->closing) return;
  hc->closing = 1;
  shutdown(hc->fd, SHUT_RDWR);
}

/* A connection with no request under way (between requests, or headers
 * still arriving) holds a slot without doing anything we can serve. */
static int conn_idle(const vr_http_conn *hc) { return !hc->req && !hc->closing; }

/* Timeouts, every 100 ms (event thread): headers must complete within
 * header_timeout_ms of opening or of the previous response, a body within
 * body_timeout_ms of its headers; under pressure (pool > 3/4 full) and in
 * the reserve, an idle connection gets 1 s. Requests being answered
 * (handler run, deferred, response being sent) are never cut. */
static void sweep(vr_http *h) {
  int64_t now = vr_now_ns();
  if (now < h->next_sweep) return;
  h->next_sweep = now + 100 * VR_NS_PER_MS;
  int pressure = h->conns * 4 > (int)h->o.max_conns * 3;
  int64_t hdr = (int64_t)h->o.header_timeout_ms * VR_NS_PER_MS;
  int64_t body = (int64_t)h->o.body_timeout_ms * VR_NS_PER_MS;
  for (vr_http_conn *hc = h->head; hc; hc = hc->next) {
    if (hc->closing) continue;
    if (!hc->req) {
      int64_t lim = pressure || hc->reserve ? VR_NS_PER_S : hdr;
      if (now - hc->idle_since > lim) conn_kill(hc);
    } else if (!hc->req->started && now - hc->headers_at > body) {
      conn_kill(hc);
    }
  }
}

static void *event_loop(void *arg) {
  vr_http *h = arg;
  pthread_setname_np(pthread_self(), "vr-http");
  struct epoll_event ev[4];
  while (!__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE)) {
    MHD_UNSIGNED_LONG_LONG to = 0;
    int timeout = 100; /* the sweep's period */
    if (MHD_get_timeout(h->d, &to) == MHD_YES && to < 100) timeout = (int)to;
    int n = epoll_wait(h->ep, ev, 4, timeout);
    for (int i = 0; i < n; i++)
      if (ev[i].data.fd == h->efd) resume_woken(h);
    if (__atomic_load_n(&h->quiesce, __ATOMIC_ACQUIRE) == 1) {
      MHD_socket ls = MHD_quiesce_daemon(h->d);
      if (ls != MHD_INVALID_SOCKET) close(ls);
      __atomic_store_n(&h->quiesce, 2, __ATOMIC_RELEASE);
    }
    MHD_run(h->d);
    sweep(h);
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

static int hexval(int c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decoding of the URL and its arguments, as MHD's own, except
 * that a decoded NUL or other control byte is remembered and the request
 * refused (MHD would cut "/v2/models/m%00x/infer" to "/v2/models/m"). */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s) {
  (void)cls;
  char *w = s;
  int bad = 0;
  for (const char *p = s; *p; p++) {
    int hi, lo;
    if (*p == '%' && (hi = hexval(p[1])) >= 0 && (lo = hexval(p[2])) >= 0) {
      int v = hi * 16 + lo;
      bad |= v < 0x20 || v == 0x7f;
      *w++ = (char)(v ? v : '?');
      p += 2;
    } else {
      bad |= (unsigned char)*p < 0x20 || *p == 0x7f;
      *w++ = *p;
    }
  }
  *w = 0;
  if (bad) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    vr_http_conn *hc = ci ? ci->socket_context : NULL;
    if (hc) hc->bad_url = 1;
  }
  return (size_t)(w - s);
}

typedef struct cl_scan {
  int n;
  const char *first;
  int conflict;
} cl_scan;

static enum MHD_Result cl_count(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value) {
  (void)kind;
  cl_scan *c = cls;
  if (strcasecmp(key, "Content-Length")) return MHD_YES;
  if (c->n++ && (!value || !c->first || strcmp(value, c->first))) c->conflict = 1;
  if (c->n == 1) c->first = value;
  return MHD_YES;
}

/* What the request head must not carry: a control byte in the URL, more
 * than one Content-Length (even equal ones: request smuggling), or one
 * that is not a plain decimal number, a Transfer-Encoding together with a
 * Content-Length (RFC 9112 6.1: the two framings disagree, smuggling
 * again), or a Transfer-Encoding other than chunked (*status 501: MHD
 * would wait for a body it cannot frame). NULL when fine. */
static const char *bad_head(struct MHD_Connection *conn, vr_http_conn *hc, int *status) {
  *status = 400;
  if (hc && hc->bad_url) {
    hc->bad_url = 0;
    return "the URL contains a NUL or other control byte";
  }
  cl_scan c = {0, NULL, 0};
  MHD_get_connection_values(conn, MHD_HEADER_KIND, cl_count, &c);
  const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Transfer-Encoding");
  if (te && c.n) return "both Transfer-Encoding and Content-Length";
  if (te && strcasecmp(te, "chunked")) {
    *status = 501;
    return "only Transfer-Encoding: chunked is supported";
  }
  if (c.n > 1) return "more than one Content-Length header";
  if (c.n == 1) {
    const char *p = c.first;
    if (!p || !*p || strlen(p) > 19) return "Content-Length is not a decimal number";
    for (; *p; p++)
      if (*p < '0' || *p > '9') return "Content-Length is not a decimal number";
  }
  return NULL;
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
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  vr_http_conn *hc = ci ? ci->socket_context : NULL;
  if (hc) {
    hc->req = r;
    hc->headers_at = r->t0;
    r->hc = hc;
  }
  int bad_status;
  const char *bad = bad_head(conn, hc, &bad_status);
  if (bad) { /* answered, and the connection closed: its framing is suspect */
    r->started = 1;
    own_error(r, bad_status, bad);
    MHD_add_response_header(r->resp, "Connection", "close");
    return queue(r);
  }
  /* A connection from the reserve serves probes only. */
  if (hc && hc->reserve && strncmp(url, "/v2/health/", 11) && strcmp(url, "/metrics")) {
    char msg[160];
    snprintf(msg, sizeof msg, "server at its connection limit (%u); retry later",
             h->o.max_conns);
    r->started = 1;
    own_error(r, 503, msg);
    MHD_add_response_header(r->resp, "Connection", "close");
    MHD_add_response_header(r->resp, "Retry-After", "1");
    return queue(r);
  }
  const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                               "Content-Length");
  unsigned long long clen = cl ? strtoull(cl, NULL, 10) : 0;
  if (cl && clen > h->o.max_body) {
    char msg[128];
    snprintf(msg, sizeof msg, "request body larger than %zu bytes",
             h->o.max_body);
    r->started = 1;
    own_error(r, 413, msg);
    return queue(r);
  }
  if (clen > 0 && (r->body = vr_malloc((size_t)clen + 1))) /* one copy */
    r->cap = (size_t)clen + 1;
  return MHD_YES;
}

/* A body sent with Content-Encoding gzip or deflate is inflated here, so
 * every handler (and Inference-Header-Content-Length) sees the plain
 * body, as Triton's endpoint does. 0 = go on; else answered (413/415/400). */
static int decode_body(vr_http *h, vr_http_req *r) {
  const char *ce = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Encoding");
  vr_content_coding cc = vr_content_coding_of(ce);
  if (cc == VR_CE_IDENTITY) return 0;
  if (cc == VR_CE_UNKNOWN) {
    char msg[160];
    snprintf(msg, sizeof msg, "Content-Encoding '%.64s' is not supported (gzip, deflate"
             " or identity)", ce);
    own_error(r, 415, msg);
    return 415;
  }
  char *plain;
  size_t len;
  vr_errbuf err = {0};
  int rc = vr_inflate_body(r->body ? r->body : "", r->len, h->o.max_body, &plain, &len, &err);
  if (rc) {
    int st = rc == VR_ERANGE ? 413 : rc == VR_ENOMEM ? 500 : 400;
    own_error(r, st, err.msg);
    return st;
  }
  vr_free(r->body);
  r->body = plain;
  r->len = len;
  r->cap = len + 1;
  return 0;
}

static enum MHD_Result ahc(void *cls, struct MHD_Connection *conn,
                           const char *url, const char *method,
                           const char *version, const char *upload,
                           size_t *upload_size, void **con_cls) {
  (void)version;
  vr_http *h = cls;
  vr_http_req *r = *con_cls;
  if (!r) return on_headers(h, conn, url, method, con_cls);
  if (*upload_size) { /* answered early (400/413/503): the rest is dropped */
    if (!r->queued && !r->too_big && append_body(r, upload, *upload_size))
      r->too_big = 1;
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
      own_error(r, 413, "request body too large");
    else if (__atomic_load_n(&h->draining, __ATOMIC_SEQ_CST) && strncmp(r->url, "/v2/health/", 11))
      own_error(r, 503, "server is shutting down"); /* probes: the handler says not ready */
    else if (!decode_body(h, r))
      h->o.handler(r, h->o.user);
  }
  if (!r->resp && !r->deferred) /* handler forgot to answer */
    own_error(r, 500, "internal error: no response");
  return queue(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn,
                         void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)conn;
  (void)toe;
  vr_http *h = cls;
  vr_http_req *r = *con_cls;
  if (!r) return;
  if (r->hc) {
    r->hc->req = NULL;
    r->hc->idle_since = vr_now_ns();
  }
  if (r->state_free) r->state_free(r->state);
  if (r->resp) MHD_destroy_response(r->resp);
  vr_free(r->body);
  vr_free(r);
  *con_cls = NULL;
  __atomic_fetch_sub(&h->inflight, 1, __ATOMIC_SEQ_CST);
}

static int is_loopback(uint32_t ip_be) { return (ntohl(ip_be) >> 24) == 127; }

/* Connection limits, at accept (event thread). Past max_conns the oldest
 * connection with no request under way is closed to make room (an idle
 * or trickling socket must not keep a prober out); with none, the new
 * connection goes to the reserve (probes only); past the reserve it is
 * closed at once, a prompt, visible answer rather than a wait in the
 * listen backlog. One client (IPv4 address) holds at most max_per_client. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr,
                                 socklen_t len) {
  vr_http *h = cls;
  uint32_t ip = addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)
                    ? ((const struct sockaddr_in *)addr)->sin_addr.s_addr : 0;
  if (ip && h->o.max_per_client && (h->o.cap_loopback || !is_loopback(ip))) {
    unsigned n = 0;
    for (vr_http_conn *hc = h->head; hc; hc = hc->next) n += hc->ip == ip && !hc->closing;
    if (n >= h->o.max_per_client) return MHD_NO;
  }
  int open = 0;
  for (vr_http_conn *hc = h->head; hc; hc = hc->next) open += !hc->closing;
  if (open < (int)h->o.max_conns) return MHD_YES;
  for (vr_http_conn *hc = h->head; hc; hc = hc->next)
    if (conn_idle(hc) && !hc->reserve) {
      conn_kill(hc);
      return MHD_YES;
    }
  return h->conns < (int)(h->o.max_conns + h->o.reserve) ? MHD_YES : MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code) {
  vr_http *h = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    int n = __atomic_add_fetch(&h->conns, 1, __ATOMIC_SEQ_CST);
    vr_http_conn *hc = VR_NEW(vr_http_conn);
    *socket_ctx = hc;
    if (!hc) return; /* untracked: no timeouts for it, MHD's still apply */
    const union MHD_ConnectionInfo *fi =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    hc->fd = fi ? fi->connect_fd : -1;
    if (ai && ai->client_addr && ai->client_addr->sa_family == AF_INET)
      hc->ip = ((const struct sockaddr_in *)ai->client_addr)->sin_addr.s_addr;
    int open = 0;
    for (vr_http_conn *o = h->head; o; o = o->next) open += !o->closing;
    hc->reserve = open >= (int)h->o.max_conns;
    (void)n;
    hc->idle_since = vr_now_ns();
    hc->prev = h->tail;
    if (h->tail) h->tail->next = hc;
    else h->head = hc;
    h->tail = hc;
    return;
  }
  __atomic_fetch_sub(&h->conns, 1, __ATOMIC_SEQ_CST);
  vr_http_conn *hc = *socket_ctx;
  if (!hc) return;
  if (hc->req) hc->req->hc = NULL;
  if (hc->prev) hc->prev->next = hc->next;
  else h->head = hc->next;
  if (hc->next) hc->next->prev = hc->prev;
  else h->tail = hc->prev;
  vr_free(hc);
  *socket_ctx = NULL;
}

int vr_http_start(const vr_http_opts *o, vr_http **out, vr_errbuf *err) {
  vr_http *h = VR_NEW(vr_http);
  if (!h) return vr_errf(err, VR_ENOMEM, "out of memory");
  h->o = *o;
  if (!h->o.host) h->o.host = "127.0.0.1";
  if (!h->o.max_body) h->o.max_body = 64u << 20;
  if (!h->o.max_conns) h->o.max_conns = 1024;
  if (!h->o.idle_timeout_s) h->o.idle_timeout_s = 60;
  if (!h->o.header_timeout_ms) h->o.header_timeout_ms = 10000;
  if (!h->o.body_timeout_ms) h->o.body_timeout_ms = 30000;
  if (!h->o.reserve) h->o.reserve = 32;
  if (!h->o.max_per_client) h->o.max_per_client = 256;
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
  struct MHD_OptionItem tls[] = {
      {MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)h->o.tls_key_pem},
      {MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)h->o.tls_cert_pem},
      {MHD_OPTION_END, 0, NULL}};
  int use_tls = h->o.tls_key_pem || h->o.tls_cert_pem;
  if (use_tls && (!h->o.tls_key_pem || !h->o.tls_cert_pem)) {
    vr_free(h);
    return vr_errf(err, VR_EINVAL, "TLS needs both a key and a certificate");
  }
  if (use_tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    vr_free(h);
    return vr_errf(err, VR_EUNSUPPORTED, "this libmicrohttpd has no TLS support");
  }
  if (use_tls) flags |= MHD_USE_TLS;
  h->d = MHD_start_daemon(
      flags, (uint16_t)o->port, on_accept, h, ahc, h, MHD_OPTION_SOCK_ADDR, &sa,
      MHD_OPTION_ARRAY, use_tls ? tls : tls + 2,
      MHD_OPTION_CONNECTION_LIMIT, h->o.max_conns + h->o.reserve + 16,
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
      MHD_OPTION_UNESCAPE_CALLBACK, unescape, h,
      MHD_OPTION_CONNECTION_TIMEOUT, h->o.idle_timeout_s,
      /* MHD zeroes its per-connection pool for every request: keep it small
       * (headers only; bodies go to our own buffer). */
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(16 * 1024),
      MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_END);
  if (!h->d) {
    vr_free(h);
    return vr_errf(err, VR_EIO, use_tls ? "cannot listen on %s:%d (in use? or a bad TLS"
                   " key/certificate)" : "cannot listen on %s:%d (in use?)",
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

int vr_http_draining(const vr_http_req *r) {
  return __atomic_load_n(&r->h->draining, __ATOMIC_SEQ_CST);
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
