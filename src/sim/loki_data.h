/*
 * Loki's published artifact, read as it is (layout of ../shared/data/loki):
 *
 *   apps/APP.json                    app definition (policy/pipeline.h)
 *   model_variants/APP/<task>        `variant,accuracy` per line
 *   profiling/simulator_runtimes.csv `,Model,Accel,batchsize,avg_runtime,
 *                                     50th_pct,90th_pct,95th_pct` (ms)
 *   profiling/branching.csv          `,model,mult_factor,<child task>...`:
 *                                     per variant of a parent task, the
 *                                     multiplicative factor and the share
 *                                     of its outputs per child task
 *
 * Columns are found by their header names, so the order may change. A
 * variant listed by the app but absent from the runtimes file at the chosen
 * accelerator (efficientnet-b7 in the published files) cannot be simulated:
 * it is removed from the task, and the loader says so in `notes`.
 *
 * Profiles: one vr_profile per (task, variant), batch slots 1..64 from the
 * rows whose batch size is a power of two; p50 <- 50th_pct, p90 <-
 * 90th_pct (avg_runtime holds cold-start outliers: 194 ms vs a 41 ms median
 * for yolov5x at batch 1); accuracy from model_variants (percent).
 *
 * Ownership: vr_pipe_data owns the pipeline and the profile array; free
 * with vr_pipe_data_free.
 */
#ifndef VR_SIM_LOKI_DATA_H
#define VR_SIM_LOKI_DATA_H

#include "policy/pipeline.h"
#include "policy/profile.h"

/* A pipeline with a profile per (task, variant): prof[off[t] + v]. */
typedef struct vr_pipe_data {
  vr_pipeline *pipe;
  vr_profile *prof;
  int off[VR_PIPE_MAX_TASKS + 1]; /* off[ntasks] = number of profiles */
  char notes[512];                /* what the loader left out, or "" */
} vr_pipe_data;

void vr_pipe_data_free(vr_pipe_data *d);

/* Offsets off[] for p's current variant lists. */
void vr_pipe_data_index(vr_pipe_data *d);

/* Loads DATA_DIR/apps/APP.json and its variants, runtimes (rows of
 * accelerator `accel`, e.g. "onnxruntime_gpu_pascal"; NULL = that one) and
 * branching factors. Errors name the file and line. */
int vr_loki_load(const char *data_dir, const char *app, const char *accel,
                 vr_pipe_data *out, vr_errbuf *err);

/* The same from explicit paths: the app definition, the directory of
 * variant lists (NULL: accuracies stay unknown), the runtimes CSV and the
 * branching CSV (NULL: factors stay at their defaults). */
int vr_loki_load_files(const char *app_json, const char *variants_dir,
                       const char *runtimes_csv, const char *branching_csv,
                       const char *accel, vr_pipe_data *out, vr_errbuf *err);

#endif
