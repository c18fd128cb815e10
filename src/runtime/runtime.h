/*
 * Runtime: the data plane. Models loaded from a repository, each served by
 * one or more instances; an instance is a backend session (normally a
 * vr_session of the engine) + a priority/deadline-ordered batch queue + one
 * executor thread that forms batches (policy/batch.h) and runs them.
 *
 * Ownership and threads:
 *  - vr_runtime owns every model and instance. All functions are
 *    thread-safe; the HTTP threads submit, executor threads complete, and a
 *    control plane may add/remove instances and read stats concurrently.
 *  - A vr_rt_request is owned by the caller. Between vr_rt_submit() and its
 *    done() callback the runtime reads its inputs (caller memory, must stay
 *    valid) and writes its result fields; after done() it no longer touches
 *    it. done() runs exactly once for every submitted request — on an
 *    executor thread, on the runtime's reaper thread (a queued request
 *    dropped while its executor is stuck in a batch), or inside vr_rt_submit()
 *    when the request is rejected at once — and must be quick (hand the result to another thread). It
 *    never runs under the runtime's lock, so it may submit again and read
 *    stats; it should not load, unload or remove instances itself (those
 *    wait, under the runtime's admin lock, for an instance to drain, and a
 *    drain runs done() callbacks): hand that to another thread, as the
 *    control plane's loader does.
 *    Outputs are one allocation owned by the request: release with
 *    vr_rt_request_clear().
 *  - Unloading a model or removing an instance drains it: queued requests
 *    are still served (or answered with an error), never dropped silently.
 */
#ifndef VR_RUNTIME_RUNTIME_H
#define VR_RUNTIME_RUNTIME_H

#include <stdint.h>

#include "base/clock.h"
#include "policy/batch.h"
#include "policy/drop.h"
#include "runtime/config.h"
#include "vario/engine.h"
#include "vario/status.h"

typedef struct vr_runtime vr_runtime;
typedef struct vr_rt_request vr_rt_request;

/* Outcomes, as counted in metrics (vario_requests_total{outcome}). */
typedef enum vr_rt_outcome {
  VR_OUT_OK = 0,    /* served */
  VR_OUT_DROPPED,   /* early drop: deadline could not be met */
  VR_OUT_REJECTED,  /* queue full, shutting down, model draining */
  VR_OUT_FAILED,    /* backend error */
  VR_OUT_COUNT
} vr_rt_outcome;
const char *vr_rt_outcome_name(vr_rt_outcome o);

/* Priority: 1 is the highest level; larger numbers are served later.
 * 0 means the default level (as Triton's schedule-policy extension). */
#define VR_RT_PRIO_DEFAULT 5

typedef void (*vr_rt_done_fn)(vr_rt_request *req, void *user);

struct vr_rt_request {
  /* ---- set by the caller before vr_rt_submit ---- */
  int n_in;
  vr_tensor in[VR_RT_MAX_IO]; /* data in caller memory; dim 0 = rows */
  int priority;
  int64_t timeout_ns; /* deadline = arrival + timeout; 0 = none */
  int64_t arrived_ns; /* monotonic time the caller received it, when that
                         was before submission (routing, a query-path
                         load): arrival_ns and the deadline count from it;
                         0 = at submission */
  /* 1: the model's queue policy (config.h "queue") decides the deadline,
   * as on /v2/models/{m}/infer: timeout_ns is then the client's own
   * (0 = none given). vr_rt_submit only. */
  int queue_policy;
  /* 1: the caller may still drop a served request at answer time, so it
   * settles the request's metrics itself (vr_rt_settle) rather than the
   * runtime counting it served at once: counters only ever go up. */
  int settle_stats;
  vr_rt_done_fn done;
  void *user;
  /* ---- set by the runtime before done() ---- */
  int status;      /* 0 or VR_E* */
  vr_errbuf err;   /* message when status != 0 */
  vr_rt_outcome outcome;
  int n_out;
  vr_tensor out[VR_RT_MAX_IO]; /* in the model's output order */
  int64_t arrival_ns, deadline_ns, start_ns, end_ns;
  /* Served: its batch's execution time as the answer-time check counts it
   * (policy/drop.h vr_drop_answer_due): end_ns - start_ns, except in a
   * batch whose shadow failed (runtime/pair.h), where that includes up to
   * the shadow's 2-s timeout spent waiting on a stuck process, which is no
   * execution: then the profiled time of the batch plus its copy-out. */
  int64_t batch_ns;
  int batch_size;  /* rows of the batch it ran in */
  int instance_id;
  char variant[VR_NAME_MAX];
  /* ---- private ---- */
  int rows;
  int prio_key;
  void *out_block;
  struct vr_rt_vstats *owed; /* settle_stats: where a served one counts */
  /* a failure found under the runtime's lock, answered after it
   * (runtime_int.h vr__rt_fail_later): its outcome and where it counts */
  int late_outcome;
  struct vr_rt_vstats *late_vs;
  vr_rt_request *next;
};

