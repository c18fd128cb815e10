/*
 * Metadata and routing over Redis vs SQLite (issue 18):
 *   1. registration write time: vr_store_add_model (one model with V
 *      variants, each with a profile of P bytes; one transaction / one Lua
 *      script) followed by vr_store_remove_model, on a SQLite file and on
 *      Redis;
 *   2. routing-table propagation: vr_registry_put_routes in this thread ->
 *      the subscriber thread's callback (both over loopback through Redis;
 *      one process, so one monotonic clock times both ends).
 *
 *   bench_registry_bench --redis redis://127.0.0.1:PORT --sqlite FILE
 *                        [--n 300] [--variants 12] [--profile-bytes 1500]
 *                        [--routes 1000] [--gap-us 1000] [--subscribers 1]
 *                        [--skip-store 1]
 * With --subscribers K, K subscriptions (each a thread and a connection)
 * follow the table; "put -> all K" is the time until the last has it.
 * bench/registry.sh starts a private redis-server and runs this.
 * Prints one line per measurement: name n p50_us p90_us p99_us max_us.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "bench_util.h"
#include "cluster/registry.h"
#include "control/store.h"

static void report(const char *name, int64_t *ns, int n) {
  qsort(ns, (size_t)n, sizeof *ns, cmp_i64);
  printf("%-28s n=%-5d p50=%8.1f us  p90=%8.1f us  p99=%8.1f us  max=%8.1f us\n", name, n,
         ns[n / 2] / 1e3, ns[n * 9 / 10] / 1e3, ns[n * 99 / 100] / 1e3, ns[n - 1] / 1e3);
}

static int bench_store(const char *label, const char *where, int n, int nv, int pbytes) {
  vr_store *s;
  vr_errbuf e = {0};
  if (vr_store_open_path(where, &s, &e)) {
    fprintf(stderr, "%s: %s\n", label, e.msg);
    return 1;
  }
  char *profile = malloc((size_t)pbytes + 1);
  /* A JSON object of about pbytes bytes: a latency table as profiles hold. */
  int len = snprintf(profile, (size_t)pbytes + 1, "{\"lat_ms\":[");
  while (len < pbytes - 16) len += snprintf(profile + len, (size_t)(pbytes + 1 - len), "1.2345,");
  snprintf(profile + len - 1, (size_t)(pbytes + 2 - len), "]}");
  vr_variant_rec *v = calloc((size_t)nv, sizeof *v);
  int64_t *add = malloc(sizeof *add * (size_t)n), *del = malloc(sizeof *del * (size_t)n);
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    vr_model_rec m = {0};
    snprintf(m.name, sizeof m.name, "bench%d", i);
    snprintf(m.app, sizeof m.app, "app%d", i % 4);
    snprintf(m.dir, sizeof m.dir, "/repo/bench%d", i);
    m.accuracy = 0.9;
    for (int k = 0; k < nv; k++) {
      snprintf(v[k].model, sizeof v[k].model, "%s", m.name);
      snprintf(v[k].app, sizeof v[k].app, "%s", m.app);
      v[k].precision = (vr_precision)(k % 3);
      v[k].threads = 1 + k / 3;
      v[k].max_batch = 8;
      vr_variant_name(v[k].name, m.name, v[k].precision, v[k].threads, v[k].max_batch);
      v[k].accuracy = 0.9 - 0.001 * k;
      v[k].lat_b1_ms = 1 + k;
      v[k].memory_bytes = 1 << 20;
      v[k].profile_json = profile;
    }
    int64_t t0 = now_ns();
    rc = vr_store_add_model(s, &m, v, (size_t)nv, &e);
    add[i] = now_ns() - t0;
    if (!rc) {
      t0 = now_ns();
      rc = vr_store_remove_model(s, m.name, &e);
      del[i] = now_ns() - t0;
    }
  }
  if (rc) {
    fprintf(stderr, "%s: %s\n", label, e.msg);
  } else {
    char name[64];
    snprintf(name, sizeof name, "%s register", label);
    report(name, add, n);
    snprintf(name, sizeof name, "%s unregister", label);
    report(name, del, n);
  }
  vr_store_close(s);
  free(profile);
  free(v);
  free(add);
  free(del);
  return rc != 0;
}

/* What the subscribers have seen of the version awaited. */
typedef struct prop {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int64_t want;    /* version awaited */
  int seen;        /* subscribers that delivered it */
  int64_t first_ns, last_ns;
} prop;

static void on_routes(void *ctx, const vr_registry_event *ev) {
  prop *p = ctx;
  if (ev->kind != VR_REG_EV_ROUTES || ev->resync) return;
  int64_t t = now_ns();
  pthread_mutex_lock(&p->mu);
  if (ev->version == p->want) {
    if (!p->seen++) p->first_ns = t;
    p->last_ns = t;
    pthread_cond_broadcast(&p->cv);
  }
  pthread_mutex_unlock(&p->mu);
}

