/*
 * Cluster registry: the shared state of a multi-process Vario in Redis —
 * live workers (each with a lease), the instances each worker runs, and
 * versioned routing tables — plus a subscription that announces changes.
 *
 * Who uses what (issue 18):
 *   - a worker registers itself (vr_registry_worker_register), refreshes
 *     its lease every heartbeat (vr_registry_worker_heartbeat, well inside
 *     lease_ms, e.g. lease / 3), publishes its instance list
 *     (vr_registry_put_instances) and subscribes to routing changes;
 *   - the controller lists live workers (vr_registry_workers: a worker that
 *     stopped heartbeating is gone once its lease ends), reads instances,
 *     and writes routing tables (vr_registry_put_routes);
 *   - front ends read routing tables at start (vr_registry_get_routes) and
 *     then follow them through a subscription (vr_registry_subscribe).
 * Registered apps, models, variants, profiles and pipelines are NOT here:
 * they are the metadata store's (control/store.h, `--store redis://...`),
 * which may share the same Redis.
 *
 * Redis keys (prefix "vario:"; see docs/ARCHITECTURE.md):
 *   vario:workers                   SET of worker ids (pruned of expired ones)
 *   vario:worker:<id>               HASH addr cores memory_bytes meta owner
 *                                   registered_ms heartbeat_ms lease_ms; PEXPIRE = lease
 *   vario:worker:<id>:instances     HASH instance id -> JSON; same lease
 *   vario:deregistered              ZSET worker id -> end of its tombstone
 *                                   (ms): deregistered within a lease, not
 *                                   registered again; PEXPIREAT = the last
 *   vario:routes                    SET of routing-table names
 *   vario:routes:<table>            HASH version body
 * Channels:
 *   vario:routes    "<table> <version>\n<body>" on every routing change
 *   vario:workers   "up <id>", "down <id>", "instances <id>"
 *
 * Versions: a table's version only grows, also across a Redis that lost its
 * data: a handle passes the highest version it has seen as a floor, so a
 * subscriber can ignore anything not newer than what it holds.
 *
 * Redis restarts: every call reconnects with exponential backoff
 * (cluster/redis.h); a heartbeat that finds its worker gone (lease ended,
 * or Redis lost it) re-creates it, and its last instance list, from what
 * this handle registered. A subscription reconnects on its own and then
 * re-reads every routing table, delivering those newer than it delivered.
 *
 * Ownership and threads: a vr_registry is thread-safe (its calls are
 * serialised on one connection). Arrays returned through out-parameters
 * belong to the caller (vr_free). A subscription owns a thread and two
 * connections; its callback runs on that thread, one event at a time, and
 * must not call vr_registry_unsubscribe on its own subscription.
 */
#ifndef VR_CLUSTER_REGISTRY_H
#define VR_CLUSTER_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/redis.h"
#include "vario/status.h"

#define VR_REG_ID_MAX 64     /* worker, instance and table names */
#define VR_REG_ADDR_MAX 256
#define VR_REG_META_MAX 1024
#define VR_REG_VARIANT_MAX 192 /* = VR_STORE_VNAME_MAX */
#define VR_REG_STATE_MAX 16

typedef struct vr_registry vr_registry;

/* url: redis://host[:port][/db]; o may be NULL (vr_redis_opts_default). */
int vr_registry_open(const char *url, const vr_redis_opts *o, vr_registry **out,
                     vr_errbuf *err);
void vr_registry_close(vr_registry *r);
/* The connection (e.g. for vr_redis_reconnects). Owned by r. */
vr_redis *vr_registry_redis(vr_registry *r);

/* 1 when s is a valid id: 1..63 bytes of [A-Za-z0-9._-]. */
int vr_registry_valid_id(const char *s);

/* ---- workers --------------------------------------------------------------- */

typedef struct vr_worker_info {
  char id[VR_REG_ID_MAX];     /* unique in the cluster (vr_registry_valid_id) */
  char addr[VR_REG_ADDR_MAX]; /* where its data path listens, "host:port" */
  int cores;
  int64_t memory_bytes;
  char meta[VR_REG_META_MAX]; /* free text (JSON): provider, pid, core set */
  /* Filled on reads (Redis server clock, ms since the epoch): */
  int64_t registered_ms;
  int64_t heartbeat_ms;
  int64_t lease_left_ms; /* time to live at the read */
  int64_t lease_ms;      /* the lease it registered with */
} vr_worker_info;

/* Registers (or re-registers) worker w->id with a lease of lease_ms
 * (>= 10). VR_EEXIST when another handle holds a live lease on the id. */
int vr_registry_worker_register(vr_registry *r, const vr_worker_info *w, int lease_ms,
                                vr_errbuf *err);
/* Refreshes the lease of a worker this handle registered (VR_ENOENT for
 * one it did not). If the lease had ended or Redis lost the worker, it is
 * registered again with its last instances and *recreated (may be NULL)
 * is set to 1. */
int vr_registry_worker_heartbeat(vr_registry *r, const char *id, int *recreated,
                                 vr_errbuf *err);
/* Removes the worker and its instances now (announced "down <id>") and
 * leaves a tombstone for its lease (vr_registry_workers_left), also when
 * Redis had lost the worker (then with the lease this handle registered). */
int vr_registry_worker_deregister(vr_registry *r, const char *id, vr_errbuf *err);
/* Live workers, by id. *out (vr_free) may be NULL when *n is 0. Workers
 * whose lease ended are dropped from vario:workers here (announced
 * "down <id>"). */
