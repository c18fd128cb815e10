/* Internals of live pipelines shared by pipes.c (registry, checks, JSON,
 * metrics) and pipes_run.c (the request path). Not for use outside
 * src/control/. */
#ifndef VR_CONTROL_PIPES_INT_H
#define VR_CONTROL_PIPES_INT_H

#include <pthread.h>

#include "base/clock.h"
#include "base/hist.h"
#include "base/map.h"
#include "control/pipes.h"
#include "policy/pipeline.h"

/* Observed requests in and child requests out of one variant of a task:
 * out / in is its multiplicative factor, measured live. */
typedef struct pl_vstat {
  char variant[VR_STORE_VNAME_MAX];
  uint64_t in, out;
  uint64_t out_child[VR_PIPE_MAX_CHILDREN]; /* per child of the task */
} pl_vstat;

/* A task resolved against the registry at registration. */
typedef struct pl_task {
  vr_fanout fan;                            /* kind NONE for a leaf */
  int child_of_label[VR_FANOUT_MAX_LABELS]; /* task index, or -1 */
  int64_t in_chw[3];                        /* first input, no batch dim */
  vr_tensor_info in0;                       /* the first model's first input */
  int levels;    /* tasks on the longest path from here to a leaf, >= 1 */
  int depth_max; /* tasks on the longest root-to-leaf path */
  /* live statistics, under the pipe's mutex */
  uint64_t in, out, outcomes[VR_POUT_COUNT];
  int nvs;
  pl_vstat vs[VR_PIPE_MAX_VARIANTS];
} pl_task;

struct pl_pol; /* pipes_policy.c: the pipeline policy's live state */

#define PL_ARR_RING 8192

typedef struct pl_pipe {
  vr_pipeline *spec; /* owned */
  struct pl_pol *pol; /* owned; NULL: every hop routed by INFaaS selection */
  int pol_gen;        /* bumped when pol is dropped (under mu): a hop's slot
                         is an index into the view of its generation */
  uint64_t arrivals;  /* root rows received (the policy's demand) */
  uint64_t requests;  /* root requests started (open = requests - the
                         sum of outcomes) */
  /* Root arrival times (pipes clock, ns, non-decreasing) since the policy
   * last took them: what a tuner reads (pipe_policy.h); a ring that keeps
   * the newest PL_ARR_RING when a tick is late */
  int64_t arr_t[PL_ARR_RING];
  int arr_head, arr_n;
  int64_t arr_last; /* the newest time recorded, taken or not */
  char *spec_text;   /* owned: the canonical spec as persisted */
  pl_task *t;        /* spec->ntasks, owned */
  pthread_mutex_t mu;
  int refs;          /* registry + requests in flight */
  uint64_t outcomes[VR_POUT_COUNT];
  vr_hist lat;       /* end-to-end latency of finished requests, ns */
  uint64_t met;      /* requests answered OK by their deadline */
  /* End-to-end accuracy served (percent) summed over OK requests: per
   * request the mean over its leaf hops of the product of the accuracies
   * on the path from the root (Loki's multiplicative accuracy). */
  double acc_sum;
  uint64_t acc_n;
  /* The recent past for the dashboard's live p99: two windows of
   * PL_WIN_NS, win[cur] began at win_start (pipes clock), the other is
   * the one before it. */
  vr_hist win[2];
  int cur;
  int64_t win_start;
  /* The pipeline that replaced this one when its apps' variants changed
   * (pipes_refresh.c), with a reference: requests in flight here, or
   * started on a reference taken before the swap, count there. Set under
   * mu, never cleared. */
  struct pl_pipe *next;
  /* The apps' variants (a signature) a recompile failed on: not tried
   * again until they change (policy/refresh thread only). */
  uint64_t stale_sig;
  /* Made by a refresh: its policy's first tick routes by INFaaS selection
   * (loading what the apps' variants now need) and plans at the next, as
   * after a dropped view (vr__pipe_pol_drop). Policy thread only. */
  int refreshed;
  /* Why the policy has no view of this pipeline, as last warned (written
   * by the policy thread under mu; GET reads it): said once, not every
   * tick, until the reason changes. */
  char nopol[512];
  /* The text of the controller's plan followed last (pipes_follow.c),
   * carried to a replacement (under mu): a worker hands a plan over once
   * per version, and a replacement starts with no plan of its own. */
  char *follow_plan;
} pl_pipe;

