/*
 * Offline jobs (see jobs.h): a queue, one runner thread, chunked execution
 * gated by the control plane's view of spare capacity; with a jobs
 * directory, journaled (jobs_int.h, jobs_disk.c).
 */
#include "control/jobs.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/npy.h"
#include "base/vec.h"
#include "control/control_int.h"
#include "control/jobs_int.h"

typedef vr__job job;

struct vr_jobs {
  vr_jobs_opts o;
  char dir[512]; /* where the server keeps job files (vr_jobs_dir); "" = not said */
  int lock_fd;   /* holds dir's journal (flock), -1 = none: jobs in memory only */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  int stop;
  vr_vec jobs; /* job*, by id - 1; NULL: an id whose record was not read */
};

const char *vr_job_state_name(vr_job_state s) {
  static const char *n[] = {"queued", "running", "paused", "done", "failed"};
  return s >= 0 && s <= VR_JOB_FAILED ? n[s] : "?";
}

/* ---- capacity ------------------------------------------------------------ */

void vr_control_capacity(vr_control *c, vr_ctl_capacity *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&c->mu);
  const vr_snapshot *s = &c->drv.snap;
  int n = 0;
  for (size_t i = 0; i < s->ninstances; i++) {
    const vr_snap_instance *in = &s->instances[i];
    if (in->state == VR_IS_DRAINING || in->state == VR_IS_LOADING) continue;
    double sat = vr_policy_sat_qps(&s->variants[in->variant]);
    double q = in->arrival_qps > in->served_qps ? in->arrival_qps : in->served_qps;
    out->util += sat > 0 ? q / sat : 1.0;
    n++;
    if (in->state == VR_IS_INTERFERED) out->degraded = 1;
  }
  if (n) out->util /= n;
  if (c->last_late > 0) out->degraded = 1;
  out->free_cores = c->worker.free_cores;
  pthread_mutex_unlock(&c->mu);
}

/* Holds (+1) or gives back (-1) the core a running chunk uses, so the
 * autoscaler does not place an online instance on it meanwhile. */
static void hold_core(vr_control *c, int d) {
  pthread_mutex_lock(&c->mu);
  c->loading_cores += d;
  c->worker.free_cores -= d;
  pthread_mutex_unlock(&c->mu);
}

/* ---- choosing the variant ------------------------------------------------ */

/* Cheapest per query among one-thread fp32/bf16 variants meeting the
 * accuracy. int8 is left out: jobs open engine sessions straight from
 * model.onnx, without the repository's calibration.npy the runtime uses. */
static int pick_variant(vr_jobs *j, const vr_job_req *r, job *jb, vr_errbuf *err) {
  vr_store *s = j->o.store;
  double acc = r->min_accuracy; /* percent */
  double best = 1e300;
  vr_store_rdlock(s);
  size_t n;
  const vr_variant_rec *const *v =
      r->app ? vr_store_app_variants(s, r->app, VR_ORDER_ACCURACY, &n)
             : vr_store_model_variants(s, r->model, &n);
  if (r->app && !n) { /* a typo is not an accuracy no variant reaches */
    vr_store_unlock(s);
    return vr_errf(err, VR_ENOENT, "no registered app named '%s'", r->app);
  }
  if (r->app) n = vr_store_app_count_accurate(s, r->app, acc);
  for (size_t i = 0; i < n; i++) {
    if (v[i]->threads != 1 || v[i]->precision == VR_PREC_INT8) continue;
    json_t *jj = json_loads(v[i]->profile_json, 0, NULL);
    vr_profile p;
    int ok = jj && vr_profile_from_json(jj, &p, NULL) == 0;
    json_decref(jj);
    double cost = ok ? vr_policy_query_cost(&p) : 1e300;
    if (cost < best) {
      best = cost;
      snprintf(jb->info.variant, sizeof jb->info.variant, "%.127s", v[i]->name);
      const vr_model_rec *m = vr_store_model(s, v[i]->model);
      snprintf(jb->dir, sizeof jb->dir, "%s", m ? m->dir : "");
      jb->prec = v[i]->precision;
      jb->max_batch = v[i]->max_batch;
    }
  }
  vr_store_unlock(s);
  if (best < 1e300) return 0;
  return vr_errf(err, r->app ? VR_EINFEASIBLE : VR_ENOENT,
                 r->app ? "no one-thread fp32/bf16 variant of app '%s' reaches %g%%"
                        : "no model named '%s' (or no one-thread variant)",
                 r->app ? r->app : r->model, acc);
}