static int bench_routes(const char *url, int n, int gap_us, int nsub) {
  vr_registry *r;
  vr_registry_sub **sub = calloc((size_t)nsub, sizeof *sub);
  vr_errbuf e = {0};
  prop p = {.want = -1};
  pthread_mutex_init(&p.mu, NULL);
  pthread_cond_init(&p.cv, NULL);
  int ok = vr_registry_open(url, NULL, &r, &e) == 0;
  for (int i = 0; ok && i < nsub; i++)
    ok = vr_registry_subscribe(url, NULL, on_routes, &p, &sub[i], &e) == 0;
  if (!ok) {
    fprintf(stderr, "routes: %s\n", e.msg);
    return 1;
  }
  /* A routing table as a front end needs it: a few apps over 4 workers. */
  char body[512];
  snprintf(body, sizeof body,
           "{\"fashion\":[{\"worker\":\"w1\",\"instance\":\"i1\",\"weight\":0.5},"
           "{\"worker\":\"w2\",\"instance\":\"i7\",\"weight\":0.5}],"
           "\"digits\":[{\"worker\":\"w3\",\"instance\":\"i2\",\"weight\":1}]}");
  int64_t *lat = malloc(sizeof *lat * (size_t)n), *put = malloc(sizeof *put * (size_t)n);
  int64_t *all = malloc(sizeof *all * (size_t)n);
  int rc = 0;
  int64_t v = 0;
  /* Learn the current version so every put's number is known ahead. */
  char *cur = NULL;
  if (vr_registry_get_routes(r, "bench", &v, &cur, NULL) == 0) vr_free(cur);
  for (int i = 0; i < n && !rc; i++) {
    pthread_mutex_lock(&p.mu);
    p.want = v + 1;
    p.seen = 0;
    pthread_mutex_unlock(&p.mu);
    int64_t t0 = now_ns();
    rc = vr_registry_put_routes(r, "bench", body, v, &v, &e);
    int64_t t1 = now_ns();
    pthread_mutex_lock(&p.mu);
    while (!rc && p.seen < nsub) pthread_cond_wait(&p.cv, &p.mu);
    lat[i] = p.first_ns - t0;
    all[i] = p.last_ns - t0;
    pthread_mutex_unlock(&p.mu);
    put[i] = t1 - t0;
    if (gap_us > 0) usleep((useconds_t)gap_us);
  }
  if (rc) {
    fprintf(stderr, "routes: %s\n", e.msg);
  } else {
    char name[64];
    report("routes put (call)", put, n);
    report("routes put -> callback", lat, n);
    if (nsub > 1) {
      snprintf(name, sizeof name, "routes put -> all %d", nsub);
      report(name, all, n);
    }
  }
  for (int i = 0; i < nsub; i++) vr_registry_unsubscribe(sub[i]);
  free(sub);
  free(all);
  vr_registry_close(r);
  free(lat);
  free(put);
  return rc != 0;
}

int main(int argc, char **argv) {
  const char *redis = NULL, *sqlite = NULL;
  int n = 300, nv = 12, pbytes = 1500, routes = 1000, gap = 1000, nsub = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *a = argv[i], *val = argv[i + 1];
    if (!strcmp(a, "--redis")) redis = val;
    else if (!strcmp(a, "--sqlite")) sqlite = val;
    else if (!strcmp(a, "--n")) n = atoi(val);
    else if (!strcmp(a, "--variants")) nv = atoi(val);
    else if (!strcmp(a, "--profile-bytes")) pbytes = atoi(val);
    else if (!strcmp(a, "--routes")) routes = atoi(val);
    else if (!strcmp(a, "--gap-us")) gap = atoi(val);
    else if (!strcmp(a, "--subscribers")) nsub = atoi(val);
    else if (!strcmp(a, "--skip-store")) n = -n, (void)val;
    else {
      fprintf(stderr, "registry_bench: unknown option '%s'\n", a);
      return 2;
    }
  }
  int skip_store = n < 0;
  if (skip_store) n = -n;
  if (!redis || n < 10 || nsub < 1 || nsub > 256 || nv < 1 || nv > 64 || pbytes < 32 || routes < 10) {
    fprintf(stderr, "usage: registry_bench --redis URL [--sqlite FILE] [--n N>=10] "
                    "[--variants 1..64] [--profile-bytes B>=32] [--routes N>=10] [--gap-us U] [--subscribers 1..256] [--skip-store 1]\n");
    return 2;
  }
  if (!skip_store)
    printf("# %d registrations of 1 model x %d variants (%d-byte profiles)\n", n, nv, pbytes);
  printf("# %d route puts, %d subscriber(s)\n", routes, nsub);
  int rc = 0;
  if (sqlite && !skip_store) rc |= bench_store("sqlite", sqlite, n, nv, pbytes);
  if (!skip_store) rc |= bench_store("redis", redis, n, nv, pbytes);
  rc |= bench_routes(redis, routes, gap, nsub);
  return rc;
}
