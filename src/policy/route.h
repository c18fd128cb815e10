/*
 * Routing: the per-request decision of the request path, written once for
 * the live control plane (control/control_route.c) and the simulator
 * (sim/sim.c). Pure: the caller describes what it can do now through a
 * vr_route_env (the selection index, the snapshot it was built from, and
 * three questions about room), and carries the answer out itself.
 *
 *   1. selection (policy/select.h): the variant INFaaS would use (one
 *      chosen as serving whose instances are gone since the index was
 *      built is treated as one to load);
 *   2. fits? A variant selection wants loaded needs room on a worker,
 *      unless one of its instances already serves or loads ("available":
 *      the query joins it);
 *   3. fallback when it does not fit: a loaded variant that meets the
 *      query serves it, busy or not (selection with loaded_only); else,
 *      when no idle instance can be evicted for it, the variant that does
 *      fit with the lowest load + inference time among those of the
 *      query's app/model that meet it (on 2 cores, often the 1-thread
 *      sibling of a 2-thread choice); else there is no room;
 *   3b. spill when the serving variant is at its peak: INFaaS dispatches
 *      a query to a variant in the Active state, and one whose instances
 *      serve at their peak throughput is Overloaded (§4.1). Per query:
 *      when a new query on the chosen variant's least-loaded instance
 *      would finish after its SLO (vr_route_behind), it goes to the
 *      cheapest other serving variant that meets it and is not behind;
 *      when there is none it stays (the deadline rule then drops it if
 *      it cannot be served in time). Decided per query from the queues,
 *      not per control period, so the load does not flip-flop between
 *      variants; the demand stays with the variant selection wanted, so
 *      the autoscaler still sees what it must add;
 *   3c. load on overload: when 3b finds no serving variant to take the
 *      query and the chosen variant is in the Overloaded state (the
 *      monitoring's, policy.c vr_policy_states: the last control
 *      period's load above its serving instances' saturation
 *      throughput; not a momentary queue), INFaaS's getVariant turns to
 *      the Inactive variants and loads the one with the lowest load +
 *      inference time that meets the query (§4.1: Overloaded variants
 *      are avoided). The query itself cannot wait seconds for a load
 *      against an SLO of milliseconds, so it stays where 3b left it
 *      (the deadline rule drops it if it cannot be served in time), and
 *      the load starts now (`prefetch`); once it serves, 3b sends the
 *      overflow to it (e.g. a GPU variant during a ramp the CPU
 *      replicas trail by a control period and a load). A variant already
 *      loading is the choice again (it pays no load), so a burst starts
 *      one load, not one per query; an inactive one needs room now, and
 *      the caller starts it only where it can start loading at once (a
 *      worker that is up), never evicting for it;
 *   4. the instance: vr_route_lighter, the one least-loaded rule (fewer
 *      outstanding rows per row of batch capacity; an interfered instance
 *      only when all are).
 */
#ifndef VR_POLICY_ROUTE_H
#define VR_POLICY_ROUTE_H

#include <math.h>

#include "policy/select.h"

typedef struct vr_route_env {
  const vr_select_index *ix;
  const vr_snapshot *snap; /* the snapshot ix was built from */
  char kind;               /* the query's group: 'a' app or 'm' model */
  const char *name;        /* its name */
  /* an instance of v serves or loads now: the query needs no new room */
  int (*available)(void *self, int v);
  /* a worker has room to load one instance of v now */
  int (*fits)(void *self, int v);
  /* an idle instance could be evicted to make room for v (NULL: this
   * side never evicts) */
  int (*evictable)(void *self, int v);
  /* outstanding rows (queued + running) on v's least-loaded serving
   * instance; 0 when v has no serving instance (NULL: the caller does not
   * say, and nothing spills) */
  int (*backlog)(void *self, int v, long *rows);
  void *self;
} vr_route_env;

typedef enum {
  VR_ROUTE_SERVE = 0,  /* send it to an instance of `variant` */
  VR_ROUTE_LOAD,       /* load `variant` (or join its load), then serve */
  VR_ROUTE_EVICT_LOAD, /* evict an idle instance, then load `variant` */
  VR_ROUTE_INFEASIBLE, /* nothing meets it; `sel` names the closest */
  VR_ROUTE_NO_ROOM,    /* `variant` would serve it but nothing fits */
} vr_route_outcome;

typedef struct vr_route {
  int outcome;      /* vr_route_outcome */
  int variant;      /* snapshot variant index */
  int wanted;       /* the variant selection chose first (the demand a
                       sizing policy should see, whatever served it) */
  vr_selection sel; /* selection's answer (latency/accuracy of variant) */
  int prefetch;     /* step 3c: a variant to start loading now while the
                       query stays with `variant` (-1: none); a caller
                       that never loads on the query path ignores it */
} vr_route;

/* The decision for one query. 0, or VR_EINVAL for a bad group. */
int vr_route_decide(const vr_route_env *e, const vr_query_req *q,
                    vr_route *out);
/* The same from selection's answer for q (a caller may memoise it: it is
 * a pure function of the index and q). */
void vr_route_decide_sel(const vr_route_env *e, const vr_query_req *q,
                         const vr_selection *sel, vr_route *out);

/* Steps 2-3 for a variant that must be loaded (also when SERVE found no
 * instance taking queries): LOAD, EVICT_LOAD or NO_ROOM. */
int vr_route_load(const vr_route_env *e, int variant);

/* Whether a query joining an instance with `rows` outstanding rows would
 * finish after slo_ms: the batches ahead of it and its own, at the
 * profile's median (policy/batch.h), each as large as the SLO allows
 * (vr_profile_batch_for_slo; a pure function of the profile and the
 * query, so both sides estimate alike). */
int vr_route_behind(const vr_profile *p, long rows, double slo_ms);

/* The accuracy floor a routed query puts on the load of its variant (what
 * the caller records as vr_snap_variant.req_accuracy, the most asked
 * among a period's queries): an app query's min_accuracy; for a query
 * that named its model (kind 'm'), +infinity: no other model may take
 * that load, since selection never sends such a query to another model,
 * whatever accuracy it asked. */
static inline double vr_route_load_floor(char kind, double min_accuracy) {
  return kind == 'm' ? INFINITY : min_accuracy;
}

/* The one least-loaded rule: whether instance a is strictly lighter than
 * b. rows: outstanding (queued + running) rows; cap: rows per batch. */
static inline int vr_route_lighter(int a_interfered, long a_rows, int a_cap,
                                   int b_interfered, long b_rows, int b_cap) {
  if (a_interfered != b_interfered) return a_interfered < b_interfered;
  if (a_cap < 1) a_cap = 1;
  if (b_cap < 1) b_cap = 1;
  return a_rows * (long)b_cap < b_rows * (long)a_cap;
}

#endif
