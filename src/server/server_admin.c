/*
 * State-changing model-less endpoints (docs/API.md "Model-less API"), all
 * behind the admin token (access.c):
 *
 *   POST /v2/apps/{app}/models   register: the ONNX file and its data sets
 *                                travel in the body (multipart/form-data,
 *                                or the ONNX alone as application/
 *                                octet-stream); JSON naming server paths
 *                                only with --data-root
 *   POST /v2/apps/{app}/jobs     offline job: input .npy in the body
 *   POST /v2/jobs                offline job for a named model
 *   GET  /v2/jobs/{id}           its state and progress
 *   GET  /v2/jobs/{id}/output    its result (.npy)
 *
 * No client names a file the server writes: uploads and job outputs live
 * under the repository's server-owned ".uploads" and ".jobs" directories
 * (dot directories: never taken for models).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "control/jobs.h"
#include "control/pipes.h"
#include "control/register.h"
#include "server/multipart.h"
#include "server/server_int.h"

static void fail(vr_server *s, vr_http_req *r, int status, const char *msg) {
  vr_server_count(s, status);
  vr_http_error(r, status, msg);
}

static int has_prefix_ci(const char *s, const char *p) {
  return s && !strncasecmp(s, p, strlen(p));
}

/* Writes n bytes to a new file path (0600); -1 on error. */
/* -1 with errno set (the reason goes into the client's error: a full
 * disk or a file size limit is the operator's to fix, and says so). */
static int write_file(const char *path, const char *p, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : ENOSPC;
      close(fd);
      errno = e;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return close(fd);
}

/* <repo>/<sub>, created 0700 if missing. */
static int owned_dir(vr_server *s, const char *sub, char *out, size_t cap,
                     vr_errbuf *err) {
  if (!s->repo)
    return vr_errf(err, VR_EINVAL, "the server has no repository to keep uploads in");
  if ((size_t)snprintf(out, cap, "%s/%s", s->repo, sub) >= cap)
    return vr_errf(err, VR_ELIMIT, "repository path too long");
  if (mkdir(out, 0700) && errno != EEXIST)
    return vr_errf(err, VR_EIO, "cannot create the server's %s directory", sub);
  return 0;
}

/* Where job inputs and outputs go: the jobs' own directory (a worker's
 * under .jobs/<id>, where its journal keeps them), else .jobs. */
static int jobs_dir(vr_server *s, char *out, size_t cap, vr_errbuf *err) {
  const char *d = s->jobs ? vr_jobs_dir(s->jobs) : NULL;
  if (!d) return owned_dir(s, ".jobs", out, cap, err);
  if ((size_t)snprintf(out, cap, "%s", d) >= cap)
    return vr_errf(err, VR_ELIMIT, "repository path too long");
  if (mkdir(out, 0700) && errno != EEXIST)
    return vr_errf(err, VR_EIO, "cannot create the server's jobs directory");
  return 0;
}

/* A request's fields: multipart text parts, else the query string, else
 * the JSON body. */
typedef struct fields {
  vr_mp_part parts[VR_MP_MAX_PARTS];
  int n;
  int multipart, binary;
  json_t *json;
  vr_http_req *r;
  char tmp[128];
} fields;

static const char *field(fields *f, const char *k) {
  if (f->multipart) {
    const vr_mp_part *p = vr_mp_find(f->parts, f->n, k);
    if (!p || p->has_filename || p->len >= sizeof f->tmp) return NULL;
    memcpy(f->tmp, p->data, p->len);
    f->tmp[p->len] = 0;
    return f->tmp;
  }
  if (f->binary) return vr_http_query(f->r, k);
  json_t *v = json_object_get(f->json, k);
  if (json_is_string(v)) return json_string_value(v);
  if (json_is_number(v)) {
    snprintf(f->tmp, sizeof f->tmp, "%.17g", json_number_value(v));
    return f->tmp;
  }
  return NULL;
}

static int num_field(fields *f, const char *k, double lo, double hi, double *out,
                     vr_errbuf *err) {
  const char *v = field(f, k);
  if (!v) return 0;
  char *end;
  double x = strtod(v, &end);
  if (!*v || *end || !(x >= lo && x <= hi))
    return vr_errf(err, VR_EINVAL, "field \"%s\" must be a number in [%g, %g]", k, lo, hi);
  *out = x;
  return 0;
}

