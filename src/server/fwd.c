/* The front end's forwarder (fwd.h): connection pools per worker, one
 * epoll I/O thread, retry on another worker, timeouts. */
#define _GNU_SOURCE /* ppoll */
#include "server/fwd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "policy/drop.h"
#include "server/fwd_int.h"
#include "server/http.h"
#include "server/httpc.h"


void vr_fwd_opts_init(vr_fwd_opts *o) {
  memset(o, 0, sizeof *o);
  o->timeout_ms = 30000;
  o->max_tries = 3;
  o->down_ms = 1000;
  o->max_idle = 64;
  o->max_conns = 256;
}

void vr__fwd_conn_free(conn *c) {
  if (!c) return;
  if (c->fd >= 0) close(c->fd);
  vr_free(c->buf);
  vr_free(c->head_big);
  vr_free(c);
}


void vr_fwd_call_clear(vr_fwd_call *c) {
  vr_free(c->resp);
  c->resp = NULL;
  c->resp_len = 0;
  vr_free(c->resp_headers);
  c->resp_headers = NULL;
}

void vr_fwd_get_stats(vr_fwd *f, vr_fwd_stats *s) {
  s->sent = __atomic_load_n(&f->st.sent, __ATOMIC_RELAXED);
  s->ok = __atomic_load_n(&f->st.ok, __ATOMIC_RELAXED);
  s->retried = __atomic_load_n(&f->st.retried, __ATOMIC_RELAXED);
  s->failed = __atomic_load_n(&f->st.failed, __ATOMIC_RELAXED);
  s->timeouts = __atomic_load_n(&f->st.timeouts, __ATOMIC_RELAXED);
  s->dropped = __atomic_load_n(&f->st.dropped, __ATOMIC_RELAXED);
}

int vr_fwd_parse_worker(const char *s, vr_fwd_worker *w, vr_errbuf *err) {
  memset(w, 0, sizeof *w);
  const char *eq = strchr(s, '=');
  const char *hp = eq ? eq + 1 : s;
  size_t idlen = eq ? (size_t)(eq - s) : strlen(s);
  const char *colon = strrchr(hp, ':');
  if (!colon || idlen == 0 || idlen >= sizeof w->id ||
      (size_t)(colon - hp) >= sizeof w->host || colon == hp)
    return vr_errf(err, VR_EINVAL, "worker '%.100s': expected ID=HOST:PORT", s);
  memcpy(w->id, s, idlen);
  memcpy(w->host, hp, (size_t)(colon - hp));
  char *end;
  long port = strtol(colon + 1, &end, 10);
  struct in_addr a;
  if (*end || port < 1 || port > 65535 || inet_pton(AF_INET, w->host, &a) != 1)
    return vr_errf(err, VR_EINVAL, "worker '%.100s': expected ID=HOST:PORT"
                   " with an IPv4 host and a port", s);
  w->port = (int)port;
  return 0;
}

/* ---- calls waiting for a connection (max_conns) ---------------------------- */

static void wq_push(vr_fwd_call **head, vr_fwd_call **tail, vr_fwd_call *c) {
  c->wq_next = NULL;
  if (*tail) (*tail)->wq_next = c;
  else *head = c;
  *tail = c;
}

int vr__fwd_wq_release(vr_fwd *f, fworker *x, int n) {
  int moved = 0;
  while (x->wq && (n < 0 || moved < n)) {
    vr_fwd_call *c = x->wq;
    x->wq = c->wq_next;
    if (!x->wq) x->wq_tail = NULL;
    wq_push(&f->ready, &f->ready_tail, c);
    moved++;
  }
  return moved;
}

void vr__fwd_wake_io(vr_fwd *f) {
  if (pthread_equal(pthread_self(), f->io)) return; /* it sends them next */
  uint64_t one = 1;
  if (write(f->evfd, &one, sizeof one) < 0) { /* the 100 ms poll sends them */ }
}

/* ---- calls -------------------------------------------------------------- */

static void finish(vr_fwd *f, vr_fwd_call *c, int status, const char *msg) {
  if (status >= 500 && msg) {
    c->status = status;
    if (msg != c->msg) {
      size_t l = strnlen(msg, sizeof c->msg - 1);
      memmove(c->msg, msg, l);
      c->msg[l] = 0;
    }
    /* a timeout counts as one, not as failed too (fail_try): the
     * outcomes of vario_frontend_forwarded_total partition the requests */
    if (status != 504) __atomic_fetch_add(&f->st.failed, 1, __ATOMIC_RELAXED);
  }
  c->done(c, c->user);
}

