/*
 * Live pipelines: registered pipeline specs served over the control plane
 * and the runtime (docs/API.md "Pipelines").
 *
 * A pipeline request enters at the root task with one end-to-end deadline
 * (arrival + latency_ms). Every hop — the root and each child request a
 * fan-out adapter creates — is routed by the control plane (INFaaS
 * variant selection over the task's app) with the time left until that
 * deadline as its SLO, and queued in the runtime with that deadline, so
 * each hop's queue orders and early-drops by the end-to-end deadline. A
 * hop that starts past the deadline is not routed: it ends "dropped" with
 * a message naming the task. When every hop has finished the request's
 * callback receives all hops (outputs, variant, accuracy, queue and
 * compute time, outcome).
 *
 * Ownership and threads: vr_pipes borrows the control plane, the runtime
 * and the store (all must outlive it) and owns the registered pipelines.
 * Every function is thread-safe. A request's callback runs exactly once,
 * on whichever thread finished its last hop (an executor, the control
 * plane's loader, or the caller's own thread when nothing could start);
 * it owns the result and frees it with vr_pipe_result_free. A pipeline
 * deleted while requests are in flight stays alive until their results are
 * freed.
 * vr_pipes_free requires that no request is in flight.
 */
#ifndef VR_CONTROL_PIPES_H
#define VR_CONTROL_PIPES_H

#include <stdint.h>

#include "control/control.h"
#include "control/store.h"
#include "policy/fanout.h"
#include "policy/pipeline.h"
#include "runtime/runtime.h"

typedef struct vr_pipes vr_pipes;

#define VR_PIPE_WORKER_MAX 64

/* Outcome of a hop and of a whole pipeline request
 * (vario_pipeline_requests_total{outcome}). */
typedef enum vr_pipe_outcome {
  VR_POUT_OK = 0,
  VR_POUT_DROPPED,    /* past the end-to-end deadline at a hop (or in its queue) */
  VR_POUT_INFEASIBLE, /* no variant of a task meets the time left / accuracy */
  VR_POUT_REJECTED,   /* a queue was full, the model was unloading, or a task's app
                         has no registered model (HTTP 503) */
  VR_POUT_FAILED,     /* model error, out of memory */
  VR_POUT_COUNT
} vr_pipe_outcome;
const char *vr_pipe_outcome_name(vr_pipe_outcome o);

int vr_pipes_create(vr_control *ctl, vr_runtime *rt, vr_store *store, vr_pipes **out,
                    vr_errbuf *err);
void vr_pipes_free(vr_pipes *p);
/* The clock hops read their deadlines against (borrowed; NULL = the
 * monotonic clock). Tests step it to put a hop past its deadline. The
 * runtime's queues keep their own clock, so a test clock should stay
 * within real time of it. Set before any request. */
struct vr_clock;
void vr_pipes_set_clock(vr_pipes *p, struct vr_clock *clock);

/* ---- pipeline policy ------------------------------------------------------
 * With a pipeline policy (policy/pipe_policy.h; `vario serve
 * --pipeline-policy loki`) a thread runs, every tick (1 s), for each
 * pipeline: the root demand (rows/s) and its EWMA, the per-task rates and
 * the observed multiplicative factors; a planning view (each task's
 * variants the control plane serves, at the fewest threads); and, when the
 * period is due (default 10 s, Loki) or the EWMA moved by more than
 * `change`, the policy's plan on the cores the pipeline's apps may fill
 * (vr_control_managed_cores / threads). The plan is applied through the
 * control plane's live actuators (load / unload / batch cap), the
 * MostAccurateFirst routing and backup tables are rebuilt, and hops are
 * routed by them with the policy's early-drop mode: a child hop behind
 * its budget goes to a backup variant that fits or ends "dropped" (504).
 * The apps of the pipeline's tasks are then managed by the policy: the
 * control tick's own policy leaves their instances alone. Until the first
 * plan is in force, hops are routed as without a policy. One pipeline per
 * app: two pipelines sharing an app under a policy would fight over it. */
typedef struct vr_pipes_policy_opts {
  const char *policy; /* a vr_pipe_policies name; NULL = none */
  double period_s;    /* replan period; <= 0: 10 */
  double tick_s;      /* demand, routing and reconciliation tick; <= 0: 1 */
  double change;      /* replan when the EWMA moves by this share; <= 0: 0.3 */
  double slack;       /* planner headroom on demand; <= 0: 1.25 */
  void *arg;          /* the policy's ctx_new argument (InferLine: a
                         vr_il_pipe_arg, policy/il_tick.h); borrowed */
} vr_pipes_policy_opts;

/* Starts the policy thread (once; VR_EINVAL for a second call, VR_ENOENT
 * for an unknown policy). vr_pipes_free stops it. */