/* The same for a count: 2.5 threads is refused, not read as 2. */
static int count_field(fields *f, const char *k, double lo, double hi, double *out,
                       vr_errbuf *err) {
  double x = *out;
  int rc = num_field(f, k, lo, hi, &x, err);
  if (!rc && x != floor(x))
    rc = vr_errf(err, VR_EINVAL, "field \"%s\" must be a whole number in [%g, %g]", k, lo, hi);
  if (!rc) *out = x;
  return rc;
}

/* The first field named in the query string (binary body) or the JSON
 * body that is not among known[0..n), as an unknown multipart part is
 * refused: a misspelt max_batch or min_accuracy was ignored there and its
 * default used. NULL when none. */
static const char *unknown_field(fields *f, const char *const *known, size_t n) {
  if (f->binary) return vr_http_query_unknown(f->r, known, n);
  const char *k;
  json_t *v;
  json_object_foreach(f->json, k, v) {
    size_t i = 0;
    while (i < n && strcmp(k, known[i])) i++;
    if (i == n) return k;
  }
  return NULL;
}

/* Reads the body's shape: multipart / binary / JSON object. */
static int read_fields(vr_http_req *r, fields *f, const char **bin, size_t *bin_len,
                       vr_errbuf *err) {
  memset(f, 0, sizeof *f);
  f->r = r;
  size_t len;
  const char *body = vr_http_body(r, &len);
  const char *ct = vr_http_header(r, "Content-Type");
  if (has_prefix_ci(ct, "multipart/")) {
    char b[80];
    int rc = vr_mp_boundary(ct, b, sizeof b, err);
    if (!rc) rc = vr_mp_parse(b, body, len, f->parts, &f->n, err);
    f->multipart = 1;
    return rc;
  }
  if (has_prefix_ci(ct, "application/octet-stream")) {
    f->binary = 1;
    *bin = body;
    *bin_len = len;
    return 0;
  }
  json_error_t je;
  f->json = json_loadb(body, len, 0, &je);
  if (!json_is_object(f->json))
    return vr_errf(err, VR_EFORMAT, "body must be multipart/form-data, "
                   "application/octet-stream or a JSON object");
  return 0;
}

/* Drops every occurrence of prefix (a server-owned directory) from msg, so
 * errors do not show clients the server's paths. */
static void scrub(char *msg, const char *prefix) {
  size_t n = strlen(prefix);
  char *p;
  while (n && (p = strstr(msg, prefix))) memmove(p, p + n, strlen(p + n) + 1);
}

/* After scrub of the jobs directory: an uploaded input's file name
 * (in-XXXXXX.npy, the server's) becomes "the uploaded input". */
static void name_upload(char *msg, size_t cap) {
  static const char k_name[] = "the uploaded input";
  for (char *p = strstr(msg, "in-"); p; p = strstr(p + 1, "in-")) {
    if (strlen(p) < 13 || memcmp(p + 9, ".npy", 4) || (p > msg && p[-1] != ' ' && p[-1] != '\''))
      continue;
    size_t tail = strlen(p + 13), at = (size_t)(p - msg);
    if (at + sizeof k_name - 1 + tail >= cap) return;
    memmove(p + sizeof k_name - 1, p + 13, tail + 1);
    memcpy(p, k_name, sizeof k_name - 1);
  }
}

/* ---- registration (runs on its own thread) ------------------------------- */

enum { F_MODEL, F_VAL_IN, F_VAL_LAB, F_CALIB, F_N };
static const char *const k_files[F_N] = {"model", "val_inputs", "val_labels",
                                         "calibration"};

typedef struct reg_job {
  vr_server *s;
  vr_http_req *http;
  char app[64];
  char name[VR_REG_NAME_MAX + 2];
  double declared, threads, max_batch, runs;
  const char *data[F_N]; /* uploaded bytes (into the request body), or */
  size_t len[F_N];
  char *path[F_N];       /* a checked path under --data-root */
  char dir[4200];        /* upload directory ("" when none) */
  int status;
  char *reply;
} reg_job;

static void reg_cleanup_files(reg_job *j) {
  if (!j->dir[0]) return;
  for (int i = 0; i < F_N; i++)
    if (j->data[i]) {
      char p[4400];
      snprintf(p, sizeof p, "%s/%s%s", j->dir, k_files[i], i ? ".npy" : ".onnx");
      unlink(p);
    }
  rmdir(j->dir);
  j->dir[0] = 0;
}

