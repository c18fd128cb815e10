/*
 * Open-loop HTTP load generator (the engine of `vario bench`).
 *
 * Requests are sent at pre-computed arrival times (the caller draws them:
 * constant, Poisson, Gamma, trace) over `connections` keep-alive
 * connections driven by one epoll thread; when every connection is busy a
 * due request waits on the client, and that wait counts in its latency
 * (latency = answer time - scheduled arrival), so a slow server cannot
 * hide its queueing (no coordinated omission). With no arrivals the
 * generator runs closed-loop: every connection sends its next request as
 * soon as the previous answer arrives, for duration_s.
 *
 * Payload: a KServe v2 infer request built from one tensor (JSON "data" or
 * the binary extension), or a plain GET of `path` (front-end tests).
 * Ownership: opts and the data they point to are the caller's and must
 * stay valid during vr_lg_run; results are plain values.
 */
#ifndef VR_SERVER_LOADGEN_H
#define VR_SERVER_LOADGEN_H

#include <stddef.h>
#include <stdint.h>

#include "vario/dtype.h"
#include "vario/status.h"

#define VR_LG_MAX_DIMS 8 /* = VR_MAX_DIMS; engine.h is not included so
                           * that layers above (sim) can use this header */

typedef struct vr_lg_arrival {
  int64_t t_ns;   /* since the start */
  int64_t slo_ns; /* latency SLO (deadline - arrival); 0 = none */
} vr_lg_arrival;

typedef struct vr_lg_opts {
  const char *host;
  int port;
  /* GET mode when model is NULL: GET path. */
  const char *path;
  /* Infer mode: POST /v2/models/<model>/infer with one input tensor. */
  const char *model;
  const char *input_name;
  vr_dtype dtype;
  int ndim;
  int64_t shape[VR_LG_MAX_DIMS]; /* shape[0] = rows per request */
  const void *data;           /* numel(shape) x payloads elements */
  int payloads;               /* binary mode: request i sends payload
                                 i % payloads (default 1: all the same) */
  int binary;                 /* binary tensor extension in and out */
  int send_timeout;           /* put each request's SLO in "timeout" */
  int priority;
  /* Model-less mode (control plane): `model` names an app, requests go to
   * POST /v2/apps/<app>/infer with each request's SLO as "latency_ms" (the
   * SLO itself, not what is left of it when sent: that goes in "timeout"
   * with send_timeout) and min_accuracy (percent) when > 0. */
  int app_mode; /* 1; VR_LG_PIPELINE: POST /v2/pipelines/<model>/infer,
                   the same parameters end to end */
  double min_accuracy;
  /* Arrivals (open loop) or none (closed loop for duration_s). */
  const vr_lg_arrival *arrivals;
  size_t n_arrivals;
  int connections;    /* default 16 */
  double duration_s;  /* closed loop length; open loop cut-off (0 = all) */
  double drain_s;     /* wait for answers after the last send (default 10) */
  const char *csv_path; /* per-second CSV, or NULL */
  /* Live progress: when >= 0, a one-line status (sent, ok, p99 so far) is
   * rewritten on this fd ("\r", no newline until the end) twice a second.
   * vr_lg_opts_init sets -1 (off). */
  int progress_fd;
} vr_lg_opts;

#define VR_LG_PIPELINE 2

void vr_lg_opts_init(vr_lg_opts *o);
/* "models", "apps" or "pipelines": the path segment requests go to. */
const char *vr_lg_target_kind(const vr_lg_opts *o);

typedef struct vr_lg_result {
  uint64_t sent, ok, dropped, rejected, errors, unfinished;
  /* open loop: arrivals never sent, every connection still busy when the
   * drain ended (client-side queueing: the server did not keep up) */
  uint64_t unsent;
  double elapsed_s;        /* the arrival window (open) or the run (closed) */
  /* arrivals/s over the arrival window (sent + unsent), and ok/s over the
   * time answers came in (to the last one, the drain included) */
  double offered_qps, throughput_qps;
  double p50_us, p90_us, p99_us, p999_us, mean_us, max_us;
  double slo_attainment;   /* ok within SLO / (sent + unsent) */
  double early_drop_rate;  /* 504 answers / sent */
  double compute_p50_us;   /* server-reported batch compute time */
  double overhead_p50_us;  /* p50 of (latency - compute) over ok answers */
  /* CPU the generator itself used (its thread's CPU seconds / elapsed):
   * near 1, the client, not the server, may be what limits the run */
  double client_cpu_cores;
} vr_lg_result;

int vr_lg_run(const vr_lg_opts *o, vr_lg_result *res, vr_errbuf *err);

#endif
