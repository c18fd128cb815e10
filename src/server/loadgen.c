#include "server/loadgen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/hist.h"
#include "server/http.h"
#include "server/httpc.h"
#include "server/kserve.h"
#include "server/sbuf.h"

const char *vr_lg_target_kind(const vr_lg_opts *o) {
  return o->app_mode == VR_LG_PIPELINE ? "pipelines" : o->app_mode ? "apps" : "models";
}

void vr_lg_opts_init(vr_lg_opts *o) {
  memset(o, 0, sizeof *o);
  o->host = "127.0.0.1";
  o->connections = 16;
  o->drain_s = 10;
  o->progress_fd = -1;
}

typedef struct rec {
  int64_t sched, done, slo;
  int32_t status; /* HTTP status; 0 = unanswered; -1 = connection error */
  int32_t compute_us;
} rec;

typedef struct conn {
  int fd;
  long cur; /* record in flight, -1 when idle */
  vr_sbuf out;
  size_t out_off;
  char *in;
  size_t in_len, in_cap;
} conn;

typedef struct lg {
  const vr_lg_opts *o;
  struct sockaddr_in sa;
  int ep, tfd;
  conn *c;
  int nc;
  rec *r;
  size_t n, cap;    /* records (open loop: one per arrival) */
  size_t next_send; /* first record not yet sent */
  int slo_varies;   /* model-less requests carry different SLOs */
  size_t inflight;
  int64_t t0;
  int64_t armed;    /* absolute time the timerfd is armed for; 0 = disarmed */
  int closed_loop;
  int64_t end_ns;   /* closed loop: stop sending at this time */
  char *data_json;  /* prebuilt "[...]" of the tensor */
  size_t data_bytes;
  vr_sbuf fixed;    /* the whole request when it never varies */
  vr_hist *live;    /* latencies so far, for the progress line; or NULL */
  uint64_t n_ok;
  int64_t next_progress;
} lg;

static int conn_open(lg *g, conn *c, vr_errbuf *err) {
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd < 0) return vr_errf(err, VR_EIO, "socket: %s", strerror(errno));
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  /* Blocking connect (loopback answers at once), then non-blocking I/O. */
  if (connect(c->fd, (struct sockaddr *)&g->sa, sizeof g->sa)) {
    int e = errno;
    close(c->fd);
    c->fd = -1;
    return vr_errf(err, VR_EIO, "connect %s:%d: %s", g->o->host, g->o->port,
                   strerror(e));
  }
  fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
  struct epoll_event ev = {EPOLLIN, {.ptr = c}};
  epoll_ctl(g->ep, EPOLL_CTL_ADD, c->fd, &ev);
  c->cur = -1;
  c->in_len = 0;
  c->out.len = 0;
  c->out_off = 0;
  return 0;
}

static void conn_close(lg *g, conn *c) {
  if (c->fd >= 0) {
    epoll_ctl(g->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
  }
  c->fd = -1;
}

static int64_t now_rel(lg *g) { return vr_now_ns() - g->t0; }

/* CPU time of the calling thread (the generator runs on it), ns. */
static int64_t thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)) return 0;
  return (int64_t)ts.tv_sec * VR_NS_PER_S + ts.tv_nsec;
}

/* ---- request bodies ---------------------------------------------------- */

static size_t numel(const vr_lg_opts *o) {
  size_t n = 1;
  for (int d = 0; d < o->ndim; d++) n *= (size_t)o->shape[d];
  return n;
}

/* slo_ns: the request's SLO; left_ns: what is left of it when it is sent
 * (what "timeout" carries). latency_ms is the SLO itself, never what is
 * left: it is what the query asks of the variant it is served by, and a
 * client that shrank it after waiting for a connection would ask for an
 * impossible one (down to 0.001 ms: 400 "infeasible" for every query). */
