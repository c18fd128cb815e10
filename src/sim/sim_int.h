/* Simulator internals shared by sim.c (data path) and sim_ctl.c (control
 * path: snapshots, actions, time series). */
#ifndef VR_SIM_SIM_INT_H
#define VR_SIM_SIM_INT_H

#include "base/clock.h"
#include "base/vec.h"
#include "policy/batch.h"
#include "policy/drop.h"
#include "policy/driver.h"
#include "policy/route.h"
#include "policy/select.h"
#include "sim/heap.h"
#include "sim/sim.h"

enum { EV_ARRIVAL = 1, EV_DONE, EV_LOADED, EV_TICK, EV_WORKER_UP };
enum { WS_REMOVED = 100 }; /* beyond vr_wstate: gone, not billed */

#define SIM_LAT_SAMPLES 128

typedef struct sim_worker {
  int64_t id;
  int index; /* creation order (interference injection names it) */
  int type, state;
  int cores, gpus, free_cores, free_gpus;
  int64_t mem, free_mem;
  double price;
  int64_t ready_ns, idle_since, started_ns;
  int ninst;
  int snap; /* index in the current snapshot, -1 */
} sim_worker;

typedef struct sim_inst {
  int64_t id;
  int variant;
  sim_worker *w;
  int state; /* vr_istate */
  int max_batch;
  int64_t ready_ns;
  vr_req *q; /* ring buffer */
  uint32_t qcap, qhead, qlen;
  int busy_n; /* requests of the batch in service (head of the ring) */
  int loading;
  int dead;
  int64_t replaces; /* MIGRATE: instance to drain once this one is ready */
  int hpos;         /* index in its variant's serving heap, -1 if absent */
  /* per-period monitoring */
  int64_t arrivals, served, batches, items;
  float lat[SIM_LAT_SAMPLES];  /* compute ms per batch (reservoir) */
  float ratio[SIM_LAT_SAMPLES]; /* same batch: ms / profiled p50 */
  int nlat;
} sim_inst;

typedef struct sim_variant {
  vr_profile prof;
  int state;
  double slo_ms;
  double sat;       /* saturation qps of one instance */
  int64_t arrivals, served;
  double min_slo;   /* smallest SLO routed to it this period */
  double max_acc;   /* highest min_accuracy routed to it this period */
  vr_vec serving;   /* sim_inst* that accept requests: a binary min-heap
                       ordered by vr_route_lighter (interfered, queue
                       length per batch row), so the least-loaded
                       instance is at the top (O(log k) upkeep) */
  int nloading;
  sim_inst *loading_one;
  int ever;         /* ever had an instance (instances CSV) */
} sim_variant;

typedef struct sim_stream {
  vr_workload *wl;
  int group;   /* selection group, -1 if unknown */
  int fixed;   /* baselines: variant serving it, -1 */
  /* memo of the last selection (pure function of the index) */
  uint64_t memo_gen;
  double memo_slo, memo_acc;
  vr_selection memo;
} sim_stream;

typedef struct vr_sim {
  vr_sim_cfg *cfg;
  vr_clock clock;
  vr_heap heap;
  vr_rng rng;
  sim_variant *var;
  size_t nvar;
  sim_stream *st;
  vr_vec workers; /* sim_worker* */
  vr_vec insts;   /* sim_inst* */
  int64_t next_id;
  /* policy, its state, selection index, actions, snapshot buffers; the
   * actuator table is sim_ctl.c's */
  vr_driver drv;
  /* this period and the whole run */
  vr_sim_row row;
  vr_hist *hist_period, *hist_all;
  double acc_period, acc_all;
  vr_sim_summary sum;
  int64_t warm_ns;         /* requests that arrived by then are not counted */
  int64_t last_record_ns;  /* end of the last recorded period */
  double inst_sum, worker_sum, counted_s; /* time-weighted, past the warm-up */
  vr_req *pending; /* per stream: its next request (in the heap) */
  int oom;
  int trace; /* VARIO_SIM_TRACE: log actions */
  const vr_sim_out *out;
  vr_errbuf *err;
} vr_sim;

/* sim.c */
void sim_try_start(vr_sim *s, sim_inst *in);
/* A new instance, loading (warm: ready at once); NULL if it does not fit
 * or on ENOMEM. */
sim_inst *sim_inst_new(vr_sim *s, int variant, sim_worker *w, int warm);
void sim_inst_drain(vr_sim *s, sim_inst *in);
void sim_maybe_dead(vr_sim *s, sim_inst *in);
/* Restores the serving heap after in's queue length or state changed. */
void sim_serving_fix(vr_sim *s, sim_inst *in);
sim_worker *sim_worker_new(vr_sim *s, int type, int64_t ready_ns);
sim_worker *sim_place(vr_sim *s, const vr_profile *p);
int sim_push(vr_sim *s, int kind, int64_t t, int a, void *p);
/* Warm start (cfg->warm_start): demand of one query per workload for the
 * variant its first request would go to, for the t = 0 policy tick. */
void sim_prime(vr_sim *s);

/* sim_ctl.c */
int sim_tick(vr_sim *s);
/* At the end of the run (the clock at its end): records the last partial
 * period, books what is still queued or running as unfinished, and
 * derives the summary's rates and latencies. */
void sim_finish(vr_sim *s);
int sim_ctl_init(vr_sim *s);
void sim_ctl_free(vr_sim *s);

#endif
