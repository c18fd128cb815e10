/*
 * vario worker [serve options] [--worker-id ID] [--registry URL]
 *              [--controller URL] [--advertise HOST] [--cores LIST]
 *              [--mem-bytes N] [--heartbeat-ms N] [--port-file F]
 * A worker of a cluster (issue 18): the runtime and the KServe v2 HTTP
 * server of `vario serve` (same code, same options; no gRPC port unless
 * asked), plus membership: with --registry it registers in Redis
 * (cluster/registry.h) with a lease of two heartbeats, heartbeats, and
 * publishes the models it has loaded, so the controller can place models
 * on it and front ends can route to it. With --controller, a model it is
 * told to load and does not have is fetched from the controller
 * (server/model_fetch.h): no shared filesystem needed. A worker that runs
 * pipelines also subscribes to routing changes (vario:routes), so the
 * controller's table "main" and its pipeline plans are followed as soon
 * as they are published; the heartbeat re-reads them as a fallback.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/cpus.h"
#include "base/clock.h"
#include "base/log.h"
#include "cli/commands.h"
#include "cli/serve_role.h"
#include "cli/worker_pipes.h"
#include "cluster/registry.h"
#include "control/fsutil.h"
#include "runtime/slowdown.h"
#include "server/model_fetch.h"

#define MAX_MODELS 256
/* batches a heartbeat needs before its slowdown counts (fewer: noise) */
#define SLOW_MIN_BATCHES 10

typedef struct worker_role {
  const char *id;
  const char *port_file;
  const char *registry;
  const char *controller; /* http://host:port */
  const char *advertise;
  const char *cores_list;
  long long mem_bytes;
  int heartbeat_ms;
  int ncores;
  char ctl_host[64];
  int ctl_port;
  char host[64];
  char token[512]; /* the admin token: also what the controller asks for */
  /* running */
  vr_server *s;
  vr_registry *reg;
  vr_worker_info info;
  int registered;
  pthread_t hb;
  int hb_started;
  int stop;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  char last[MAX_MODELS * 8]; /* the model list last published */
  /* arrival counting between heartbeats: per model, rows seen so far */
  char seen_name[MAX_MODELS][64];
  double seen_rows[MAX_MODELS];
  vr_slowdown slow[MAX_MODELS]; /* per model, as seen_name: compute vs its profile */
  int n_seen;
  int64_t seen_ns;
  /* pipelines under the controller's plan (worker_pipes.h) */
  worker_pipes wp;
  int wp_on;
  /* routing changes announced through Redis: wake the heartbeat thread
   * to follow them at once (under mu) */
  vr_registry_sub *sub; /* set by the heartbeat thread (under mu) */
  int sub_warned;
  int tables_pending;
} worker_role;

static int parse_url(const char *url, char *host, size_t cap, int *port) {
  const char *p = url;
  if (!strncmp(p, "http://", 7)) p += 7;
  const char *colon = strrchr(p, ':');
  if (!colon || (size_t)(colon - p) >= cap || colon == p) return -1;
  memcpy(host, p, (size_t)(colon - p));
  host[colon - p] = 0;
  char *end;
  long v = strtol(colon + 1, &end, 10);
  if ((*end && *end != '/') || v < 1 || v > 65535) return -1;
  *port = (int)v;
  return 0;
}

/* "0,2-3" -> 3 (a core listed twice counts once); -1 when malformed or
 * past CPU 4095. */
static int count_cores(const char *s) {
  enum { MAXC = 4096 };
  unsigned char seen[MAXC] = {0};
  int n = 0;
  while (*s) {
    char *end;
    errno = 0;
    long a = *s >= '0' && *s <= '9' ? strtol(s, &end, 10) : -1, b = a;
    if (a < 0 || a >= MAXC || errno) return -1;
    if (*end == '-') {
      const char *t = end + 1;
      b = *t >= '0' && *t <= '9' ? strtol(t, &end, 10) : -1;
      if (b < a || b >= MAXC || errno) return -1;
    }
    for (long c = a; c <= b; c++) n += !seen[c], seen[c] = 1;
    if (*end == ',') end++;
    else if (*end) return -1;
    s = end;
  }
  return n;
}