static void put_params(const vr_lg_opts *o, vr_sbuf *b, int64_t slo_ns,
                       int64_t left_ns) {
  vr_sbuf_puts(b, "{\"parameters\":{");
  int any = 0;
  if (o->send_timeout && left_ns > 0) {
    vr_sbuf_printf(b, "\"timeout\":%lld", (long long)(left_ns / 1000));
    any = 1;
  }
  if (o->priority) vr_sbuf_printf(b, "%s\"priority\":%d", any ? "," : "",
                                  o->priority);
  any |= o->priority != 0;
  if (o->app_mode && slo_ns > 0) {
    vr_sbuf_printf(b, "%s\"latency_ms\":%.6g", any ? "," : "", slo_ns / 1e6);
    any = 1;
  }
  if (o->app_mode && o->min_accuracy > 0) {
    vr_sbuf_printf(b, "%s\"min_accuracy\":%.6g", any ? "," : "", o->min_accuracy);
    any = 1;
  }
  if (o->binary)
    vr_sbuf_printf(b, "%s\"binary_data_output\":true",
                   any ? "," : "");
  vr_sbuf_puts(b, "},\"inputs\":[{\"name\":");
  vr_sbuf_json_str(b, o->input_name);
  vr_sbuf_printf(b, ",\"datatype\":\"%s\",\"shape\":[",
                 vr_dtype_kserve(o->dtype));
  for (int d = 0; d < o->ndim; d++)
    vr_sbuf_printf(b, d ? ",%lld" : "%lld", (long long)o->shape[d]);
  vr_sbuf_puts(b, "]");
}

/* Writes the full HTTP request for record i into b. */
static void build_into(lg *g, vr_sbuf *b, size_t i) {
  const vr_lg_opts *o = g->o;
  b->len = 0;
  /* A server started with --auth-infer wants the token on inference. */
  const char *tok = getenv("VARIO_ADMIN_TOKEN");
  if (!o->model) {
    vr_sbuf_printf(b, "GET %s HTTP/1.1\r\nHost: %s\r\n", o->path, o->host);
    if (tok && *tok) vr_sbuf_printf(b, "Authorization: Bearer %s\r\n", tok);
    vr_sbuf_puts(b, "\r\n");
    return;
  }
  vr_sbuf body;
  vr_sbuf_init(&body);
  /* A deadline-carrying client sends what is left of its budget: time
   * spent waiting for a free connection is already gone. At least 1 us,
   * so an expired request is refused by the server rather than sent
   * without a deadline. */
  int64_t left = g->r[i].slo;
  if (left > 0) {
    left -= now_rel(g) - g->r[i].sched;
    if (left < 1000) left = 1000;
  }
  put_params(o, &body, g->r[i].slo, left);
  size_t json_len;
  if (o->binary) {
    vr_sbuf_printf(&body, ",\"parameters\":{\"binary_data_size\":%zu}}]}",
                   g->data_bytes);
    json_len = body.len;
    size_t k = o->payloads > 1 ? i % (size_t)o->payloads : 0;
    vr_sbuf_add(&body, (const char *)o->data + k * g->data_bytes, g->data_bytes);
  } else {
    vr_sbuf_puts(&body, ",\"data\":");
    vr_sbuf_puts(&body, g->data_json);
    vr_sbuf_puts(&body, "}]}");
    json_len = body.len;
  }
  /* the name is one path segment: a space or a '%' in it, sent raw,
   * named another target (the server decodes the path) */
  char name[1024];
  size_t nl = 0;
  if (vr_http_pct_encode(name, sizeof name, &nl, o->model, 0))
    snprintf(name, sizeof name, "%s", o->model); /* setup refused longer names */
  vr_sbuf_printf(b, "POST /v2/%s/%s/infer HTTP/1.1\r\nHost: %s\r\n"
                 "Content-Length: %zu\r\n", vr_lg_target_kind(o),
                 name, o->host, body.len);
  if (o->binary)
    vr_sbuf_printf(b, "Content-Type: application/octet-stream\r\n"
                   "Inference-Header-Content-Length: %zu\r\n", json_len);
  else
    vr_sbuf_puts(b, "Content-Type: application/json\r\n");
  if (tok && *tok) vr_sbuf_printf(b, "Authorization: Bearer %s\r\n", tok);
  vr_sbuf_puts(b, "\r\n");
  vr_sbuf_add(b, body.p, body.len);
  vr_sbuf_free(&body);
}

/* Requests differ by their "timeout" (the time left, when sent), their
 * payload and, model-less, their SLO ("latency_ms"); when none differs
 * every request is the same bytes, built once so the client spends its
 * CPU on I/O. */
static void build_request(lg *g, conn *c, size_t i) {
  c->out_off = 0;
  if (g->o->send_timeout || g->o->payloads > 1 || g->slo_varies) {
    build_into(g, &c->out, i);
    return;
  }
  if (!g->fixed.len) build_into(g, &g->fixed, i);
  c->out.len = 0;
  vr_sbuf_add(&c->out, g->fixed.p, g->fixed.len);
}

/* ---- sending and receiving --------------------------------------------- */

