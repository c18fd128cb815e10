/*
 * Runtime internals shared by runtime.c (models, routing), instance.c
 * (queue + executor) and stats.c. Not for use outside src/runtime/.
 *
 * Locking order: rt->admin_mu (held by load/unload/add/remove instance
 * for their whole duration, so a model cannot be freed under an instance
 * being built) before rt->reap_pass_mu (the reaper's pass; an instance's
 * removal waits on it, reaper.c) before rt->lock (rwlock: models map and
 * instance lists) before inst->mu (one instance's queue) before
 * rt->stats_mu. Executors never take rt->lock, so draining under a
 * released rt->lock cannot deadlock.
 */
#ifndef VR_RUNTIME_INT_H
#define VR_RUNTIME_INT_H

#include <pthread.h>

#include "base/ewma.h"
#include "base/hist.h"
#include "base/map.h"
#include "base/rate.h"
#include "base/vec.h"
#include "runtime/labels.h"
#include "runtime/runtime.h"

typedef struct vr_rt_model vr_rt_model;

/* Per-variant counters and histograms; owned by rt->vstats, never freed
 * before the runtime so that metrics survive unload/reload. */
typedef struct vr_rt_vstats {
  vr_rt_variant_stats pub;
  vr_hist lat; /* request latency, ns */
} vr_rt_vstats;

typedef struct vr_rt_instance {
  int id;
  vr_runtime *rt;
  vr_rt_model *model; /* outlives the instance */
  vr_rt_instance_opts opts;
  char variant[VR_NAME_MAX];
  void *sess;         /* backend session, used by the executor only */
  vr_latency prof;    /* guarded by mu after start */
  vr_rt_vstats *vs;
  pthread_t thread;
  int started;
  /* Guarded by mu: */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  vr_rt_request *head; /* sorted by (prio_key, arrival) */
  int queue_rows, busy_rows; /* stored atomically: vr_inst_load reads them
                                without mu */
  int queue_len;       /* requests in the queue */
  int64_t run_since;   /* the executor's batch started (rt clock)... */
  int run_rows;        /* ...of this many rows; 0: idle */
  int batch_cap;       /* rows per batch now: 1..opts.max_batch (SET_BATCH) */
  int stopping;
  vr_rt_state state;
  vr_rate served_rate;
  vr_ewma lat_ewma;
  uint64_t served, dropped, batches; /* served: rows; dropped: requests */
  uint64_t dropped_rows;
  /* AsyFunc (under mu): the shadow's cores (0 = none) and rows per batch
   * size (split[b], b = 0..max_batch), counters. attach_mu serialises
   * pair/unpair of this instance (they run without mu: loads are slow). */
  pthread_mutex_t attach_mu;
  int shadow_threads;
  int *split;
  double shadow_load_ms;
  uint64_t paired_batches, shadow_rows, shadows_attached, shadows_released;
  /* Executor-only scratch: one max-batch buffer per input. */
  void *stage[VR_RT_MAX_IO];
} vr_rt_instance;

struct vr_rt_model {
  vr_model_config cfg;
  void *handle;      /* backend model, shared by the sessions */
  vr_labels *labels[VR_RT_MAX_IO]; /* per output; NULL: no label file */
  vr_vec instances;  /* vr_rt_instance* */
  unsigned rr;       /* round-robin start for routing ties */
};

struct vr_runtime {
  vr_runtime_opts opts;
  const vr_rt_backend *be;
  pthread_mutex_t admin_mu; /* serialises load/unload/add/remove */
  pthread_rwlock_t lock;
  vr_map models;     /* name -> vr_rt_model* */
  int next_id;
  int shutting_down;
  pthread_mutex_t stats_mu;
  vr_map vstats;     /* variant -> vr_rt_vstats* */
  /* reaper.c: answers requests due for dropping that wait behind an
   * overrunning batch. reap_mu guards reap_stop; reap_on: thread
   * started; reap_pass_mu is held over each pass, answers included. */
  pthread_t reap_th;
  pthread_mutex_t reap_mu, reap_pass_mu;
  pthread_cond_t reap_cv;
  int reap_on, reap_stop;
};

static inline int64_t vr_rt_now(vr_runtime *rt) {
  return vr_clock_now(rt->opts.clock);
}

/* runtime.c: plugging. Between vr__rt_plug and vr__rt_unplug on one
 * thread, vr_rt_submit_to holds the requests it is given (validated when
 * released); unplug queues them, each instance's share under one hold of
 * its lock. An executor plugs around the answers of one batch. */
void vr__rt_plug(vr_runtime *rt);
void vr__rt_unplug(vr_runtime *rt);

/* instance.c */
int vr_inst_create(vr_runtime *rt, vr_rt_model *m,
                   const vr_rt_instance_opts *o, vr_rt_instance **out,
                   vr_errbuf *err);
