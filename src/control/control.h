/*
 * The live control plane (INFaaS on one worker): per-query variant
 * selection for model-less queries, and a control loop that every period
 * (default 1 s) builds a policy snapshot from the runtime's monitoring and
 * the store's profiles, runs the pure policy (variant state machine, model
 * autoscaler, interference detection; policy/policy.h) and applies its
 * actions through the runtime's instance API — never beyond the worker's
 * cores and memory.
 *
 * The same snapshot/action types drive the simulator (sim/), so a policy
 * decision seen here can be replayed there.
 *
 * Threads: the control thread runs ticks; a loader thread performs variant
 * loads asked for by queries (INFaaS loads the best inactive variant on the
 * query path); routing and completion calls come from any thread. All
 * state is behind one mutex; loads and unloads run outside it.
 *
 * Ownership: vr_control borrows the store and the runtime (both must
 * outlive it) and owns everything else. Callbacks given to
 * vr_control_route are called exactly once.
 */
#ifndef VR_CONTROL_CONTROL_H
#define VR_CONTROL_CONTROL_H

#include <stdint.h>
#include <stdio.h>

#include "base/clock.h"
#include "control/store.h"
#include "policy/policy.h"
#include "runtime/runtime.h"

typedef struct vr_control vr_control;

typedef struct vr_control_opts {
  vr_store *store;   /* borrowed */
  vr_runtime *rt;    /* borrowed */
  int cores;         /* worker cores; 0 = online CPUs */
  int64_t mem_bytes; /* worker memory for instances; 0 = 8 GiB */
  double core_price_per_hour; /* worker price; 0 = 0.0425 per core */
  int64_t period_ns;          /* control period; 0 = 1 s */
  double default_slo_ms;      /* SLO assumed for traffic without one: 100 */
  int64_t max_queue_delay_us; /* batching delay of new instances; 0 = 500 */
  vr_policy_cfg policy;       /* default: vr_policy_cfg_default(INFAAS) */
  int policy_set;             /* 0: use the default policy config */
  int autoscale;              /* run the policy each tick (default 1) */
  FILE *csv;                  /* per-tick time series (borrowed), or NULL */
  vr_clock *clock;            /* control periods; NULL = monotonic */
  int shadow_process;         /* AsyFunc: shadows in their own processes
                                 (runtime/shm_pair.h); 0 = threads here */
} vr_control_opts;

/* AsyFunc block profiles live in the store as documents of this kind,
 * named after the registered model (`vario perf --blocks --store DB`); the
 * control plane reads them with the variants and hands them to the policy
 * (vr_snap_variant.blocks). */
#define VR_AF_DOC_KIND "asyfunc_blocks"

void vr_control_opts_init(vr_control_opts *o);
/* Reads every registered variant's profile from the store. Does not start
 * threads (vr_control_start), so tests can drive ticks by hand. */
int vr_control_create(const vr_control_opts *o, vr_control **out,
                      vr_errbuf *err);
int vr_control_start(vr_control *c, vr_errbuf *err);
/* Stops the threads; instances stay loaded (the runtime owns them). */
void vr_control_stop(vr_control *c);
void vr_control_free(vr_control *c);

/* One control period at time now_ns: snapshot -> policy -> actions. */
int vr_control_tick(vr_control *c, int64_t now_ns, vr_errbuf *err);
/* Re-reads the store (after a registration) keeping instance state. */
int vr_control_reload_store(vr_control *c, vr_errbuf *err);
/* Unregisters a model (store + repository entry), stops routing to its
 * variants at once, and drains and frees its loaded instances (queued
 * queries are still answered). Blocks while they drain. VR_ENOENT if no
 * such model. */
int vr_control_unregister(vr_control *c, const char *model, vr_errbuf *err);

/* ---- queries ------------------------------------------------------------ */

typedef struct vr_ctl_query {
  const char *app;     /* model-less: any model of the app, or */
  const char *model;   /* a named model (any of its variants) */
  double latency_ms;   /* SLO; <= 0: the default SLO */
  double min_accuracy; /* percent: 1 means 1% */
  double max_cost;     /* dollars per 1000 queries; <= 0: no limit */
} vr_ctl_query;

typedef struct vr_ctl_route {
  int status;      /* 0, or VR_EINFEASIBLE / VR_ENOENT / VR_EBUSY / ...
                      (the server maps it to HTTP: 400 / 404 / 503) */
  char msg[512];   /* when status != 0: names the closest variant */
  int instance_id;
  int variant;     /* control's variant index */
  char model[64];
  char variant_name[128];
  double accuracy;      /* percent */
  double profile_ms;    /* the variant's profiled tail latency at batch 1 */
  double cost_per_1k;   /* dollars per 1000 queries at full batches */
  double slo_ms;
  double req_accuracy;  /* the query's min_accuracy, percent */
  int loaded;           /* 1: this query made the variant load */
} vr_ctl_route;