static void finish(lg *g, conn *c, int status, int32_t compute_us) {
  rec *r = &g->r[c->cur];
  r->status = status;
  r->done = now_rel(g);
  r->compute_us = compute_us;
  c->cur = -1;
  g->inflight--;
  if (status == 200) g->n_ok++;
  if (g->live && status == 200) vr_hist_record(g->live, (uint64_t)(r->done - r->sched));
}

/* One status line, rewritten in place ("\r"): what a person watching a
 * long run wants to know — is it sending, is it answering, how slow. */
static void progress(lg *g, int64_t now, int final) {
  if (!g->live || (!final && now < g->next_progress)) return;
  g->next_progress = now + 500 * VR_NS_PER_MS;
  char line[160];
  double total = g->closed_loop ? g->o->duration_s
                                : (g->n ? (double)g->r[g->n - 1].sched / 1e9 : 0);
  int k = snprintf(line, sizeof line,
                   "\rbench %5.1f/%.0f s  sent %llu  ok %llu  in flight %zu  p99 %.2f ms   %s",
                   (double)now / 1e9, total, (unsigned long long)g->next_send,
                   (unsigned long long)g->n_ok, g->inflight,
                   g->n_ok ? (double)vr_hist_quantile(g->live, 0.99) / 1e6 : 0.0,
                   final ? "\n" : "");
  if (k > 0 && write(g->o->progress_fd, line, (size_t)k) < 0) g->live = NULL;
}

static void conn_error(lg *g, conn *c) {
  if (c->cur >= 0) finish(g, c, -1, 0);
  conn_close(g, c);
  vr_errbuf err;
  conn_open(g, c, &err); /* fd stays -1 if the server is gone */
}

static void flush_out(lg *g, conn *c) {
  while (c->out_off < c->out.len) {
    ssize_t w = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off,
                     MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      struct epoll_event ev = {EPOLLIN | EPOLLOUT, {.ptr = c}};
      epoll_ctl(g->ep, EPOLL_CTL_MOD, c->fd, &ev);
      return;
    }
    if (w <= 0) {
      conn_error(g, c);
      return;
    }
    c->out_off += (size_t)w;
  }
}

static void send_on(lg *g, conn *c, size_t i) {
  c->cur = (long)i;
  g->inflight++;
  build_request(g, c, i);
  flush_out(g, c);
}

static int32_t parse_compute(const char *p, size_t n) {
  static const char key[] = "\"compute_us\":";
  const char *end = p + n;
  for (const char *q = p; q + sizeof key < end; q++) {
    if (*q != '"' || memcmp(q, key, sizeof key - 1)) continue;
    /* digits within the body only: it is not NUL-terminated */
    int64_t v = 0;
    for (q += sizeof key - 1; q < end && *q == ' '; q++) {}
    for (; q < end && *q >= '0' && *q <= '9' && v < INT32_MAX; q++)
      v = v * 10 + (*q - '0');
    return (int32_t)(v < INT32_MAX ? v : INT32_MAX);
  }
  return 0;
}

/* Consumes complete responses buffered on c. */
static void on_readable(lg *g, conn *c) {
  int eof = 0;
  for (;;) {
    if (c->in_len + 65536 > c->in_cap) {
      size_t cap = c->in_cap ? c->in_cap * 2 : 131072;
      char *p = vr_realloc(c->in, cap);
      if (!p) return conn_error(g, c);
      c->in = p;
      c->in_cap = cap;
    }
    ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) return conn_error(g, c);
    if (n == 0) { /* the server closed: what it sent before still counts */
      eof = 1;
      break;
    }
    c->in_len += (size_t)n;
  }
  vr_http_head h;
  int rc = vr_http_parse_head(c->in, c->in_len, &h);
  if (rc < 0 || c->cur < 0 || (rc == 0 && eof)) return conn_error(g, c);
  if (rc == 0) return;
  size_t cl = h.content_len == (size_t)-1 ? 0 : h.content_len;
  if (c->in_len < h.head_len + cl) {
    if (eof) conn_error(g, c);
    return;
  }
  size_t json = h.ihcl != (size_t)-1 && h.ihcl <= cl ? h.ihcl : cl;
  int32_t comp = h.status == 200 ? parse_compute(c->in + h.head_len, json) : 0;
  finish(g, c, h.status, comp);
  size_t used = h.head_len + cl;
  memmove(c->in, c->in + used, c->in_len - used);
  c->in_len -= used;
  if (h.close || eof) {
    conn_close(g, c);
    vr_errbuf err;
    conn_open(g, c, &err);
  }
}

