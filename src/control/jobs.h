/*
 * Offline jobs (INFaaS): batch inference over an .npy file that runs only
 * on spare capacity. A job names an app + minimum accuracy (the cheapest
 * variant per query that meets it is used; latency does not matter
 * offline) or a model, an input .npy (N x ...) and an output path; the
 * result is the model's first output for every row, as .npy.
 *
 * One runner thread executes jobs in submission order, 64 rows at a time,
 * on its own engine session (one thread). Before each chunk it asks the
 * control plane whether the worker has room: it pauses while online
 * utilisation is above `max_util` (default 0.4), while the last control
 * period had late online answers or an interfered instance, or while no
 * core is free. Paused time is reported per job.
 *
 * With a jobs directory the queue is journaled there (jobs_int.h): a job
 * is on disk before vr_jobs_submit returns its id, a running one keeps
 * the rows it computed, and vr_jobs_create reads them back, so that the
 * jobs a killed or restarted server had accepted run (again, from their
 * last computed row) or stay answerable under the same ids.
 *
 * Ownership: vr_jobs borrows the control plane and the store; it owns the
 * job records (ids stay valid until vr_jobs_free).
 */
#ifndef VR_CONTROL_JOBS_H
#define VR_CONTROL_JOBS_H

#include <stdint.h>

#include "control/control.h"

typedef enum vr_job_state {
  VR_JOB_QUEUED = 0,
  VR_JOB_RUNNING,
  VR_JOB_PAUSED,
  VR_JOB_DONE,
  VR_JOB_FAILED,
} vr_job_state;
const char *vr_job_state_name(vr_job_state s);

typedef struct vr_job_req {
  const char *app;      /* with min_accuracy, or */
  const char *model;    /* a registered model (its fp32 variant) */
  double min_accuracy;  /* percent */
  const char *input;    /* .npy, rows along dim 0 */
  const char *output;   /* .npy written when done */
} vr_job_req;

typedef struct vr_job_info {
  int id;
  vr_job_state state;
  char variant[128];
  int64_t rows, rows_done;
  double paused_s, run_s;
  char output[512];
  char error[512];
} vr_job_info;

typedef struct vr_jobs vr_jobs;

typedef struct vr_jobs_opts {
  vr_control *ctl; /* borrowed */
  vr_store *store; /* borrowed */
  double max_util; /* pause above this online utilisation; 0 = 0.4 */
  int64_t poll_ns; /* re-check period while paused; 0 = 100 ms */
  const char *dir; /* the journal's directory (the server's <repo>/.jobs,
                      where job outputs are written), or NULL: none */
} vr_jobs_opts;

int vr_jobs_create(const vr_jobs_opts *o, vr_jobs **out, vr_errbuf *err);
/* Stops the runner (a running job stops between chunks, marked failed;
 * in the journal it stays queued and resumes at the next create). */
void vr_jobs_free(vr_jobs *j);
/* Validates (input readable, variant exists) and queues; returns id > 0
 * (VR_EIO: its record could not be written). */
int vr_jobs_submit(vr_jobs *j, const vr_job_req *r, vr_errbuf *err);
/* 0, or VR_ENOENT for an unknown id. */
int vr_jobs_get(vr_jobs *j, int id, vr_job_info *out);
/* Where the server keeps job inputs and outputs (opts.dir: the journal's
 * directory, journaled or not), or NULL when none was given. */
const char *vr_jobs_dir(const vr_jobs *j);

/* What the runner asks before each chunk (also used by tests). */
typedef struct vr_ctl_capacity {
  double util;      /* mean over online instances of load / saturation */
  int free_cores;
  int degraded;     /* late answers last period, or an interfered instance */
} vr_ctl_capacity;
void vr_control_capacity(vr_control *c, vr_ctl_capacity *out);

#endif