/* Uploads to files under <repo>/.uploads/reg-XXXXXX (this thread). */
static int reg_stage(reg_job *j, char paths[F_N][4400], vr_errbuf *err) {
  char up[4100];
  int rc = owned_dir(j->s, ".uploads", up, sizeof up, err);
  if (rc) return rc;
  snprintf(j->dir, sizeof j->dir, "%s/reg-XXXXXX", up);
  if (!mkdtemp(j->dir)) {
    j->dir[0] = 0;
    return vr_errf(err, VR_EIO, "cannot create an upload directory");
  }
  for (int i = 0; i < F_N; i++) {
    if (j->path[i]) snprintf(paths[i], sizeof paths[i], "%s", j->path[i]);
    if (!j->data[i]) continue;
    snprintf(paths[i], sizeof paths[i], "%s/%s%s", j->dir, k_files[i],
             i ? ".npy" : ".onnx");
    if (write_file(paths[i], j->data[i], j->len[i]))
      return vr_errf(err, VR_EIO, "cannot store the uploaded %s: %s", k_files[i],
                     strerror(errno));
  }
  return 0;
}

static void *reg_main(void *arg) {
  reg_job *j = arg;
  char paths[F_N][4400] = {{0}};
  vr_errbuf err = {0};
  int rc = reg_stage(j, paths, &err);
  vr_register_req rq;
  vr_register_req_init(&rq);
  rq.app = j->app;
  rq.model_path = paths[F_MODEL];
  rq.name = j->name[0] ? j->name : NULL;
  rq.val_inputs = paths[F_VAL_IN][0] ? paths[F_VAL_IN] : NULL;
  rq.val_labels = paths[F_VAL_LAB][0] ? paths[F_VAL_LAB] : NULL;
  rq.calibration = paths[F_CALIB][0] ? paths[F_CALIB] : NULL;
  rq.repo_dir = j->s->repo;
  rq.quiet = 1;
  if (j->declared >= 0) rq.declared_accuracy = j->declared;
  rq.gen.max_threads = (int)j->threads;
  rq.gen.max_batch = (int)j->max_batch;
  rq.prof.runs = (int)j->runs;
  vr_register_result res;
  if (!rc) rc = vr_register(j->s->store, &rq, &res, &err);
  if (!rc) rc = vr_control_reload_store(j->s->ctl, &err);
  /* a pipeline on this app takes the new model as a candidate */
  if (!rc && j->s->pipes) vr_pipes_refresh(j->s->pipes);
  if (j->dir[0]) {
    char pre[4300];
    snprintf(pre, sizeof pre, "%s/", j->dir);
    scrub(err.msg, pre);
  }
  reg_cleanup_files(j);
  json_t *o = rc ? json_pack("{s:s}", "error", err.msg)
                 : json_pack("{s:s, s:s, s:i, s:f, s:f}", "model", res.name, "app",
                             j->app, "variants", res.n_variants, "accuracy",
                             res.accuracy_pct[VR_PREC_FP32], "seconds", res.seconds);
  char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
  j->reply = t ? vr_strdup(t) : NULL;
  free(t);
  json_decref(o);
  j->status = rc ? (rc == VR_EEXIST ? 409 : vr_server_http_status(rc)) : 201;
  vr_server *s = j->s;
  /* Released before the answer goes out: a client that sends its next
   * admin request on seeing it must find the slot free. (Shutdown still
   * waits for the woken request: it is in flight until answered.) */
  __atomic_fetch_sub(&s->admin_jobs, 1, __ATOMIC_SEQ_CST);
  vr_http_wake(j->http);
  return NULL;
}

static void reg_free(void *p) {
  reg_job *j = p;
  reg_cleanup_files(j);
  for (int i = 0; i < F_N; i++) vr_free(j->path[i]);
  vr_free(j->reply);
  vr_free(j);
}

static void reg_done(vr_http_req *r, void *user) {
  vr_server *s = user;
  reg_job *j = vr_http_state(r);
  if (!j->reply) return fail(s, r, j->status == 201 ? 500 : j->status, "registration failed");
  char *body = j->reply;
  j->reply = NULL;
  vr_server_count(s, j->status);
  vr_http_respond(r, j->status, "application/json", body, strlen(body), (size_t)-1);
}

