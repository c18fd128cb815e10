/* Cluster registry over loopback against a private redis-server: workers
 * and leases, instances, versioned routing tables, the subscription, and
 * Redis restarting in the middle of use. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "cluster/registry.h"
#include "redis_util.h"
#include "vr_test.h"

static vr_test_redis g_srv;

/* ---- a subscriber that records what it was told ---------------------------- */

typedef struct rec {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int connected;
  int routes;      /* ROUTES events */
  int resyncs;     /* of which resync */
  int resets;      /* of which reset (the store's numbering started over) */
  int64_t version; /* last ROUTES version */
  char body[256];
  char table[64];
  int downs, ups, instances;
  char last_worker[64];
} rec;

static void rec_init(rec *r) {
  memset(r, 0, sizeof *r);
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
}

static void rec_free(rec *r) {
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
}

static void on_event(void *ctx, const vr_registry_event *ev) {
  rec *r = ctx;
  pthread_mutex_lock(&r->mu);
  switch (ev->kind) {
    case VR_REG_EV_CONNECTED: r->connected++; break;
    case VR_REG_EV_ROUTES:
      r->routes++;
      r->resyncs += ev->resync;
      r->resets += ev->reset;
      r->version = ev->version;
      snprintf(r->body, sizeof r->body, "%s", ev->body);
      snprintf(r->table, sizeof r->table, "%s", ev->table);
      break;
    case VR_REG_EV_WORKER_UP: r->ups++; break;
    case VR_REG_EV_WORKER_DOWN: r->downs++; break;
    case VR_REG_EV_INSTANCES: r->instances++; break;
  }
  if (ev->worker) snprintf(r->last_worker, sizeof r->last_worker, "%s", ev->worker);
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

/* Waits until *field >= want or ms pass; returns the field's value. */
static int64_t rec_wait(rec *r, const void *field, int is64, int64_t want, int ms) {
  struct timespec end;
  clock_gettime(CLOCK_REALTIME, &end);
  end.tv_sec += ms / 1000;
  end.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (end.tv_nsec >= 1000000000L) end.tv_sec++, end.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&r->mu);
  int64_t v;
  for (;;) {
    v = is64 ? *(const int64_t *)field : *(const int *)field;
    if (v >= want || pthread_cond_timedwait(&r->cv, &r->mu, &end)) break;
  }
  v = is64 ? *(const int64_t *)field : *(const int *)field;
  pthread_mutex_unlock(&r->mu);
  return v;
}
#define WAIT_INT(r, f, want, ms) rec_wait((r), &(r)->f, 0, (want), (ms))
#define WAIT_I64(r, f, want, ms) rec_wait((r), &(r)->f, 1, (want), (ms))

static vr_worker_info mk_worker(const char *id, int port) {
  vr_worker_info w = {0};
  snprintf(w.id, sizeof w.id, "%s", id);
  snprintf(w.addr, sizeof w.addr, "127.0.0.1:%d", port);
  w.cores = 4;
  w.memory_bytes = 8LL << 30;
  snprintf(w.meta, sizeof w.meta, "{\"provider\":\"local\"}");
  return w;
}

static vr_registry *open_reg(void) {
  vr_registry *r = NULL;
  vr_errbuf e = {0};
  if (vr_registry_open(g_srv.url, NULL, &r, &e)) fail_msg("open: %s", e.msg);
  return r;
}

static void flush(void) { assert_int_equal(vr_test_redis_simple(g_srv.port, "FLUSHALL"), 0); }

/* ---- tests ------------------------------------------------------------------ */