/* Writes what is left of the request. 1 = all sent, 0 = would block,
 * -1 = error. */
static int conn_write(conn *k) {
  vr_fwd_call *c = k->call;
  const char *head = k->head_big ? k->head_big : k->head;
  size_t total = k->head_len + c->body_len;
  while (k->sent < total) {
    struct iovec iov[2];
    int n = 0;
    if (k->sent < k->head_len)
      iov[n++] = (struct iovec){(char *)head + k->sent, k->head_len - k->sent};
    size_t boff = k->sent > k->head_len ? k->sent - k->head_len : 0;
    if (c->body_len > boff)
      iov[n++] = (struct iovec){(char *)c->body + boff, c->body_len - boff};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(k->fd, &m, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (w <= 0) return -1;
    k->sent += (size_t)w;
  }
  return 1;
}

static void busy_del(vr_fwd *f, conn *k) {
  if (k->prev) k->prev->next = k->next;
  else if (f->busy == k) f->busy = k->next;
  if (k->next) k->next->prev = k->prev;
  k->prev = k->next = NULL;
}

static void fail_try(vr_fwd *f, conn *k, const char *why);
static int read_some(vr_fwd *f, conn *k);

/* Writing the request failed. A worker may answer before it has read the
 * whole body (413: past its body limit) and close, which fails the write:
 * that answer, when it came whole, is the request's, not a failure of the
 * worker (failing the try marked every worker of the key down and retried
 * the body on each). With nothing sent the connect itself failed. The
 * reason names that step and the system's error e ("connect: Connection
 * refused": "send failed" did not say that no worker listened there). */
static void write_failed(vr_fwd *f, conn *k, int e) {
  char why[128];
  snprintf(why, sizeof why, "%s: %s", k->sent ? "send" : "connect", strerror(e));
  if (k->sent > 0 && read_some(f, k) != 0) return;
  fail_try(f, k, why);
}

/* Arms k for the I/O thread (EPOLLOUT while the request is not all sent). */
static int arm(vr_fwd *f, conn *k, int want_out) {
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT |
                                     (want_out ? EPOLLOUT : 0),
                           .data.ptr = k};
  if (epoll_ctl(f->ep, EPOLL_CTL_MOD, k->fd, &ev) == 0) return 0;
  return epoll_ctl(f->ep, EPOLL_CTL_ADD, k->fd, &ev);
}

/* A connection to x at addr (x's address when it was picked, read under
 * mu, and gen its generation). */
static conn *conn_new(vr_fwd *f, fworker *x, const vr_fwd_worker *addr, unsigned gen,
                      char *why, size_t wlen) {
  conn *k = VR_NEW(conn);
  if (!k) {
    snprintf(why, wlen, "out of memory");
    return NULL;
  }
  k->w = x;
  k->gen = gen;
  k->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (k->fd < 0) {
    snprintf(why, wlen, "socket: %s", strerror(errno));
    vr_free(k);
    return NULL;
  }
  int one = 1;
  setsockopt(k->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)addr->port)};
  inet_pton(AF_INET, addr->host, &sa.sin_addr);
  if (connect(k->fd, (struct sockaddr *)&sa, sizeof sa) && errno != EINPROGRESS) {
    snprintf(why, wlen, "connect %s:%d: %s", addr->host, addr->port, strerror(errno));
    vr__fwd_conn_free(k);
    return NULL;
  }
  return k;
}

static void send_try(vr_fwd *f, vr_fwd_call *c);

/* May c be sent again after a worker may have acted on it? Reads and
 * inference (no side effects) may; the other writes a front end forwards
 * (registering or removing a model or a pipeline, an app's settings)
 * may not: sent twice, the first could have taken effect and the second
 * would then be refused (409) or act twice. */
static int replayable(const vr_fwd_call *c) {
  if (!strcmp(c->method, "GET") || !strcmp(c->method, "HEAD")) return 1;
  size_t n = strcspn(c->path, "?");
  return n >= 6 && !memcmp(c->path + n - 6, "/infer", 6);
}

