/*
 * Offline jobs' internals, shared by the runner (jobs.c) and the journal
 * (jobs_disk.c).
 *
 * The journal keeps, in the server-owned jobs directory, one record per
 * job (job-<id>.json: what to run and, once it ended, how) and the rows a
 * running job has computed (<output>.part), so that a job the server
 * accepted survives its process being killed or restarted: a queued or
 * interrupted job runs again from its last computed row, a finished one
 * is still answered for under its id. Records are replaced by rename, so
 * a kill leaves the old record or the new one, never half of one. A host
 * crash may lose the last writes (nothing is fsynced).
 */
#ifndef VR_CONTROL_JOBS_INT_H
#define VR_CONTROL_JOBS_INT_H

#include <stdio.h>

#include "base/vec.h"
#include "control/jobs.h"
#include "control/store.h"

typedef struct vr__job {
  vr_job_info info;
  char input[512];
  char dir[VR_STORE_PATH_MAX]; /* the model's repository entry */
  vr_precision prec;
  int max_batch;
} vr__job;

#define VR__JOB_MAX_ID (1 << 30)
#define VR__JOB_MAX_BATCH 65536

/* Parses a record (text, len bytes) into *out. A record names the files
 * of jobs_dir by their base names (joined to jobs_dir here); its output
 * must be one of them, out-*.npy (a record cannot make the server write
 * elsewhere). A running or paused state is read as queued (the process
 * that ran it is gone). 0, or VR_EFORMAT with what is wrong. */
int vr__job_rec_parse(const char *text, size_t len, const char *jobs_dir, vr__job *out,
                      vr_errbuf *err);
/* jb's record as JSON text (free() it); NULL when its output is not a
 * file of jobs_dir, a path is not UTF-8, or without memory. */
char *vr__job_rec_json(const vr__job *jb, const char *jobs_dir);
/* Whether id may be given to a new job: no file job-<id>.json (a record
 * skipped at load, a foreign one) is in jobs_dir. */
int vr__job_rec_free_id(const char *jobs_dir, int id);
/* Writes jb's record into jobs_dir (job-<id>.json, by rename). */
int vr__job_rec_write(const char *jobs_dir, const vr__job *jb, vr_errbuf *err);
/* Reads every record of jobs_dir into jobs (vr__job *, slot id - 1; a
 * missing id is a NULL slot; the caller owns the jobs). A record that
 * cannot be read is logged and skipped (its file stays: new ids step
 * over it, vr__job_rec_free_id). A missing directory is none. */
int vr__jobs_load(const char *jobs_dir, vr_vec *jobs, vr_errbuf *err);

/* The rows a running job has computed: <output>.part, a header (magic,
 * floats per row, rows) and the rows in order. */
typedef struct vr__job_part {
  FILE *fp;          /* open for appending; NULL: no journal */
  char path[560];
  int64_t out_row;   /* floats per output row; 0 until known */
} vr__job_part;

/* Names jb's part file (before anything can fail: the runner drops it). */
void vr__job_part_init(const vr__job *jb, vr__job_part *p);
/* Opens the part file p names. One left by an earlier process for the
 * same rows is kept if it holds a whole row: its whole rows are read into
 * *out (allocated here, rows x p->out_row floats) and *rows_done is how
 * many; anything else is started afresh (*out NULL, *rows_done 0). */
int vr__job_part_open(const vr__job *jb, vr__job_part *p, float **out, int64_t *rows_done,
                      vr_errbuf *err);
/* Appends rows [from, from + n) of out (out_row floats each; the header
 * first, when the part is new). */
int vr__job_part_append(vr__job_part *p, int64_t rows, const float *out, int64_t from,
                        int64_t n, vr_errbuf *err);
/* Closes it; with drop, removes the file (the result is written). */
void vr__job_part_close(vr__job_part *p, int drop);

#endif