/* ---- running ------------------------------------------------------------- */

static void set_state(vr_jobs *j, job *jb, vr_job_state st) {
  pthread_mutex_lock(&j->mu);
  jb->info.state = st;
  pthread_mutex_unlock(&j->mu);
}

/* Waits until the worker has spare capacity; 0, or -1 when stopping. */
static int wait_capacity(vr_jobs *j, job *jb) {
  for (;;) {
    pthread_mutex_lock(&j->mu);
    int stop = j->stop;
    pthread_mutex_unlock(&j->mu);
    if (stop) return -1;
    vr_ctl_capacity cap;
    vr_control_capacity(j->o.ctl, &cap);
    if (cap.util <= j->o.max_util && !cap.degraded && cap.free_cores >= 1) {
      set_state(j, jb, VR_JOB_RUNNING);
      return 0;
    }
    set_state(j, jb, VR_JOB_PAUSED);
    struct timespec ts = {j->o.poll_ns / VR_NS_PER_S, j->o.poll_ns % VR_NS_PER_S};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&j->mu);
    jb->info.paused_s += j->o.poll_ns / 1e9;
    pthread_mutex_unlock(&j->mu);
  }
}

/* Rows [from, rows) of x into *out (allocated at the first chunk unless
 * a part file gave it), each chunk appended to the part file. */
static int run_chunks(vr_jobs *j, job *jb, vr_session *s, const vr_npy *x, int64_t from,
                      vr__job_part *part, float **out, int64_t *out_row, vr_errbuf *err) {
  size_t row = x->nbytes / (size_t)x->shape[0];
  const vr_tensor_info *ti = vr_session_input(s, 0);
  for (int64_t i = from; i < x->shape[0];) {
    if (wait_capacity(j, jb)) return vr_errf(err, VR_ESHUTDOWN, "stopped");
    int b = (int)(x->shape[0] - i < jb->max_batch ? x->shape[0] - i : jb->max_batch);
    vr_tensor in = {ti->name, x->dtype, x->ndim, {0}, (char *)x->data + i * row, b * row};
    memcpy(in.shape, x->shape, sizeof in.shape);
    in.shape[0] = b;
    vr_tensor y[16];
    if (vr_session_num_outputs(s) > 16)
      return vr_errf(err, VR_EUNSUPPORTED, "model has %d outputs", vr_session_num_outputs(s));
    int64_t t0 = vr_now_ns();
    hold_core(j->o.ctl, 1);
    int rc = vr_session_run(s, b, &in, 1, y, vr_session_num_outputs(s), err);
    hold_core(j->o.ctl, -1);
    if (rc) return rc;
    /* one output row per input row, of one size: the result is sized
     * from the first chunk (the runtime checks the same per batch) */
    if (y[0].ndim < 1 || y[0].shape[0] != b || !y[0].nbytes ||
        y[0].nbytes % ((size_t)b * sizeof(float)) ||
        (*out && y[0].nbytes != (size_t)b * (size_t)*out_row * sizeof(float)))
      return vr_errf(err, VR_EUNSUPPORTED,
                     "output '%s' is not one row per input row (%lld rows, %zu bytes for a "
                     "batch of %d): offline jobs need that", y[0].name ? y[0].name : "",
                     y[0].ndim ? (long long)y[0].shape[0] : 0LL, y[0].nbytes, b);
    if (!*out) {
      *out_row = (int64_t)(y[0].nbytes / (size_t)b / sizeof(float));
      *out = vr_malloc((size_t)x->shape[0] * *out_row * sizeof(float));
      if (!*out) return vr_errf(err, VR_ENOMEM, "out of memory for the result");
      part->out_row = *out_row;
    }
    memcpy(*out + i * *out_row, y[0].data, y[0].nbytes);
    if ((rc = vr__job_part_append(part, x->shape[0], *out, i, b, err))) return rc;
    i += b;
    pthread_mutex_lock(&j->mu);
    jb->info.rows_done = i;
    jb->info.run_s += (vr_now_ns() - t0) / 1e9;
    pthread_mutex_unlock(&j->mu);
  }
  return 0;
}

/* Opens jb's part file: the rows an earlier process computed, unless its
 * rows are not of the model's output (the model was replaced): then
 * afresh. *from = the first row to compute. */
