/*
 * vr_profile: the measured facts of one variant (a model at one precision,
 * thread count, max batch and device). Profiles are what the live server's
 * profiler writes and what the simulator replays, so both read the same
 * JSON (format: docs/API.md, "Profile JSON").
 *
 * A profile is a plain value: fixed-size arrays and strings, no pointers,
 * so it can be copied, stored in vectors and compared freely. Latency is
 * recorded for batch sizes 1, 2, 4, ..., 64 (VR_PROF_NB slots); a slot
 * holding a negative value is "not measured". Functions here are pure (no
 * I/O, no clock); reading files is the caller's business (sim/, control/).
 */
#ifndef VR_POLICY_PROFILE_H
#define VR_POLICY_PROFILE_H

#include <jansson.h>
#include <math.h>
#include <stdint.h>

#include "vario/status.h"

#define VR_PROF_NB 7 /* batch sizes 1,2,4,8,16,32,64 */
#define VR_PROF_MAX_BATCH 64
#define VR_PROF_NAME_MAX 64
#define VR_VARIANT_MAX 128

typedef enum { VR_DEV_CPU = 0, VR_DEV_GPU = 1 } vr_device;

/* The one latency profile of Vario: what the registration profiler
 * measures, what the simulator replays and what a live instance measures
 * at load and then follows while it serves (vr_latency_observe). Latency
 * in ms per batch slot (slot i = batch 2^i, batch 1..64); a slot holding a
 * value <= 0 is "not measured". p90/p99 are optional (an instance measures
 * the median only; the Proteus CSV records p90, not p99). Batch sizes
 * beyond 64 are extrapolated per item from the largest measured slot. */
typedef struct vr_latency {
  double p50_ms[VR_PROF_NB];
  double p90_ms[VR_PROF_NB];
  double p99_ms[VR_PROF_NB];
} vr_latency;

/* All slots "not measured". */
void vr_latency_init(vr_latency *l);

/* Latency in ms at quantile q (0.5, 0.9 or 0.99 style; anything in
 * (0,1]) for an arbitrary batch size >= 1, interpolating linearly between
 * measured batch sizes and extrapolating per-item beyond the largest one.
 * Quantiles between recorded ones are interpolated too (see .c). INFINITY
 * when nothing is measured. */
double vr_latency_ms(const vr_latency *l, int batch, double q);

/* vr_latency_ms at one batch size, prepared: the slots it interpolates
 * between and their recorded quantiles, for a caller that draws many
 * quantiles of one batch size (a simulator's service times).
 * vr_latency_ms(l, b, q) is vr_lat_at_ms(&a, q) after vr_lat_at_init(&a,
 * l, b): one code, the same arithmetic, the same bits. */
typedef struct vr_lat_slot {
  int n;           /* recorded quantiles: p50, then p90, p99 if present */
  double qs[3], vs[3];
  double below;    /* the value extrapolated at q -> 0 */
} vr_lat_slot;
typedef struct vr_lat_at {
  int kind;        /* 0 nothing measured; 1 one slot; 2 per item beyond
                      the largest slot; 3 between two slots */
  vr_lat_slot lo, hi;
  double batch, blo, bhi;
} vr_lat_at;

void vr_lat_at_init(vr_lat_at *a, const vr_latency *l, int batch);

/* A slot's latency at quantile q: linear between recorded quantiles,
 * down to `below` under the median, the last slope above the top one. */
static inline double vr_lat_slot_ms(const vr_lat_slot *s, double q) {
  if (s->n == 1) return s->vs[0];
  if (q <= 0.5) return s->below + (s->vs[0] - s->below) * (q / 0.5);
  for (int i = 1; i < s->n; i++)
    if (q <= s->qs[i])
      return s->vs[i - 1] + (s->vs[i] - s->vs[i - 1]) * (q - s->qs[i - 1]) /
                                (s->qs[i] - s->qs[i - 1]);
  int n = s->n;
  double slope = (s->vs[n - 1] - s->vs[n - 2]) / (s->qs[n - 1] - s->qs[n - 2]);
  return s->vs[n - 1] + slope * (q - s->qs[n - 1]);
}