/* Zeroes a request (keeps nothing). */
void vr_rt_request_init(vr_rt_request *r);
/* Frees the outputs (if any) and zeroes the request. */
void vr_rt_request_clear(vr_rt_request *r);

/* ---- backends ---------------------------------------------------------- */

/* What an instance runs. The engine backend (vr_rt_backend_engine) is the
 * default; tests inject their own to check batching with exact timings.
 * model_open is called once per model load and its result is shared by the
 * model's sessions (from several executor threads). */
typedef struct vr_rt_backend {
  int (*model_open)(void *self, const vr_model_config *cfg, void **model,
                    vr_errbuf *err);
  void (*model_close)(void *self, void *model);
  int (*session_open)(void *self, void *model, vr_precision prec, int threads,
                      int max_batch, void **sess, vr_errbuf *err);
  void (*session_close)(void *self, void *sess);
  /* Same contract as vr_session_run: outputs point into session memory
   * valid until the next run. */
  int (*run)(void *self, void *sess, int batch, const vr_tensor *in, int n_in,
             vr_tensor *out, int n_out, vr_errbuf *err);
  void *self;
  /* AsyFunc bodies (optional; NULL = this backend cannot pair). A body
   * session computes what session_open's does (run works on it), split at
   * nodes [pb, pe) so that a shadow holding only that range can take rows
   * of it: shadow_attach loads one (in this process, or with `process` in
   * a `vario shadow` process over shared memory), shadow_release drops it
   * after a run in flight, run_paired sends bs of the batch's rows through
   * it (*shadow_rows: how many it did run; 0 without a shadow; -1 when the
   * shadow failed, the body ran its rows and has no shadow now). give_up_ns
   * (monotonic, vr_now_ns; 0: the backend's own bound) is when to stop
   * waiting for the shadow and run its rows on the body: a wait past it
   * makes the batch's answers late. Attach and release may be
   * called while the executor runs the session. */
  int (*body_open)(void *self, void *model, vr_precision prec, int threads,
                   int max_batch, int pb, int pe, void **sess, vr_errbuf *err);
  int (*shadow_attach)(void *self, void *sess, int threads, int process,
                       double *load_ms, vr_errbuf *err);
  void (*shadow_release)(void *self, void *sess);
  int (*run_paired)(void *self, void *sess, int batch, int bs, int64_t give_up_ns,
                    const vr_tensor *in, int n_in, vr_tensor *out, int n_out,
                    int *shadow_rows, vr_errbuf *err);
} vr_rt_backend;

/* The engine backend (NULL when the engine is not built in). Static. */
const vr_rt_backend *vr_rt_backend_engine(void);

/* ---- runtime ----------------------------------------------------------- */

typedef struct vr_runtime_opts {
  const vr_rt_backend *backend; /* NULL = engine */
  int max_queue_rows;           /* per instance; 0 = 4096 */
  int profile_runs;             /* runs per batch size at load; 0 = 3 */
  int profile_max_batch;        /* largest profiled batch; 0 = max batch */
  /* Called for a request due for dropping (policy/drop.h; req is the
   * vr_rt_request): 1 = the hook took it (it answers it), 0 = drop it
   * (VR_EDEADLINE, outcome dropped). Default: none. */
  vr_drop_hook reroute;
  /* Time for arrivals, deadlines, batch decisions and the profile (NULL:
   * monotonic). A virtual clock is for tests that drive time themselves
   * through their backend; the executor's timed waits (max queue delay)
   * still sleep on the monotonic clock, so use max_queue_delay_us 0. A
   * runtime of a virtual clock has no reaper (runtime/reaper.c). */
  vr_clock *clock;
} vr_runtime_opts;

void vr_runtime_opts_init(vr_runtime_opts *o);
int vr_runtime_create(const vr_runtime_opts *o, vr_runtime **out,
                      vr_errbuf *err);
/* Drains and frees every model. */
void vr_runtime_free(vr_runtime *rt);

/* Loads a model: opens it once, then starts cfg->instances instances with
 * the config's precision/threads/max batch, each profiled at load.
 * VR_EEXIST if a model of that name is loaded. */
int vr_rt_load(vr_runtime *rt, const vr_model_config *cfg, vr_errbuf *err);
/* Loads cfg and, once its instances are up, swaps it for the loaded model
 * of that name (if any), which then drains (Triton's reload: requests keep
 * being served throughout; on any error the old model stays). */
