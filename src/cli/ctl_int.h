/*
 * Internals of `vario controller` shared by cmd_controller.c (HTTP,
 * the period, options), ctl_registry.c (each period's reading of the
 * registry) and ctl_actions.c (remote loads and unloads, starting
 * workers, the policy driver's glue). Not an API: one controller
 * per process, its state in one ctl (static storage in vr_cmd_controller).
 * Locking: mu guards everything below it in ctl; pol_mu guards the policy
 * driver and is taken before mu, never while holding it.
 */
#ifndef VR_CLI_CTL_INT_H
#define VR_CLI_CTL_INT_H

#include <pthread.h>
#include <stdint.h>

#include "cli/ctl_provider.h"
#include "cluster/registry.h"
#include "control/cluster_driver.h"
#include "server/http.h"
#include "server/sbuf.h"

#define MAXM 128
#define MAXW 128
#define MAXARGS 64
#define NEVENTS 64
#define TABLE "main"

typedef struct pending {
  char model[128], worker[VR_REG_ID_MAX];
  int64_t until_ns;
  int active;
} pending;

typedef struct ctl_pipes ctl_pipes;

/* A copy the policy unloads: out of the routing table first, unloaded
 * once a table without it is out (front ends stop sending it requests
 * that would find the model gone). */
typedef struct unrouting {
  char model[128], worker[VR_REG_ID_MAX];
  int64_t at_ns;       /* unload from then on, once ... */
  int64_t after_ver;   /* ... a table newer than this one is published */
  int64_t until_ns;    /* forgotten then */
  int active, started;
} unrouting;