typedef void (*vr_ctl_route_cb)(void *tag, const vr_ctl_route *r);

/* Picks a variant and instance for q (INFaaS selection). cb runs exactly
 * once: at once when an active variant serves (or the query is
 * infeasible), or from the loader thread after loading a variant. */
void vr_control_route(vr_control *c, const vr_ctl_query *q, vr_ctl_route_cb cb,
                      void *tag);
/* Whether vr_control_route knows app (a query on it does not end
 * VR_ENOENT): some model is registered into it. */
int vr_control_has_app(vr_control *c, const char *app);
/* A request routed by vr_control_route that will not run (refused after
 * routing, or dropped before its instance): its in-flight count is given
 * back, and it counts as not served. */
void vr_control_not_run(vr_control *c, const vr_ctl_route *r);
/* Reports a finished request that was routed by vr_control_route. */
void vr_control_completed(vr_control *c, const vr_ctl_route *r,
                          const vr_rt_request *req);

/* ---- pipeline policies (control/pipes_policy.c) ----------------------------
 * A pipeline policy (policy/pipe_policy.h) manages the instances of its
 * tasks' apps itself; the control plane's own policy then leaves them
 * alone, and the pipeline policy's actions go through the same live
 * actuator table (policy/driver.h). */

/* Marks app as managed by a pipeline policy (on = 1) or releases it: the
 * tick's own policy takes no LOAD / UNLOAD / MIGRATE / SET_BATCH / PAIR
 * action on its variants' instances (query-path loads for direct app
 * queries still happen; the pipeline policy unloads what it did not plan).
 * 0, VR_ELIMIT (too many apps). */
int vr_control_set_managed(vr_control *c, const char *app, int on);
/* The control plane's index of the variant named `name` (store name) and,
 * when prof is not NULL, its profile; -1 when it is not served (unknown,
 * or int8 without calibration). Indexes change when the store reloads:
 * look them up every period. */
int vr_control_variant(vr_control *c, const char *name, vr_profile *prof);
/* Keeps the indexes valid until vr_control_release_indexes: a store
 * reload waits (as during the control plane's own tick). A pipeline
 * policy's tick looks its slots up before it plans and loads and
 * publishes by them after: a reload in between made them name other
 * variants. */
void vr_control_hold_indexes(vr_control *c);
void vr_control_release_indexes(vr_control *c);

typedef struct vr_ctl_inst_info {
  int id;
  int var;       /* control variant index */
  int batch_cap; /* rows per batch now */
  int ready;     /* serving: active / overloaded / interfered, not removing */
  char app[VR_PROF_NAME_MAX]; /* its variant's app */
  int cores;     /* held: its threads and its shadow's */
} vr_ctl_inst_info;

/* The control plane's instances now (from the runtime), sorted by id:
 * fills up to cap, returns how many there are. */
int vr_control_instances(vr_control *c, vr_ctl_inst_info *out, int cap);
/* Cores the managed apps may fill: the worker's cores minus those held by
 * instances of unmanaged variants, by instances loaded by name and by
 * loads in progress (query-path loads reserve theirs: a load decided now
 * finds them taken). */
int vr_control_managed_cores(vr_control *c);
/* Carries out one action decided outside the tick (a pipeline policy)
 * through the live actuator table, recorded in the history. A LOAD or
 * MIGRATE the worker has no room for is not carried out: VR_EBUSY, logged,
 * recorded as a "load refused" event and said in err (may be NULL), as a
 * failed load is (the caller's next period may try again). Blocks while
 * a load or a drain runs. 0 or VR_E*. */
int vr_control_apply(vr_control *c, const vr_action *a, vr_errbuf *err);

/* Prometheus text (vr_malloc'd) of the control plane:
 * vario_scaling_actions_total{kind}, vario_variant_state{variant,state},
 * vario_control_instances{variant}, vario_variant_selection_seconds
 * (summary), vario_app_slo_violations_total (model-less queries late),
 * vario_infeasible_queries_total. */
char *vr_control_prometheus(vr_control *c);

/* JSON (vr_malloc'd text) describing the apps, their variants, states and
 * instances: GET /v2/apps and /v2/apps/{app}. app NULL = all. */
char *vr_control_describe(vr_control *c, const char *app);

/* JSON (vr_malloc'd text) of the recent control periods and autoscaler
 * actions newer than since_s (seconds since the control plane started):
 * {"rows":[{t_s, arrivals, served, late, failed, slo_attainment, p99_ms,
 * accuracy, cost_per_s, instances, cores, variants, apps:{app:{...}}}],
 * "actions":[{t_s, kind, variant, why}]}. For the live dashboard. */
char *vr_control_history(vr_control *c, double since_s);

#endif