static int w_arg(void *self, int argc, char **argv, int i) {
  worker_role *w = self;
  const char *a = argv[i];
  static const char *const opts[] = {"--id", "--worker-id", "--port-file", "--registry",
                                     "--controller", "--advertise", "--cores",
                                     "--mem-bytes", "--heartbeat-ms"};
  int k = 0;
  while (k < 9 && strcmp(a, opts[k])) k++;
  if (k == 9) return 0;
  if (i + 1 >= argc || !argv[i + 1][0]) return -1;
  const char *v = argv[i + 1];
  switch (k) {
  case 0: case 1:
    if (!vr_registry_valid_id(v)) return -1;
    w->id = v;
    break;
  case 2: w->port_file = v; break;
  case 3: w->registry = v; break;
  case 4:
    if (parse_url(v, w->ctl_host, sizeof w->ctl_host, &w->ctl_port)) return -1;
    w->controller = v;
    break;
  case 5:
    if (strlen(v) >= sizeof w->host) return -1;
    w->advertise = v;
    break;
  case 6:
    if ((w->ncores = count_cores(v)) < 1) return -1;
    w->cores_list = v;
    break;
  case 7: {
    long long x;
    if (vr__cli_parse_ll(v, 0, LLONG_MAX, &x)) return -1;
    w->mem_bytes = x;
    break;
  }
  case 8:
    if (vr__cli_parse_int(v, 10, 600000, &w->heartbeat_ms)) return -1;
    break;
  }
  return 2;
}

static void w_usage(FILE *f) {
  fprintf(f,
          "usage: vario worker [--worker-id ID] [--registry URL] [--controller URL]\n"
          "                    [--advertise HOST] [--cores LIST] [--mem-bytes N]\n"
          "                    [--heartbeat-ms N] [--port-file F] SERVE-OPTIONS\n"
          "  --worker-id ID   name in the cluster (default worker-PORT); --id too\n"
          "  --registry URL   redis://HOST:PORT: register, heartbeat, publish the\n"
          "                   loaded models (lease: two heartbeats)\n"
          "  --controller URL http://HOST:PORT: fetch models missing from --repo\n"
          "                   (created if it does not exist)\n"
          "  --advertise HOST address others reach this worker by (default --host)\n"
          "  --cores LIST     cores it runs on (\"0,2-3\"; the local provider pins\n"
          "                   them); their count is what its control plane fills\n"
          "  --mem-bytes N    memory it registers\n"
          "  --heartbeat-ms N heartbeat period (default 1000)\n"
          "  --port-file F    write the bound HTTP port to F once listening\n"
          "  (gRPC is off unless --grpc-port is given)\n\n");
}

static int w_fetch(void *user, const char *repo, const char *name, vr_errbuf *err) {
  worker_role *w = user;
  if (!w->controller) return 0; /* nothing to fetch from: the load says why */
  const char *tok = w->token[0] ? w->token : getenv("VARIO_ADMIN_TOKEN");
  int rc = vr_model_fetch(w->ctl_host, w->ctl_port, tok && *tok ? tok : NULL, repo,
                          name, err);
  if (!rc) vr_info("fetched model '%s' from the controller %s", name, w->controller);
  return rc == VR_EEXIST ? 0 : rc;
}

static void w_defaults(void *self, vr_server_opts *o, int *grpc_port, int *grpc_set) {
  worker_role *w = self;
  *grpc_port = -1;
  *grpc_set = 1;
  o->fetch = w_fetch;
  o->fetch_user = w;
}

/* Rows a model has seen so far (served, dropped, queued, running): its
 * arrivals are the difference between two heartbeats. */
static double rows_seen(const vr_rt_instance_stats *st, int n, const char *model) {
  double r = 0;
  for (int i = 0; i < n; i++)
    if (!strcmp(st[i].model, model))
      r += (double)st[i].served + (double)st[i].dropped_rows + st[i].queue_rows + st[i].busy_rows;
  return r;
}

/* A model's load for the controller's policies (registry.h): arrivals
 * and completions per second, rows queued, the latency its first
 * instance measured at load, its compute time against that profile
 * (runtime/slowdown.h: what INFaaS's interference rule reads); whether it
 * is an AsyFunc body, and its shadow's cores. */