typedef struct ctl {
  /* options */
  const char *registry, *repo, *models_opt, *token_file, *provider, *port_file, *advertise;
  const char *pargs[MAXARGS], *wargs[MAXARGS];
  int n_pargs, n_wargs;
  const char *host; /* bind address (default 127.0.0.1) */
  int port, replicas, period_ms, min_workers, max_workers, fetch_models;
  int start_timeout_s; /* a provider worker not registered this long is replaced */
  int lost_timeout_s;  /* one that was registered and dropped out, this long */
  int worker_cores, replicas_set, worker_idle_s;
  const char *policy; /* --policy: the driver below runs it */
  /* --store URL --pipeline-policy NAME (ctl_pipes.c), its
   * --pipeline-period-ms / --pipeline-slack / --inferline-rate / -cv */
  const char *store_url, *pipe_policy;
  double pipe_period_ms, pipe_slack, il_rate, il_cv;
  double slo_ms;
  int af_mls_period_s, af_release_ms; /* --policy asyfunc (0 = the policy's defaults) */
  int af_shadow_process; /* shadows as `vario shadow` processes (shared memory) */
  char *token;
  /* running */
  vr_registry *reg;
  ctl_prov *prov;
  vr_http *http;
  pthread_mutex_t mu; /* everything below */
  vr_worker_info w[MAXW];
  size_t nw;
  char wmodels[MAXW][1024]; /* comma-joined ready models per worker */
  int wapps[MAXW];
  /* w[i] is missing from the registry, kept through its grace until then
   * (vr_now_ns); 0: listed */
  int64_t wkept_end[MAXW];
  /* When the registry last answered again after the controller could not
   * rely on it (a failed read, a new connection: Redis restarted or went
   * away); a worker missing since is not taken for dead for one lease
   * (ctl_registry.c, vr__ctl_keep_missing). 0: none yet. */
  int64_t back_ns;
  uint64_t reconnects; /* the registry connection's, at the last tick */
  int reread; /* the last period was dropped: its reads spanned a new
               * connection or a stall; this one is back (cmd_controller.c) */
  int fault_gap_ms; /* VARIO_FAULT_REGISTRY_GAP_MS (tick): tests only, 0
                       unless built with VR_FAULT_INJECTION */
  pending pend[MAXM * 4];
  unrouting unr[MAXM];
  int64_t routes_version;
  char *routes_body;
  char events[NEVENTS][240];
  double ev_t[NEVENTS];
  int n_events;
  int64_t t0;
  int registry_ok, starting, next_worker;
  int adopt; /* the provider adopts workers left running (until it says it cannot) */
  unsigned ticks;
  /* exited per the provider, maybe still leased: room for every worker
   * (16 kept the 17th of one period's deaths in the table for a lease) */
  char dead[MAXW][64];
  int n_dead;
  unsigned long loads_ok, loads_failed, workers_started, workers_died;
  unsigned long unloads_ok, unloads_failed, workers_removed;
  unsigned long pairs_ok, pairs_failed, unpairs_ok, unpairs_failed; /* AsyFunc shadows */
  /* the policy driver (control/cluster_driver.h); see the locking note */
  pthread_mutex_t pol_mu;
  vr_cdrv *cdrv;
  vr_cdrv_model mcfg[MAXM];
  int n_mcfg;
  struct vr_af_model *mblk[MAXM]; /* mcfg[i].blocks when a profile was read (owned) */
  /* the pipeline policy (ctl_pipes.c): its own lock, never under mu */
  pthread_mutex_t pp_mu;
  struct ctl_pipes *pp;
  /* this period's view (the tick thread only) */
  vr_worker_info *vw;
  size_t nvw;
  vr_instance_info *vinst[MAXW];
  size_t nvinst[MAXW];
} ctl;
/* Logs what happened and keeps it for GET /v2/cluster/state (under mu). */
void vr__ctl_event(ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- ctl_registry.c (each period's reading of the registry) ---- */
/* Whether the provider saw worker id exit (under mu). */
int vr__ctl_is_dead(const ctl *c, const char *id);
/* When the grace of c->w[i], missing from the registry, ends (under mu). */
int64_t vr__ctl_grace_end(const ctl *c, size_t i);
/* Appends to ws[0..n) the workers of c->w missing within their grace
 * (room for MAXW; sorted by id); prev[k]: a kept one's index in c->w, -1
 * for a listed one. The new count (under mu). */
size_t vr__ctl_keep_missing(ctl *c, vr_worker_info *ws, size_t n, int *prev,
                            const vr_worker_left *left, size_t nleft, int64_t now);
/* Events for who came, went or is kept, against c->w (under mu). */
void vr__ctl_log_changes(ctl *c, const vr_worker_info *ws, size_t n, const int *prev);
/* The listed workers' instances into got/ngot (the caller vr_frees each
 * got[k]), all or none: every got[k] NULL on VR_EIO (Redis went away after
 * the listing) or VR_ENOENT (a listed worker's lease ended since). Not
 * under mu. */
int vr__ctl_read_instances(ctl *c, const vr_worker_info *ws, size_t n, const int *prev,
                           vr_instance_info **got, size_t *ngot, vr_errbuf *err);
/* Whether waiting waited_ns on Redis may have let a lease end (under mu). */
int vr__ctl_stalled(const ctl *c, int64_t waited_ns);
/* vr__ctl_stalled over the calls on rd since its wait was last taken
 * (takes it, and mu). */
int vr__ctl_stalled_since(ctl *c, vr_redis *rd);
/* The registry could not be read: the last state stands (under mu). */
void vr__ctl_registry_lost(ctl *c, const char *why);

/* ---- ctl_actions.c ---- */
/* Whether a load of model on worker is in flight (under mu; expires old
 * entries). */
int vr__ctl_pending_for(ctl *c, const char *model, const char *worker, int64_t now);
/* A remote load / unload on its own thread (under mu). */
void vr__ctl_start_load(ctl *c, const char *model, const vr_worker_info *w, int64_t now);
void vr__ctl_start_unload(ctl *c, const char *model, const vr_worker_info *w);
/* Unloads model on worker once a routing table without that copy is out
 * (front ends and workers stop sending it requests first); who/why for
 * the event. Not under mu. 0, or -1 (unknown worker, no room). */
int vr__ctl_unload_routed(ctl *c, const char *model, const char *worker, const char *who,
                          const char *why);
/* Whether the routing table leaves model on worker out: the policy
 * unloads it (under mu). */
int vr__ctl_unrouted(ctl *c, const char *model, const char *worker);
/* Starts the unloads whose copy is out of the published table; forgets
 * those done (under mu, after this period's table went out). */
void vr__ctl_unload_due(ctl *c, int64_t now);
/* One worker through the provider (not under mu). 0 or -1. */
int vr__ctl_start_worker(ctl *c, const char *why);
/* The models' repository configs and AsyFunc block profiles for the
 * policy (c->mcfg; re-read every 40 periods). The tick thread only. */
void vr__ctl_model_configs(ctl *c, char models[][128], int nm);
/* The policy driver for c->policy (0 or a VR_E* with err). */
int vr__ctl_policy_open(ctl *c, vr_errbuf *err);
/* One period of the policy over this period's live workers (not under
 * mu; c->vinst holds their instances). */
void vr__ctl_policy_step(ctl *c, const vr_worker_info *ws, size_t n, char models[][128], int nm,
                         int starting);
/* ,"policy":{...} for the state document (takes pol_mu). */
void vr__ctl_policy_json(ctl *c, vr_sbuf *b);

/* ---- ctl_pipes.c ---- */
/* The pipeline policy over c->store_url (0 or a VR_E* with err). */
int vr__ctl_pipes_open(ctl *c, vr_errbuf *err);
void vr__ctl_pipes_close(ctl *c);
/* One period (not under mu; c->vinst holds the workers' instances). */
void vr__ctl_pipes_step(ctl *c, const vr_worker_info *ws, size_t n, int starting);
/* models[have..] += the models of planned pipelines not listed yet (for
 * the routing table: remote hops go by model); the new count. */
int vr__ctl_pipes_models(ctl *c, char models[][128], int have, int cap);
/* Drops from models[0..n) those a planned pipeline's policy manages (the
 * base placement and --policy leave them alone); the new count. */
int vr__ctl_pipes_exclude(ctl *c, char models[][128], int n);
/* ,"pipelines":{...} for the state document. */
void vr__ctl_pipes_json(ctl *c, vr_sbuf *b);

#endif
