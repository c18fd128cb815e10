/*
 * vario cluster --registry URL workers | instances WORKER | routes TABLE
 *                           | put-routes TABLE FILE|- [--expect V]
 *                           | watch [--count N] [--duration S]
 * Looks at (and, for routing tables, writes) the cluster registry in Redis
 * (src/cluster/registry.h): what the controller, workers and front ends
 * share. For operators and demos; the roles themselves use the C API.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "cli/commands.h"
#include "cluster/registry.h"

/* 0 when the registry lists worker id as live: a mistyped or gone worker
 * is an error (exit 1), not an empty table of instances. */
static int live_worker(vr_registry *r, const char *id, vr_errbuf *e) {
  vr_worker_info *w;
  size_t n;
  int rc = vr_registry_workers(r, &w, &n, e), found = 0;
  if (rc) return rc;
  for (size_t i = 0; i < n && !found; i++) found = !strcmp(w[i].id, id);
  vr_free(w);
  return found ? 0 : vr_errf(e, VR_ENOENT, "no live worker '%s' in the registry", id);
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: vario cluster --registry URL workers\n"
          "       vario cluster --registry URL instances WORKER\n"
          "       vario cluster --registry URL routes TABLE\n"
          "       vario cluster --registry URL put-routes TABLE FILE|- [--expect VERSION]\n"
          "       vario cluster --registry URL watch [--count N] [--duration S]\n"
          "  --registry URL  redis://[[user]:password@]host[:port][/db] (as vario\n"
          "                controller/worker/frontend; --redis is an old spelling)\n"
          "  workers       live workers: id, address, cores, memory, heartbeat age, lease left\n"
          "  instances     a worker's instances\n"
          "  routes        a routing table's version and body\n"
          "  put-routes    store a routing table (body from FILE or stdin) and announce it;\n"
          "                --expect: only if the stored version is VERSION\n"
          "  watch         print changes as they are announced (N events / S seconds;\n"
          "                --seconds is an old spelling of --duration)\n");
}

static char *read_all(FILE *f) {
  size_t cap = 4096, n = 0;
  char *b = vr_malloc(cap);
  while (b) {
    n += fread(b + n, 1, cap - n - 1, f);
    if (n < cap - 1) break;
    char *g = cap < (64u << 20) ? vr_realloc(b, cap * 2) : NULL;
    if (!g) {
      vr_free(b);
      return NULL;
    }
    b = g;
    cap *= 2;
  }
  if (b) b[n] = 0;
  return b;
}

typedef struct watch {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  long count, want;
} watch;