static int resume(vr_jobs *j, job *jb, vr_session *s, vr__job_part *part, float **out,
                  int64_t *from, vr_errbuf *err) {
  int rc = vr__job_part_open(jb, part, out, from, err);
  const vr_tensor_info *o = vr_session_output(s, 0);
  int64_t row = 1;
  for (int d = 1; d < o->ndim; d++) row = o->shape[d] > 0 && row > 0 ? row * o->shape[d] : -1;
  if (!rc && *out && row > 0 && row != part->out_row) {
    vr_warn("job %d: its computed rows have %lld values, the model's output %lld: from row 0",
            jb->info.id, (long long)part->out_row, (long long)row);
    vr_free(*out);
    *out = NULL;
    *from = 0;
    vr__job_part_close(part, 1);
    vr__job_part_init(jb, part);
    rc = vr__job_part_open(jb, part, out, from, err);
  }
  if (!rc && *from) {
    vr_info("job %d resumes at row %lld of %lld", jb->info.id, (long long)*from,
            (long long)jb->info.rows);
    pthread_mutex_lock(&j->mu);
    jb->info.rows_done = *from;
    pthread_mutex_unlock(&j->mu);
  }
  return rc;
}

/* Runs jb; with a journal, from the rows its part file holds (the part
 * is left open in *part for the runner to drop once the end is recorded). */