static void test_workers(void **st) {
  flush();
  vr_registry *a = open_reg(), *b = open_reg();
  vr_errbuf e = {0};
  vr_worker_info w1 = mk_worker("w1", 9001), w2 = mk_worker("w2", 9002);
  assert_int_equal(vr_registry_worker_register(a, &w1, 5000, &e), 0);
  assert_int_equal(vr_registry_worker_register(b, &w2, 5000, &e), 0);
  /* Re-registering one's own id is fine; taking another's live id is not. */
  assert_int_equal(vr_registry_worker_register(a, &w1, 5000, &e), 0);
  assert_int_equal(vr_registry_worker_register(b, &w1, 5000, &e), VR_EEXIST);
  assert_non_null(strstr(e.msg, "w1"));
  vr_worker_info bad = mk_worker("no spaces", 1);
  assert_int_equal(vr_registry_worker_register(a, &bad, 5000, &e), VR_EINVAL);
  assert_int_equal(vr_registry_worker_register(a, &w1, 1, &e), VR_EINVAL);

  vr_worker_info *ws;
  size_t n;
  assert_int_equal(vr_registry_workers(b, &ws, &n, &e), 0);
  assert_int_equal(n, 2);
  assert_string_equal(ws[0].id, "w1");
  assert_string_equal(ws[0].addr, "127.0.0.1:9001");
  assert_int_equal(ws[0].cores, 4);
  assert_true(ws[0].memory_bytes == 8LL << 30);
  assert_string_equal(ws[0].meta, "{\"provider\":\"local\"}");
  assert_true(ws[0].registered_ms > 1600000000000LL);
  assert_true(ws[0].heartbeat_ms >= ws[0].registered_ms);
  assert_true(ws[0].lease_left_ms > 0 && ws[0].lease_left_ms <= 5000);
  assert_true(ws[0].lease_ms == 5000); /* the controller's grace after an outage */
  assert_string_equal(ws[1].id, "w2");
  vr_free(ws);

  int re = -1;
  assert_int_equal(vr_registry_worker_heartbeat(a, "w1", &re, &e), 0);
  assert_int_equal(re, 0);
  assert_int_equal(vr_registry_worker_heartbeat(a, "w2", &re, &e), VR_ENOENT);
  assert_int_equal(vr_registry_worker_deregister(a, "w2", &e), 0);
  assert_int_equal(vr_registry_workers(a, &ws, &n, &e), 0);
  assert_int_equal(n, 1);
  assert_string_equal(ws[0].id, "w1");
  vr_free(ws);
  vr_registry_close(a);
  vr_registry_close(b);
}

/* A worker that stops heartbeating disappears once its lease ends; one
 * that keeps heartbeating does not. */
static void test_lease_expiry(void **st) {
  flush();
  vr_registry *a = open_reg(), *ctl = open_reg();
  rec ev;
  rec_init(&ev);
  vr_registry_sub *sub;
  vr_errbuf e = {0};
  assert_int_equal(vr_registry_subscribe(g_srv.url, NULL, on_event, &ev, &sub, &e), 0);
  vr_worker_info live = mk_worker("live", 1), dead = mk_worker("dead", 2);
  /* Leases of 1 s, heartbeats every 100 ms: "live" only lapses if this
   * thread stalls for 900 ms (the machine running ctest can be loaded). */
  assert_int_equal(vr_registry_worker_register(a, &live, 1000, &e), 0);
  assert_int_equal(vr_registry_worker_register(a, &dead, 1000, &e), 0);
  assert_int_equal(WAIT_INT(&ev, ups, 2, 2000), 2);
  /* Two leases: "live" heartbeats, "dead" never. */
  int64_t end = vr_now_ns() + 2000000000LL;
  for (;;) {
    int re = 0;
    assert_int_equal(vr_registry_worker_heartbeat(a, "live", &re, &e), 0);
    assert_int_equal(re, 0);
    if (vr_now_ns() >= end) break;
    vr__redis_sleep_ms(100);
  }
  vr_worker_info *ws;
  size_t n;
  assert_int_equal(vr_registry_workers(ctl, &ws, &n, &e), 0);
  assert_int_equal(n, 1);
  assert_string_equal(ws[0].id, "live");
  vr_free(ws);
  /* The listing pruned "dead" and announced it. */
  assert_int_equal(WAIT_INT(&ev, downs, 1, 2000), 1);
  assert_string_equal(ev.last_worker, "dead");
  /* A late heartbeat brings it back (the lease had ended, not the worker). */
  int re = 0;
  assert_int_equal(vr_registry_worker_heartbeat(a, "dead", &re, &e), 0);
  assert_int_equal(re, 1);
  assert_int_equal(vr_registry_workers(ctl, &ws, &n, &e), 0);
  assert_int_equal(n, 2);
  vr_free(ws);
  vr_registry_unsubscribe(sub);
  rec_free(&ev);
  vr_registry_close(a);
  vr_registry_close(ctl);
}

/* A deregistered worker leaves a tombstone for its lease, also when Redis
 * had already lost it: the controller tells it from one not yet registered
 * again after a restart (that one it keeps for a lease). Registering the id
 * again takes the tombstone off at once. */
