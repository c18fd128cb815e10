/*
 * The policy boundary: a snapshot of the serving system in, actions out.
 *
 * The live control loop (control/) and the simulator (sim/) both fill a
 * vr_snapshot from their own state once per control period and apply the
 * vr_actions a policy returns. Policies never keep pointers into a snapshot
 * past the call, and never read anything that is not in it (no clock, no
 * I/O, no globals): `now_ns` is the only notion of time they get.
 *
 * Ownership: the caller owns every array in a snapshot (typically in an
 * arena or vectors it reuses each period); a snapshot is read-only to
 * policies. Indices, not pointers, link the tables: an instance names its
 * variant by index into `variants` and its worker by index into `workers`.
 * Stable ids (`id` fields) survive across snapshots; indices do not.
 */
#ifndef VR_POLICY_SNAPSHOT_H
#define VR_POLICY_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "base/vec.h"
#include "policy/profile.h"

/* Variant state machine (INFaaS): a variant with no instance is inactive;
 * with instances it is active unless its instances run above their
 * saturation throughput (overloaded) or slower than their profile while
 * not overloaded (interfered). */
typedef enum {
  VR_VS_INACTIVE = 0,
  VR_VS_ACTIVE,
  VR_VS_OVERLOADED,
  VR_VS_INTERFERED,
  VR_VS__COUNT
} vr_vstate;

typedef enum {
  VR_IS_LOADING = 0, /* being loaded; serves nothing yet */
  VR_IS_ACTIVE,
  VR_IS_OVERLOADED,
  VR_IS_INTERFERED,
  VR_IS_DRAINING, /* finishing its queue before unload */
  VR_IS__COUNT
} vr_istate;

typedef enum { VR_WS_STARTING = 0, VR_WS_UP, VR_WS_DRAINING } vr_wstate;

typedef struct vr_snap_variant {
  vr_profile prof;
  int state;          /* vr_vstate, as the caller last recorded it */
  double slo_ms;      /* latency SLO its traffic asks for (for saturation) */
  double arrival_qps; /* queries routed to this variant per second */
  double served_qps;  /* queries completed per second */
  double req_accuracy; /* highest accuracy floor (percent) among the queries
                          routed to it this period (policy/route.h
                          vr_route_load_floor; +inf: a query named its
                          model); 0 = none asked */
  /* AsyFunc block profile of its model (policy/asyfunc.h), caller-owned
   * and read-only; NULL = none (no body/shadow decisions for it) */
  const struct vr_af_model *blocks;
} vr_snap_variant;

typedef struct vr_snap_instance {
  int64_t id;   /* stable across snapshots */
  int variant;  /* index into snapshot.variants */
  int worker;   /* index into snapshot.workers */
  int state;    /* vr_istate */
  int max_batch;
  int queue_len;
  double arrival_qps; /* routed to this instance, per second */
  double served_qps;
  double p50_ms, p99_ms; /* observed compute latency (per batch, ms) */
  double obs_batch;      /* mean batch size observed */
  /* median over the period's batches of observed compute time / profiled
   * p50 at that batch size; 0 = no batch. Independent of the batch mix, so
   * a slowed-down instance shows as > 1 whatever its load. */
  double slowdown;
  int64_t ready_ns;      /* when it finished loading (or will) */
  int body;              /* AsyFunc: can take a shadow */
  int shadow_cores;      /* cores of its shadow now; 0 = none */
} vr_snap_instance;

typedef struct vr_snap_worker {
  int64_t id;
  int state; /* vr_wstate */
  int cores, free_cores;
  int gpus, free_gpus;
  int64_t mem_bytes, free_mem;
  double price_per_s;
  int type;           /* index into the caller's worker types */
  int64_t idle_since; /* when it last had no instance; -1 if busy */
} vr_snap_worker;

/* A worker type the policy may add (cloud VM shape). */
typedef struct vr_snap_wtype {
  int cores, gpus;
  int64_t mem_bytes;
  double price_per_s;
  int max_count; /* upper bound on workers of this type */
  int count;     /* workers of this type now (any state) */
} vr_snap_wtype;

typedef struct vr_snapshot {
  int64_t now_ns;
  vr_snap_variant *variants;
  size_t nvariants;
  vr_snap_instance *instances;
  size_t ninstances;
  vr_snap_worker *workers;
  size_t nworkers;
  vr_snap_wtype *wtypes;
  size_t nwtypes;
} vr_snapshot;

typedef enum {
  VR_ACT_LOAD = 1,      /* load variant on worker (worker -1: policy could
                           not place it; the caller may queue it) */
  VR_ACT_UNLOAD,        /* drain and unload instance */
  VR_ACT_SET_BATCH,     /* set instance max batch */
  VR_ACT_ADD_WORKER,    /* start a worker of type `wtype` */
  VR_ACT_REMOVE_WORKER, /* stop an idle worker */
  VR_ACT_SET_VSTATE,    /* record a variant state transition */
  VR_ACT_SET_ISTATE,    /* record an instance state transition */
  VR_ACT_MIGRATE,       /* load `variant` on `worker`, then unload
                           `instance` once it serves: interference
                           mitigation (same variant, another worker) or an
                           upgrade in place (another variant, the same
                           worker, whose room the old instance gives up) */
  VR_ACT_PAIR_SHADOW,   /* pair `instance` (a body) with a shadow of
                           `variant` on `worker` (burst instances) */
  VR_ACT_UNPAIR_SHADOW, /* end the pairing of `instance` */
  VR_ACT_SET_ROUTES,    /* re-route `variant`'s traffic (pipelines: value
                           names the route table entry to use) */
  VR_ACT__COUNT
} vr_action_kind;

typedef struct vr_action {
  int kind;         /* vr_action_kind */
  int variant;      /* index into snapshot.variants, or -1 */
  int64_t instance; /* instance id, or -1 */
  int worker;       /* index into snapshot.workers, or -1 */
  int wtype;        /* worker type for ADD_WORKER, or -1 */
  int value;        /* new state / max batch */
  const char *why;  /* static string for logs and metrics */
} vr_action;

/* Actions list: a vector of vr_action owned by the caller (reuse it across
 * periods with vr_vec_clear). */
typedef vr_vec vr_actions;

void vr_actions_init(vr_actions *a);
void vr_actions_free(vr_actions *a);
int vr_actions_push(vr_actions *a, int kind, int variant, int64_t instance,
                    int worker, int wtype, int value, const char *why);
static inline vr_action *vr_actions_at(const vr_actions *a, size_t i) {
  return &((vr_action *)a->data)[i];
}

const char *vr_vstate_name(int s);
const char *vr_istate_name(int s);
const char *vr_action_name(int kind);

#endif