int vr_registry_workers(vr_registry *r, vr_worker_info **out, size_t *n, vr_errbuf *err);

/* A worker that deregistered: its tombstone lasts its lease. */
typedef struct vr_worker_left {
  char id[VR_REG_ID_MAX];
} vr_worker_left;

/* vr_registry_workers, and in the same read the workers that deregistered
 * within their lease and have not registered again since (*left, vr_free;
 * may be NULL when *nleft is 0; left NULL: not wanted). A worker missing
 * from the listing may be alive and not yet registered again (Redis lost
 * it, or paused past its lease); one in *left is gone for good. */
int vr_registry_workers_left(vr_registry *r, vr_worker_info **out, size_t *n,
                             vr_worker_left **left, size_t *nleft, vr_errbuf *err);

/* ---- instances ------------------------------------------------------------- */

#define VR_REG_NLAT 7

typedef struct vr_instance_info {
  char id[VR_REG_ID_MAX];            /* unique on its worker */
  char variant[VR_REG_VARIANT_MAX];  /* store variant name */
  char state[VR_REG_STATE_MAX];      /* "loading", "ready", "draining", ... */
  int cores;
  int max_batch;
  /* Load as the worker measured it (all 0 = not reported): what the
   * controller's policies read (src/cli/ctl_policy.h). Rates over the
   * worker's last heartbeat; latency per batch slot (1, 2, 4, ... 64)
   * from the profile measured at load, nlat slots (0 = none). */
  double arrival_qps, served_qps;
  int queue;
  int nlat;
  double p50_ms[VR_REG_NLAT], p99_ms[VR_REG_NLAT];
  /* Compute time over the heartbeat / the instance's at-load profile,
   * against the worker's first measured window (runtime/slowdown.h):
   * INFaaS's interference signal. 0 = not measured yet. */
  double slowdown;
  /* AsyFunc: the model's instance on this worker is a body (loaded
   * splittable: a shadow can pair with it) and the cores of its shadow
   * now (0 = none). Omitted from the record when 0. */
  int body, shadow_cores;
} vr_instance_info;

/* Replaces worker's instance list atomically (n may be 0). VR_ENOENT when
 * the worker is not live. */
int vr_registry_put_instances(vr_registry *r, const char *worker, const vr_instance_info *v,
                              size_t n, vr_errbuf *err);
/* A worker's instances, by id; *out (vr_free) may be NULL when *n is 0.
 * VR_ENOENT when the worker is not live (read in one step with the list:
 * a worker listed earlier whose lease ended since is not one that holds
 * nothing). */
int vr_registry_instances(vr_registry *r, const char *worker, vr_instance_info **out,
                          size_t *n, vr_errbuf *err);

/* ---- routing tables -------------------------------------------------------- */

/* Stores routing table `table` (an id) with body text (the format is the
 * writer's; JSON in Vario) under the next version, and publishes it.
 * expect_version >= 0 makes it a compare-and-set: VR_ESTATE (and
 * *version_out = the current version) when the stored version differs;
 * -1 writes unconditionally. version_out may be NULL. */
int vr_registry_put_routes(vr_registry *r, const char *table, const char *body,
                           int64_t expect_version, int64_t *version_out, vr_errbuf *err);
/* The current table: *body (vr_free) and *version. VR_ENOENT if none. */
int vr_registry_get_routes(vr_registry *r, const char *table, int64_t *version, char **body,
                           vr_errbuf *err);

/* ---- subscription ---------------------------------------------------------- */

typedef enum vr_registry_ev_kind {
  VR_REG_EV_CONNECTED = 0, /* (re)subscribed; `version` = reconnect count */
  VR_REG_EV_ROUTES,        /* table, version, body */
  VR_REG_EV_WORKER_UP,     /* worker */
  VR_REG_EV_WORKER_DOWN,   /* worker (deregistered, or its lease ended) */
  VR_REG_EV_INSTANCES,     /* worker published a new instance list */
} vr_registry_ev_kind;

/* Valid only during the callback. */
typedef struct vr_registry_event {
  vr_registry_ev_kind kind;
  const char *table;  /* ROUTES */
  int64_t version;    /* ROUTES; CONNECTED: reconnects so far */
  const char *body;   /* ROUTES */
  const char *worker; /* WORKER_*, INSTANCES */
  int resync;         /* ROUTES read after a (re)connect, not published */
  int reset;          /* ROUTES: the store's numbering started over (Redis
                         lost its data, a new writer counts from 1): take
                         this version though it is not above the last */
} vr_registry_event;

typedef void (*vr_registry_cb)(void *ctx, const vr_registry_event *ev);
typedef struct vr_registry_sub vr_registry_sub;

/* Starts a thread that follows vario:routes and vario:workers and calls cb
 * for each change. Returns once subscribed (the first CONNECTED event and
 * the current tables, as resync ROUTES events, have been delivered), or
 * with an error when Redis cannot be reached within o->retry_ms. */
int vr_registry_subscribe(const char *url, const vr_redis_opts *o, vr_registry_cb cb,
                          void *ctx, vr_registry_sub **out, vr_errbuf *err);
/* Stops the thread (promptly, also while reconnecting) and frees s. */
void vr_registry_unsubscribe(vr_registry_sub *s);

/* Parses a vario:routes message "<table> <version>\n<body>": table into
 * table (cap >= VR_REG_ID_MAX), *body points into msg. VR_EFORMAT if
 * malformed. (Exposed for the fuzz target.) */
int vr_registry_parse_route_msg(const char *msg, size_t len, char *table, int64_t *version,
                                const char **body);

#endif