static void test_deregistered(void **st) {
  (void)st;
  flush();
  vr_registry *a = open_reg(), *ctl = open_reg();
  vr_errbuf e = {0};
  vr_worker_info w1 = mk_worker("w1", 1), w2 = mk_worker("w2", 2);
  assert_int_equal(vr_registry_worker_register(a, &w1, 600, &e), 0);
  assert_int_equal(vr_registry_worker_register(a, &w2, 5000, &e), 0);
  vr_worker_info *ws;
  vr_worker_left *left;
  size_t n, nleft;
  assert_int_equal(vr_registry_workers_left(ctl, &ws, &n, &left, &nleft, &e), 0);
  assert_int_equal(n, 2);
  assert_int_equal(nleft, 0);
  vr_free(ws);
  vr_free(left);
  assert_int_equal(vr_registry_worker_deregister(a, "w1", &e), 0);
  /* w2 lost by Redis (as after a restart), then deregistered */
  assert_int_equal(vr_test_redis_simple(g_srv.port, "DEL vario:worker:w2"), 0);
  assert_int_equal(vr_registry_worker_deregister(a, "w2", &e), 0);
  assert_int_equal(vr_registry_workers_left(ctl, &ws, &n, &left, &nleft, &e), 0);
  assert_int_equal(n, 0);
  assert_int_equal(nleft, 2);
  assert_string_equal(left[0].id, "w1");
  assert_string_equal(left[1].id, "w2");
  vr_free(ws);
  vr_free(left);
  /* w2 comes back at once: listed, no tombstone */
  assert_int_equal(vr_registry_worker_register(a, &w2, 5000, &e), 0);
  assert_int_equal(vr_registry_workers_left(ctl, &ws, &n, &left, &nleft, &e), 0);
  assert_int_equal(n, 1);
  assert_string_equal(ws[0].id, "w2");
  assert_int_equal(nleft, 1);
  assert_string_equal(left[0].id, "w1");
  vr_free(ws);
  vr_free(left);
  /* w1's tombstone ends with its lease (600 ms), and the set with it */
  vr__redis_sleep_ms(800);
  assert_int_equal(vr_registry_workers_left(ctl, &ws, &n, &left, &nleft, &e), 0);
  assert_int_equal(n, 1);
  assert_int_equal(nleft, 0);
  vr_free(ws);
  vr_free(left);
  vr_registry_close(a);
  vr_registry_close(ctl);
}

static void test_instances(void **st) {
  flush();
  vr_registry *a = open_reg();
  vr_errbuf e = {0};
  vr_worker_info w = mk_worker("w1", 1);
  assert_int_equal(vr_registry_worker_register(a, &w, 5000, &e), 0);
  vr_instance_info in[2] = {{.id = "i2", .variant = "cnn-int8-t1-b1", .state = "ready",
                             .cores = 1, .max_batch = 4},
                            {.id = "i1", .variant = "cnn-fp32-t2-b8", .state = "loading",
                             .cores = 2, .max_batch = 8}};
  /* the load a worker measured travels with the record */
  in[1].arrival_qps = 120.5;
  in[1].served_qps = 118;
  in[1].queue = 3;
  in[1].nlat = 2;
  in[1].p50_ms[0] = 0.25, in[1].p99_ms[0] = 0.5;
  in[1].p50_ms[1] = 0.4, in[1].p99_ms[1] = 0.9;
  assert_int_equal(vr_registry_put_instances(a, "w1", in, 2, &e), 0);
  vr_instance_info *got;
  size_t n;
  assert_int_equal(vr_registry_instances(a, "w1", &got, &n, &e), 0);
  assert_int_equal(n, 2);
  assert_string_equal(got[0].id, "i1");
  assert_string_equal(got[0].variant, "cnn-fp32-t2-b8");
  assert_string_equal(got[0].state, "loading");
  assert_int_equal(got[0].cores, 2);
  assert_int_equal(got[0].max_batch, 8);
  assert_true(got[0].arrival_qps == 120.5 && got[0].served_qps == 118);
  assert_int_equal(got[0].queue, 3);
  assert_int_equal(got[0].nlat, 2);
  assert_true(got[0].p50_ms[1] == 0.4 && got[0].p99_ms[1] == 0.9);
  assert_string_equal(got[1].id, "i2");
  assert_int_equal(got[1].nlat, 0);
  assert_true(got[1].arrival_qps == 0);
  vr_free(got);
  in[1] = in[0];
  assert_int_equal(vr_registry_put_instances(a, "w1", in, 2, &e), VR_EINVAL); /* dup id */
  assert_int_equal(vr_registry_put_instances(a, "nobody", in, 1, &e), VR_ENOENT);
  assert_int_equal(vr_registry_put_instances(a, "w1", in, 0, &e), 0);
  assert_int_equal(vr_registry_instances(a, "w1", &got, &n, &e), 0);
  assert_int_equal(n, 0);
  /* A record edited behind the registry's back is reported. */
  assert_int_equal(vr_test_redis_simple(g_srv.port, "HSET vario:worker:w1:instances x {bad"), 0);
  assert_int_equal(vr_registry_instances(a, "w1", &got, &n, &e), VR_EFORMAT);
  /* so is a load with a negative rate */
  assert_int_equal(vr_test_redis_simple(g_srv.port, "DEL vario:worker:w1:instances"), 0);
  assert_int_equal(vr_registry_put_instances(a, "w1", in, 1, &e), 0);
  assert_int_equal(vr_test_redis_simple(g_srv.port,
                                        "HSET vario:worker:w1:instances x "
                                        "{\"variant\":\"m\",\"state\":\"ready\",\"cores\":1,"
                                        "\"max_batch\":1,\"load\":{\"in\":-1,\"out\":0,\"q\":0}}"),
                   0);
  assert_int_equal(vr_registry_instances(a, "w1", &got, &n, &e), VR_EFORMAT);
  /* A worker whose lease ended is not one that holds nothing, even where
   * its instance list outlived it (the controller listed it before the
   * lease ended: Redis paused between running the listing and replying) */
  assert_int_equal(vr_registry_put_instances(a, "w1", in, 1, &e), 0);
  assert_int_equal(vr_test_redis_simple(g_srv.port, "PERSIST vario:worker:w1:instances"), 0);
  assert_int_equal(vr_test_redis_simple(g_srv.port, "DEL vario:worker:w1"), 0);
  memset(&e, 0, sizeof e);
  assert_int_equal(vr_registry_instances(a, "w1", &got, &n, &e), VR_ENOENT);
  assert_non_null(strstr(e.msg, "not live"));
  assert_int_equal(vr_registry_instances(a, "never", &got, &n, &e), VR_ENOENT);
  vr_registry_close(a);
}