int vr_pipes_set_policy(vr_pipes *p, const vr_pipes_policy_opts *o, vr_errbuf *err);
/* One policy tick at once, on the caller's thread (tests). */
void vr_pipes_policy_tick(vr_pipes *p);

/* ---- following the controller ----------------------------------------------
 * In a cluster (`vario controller --pipeline-policy NAME`, issue 18) the
 * policy runs in the controller over every worker; a worker serving
 * pipeline requests follows its plan instead of running one: the plan
 * (policy/pipe_plan.h "as text") is mapped onto this server's planning
 * view, the MostAccurateFirst routing and backup tables are built from it
 * as under a local policy, and every hop is routed by them with the same
 * per-hop rule (early drop / reroute by budget). A hop whose chosen
 * variant this worker does not hold goes to `remote`: it runs r (inputs,
 * timeout_ns set to the time left until the end-to-end deadline) on a
 * worker that holds `model` and calls r->done(r, r->user) exactly once,
 * with status/outcome and, when served, the outputs (r->out_block owned
 * by r, as the runtime's), having written the id of the worker that
 * answered to served_by (the hop record's `worker`). Until the first plan arrives, hops are routed
 * as without a policy. */
typedef void (*vr_pipes_remote_fn)(void *user, const char *model, vr_rt_request *r,
                                   char *served_by /* VR_PIPE_WORKER_MAX: the worker's id */);
/* Whether another worker serves model now (a slot the plan put on other
 * workers counts as held only then: while its model loads, hops go to the
 * task's other variants). */
typedef int (*vr_pipes_remote_has_fn)(void *user, const char *model);
/* Set before requests (borrowed user). */
void vr_pipes_set_remote(vr_pipes *p, vr_pipes_remote_fn fn, vr_pipes_remote_has_fn has,
                         void *user);
/* Follows plan (text of len bytes; NULL = keep the plan, re-read which
 * instances this worker holds: call it every few hundred ms). VR_ENOENT
 * (unknown pipeline, a variant gone), VR_EFORMAT (bad text: the plan in
 * force stays), VR_ESTATE (a local policy runs). */
int vr_pipes_follow(vr_pipes *p, const char *name, const char *plan, size_t len,
                    vr_errbuf *err);
/* The registry table that carries the controller's plan of pipeline
 * `name` to the workers (written by one, read by the others): "pipe." and
 * the name when that is a registry id (1..63 of [A-Za-z0-9._-]); else
 * "pipe.", the name's id characters (at most 40), '-' and a hash of the
 * whole name. A pipeline name may hold any other character and up to 63:
 * "pipe.<name>" was refused by the registry (the pipeline then ran without
 * its plan), or cut to a prefix two pipelines could share. out: 64 bytes. */
void vr_pipe_plan_table(const char *name, char *out);
/* Following also applies the plan's batch caps to the instances this
 * worker holds, and leaves the followed pipelines' apps to the controller
 * (this server's control loop neither loads, unloads nor re-caps their
 * instances). Call after following each pipeline, on the same thread: an
 * app no followed pipeline uses any more (deleted) goes back to the
 * control loop. No-op under a local policy. */
void vr_pipes_follow_manage(vr_pipes *p);
/* Serves the pipelines other processes stored since, and stops serving
 * those they deleted (a shared store). 0 or the store's error. */
int vr_pipes_sync(vr_pipes *p, vr_errbuf *err);
/* A task's candidates are its app's registered variants: after a model
 * of one of their apps was registered or unregistered (here, or by
 * another process sharing the store, once the control plane reloaded
 * it), each pipeline whose apps' variants changed is compiled again and
 * served in place of the old one, its statistics carried over; its
 * policy plans on the new candidates. One whose new models fail its
 * checks (e.g. they lack its adapter's outputs) keeps its candidates,
 * with a warning. Called by vr_pipes_sync and the policy's tick; call it
 * after a registration. */
void vr_pipes_refresh(vr_pipes *p);
/* 1 when this process serves the pipeline now; reads no store (a name
 * it does not serve makes vr_pipes_infer / vr_pipes_describe read it). */
int vr_pipes_serves(vr_pipes *p, const char *name);
/* Names of the served pipelines (up to cap); returns how many there are. */
int vr_pipes_names(vr_pipes *p, char (*names)[VR_PIPE_NAME_MAX], int cap);

/* Pipelines served at once: the policy plans (and a worker follows) at
 * most this many; a registration past it is refused (VR_ELIMIT). */
#define VR_PIPES_MAX 64

