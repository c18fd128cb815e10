/* The offline jobs' journal (jobs_int.h): records and part files. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "control/jobs_int.h"

/* ---- records ------------------------------------------------------------- */

static int rec_str(json_t *o, const char *k, char *dst, size_t cap, int need, vr_errbuf *err) {
  json_t *v = json_object_get(o, k);
  if (!v && !need) return 0;
  const char *s = json_string_value(v);
  if (!s || strlen(s) >= cap || (need && !*s))
    return vr_errf(err, VR_EFORMAT, "job record: \"%s\" must be a string (1..%zu bytes)", k,
                   cap - 1);
  memcpy(dst, s, strlen(s) + 1);
  return 0;
}

static int rec_int(json_t *o, const char *k, int64_t lo, int64_t hi, int64_t *out,
                   vr_errbuf *err) {
  json_t *v = json_object_get(o, k);
  if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
    return vr_errf(err, VR_EFORMAT, "job record: \"%s\" must be an integer in %lld..%lld", k,
                   (long long)lo, (long long)hi);
  *out = json_integer_value(v);
  return 0;
}

static int rec_secs(json_t *o, const char *k, double *out, vr_errbuf *err) {
  json_t *v = json_object_get(o, k);
  if (!v) return 0;
  double d = json_number_value(v);
  if (!json_is_number(v) || !(d >= 0 && d < 1e9))
    return vr_errf(err, VR_EFORMAT, "job record: \"%s\" must be seconds >= 0", k);
  *out = d;
  return 0;
}

static int rec_state(json_t *o, vr_job_state *out, vr_errbuf *err) {
  const char *s = json_string_value(json_object_get(o, "state"));
  for (int i = VR_JOB_QUEUED; s && i <= VR_JOB_FAILED; i++)
    if (!strcmp(s, vr_job_state_name((vr_job_state)i))) {
      /* the process that ran it is gone: it runs again */
      *out = i == VR_JOB_RUNNING || i == VR_JOB_PAUSED ? VR_JOB_QUEUED : (vr_job_state)i;
      return 0;
    }
  return vr_errf(err, VR_EFORMAT, "job record: \"state\" must be queued, running, paused,"
                 " done or failed");
}

/* A record names the files of the jobs directory by their base names,
 * so that it still reads when --repo is spelt otherwise (relative, with a
 * trailing slash); the output must be one of them, out-*.npy. */
static const char *in_dir(const char *path, const char *jobs_dir) {
  size_t n = strlen(jobs_dir);
  return !strncmp(path, jobs_dir, n) && path[n] == '/' && path[n + 1] && !strchr(path + n + 1, '/')
             ? path + n + 1
             : NULL;
}

static int join_dir(char *path, size_t cap, const char *jobs_dir, int output, vr_errbuf *err) {
  size_t l = strlen(path);
  if (output && (strchr(path, '/') || l < 8 || strncmp(path, "out-", 4) ||
                 strcmp(path + l - 4, ".npy")))
    return vr_errf(err, VR_EFORMAT, "job record: \"output\" must be a file out-*.npy of the"
                   " jobs directory");
  if (strchr(path, '/')) return 0; /* an input elsewhere (--data-root): as it is */
  char tmp[1200];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s/%s", jobs_dir, path) >= cap)
    return vr_errf(err, VR_EFORMAT, "job record: path too long");
  memcpy(path, tmp, strlen(tmp) + 1);
  return 0;
}

int vr__job_rec_parse(const char *text, size_t len, const char *jobs_dir, vr__job *out,
                      vr_errbuf *err) {
  memset(out, 0, sizeof *out);
  json_error_t je;
  json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!json_is_object(o)) {
    json_decref(o);
    return vr_errf(err, VR_EFORMAT, "job record: not a JSON object (line %d: %.80s)", je.line,
                   je.text);
  }
  int64_t id = 0, mb = 0, rows = 0;
  char prec[16] = "";
  int rc = rec_int(o, "id", 1, VR__JOB_MAX_ID, &id, err);
  if (!rc) rc = rec_state(o, &out->info.state, err);
  if (!rc) rc = rec_str(o, "input", out->input, sizeof out->input, 1, err);
  if (!rc) rc = rec_str(o, "output", out->info.output, sizeof out->info.output, 1, err);
  if (!rc) rc = rec_str(o, "variant", out->info.variant, sizeof out->info.variant, 1, err);
  if (!rc) rc = rec_str(o, "dir", out->dir, sizeof out->dir, 1, err);
  if (!rc) rc = rec_str(o, "precision", prec, sizeof prec, 1, err);
  if (!rc && (vr_store_prec_parse(prec, &out->prec) || out->prec == VR_PREC_INT8))
    rc = vr_errf(err, VR_EFORMAT, "job record: \"precision\" must be fp32 or bf16");
  if (!rc) rc = rec_int(o, "max_batch", 1, VR__JOB_MAX_BATCH, &mb, err);
  if (!rc) rc = rec_int(o, "rows", 1, INT64_C(1) << 40, &rows, err);
  if (!rc) rc = rec_str(o, "error", out->info.error, sizeof out->info.error, 0, err);
  if (!rc) rc = rec_secs(o, "run_s", &out->info.run_s, err);
  if (!rc) rc = rec_secs(o, "paused_s", &out->info.paused_s, err);
  if (!rc) rc = join_dir(out->info.output, sizeof out->info.output, jobs_dir, 1, err);
  if (!rc) rc = join_dir(out->input, sizeof out->input, jobs_dir, 0, err);
  json_decref(o);
  out->info.id = (int)id;
  out->max_batch = (int)mb;
  out->info.rows = rows;
  out->info.rows_done = out->info.state == VR_JOB_DONE ? rows : 0;
  return rc;
}

