/*
 * Registry subscription (see registry.h): one thread per subscription that
 * owns a SUBSCRIBEd connection to vario:routes and vario:workers and a
 * second, ordinary connection for re-reading the routing tables after a
 * (re)connect.
 *
 * Why poll() and not a blocking read: a blocking read with a socket
 * timeout breaks a hiredis context when it fires, and could not be
 * interrupted by unsubscribe. The thread polls the socket together with a
 * wake-up pipe, feeds hiredis's reader itself, and every second of
 * silence sends a PING so that a peer that vanished without closing the
 * socket is noticed too.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "cluster/registry.h"
#include "cluster/registry_int.h"

typedef struct sub_table {
  char name[VR_REG_ID_MAX];
  int64_t version; /* highest delivered */
  int reset;       /* the store lost it: the next one delivered starts over */
  int seen;        /* in the store at this resync */
} sub_table;

struct vr_registry_sub {
  pthread_t th;
  int wake[2]; /* unsubscribe writes a byte to wake[1] */
  int stop;    /* atomic */
  vr_redis_url url;
  vr_redis_opts o;
  vr_registry_cb cb;
  void *ctx;
  vr_redis *rd; /* resync reads */
  sub_table *tables;
  size_t ntables;
  uint64_t connects;
  /* start-up handshake with vr_registry_subscribe */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int started; /* 1 = subscribed, -1 = gave up */
  vr_errbuf start_err;
};

static int stopping(vr_registry_sub *s) { return __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE); }

/* Waits up to ms, returning early (1) when asked to stop. */
static int wait_stop(vr_registry_sub *s, int ms) {
  struct pollfd p = {.fd = s->wake[0], .events = POLLIN};
  int64_t end = vr_now_ns() + (int64_t)ms * 1000000;
  while (!stopping(s)) {
    int64_t left = (end - vr_now_ns()) / 1000000;
    if (left <= 0) return 0;
    if (poll(&p, 1, (int)left) > 0) break;
  }
  return 1;
}

static sub_table *table_get(vr_registry_sub *s, const char *name) {
  for (size_t i = 0; i < s->ntables; i++)
    if (!strcmp(s->tables[i].name, name)) return &s->tables[i];
  sub_table *g = vr_realloc(s->tables, (s->ntables + 1) * sizeof *g);
  if (!g) return NULL;
  s->tables = g;
  sub_table *t = &g[s->ntables++];
  snprintf(t->name, sizeof t->name, "%s", name);
  t->version = 0;
  t->reset = t->seen = 0;
  return t;
}

/* Row i of vr__reg_all_routes's reply (name, version, body triples),
 * when well formed: its name, *v its version, *body its body; else NULL. */
static const char *route_row(const redisReply *rep, size_t i, int64_t *v, const char **body) {
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements % 3 || i + 3 > rep->elements) return NULL;
  redisReply **x = rep->element + i;
  if (x[0]->type != REDIS_REPLY_STRING || !vr_registry_valid_id(x[0]->str) ||
      vr__reg_get_i64(x[1], 1, INT64_MAX, v) || x[2]->type != REDIS_REPLY_STRING)
    return NULL;
  *body = x[2]->str;
  return x[0]->str;
}

/* The version the store holds for table now: 0 when it holds none, -1
 * when it cannot be read. */
static int64_t stored_version(vr_registry_sub *s, const char *table) {
  vr_errbuf e = {0};
  redisReply *rep = vr__reg_all_routes(s->rd, &e);
  if (!rep) return -1;
  int64_t found = 0, v;
  const char *name, *body;
  for (size_t i = 0; i < rep->elements; i += 3)
    if ((name = route_row(rep, i, &v, &body)) && !strcmp(name, table)) found = v;
  freeReplyObject(rep);
  return found;
}

/* Delivers a table when it is newer than what was delivered, or when the
 * store's numbering started over: Redis lost its data and a new writer
 * (a restarted controller) counts from 1 again, so every later version
 * would look stale for good. A lower version is a restart when the store
 * itself holds it (resync reads the store; a published one is checked
 * against it), and not an old message overtaken by a newer one. */