/* Fills j from the request; 0 or a VR_E* with err set. */
static int reg_read(vr_server *s, vr_http_req *r, reg_job *j, vr_errbuf *err) {
  fields f;
  const char *bin = NULL;
  size_t bin_len = 0;
  int rc = read_fields(r, &f, &bin, &bin_len, err);
  for (int i = 0; !rc && f.multipart && i < f.n; i++) {
    int known = 0;
    for (int k = 0; k < F_N; k++)
      if (!strcmp(f.parts[i].name, k_files[k])) {
        j->data[k] = f.parts[i].data;
        j->len[k] = f.parts[i].len;
        known = 1;
      }
    static const char *const text[] = {"name", "declared_accuracy", "threads",
                                       "max_batch", "runs"};
    for (size_t k = 0; k < sizeof text / sizeof text[0]; k++)
      known |= !strcmp(f.parts[i].name, text[k]);
    if (!known) rc = vr_errf(err, VR_EINVAL, "unknown part '%s'", f.parts[i].name);
  }
  static const char *const known[] = {"model", "val_inputs", "val_labels", "calibration",
                                      "name", "declared_accuracy", "threads",
                                      "max_batch", "runs"};
  const char *bad =
      rc || f.multipart ? NULL : unknown_field(&f, known, sizeof known / sizeof *known);
  if (bad) rc = vr_errf(err, VR_EINVAL, "unknown field '%.64s'", bad);
  if (!rc && f.binary) {
    j->data[F_MODEL] = bin;
    j->len[F_MODEL] = bin_len;
  }
  for (int k = 0; !rc && f.json && k < F_N; k++) {
    json_t *v = json_object_get(f.json, k_files[k]);
    if (v && !json_is_string(v))
      rc = vr_errf(err, VR_EINVAL, "\"%s\" must be a path string", k_files[k]);
    else if (v && !(j->path[k] = vr_malloc(4096)))
      rc = vr_errf(err, VR_ENOMEM, "out of memory");
    else if (v)
      rc = vr__data_path(s, json_string_value(v), j->path[k], 4096, err);
  }
  if (!rc && !j->data[F_MODEL] && !j->path[F_MODEL])
    rc = vr_errf(err, VR_EINVAL, "no model: send the ONNX file as the \"model\" part "
                 "(multipart/form-data) or as the whole application/octet-stream body");
  const char *name = rc ? NULL : field(&f, "name");
  if (name && strlen(name) > VR_REG_NAME_MAX)
    rc = vr_errf(err, VR_EINVAL, "\"name\" is longer than %d", VR_REG_NAME_MAX);
  if (name) snprintf(j->name, sizeof j->name, "%s", name);
  if (!rc && !j->name[0] && j->data[F_MODEL])
    rc = vr_errf(err, VR_EINVAL, "an uploaded model needs a \"name\"");
  j->declared = -1;
  if (!rc) rc = num_field(&f, "declared_accuracy", 0, 100, &j->declared, err);
  if (!rc) rc = count_field(&f, "threads", 0, 256, &j->threads, err);
  if (!rc) rc = count_field(&f, "max_batch", 0, 4096, &j->max_batch, err);
  if (!rc) rc = count_field(&f, "runs", 0, 10000, &j->runs, err);
  json_decref(f.json);
  return rc;
}

void vr__server_app_register(vr_server *s, vr_http_req *r, const char *app) {
  reg_job *j = VR_NEW(reg_job);
  if (!j) return fail(s, r, 500, "out of memory");
  j->s = s;
  j->http = r;
  snprintf(j->app, sizeof j->app, "%s", app);
  vr_http_set_state(r, j, reg_free);
  vr_errbuf err = {0};
  int rc = reg_read(s, r, j, &err);
  if (rc) return fail(s, r, vr_server_http_status(rc), err.msg);
  j->status = 500; /* stays if no thread starts; reg_main sets its own */
  vr_server_spawn_admin(s, r, reg_done, reg_main, j);
}

/* ---- offline jobs -------------------------------------------------------- */