char *vr__job_rec_json(const vr__job *jb, const char *jobs_dir) {
  const vr_job_info *i = &jb->info;
  const char *in = in_dir(jb->input, jobs_dir), *out = in_dir(i->output, jobs_dir);
  if (!out) return NULL; /* not the server's: not recorded */
  json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:I, s:f, s:f}", "id", i->id,
                        "state", vr_job_state_name(i->state), "input", in ? in : jb->input,
                        "output", out, "variant", i->variant, "dir", jb->dir, "precision",
                        vr_precision_name(jb->prec), "max_batch", jb->max_batch, "rows",
                        (json_int_t)i->rows, "run_s", i->run_s, "paused_s", i->paused_s);
  if (o && i->error[0]) json_object_set_new(o, "error", json_string(i->error));
  char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return t;
}

int vr__job_rec_free_id(const char *jobs_dir, int id) {
  char path[600];
  snprintf(path, sizeof path, "%s/job-%d.json", jobs_dir, id);
  return access(path, F_OK) != 0 && errno == ENOENT;
}

int vr__job_rec_write(const char *jobs_dir, const vr__job *jb, vr_errbuf *err) {
  char path[600], tmp[620];
  snprintf(path, sizeof path, "%s/job-%d.json", jobs_dir, jb->info.id);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  char *t = vr__job_rec_json(jb, jobs_dir);
  FILE *f = t ? fopen(tmp, "w") : NULL;
  int bad = !f || fputs(t, f) < 0;
  if (f && fclose(f)) bad = 1;
  int rc = !t ? vr_errf(err, VR_EINVAL, "cannot record job %d (its output is not in the jobs"
                        " directory, a path is not UTF-8, or out of memory)", jb->info.id)
           : bad  ? vr_errf(err, VR_EIO, "cannot write %s: %s", tmp, strerror(errno))
           : rename(tmp, path) ? vr_errf(err, VR_EIO, "cannot write %s: %s", path,
                                         strerror(errno))
                               : 0;
  if (rc && f) unlink(tmp);
  free(t);
  return rc;
}

static int load_one(const char *jobs_dir, const char *name, int id, vr_vec *jobs) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s", jobs_dir, name);
  vr_errbuf err = {0};
  FILE *f = fopen(path, "rb");
  char buf[8192];
  size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
  int rc = !f || ferror(f) ? vr_errf(&err, VR_EIO, "cannot read it")
           : n == sizeof buf ? vr_errf(&err, VR_EFORMAT, "job record: too long")
                             : 0;
  if (f) fclose(f);
  vr__job *jb = rc ? NULL : VR_NEW(vr__job);
  if (!rc && !jb) rc = vr_errf(&err, VR_ENOMEM, "out of memory");
  if (!rc) rc = vr__job_rec_parse(buf, n, jobs_dir, jb, &err);
  if (!rc && jb->info.id != id)
    rc = vr_errf(&err, VR_EFORMAT, "job record: id %d in the file of job %d", jb->info.id, id);
  if (!rc && (size_t)id > jobs->len + 100000) /* no gap of 10^5 ids by this server */
    rc = vr_errf(&err, VR_EFORMAT, "job %d: past every other record by too much", id);
  while (!rc && jobs->len < (size_t)id) {
    vr__job *none = NULL;
    if (vr_vec_push(jobs, &none)) rc = vr_errf(&err, VR_ENOMEM, "out of memory");
  }
  if (!rc && VR_VEC_AT(jobs, vr__job *, id - 1))
    rc = vr_errf(&err, VR_EEXIST, "job %d recorded twice", id);
  if (rc) {
    vr_warn("jobs: %s skipped: %s", path, err.msg);
    vr_free(jb);
    return rc == VR_ENOMEM ? rc : 0;
  }
  VR_VEC_AT(jobs, vr__job *, id - 1) = jb;
  return 0;
}