static void deliver_routes(vr_registry_sub *s, const char *table, int64_t v, const char *body,
                           int resync) {
  sub_table *t = table_get(s, table);
  if (!t) return;
  t->seen = 1;
  int reset = t->reset;
  if (!reset && v < t->version) reset = resync || stored_version(s, table) == v;
  if (!reset && v <= t->version) return;
  t->version = v;
  t->reset = 0;
  vr_registry_event ev = {.kind = VR_REG_EV_ROUTES, .table = table, .version = v, .body = body,
                          .resync = resync, .reset = reset};
  s->cb(s->ctx, &ev);
}

static void resync(vr_registry_sub *s) {
  vr_errbuf e = {0};
  redisReply *rep = vr__reg_all_routes(s->rd, &e);
  if (!rep) return; /* the next publish (or reconnect) brings it */
  if (rep->type == REDIS_REPLY_ARRAY && rep->elements % 3 == 0) {
    for (size_t i = 0; i < s->ntables; i++) s->tables[i].seen = 0;
    for (size_t i = 0; i < rep->elements; i += 3) {
      int64_t v;
      const char *body, *name = route_row(rep, i, &v, &body);
      if (name) deliver_routes(s, name, v, body, 1);
    }
    /* delivered once, gone from the store now: it lost its data, and the
     * table's next writer starts again from version 1 */
    for (size_t i = 0; i < s->ntables; i++)
      if (!s->tables[i].seen && s->tables[i].version > 0) {
        s->tables[i].version = 0;
        s->tables[i].reset = 1;
      }
  }
  freeReplyObject(rep);
}

static void on_message(vr_registry_sub *s, redisReply *rep) {
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 3) return;
  redisReply *kind = rep->element[0], *ch = rep->element[1], *msg = rep->element[2];
  if (kind->type != REDIS_REPLY_STRING || strcmp(kind->str, "message") ||
      ch->type != REDIS_REPLY_STRING || msg->type != REDIS_REPLY_STRING)
    return; /* subscribe confirmations, pongs */
  if (!strcmp(ch->str, VR_REG_PREFIX "routes")) {
    char table[VR_REG_ID_MAX];
    int64_t v;
    const char *body;
    if (vr_registry_parse_route_msg(msg->str, msg->len, table, &v, &body) == 0)
      deliver_routes(s, table, v, body, 0);
    return;
  }
  static const struct {
    const char *word;
    vr_registry_ev_kind kind;
  } words[] = {{"up ", VR_REG_EV_WORKER_UP},
               {"down ", VR_REG_EV_WORKER_DOWN},
               {"instances ", VR_REG_EV_INSTANCES}};
  for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
    size_t n = strlen(words[i].word);
    if (msg->len > n && !strncmp(msg->str, words[i].word, n) &&
        vr_registry_valid_id(msg->str + n)) {
      vr_registry_event ev = {.kind = words[i].kind, .worker = msg->str + n};
      s->cb(s->ctx, &ev);
      return;
    }
  }
}

static void started(vr_registry_sub *s, int how, const vr_errbuf *e) {
  pthread_mutex_lock(&s->mu);
  if (!s->started) {
    s->started = how;
    if (e) s->start_err = *e;
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
}

/* Follows one connection until it breaks or unsubscribe; 1 = stop. */
static int follow(vr_registry_sub *s, redisContext *c) {
  int64_t last_rx = vr_now_ns(), ping_ns = 1000000000LL;
  int64_t dead_ns = (int64_t)(s->o.io_timeout_ms + 1000) * 1000000;
  for (;;) {
    void *out = NULL;
    while (redisGetReplyFromReader(c, &out) == REDIS_OK && out) {
      on_message(s, out);
      freeReplyObject(out);
      out = NULL;
      if (stopping(s)) return 1;
    }
    if (c->err) return 0;
    struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN}, {.fd = s->wake[0], .events = POLLIN}};
    int n = poll(p, 2, 1000);
    if (stopping(s)) return 1;
    if (n < 0 && errno != EINTR) return 0;
    if (n > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      if (redisBufferRead(c) != REDIS_OK) return 0;
      last_rx = vr_now_ns();
      continue;
    }
    int64_t quiet = vr_now_ns() - last_rx;
    if (quiet > dead_ns) return 0; /* not even a pong: the peer is gone */
    if (quiet >= ping_ns) {
      int done = 0;
      if (redisAppendCommand(c, "PING") != REDIS_OK) return 0;
      while (!done)
        if (redisBufferWrite(c, &done) != REDIS_OK) return 0;
    }
  }
}