void vr__server_job_submit(vr_server *s, vr_http_req *r, const char *app) {
  fields f;
  const char *bin = NULL;
  size_t bin_len = 0;
  vr_errbuf err = {0};
  vr_job_req q = {0};
  q.app = app;
  char in[4200] = "", out[4200] = "", owned[4100] = "";
  int uploaded = 0;
  int rc = read_fields(r, &f, &bin, &bin_len, &err);
  if (!rc && f.multipart) {
    const vr_mp_part *p = vr_mp_find(f.parts, f.n, "input");
    for (int i = 0; i < f.n; i++)
      if (strcmp(f.parts[i].name, "input") && strcmp(f.parts[i].name, "model") &&
          strcmp(f.parts[i].name, "min_accuracy"))
        rc = vr_errf(&err, VR_EINVAL, "unknown part '%s'", f.parts[i].name);
    if (!p && !rc) rc = vr_errf(&err, VR_EINVAL, "no \"input\" part (the .npy)");
    if (p) bin = p->data, bin_len = p->len;
  }
  if (!rc && f.json && json_object_get(f.json, "output"))
    rc = vr_errf(&err, VR_EINVAL, "\"output\" is not accepted: the server keeps the"
                 " result; fetch it with GET /v2/jobs/{id}/output");
  static const char *const known[] = {"input", "model", "min_accuracy"};
  const char *bad =
      rc || f.multipart ? NULL : unknown_field(&f, known, sizeof known / sizeof *known);
  if (bad) rc = vr_errf(&err, VR_EINVAL, "unknown field '%.64s'", bad);
  if (!rc && f.json) {
    json_t *v = json_object_get(f.json, "input");
    rc = !json_is_string(v)
             ? vr_errf(&err, VR_EINVAL, "upload the input .npy (multipart part \"input\""
                       " or application/octet-stream body)")
             : vr__data_path(s, json_string_value(v), in, sizeof in, &err);
  }
  if (!rc) rc = jobs_dir(s, owned, sizeof owned, &err);
  if (!rc) {
    /* in-XXXXXX.npy (a fresh name) and out-XXXXXX.npy beside it */
    char tmpl[4200];
    snprintf(tmpl, sizeof tmpl, "%s/in-XXXXXX.npy", owned);
    int fd = mkstemps(tmpl, 4);
    if (fd < 0) rc = vr_errf(&err, VR_EIO, "cannot create a job file");
    else close(fd);
    if (!rc) snprintf(out, sizeof out, "%s/out-%s", owned, tmpl + strlen(owned) + 4);
    if (!rc && bin) {
      unlink(tmpl);
      uploaded = 1;
      if (write_file(tmpl, bin, bin_len))
        rc = vr_errf(&err, VR_EIO, "cannot store the uploaded input: %s", strerror(errno));
      snprintf(in, sizeof in, "%s", tmpl);
    } else if (!rc) {
      unlink(tmpl); /* a --data-root input is read where it is */
    }
  }
  double acc = 0;
  if (!rc) rc = num_field(&f, "min_accuracy", 0, 100, &acc, &err);
  const char *model = rc || app ? NULL : field(&f, "model");
  char mbuf[128];
  if (model && strlen(model) >= sizeof mbuf) /* no such model: not cut to one */
    rc = vr_errf(&err, VR_ENOENT, "no registered model named '%.64s...'", model), model = NULL;
  if (!rc && !app && !model) /* the server names the input and output itself */
    rc = vr_errf(&err, VR_EINVAL, "POST /v2/jobs needs \"model\" (query parameter,"
                 " multipart part or JSON field); or POST /v2/apps/{app}/jobs");
  if (model) snprintf(mbuf, sizeof mbuf, "%s", model);
  q.model = model ? mbuf : NULL;
  q.min_accuracy = acc;
  q.input = in;
  q.output = out;
  int id = rc ? rc : vr_jobs_submit(s->jobs, &q, &err);
  json_decref(f.json);
  if (id < 0) {
    if (uploaded) unlink(in);
    char pre[4200];
    snprintf(pre, sizeof pre, "%s/", owned);
    scrub(err.msg, pre);
    name_upload(err.msg, sizeof err.msg);
    return fail(s, r, vr_server_http_status(id), err.msg);
  }
  char *o = vr_malloc(64);
  if (!o) return fail(s, r, 500, "out of memory");
  int n = snprintf(o, 64, "{\"id\":%d,\"state\":\"queued\"}", id);
  vr_server_count(s, 201);
  vr_http_respond(r, 201, "application/json", o, (size_t)n, (size_t)-1);
}

static int job_id(const char *id_s, vr_server *s, vr_job_info *ji) {
  char *end;
  long id = strtol(id_s, &end, 10);
  return !*id_s || *end || id <= 0 || id > 1 << 30 || vr_jobs_get(s->jobs, (int)id, ji);
}

