/*
 * Profiler: measures what a variant costs and gives, on this machine, with
 * the real engine.
 *
 *  - load: model parse + session creation (ms) and the session's resident
 *    memory (vr_session_memory_bytes);
 *  - latency: p50/p90/p99 per batch size 1, 2, 4, ..., max_batch over a
 *    bounded number of runs (opts.runs, capped by opts.max_ms_per_batch);
 *  - accuracy: top-1 on the validation set, per precision.
 *
 * Latency at batch b depends on precision and threads but not on the
 * session's max batch (the engine compiles one plan per batch size), so the
 * registration measures the latency sweep once per (precision, threads) and
 * only load time and memory per max batch.
 *
 * Nothing here keeps state; every function frees what it creates.
 */
#ifndef VR_CONTROL_PROFILER_H
#define VR_CONTROL_PROFILER_H

#include "control/valset.h"
#include "policy/profile.h"
#include "vario/engine.h"


typedef struct vr_prof_opts {
  int runs;                /* timed runs per batch size; 0 = 20 */
  int warmup;              /* untimed runs per batch size; 0 = 2 */
  double max_ms_per_batch; /* stop a batch size's sampling after this; 0 = 400 */
  int calib_rows;          /* rows for int8 calibration; 0 = 128 */
  /* Idle gap before each timed run, as between requests in serving: the
   * engine's worker threads go to sleep and must wake, which a tight loop
   * never shows. 0 = 1000 us; < 0 = back to back. */
  int gap_us;
} vr_prof_opts;

/* Inputs the profiler feeds a model: one float tensor per model input with
 * room for 64 rows, filled from the validation rows (cycled) when given,
 * zeros otherwise; plus the int8 calibration tensor. Owns its buffers. */
typedef struct vr_prof_inputs {
  int n;
  vr_tensor t[4];
  void *buf[4];
  size_t row_bytes[4];
  vr_tensor calib;  /* first calib_rows rows; calib.data NULL if none */
  void *calib_buf;
} vr_prof_inputs;

/* Checks the validation set against the model (single float input whose
 * per-row shape matches) and builds the inputs. vs and calib may be NULL;
 * calib (an .npy) overrides the validation rows for calibration. */
int vr_prof_inputs_init(vr_prof_inputs *in, const vr_model *m,
                        const vr_valset *vs, const vr_npy *calib,
                        const vr_prof_opts *o, vr_errbuf *err);
void vr_prof_inputs_free(vr_prof_inputs *in);

/* Creates the session for a variant and reports creation time and memory.
 * On success *out is the caller's to free. */
int vr_prof_open(const vr_model *m, const vr_prof_inputs *in, vr_precision p,
                 int threads, int max_batch, vr_session **out,
                 double *create_ms, int64_t *mem_bytes, vr_errbuf *err);

/* Latency sweep over batch sizes 1..vr_session_max_batch(s) (powers of 2).
 * VR_EUNSUPPORTED when an output does not carry the batch in dim 0 (as
 * vr_prof_accuracy): the runtime would not load the variant. */
int vr_prof_latency_sweep(vr_session *s, const vr_prof_inputs *in,
                          const vr_prof_opts *o, vr_latency *out,
                          vr_errbuf *err);

/* Top-1 accuracy (fraction) of a session on the validation set. */
int vr_prof_accuracy(vr_session *s, const vr_valset *vs, double *acc,
                     vr_errbuf *err);

#endif