static void model_load(worker_role *w, const vr_rt_instance_stats *st, int n, double dt,
                       const char *model, vr_instance_info *x) {
  int first = 1;
  for (int i = 0; i < n; i++) {
    if (strcmp(st[i].model, model)) continue;
    x->served_qps += st[i].served_qps;
    x->queue += st[i].queue_rows;
    x->body |= st[i].body != 0; /* AsyFunc: splittable, and its shadow */
    x->shadow_cores += st[i].shadow_threads > 0 ? st[i].shadow_threads : 0;
    for (int b = 0; first && b < VR_REG_NLAT && st[i].profile.p50_ms[b] > 0; b++) {
      x->p50_ms[b] = st[i].profile.p50_ms[b];
      x->p99_ms[b] = st[i].profile.p99_ms[b] > 0 ? st[i].profile.p99_ms[b]
                                                 : st[i].profile.p50_ms[b];
      x->nlat = b + 1;
    }
    first = 0;
  }
  double now = rows_seen(st, n, model);
  int k = 0;
  while (k < w->n_seen && strcmp(w->seen_name[k], model)) k++;
  if (k == w->n_seen && k < MAX_MODELS) {
    snprintf(w->seen_name[k], sizeof w->seen_name[k], "%s", model);
    w->seen_rows[k] = now;
    memset(&w->slow[k], 0, sizeof w->slow[k]);
    vr_slowdown_update(&w->slow[k], vr_server_runtime(w->s), model, st, n, SLOW_MIN_BATCHES);
    w->n_seen++;
  } else if (k < MAX_MODELS) {
    double d = now - w->seen_rows[k];
    x->arrival_qps = d > 0 && dt > 0 ? d / dt : 0; /* < 0: reloaded, counts restarted */
    w->seen_rows[k] = now;
    x->slowdown =
        vr_slowdown_update(&w->slow[k], vr_server_runtime(w->s), model, st, n, SLOW_MIN_BATCHES);
  }
}

/* The loaded models as a sorted, comma-joined list, and as instances with
 * their load. */
static int loaded(worker_role *w, vr_instance_info *inst, vr_rt_instance_stats *st, char *list,
                  size_t cap) {
  vr_runtime *rt = vr_server_runtime(w->s);
  char *names[MAX_MODELS];
  int n = vr_rt_model_names(rt, names, MAX_MODELS);
  if (n > MAX_MODELS) n = MAX_MODELS;
  int ns = st ? vr_rt_instances(rt, NULL, st, MAX_MODELS) : 0;
  if (ns > MAX_MODELS) ns = MAX_MODELS;
  int64_t t = vr_now_ns();
  double dt = w->seen_ns ? (double)(t - w->seen_ns) / 1e9 : 0;
  w->seen_ns = t;
  for (int i = 1; i < n; i++) /* insertion sort: a few names */
    for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
      char *tmp = names[j];
      names[j] = names[j - 1];
      names[j - 1] = tmp;
    }
  size_t off = 0;
  list[0] = 0;
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (vr_rt_model_ready(rt, names[i])) {
      memset(&inst[k], 0, sizeof inst[k]);
      snprintf(inst[k].id, sizeof inst[k].id, "%.63s", names[i]);
      snprintf(inst[k].variant, sizeof inst[k].variant, "%s", names[i]);
      snprintf(inst[k].state, sizeof inst[k].state, "ready");
      vr_model_config c;
      if (!vr_rt_model_config(rt, names[i], &c)) {
        inst[k].cores = c.threads > 0 ? c.threads : 1;
        inst[k].max_batch = c.max_batch_size;
      }
      if (st) model_load(w, st, ns, dt, names[i], &inst[k]);
      int wr = snprintf(list + off, cap - off, "%s%s", k ? "," : "", names[i]);
      if (wr > 0 && (size_t)wr < cap - off) off += (size_t)wr;
      k++;
    }
    vr_free(names[i]);
  }
  return k;
}

/* Until the next heartbeat (ts) or stop; a routing change announced
 * meanwhile is followed at once. Called and returns with mu held. */