static void test_routes(void **st) {
  flush();
  vr_registry *ctl = open_reg(), *fe = open_reg();
  vr_errbuf e = {0};
  int64_t v = 0;
  char *body = NULL;
  assert_int_equal(vr_registry_get_routes(fe, "fashion", &v, &body, &e), VR_ENOENT);
  assert_int_equal(vr_registry_put_routes(ctl, "fashion", "{\"w1\":1}", -1, &v, &e), 0);
  assert_int_equal(v, 1);
  /* A subscriber that starts later gets the current table at once. */
  rec ev;
  rec_init(&ev);
  vr_registry_sub *sub;
  assert_int_equal(vr_registry_subscribe(g_srv.url, NULL, on_event, &ev, &sub, &e), 0);
  assert_int_equal(ev.connected, 1);
  assert_int_equal(ev.routes, 1);
  assert_int_equal(ev.resyncs, 1);
  assert_string_equal(ev.body, "{\"w1\":1}");
  /* Compare-and-set: stale expectations are refused. */
  assert_int_equal(vr_registry_put_routes(ctl, "fashion", "{\"w2\":1}", 0, &v, &e), VR_ESTATE);
  assert_int_equal(v, 1);
  assert_int_equal(vr_registry_put_routes(ctl, "fashion", "{\"w2\":1}", 1, &v, &e), 0);
  assert_int_equal(v, 2);
  assert_int_equal(WAIT_I64(&ev, version, 2, 2000), 2);
  assert_string_equal(ev.body, "{\"w2\":1}");
  assert_string_equal(ev.table, "fashion");
  assert_int_equal(ev.resyncs, 1);
  assert_int_equal(vr_registry_get_routes(fe, "fashion", &v, &body, &e), 0);
  assert_int_equal(v, 2);
  assert_string_equal(body, "{\"w2\":1}");
  vr_free(body);
  assert_int_equal(vr_registry_put_routes(ctl, "bad table", "{}", -1, &v, &e), VR_EINVAL);
  vr_registry_unsubscribe(sub);
  rec_free(&ev);
  vr_registry_close(ctl);
  vr_registry_close(fe);
}

static void *restart_later(void *arg) {
  vr__redis_sleep_ms(400);
  vr_test_redis *t = arg;
  if (vr_test_redis_spawn(t)) fprintf(stderr, "restart failed\n");
  return NULL;
}

/* Redis dies (SIGKILL, data lost) and comes back on the same port: calls
 * made while it is down wait with backoff and then succeed, the worker is
 * re-created, versions keep growing, and the subscriber reconnects and
 * sees the next change. */