static void on_event(void *ctx, const vr_registry_event *ev) {
  watch *w = ctx;
  switch (ev->kind) {
    case VR_REG_EV_CONNECTED:
      printf("connected (reconnects %" PRId64 ")\n", ev->version);
      break;
    case VR_REG_EV_ROUTES:
      printf("routes %s v%" PRId64 "%s%s %s\n", ev->table, ev->version,
             ev->resync ? " (current)" : "", ev->reset ? " (store restarted)" : "", ev->body);
      break;
    case VR_REG_EV_WORKER_UP: printf("worker up %s\n", ev->worker); break;
    case VR_REG_EV_WORKER_DOWN: printf("worker down %s\n", ev->worker); break;
    case VR_REG_EV_INSTANCES: printf("instances %s\n", ev->worker); break;
  }
  fflush(stdout);
  pthread_mutex_lock(&w->mu);
  if (ev->kind != VR_REG_EV_CONNECTED) w->count++;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static int do_watch(const char *url, long count, long seconds) {
  watch w = {.want = count};
  pthread_mutex_init(&w.mu, NULL);
  pthread_cond_init(&w.cv, NULL);
  vr_registry_sub *s;
  vr_errbuf e = {0};
  if (vr_registry_subscribe(url, NULL, on_event, &w, &s, &e)) {
    fprintf(stderr, "vario cluster: %s\n", e.msg);
    return 1;
  }
  struct timespec end;
  clock_gettime(CLOCK_REALTIME, &end);
  end.tv_sec += seconds;
  pthread_mutex_lock(&w.mu);
  while (count <= 0 || w.count < w.want)
    if (pthread_cond_timedwait(&w.cv, &w.mu, &end)) break;
  pthread_mutex_unlock(&w.mu);
  vr_registry_unsubscribe(s);
  return 0;
}

int vr_cmd_cluster(int argc, char **argv) {
  const char *url = NULL, *pos[3] = {0};
  long long expect = -1, count = 0, seconds = 3600;
  int npos = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    }
    int bad = 0;
    if (!strcmp(a, "--registry") || !strcmp(a, "--redis")) bad = !(url = v);
    else if (!strcmp(a, "--expect")) bad = vr__cli_parse_ll(v, 0, 0x7fffffffffffffffL, &expect);
    else if (!strcmp(a, "--count")) bad = vr__cli_parse_ll(v, 1, 1000000000L, &count);
    else if (!strcmp(a, "--duration") || !strcmp(a, "--seconds"))
      bad = vr__cli_parse_ll(v, 1, 100000000L, &seconds);
    else if (a[0] == '-' && a[1]) bad = 1;
    else if (npos < 3) {
      pos[npos++] = a;
      continue;
    } else {
      bad = 1;
    }
    if (bad) {
      fprintf(stderr, "vario cluster: bad or incomplete option '%s'\n", a);
      usage(stderr);
      return 2;
    }
    i++;
  }
  const char *cmd = pos[0];
  int want = !cmd ? -1
             : !strcmp(cmd, "workers") || !strcmp(cmd, "watch") ? 1
             : !strcmp(cmd, "instances") || !strcmp(cmd, "routes") ? 2
             : !strcmp(cmd, "put-routes") ? 3 : -1;
  if (!url || want != npos) {
    fprintf(stderr, "vario cluster: %s\n", !url ? "--registry URL is required" : "bad command");
    usage(stderr);
    return 2;
  }
  vr_errbuf e = {0};
  vr_redis_url u;
  if (vr_redis_url_parse(url, &u, &e)) {
    fprintf(stderr, "vario cluster: %s\n", e.msg);
    return 2;
  }
  if (!strcmp(cmd, "watch")) return do_watch(url, count, seconds);
  vr_registry *r;
  if (vr_registry_open(url, NULL, &r, &e)) {
    fprintf(stderr, "vario cluster: %s\n", e.msg);
    return 1;
  }
  int rc = 0;
  if (!strcmp(cmd, "workers")) {
    vr_worker_info *w;
    size_t n;
    rc = vr_registry_workers(r, &w, &n, &e);
    if (!rc) {
      printf("%-24s %-22s %5s %10s %9s %9s  %s\n", "worker", "address", "cores", "memory_mb",
             "hb_age_ms", "lease_ms", "meta");
      int64_t now_ms = 0;
      for (size_t i = 0; i < n; i++)
        if (w[i].heartbeat_ms > now_ms) now_ms = w[i].heartbeat_ms; /* Redis clock */
      for (size_t i = 0; i < n; i++)
        printf("%-24s %-22s %5d %10" PRId64 " %9" PRId64 " %9" PRId64 "  %s\n", w[i].id,
               w[i].addr, w[i].cores, w[i].memory_bytes >> 20, now_ms - w[i].heartbeat_ms,
               w[i].lease_left_ms, w[i].meta);
      vr_free(w);
    }
  } else if (!strcmp(cmd, "instances")) {
    vr_instance_info *v;
    size_t n;
    rc = live_worker(r, pos[1], &e);
    if (!rc) rc = vr_registry_instances(r, pos[1], &v, &n, &e);
    if (!rc) {
      printf("%-24s %-40s %-10s %5s %5s %9s %9s %6s %9s %8s %6s\n", "instance", "variant",
             "state", "cores", "batch", "in/s", "out/s", "queue", "p50@1 ms", "slowdown",
             "shadow");
      for (size_t i = 0; i < n; i++)
        printf("%-24s %-40s %-10s %5d %5d %9.1f %9.1f %6d %9.3f %8.2f %6s\n", v[i].id,
               v[i].variant, v[i].state, v[i].cores, v[i].max_batch, v[i].arrival_qps,
               v[i].served_qps, v[i].queue, v[i].nlat > 0 ? v[i].p50_ms[0] : 0.0,
               v[i].slowdown, !v[i].body ? "-" : v[i].shadow_cores > 0 ? "yes" : "no");
      vr_free(v);
    }
  } else if (!strcmp(cmd, "routes")) {
    int64_t ver;
    char *body;
    rc = vr_registry_get_routes(r, pos[1], &ver, &body, &e);
    if (!rc) printf("version %" PRId64 "\n%s\n", ver, body);
    vr_free(body);
  } else {
    FILE *f = strcmp(pos[2], "-") ? fopen(pos[2], "rb") : stdin;
    char *body = f ? read_all(f) : NULL;
    if (f && f != stdin) fclose(f);
    int64_t ver = 0;
    rc = body ? vr_registry_put_routes(r, pos[1], body, expect, &ver, &e)
              : vr_errf(&e, VR_EIO, "cannot read '%s'", pos[2]);
    if (!rc) printf("version %" PRId64 "\n", ver);
    vr_free(body);
  }
  if (rc) fprintf(stderr, "vario cluster: %s\n", e.msg);
  vr_registry_close(r);
  return rc ? 1 : 0;
}