static void wait_beat(worker_role *w, const struct timespec *ts) {
  while (!w->stop) {
    if (w->tables_pending) {
      w->tables_pending = 0;
      pthread_mutex_unlock(&w->mu);
      if (w->registered && w->wp_on) wp_sync_now(&w->wp);
      pthread_mutex_lock(&w->mu);
      continue;
    }
    if (pthread_cond_timedwait(&w->cv, &w->mu, ts) == ETIMEDOUT) return;
  }
}

/* Subscription thread: the tables a worker follows (worker_pipes.h), and
 * a reconnect (announcements may have been missed meanwhile). */
static void on_registry(void *ctx, const vr_registry_event *ev) {
  worker_role *w = ctx;
  int want = ev->kind == VR_REG_EV_ROUTES
                 ? !ev->resync && (!strcmp(ev->table, "main") || !strncmp(ev->table, "pipe.", 5))
                 : ev->kind == VR_REG_EV_CONNECTED && ev->version > 0;
  if (!want) return;
  pthread_mutex_lock(&w->mu);
  w->tables_pending = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* The subscription, from the heartbeat thread while Redis answers (so a
 * registry down at start-up is subscribed to once it is back); without
 * it every change is still followed, a heartbeat later. */
static void subscribe(worker_role *w) {
  vr_errbuf err = {0};
  vr_registry_sub *sub = NULL;
  if (vr_registry_subscribe(w->registry, NULL, on_registry, w, &sub, &err)) {
    if (!w->sub_warned++)
      vr_warn("worker %s: no subscription to routing changes yet (%s): following them "
              "every heartbeat", w->info.id, err.msg);
    return;
  }
  vr_info("worker %s: following routing changes through the registry", w->info.id);
  pthread_mutex_lock(&w->mu);
  w->sub = sub;
  w->tables_pending = 1; /* what changed before the subscription */
  pthread_mutex_unlock(&w->mu);
}

static void *hb_main(void *arg) {
  worker_role *w = arg;
  vr_instance_info *inst = vr_calloc(MAX_MODELS, sizeof *inst);
  vr_instance_info *prev = vr_calloc(MAX_MODELS, sizeof *prev); /* as last put */
  int nprev = -1;
  vr_rt_instance_stats *st = vr_calloc(MAX_MODELS, sizeof *st);
  char list[sizeof w->last];
  int warned = 0;
  pthread_mutex_lock(&w->mu);
  while (!w->stop) {
    pthread_mutex_unlock(&w->mu);
    vr_errbuf err = {0};
    int rc = 0, recreated = 0;
    if (!w->registered) {
      rc = vr_registry_worker_register(w->reg, &w->info, 2 * w->heartbeat_ms, &err);
      if (!rc) {
        w->registered = 1;
        recreated = 1;
        vr_info("worker %s registered at %s", w->info.id, w->info.addr);
      }
    } else {
      rc = vr_registry_worker_heartbeat(w->reg, w->info.id, &recreated, &err);
    }
    int n = inst ? loaded(w, inst, st, list, sizeof list) : 0;
    /* whenever the list or its load changed (the load is what the
     * controller's policies read; records are memset, so memcmp is exact) */
    int same = prev && n == nprev && !memcmp(inst, prev, (size_t)n * sizeof *inst);
    if (!rc && inst && (recreated || !same || !prev)) {
      rc = vr_registry_put_instances(w->reg, w->info.id, inst, (size_t)n, &err);
      if (!rc) snprintf(w->last, sizeof w->last, "%s", list);
      if (!rc && prev) memcpy(prev, inst, (size_t)n * sizeof *inst), nprev = n;
    }
    if (!rc && w->wp_on) wp_sync(&w->wp);
    if (!rc && w->wp_on && !w->sub) subscribe(w);
    if (rc && !warned) vr_warn("worker %s: registry: %s (retrying)", w->info.id, err.msg);
    if (!rc && warned) vr_info("worker %s: registry reachable again", w->info.id);
    warned = rc != 0;
    pthread_mutex_lock(&w->mu);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (int64_t)w->heartbeat_ms * 1000000;
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    wait_beat(w, &ts);
  }
  pthread_mutex_unlock(&w->mu);
  vr_free(st);
  vr_free(prev);
  vr_free(inst);
  return NULL;
}

static int w_start(void *self, vr_server *s, vr_errbuf *err) {
  worker_role *w = self;
  w->s = s;
  int port = vr_server_port(s);
  if (w->port_file && vr__cli_write_port_file(w->port_file, port))
    return vr_errf(err, VR_EIO, "--port-file %s: cannot write it", w->port_file);
  if (!w->registry) return 0;
  int rc = vr_registry_open(w->registry, NULL, &w->reg, err);
  if (rc) return rc;
  vr_worker_info *i = &w->info;
  memset(i, 0, sizeof *i);
  if (w->id) snprintf(i->id, sizeof i->id, "%s", w->id);
  else snprintf(i->id, sizeof i->id, "worker-%d", port);
  snprintf(i->addr, sizeof i->addr, "%s:%d", w->advertise ? w->advertise : w->host, port);
  /* without --cores: what this process may use (a pod's CPU limit), not
   * the node's count */
  i->cores = w->ncores > 0 ? w->ncores : vr_cpus_usable(NULL);
  i->memory_bytes = w->mem_bytes;
  snprintf(i->meta, sizeof i->meta, "{\"pid\":%ld,\"cores\":\"%s\",\"apps\":%d}",
           (long)getpid(), w->cores_list ? w->cores_list : "", vr_server_has_control(s));
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  if (vr_server_get_pipes(s))
    w->wp_on = !wp_init(&w->wp, w->reg, vr_server_get_pipes(s), i->id);
  if (pthread_create(&w->hb, NULL, hb_main, w)) {
    vr_registry_close(w->reg);
    w->reg = NULL;
    return vr_errf(err, VR_EINTERNAL, "cannot start the heartbeat thread");
  }
  w->hb_started = 1;
  return 0;
}

/* On SIGTERM: leave the cluster first (front ends stop routing here at
 * the next table), then the server drains what it accepted. */
static void w_stop(void *self) {
  worker_role *w = self;
  if (!w->hb_started) return;
  pthread_mutex_lock(&w->mu);
  w->stop = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->hb, NULL);
  if (w->sub) vr_registry_unsubscribe(w->sub); /* its callback takes mu: before it goes */
  w->sub = NULL;
  if (w->wp_on) wp_stop(&w->wp);
  vr_errbuf err = {0};
  if (w->registered && vr_registry_worker_deregister(w->reg, w->info.id, &err))
    vr_warn("worker %s: deregister: %s", w->info.id, err.msg);
  vr_registry_close(w->reg);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
}