/* Registers a spec (JSON text, Vario's pipeline.json or Loki's app
 * definition): parsed, checked against the registered apps and models
 * (every task's app exists, children's inputs take the parent adapter's
 * crops), persisted, then served. On any error nothing is registered.
 * VR_EEXIST when the name is taken. name_out (>= 64 bytes) gets the name. */
int vr_pipes_register(vr_pipes *p, const char *json, size_t len, char *name_out,
                      vr_errbuf *err);
/* Unregisters (and un-persists) a pipeline; VR_ENOENT if unknown. */
int vr_pipes_delete(vr_pipes *p, const char *name, vr_errbuf *err);
/* JSON (vr_malloc'd): name NULL = {"pipelines":[...]} summary; else the
 * pipeline's tasks, candidate variants, instances, observed multiplicative
 * factors and current routing; NULL when unknown. */
char *vr_pipes_describe(vr_pipes *p, const char *name);
/* Prometheus text (vr_malloc'd): vario_pipeline_requests_total,
 * vario_pipeline_latency_seconds, vario_pipeline_task_requests_total,
 * vario_pipeline_fanout_total, vario_pipeline_multiplicative_factor. */
char *vr_pipes_prometheus(vr_pipes *p);
/* JSON array (vr_malloc'd) for the live dashboard: per pipeline the
 * cumulative requests, met (OK by the deadline), outcomes and the sum and
 * count of end-to-end accuracies served (accuracy_sum / accuracy_n), the
 * end-to-end p99 of the last 2-4 s ("p99_ms", null when idle) and since
 * start, and per task its requests, fan-out, drops and the variants that
 * served it (requests, fan-out each). */
char *vr_pipes_dashboard(vr_pipes *p);

/* ---- requests ------------------------------------------------------------ */

typedef struct vr_pipe_query {
  const char *pipeline;
  double latency_ms;   /* end to end; <= 0: the pipeline's own SLO */
  double min_accuracy; /* end to end, percent; 0 none */
  int64_t arrived_ns;  /* > 0: when it arrived (the pipeline's clock), if
                          before now; the deadline counts from there */
  int n_in;
  vr_tensor in[VR_RT_MAX_IO]; /* the root task's inputs; borrowed until done */
} vr_pipe_query;

/* One hop: one task run on one request (a root row batch, or one crop). */
typedef struct vr_pipe_hop_rec {
  int task;          /* index into the pipeline's tasks */
  const char *task_name;
  int parent;        /* hop index, -1 for the root */
  int row;           /* row of the root request this hop descends from */
  int region;        /* the parent adapter's region, -1 for the root */
  const char *label; /* the edge's label, NULL for the root */
  float score;       /* the region's score */
  vr_pipe_outcome outcome;
  char msg[512];     /* when outcome != OK */
  char model[64];
  char variant[128];
  double accuracy;   /* percent */
  int64_t start_ns;  /* hop started (relative to the request's arrival) */
  int64_t queue_ns, compute_ns;
  int64_t batch_ns;  /* its batch as the answer check counts it (runtime.h) */
  int fanout;        /* child hops it created */
  int fanout_to[VR_PIPE_MAX_CHILDREN]; /* of them, per child of the task */
  int planned;       /* routed by the pipeline policy's tables */
  char worker[VR_PIPE_WORKER_MAX]; /* the worker that ran it when not this
                                      one (following the controller); "" */
  vr_rt_request rt;  /* outputs (rt.out, rt.n_out) when served */
  float *crop;       /* the hop's own input (children), owned */
  int64_t crop_shape[4];
} vr_pipe_hop_rec;

typedef struct vr_pipe_result {
  char pipeline[64];
  vr_pipe_outcome outcome; /* OK, or the first failing hop's outcome */
  int status;              /* VR_ENOENT / VR_EINVAL when it never started */
  char msg[640];
  int64_t arrival_ns, end_ns, deadline_ns;
  /* the batch of the hop that ended last: how late past the deadline the
   * answer may still be (policy/drop.h vr_drop_answer_due) */
  int64_t batch_ns;
  int n_hops;
  vr_pipe_hop_rec **hops; /* in creation order; hops[0] is the root */
  void *pin; /* internal: a reference to the pipeline, whose task and label
                names the hops point to, held until vr_pipe_result_free
                (the pipeline may be deleted before the caller is done) */
} vr_pipe_result;

typedef void (*vr_pipe_done_fn)(vr_pipe_result *res, void *tag);

/* Starts a request. done runs exactly once (see above). An unknown
 * pipeline or bad inputs end at once, without hops, with outcome FAILED
 * and result->status VR_ENOENT / VR_EINVAL (so the caller answers 404/400). */
void vr_pipes_infer(vr_pipes *p, const vr_pipe_query *q, vr_pipe_done_fn done, void *tag);
void vr_pipe_result_free(vr_pipe_result *r);

#endif