void vr__server_job_get(vr_server *s, vr_http_req *r, const char *id_s) {
  vr_job_info ji;
  if (job_id(id_s, s, &ji)) return fail(s, r, 404, "no such job");
  char url[64];
  snprintf(url, sizeof url, "/v2/jobs/%d/output", ji.id);
  json_t *o = json_pack("{s:i, s:s, s:s, s:I, s:I, s:f, s:f, s:s}", "id", ji.id, "state",
                        vr_job_state_name(ji.state), "variant", ji.variant, "rows",
                        (json_int_t)ji.rows, "rows_done", (json_int_t)ji.rows_done,
                        "paused_s", ji.paused_s, "run_s", ji.run_s, "output", url);
  if (o && ji.error[0]) { /* the runner's message may name job files */
    char pre[4200];
    const char *d = vr_jobs_dir(s->jobs); /* where jobs_dir put its files */
    if (d || s->repo) {
      snprintf(pre, sizeof pre, d ? "%s/" : "%s/.jobs/", d ? d : s->repo);
      scrub(ji.error, pre);
    }
    name_upload(ji.error, sizeof ji.error);
    json_object_set_new(o, "error", json_string(ji.error));
  }
  char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  char *body = t ? vr_strdup(t) : NULL;
  free(t);
  if (!body) return fail(s, r, 500, "out of memory");
  vr_server_count(s, 200);
  vr_http_respond(r, 200, "application/json", body, strlen(body), (size_t)-1);
}

void vr__server_job_output(vr_server *s, vr_http_req *r, const char *id_s) {
  vr_job_info ji;
  if (job_id(id_s, s, &ji)) return fail(s, r, 404, "no such job");
  if (ji.state != VR_JOB_DONE)
    return fail(s, r, 409, ji.state == VR_JOB_FAILED ? "the job failed: no output"
                                                     : "the job is not done yet");
  FILE *fp = fopen(ji.output, "rb");
  char *buf = NULL;
  long n = -1;
  if (fp && !fseek(fp, 0, SEEK_END) && (n = ftell(fp)) >= 0 && !fseek(fp, 0, SEEK_SET) &&
      (buf = vr_malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, fp) != (size_t)n)
    n = -1;
  if (fp) fclose(fp);
  if (n < 0 || !buf) {
    vr_free(buf);
    return fail(s, r, 500, "the job's output cannot be read");
  }
  vr_server_count(s, 200);
  vr_http_respond(r, 200, "application/octet-stream", buf, (size_t)n, (size_t)-1);
}

/* ---- unregistering (runs on its own thread: draining takes time) --------- */

typedef struct unreg_job {
  vr_server *s;
  vr_http_req *http;
  char model[VR_REG_NAME_MAX + 2];
  int rc;
  vr_errbuf err;
} unreg_job;

static void *unreg_main(void *arg) {
  unreg_job *j = arg;
  j->rc = vr_control_unregister(j->s->ctl, j->model, &j->err);
  if (!j->rc && j->s->pipes) vr_pipes_refresh(j->s->pipes); /* no longer a candidate */
  vr_server *s = j->s;
  /* Released before the answer goes out: a client that sends its next
   * admin request on seeing it must find the slot free. (Shutdown still
   * waits for the woken request: it is in flight until answered.) */
  __atomic_fetch_sub(&s->admin_jobs, 1, __ATOMIC_SEQ_CST);
  vr_http_wake(j->http);
  return NULL;
}

static void unreg_done(vr_http_req *r, void *user) {
  vr_server *s = user;
  unreg_job *j = vr_http_state(r);
  if (j->rc) return fail(s, r, vr_server_http_status(j->rc), j->err.msg);
  char *o = vr_malloc(200);
  if (!o) return fail(s, r, 500, "out of memory");
  int n = snprintf(o, 200, "{\"model\":\"%s\",\"removed\":true}", j->model);
  vr_server_count(s, 200);
  vr_http_respond(r, 200, "application/json", o, (size_t)n, (size_t)-1);
}

void vr__server_app_unregister(vr_server *s, vr_http_req *r, const char *app,
                               const char *model) {
  if (!s->ctl) return fail(s, r, 404, "no control plane (start vario serve with --store)");
  vr_store_rdlock(s->store);
  const vr_model_rec *m = vr_store_model(s->store, model);
  int mine = m && !strcmp(m->app, app);
  vr_store_unlock(s->store);
  char msg[200];
  snprintf(msg, sizeof msg, "app '%.64s' has no model '%.64s'", app, model);
  if (!mine) return fail(s, r, 404, msg);
  unreg_job *j = VR_NEW(unreg_job);
  if (!j) return fail(s, r, 500, "out of memory");
  j->s = s;
  j->http = r;
  snprintf(j->model, sizeof j->model, "%s", model);
  vr_http_set_state(r, j, vr_free);
  if (vr_server_spawn_admin(s, r, unreg_done, unreg_main, j) < 0)
    j->rc = vr_errf(&j->err, VR_EINTERNAL, "cannot start a thread");
}