#define PL_WIN_NS 2000000000LL

struct vr_pipes {
  vr_control *ctl;
  /* pipeline policy (pipes_policy.c): its thread and options */
  vr_pipes_policy_opts popts;
  const struct vr_pipe_policy_def *pdef; /* NULL: none */
  pthread_t pthread;
  int prunning, pstop;
  pthread_cond_t pcv;
  double plast; /* monotonic seconds of the last policy tick */
  /* apps the policy marked managed in the control plane (policy thread) */
  char (*managed)[VR_PIPE_NAME_MAX];
  int nmanaged;
  vr_runtime *rt;
  vr_store *store;
  /* hops on other workers (vr_pipes_set_remote; pipes_follow.c) */
  vr_pipes_remote_fn remote;
  vr_pipes_remote_has_fn remote_has;
  void *remote_user;
  vr_clock *clock;    /* monotonic, or a test's */
  int64_t miss_sync_ns; /* last store read for a name not served (atomic) */
  pthread_mutex_t refresh_mu; /* vr_pipes_refresh (pipes_refresh.c) */
  pthread_mutex_t mu; /* the map */
  vr_map by_name;     /* name -> pl_pipe* */
};

/* Records a root arrival in pp->arr_t, kept non-decreasing across the
 * policy's takes too: threads take the mutex in any order, and one that
 * read its clock before a tick took the ring and records after it made the
 * tuner refuse that tick's arrivals as out of order. Caller holds pp->mu. */
static inline void vr__pipe_note_arrival(pl_pipe *pp, int64_t t_ns) {
  if (t_ns < pp->arr_last) t_ns = pp->arr_last;
  pp->arr_last = t_ns;
  if (pp->arr_n == PL_ARR_RING) { /* full: drop the oldest */
    pp->arr_head = (pp->arr_head + 1) % PL_ARR_RING;
    pp->arr_n--;
  }
  pp->arr_t[(pp->arr_head + pp->arr_n++) % PL_ARR_RING] = t_ns;
}

/* Parses and resolves a spec against the registry: a new pipeline with
 * one reference, not served yet. */
int vr__pipe_compile(vr_pipes *p, const char *json, size_t len, pl_pipe **out, vr_errbuf *err);
/* Locks and returns the pipeline that counts what happens on pp: pp, or
 * the newest that replaced it (pl_pipe.next). Caller unlocks its mu. */
pl_pipe *vr__pipe_lock_current(pl_pipe *pp);

/* Takes a reference to the named pipeline, or NULL. */
pl_pipe *vr__pipes_get(vr_pipes *p, const char *name);
/* The same, reading the store (at most ten times a second) for a name not
 * served here: another process may have stored it since the last read. */
pl_pipe *vr__pipes_get_synced(vr_pipes *p, const char *name);
void vr__pipe_unref(pl_pipe *pp);
/* Up to cap registered pipelines into out, each with a reference the
 * caller drops (vr__pipe_unref): a pipeline deleted meanwhile stays alive
 * until the caller is done. followed_only: only those following a plan
 * made elsewhere (pipes_follow.c). Returns how many. */
int vr__pipes_ref_all(vr_pipes *p, pl_pipe **out, int cap, int followed_only);
/* Records one finished hop / request in the pipeline's statistics. */
void vr__pipe_count_hop(pl_pipe *pp, const vr_pipe_hop_rec *h);
void vr__pipe_count_request(pl_pipe *pp, const vr_pipe_result *r);
/* pipes_policy.c: stops the policy thread (if any). */
void vr__pipes_stop_policy(vr_pipes *p);
/* pipes_policy.c: frees a pipeline's policy state (NULL is fine). */
void vr__pipe_pol_free(struct pl_pol *pol);
/* pipes_policy.c: drops pp's policy state when a variant of its planning
 * view went away (its model unregistered): the next tick (or followed
 * plan) builds the view again from what the control plane serves, and
 * hops are routed by INFaaS selection meanwhile. Without pp->mu. */
void vr__pipe_pol_drop(pl_pipe *pp);
/* The request path under a pipeline policy: whether pp routes by its
 * plan now. */
int vr__pipe_pol_active(pl_pipe *pp);

/* End-to-end p99 (ms) of the requests that finished in the last one to two
 * windows before now; NAN when none did. Caller holds pp->mu. */
double vr__pipe_recent_p99(const pl_pipe *pp, int64_t now_ns);

#endif