static inline double vr_lat_at_ms(const vr_lat_at *a, double q) {
  if (a->kind == 0) return INFINITY;
  double vlo = vr_lat_slot_ms(&a->lo, q);
  if (a->kind == 1) return vlo;
  if (a->kind == 2) return vlo * a->batch / a->blo;
  double vhi = vr_lat_slot_ms(&a->hi, q);
  return vlo + (vhi - vlo) * (a->batch - a->blo) / (a->bhi - a->blo);
}

/* The conservative "tail": p99 if recorded, else p90, else p50. */
double vr_latency_tail_ms(const vr_latency *l, int batch);

/* Folds an observed run of `batch` rows (ms) into the median of its slot
 * (EWMA, weight 1/8; an unmeasured slot takes it as is) when batch is
 * exactly a slot's size, so estimates follow the machine (contention,
 * interference) instead of staying at load-time values. */
void vr_latency_observe(vr_latency *l, int batch, double ms);

typedef struct vr_profile {
  char model[VR_PROF_NAME_MAX];     /* registered model, e.g. "fmnist_cnn_s" */
  char app[VR_PROF_NAME_MAX];       /* app/task it serves, e.g. "fmnist" */
  char variant[VR_VARIANT_MAX]; /* unique name "fmnist_cnn_s-int8-t1-b8" */
  char precision[16];          /* "fp32", "bf16", "int8", ... */
  int threads;                 /* cores the variant occupies */
  int max_batch;               /* 1..64 */
  int device;                  /* vr_device */
  double load_ms;              /* time to load and warm up an instance */
  int64_t mem_bytes;           /* resident memory of one instance */
  vr_latency lat;     /* latency percentiles per batch slot */
  double accuracy;   /* percent on the validation set, 0..100 */
  double cost_per_s; /* price of the resources one instance holds */
} vr_profile;

/* Clears p to "nothing measured" (all latency slots -1, threads 1,
 * max_batch 1). */
void vr_profile_init(vr_profile *p);

/* Batch size of slot i (1 << i). */
static inline int vr_prof_batch(int slot) { return 1 << slot; }

/* Checks that p is usable: names set, threads >= 1, max_batch in 1..64,
 * p50 measured at batch 1, latencies positive, percentiles ordered,
 * accuracy in [0,100]. 0 or VR_EINVAL with a message. */
int vr_profile_validate(const vr_profile *p, vr_errbuf *err);

/* vr_latency_ms / vr_latency_tail_ms of the profile's latency. */
static inline double vr_profile_latency_ms(const vr_profile *p, int batch,
                                           double q) {
  return vr_latency_ms(&p->lat, batch, q);
}
static inline double vr_profile_tail_ms(const vr_profile *p, int batch) {
  return vr_latency_tail_ms(&p->lat, batch);
}

/* Peak throughput (queries/s) of one instance running full batches of
 * `batch` back to back: batch / p50(batch). */
double vr_profile_peak_qps(const vr_profile *p, int batch);

/* The largest batch b <= max_batch with 2 x tail(b) <= slo_ms (a query may
 * wait for the batch in service, then run in its own); 0 when even batch 1
 * misses: then the variant does not meet the SLO. */
int vr_profile_batch_for_slo(const vr_profile *p, double slo_ms);

/* Saturation throughput of one instance under a latency SLO: the peak
 * qps at vr_profile_batch_for_slo (0 if the SLO is infeasible). */
double vr_profile_sat_qps(const vr_profile *p, double slo_ms);

/* JSON conversion. to_json returns a new reference (NULL on ENOMEM).
 * from_json fills *p from an object and validates it; on error *p is
 * unspecified and err names the offending field. */
json_t *vr_profile_to_json(const vr_profile *p);
int vr_profile_from_json(const json_t *obj, vr_profile *p, vr_errbuf *err);

const char *vr_device_name(int device);
/* "cpu"/"gpu" -> device, or -1. */
int vr_device_parse(const char *s);

#endif