int vr_rt_reload(vr_runtime *rt, const vr_model_config *cfg, vr_errbuf *err);
/* Removes the model from routing, drains its queues, frees it. */
int vr_rt_unload(vr_runtime *rt, const char *name, vr_errbuf *err);
/* Drains every model (used at shutdown); later submits are rejected. */
void vr_rt_shutdown(vr_runtime *rt);

/* Copies the config of a loaded model. VR_ENOENT if not loaded. */
int vr_rt_model_config(vr_runtime *rt, const char *name, vr_model_config *out);
/* The version directory a loaded model is served from (Triton layout), 1
 * for flat layouts or when not loaded. Cheap (no config copy). */
int vr_rt_model_version(vr_runtime *rt, const char *name);
/* The labels of a loaded model's output (Triton's label_filename), with a
 * reference the caller releases (vr_labels_release); NULL when the model
 * is not loaded or the output has none. */
struct vr_labels *vr_rt_model_labels(vr_runtime *rt, const char *model,
                                     const char *output);
/* Names of loaded models: fills up to cap pointers to copies the caller
 * frees with vr_free; returns the count. */
int vr_rt_model_names(vr_runtime *rt, char **names, int cap);
/* Whether the model is loaded and has at least one active instance. */
int vr_rt_model_ready(vr_runtime *rt, const char *name);

/* ---- control-plane API: instances --------------------------------------- */

typedef struct vr_rt_instance_opts {
  vr_precision precision;
  int threads;
  int max_batch;
  int64_t max_queue_delay_us;
  /* AsyFunc: pair_end > 0 makes the instance a body whose nodes
   * [pair_begin, pair_end) a shadow may share (vr_rt_pair_shadow); it
   * serves exactly what a plain instance serves. */
  int pair_begin, pair_end;
} vr_rt_instance_opts;

/* Adds an instance of a loaded model with the given variant settings;
 * returns its id (> 0) or a negative VR_E*. Profiles it before it takes
 * traffic. */
int vr_rt_add_instance(vr_runtime *rt, const char *model,
                       const vr_rt_instance_opts *o, vr_errbuf *err);
/* Stops routing to the instance, drains it, frees it. */
int vr_rt_remove_instance(vr_runtime *rt, int instance_id, vr_errbuf *err);
/* Caps the rows the instance puts in one batch (clamped to 1..its max
 * batch, which stays its identity; a request larger than the cap runs
 * alone). The policy's SET_BATCH: the largest batch that keeps the SLO. */
int vr_rt_set_batch_cap(vr_runtime *rt, int instance_id, int cap,
                        vr_errbuf *err);

/* AsyFunc's layer-level scaling: pairs a body instance with a shadow on
 * `threads` more cores. split[b] (b = 1..max batch; NULL = in proportion
 * to the cores) is how many of a batch's b rows the shadow runs (the
 * b_B/b_S split, policy/asyfunc.h vr_af_split); `process` puts the shadow
 * in its own process (runtime/shm_pair.h). Returns when the shadow is
 * loaded and takes rows (*load_ms: how long that took). VR_EINVAL for an
 * instance that is no body, VR_EEXIST if it has a shadow. */
typedef struct vr_rt_shadow_opts {
  int threads;
  int process;
  const int *split;
} vr_rt_shadow_opts;
int vr_rt_pair_shadow(vr_runtime *rt, int instance_id,
                      const vr_rt_shadow_opts *o, double *load_ms,
                      vr_errbuf *err);
/* Releases the instance's shadow: a paired batch in flight finishes,
 * later batches run on the body alone; nothing queued is lost. VR_ENOENT
 * when the instance has none. */
int vr_rt_unpair_shadow(vr_runtime *rt, int instance_id, vr_errbuf *err);

typedef enum vr_rt_state {
  VR_INST_LOADING = 0,
  VR_INST_ACTIVE,
  VR_INST_OVERLOADED, /* queue holds more than a full batch's deadline */
  VR_INST_DRAINING,
  VR_INST_STATE_COUNT
} vr_rt_state;
const char *vr_rt_state_name(vr_rt_state s);