static void *sub_main(void *arg) {
  vr_registry_sub *s = arg;
  int backoff = s->o.backoff_min_ms > 0 ? s->o.backoff_min_ms : 1;
  int64_t give_up = vr_now_ns() + (int64_t)s->o.retry_ms * 1000000;
  while (!stopping(s)) {
    vr_errbuf e = {0};
    redisContext *c = vr__redis_connect(&s->url, &s->o, &e);
    if (c) {
      redisReply *r = redisCommand(c, "SUBSCRIBE %s %s", VR_REG_PREFIX "routes",
                                   VR_REG_PREFIX "workers");
      /* a refusal (an ACL without these channels: -NOPERM) is a failed
       * connect; taken for success, the pings would keep a subscription
       * that never delivers anything alive */
      int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
               r->element[0]->type == REDIS_REPLY_STRING && !strcmp(r->element[0]->str, "subscribe");
      if (!ok) {
        vr_errf(&e, VR_EIO, "subscribe: %s",
                !r ? c->errstr : r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        if (r) freeReplyObject(r);
        redisFree(c);
        c = NULL;
      } else {
        freeReplyObject(r);
      }
    }
    if (!c) {
      if (!s->started && vr_now_ns() >= give_up) {
        started(s, -1, &e);
        return NULL;
      }
      if (wait_stop(s, backoff)) break;
      backoff = backoff * 2 > s->o.backoff_max_ms ? s->o.backoff_max_ms : backoff * 2;
      continue;
    }
    backoff = s->o.backoff_min_ms > 0 ? s->o.backoff_min_ms : 1;
    vr_registry_event ev = {.kind = VR_REG_EV_CONNECTED, .version = (int64_t)s->connects++};
    s->cb(s->ctx, &ev);
    /* After SUBSCRIBE, so a change made meanwhile arrives one way or the
     * other (the version check drops the second copy). */
    resync(s);
    started(s, 1, NULL);
    int stop = follow(s, c);
    redisFree(c);
    if (stop) break;
  }
  started(s, -1, NULL); /* stopped before it ever connected */
  return NULL;
}

int vr_registry_subscribe(const char *url, const vr_redis_opts *o, vr_registry_cb cb, void *ctx,
                          vr_registry_sub **out, vr_errbuf *err) {
  *out = NULL;
  vr_registry_sub *s = VR_NEW(vr_registry_sub);
  if (!s) return vr_errf(err, VR_ENOMEM, "out of memory");
  s->wake[0] = s->wake[1] = -1;
  int rc = vr_redis_url_parse(url, &s->url, err);
  if (o)
    s->o = *o;
  else
    vr_redis_opts_default(&s->o);
  s->cb = cb;
  s->ctx = ctx;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  if (!rc) rc = vr_redis_open(&s->url, &s->o, &s->rd, err);
  if (!rc && pipe2(s->wake, O_CLOEXEC)) rc = vr_errf(err, VR_EIO, "pipe: %s", strerror(errno));
  if (!rc && pthread_create(&s->th, NULL, sub_main, s)) {
    rc = vr_errf(err, VR_EIO, "cannot start the subscriber thread");
  } else if (!rc) {
    pthread_mutex_lock(&s->mu);
    while (!s->started) pthread_cond_wait(&s->cv, &s->mu);
    int ok = s->started > 0;
    pthread_mutex_unlock(&s->mu);
    if (!ok) {
      pthread_join(s->th, NULL);
      rc = vr_errf(err, s->start_err.code ? s->start_err.code : VR_EIO, "%s",
                   s->start_err.msg[0] ? s->start_err.msg : "subscribe failed");
    } else {
      *out = s;
      return 0;
    }
  }
  /* failure before the thread ran, or the thread already ended */
  if (s->wake[0] >= 0) close(s->wake[0]);
  if (s->wake[1] >= 0) close(s->wake[1]);
  vr_redis_close(s->rd);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  vr_free(s);
  return rc;
}

void vr_registry_unsubscribe(vr_registry_sub *s) {
  if (!s) return;
  __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
  ssize_t w = write(s->wake[1], "x", 1);
  (void)w;
  pthread_join(s->th, NULL);
  close(s->wake[0]);
  close(s->wake[1]);
  vr_redis_close(s->rd);
  vr_free(s->tables);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  vr_free(s);
}