void vr_fwd_send(vr_fwd *f, const char *key, vr_fwd_call *c) {
  if (c->tries == 0) {
    if (key != c->key) {
      size_t kl = strnlen(key, sizeof c->key - 1);
      memcpy(c->key, key, kl);
      c->key[kl] = 0;
    }
    c->status = 0;
    c->msg[0] = 0;
    c->resp = NULL;
    c->resp_len = 0;
    c->resp_ihcl = (size_t)-1;
    c->resp_headers = NULL;
    c->wq_until = 0;
    c->once = !replayable(c);
    c->refused = 0;
    __atomic_fetch_add(&f->st.sent, 1, __ATOMIC_RELAXED);
  }
  send_try(f, c);
}

/* Sends c (key, tries set) to the lightest worker of its key, or answers
 * it, or has it wait for a connection (max_conns). */
static void send_try(vr_fwd *f, vr_fwd_call *c) {
  int64_t now = vr_now_ns();
  for (;;) {
    pthread_mutex_lock(&f->mu);
    int any = 0;
    int wi = __atomic_load_n(&f->stop, __ATOMIC_ACQUIRE) ? -1 : vr__fwd_pick(f, c->key, c, now, &any);
    if (wi < 0) {
      pthread_mutex_unlock(&f->mu);
      char msg[512];
      if (__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) snprintf(msg, sizeof msg, "front end shutting down");
      else if (!any)
        snprintf(msg, sizeof msg, "no worker serves '%.100s'", c->key);
      else if (c->tries)
        snprintf(msg, sizeof msg, "%.250s (no other worker left for '%.60s')",
                 c->msg[0] ? c->msg : "worker failed", c->key);
      else
        snprintf(msg, sizeof msg, "every worker of '%.100s' is down", c->key);
      /* a refusal with no other worker left stays a 503 (retry later) */
      finish(f, c, any && c->tries && !c->refused ? 502 : 503, msg);
      return;
    }
    c->refused = 0;
    fworker *x = f->tw[wi];
    if (c->once && x->n_idle) {
      /* a fresh connection: on a pooled one, the worker closing it as idle
       * and a request it received look alike (no answer), and only the
       * first may be sent again */
      vr__fwd_conn_free(x->idle[--x->n_idle]);
      x->open--;
    }
    if (!x->n_idle && x->open >= f->o.max_conns) {
      /* pick took the lightest: every worker of the key has max_conns
       * requests under way. Wait for one of x's connections to come free
       * rather than open one more, which a worker closes at accept past
       * its per-client cap (that failed the request and marked the
       * worker down, and then the next, until every request failed). */
      if (!c->wq_until) c->wq_until = now + (int64_t)f->o.timeout_ms * 1000000;
      c->sync_us = 0; /* the I/O thread sends it again: it must not wait */
      wq_push(&x->wq, &x->wq_tail, c);
      pthread_mutex_unlock(&f->mu);
      return;
    }
    conn *k = x->n_idle ? x->idle[--x->n_idle] : NULL;
    if (!k) x->open++;
    x->outstanding++;
    vr_fwd_worker addr = x->w;
    unsigned gen = x->gen;
    if (c->tries < 4) c->tried[c->tries] = x;
    c->tries++;
    snprintf(c->worker, sizeof c->worker, "%s", x->w.id);
    pthread_mutex_unlock(&f->mu);
    char why[200] = "";
    if (k) k->reused = 1;
    else k = conn_new(f, x, &addr, gen, why, sizeof why);
    if (!k) {
      pthread_mutex_lock(&f->mu);
      x->outstanding--;
      x->open--;
      x->down_until = now + (int64_t)f->o.down_ms * 1000000;
      int moved = vr__fwd_wq_release(f, x, -1); /* down: they pick again */
      pthread_mutex_unlock(&f->mu);
      if (moved) vr__fwd_wake_io(f);
      snprintf(c->msg, sizeof c->msg, "worker %s: %s", x->w.id, why);
      if (c->tries > 1) __atomic_fetch_add(&f->st.retried, 1, __ATOMIC_RELAXED);
      if (c->tries < f->o.max_tries) continue;
      finish(f, c, 502, c->msg);
      return;
    }
    k->call = c;
    k->len = 0;
    k->sent = 0;
    k->timed_out = 0;
    vr_free(k->head_big);
    k->head_big = NULL;
    const char *hx = c->headers ? c->headers : "";
    /* the time spent here so far (queued, waiting, earlier tries): the
     * worker counts the query's deadline from its arrival here */
    char up[64] = "";
    if (c->origin_ns > 0)
      snprintf(up, sizeof up, VR_HTTP_UPSTREAM_HEADER ": %lld\r\n",
               (long long)(now > c->origin_ns ? (now - c->origin_ns) / 1000 : 0));
    int n = snprintf(k->head, sizeof k->head,
                     "%s %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Length: %zu\r\n%s%s\r\n",
                     c->method, c->path, addr.host, addr.port, c->body_len, up, hx);
    if (n >= (int)sizeof k->head) {
      k->head_big = vr_malloc((size_t)n + 1);
      if (k->head_big)
        snprintf(k->head_big, (size_t)n + 1,
                 "%s %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Length: %zu\r\n%s%s\r\n",
                 c->method, c->path, addr.host, addr.port, c->body_len, up, hx);
    }
    k->head_len = (size_t)n;
    /* the time it waited for a connection counts */
    c->deadline_ns = c->wq_until ? c->wq_until : now + (int64_t)f->o.timeout_ms * 1000000;
    c->wq_until = 0;
    pthread_mutex_lock(&f->mu);
    k->next = f->busy;
    if (f->busy) f->busy->prev = k;
    f->busy = k;
    pthread_mutex_unlock(&f->mu);
    int w = (n >= (int)sizeof k->head && !k->head_big) ? -1 : conn_write(k);
    if (w == 1 && c->sync_us > 0) {
      /* The caller is otherwise idle: sleep on this socket for the answer
       * (the kernel wakes this thread directly) rather than hand the
       * connection to the I/O thread and be woken by it (one thread
       * switch less per request). Past sync_us the I/O thread takes it. */
      int64_t until = now + (int64_t)c->sync_us * 1000;
      for (;;) {
        int64_t left = until - vr_now_ns();
        if (left <= 0) break;
        struct pollfd pfd = {.fd = k->fd, .events = POLLIN};
        struct timespec ts = {left / 1000000000, left % 1000000000};
        int pr = ppoll(&pfd, 1, &ts, NULL);
        if (pr < 0 && errno != EINTR) break;
        if (pr <= 0) continue;
        int rr = read_some(f, k);
        if (rr != 0) return; /* answered, or failed (and retried) */
      }
    }
    if (w < 0) return write_failed(f, k, errno);
    if (arm(f, k, w == 0)) {
      fail_try(f, k, "epoll");
      return;
    }
    return;
  }
}

