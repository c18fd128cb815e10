/*
 * The controller's policy driver (issue 18): the cluster side of
 * policy/driver.h. Every controller period it turns what the registry
 * says — live workers, the models ready on each with the load the worker
 * measured (cluster/registry.h, vr_instance_info) — into a vr_snapshot,
 * runs the configured policy (INFaaS, Clipper+ or SM+: the same pure
 * ticks `vario serve` and the simulator run; Clipper+ and SM+ with every
 * model's variant as their fixed set), and carries out its
 * actions through the cluster actuator table: a load or an unload is a
 * call to a worker's repository API, ADD_WORKER / REMOVE_WORKER go to the
 * worker provider. The calls themselves are the controller's
 * (vr_cdrv_ops, src/cli/cmd_controller.c); this file holds the mapping
 * only, so it is tested without processes (tests/unit/test_cluster_driver.c).
 *
 * Variants: one per model the controller serves, as its repository
 * config describes it (precision, threads, max batch, app, accuracy). Its
 * latency is what a worker measured when it loaded it (the profile the
 * runtime takes at load, published with the worker's heartbeat), its load
 * time what the controller measured for its load call (1 s until one was
 * measured). A model no worker has measured yet is left out of the
 * snapshot: the controller's base placement loads its first copy.
 *
 * Slots filled: load, unload, migrate (load on the target; the old copy
 * is unloaded once the new one is ready), add_worker, remove_worker,
 * set_vstate, set_istate, and AsyFunc's pair/unpair_shadow: the shadow
 * pairs inside the worker that holds the body (ops.pair with the split
 * table computed here from the block profile; one request in flight per
 * body until the worker's heartbeat shows it). Empty, so counted as
 * skipped: set_batch (a worker's batch cap belongs to its own runtime),
 * set_routes (pipeline routes live in a worker's own control plane).
 *
 * AsyFunc: a model with a block profile (vr_cdrv_model.blocks) becomes a
 * variant with blocks; its ready copies that workers report as bodies are
 * the policy's bodies, with the shadow cores they report (or that a pair
 * in flight asked for); a worker's free cores are its cores less its
 * instances' and their shadows'. The unload slot never
 * removes a model's last serving copy: front ends route by model name,
 * and a model on no worker would answer 503, not start cold (counted in
 * kept_last).
 *
 * Threads: none; the caller serialises calls (ops are called from
 * vr_cdrv_tick). Ownership: the driver owns its tables; a view and what it
 * points to are borrowed for the call.
 */
#ifndef VR_CONTROL_CLUSTER_DRIVER_H
#define VR_CONTROL_CLUSTER_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/registry.h"
#include "policy/policy.h"
#include "vario/status.h"

typedef struct vr_cdrv vr_cdrv;

typedef struct vr_cdrv_model {
  char name[128];
  char app[128];
  char precision[16];
  int threads, max_batch;
  double accuracy; /* percent; 0 = not declared */
  /* AsyFunc block profile (<repo>/<model>/blocks.json; borrowed): the
   * model's instances are bodies, and AsyFunc decides for it. NULL = none. */
  const struct vr_af_model *blocks;
} vr_cdrv_model;

typedef struct vr_cdrv_view {
  int64_t now_ns;
  const vr_worker_info *workers; /* live, in a stable order */
  size_t nworkers;
  const vr_instance_info *const *inst; /* per worker: its instances */
  const size_t *ninst;
  const vr_cdrv_model *models;
  size_t nmodels;
  int starting;      /* workers the provider is starting (not yet live) */
  int growable;      /* a provider can add and remove workers */
  int worker_cores;  /* cores of a worker it adds (>= 1) */
  int max_workers;   /* 0 = no cap */
  double slo_ms;     /* latency SLO of the models' queries */
  int fixed_instances; /* Clipper+: instances per model (>= 1) */
  double core_price_per_hour;
  /* whether the controller has a load of model on worker in flight */
  int (*pending)(void *u, const char *model, const char *worker);
  void *u;
} vr_cdrv_view;

/* What carries actions out; each returns 0 or a VR_E* (logged by the
 * caller; the driver goes on with the next action). */
typedef struct vr_cdrv_ops {
  int (*load)(void *u, const char *model, const char *worker, const char *why);
  int (*unload)(void *u, const char *model, const char *worker, const char *why);
  int (*add_worker)(void *u, const char *why);
  int (*remove_worker)(void *u, const char *worker, const char *why);
  void *u;
  /* AsyFunc (NULL: counted as skipped): pair a shadow of `cores` with
   * model's body on worker, split[b] = its rows of a batch of b for b =
   * 0..nsplit-1; release the shadows of model on worker. */
  int (*pair)(void *u, const char *model, const char *worker, int cores, const int *split,
              int nsplit, const char *why);
  int (*unpair)(void *u, const char *model, const char *worker, const char *why);
} vr_cdrv_ops;

/* cfg and ops are copied. 0 or VR_ENOMEM. */
int vr_cdrv_new(const vr_policy_cfg *cfg, const vr_cdrv_ops *ops, vr_cdrv **out);
void vr_cdrv_free(vr_cdrv *d);

/* The node range [*pb, *pe) a body of m is loaded splittable over (the
 * blocks LLS would give one idle body's shadow, policy/asyfunc.h
 * vr_af_body_range) at latency SLO slo_ms. VR_ENOENT: no block profile,
 * or no block worth a shadow (load it plain). */
int vr_cdrv_body_range(const vr_cdrv_model *m, double slo_ms, int *pb, int *pe);

/* A load of model took ms (the variant's load time from now on). */
void vr_cdrv_load_time(vr_cdrv *d, const char *model, double ms);

/* One period: snapshot from v, the policy's tick, its actions applied.
 * 0, VR_ENOMEM or VR_EINVAL (with a message). */
int vr_cdrv_tick(vr_cdrv *d, const vr_cdrv_view *v, vr_errbuf *err);

typedef struct vr_cdrv_stats {
  uint64_t applied[VR_ACT__COUNT], skipped[VR_ACT__COUNT];
  uint64_t kept_last;   /* unloads refused: the model's last copy */
  uint64_t not_yet;     /* loads aimed at a worker still starting */
  int nvariants, ninstances, nworkers; /* in the last snapshot */
} vr_cdrv_stats;

void vr_cdrv_get_stats(const vr_cdrv *d, vr_cdrv_stats *s);
const vr_policy_cfg *vr_cdrv_cfg(const vr_cdrv *d);

#endif
