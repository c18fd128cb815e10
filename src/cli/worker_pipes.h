/*
 * A cluster worker's side of pipelines under the controller's policy
 * (issue 18; control/pipes.h "following the controller"): every
 * heartbeat it serves pipelines other processes stored, follows the plan
 * the controller published for each (registry table "pipe.<name>") and
 * the routing table "main", and runs the hops this worker does not hold
 * on a worker that does: KServe v2 binary tensors over the front end's
 * forwarder (server/fwd.h: keep-alive pools, retry on another worker,
 * explicit errors), with the time left until the end-to-end deadline as
 * the request's "timeout", so the remote queue drops a hop that cannot
 * make it instead of serving it late.
 *
 * Threads: wp_sync / wp_sync_now on the heartbeat thread; the remote hop from any
 * request thread; answers on the forwarder's I/O thread. Ownership: a
 * worker_pipes (the caller's storage, which must outlive the pipes: hops
 * may still call it while the server drains) borrows the registry and the
 * pipes; wp_stop after the heartbeat thread stopped: hops under way then
 * end 503, later ones are refused ("worker stopping").
 */
#ifndef VR_CLI_WORKER_PIPES_H
#define VR_CLI_WORKER_PIPES_H

#include <pthread.h>

#include "cluster/registry.h"

#define WP_MAX 64

struct vr_pipes;
struct vr_fwd;

typedef struct worker_pipes {
  vr_registry *reg;
  struct vr_pipes *pipes;
  char self[VR_REG_ID_MAX];
  pthread_rwlock_t lk; /* fwd: read by hops, cleared by wp_stop */
  struct vr_fwd *fwd;
  int64_t main_ver;
  /* models other workers serve (table "main"), comma-joined; under lk */
  char remote_models[4096];
  unsigned beats;
  char names[WP_MAX][64];
  int64_t ver[WP_MAX];
} worker_pipes;

/* 0, or -1 (logged: pipelines then run on this worker only). */
int wp_init(worker_pipes *w, vr_registry *reg, struct vr_pipes *pipes, const char *self_id);
/* One heartbeat's worth: new pipelines (every 8th call), table "main",
 * the plans. */
void wp_sync(worker_pipes *w);
/* The same at once, pipelines included: a routing table changed (the
 * worker's subscription, cmd_worker.c), so a new plan is followed within
 * the propagation time, not at the next heartbeat. Heartbeat thread. */
void wp_sync_now(worker_pipes *w);
void wp_stop(worker_pipes *w);

#endif