static int run_job(vr_jobs *j, job *jb, vr__job_part *part, vr_errbuf *err) {
  vr_npy x = {0};
  vr_model *m = NULL;
  vr_session *s = NULL;
  float *out = NULL;
  int64_t out_row = 0, from = 0;
  char path[VR_STORE_PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/model.onnx", jb->dir);
  int rc = vr_npy_read(jb->input, &x, err);
  /* read again at run time: a file replaced since the submission */
  if (!rc && (x.ndim < 1 || x.shape[0] < 1))
    rc = vr_errf(err, VR_EINVAL, "input '%s' has no rows", jb->input);
  if (!rc) {
    pthread_mutex_lock(&j->mu);
    jb->info.rows = x.shape[0];
    pthread_mutex_unlock(&j->mu);
  }
  if (!rc) rc = vr_model_load(path, &m, err);
  if (!rc) {
    vr_session_opts so;
    vr_session_opts_init(&so);
    so.precision = jb->prec;
    so.threads = 1;
    so.max_batch = jb->max_batch;
    rc = vr_session_create(m, &so, &s, err);
  }
  if (!rc && vr_session_output(s, 0)->dtype != VR_DT_F32)
    rc = vr_errf(err, VR_EUNSUPPORTED, "offline jobs write float32 outputs only");
  if (!rc && j->lock_fd >= 0) rc = resume(j, jb, s, part, &out, &from, err);
  if (out) out_row = part->out_row;
  if (!rc) rc = run_chunks(j, jb, s, &x, from, part, &out, &out_row, err);
  if (!rc) {
    const vr_tensor_info *o = vr_session_output(s, 0);
    int64_t shape[VR_MAX_DIMS];
    memcpy(shape, o->shape, sizeof shape);
    shape[0] = x.shape[0];
    rc = vr_npy_write(jb->info.output, VR_DT_F32, shape, o->ndim, out, err);
  }
  vr_free(out);
  if (s) vr_session_free(s);
  if (m) vr_model_free(m);
  vr_npy_free(&x);
  return rc;
}

static job *next_queued(vr_jobs *j) {
  for (size_t i = 0; i < j->jobs.len; i++) {
    job *jb = VR_VEC_AT(&j->jobs, job *, i);
    if (jb && jb->info.state == VR_JOB_QUEUED) return jb;
  }
  return NULL;
}

/* Records how jb ended (under mu). A job stopped by the server's
 * shutdown is not recorded: its record stays queued, so that it runs
 * again (from its part file) when the server starts. */
static void record_end(vr_jobs *j, job *jb, int rc, vr__job_part *part) {
  vr_errbuf e2 = {0};
  int keep = rc == VR_ESHUTDOWN;
  if (j->lock_fd >= 0 && !keep && vr__job_rec_write(j->dir, jb, &e2)) {
    vr_warn("job %d: %s (it runs again at the next start)", jb->info.id, e2.msg);
    keep = 1;
  }
  vr__job_part_close(part, !keep);
}

static void *runner(void *arg) {
  vr_jobs *j = arg;
  pthread_mutex_lock(&j->mu);
  for (;;) {
    job *jb = NULL;
    while (!j->stop && !(jb = next_queued(j))) pthread_cond_wait(&j->cv, &j->mu);
    if (j->stop) break;
    jb->info.state = VR_JOB_RUNNING;
    pthread_mutex_unlock(&j->mu);
    vr_errbuf err = {0};
    vr__job_part part = {0};
    if (j->lock_fd >= 0) vr__job_part_init(jb, &part); /* named before anything can fail */
    int rc = run_job(j, jb, &part, &err);
    pthread_mutex_lock(&j->mu);
    jb->info.state = rc ? VR_JOB_FAILED : VR_JOB_DONE;
    if (rc) snprintf(jb->info.error, sizeof jb->info.error, "%s", err.msg);
    record_end(j, jb, rc, &part);
    vr_info("job %d %s (%s)", jb->info.id, vr_job_state_name(jb->info.state),
            rc ? err.msg : jb->info.output);
  }
  pthread_mutex_unlock(&j->mu);
  return NULL;
}

/* ---- API ----------------------------------------------------------------- */

/* A job read back runs what the store says its variant is now, not the
 * record's model directory (a record is a file; the store is the truth
 * on models): one whose variant was unregistered meanwhile fails, said
 * so, and is recorded failed. Before the runner starts. */
static void rebind(vr_jobs *j) {
  for (size_t i = 0; i < j->jobs.len; i++) {
    job *jb = VR_VEC_AT(&j->jobs, job *, i);
    if (!jb || jb->info.state != VR_JOB_QUEUED) continue;
    vr_store_rdlock(j->o.store);
    const vr_variant_rec *v = vr_store_variant(j->o.store, jb->info.variant);
    const vr_model_rec *m = v ? vr_store_model(j->o.store, v->model) : NULL;
    int ok = m && v->threads == 1 && v->precision != VR_PREC_INT8;
    if (ok) {
      snprintf(jb->dir, sizeof jb->dir, "%s", m->dir);
      jb->prec = v->precision;
      jb->max_batch = v->max_batch;
    }
    vr_store_unlock(j->o.store);
    if (ok) continue;
    jb->info.state = VR_JOB_FAILED;
    snprintf(jb->info.error, sizeof jb->info.error, "variant '%.200s' is no longer registered",
             jb->info.variant);
    vr_errbuf e2 = {0};
    if (vr__job_rec_write(j->dir, jb, &e2)) vr_warn("job %d: %s", jb->info.id, e2.msg);
    vr_warn("job %d: %s", jb->info.id, jb->info.error);
  }
}

/* A journal is one process's: two servers over one directory (two plain
 * serves on one repository; workers have one each, .jobs/<id>) would
 * write each other's job-<id>.json and resume each other's jobs. The
 * first holds an flock on dir/journal.lock for its life (the kernel drops
 * it when the process dies, however); the other keeps its jobs in memory
 * only. The fd, or -1. */
static int claim_journal(const char *dir) {
  char path[560];
  snprintf(path, sizeof path, "%s", dir);
  char *slash = strrchr(path, '/');
  if (slash && slash != path) { /* <repo>/.jobs/<worker>: .jobs first */
    *slash = 0;
    if (mkdir(path, 0700) && errno != EEXIST)
      vr_warn("jobs: cannot create %s: %s", path, strerror(errno));
  }
  snprintf(path, sizeof path, "%s/journal.lock", dir);
  int fd = -1;
  if ((mkdir(dir, 0700) && errno != EEXIST) ||
      (fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0) {
    vr_warn("jobs: cannot keep a journal in %s (%s): jobs are not kept across restarts", dir,
            strerror(errno));
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB)) {
    vr_warn("jobs: another server keeps its jobs' journal in %s (one repository, one"
            " directory): this one's jobs are not kept across restarts", dir);
    close(fd);
    return -1;
  }
  return fd;
}

int vr_jobs_create(const vr_jobs_opts *o, vr_jobs **out, vr_errbuf *err) {
  *out = NULL;
  vr_jobs *j = VR_NEW(vr_jobs);
  if (!j) return vr_errf(err, VR_ENOMEM, "out of memory");
  j->o = *o;
  if (j->o.max_util <= 0) j->o.max_util = 0.4;
  if (j->o.poll_ns <= 0) j->o.poll_ns = 100 * VR_NS_PER_MS;
  if (o->dir && strlen(o->dir) < sizeof j->dir)
    snprintf(j->dir, sizeof j->dir, "%s", o->dir);
  else if (o->dir)
    vr_warn("jobs: the path of %.64s... is too long for a journal: jobs are not kept across"
            " restarts", o->dir);
  j->lock_fd = j->dir[0] ? claim_journal(j->dir) : -1;
  pthread_mutex_init(&j->mu, NULL);
  pthread_cond_init(&j->cv, NULL);
  vr_vec_init(&j->jobs, sizeof(job *));
  int rc = j->lock_fd >= 0 ? vr__jobs_load(j->dir, &j->jobs, err) : 0;
  if (!rc && j->lock_fd >= 0) rebind(j);
  if (!rc && pthread_create(&j->thread, NULL, runner, j))
    rc = vr_errf(err, VR_ENOMEM, "cannot start the job runner");
  if (rc) {
    for (size_t i = 0; i < j->jobs.len; i++) vr_free(VR_VEC_AT(&j->jobs, job *, i));
    vr_vec_free(&j->jobs);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    if (j->lock_fd >= 0) close(j->lock_fd);
    vr_free(j);
    return rc;
  }
  *out = j;
  return 0;
}

void vr_jobs_free(vr_jobs *j) {
  if (!j) return;
  pthread_mutex_lock(&j->mu);
  j->stop = 1;
  pthread_cond_broadcast(&j->cv);
  pthread_mutex_unlock(&j->mu);
  pthread_join(j->thread, NULL);
  for (size_t i = 0; i < j->jobs.len; i++) vr_free(VR_VEC_AT(&j->jobs, job *, i));
  vr_vec_free(&j->jobs);
  pthread_cond_destroy(&j->cv);
  pthread_mutex_destroy(&j->mu);
  if (j->lock_fd >= 0) close(j->lock_fd); /* and the journal with it */
  vr_free(j);
}

int vr_jobs_submit(vr_jobs *j, const vr_job_req *r, vr_errbuf *err) {
  if ((!r->app == !r->model) || !r->input || !r->output)
    return vr_errf(err, VR_EINVAL, "a job needs an input, an output and an app or a model");
  if (strlen(r->input) >= 512 || strlen(r->output) >= 512)
    return vr_errf(err, VR_ERANGE, "path too long");
  job *jb = VR_NEW(job);
  if (!jb) return vr_errf(err, VR_ENOMEM, "out of memory");
  snprintf(jb->input, sizeof jb->input, "%s", r->input);
  snprintf(jb->info.output, sizeof jb->info.output, "%s", r->output);
  vr_npy x;
  int rc = vr_npy_read(r->input, &x, err); /* fail now, not in the queue */
  if (!rc) {
    jb->info.rows = x.ndim >= 1 ? x.shape[0] : 0;
    vr_npy_free(&x);
    if (jb->info.rows < 1) rc = vr_errf(err, VR_EINVAL, "input '%s' has no rows", r->input);
  }
  if (!rc) rc = pick_variant(j, r, jb, err);
  if (rc) {
    vr_free(jb);
    return rc;
  }
  pthread_mutex_lock(&j->mu);
  job *none = NULL;
  for (int k = 0; j->lock_fd >= 0 && k < 1000 && !vr__job_rec_free_id(j->dir, (int)j->jobs.len + 1);
       k++)
    if (vr_vec_push(&j->jobs, &none)) break; /* a file not read at load: its id is not reused */
  jb->info.id = (int)j->jobs.len + 1;
  if (jb->info.id > VR__JOB_MAX_ID || vr_vec_push(&j->jobs, &jb))
    rc = vr_errf(err, VR_ENOMEM, "no room for another job");
  /* on disk before it is answered: a job accepted is not lost */
  else if (j->lock_fd >= 0 && (rc = vr__job_rec_write(j->dir, jb, err)))
    j->jobs.len--;
  else
    rc = jb->info.id;
  pthread_cond_broadcast(&j->cv);
  pthread_mutex_unlock(&j->mu);
  if (rc < 0) vr_free(jb);
  return rc;
}

const char *vr_jobs_dir(const vr_jobs *j) { return j->dir[0] ? j->dir : NULL; }

int vr_jobs_get(vr_jobs *j, int id, vr_job_info *out) {
  pthread_mutex_lock(&j->mu);
  int ok = id >= 1 && (size_t)id <= j->jobs.len && VR_VEC_AT(&j->jobs, job *, id - 1);
  if (ok) *out = VR_VEC_AT(&j->jobs, job *, id - 1)->info;
  pthread_mutex_unlock(&j->mu);
  return ok ? 0 : VR_ENOENT;
}