/* This try failed on connection k (owned by the caller): close it, mark
 * the worker down unless the connection was merely a stale keep-alive,
 * and try another worker (or answer). */
static void fail_try(vr_fwd *f, conn *k, const char *why) {
  vr_fwd_call *c = k->call;
  fworker *x = k->w;
  /* set by the I/O thread's timeout scan (under mu, which we do not hold) */
  int timed_out = __atomic_load_n(&k->timed_out, __ATOMIC_ACQUIRE);
  int stale = k->reused && k->len == 0 && !timed_out;
  int sent = k->sent > 0; /* the worker may have the request */
  pthread_mutex_lock(&f->mu);
  busy_del(f, k);
  x->outstanding--;
  x->open--;
  if (!stale) x->down_until = vr_now_ns() + (int64_t)f->o.down_ms * 1000000;
  /* a connection came free; down, all its waiters pick again */
  int moved = vr__fwd_wq_release(f, x, stale ? 1 : -1);
  pthread_mutex_unlock(&f->mu);
  vr__fwd_conn_free(k);
  if (moved) vr__fwd_wake_io(f);
  if (stale) { /* the worker closed an idle connection: same worker again */
    c->tries--;
    send_try(f, c);
    return;
  }
  snprintf(c->msg, sizeof c->msg, "worker %s (%s:%d): %s", x->w.id, x->w.host,
           x->w.port, timed_out ? "no answer in time" : why);
  if (timed_out) {
    __atomic_fetch_add(&f->st.timeouts, 1, __ATOMIC_RELAXED);
    finish(f, c, 504, c->msg); /* the time is spent: no retry */
    return;
  }
  if (c->once && sent) {
    size_t l = strlen(c->msg);
    snprintf(c->msg + l, sizeof c->msg - l, " (not sent again: the worker may have acted on it)");
    finish(f, c, 502, c->msg);
    return;
  }
  if (c->tries < f->o.max_tries) {
    __atomic_fetch_add(&f->st.retried, 1, __ATOMIC_RELAXED);
    send_try(f, c);
    return;
  }
  finish(f, c, 502, c->msg);
}