static void test_redis_restart(void **st) {
  flush();
  vr_redis_opts o;
  vr_redis_opts_default(&o);
  o.retry_ms = 10000;
  vr_registry *w = NULL, *ctl = NULL;
  vr_errbuf e = {0};
  assert_int_equal(vr_registry_open(g_srv.url, &o, &w, &e), 0);
  assert_int_equal(vr_registry_open(g_srv.url, &o, &ctl, &e), 0);
  rec ev;
  rec_init(&ev);
  vr_registry_sub *sub;
  assert_int_equal(vr_registry_subscribe(g_srv.url, &o, on_event, &ev, &sub, &e), 0);
  vr_worker_info wi = mk_worker("w1", 1);
  assert_int_equal(vr_registry_worker_register(w, &wi, 5000, &e), 0);
  vr_instance_info in = {.id = "i1", .variant = "m-fp32-t1-b1", .state = "ready", .cores = 1,
                         .max_batch = 1};
  assert_int_equal(vr_registry_put_instances(w, "w1", &in, 1, &e), 0);
  int64_t v = 0;
  for (int i = 0; i < 3; i++)
    assert_int_equal(vr_registry_put_routes(ctl, "app", "{\"v\":\"old\"}", -1, &v, &e), 0);
  assert_int_equal(v, 3);
  assert_int_equal(WAIT_I64(&ev, version, 3, 2000), 3);

  vr_test_redis_kill(&g_srv);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, restart_later, &g_srv), 0);
  int re = 0;
  int64_t t0 = vr_now_ns();
  int rc = vr_registry_worker_heartbeat(w, "w1", &re, &e);
  pthread_join(th, NULL);
  if (rc) fail_msg("heartbeat across the restart: %s", e.msg);
  assert_true(vr_now_ns() - t0 >= 300000000LL); /* it did wait for Redis */
  assert_int_equal(re, 1);                       /* Redis lost it: re-created */
  assert_true(vr_redis_reconnects(vr_registry_redis(w)) >= 1);
  vr_instance_info *got;
  size_t n;
  assert_int_equal(vr_registry_instances(ctl, "w1", &got, &n, &e), 0);
  assert_int_equal(n, 1); /* ...with its instances */
  assert_string_equal(got[0].variant, "m-fp32-t1-b1");
  vr_free(got);
  /* Redis forgot version 3; the writer's floor keeps versions growing. */
  assert_int_equal(vr_registry_put_routes(ctl, "app", "{\"v\":\"new\"}", -1, &v, &e), 0);
  assert_int_equal(v, 4);
  assert_int_equal(WAIT_I64(&ev, version, 4, 10000), 4);
  assert_string_equal(ev.body, "{\"v\":\"new\"}");
  assert_true(WAIT_INT(&ev, connected, 2, 1000) >= 2);
  vr_registry_unsubscribe(sub);
  rec_free(&ev);
  vr_registry_close(w);
  vr_registry_close(ctl);
}

/* Redis loses its data and the controller restarts with it: the new
 * writer numbers from 1 again. The subscriber must take those tables (a
 * front end kept its old table for good), after a reconnect (resync finds
 * the table gone) and without one (FLUSHALL: the published version is
 * below the last, and the store holds it). */
static void test_store_starts_over(void **st) {
  flush();
  vr_redis_opts o;
  vr_redis_opts_default(&o);
  o.retry_ms = 10000;
  vr_registry *ctl = NULL;
  vr_errbuf e = {0};
  assert_int_equal(vr_registry_open(g_srv.url, &o, &ctl, &e), 0);
  rec ev;
  rec_init(&ev);
  vr_registry_sub *sub;
  assert_int_equal(vr_registry_subscribe(g_srv.url, &o, on_event, &ev, &sub, &e), 0);
  int64_t v = 0;
  for (int i = 0; i < 3; i++)
    assert_int_equal(vr_registry_put_routes(ctl, "main", "{\"v\":\"old\"}", -1, &v, &e), 0);
  assert_int_equal(WAIT_I64(&ev, version, 3, 2000), 3);
  vr_registry_close(ctl);
  vr_test_redis_kill(&g_srv);
  assert_int_equal(vr_test_redis_spawn(&g_srv), 0);
  assert_true(WAIT_INT(&ev, connected, 2, 10000) >= 2);
  assert_int_equal(vr_registry_open(g_srv.url, &o, &ctl, &e), 0);
  assert_int_equal(vr_registry_put_routes(ctl, "main", "{\"v\":\"new\"}", -1, &v, &e), 0);
  assert_int_equal(v, 1);
  assert_int_equal(WAIT_INT(&ev, resets, 1, 5000), 1);
  pthread_mutex_lock(&ev.mu);
  assert_int_equal(ev.version, 1);
  assert_string_equal(ev.body, "{\"v\":\"new\"}");
  pthread_mutex_unlock(&ev.mu);
  assert_int_equal(vr_registry_put_routes(ctl, "main", "{\"v\":2}", -1, &v, &e), 0);
  assert_int_equal(WAIT_I64(&ev, version, 2, 2000), 2);
  assert_int_equal(ev.resets, 1); /* counting on from there: no reset */
  vr_registry_close(ctl);
  /* the same with the subscriber still connected */
  assert_int_equal(vr_test_redis_simple(g_srv.port, "FLUSHALL"), 0);
  assert_int_equal(vr_registry_open(g_srv.url, &o, &ctl, &e), 0);
  assert_int_equal(vr_registry_put_routes(ctl, "main", "{\"v\":\"flushed\"}", -1, &v, &e), 0);
  assert_int_equal(v, 1);
  assert_int_equal(WAIT_INT(&ev, resets, 2, 5000), 2);
  pthread_mutex_lock(&ev.mu);
  assert_int_equal(ev.version, 1);
  assert_string_equal(ev.body, "{\"v\":\"flushed\"}");
  pthread_mutex_unlock(&ev.mu);
  vr_registry_unsubscribe(sub);
  rec_free(&ev);
  vr_registry_close(ctl);
}