/* Monitoring snapshot of one instance. */
typedef struct vr_rt_instance_stats {
  int id;
  char model[VR_NAME_MAX];
  char variant[VR_NAME_MAX]; /* vr_rt_variant_name: "<model>-<prec>-t<T>-b<B>" */
  vr_rt_state state;
  vr_precision precision;
  int threads, max_batch;
  int batch_cap;           /* rows per batch now (<= max_batch) */
  int64_t max_queue_delay_us;
  int queue_rows;          /* waiting now */
  int busy_rows;           /* in the batch running now */
  double served_qps;       /* rows per second over the last second */
  double latency_ewma_ns;  /* observed request latency (arrival -> done) */
  uint64_t served, dropped, batches; /* served: rows; dropped: requests */
  uint64_t dropped_rows;   /* the rows of the dropped requests */
  vr_latency profile;      /* measured at load, then followed (p50) */
  /* AsyFunc */
  int body;                /* can pair (opts.pair_end > 0) */
  int pair_begin, pair_end;
  int shadow_threads;      /* cores of its shadow now; 0 = none */
  double shadow_load_ms;   /* the last shadow's load time */
  uint64_t paired_batches, shadow_rows; /* run with a shadow, its rows */
  uint64_t shadows_attached, shadows_released;
} vr_rt_instance_stats;

/* Fills up to cap entries for `model` (NULL = all models); returns the
 * number of instances (may exceed cap). */
int vr_rt_instances(vr_runtime *rt, const char *model,
                    vr_rt_instance_stats *out, int cap);

/* ---- requests ------------------------------------------------------------ */

/* Validates the inputs against the model config, routes to the
 * least-loaded active instance and queues. Always returns 0 after calling
 * or scheduling done(); returns a negative VR_E* *without* calling done()
 * only for a NULL request or callback. */
int vr_rt_submit(vr_runtime *rt, const char *model, vr_rt_request *req);
/* Same, to a chosen instance (control plane routing). Submitted from a
 * done() callback of a batch (a pipeline hop's fan-out), the request
 * enters its queue once every request of that batch is answered, together
 * with everything else those answers submitted to the same instance: an
 * executor never starts a batch with part of what one batch produced at
 * one instant (the pipeline simulator's rule too, sim/psim.h). */
int vr_rt_submit_to(vr_runtime *rt, int instance_id, vr_rt_request *req);

/* Whether the outputs of a run of `batch` rows carry the batch in dim 0,
 * as the runtime needs to split a batched result into its requests' rows
 * (Triton's rule for a model with max_batch_size > 0). 0, or
 * VR_EUNSUPPORTED naming the first output that does not, with its shape:
 * the runtime refuses such a model at load, registration refuses it too. */
int vr_rt_check_batch_major(const vr_tensor *out, int n_out, int batch, vr_errbuf *err);

/* ---- per-variant statistics (survive unload) ---------------------------- */

#define VR_RT_PROM_BUCKETS 18
extern const double vr_rt_prom_le[VR_RT_PROM_BUCKETS]; /* seconds; last=+Inf */

typedef struct vr_rt_hist_prom {
  uint64_t counts[VR_RT_PROM_BUCKETS]; /* non-cumulative */
  double sum_s;
  uint64_t count;
} vr_rt_hist_prom;

typedef struct vr_rt_variant_stats {
  char model[VR_NAME_MAX];
  char variant[VR_NAME_MAX];
  uint64_t outcomes[VR_OUT_COUNT];
  uint64_t slo_violations; /* served, but after its deadline */
  uint64_t batches, batch_rows;
  int64_t last_inference_ms; /* wall-clock ms since the epoch */
  vr_rt_hist_prom request, queue, compute;
  uint64_t p50_ns, p90_ns, p99_ns; /* request latency percentiles */
  /* Triton's split of compute (per successful request: the batch's
   * gather, run and this request's output copy), ns summed. */
  uint64_t compute_n;
  double compute_input_ns, compute_infer_ns, compute_output_ns;
  /* Triton's batch_stats: executions per batch size (1..VR_RT_MAX_BATCH)
   * and their summed phase times, ns. */
  struct {
    uint64_t count;
    double input_ns, infer_ns, output_ns;
  } by_batch[VR_RT_MAX_BATCH + 1];
} vr_rt_variant_stats;

/* Counts a request submitted with settle_stats that the runtime served:
 * answered (or never answered: the client went away), as served; or
 * dropped by its caller instead of answered (the server's answer-time
 * deadline check, policy/drop.h vr_drop_answer_due), as dropped in
 * vario_requests_total and an SLO violation, in none of the served-request
 * histograms, with r->outcome set to VR_OUT_DROPPED. Once per request;
 * no-op for one not served or already settled. */
void vr_rt_settle(vr_runtime *rt, vr_rt_request *r, int dropped);

/* Calls fn for each variant ever served (model = NULL: all). The stats are
 * a copy taken under the lock. */
void vr_rt_foreach_variant(vr_runtime *rt, const char *model,
                           void (*fn)(const vr_rt_variant_stats *s, void *u),
                           void *u);

#endif