int vr_cmd_worker(int argc, char **argv) {
  worker_role w = {0};
  w.heartbeat_ms = 1000;
  snprintf(w.host, sizeof w.host, "127.0.0.1");
  const char *repo = NULL;
  int fetch = 0;
  for (int i = 1; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "--repo")) repo = argv[i + 1];
    if (!strcmp(argv[i], "--controller")) fetch = 1;
    if (!strcmp(argv[i], "--host") && strlen(argv[i + 1]) < sizeof w.host)
      snprintf(w.host, sizeof w.host, "%s", argv[i + 1]);
    if (!strcmp(argv[i], "--admin-token-file")) { /* serve reads it too */
      FILE *f = fopen(argv[i + 1], "r");
      if (f && fgets(w.token, sizeof w.token, f)) w.token[strcspn(w.token, "\r\n \t")] = 0;
      if (f) fclose(f);
    }
  }
  /* A worker that fetches its models may start from nothing: its
   * repository is where the fetched models go. */
  vr_errbuf err = {0};
  if (fetch && repo && !vr_path_exists(repo)) {
    if (vr_mkdirs(repo, &err)) {
      fprintf(stderr, "vario worker: --repo %s: %s\n", repo, err.msg);
      return 1;
    }
    vr_info("created the repository %s for the models fetched from the controller", repo);
  }
  vr_cli_role role = {"vario worker", &w, w_arg, w_usage, w_defaults, w_start, w_stop, 0};
  role.cores = &w.ncores;
  role.jobs_dir_name = &w.id; /* given by --worker-id (the default depends on the port) */
  return vr_cli_serve(argc, argv, &role);
}
