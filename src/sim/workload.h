/*
 * Workload streams for the simulator: each produces requests (arrival
 * time, deadline, minimum accuracy) one at a time, so memory stays constant
 * whatever the length of a trace.
 *
 * Kinds: constant (evenly spaced), poisson, gamma (inter-arrivals with a
 * given coefficient of variation, as in InferLine), piecewise (rate points,
 * linear ramps or steps, Poisson by thinning), diurnal (sinusoidal rate
 * with spikes, Poisson by thinning), counts (a file with the number of
 * requests in each second), trace (the Proteus format
 * `arrival_ms,qos,deadline_ms[,accuracy]`, '#' comments).
 *
 * Ownership: a vr_workload owns its arrays (pts, spikes), its path string
 * and the FILE it opens; vr_wl_close releases them.
 */
#ifndef VR_SIM_WORKLOAD_H
#define VR_SIM_WORKLOAD_H

#include <stdint.h>
#include <stdio.h>

#include "policy/profile.h"
#include "sim/rng.h"
#include "vario/status.h"

typedef enum {
  VR_WL_CONSTANT = 0,
  VR_WL_POISSON,
  VR_WL_GAMMA,
  VR_WL_PIECEWISE,
  VR_WL_DIURNAL,
  VR_WL_COUNTS,
  VR_WL_TRACE,
  VR_WL__COUNT
} vr_wl_kind;

typedef struct vr_wl_point {
  double t_s, rate;
} vr_wl_point;

typedef struct vr_wl_spike {
  double at_s, dur_s, mult;
} vr_wl_spike;

typedef struct vr_req {
  int64_t t_ns;        /* arrival */
  int64_t deadline_ns; /* arrival + latency SLO */
  float min_acc;       /* percent */
  int32_t stream;
} vr_req;

typedef struct vr_workload {
  int kind;             /* vr_wl_kind */
  char target_kind;     /* 'a' app, 'm' model */
  char target[VR_VARIANT_MAX];
  double slo_ms;        /* per-request SLO (traces may override) */
  double min_accuracy;
  double start_s, end_s; /* active window; end_s <= 0: until the sim ends */
  double rate, cv;       /* constant/poisson/gamma */
  vr_wl_point *pts;      /* piecewise */
  int npts, step;
  double base, amp, period_s, phase_s; /* diurnal */
  vr_wl_spike *spikes;
  int nspikes;
  char *path;            /* counts/trace file */
  int trace_slo;         /* trace: use the file's deadline_ms (default 1) */
  /* runtime */
  vr_rng rng;
  FILE *f;
  long line;
  double t_s;            /* time of the last arrival (s) */
  double rmax;           /* thinning bound */
  double cnt_pos;        /* counts: position within the second */
  long cnt_left, cnt_sec;
  int done;
} vr_workload;

typedef struct vr_trace_rec {
  double arrival_ms;
  int qos;
  double deadline_ms;
  double accuracy; /* < 0 when absent */
} vr_trace_rec;

/* Parses one trace line (without the newline). 1: a record; 0: blank or
 * comment; VR_EFORMAT: malformed (err says which field, no position). */
int vr_trace_parse_line(const char *line, size_t len, vr_trace_rec *out,
                        vr_errbuf *err);

/* A Gamma stream of root queries (an app target, no file): the rate and
 * coefficient of variation; every other field zero. */
vr_workload vr_wl_gamma(double rate, double cv);

/* Rate (qps) of a piecewise/diurnal/constant stream at time t_s. */
double vr_wl_rate_at(const vr_workload *w, double t_s);

/* Opens files and seeds the stream. 0 or an error naming the file. */
int vr_wl_open(vr_workload *w, uint64_t seed, vr_errbuf *err);
/* Next request: 1 produced, 0 exhausted (or past end_s / horizon_s), or a
 * negative code with "file:line: ..." in err for malformed input. */
int vr_wl_next(vr_workload *w, double horizon_s, vr_req *out, vr_errbuf *err);
void vr_wl_close(vr_workload *w);

const char *vr_wl_kind_name(int kind);
int vr_wl_kind_parse(const char *s);

#endif
