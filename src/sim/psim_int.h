/* Internals of the pipeline simulator shared by psim.c (the engine, Loki's
 * rules), psim_live.c (the live executor's rules, cfg->live_rules) and
 * psim_summary.c (the summary). Not
 * for use outside src/sim/. */
#ifndef VR_SIM_PSIM_INT_H
#define VR_SIM_PSIM_INT_H

#include "base/vec.h"
#include "policy/select.h"
#include "sim/heap.h"
#include "sim/psim.h"
#include "sim/rng.h"

enum { EV_ARRIVAL = 1, EV_DONE, EV_TICK, EV_READY };

typedef struct preq {
  int32_t q, next;
  int32_t region;   /* the parent's output it came from; -1 root / drawn */
  int16_t task, slot;
  float acc;        /* product of accuracies along the path so far */
  float budget_sum; /* budgets of the tasks done so far (ms) */
  int64_t enq_ns;   /* when it joined this task's queue */
  uint64_t id;      /* stage streams: its identity (vr__psim_id_*) */
} preq;

typedef struct pquery {
  int64_t t_ns, deadline_ns, last_ns;
  int32_t pending, paths;
  double acc_sum;
  int dropped;
  float min_acc; /* end to end, percent (live rules) */
} pquery;

typedef struct pinst {
  int slot, task, batch;
  int accepting, started, dead;
  int64_t ready_ns, gen; /* gen: events of an earlier life are stale */
  int32_t head, tail;
  int qlen, nb;
  int32_t inflight[VR_PROF_MAX_BATCH];
} pinst;

typedef struct psim {
  const vr_psim_cfg *cfg;
  const vr_pipeline *p;
  const vr_profile *prof;
  vr_rng rng;
  vr_rng trng[VR_PIPE_MAX_TASKS];     /* stage streams: per task */
  uint32_t depth[VR_PIPE_MAX_TASKS];  /* stage streams: event rank */
  vr_heap heap;
  vr_vec reqs;   /* preq pool */
  int32_t free_req;
  vr_vec queries; /* pquery */
  vr_vec inst;    /* pinst */
  int alive;      /* started, not dead instances (workers in use) */
  vr_pipe_plan plan;
  vr_pipe_routes routes;
  int routes_ok;
  int64_t now;
  /* demand estimate */
  int64_t tick_arrivals;
  int64_t arrived, finished, bad; /* root queries: arrived, finished, of
                                     those late or dropped */
  vr_vec ctl_arr; /* int64 arrival times since the last controller call */
  double ewma, last_qps, planned_for;
  double task_ewma[VR_PIPE_MAX_TASKS];
  int64_t task_seen[VR_PIPE_MAX_TASKS]; /* requests counted at last tick */
  double next_ctl_s;
  /* results */
  vr_psim_row *rows;
  int nrows;
  vr_vec lat;     /* float ms of served queries after warm-up */
  int64_t *outputs, *served_slot;
  vr_psim_summary *sum;
  vr_errbuf *err;
  /* live rules: the selection index over the instances now, one group per
   * task; instances a batch's outputs joined, to start after it */
  vr_select_index *ix;
  vr_snapshot snap;
  vr_snap_variant *svar;
  vr_snap_instance *sinst;
  size_t sinst_cap;
  int group[VR_PIPE_MAX_TASKS], levels[VR_PIPE_MAX_TASKS];
  vr_vec touched; /* int32 instance indexes */
} psim;

#define REQ(s, i) (&VR_VEC_AT(&(s)->reqs, preq, i))
#define QRY(s, i) (&VR_VEC_AT(&(s)->queries, pquery, i))
#define INST(s, i) (&VR_VEC_AT(&(s)->inst, pinst, i))

/* A request leaves the system: dropped (reason >= 0) or its path ended. */
void vr__psim_end(psim *s, int32_t ri, int reason);
/* Runs the nb requests in inst[ii].inflight; their end after the profiled
 * time (nb 0: the instance may retire). */
int vr__psim_run(psim *s, int ii, int nb);
/* Starts a batch on a free instance (by the rules in force). */
int vr__psim_start(psim *s, int ii);

/* psim_draw.c: the draws both engines make (psim.c and, with stage
 * streams, psim_stage.c), from one place so the two stay the same:
 * outputs of a request served on pv, the child index of one output (-1:
 * it leaves the pipeline), the service-time quantile of a batch, the
 * identities of a root query's request and of output j of request id, a
 * task's service-time stream, the tasks' depths (root 0), and the
 * routing draw of request id (stage streams). */
int vr__psim_fan_count(vr_rng *r, const vr_pipe_variant *pv, int exact);
int vr__psim_fan_child(vr_rng *r, const vr_pipe_variant *pv, int nchildren);
double vr__psim_quantile(vr_rng *r, int noise);
uint64_t vr__psim_id_root(uint64_t seed, int64_t query);
uint64_t vr__psim_id_child(uint64_t id, int j);
void vr__psim_task_rng(vr_rng *r, uint64_t seed, int task);
void vr__psim_depths(const vr_pipeline *p, uint32_t *depth);
double vr__psim_route_u(uint64_t id);

/* The row (tick) of time t_ns; the last row for a later one. */
int vr__psim_row_of(const psim *s, int64_t t_ns);

/* psim_summary.c: sorts n floats (no NaN) ascending in linear time (tmp
 * holds n); fills s->sum from the run, and the per-tick CSV if csv. */
void vr__psim_sort_floats(float *a, float *tmp, size_t n);
void vr__psim_summarise(psim *s, FILE *csv);

/* psim_live.c */
int vr__psim_live_index(psim *s);
int vr__psim_live_hop(psim *s, int32_t ri, int start);
int vr__psim_live_start(psim *s, int ii);
int vr__psim_live_touched(psim *s);

#endif