/* ---- scheduling --------------------------------------------------------- */

static int grow(lg *g) {
  if (g->n < g->cap) return 0;
  size_t cap = g->cap ? g->cap * 2 : 65536;
  rec *r = vr_realloc(g->r, cap * sizeof *r);
  if (!r) return -1;
  memset(r + g->cap, 0, (cap - g->cap) * sizeof *r);
  g->r = r;
  g->cap = cap;
  return 0;
}

/* Hands due requests to idle connections. */
static void dispatch(lg *g) {
  if (g->inflight >= (size_t)g->nc) return; /* every connection busy */
  int64_t now = now_rel(g);
  for (int k = 0; k < g->nc; k++) {
    conn *c = &g->c[k];
    if (c->fd < 0 || c->cur >= 0) continue;
    if (g->closed_loop) {
      if (now >= g->end_ns || grow(g)) return;
      g->r[g->n].sched = now;
      send_on(g, c, g->n++);
      g->next_send = g->n;
    } else {
      if (g->next_send >= g->n || g->r[g->next_send].sched > now) return;
      send_on(g, c, g->next_send++);
    }
  }
}

/* Arms the timer for the next arrival, only when a connection is free to
 * send it and only when the deadline changes: timerfd_settime costs a VM
 * exit here, and re-arming an already-due timer on every wake-up while all
 * connections were busy made the generator spin on timer interrupts and
 * starve the server it measures. A backlogged arrival is sent from the
 * response that frees a connection instead. */
static void arm_timer(lg *g) {
  int64_t want = 0;
  if (!g->closed_loop && g->next_send < g->n && g->inflight < (size_t)g->nc) {
    int64_t t = g->t0 + g->r[g->next_send].sched;
    if (t > vr_now_ns()) want = t;
  }
  /* Never disarm explicitly: a stale expiry only costs one empty wake-up. */
  if (want == 0 || want == g->armed) return;
  struct itimerspec its = {{0, 0}, {0, 0}};
  its.it_value.tv_sec = want / VR_NS_PER_S;
  its.it_value.tv_nsec = want % VR_NS_PER_S;
  timerfd_settime(g->tfd, TFD_TIMER_ABSTIME, &its, NULL);
  g->armed = want;
}