/* A user whose ACL leaves out the channels: SUBSCRIBE is refused, and the
 * subscription says so instead of reporting success and never delivering. */
static void test_subscribe_refused(void **st) {
  flush();
  assert_int_equal(
      vr_test_redis_simple(g_srv.port, "ACL SETUSER fe on >pw ~vario:* +@all resetchannels"), 0);
  char url[128];
  snprintf(url, sizeof url, "redis://fe:pw@127.0.0.1:%d", g_srv.port);
  vr_redis_opts o;
  vr_redis_opts_default(&o);
  o.retry_ms = 200;
  rec ev;
  rec_init(&ev);
  vr_registry_sub *sub = NULL;
  vr_errbuf e = {0};
  assert_int_equal(vr_registry_subscribe(url, &o, on_event, &ev, &sub, &e), VR_EIO);
  assert_null(sub);
  assert_non_null(strstr(e.msg, "NOPERM"));
  rec_free(&ev);
  assert_int_equal(vr_test_redis_simple(g_srv.port, "ACL DELUSER fe"), 0);
}

/* While Redis is down for longer than retry_ms, calls fail with a clear
 * error instead of hanging; unsubscribe stays prompt meanwhile. */
static void test_redis_down(void **st) {
  flush();
  vr_redis_opts o;
  vr_redis_opts_default(&o);
  o.retry_ms = 300;
  vr_registry *r = NULL;
  vr_errbuf e = {0};
  assert_int_equal(vr_registry_open(g_srv.url, &o, &r, &e), 0);
  rec ev;
  rec_init(&ev);
  vr_registry_sub *sub;
  assert_int_equal(vr_registry_subscribe(g_srv.url, &o, on_event, &ev, &sub, &e), 0);
  vr_test_redis_kill(&g_srv);
  int64_t v;
  int64_t t0 = vr_now_ns();
  assert_int_equal(vr_registry_put_routes(r, "x", "{}", -1, &v, &e), VR_EIO);
  assert_true(vr_now_ns() - t0 < 3000000000LL);
  assert_non_null(strstr(e.msg, "redis://127.0.0.1:"));
  vr__redis_sleep_ms(200);
  t0 = vr_now_ns();
  vr_registry_unsubscribe(sub);
  assert_true(vr_now_ns() - t0 < 1500000000LL);
  rec_free(&ev);
  assert_int_equal(vr_test_redis_spawn(&g_srv), 0);
  assert_int_equal(vr_registry_put_routes(r, "x", "{}", -1, &v, &e), 0);
  vr_registry_close(r);
  /* Subscribing to a Redis that is not there gives up after retry_ms. */
  vr_test_redis_kill(&g_srv);
  rec_init(&ev);
  assert_int_equal(vr_registry_subscribe(g_srv.url, &o, on_event, &ev, &sub, &e), VR_EIO);
  rec_free(&ev);
  assert_int_equal(vr_test_redis_spawn(&g_srv), 0);
}

static void *cont_later(void *arg) {
  vr__redis_sleep_ms(400);
  kill(*(pid_t *)arg, SIGCONT);
  return NULL;
}

/* A Redis that stalls (SIGSTOP) shorter than the I/O timeout: the call
 * just waits and succeeds on its connection, and the wait is what tells
 * the controller that leases may have ended meanwhile for want of a
 * heartbeat getting through (vr_redis_take_wait_ns). */