/* Is the answer in k->buf later than its worker allows (http.h,
 * Vario-Due-Us: its deadline plus its batch's time, counted from the
 * query's origin here)? The worker starts that count when it reads the
 * query, less the time it spent here (Vario-Upstream-Us), so the time
 * the query waited unread in its socket (a worker hung or stopped) is on
 * this clock only. Then it is answered as dropped, not passed on late:
 * the rule of policy/drop.h (the worker folded the batch into its due).
 * The reason goes to c->msg. */
static int answer_late(vr_fwd_call *c, const conn *k, const vr_http_head *h, int64_t now) {
  if (c->origin_ns <= 0 || h->status != 200) return 0;
  size_t x = vr__http_head_num(k->buf, h->head_len, VR_HTTP_DUE_HEADER);
  if (x > 999999999999999) return 0; /* none, or not one of ours: passed on */
  int64_t due_us = (int64_t)x, due = c->origin_ns + due_us * 1000;
  if (!vr_drop_answer_due(now, due, 0)) return 0;
  snprintf(c->msg, sizeof c->msg, "dropped: the deadline cannot be met (worker %s answered "
           "%.3f ms after the query reached the front end, more than its deadline and its "
           "batch's time, %.3f ms)", c->worker, (now - c->origin_ns) / 1e6, due_us / 1e3);
  return 1;
}

/* A whole response is in k->buf: hand it to the call, pool the conn. */
static void complete(vr_fwd *f, conn *k, const vr_http_head *h) {
  vr_fwd_call *c = k->call;
  /* 503 with Connection: close is a worker refusing work (draining after
   * SIGTERM: the 503s of the keep-alive connections it still has until
   * its last requests are answered; or past its connections): a request
   * that may go again goes to another worker, as when its connection
   * fails, not back to the client while another worker can serve it */
  if (h->status == 503 && h->close && !c->once && c->tries < f->o.max_tries) {
    c->refused = 1;
    fail_try(f, k, "503, closing: shutting down or at its connection limit");
    return;
  }
  int late = answer_late(c, k, h, vr_now_ns());
  size_t cl = h->content_len;
  c->status = late ? 504 : h->status;
  c->resp_ihcl = late ? (size_t)-1 : h->ihcl;
  c->resp_len = late ? 0 : cl;
  c->resp = late ? NULL : vr_malloc(cl ? cl : 1);
  if (c->resp) memcpy(c->resp, k->buf + h->head_len, cl);
  else if (!late) {
    c->status = 500;
    snprintf(c->msg, sizeof c->msg, "out of memory");
    c->resp_len = 0;
  }
  static const char *const pass[] = {"Content-Type", "WWW-Authenticate", "Retry-After",
                                     "Allow"};
  enum { NPASS = sizeof pass / sizeof *pass };
  size_t vl[NPASS], need = 0;
  const char *v[NPASS];
  for (int i = 0; i < NPASS; i++) {
    v[i] = vr__http_head_value(k->buf, h->head_len, pass[i], &vl[i]);
    if (v[i]) need += strlen(pass[i]) + vl[i] + 4;
  }
  if (need && !late && (c->resp_headers = vr_malloc(need + 1))) {
    size_t o = 0;
    for (int i = 0; i < NPASS; i++)
      if (v[i])
        o += (size_t)snprintf(c->resp_headers + o, need + 1 - o, "%s: %.*s\r\n", pass[i],
                              (int)vl[i], v[i]);
  }
  /* an answer that came before the whole request was sent (write_failed,
   * on_event) leaves the rest of the body unread: the connection is spent */
  int keep = !h->close && k->len == h->head_len + cl &&
             k->sent == k->head_len + c->body_len;
  fworker *x = k->w;
  pthread_mutex_lock(&f->mu);
  busy_del(f, k);
  x->outstanding--;
  k->call = NULL;
  /* not to the pool of a worker that moved meanwhile: it leads to the old
   * address */
  if (keep && x->in_table && k->gen == x->gen && x->n_idle < f->o.max_idle && !f->stop) {
    x->idle[x->n_idle++] = k;
    k = NULL;
  } else {
    x->open--;
  }
  int moved = vr__fwd_wq_release(f, x, 1); /* a connection came free */
  pthread_mutex_unlock(&f->mu);
  vr__fwd_conn_free(k);
  if (moved) vr__fwd_wake_io(f);
  __atomic_fetch_add(late ? &f->st.dropped : &f->st.ok, 1, __ATOMIC_RELAXED);
  c->done(c, c->user);
}