static void loop(lg *g, int64_t stop_sending, int64_t hard_end) {
  struct epoll_event ev[64];
  for (;;) {
    int64_t now = now_rel(g);
    /* Open loop sends every scheduled arrival, even late; closed loop
     * stops at its duration. */
    int sending = g->closed_loop ? now < stop_sending : g->next_send < g->n;
    if (!sending && g->inflight == 0) break;
    if (now >= hard_end) break;
    if (sending) dispatch(g);
    progress(g, now, 0);
    arm_timer(g);
    int n = epoll_wait(g->ep, ev, 64, 50);
    for (int i = 0; i < n; i++) {
      if (ev[i].data.ptr == NULL) {
        uint64_t x;
        ssize_t rr = read(g->tfd, &x, sizeof x);
        (void)rr;
        g->armed = 0; /* a one-shot timer is disarmed once it fires */
        continue;
      }
      conn *c = ev[i].data.ptr;
      if (c->fd < 0) continue;
      if (ev[i].events & EPOLLOUT) {
        struct epoll_event e2 = {EPOLLIN, {.ptr = c}};
        epoll_ctl(g->ep, EPOLL_CTL_MOD, c->fd, &e2);
        flush_out(g, c);
      }
      if (c->fd >= 0 && ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        on_readable(g, c);
    }
  }
}

/* ---- results ------------------------------------------------------------- */

static void write_csv(lg *g, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return;
  fprintf(f, "second,sent,ok,dropped,rejected,errors,p50_ms,p99_ms,"
             "slo_attainment,unsent\n");
  int64_t last = 0;
  for (size_t i = 0; i < g->n; i++)
    if (g->r[i].sched > last) last = g->r[i].sched;
  vr_hist *h = vr_malloc(sizeof *h);
  if (!h) {
    fclose(f);
    return;
  }
  size_t i = 0;
  for (int64_t s = 0; s <= last / VR_NS_PER_S && i < g->n; s++) {
    uint64_t sent = 0, ok = 0, drop = 0, rej = 0, errs = 0, slo = 0, unsent = 0;
    vr_hist_init(h);
    /* Records are in arrival order, so each second is a contiguous run. */
    for (; i < g->n && g->r[i].sched < (s + 1) * VR_NS_PER_S; i++) {
      rec *r = &g->r[i];
      if (i >= g->next_send) { /* never sent: no connection came free */
        unsent++;
        continue;
      }
      sent++;
      if (r->status == 200) {
        ok++;
        int64_t lat = r->done - r->sched;
        vr_hist_record(h, (uint64_t)lat);
        slo += r->slo == 0 || lat <= r->slo;
      } else if (r->status == 504) drop++;
      else if (r->status == 503) rej++;
      else errs++;
    }
    fprintf(f, "%lld,%llu,%llu,%llu,%llu,%llu,%.3f,%.3f,%.4f,%llu\n", (long long)s,
            (unsigned long long)sent, (unsigned long long)ok,
            (unsigned long long)drop, (unsigned long long)rej,
            (unsigned long long)errs, vr_hist_quantile(h, 0.5) / 1e6,
            vr_hist_quantile(h, 0.99) / 1e6,
            sent + unsent ? (double)slo / (double)(sent + unsent) : 0,
            (unsigned long long)unsent);
  }
  vr_free(h);
  fclose(f);
}

static void summarise(lg *g, int64_t elapsed, vr_lg_result *res) {
  vr_hist *lat = vr_malloc(sizeof *lat), *comp = vr_malloc(sizeof *comp),
          *over = vr_malloc(sizeof *over);
  if (!lat || !comp || !over) goto out;
  vr_hist_init(lat);
  vr_hist_init(comp);
  vr_hist_init(over);
  uint64_t slo_ok = 0;
  int64_t answered = elapsed; /* answers may come in after the window */
  for (size_t i = 0; i < g->next_send; i++) {
    rec *r = &g->r[i];
    res->sent++;
    if (r->status == 0) { res->unfinished++; continue; }
    if (r->done > answered) answered = r->done;
    if (r->status == 504) { res->dropped++; continue; }
    if (r->status == 503) { res->rejected++; continue; }
    if (r->status != 200) { res->errors++; continue; }
    res->ok++;
    int64_t l = r->done - r->sched;
    vr_hist_record(lat, (uint64_t)l);
    vr_hist_record(comp, (uint64_t)r->compute_us * 1000);
    int64_t ov = l - (int64_t)r->compute_us * 1000;
    vr_hist_record(over, (uint64_t)(ov > 0 ? ov : 0));
    slo_ok += r->slo == 0 || l <= r->slo;
  }
  res->unsent = g->n - g->next_send;
  res->elapsed_s = elapsed / 1e9;
  if (res->elapsed_s > 0) {
    res->offered_qps = (res->sent + res->unsent) / res->elapsed_s;
    res->throughput_qps = res->ok / (answered / 1e9);
  }
  res->p50_us = vr_hist_quantile(lat, 0.5) / 1e3;
  res->p90_us = vr_hist_quantile(lat, 0.9) / 1e3;
  res->p99_us = vr_hist_quantile(lat, 0.99) / 1e3;
  res->p999_us = vr_hist_quantile(lat, 0.999) / 1e3;
  res->max_us = vr_hist_quantile(lat, 1.0) / 1e3;
  res->mean_us = vr_hist_mean(lat) / 1e3;
  res->compute_p50_us = vr_hist_quantile(comp, 0.5) / 1e3;
  res->overhead_p50_us = vr_hist_quantile(over, 0.5) / 1e3;
  if (res->sent) res->early_drop_rate = (double)res->dropped / res->sent;
  if (res->sent + res->unsent)
    res->slo_attainment = (double)slo_ok / (double)(res->sent + res->unsent);
out:
  vr_free(lat);
  vr_free(comp);
  vr_free(over);
}

static int setup(lg *g, const vr_lg_opts *o, vr_errbuf *err) {
  g->o = o;
  g->sa.sin_family = AF_INET;
  g->sa.sin_port = htons((uint16_t)o->port);
  if (inet_pton(AF_INET, o->host, &g->sa.sin_addr) != 1)
    return vr_errf(err, VR_EINVAL, "'%s' is not an IPv4 address", o->host);
  if (o->model) {
    if (strlen(o->model) > 300)
      return vr_errf(err, VR_EINVAL, "name of %zu bytes: at most 300", strlen(o->model));
    if (!o->input_name || !o->data || o->ndim < 1 ||
        !vr_dtype_size(o->dtype))
      return vr_errf(err, VR_EINVAL, "infer mode needs an input tensor");
    if (o->payloads > 1 && !o->binary)
      return vr_errf(err, VR_EINVAL, "several payloads need the binary extension");
    g->data_bytes = numel(o) * vr_dtype_size(o->dtype);
    vr_sbuf b;
    vr_sbuf_init(&b);
    vr_sbuf_puts(&b, "[");
    vr_ks_write_numbers(&b, o->dtype, o->data, numel(o));
    vr_sbuf_puts(&b, "]");
    if (!(g->data_json = vr_sbuf_take(&b, NULL)))
      return vr_errf(err, VR_ENOMEM, "out of memory");
  } else if (!o->path) {
    return vr_errf(err, VR_EINVAL, "need a model or a path");
  }
  g->closed_loop = o->n_arrivals == 0;
  if (!g->closed_loop) {
    g->cap = g->n = o->n_arrivals;
    if (o->duration_s > 0)
      while (g->n > 0 && o->arrivals[g->n - 1].t_ns > o->duration_s * 1e9)
        g->n--;
    if (!(g->r = VR_NEWN(rec, g->cap ? g->cap : 1)))
      return vr_errf(err, VR_ENOMEM, "out of memory");
    for (size_t i = 0; i < g->n; i++) {
      g->r[i].sched = o->arrivals[i].t_ns;
      g->r[i].slo = o->arrivals[i].slo_ns;
      g->slo_varies |= o->app_mode && g->r[i].slo != g->r[0].slo;
    }
  } else if (o->duration_s <= 0) {
    return vr_errf(err, VR_EINVAL, "closed loop needs a duration");
  }
  g->ep = epoll_create1(EPOLL_CLOEXEC);
  g->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (g->ep < 0 || g->tfd < 0) return vr_errf(err, VR_EIO, "epoll/timerfd");
  struct epoll_event ev = {EPOLLIN, {.ptr = NULL}};
  epoll_ctl(g->ep, EPOLL_CTL_ADD, g->tfd, &ev);
  g->nc = o->connections > 0 ? o->connections : 16;
  if (!(g->c = VR_NEWN(conn, (size_t)g->nc)))
    return vr_errf(err, VR_ENOMEM, "out of memory");
  for (int k = 0; k < g->nc; k++) {
    g->c[k].fd = -1;
    vr_sbuf_init(&g->c[k].out);
    int rc = conn_open(g, &g->c[k], err);
    if (rc) return rc;
  }
  return 0;
}

static void teardown(lg *g) {
  for (int k = 0; g->c && k < g->nc; k++) {
    conn_close(g, &g->c[k]);
    vr_sbuf_free(&g->c[k].out);
    vr_free(g->c[k].in);
  }
  vr_free(g->c);
  vr_free(g->r);
  vr_free(g->data_json);
  vr_sbuf_free(&g->fixed);
  if (g->ep >= 0) close(g->ep);
  if (g->tfd >= 0) close(g->tfd);
}

int vr_lg_run(const vr_lg_opts *o, vr_lg_result *res, vr_errbuf *err) {
  memset(res, 0, sizeof *res);
  lg g;
  memset(&g, 0, sizeof g);
  g.ep = g.tfd = -1;
  int rc = setup(&g, o, err);
  if (!rc) {
    g.t0 = vr_now_ns();
    int64_t cpu0 = thread_cpu_ns();
    int64_t stop = g.closed_loop
                       ? (int64_t)(o->duration_s * 1e9)
                       : (g.n ? g.r[g.n - 1].sched + 1 : 0);
    g.end_ns = stop;
    double drain = o->drain_s > 0 ? o->drain_s : 10;
    if (o->progress_fd >= 0 && (g.live = vr_malloc(sizeof *g.live))) vr_hist_init(g.live);
    vr_hist *live = g.live;
    loop(&g, stop, stop + (int64_t)(drain * 1e9));
    progress(&g, now_rel(&g), 1);
    vr_free(live);
    g.live = NULL;
    int64_t wall = now_rel(&g), cpu = thread_cpu_ns() - cpu0;
    /* open loop: the arrival window is the run's duration (arrivals are
     * cut to it), not the time to the last arrival, which a bursty or
     * slow process leaves well before the end (rates came out high) */
    int64_t window = o->duration_s > 0 ? (int64_t)(o->duration_s * 1e9) : 0;
    int64_t elapsed = g.closed_loop ? wall : window > stop ? window : stop;
    summarise(&g, elapsed > 0 ? elapsed : 1, res);
    res->client_cpu_cores = wall > 0 ? (double)cpu / (double)wall : 0;
    if (o->csv_path) write_csv(&g, o->csv_path);
  }
  teardown(&g);
  return rc;
}