static void test_stall_seen(void **st) {
  (void)st;
  flush();
  vr_registry *r = open_reg();
  vr_redis *rd = vr_registry_redis(r);
  vr_errbuf e = {0};
  vr_worker_info *ws = NULL;
  size_t n = 0;
  assert_int_equal(vr_registry_workers(r, &ws, &n, &e), 0);
  vr_free(ws);
  assert_true(vr_redis_take_wait_ns(rd) < 300000000LL);
  assert_true(vr_redis_take_wait_ns(rd) == 0); /* taken */
  assert_int_equal(kill(g_srv.pid, SIGSTOP), 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, cont_later, &g_srv.pid), 0);
  assert_int_equal(vr_registry_workers(r, &ws, &n, &e), 0);
  vr_free(ws);
  pthread_join(th, NULL);
  assert_int_equal(vr_redis_reconnects(rd), 0); /* no failure, no new connection ... */
  assert_true(vr_redis_take_wait_ns(rd) >= 350000000LL); /* ... only the wait shows it */
  vr_registry_close(r);
}

/* A password-protected Redis: the URL's credentials are used on every
 * (re)connection; a wrong or missing one is a clear error. */
static void test_auth(void **st) {
  flush();
  vr_registry *r = NULL;
  vr_errbuf e = {0};
  assert_int_equal(vr_test_redis_simple(g_srv.port, "CONFIG SET requirepass s3cret"), 0);
  char url[128];
  snprintf(url, sizeof url, "redis://:s3cret@127.0.0.1:%d/1", g_srv.port);
  assert_int_equal(vr_registry_open(url, NULL, &r, &e), 0);
  int64_t v;
  assert_int_equal(vr_registry_put_routes(r, "t", "{}", -1, &v, &e), 0);
  assert_int_equal(v, 1);
  vr_registry_close(r);
  vr_redis_opts o;
  vr_redis_opts_default(&o);
  o.retry_ms = 0;
  snprintf(url, sizeof url, "redis://:wrong@127.0.0.1:%d", g_srv.port);
  assert_int_equal(vr_registry_open(url, &o, &r, &e), VR_EIO);
  assert_non_null(strstr(e.msg, "AUTH"));
  /* No password at all: the first command is refused. */
  assert_int_equal(vr_registry_open(g_srv.url, &o, &r, &e), 0);
  assert_int_equal(vr_registry_put_routes(r, "t", "{}", -1, &v, &e), VR_EIO);
  assert_non_null(strstr(e.msg, "NOAUTH"));
  vr_registry_close(r);
  /* Back to no password (db 1 held the table: a separate keyspace). */
  struct timeval tv = {1, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", g_srv.port, tv);
  assert_non_null(c);
  redisReply *rep = redisCommand(c, "AUTH s3cret");
  freeReplyObject(rep);
  rep = redisCommand(c, "CONFIG SET requirepass %s", "");
  assert_true(rep && rep->type == REDIS_REPLY_STATUS);
  freeReplyObject(rep);
  redisFree(c);
}

/* A compare-and-set whose reply is lost: the re-send finds the version
 * moved on, sees its own body there and reports success, once. */
static void test_lost_reply(void **st) {
  flush();
  vr_test_proxy px;
  assert_int_equal(vr_test_proxy_start(&px, g_srv.port), 0);
  vr_registry *r = NULL;
  vr_errbuf e = {0};
  assert_int_equal(vr_registry_open(px.url, NULL, &r, &e), 0);
  int64_t v = 0;
  assert_int_equal(vr_registry_put_routes(r, "t", "{\"a\":1}", 0, &v, &e), 0);
  vr_test_proxy_arm(&px);
  if (vr_registry_put_routes(r, "t", "{\"a\":2}", 1, &v, &e)) fail_msg("%s", e.msg);
  assert_int_equal(v, 2);
  assert_int_equal(vr_test_proxy_drops(&px), 1);
  char *body = NULL;
  assert_int_equal(vr_registry_get_routes(r, "t", &v, &body, &e), 0);
  assert_int_equal(v, 2);
  assert_string_equal(body, "{\"a\":2}");
  vr_free(body);
  /* A genuine conflict stays a conflict. */
  assert_int_equal(vr_registry_put_routes(r, "t", "{\"a\":3}", 1, &v, &e), VR_ESTATE);
  vr_registry_close(r);
  vr_test_proxy_stop(&px);
}

static void test_route_msg(void **st) {
  char t[VR_REG_ID_MAX];
  int64_t v;
  const char *body;
  const char ok[] = "app-1 42\n{\"a\":1}";
  assert_int_equal(vr_registry_parse_route_msg(ok, sizeof ok - 1, t, &v, &body), 0);
  assert_string_equal(t, "app-1");
  assert_int_equal(v, 42);
  assert_string_equal(body, "{\"a\":1}");
  static const char *bad[] = {"", " 1\n", "a 0\n", "a 01\n", "a -1\n", "a 1", "a 1 \n",
                              "a b\n", "a/b 1\n", "a 99999999999999999999\n"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    assert_int_equal(vr_registry_parse_route_msg(bad[i], strlen(bad[i]), t, &v, &body),
                     VR_EFORMAT);
}

/* A reader that, like the controller, lists the workers and then reads
 * each one's instances: counts the times it saw w1 without them. */
typedef struct seer {
  vr_registry *r;
  int stop;
  int flushes; /* odd while a FLUSHALL runs: looks across one do not count */
  int looks, bare;
} seer;

static void *seer_main(void *arg) {
  seer *s = arg;
  while (!__atomic_load_n(&s->stop, __ATOMIC_SEQ_CST)) {
    int f0 = __atomic_load_n(&s->flushes, __ATOMIC_SEQ_CST);
    vr_worker_info *ws = NULL;
    size_t n = 0;
    vr_errbuf e = {0};
    if (vr_registry_workers(s->r, &ws, &n, &e)) continue;
    int listed = n == 1 && !strcmp(ws[0].id, "w1");
    vr_free(ws);
    if (!listed) continue;
    vr_instance_info *in = NULL;
    size_t ni = 0;
    if (vr_registry_instances(s->r, "w1", &in, &ni, &e)) continue;
    vr_free(in);
    if (f0 % 2 || __atomic_load_n(&s->flushes, __ATOMIC_SEQ_CST) != f0) continue;
    s->looks++;
    s->bare += ni == 0;
  }
  return NULL;
}

/* Redis loses its data (FLUSHALL) and a heartbeat re-creates the worker:
 * with its instances in one go. Registered first and its instances a
 * round trip later, a controller reading in between saw a worker that
 * held nothing, published a routing table without it serving (the front
 * end answered 503: integration_cluster_registry, once in CI) and placed
 * its models again. */
static void test_recreated_with_instances(void **st) {
  (void)st;
  flush();
  vr_registry *w = open_reg();
  seer s = {.r = open_reg()};
  vr_errbuf e = {0};
  vr_worker_info wi = mk_worker("w1", 1);
  assert_int_equal(vr_registry_worker_register(w, &wi, 5000, &e), 0);
  vr_instance_info in[2] = {{.id = "i1", .variant = "m-fp32-t1-b1", .state = "ready", .cores = 1,
                             .max_batch = 1},
                            {.id = "i2", .variant = "n-fp32-t1-b1", .state = "ready", .cores = 1,
                             .max_batch = 1}};
  assert_int_equal(vr_registry_put_instances(w, "w1", in, 2, &e), 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, seer_main, &s), 0);
  for (int i = 0; i < 2000; i++) {
    __atomic_add_fetch(&s.flushes, 1, __ATOMIC_SEQ_CST);
    flush();
    __atomic_add_fetch(&s.flushes, 1, __ATOMIC_SEQ_CST);
    int re = 0;
    if (vr_registry_worker_heartbeat(w, "w1", &re, &e)) fail_msg("heartbeat: %s", e.msg);
    assert_int_equal(re, 1);
    if (i % 8 == 0) vr__redis_sleep_ms(1); /* the reader looks at a settled worker too */
  }
  __atomic_store_n(&s.stop, 1, __ATOMIC_SEQ_CST);
  pthread_join(th, NULL);
  assert_true(s.looks > 0);
  if (s.bare) fail_msg("the worker was listed without its instances %d times of %d", s.bare, s.looks);
  vr_registry_close(s.r);
  vr_registry_close(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_route_msg),     cmocka_unit_test(test_workers),
      cmocka_unit_test(test_lease_expiry),  cmocka_unit_test(test_deregistered),
      cmocka_unit_test(test_instances),
      cmocka_unit_test(test_routes),        cmocka_unit_test(test_redis_restart),
      cmocka_unit_test(test_recreated_with_instances),
      cmocka_unit_test(test_redis_down),    cmocka_unit_test(test_stall_seen),
      cmocka_unit_test(test_lost_reply),
      cmocka_unit_test(test_auth),          cmocka_unit_test(test_store_starts_over),
      cmocka_unit_test(test_subscribe_refused),
  };
  int rc = vr_test_redis_start_main(&g_srv);
  if (rc) return rc;
  rc = cmocka_run_group_tests_name("registry", tests, NULL, NULL);
  vr_test_redis_stop(&g_srv);
  return rc;
}