/* Reads what the socket has. 1 = the response is whole (complete() ran),
 * -1 = the try failed (fail_try() ran), 0 = more to come. */
static int read_some(vr_fwd *f, conn *k) {
  for (;;) {
    if (k->len + 65536 > k->cap) {
      size_t cap = k->cap ? k->cap * 2 : 65536 * 2;
      char *p = vr_realloc(k->buf, cap);
      if (!p) return fail_try(f, k, "out of memory"), -1;
      k->buf = p;
      k->cap = cap;
    }
    ssize_t r = recv(k->fd, k->buf + k->len, k->cap - k->len, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (r <= 0)
      return fail_try(f, k, r == 0 ? "connection closed before a response"
                                   : "connection reset"), -1;
    k->len += (size_t)r;
    vr_http_head h;
    int pr = vr_http_parse_head(k->buf, k->len, &h);
    if (pr < 0) return fail_try(f, k, "malformed HTTP response"), -1;
    if (pr == 1) {
      /* RFC 9110: the answer to a HEAD, and a 1xx/204/304, has no body,
       * whatever Content-Length says (it is the GET's). */
      if (!strcmp(k->call->method, "HEAD") || h.status / 100 == 1 || h.status == 204 ||
          h.status == 304)
        h.content_len = 0;
      if (h.content_len == (size_t)-1)
        return fail_try(f, k, "response without Content-Length"), -1;
      if (k->len >= h.head_len + h.content_len) return complete(f, k, &h), 1;
    }
  }
}

/* I/O thread: an event on k. */
static void on_event(vr_fwd *f, conn *k, uint32_t ev) {
  vr_fwd_call *c = k->call;
  if (k->sent < k->head_len + c->body_len) {
    /* the worker answered before it read the whole body: that answer is
     * the request's (write_failed) */
    if ((ev & EPOLLIN) && k->sent > 0) {
      int rr = read_some(f, k);
      if (rr != 0) return;
    }
    int w = conn_write(k);
    if (w < 0) return write_failed(f, k, errno);
    if (w == 0) {
      if (arm(f, k, 1)) fail_try(f, k, "epoll");
      return;
    }
  }
  if (read_some(f, k) == 0 && arm(f, k, 0)) fail_try(f, k, "epoll");
}

static void *io_main(void *arg) {
  vr_fwd *f = arg;
  struct epoll_event evs[64];
  int64_t next_scan = 0;
  for (;;) {
    int n = epoll_wait(f->ep, evs, 64, 100);
    for (int i = 0; i < n; i++) {
      if (evs[i].data.ptr == NULL) {
        uint64_t v;
        if (read(f->evfd, &v, sizeof v) < 0) { /* nothing to do */ }
        continue;
      }
      on_event(f, evs[i].data.ptr, evs[i].events);
    }
    if (__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) break;
    for (;;) { /* calls whose wait for a connection is over: again */
      pthread_mutex_lock(&f->mu);
      vr_fwd_call *c = f->ready;
      if (c && !(f->ready = c->wq_next)) f->ready_tail = NULL;
      pthread_mutex_unlock(&f->mu);
      if (!c) break;
      send_try(f, c);
    }
    int64_t now = vr_now_ns();
    if (now < next_scan) continue;
    next_scan = now + 100000000;
    /* Timeouts: shut the socket down; its event then fails the try on
     * this thread (the owner), reporting the timeout. */
    pthread_mutex_lock(&f->mu);
    for (conn *k = f->busy; k; k = k->next)
      if (!k->timed_out && k->call && k->call->deadline_ns < now) {
        __atomic_store_n(&k->timed_out, 1, __ATOMIC_RELEASE);
        shutdown(k->fd, SHUT_RDWR);
      }
    /* and calls that waited for a connection past their timeout */
    vr_fwd_call *late = NULL, *late_tail = NULL;
    for (fworker *x = f->workers; x; x = x->next) {
      vr_fwd_call **pp = &x->wq, *last = NULL;
      while (*pp) {
        vr_fwd_call *c = *pp;
        if (c->wq_until < now) {
          *pp = c->wq_next;
          wq_push(&late, &late_tail, c);
        } else {
          last = c;
          pp = &c->wq_next;
        }
      }
      x->wq_tail = last;
    }
    pthread_mutex_unlock(&f->mu);
    while (late) {
      vr_fwd_call *c = late;
      late = c->wq_next;
      snprintf(c->msg, sizeof c->msg, "no connection to a worker of '%.100s' came free in"
               " time (%d per worker)", c->key, f->o.max_conns);
      __atomic_fetch_add(&f->st.timeouts, 1, __ATOMIC_RELAXED);
      finish(f, c, 504, c->msg);
    }
  }
  return NULL;
}

int vr_fwd_create(const vr_fwd_opts *o, vr_fwd **out, vr_errbuf *err) {
  vr_fwd *f = VR_NEW(vr_fwd);
  if (!f) return vr_errf(err, VR_ENOMEM, "out of memory");
  vr_fwd_opts_init(&f->o);
  if (o) {
    if (o->timeout_ms > 0) f->o.timeout_ms = o->timeout_ms;
    if (o->max_tries > 0) f->o.max_tries = o->max_tries;
    if (o->down_ms > 0) f->o.down_ms = o->down_ms;
    if (o->max_idle > 0) f->o.max_idle = o->max_idle;
    if (o->max_conns > 0) f->o.max_conns = o->max_conns;
  }
  pthread_mutex_init(&f->mu, NULL);
  f->ep = epoll_create1(EPOLL_CLOEXEC);
  f->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  if (f->ep < 0 || f->evfd < 0 || epoll_ctl(f->ep, EPOLL_CTL_ADD, f->evfd, &ev) ||
      pthread_create(&f->io, NULL, io_main, f)) {
    int e = errno;
    if (f->ep >= 0) close(f->ep);
    if (f->evfd >= 0) close(f->evfd);
    pthread_mutex_destroy(&f->mu);
    vr_free(f);
    return vr_errf(err, VR_EIO, "forwarder: %s", strerror(e));
  }
  *out = f;
  return 0;
}

void vr_fwd_free(vr_fwd *f) {
  if (!f) return;
  __atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
  uint64_t one = 1;
  if (write(f->evfd, &one, sizeof one) < 0) { /* the 100 ms poll sees stop */ }
  pthread_join(f->io, NULL);
  /* Calls still under way are answered: the I/O thread is gone, so this
   * thread owns their connections now. */
  for (;;) {
    pthread_mutex_lock(&f->mu);
    conn *k = f->busy;
    if (k) busy_del(f, k);
    pthread_mutex_unlock(&f->mu);
    if (!k) break;
    vr_fwd_call *c = k->call;
    vr__fwd_conn_free(k);
    finish(f, c, 503, "front end shutting down");
  }
  for (;;) { /* and those waiting for a connection */
    pthread_mutex_lock(&f->mu);
    for (fworker *x = f->workers; x; x = x->next) vr__fwd_wq_release(f, x, -1);
    vr_fwd_call *c = f->ready;
    if (c && !(f->ready = c->wq_next)) f->ready_tail = NULL;
    pthread_mutex_unlock(&f->mu);
    if (!c) break;
    finish(f, c, 503, "front end shutting down");
  }
  while (f->workers) {
    fworker *x = f->workers;
    f->workers = x->next;
    for (int i = 0; i < x->n_idle; i++) vr__fwd_conn_free(x->idle[i]);
    vr_free(x->idle);
    vr_free(x);
  }
  vr_fwd_table_free(&f->t);
  vr_free(f->tw);
  close(f->ep);
  close(f->evfd);
  pthread_mutex_destroy(&f->mu);
  vr_free(f);
}