int vr__jobs_load(const char *jobs_dir, vr_vec *jobs, vr_errbuf *err) {
  DIR *d = opendir(jobs_dir);
  if (!d) return errno == ENOENT ? 0 : vr_errf(err, VR_EIO, "cannot read %s", jobs_dir);
  int rc = 0;
  for (struct dirent *e; !rc && (e = readdir(d));) {
    char *end;
    if (strncmp(e->d_name, "job-", 4) || !(e->d_name[4] >= '1' && e->d_name[4] <= '9')) continue;
    long id = strtol(e->d_name + 4, &end, 10);
    if (id < 1 || id > VR__JOB_MAX_ID) continue;
    if (!strcmp(end, ".json.tmp")) { /* a write a kill cut short: the record is the old one */
      char path[600];
      snprintf(path, sizeof path, "%s/%s", jobs_dir, e->d_name);
      unlink(path);
    } else if (!strcmp(end, ".json")) {
      rc = load_one(jobs_dir, e->d_name, (int)id, jobs);
    }
  }
  closedir(d);
  size_t n = 0;
  for (size_t i = 0; i < jobs->len; i++) n += VR_VEC_AT(jobs, vr__job *, i) != NULL;
  if (rc) return vr_errf(err, rc, "out of memory reading the job records");
  if (n) vr_info("jobs: %zu record(s) read from %s", n, jobs_dir);
  return 0;
}

/* ---- part files ---------------------------------------------------------- */

static const char k_magic[8] = {'V', 'R', 'J', 'P', 'A', 'R', 'T', '1'};

typedef struct part_head {
  char magic[8];
  int64_t out_row, rows;
} part_head;

void vr__job_part_init(const vr__job *jb, vr__job_part *p) {
  memset(p, 0, sizeof *p);
  snprintf(p->path, sizeof p->path, "%s.part", jb->info.output);
}

int vr__job_part_open(const vr__job *jb, vr__job_part *p, float **out, int64_t *rows_done,
                      vr_errbuf *err) {
  *out = NULL;
  *rows_done = 0;
  p->out_row = 0;
  int64_t rows = jb->info.rows;
  FILE *f = fopen(p->path, "r+b");
  part_head h;
  struct stat st;
  if (f && fread(&h, sizeof h, 1, f) == 1 && !memcmp(h.magic, k_magic, 8) && h.rows == rows &&
      h.out_row > 0 && h.out_row <= (INT64_C(1) << 30) / (rows < 1 ? 1 : rows) &&
      !fstat(fileno(f), &st) && st.st_size >= (off_t)sizeof h) {
    int64_t whole = (st.st_size - (off_t)sizeof h) / (h.out_row * (int64_t)sizeof(float));
    int64_t done = whole < rows ? whole : rows;
    /* no whole row: nothing to keep (and its out_row, never checked by
     * a chunk, is not to be trusted) */
    float *o = done > 0 ? vr_malloc((size_t)rows * (size_t)h.out_row * sizeof(float)) : NULL;
    if (o && fread(o, sizeof(float) * (size_t)h.out_row, (size_t)done, f) == (size_t)done &&
        !ftruncate(fileno(f), (off_t)(sizeof h + (size_t)done * h.out_row * sizeof(float))) &&
        !fseeko(f, 0, SEEK_END)) {
      p->fp = f;
      p->out_row = h.out_row;
      *out = o;
      *rows_done = done;
      return 0;
    }
    vr_free(o);
  }
  if (f) fclose(f); /* none, another job's, or cut short: afresh */
  if (!(p->fp = fopen(p->path, "w+b")))
    return vr_errf(err, VR_EIO, "cannot write the job's partial result: %s", strerror(errno));
  return 0;
}

int vr__job_part_append(vr__job_part *p, int64_t rows, const float *out, int64_t from,
                        int64_t n, vr_errbuf *err) {
  if (!p->fp) return 0;
  if (ftello(p->fp) == 0) {
    part_head h = {{0}, p->out_row, rows};
    memcpy(h.magic, k_magic, 8);
    if (fwrite(&h, sizeof h, 1, p->fp) != 1) goto fail;
  }
  size_t row = (size_t)p->out_row;
  if (fwrite(out + from * (int64_t)row, sizeof(float) * row, (size_t)n, p->fp) != (size_t)n ||
      fflush(p->fp)) /* in the kernel: a killed process keeps it */
    goto fail;
  return 0;
fail:
  return vr_errf(err, VR_EIO, "cannot write the job's partial result: %s", strerror(errno));
}

void vr__job_part_close(vr__job_part *p, int drop) {
  if (p->fp) fclose(p->fp);
  p->fp = NULL;
  if (drop && p->path[0]) unlink(p->path);
}
