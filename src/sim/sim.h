/*
 * vario sim: a discrete-event simulator of a serving cluster that runs the
 * real policies (src/policy) once per control period.
 *
 * Model: workers (cores, GPUs, memory, price per second, start latency) hold
 * instances of variants; each instance has a FIFO batch queue and serves
 * dynamic batches (whatever is queued, up to its max batch, never waiting
 * to fill) with service times drawn from the variant's recorded latency
 * percentiles. Requests that can no longer meet their deadline are dropped
 * when their batch would start (early drop). Queries are routed per
 * request (INFaaS variant selection, or the baselines' fixed variants).
 * Every tick the simulator builds a vr_snapshot, runs vr_policy_tick and
 * applies the actions (loads take the profile's load time, new workers
 * their start time; billing covers every worker from start to removal).
 *
 * Time is a virtual clock (base/clock.h) in nanoseconds.
 */
#ifndef VR_SIM_SIM_H
#define VR_SIM_SIM_H

#include <stdint.h>
#include <stdio.h>

#include "base/hist.h"
#include "policy/policy.h"
#include "sim/workload.h"

typedef struct vr_sim_wtype {
  char name[32];
  int cores, gpus;
  int64_t mem_bytes;
  double price_per_s;
  double start_s; /* worker start latency */
  int initial;    /* workers up at t = 0 */
  int max;        /* cap (0 = unlimited) */
} vr_sim_wtype;

/* Injected interference: worker `worker` (creation order) runs `factor`
 * times slower during [at_s, until_s). */
typedef struct vr_sim_interf {
  int worker;
  double at_s, until_s, factor;
} vr_sim_interf;

typedef struct vr_sim_cfg {
  char name[128];
  double duration_s;
  double warmup_s; /* periods ending by then are left out of the summary */
  double tick_s;
  uint64_t seed;
  int noise;     /* 1: draw service times from percentiles; 0: use p50 */
  int max_queue; /* per instance; arrivals beyond it are dropped */
  int bill_instances;   /* "billing": "instances": cost is each instance's
                           profile cost_per_s while it exists (loading to
                           removal), as INFaaS §6.2 bills a variant
                           instance, instead of the workers' price from
                           start to removal ("workers", the default) */
  int runtime_batching; /* 1: batch like src/runtime/instance.c (drop only
                           requests infeasible alone, shrink the batch to
                           meet the head's deadline); 0: greedy (default) */
  int warm_start; /* 1 (default): before traffic, every policy provisions
                    warm — the baselines their fixed lists, INFaaS one
                    instance of the variant it selects per workload; 0:
                    INFaaS loads on the first query, cold (as a live
                    server that was just started) */
  double request_overhead_ms; /* added to a batch's service time per request
                                 (the server's per-request copy/scatter/reply
                                 work on the executor thread); default 0 */
  vr_profile *profiles;
  size_t nprofiles;
  vr_sim_wtype *wtypes;
  size_t nwtypes;
  vr_workload *streams;
  size_t nstreams;
  vr_sim_interf *interf;
  size_t ninterf;
  vr_policy_cfg policy; /* fixed[] hold profile indices */
} vr_sim_cfg;

/* One row of the per-second time series. */
typedef struct vr_sim_row {
  double t_s;
  int64_t demand, served, dropped, late;
  double p99_ms, accuracy, cost;
  int workers, instances;
} vr_sim_row;

/* Every figure counts the requests that arrived after the warm-up, each
 * with its own outcome whenever that came: demand = served + dropped +
 * unfinished. */
typedef struct vr_sim_summary {
  int64_t demand, served, dropped, late, rejected; /* rejected: of dropped */
  int64_t unfinished;         /* queued or running when the run ended */
  int64_t unfinished_overdue; /* of those, already past their deadline */
  double violation_rate; /* (late + dropped + unfinished_overdue) / demand */
  double p50_ms, p99_ms, mean_ms;
  double accuracy; /* mean accuracy of served requests */
  double cost;     /* total, in price units */
  double mean_instances, max_instances, mean_workers;
  int64_t events, actions;
  double wall_s;   /* real time the run took */
  double sim_rps;  /* simulated requests per wall second */
} vr_sim_summary;

/* Where a run writes its time series (either may be NULL). The instances
 * file is long format: t_s,variant,instances (non-zero entries only). */
typedef enum {
  VR_SIM_SERVED = 1, /* variant: the profile index that served it */
  VR_SIM_DROPPED,    /* its deadline could not be met (early drop) */
  VR_SIM_REJECTED,   /* never queued: infeasible, no instance, no room */
} vr_sim_outcome;

typedef struct vr_sim_out {
  FILE *csv;
  FILE *instances_csv;
  /* Optional: called once per request when its outcome is known (tests
   * compare them with the live runtime's); variant -1 unless served. */
  void (*on_request)(void *user, const vr_req *r, int outcome, int variant);
  void *user;
} vr_sim_out;

/* Runs the simulation. Consumes the streams' runtime state (re-opened at
 * start, closed files at the end; the config stays valid for another run).
 * 0, or an error with a message (malformed trace line: "file:line: ...").
 */
int vr_sim_run(vr_sim_cfg *cfg, const vr_sim_out *out, vr_sim_summary *sum,
               vr_errbuf *err);

/* Config loading (config.c). Relative paths resolve against the config's
 * directory; "data:REL" paths against data_dir (NULL: VR_ENOENT naming the
 * missing --data). `policy` picks an entry of "policies" (NULL: the single
 * "policy", default INFaaS). On error cfg holds nothing to free. */
int vr_sim_cfg_load(const char *path, const char *data_dir,
                    const char *policy, vr_sim_cfg *cfg, vr_errbuf *err);
int vr_sim_cfg_parse(const char *text, size_t len, const char *name,
                     const char *base_dir, const char *data_dir,
                     const char *policy, vr_sim_cfg *cfg, vr_errbuf *err);
void vr_sim_cfg_free(vr_sim_cfg *cfg);

/* Proteus profiling CSV (proteus.c): appends one profile per (model, accel)
 * with batch sizes from the file. Options fill what the CSV lacks. */
typedef struct vr_proteus_opts {
  const char *csv_path;
  const char *variants_dir; /* model_variants/<family> lists, or NULL */
  const char **families;    /* only these families (NULL: all) */
  int nfamilies;
  const char **accels;      /* e.g. "onnxruntime_cpu" (NULL: all) */
  int naccels;
  int cpu_threads;          /* cores a CPU variant holds */
  double cpu_core_price_s, gpu_price_s;
  double load_ms_cpu, load_ms_gpu;
  int64_t mem_bytes;
} vr_proteus_opts;

int vr_proteus_load(const vr_proteus_opts *o, vr_profile **profiles,
                    size_t *n, vr_errbuf *err);

/* Writes the summary as JSON (report.c). */
int vr_sim_summary_write(const vr_sim_cfg *cfg, const vr_sim_summary *s,
                         FILE *f);
/* Plots a run's CSV with gnuplot into png/svg (by extension). 0, or
 * VR_EUNSUPPORTED when gnuplot is missing. */
int vr_sim_plot(const char *csv_path, const char *inst_csv_path,
                const char *image_path, const char *title, vr_errbuf *err);

#endif