/* Measures the latency profile, then starts the executor (ACTIVE). */
int vr_inst_start(vr_rt_instance *in, vr_errbuf *err);
/* Failures found while rt->lock is held, answered once it is released:
 * a done() callback may submit again (a pipeline's fan-out) or take the
 * control plane's lock, which is held around runtime calls elsewhere
 * (control.c reads vr_rt_instances under its mutex), so no callback runs
 * under rt->lock. Linked through r->next, in order. */
typedef struct vr__rt_later {
  vr_rt_request *head, **tail;
} vr__rt_later;
#define VR__RT_LATER_INIT(l) {NULL, &(l).head}
/* Settles r as failed (err.code, err.msg from fmt; fmt NULL keeps the
 * message already in r->err.msg; end_ns now) and appends it to *l; vs
 * (may be NULL: not a variant's outcome) is where it counts. */
void vr__rt_fail_later(vr__rt_later *l, vr_rt_vstats *vs, vr_runtime *rt, vr_rt_request *r,
                       int code, vr_rt_outcome outcome, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
/* Answers what *l holds (call with rt->lock released): a dropped one is
 * first offered to the reroute hook (policy/drop.h), the rest are counted
 * and their done() called. *l is empty after. */
void vr__rt_answer_later(vr_runtime *rt, vr__rt_later *l);

/* Queues n validated requests under one hold of the instance's lock, so
 * its executor sees them all at once (in this order); the ones it refuses
 * or drops at once go on *later. Call with rt->lock held. */
void vr_inst_enqueue_many(vr_rt_instance *in, vr_rt_request **reqs, int n, vr__rt_later *later);
/* Stops accepting, serves what is queued, joins, frees. */
void vr_inst_destroy(vr_rt_instance *in);
int vr_inst_load(vr_rt_instance *in); /* queue + busy rows (racy read) */
/* While in's executor is stuck in a batch (policy/drop.h
 * vr_drop_batch_stuck: a paired run waiting on a stopped shadow process):
 * unlinks the queued requests due for dropping (vr_drop_due), counts them
 * and settles them on *later, so that they are answered when they become
 * due, not when the batch ends. The rule is the one the executor applies
 * when the batch ends; only the time of the answer changes, and only for
 * a batch the simulator never has (its batches take their profiled
 * time). Call with rt->lock held (read). */
void vr__inst_reap(vr_rt_instance *in, vr__rt_later *later);

/* reaper.c: a thread that calls vr__inst_reap on every listed instance
 * each VR__RT_REAP_NS, on a runtime of the monotonic clock (a virtual
 * clock's test drives time itself). start: 0 or VR_EIO; stop joins the
 * thread (no done() from it after) and may be called again; fence returns
 * once no pass that may have seen an instance already unlisted is left
 * (vr_inst_destroy: the requests it took are answered before the
 * instance's removal returns); fini after stop. */
#define VR__RT_REAP_NS (5 * 1000000LL)
int vr__rt_reaper_start(vr_runtime *rt, vr_errbuf *err);
void vr__rt_reaper_stop(vr_runtime *rt);
void vr__rt_reaper_fence(vr_runtime *rt);
void vr__rt_reaper_fini(vr_runtime *rt);
void vr_inst_stats(vr_rt_instance *in, vr_rt_instance_stats *s);
void vr_inst_set_batch_cap(vr_rt_instance *in, int cap);
int vr_inst_pair(vr_rt_instance *in, const vr_rt_shadow_opts *o, double *load_ms,
                 vr_errbuf *err);
int vr_inst_unpair(vr_rt_instance *in, vr_errbuf *err);

/* Completes a request with an error, counts it, calls done(); a dropped
 * one (VR_OUT_DROPPED) is first offered to the reroute hook, as
 * vr__rt_answer_later does. */
void vr_rt_fail(vr_rt_vstats *vs, vr_runtime *rt, vr_rt_request *r, int code,
                vr_rt_outcome outcome, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* stats.c */
vr_rt_vstats *vr_rt_vstats_get(vr_runtime *rt, const char *model,
                               const char *variant);
/* Records a finished request (ok or not) under stats_mu. */
void vr_rt_vstats_record(vr_runtime *rt, vr_rt_vstats *vs,
                         const vr_rt_request *r);
/* One executed batch of `rows` rows: nreq requests served, phase times
 * (gather inputs, run, copy outputs out) in ns. */
void vr_rt_vstats_batch(vr_runtime *rt, vr_rt_vstats *vs, int rows, int nreq,
                        int64_t in_ns, int64_t infer_ns, int64_t out_ns);
void vr_rt_vstats_free_all(vr_runtime *rt);

#endif
