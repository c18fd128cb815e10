/*
 * Redis connection with reconnect-and-backoff (see redis.h), and the
 * redis:// URL parser.
 */
#include "cluster/redis.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"

/* ---- URL ------------------------------------------------------------------ */

#define URL_PREFIX "redis://"

int vr_redis_is_url(const char *s) {
  return s && !strncmp(s, URL_PREFIX, sizeof URL_PREFIX - 1);
}

/* Parses a decimal integer in [lo, hi] from s[0..n); -1 if it is not one. */
static long parse_num(const char *s, size_t n, long lo, long hi) {
  if (n == 0 || n > 9) return -1;
  long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isdigit((unsigned char)s[i])) return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v < lo || v > hi ? -1 : v;
}

static int host_char(char c, int v6) {
  if (isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_') return 1;
  return v6 && c == ':';
}

static int copy_part(char *dst, size_t cap, const char *s, size_t n) {
  if (n >= cap) return -1;
  memcpy(dst, s, n);
  dst[n] = 0;
  return 0;
}

int vr_redis_url_parse(const char *s, vr_redis_url *out, vr_errbuf *err) {
  memset(out, 0, sizeof *out);
  out->port = 6379;
  if (!s) return vr_errf(err, VR_EINVAL, "redis URL: missing");
  if (!strncmp(s, "rediss://", 9))
    return vr_errf(err, VR_EUNSUPPORTED, "redis URL '%.64s': TLS (rediss://) is not supported", s);
  if (!vr_redis_is_url(s))
    return vr_errf(err, VR_EINVAL, "redis URL '%.64s': must start with redis://", s);
  const char *p = s + sizeof URL_PREFIX - 1;
  size_t len = strlen(p);
  if (memchr(p, '?', len) || memchr(p, '#', len))
    return vr_errf(err, VR_EINVAL, "redis URL '%.64s': query and fragment are not supported", s);
  /* userinfo: up to the last '@' (a password may itself hold '@' or '/'). */
  const char *at = NULL;
  for (const char *q = p; *q; q++)
    if (*q == '@') at = q;
  if (at) {
    const char *colon = memchr(p, ':', (size_t)(at - p));
    if (!colon)
      return vr_errf(err, VR_EINVAL, "redis URL: credentials must be [user]:password@");
    if (copy_part(out->user, sizeof out->user, p, (size_t)(colon - p)) ||
        copy_part(out->password, sizeof out->password, colon + 1, (size_t)(at - colon - 1)))
      return vr_errf(err, VR_EINVAL, "redis URL: user or password longer than %d bytes",
                     VR_REDIS_SECRET_MAX - 1);
    if (!out->password[0])
      return vr_errf(err, VR_EINVAL, "redis URL: empty password after ':'");
    p = at + 1;
  }
  /* host */
  const char *h = p, *hend;
  int v6 = 0;
  if (*p == '[') {
    v6 = 1;
    h = p + 1;
    hend = strchr(h, ']');
    if (!hend) return vr_errf(err, VR_EINVAL, "redis URL '%.64s': '[' without ']'", s);
    p = hend + 1;
  } else {
    hend = p;
    while (*hend && *hend != ':' && *hend != '/') hend++;
    p = hend;
  }
  if (hend == h) return vr_errf(err, VR_EINVAL, "redis URL '%.64s': no host", s);
  for (const char *q = h; q < hend; q++)
    if (!host_char(*q, v6))
      return vr_errf(err, VR_EINVAL, "redis URL '%.64s': bad character in host", s);
  if (copy_part(out->host, sizeof out->host, h, (size_t)(hend - h)))
    return vr_errf(err, VR_EINVAL, "redis URL: host longer than %d bytes", VR_REDIS_HOST_MAX - 1);
  /* port */
  if (*p == ':') {
    const char *d = ++p;
    while (*p && *p != '/') p++;
    long port = parse_num(d, (size_t)(p - d), 1, 65535);
    if (port < 0)
      return vr_errf(err, VR_EINVAL, "redis URL '%.64s': port must be 1..65535", s);
    out->port = (int)port;
  } else if (*p && *p != '/') {
    return vr_errf(err, VR_EINVAL, "redis URL '%.64s': unexpected text after host", s);
  }
  /* db */
  if (*p == '/') {
    p++;
    if (*p) {
      long db = parse_num(p, strlen(p), 0, 9999);
      if (db < 0)
        return vr_errf(err, VR_EINVAL, "redis URL '%.64s': database must be a number 0..9999", s);
      out->db = (int)db;
    }
  }
  return 0;
}

void vr_redis_url_format(const vr_redis_url *u, char *out, size_t cap) {
  int v6 = strchr(u->host, ':') != NULL;
  snprintf(out, cap, "redis://%s%s%s:%d/%d", v6 ? "[" : "", u->host, v6 ? "]" : "",
           u->port, u->db);
}

/* ---- connection ------------------------------------------------------------ */

struct vr_redis {
  pthread_mutex_t mu;
  redisContext *c; /* NULL while disconnected */
  vr_redis_url url;
  vr_redis_opts o;
  char name[VR_REDIS_HOST_MAX + 32];
  uint64_t connects;
  int64_t max_wait_ns; /* the longest call since vr_redis_take_wait_ns */
};

void vr_redis_opts_default(vr_redis_opts *o) {
  o->connect_timeout_ms = 1000;
  o->io_timeout_ms = 2000;
  o->retry_ms = 2000;
  o->backoff_min_ms = 10;
  o->backoff_max_ms = 500;
}

void vr__redis_sleep_ms(int ms) {
  if (ms <= 0) return;
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

static struct timeval tv_ms(int ms) {
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  return tv;
}

/* Sends one command on a fresh context during setup (AUTH, SELECT). */
static int setup_cmd(redisContext *c, const char *name, vr_errbuf *err, int argc,
                     const char **argv) {
  redisReply *rep = redisCommandArgv(c, argc, argv, NULL);
  if (!rep) return vr_errf(err, VR_EIO, "%s: %s: %s", name, argv[0], c->errstr);
  int bad = rep->type == REDIS_REPLY_ERROR;
  if (bad) vr_errf(err, VR_EIO, "%s: %s: %s", name, argv[0], rep->str);
  freeReplyObject(rep);
  return bad ? VR_EIO : 0;
}

/* hiredis writes with write(2): a write to a connection Redis has just
 * dropped raises SIGPIPE, whose default action would kill the process
 * instead of letting the call reconnect. A process that left SIGPIPE at its
 * default gets it ignored (writes then fail with EPIPE); a handler the
 * program installed itself is left alone. */
static void ignore_sigpipe(void) {
  struct sigaction cur;
  if (sigaction(SIGPIPE, NULL, &cur) == 0 && cur.sa_handler == SIG_DFL &&
      !(cur.sa_flags & SA_SIGINFO))
    signal(SIGPIPE, SIG_IGN);
}
static pthread_once_t g_sigpipe_once = PTHREAD_ONCE_INIT;

redisContext *vr__redis_connect(const vr_redis_url *u, const vr_redis_opts *o,
                                vr_errbuf *err) {
  pthread_once(&g_sigpipe_once, ignore_sigpipe);
  char name[VR_REDIS_HOST_MAX + 32];
  vr_redis_url_format(u, name, sizeof name);
  redisContext *c = redisConnectWithTimeout(u->host, u->port, tv_ms(o->connect_timeout_ms));
  if (!c) {
    vr_errf(err, VR_ENOMEM, "%s: out of memory", name);
    return NULL;
  }
  if (c->err) {
    vr_errf(err, VR_EIO, "%s: cannot connect: %s", name, c->errstr);
    redisFree(c);
    return NULL;
  }
  /* hiredis 0.14 opens its socket without SOCK_CLOEXEC: a process the
   * worker spawns (an AsyFunc shadow) would hold the connection open */
  int fl = fcntl(c->fd, F_GETFD);
  if (fl >= 0) fcntl(c->fd, F_SETFD, fl | FD_CLOEXEC);
  int rc = redisSetTimeout(c, tv_ms(o->io_timeout_ms)) == REDIS_OK
               ? 0
               : vr_errf(err, VR_EIO, "%s: cannot set timeout", name);
  if (!rc && u->password[0]) {
    const char *a[] = {"AUTH", u->user, u->password};
    rc = u->user[0] ? setup_cmd(c, name, err, 3, a)
                    : setup_cmd(c, name, err, 2, (const char *[]){"AUTH", u->password});
  }
  if (!rc && u->db) {
    char db[16];
    snprintf(db, sizeof db, "%d", u->db);
    rc = setup_cmd(c, name, err, 2, (const char *[]){"SELECT", db});
  }
  if (rc) {
    redisFree(c);
    return NULL;
  }
  return c;
}

/* Makes r->c a live connection, retrying with backoff until deadline_ns.
 * Called with r->mu held. */
static int ensure_connected(vr_redis *r, int64_t deadline_ns, vr_errbuf *err) {
  int backoff = r->o.backoff_min_ms > 0 ? r->o.backoff_min_ms : 1;
  while (!r->c) {
    vr_errbuf e = {0};
    r->c = vr__redis_connect(&r->url, &r->o, &e);
    if (r->c) {
      r->connects++;
      break;
    }
    int64_t left_ms = (deadline_ns - vr_now_ns()) / 1000000;
    if (left_ms <= 0) return vr_errf(err, e.code ? e.code : VR_EIO, "%s", e.msg);
    vr__redis_sleep_ms(backoff < left_ms ? backoff : (int)left_ms);
    backoff *= 2;
    if (backoff > r->o.backoff_max_ms) backoff = r->o.backoff_max_ms;
  }
  return 0;
}

int vr_redis_open(const vr_redis_url *u, const vr_redis_opts *o, vr_redis **out,
                  vr_errbuf *err) {
  *out = NULL;
  vr_redis *r = VR_NEW(vr_redis);
  if (!r) return vr_errf(err, VR_ENOMEM, "out of memory");
  r->url = *u;
  if (o)
    r->o = *o;
  else
    vr_redis_opts_default(&r->o);
  vr_redis_url_format(u, r->name, sizeof r->name);
  pthread_mutex_init(&r->mu, NULL);
  pthread_mutex_lock(&r->mu);
  int rc = ensure_connected(r, vr_now_ns() + (int64_t)r->o.retry_ms * 1000000, err);
  pthread_mutex_unlock(&r->mu);
  if (rc) {
    vr_redis_close(r);
    return rc;
  }
  *out = r;
  return 0;
}

void vr_redis_close(vr_redis *r) {
  if (!r) return;
  if (r->c) redisFree(r->c);
  pthread_mutex_destroy(&r->mu);
  vr_free(r);
}

/* Sends a formatted command and reads its reply, reconnecting as needed. */
static redisReply *call_formatted(vr_redis *r, const char *cmd, size_t len, int *resent,
                                  vr_errbuf *err) {
  if (resent) *resent = 0;
  pthread_mutex_lock(&r->mu);
  int64_t t0 = vr_now_ns(), deadline = t0 + (int64_t)r->o.retry_ms * 1000000;
  int maybe_sent = 0;
  redisReply *rep = NULL;
  for (;;) {
    if (ensure_connected(r, deadline, err)) break;
    if (maybe_sent && resent) *resent = 1;
    void *out = NULL;
    if (redisAppendFormattedCommand(r->c, cmd, len) == REDIS_OK &&
        redisGetReply(r->c, &out) == REDIS_OK) {
      rep = out;
      break;
    }
    /* The connection broke: whether Redis saw the command is unknown. */
    maybe_sent = 1;
    char why[128];
    snprintf(why, sizeof why, "%s", r->c->errstr);
    redisFree(r->c);
    r->c = NULL;
    if (vr_now_ns() >= deadline) {
      vr_errf(err, VR_EIO, "%s: connection lost: %s", r->name, why);
      break;
    }
  }
  int64_t waited = vr_now_ns() - t0;
  if (waited > r->max_wait_ns) r->max_wait_ns = waited;
  pthread_mutex_unlock(&r->mu);
  if (rep && rep->type == REDIS_REPLY_ERROR) {
    vr_errf(err, VR_EIO, "%s: %s", r->name, rep->str);
    freeReplyObject(rep);
    rep = NULL;
  }
  return rep;
}

redisReply *vr_redis_call(vr_redis *r, int argc, const char **argv, const size_t *lens,
                          int *resent, vr_errbuf *err) {
  char *cmd = NULL;
  int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
  if (len < 0) {
    vr_errf(err, VR_ENOMEM, "%s: out of memory formatting a command", r->name);
    return NULL;
  }
  redisReply *rep = call_formatted(r, cmd, (size_t)len, resent, err);
  redisFreeCommand(cmd);
  return rep;
}

redisReply *vr_redis_cmd(vr_redis *r, vr_errbuf *err, const char *fmt, ...) {
  char *cmd = NULL;
  va_list ap;
  va_start(ap, fmt);
  int len = redisvFormatCommand(&cmd, fmt, ap);
  va_end(ap);
  if (len < 0) {
    vr_errf(err, VR_EINVAL, "%s: bad command format", r->name);
    return NULL;
  }
  redisReply *rep = call_formatted(r, cmd, (size_t)len, NULL, err);
  redisFreeCommand(cmd);
  return rep;
}

redisReply *vr_redis_eval(vr_redis *r, const char *script, int argc, const char **argv,
                          const size_t *lens, int *resent, vr_errbuf *err) {
  const char **a = vr_malloc(sizeof *a * (size_t)(argc + 3));
  size_t *l = vr_malloc(sizeof *l * (size_t)(argc + 3));
  redisReply *rep = NULL;
  if (!a || !l) {
    vr_errf(err, VR_ENOMEM, "out of memory");
  } else {
    a[0] = "EVAL";
    a[1] = script;
    a[2] = "0";
    for (int i = 0; i < 3; i++) l[i] = strlen(a[i]);
    for (int i = 0; i < argc; i++) {
      a[3 + i] = argv[i];
      l[3 + i] = lens ? lens[i] : strlen(argv[i]);
    }
    rep = vr_redis_call(r, argc + 3, a, l, resent, err);
  }
  vr_free(a);
  vr_free(l);
  return rep;
}

uint64_t vr_redis_reconnects(vr_redis *r) {
  pthread_mutex_lock(&r->mu);
  uint64_t n = r->connects > 0 ? r->connects - 1 : 0;
  pthread_mutex_unlock(&r->mu);
  return n;
}

int64_t vr_redis_take_wait_ns(vr_redis *r) {
  pthread_mutex_lock(&r->mu);
  int64_t w = r->max_wait_ns;
  r->max_wait_ns = 0;
  pthread_mutex_unlock(&r->mu);
  return w;
}

const char *vr_redis_name(const vr_redis *r) { return r->name; }
const vr_redis_opts *vr_redis_options(const vr_redis *r) { return &r->o; }
const vr_redis_url *vr_redis_address(const vr_redis *r) { return &r->url; }
