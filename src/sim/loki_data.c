/* Loki's artifact files (see loki_data.h). */
#include "sim/loki_data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/lines.h"

#define MAX_COLS 32

void vr_pipe_data_free(vr_pipe_data *d) {
  vr_pipeline_free(d->pipe);
  vr_free(d->prof);
  memset(d, 0, sizeof *d);
}

void vr_pipe_data_index(vr_pipe_data *d) {
  d->off[0] = 0;
  for (int t = 0; t < d->pipe->ntasks; t++)
    d->off[t + 1] = d->off[t] + d->pipe->tasks[t].nvariants;
}

/* Splits a CSV line in place (no quoting in these files). */
static int split(char *line, char **f) {
  int n = 0;
  line[strcspn(line, "\r\n")] = 0;
  for (char *s = line; n < MAX_COLS;) {
    f[n++] = s;
    char *c = strchr(s, ',');
    if (!c) break;
    *c = 0, s = c + 1;
  }
  return n;
}

static int col(char **h, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(h[i], name)) return i;
  return -1;
}

static int num(const char *s, double *out) {
  char *end;
  errno = 0;
  *out = strtod(s, &end);
  return end != s && !*end && !errno;
}

static char *slurp(const char *path, size_t *len, vr_errbuf *err) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    vr_errf(err, VR_EIO, "%s: %s", path, strerror(errno));
    return NULL;
  }
  char *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n + 4096 > cap) {
      char *nb = vr_realloc(buf, cap = cap * 2 + 8192);
      if (!nb) { /* not a short file: an error */
        vr_free(buf), fclose(f);
        vr_errf(err, VR_ENOMEM, "%s: out of memory", path);
        return NULL;
      }
      buf = nb;
    }
    size_t k = fread(buf + n, 1, cap - n, f);
    n += k;
    if (k == 0) break;
    if (n > (64u << 20)) {
      vr_free(buf), fclose(f);
      vr_errf(err, VR_ELIMIT, "%s: larger than 64 MiB", path);
      return NULL;
    }
  }
  fclose(f);
  *len = n;
  return buf;
}

/* Accuracy of `variant` from DIR/<task> (`variant,accuracy` lines) into
 * *acc; -1 if the file (or a regular file of that name) or the line is
 * absent. A read error or a line too long for the reader is an error. */
static int variant_accuracy(const char *dir, const char *task, const char *variant,
                            double *acc, vr_errbuf *err) {
  char path[4096], line[512];
  snprintf(path, sizeof path, "%s/%s", dir, task);
  *acc = -1;
  FILE *f = vr_open_regular(path);
  if (!f) return 0;
  long ln = 0;
  int rc;
  while ((rc = vr_read_line(f, line, sizeof line, path, &ln, NULL, err)) == 1) {
    char *fl[MAX_COLS];
    int n = split(line, fl);
    double a;
    if (n >= 2 && !strcmp(fl[0], variant) && num(fl[1], &a) && a >= 0 &&
        a <= 100)
      *acc = a;
  }
  fclose(f);
  return rc;
}

/* A CSV file open past its header row. */
typedef struct csv {
  FILE *f;
  const char *path;
  long ln; /* lines read */
  char hline[1024], *h[MAX_COLS];
  int nh;
} csv;

static int csv_open(csv *c, const char *path, vr_errbuf *err) {
  if (!(c->f = fopen(path, "r")))
    return vr_errf(err, VR_EIO, "%s: %s", path, strerror(errno));
  c->path = path;
  c->ln = 0;
  int rc = vr_read_line(c->f, c->hline, sizeof c->hline, path, &c->ln, NULL, err);
  if (rc != 1) {
    fclose(c->f);
    return rc ? rc : vr_errf(err, VR_EFORMAT, "%s: empty", path);
  }
  c->nh = split(c->hline, c->h);
  return 0;
}

/* The next data row into line[cap]: 1, 0 at the end, or an error. */
static int csv_row(csv *c, char *line, size_t cap, vr_errbuf *err) {
  return vr_read_line(c->f, line, cap, c->path, &c->ln, NULL, err);
}

/* Runtimes CSV: fills prof for every (task, variant) with rows at accel.
 * have[i] = 1 where something was found. */
static int load_runtimes(const char *path, const char *accel, vr_pipe_data *d,
                         int *have, vr_errbuf *err) {
  csv c;
  int rc = csv_open(&c, path, err);
  if (rc) return rc;
  FILE *f = c.f;
  char line[1024], **h = c.h, *fl[MAX_COLS];
  int nh = c.nh;
  int cm = col(h, nh, "Model"), ca = col(h, nh, "Accel"),
      cb = col(h, nh, "batchsize"), c50 = col(h, nh, "50th_pct"),
      c90 = col(h, nh, "90th_pct");
  if (cm < 0 || ca < 0 || cb < 0 || c50 < 0) {
    fclose(f);
    return vr_errf(err, VR_EFORMAT, "%s:1: needs columns Model, Accel, "
                   "batchsize, 50th_pct", path);
  }
  const vr_pipeline *p = d->pipe;
  while (!rc && (rc = csv_row(&c, line, sizeof line, err)) == 1) {
    rc = 0;
    long ln = c.ln;
    int n = split(line, fl);
    if (n == 1 && !fl[0][0]) continue;
    if (n < nh) {
      rc = vr_errf(err, VR_EFORMAT, "%s:%ld: %d fields, header has %d", path,
                   ln, n, nh);
      break;
    }
    if (strcmp(fl[ca], accel)) continue;
    double b, p50, p90 = -1;
    if (!num(fl[cb], &b) || !num(fl[c50], &p50) ||
        (c90 >= 0 && !num(fl[c90], &p90)) || !(b >= 1 && b <= 1e6) ||
        !(p50 > 0 && p50 < 1e9)) {
      rc = vr_errf(err, VR_EFORMAT, "%s:%ld: bad batch size or latency", path,
                   ln);
      break;
    }
    int slot = -1;
    for (int s = 0; s < VR_PROF_NB; s++)
      if (vr_prof_batch(s) == (int)b && b == (int)b) slot = s;
    if (slot < 0) continue;
    for (int t = 0; t < p->ntasks; t++) {
      int v = vr_pipe_task_variant(&p->tasks[t], fl[cm]);
      if (v < 0) continue;
      vr_profile *pr = &d->prof[d->off[t] + v];
      pr->lat.p50_ms[slot] = p50;
      pr->lat.p90_ms[slot] = p90 >= p50 ? p90 : -1;
      if (vr_prof_batch(slot) > pr->max_batch) pr->max_batch = vr_prof_batch(slot);
      have[d->off[t] + v] = 1;
    }
  }
  fclose(f);
  return rc;
}

/* Branching CSV: per parent variant, mult_factor and per-child shares in
 * columns named after the child tasks. */
static int load_branching(const char *path, vr_pipe_data *d, vr_errbuf *err) {
  csv c;
  int rc = csv_open(&c, path, err);
  if (rc) return rc;
  FILE *f = c.f;
  char line[1024], **h = c.h, *fl[MAX_COLS];
  int nh = c.nh;
  int cm = col(h, nh, "model"), cf = col(h, nh, "mult_factor");
  if (cm < 0 || cf < 0) {
    fclose(f);
    return vr_errf(err, VR_EFORMAT, "%s:1: needs columns model, mult_factor",
                   path);
  }
  vr_pipeline *p = d->pipe;
  while (!rc && (rc = csv_row(&c, line, sizeof line, err)) == 1) {
    rc = 0;
    long ln = c.ln;
    int n = split(line, fl);
    if (n == 1 && !fl[0][0]) continue;
    double m;
    if (n < nh || !num(fl[cf], &m) || !(m >= 0 && m <= 1e6)) {
      rc = vr_errf(err, VR_EFORMAT, "%s:%ld: bad row", path, ln);
      break;
    }
    for (int t = 0; t < p->ntasks; t++) {
      vr_pipe_task *tk = &p->tasks[t];
      int v = vr_pipe_task_variant(tk, fl[cm]);
      if (v < 0) continue;
      tk->variants[v].mult = m;
      /* an unlabelled child without a column takes what the others leave */
      int rest = vr_pipe_task_route_label(p, tk, NULL);
      int fill = rest >= 0 && col(h, nh, p->tasks[tk->children[rest]].name) < 0;
      for (int c = 0; c < tk->nchildren; c++) {
        int k = col(h, nh, p->tasks[tk->children[c]].name);
        double s;
        if (k < 0) continue;
        if (!num(fl[k], &s) || !(s >= 0 && s <= 1)) {
          rc = vr_errf(err, VR_EFORMAT, "%s:%ld: share of %s not in [0,1]",
                       path, ln, h[k]);
          break;
        }
        tk->variants[v].share[c] = s;
      }
      if (fill) vr_pipe_rest_share(p, t, tk->variants[v].share);
    }
  }
  fclose(f);
  return rc;
}

/* Keeps only variants with a profile; notes the others. */
static int prune(vr_pipe_data *d, const int *have, vr_errbuf *err) {
  vr_pipeline *p = d->pipe;
  vr_profile *np = VR_NEWN(vr_profile, d->off[p->ntasks] ? d->off[p->ntasks] : 1);
  if (!np) return vr_errf(err, VR_ENOMEM, "loki: out of memory");
  int k = 0;
  size_t nl = strlen(d->notes);
  for (int t = 0; t < p->ntasks; t++) {
    vr_pipe_task *tk = &p->tasks[t];
    int keep = 0;
    for (int v = 0; v < tk->nvariants; v++) {
      if (have[d->off[t] + v]) {
        tk->variants[keep++] = tk->variants[v];
        np[k++] = d->prof[d->off[t] + v];
      } else if (nl < sizeof d->notes) {
        nl += snprintf(d->notes + nl, sizeof d->notes - nl,
                       "%s%s/%s: no runtimes, left out", nl ? "; " : "",
                       tk->name, tk->variants[v].name);
      }
    }
    if (!keep) {
      vr_free(np);
      return vr_errf(err, VR_ENOENT, "loki: task '%s' has no variant with "
                     "runtimes", tk->name);
    }
    tk->nvariants = keep;
  }
  vr_free(d->prof);
  d->prof = np;
  vr_pipe_data_index(d);
  return 0;
}

static int init_profiles(vr_pipe_data *d, const char *variants_dir,
                         vr_errbuf *err) {
  vr_pipe_data_index(d);
  int n = d->off[d->pipe->ntasks];
  if (!(d->prof = VR_NEWN(vr_profile, n ? n : 1)))
    return vr_errf(err, VR_ENOMEM, "loki: out of memory");
  for (int t = 0; t < d->pipe->ntasks; t++) {
    vr_pipe_task *tk = &d->pipe->tasks[t];
    for (int v = 0; v < tk->nvariants; v++) {
      vr_profile *pr = &d->prof[d->off[t] + v];
      vr_profile_init(pr);
      pr->device = VR_DEV_GPU;
      snprintf(pr->model, sizeof pr->model, "%s", tk->variants[v].name);
      snprintf(pr->app, sizeof pr->app, "%s", tk->name);
      snprintf(pr->variant, sizeof pr->variant, "%s", tk->variants[v].name);
      int rc = variants_dir ? variant_accuracy(variants_dir, tk->name, tk->variants[v].name,
                                               &tk->variants[v].accuracy, err)
                            : 0;
      if (rc) return rc;
      pr->accuracy = tk->variants[v].accuracy >= 0 ? tk->variants[v].accuracy
                                                   : 100;
    }
  }
  return 0;
}

int vr_loki_load_files(const char *app_json, const char *variants_dir,
                       const char *runtimes_csv, const char *branching_csv,
                       const char *accel, vr_pipe_data *out, vr_errbuf *err) {
  memset(out, 0, sizeof *out);
  if (!accel) accel = "onnxruntime_gpu_pascal";
  size_t len;
  char *text = slurp(app_json, &len, err);
  if (!text) return err ? err->code : VR_EIO;
  int rc = vr_pipeline_parse(text, len, &out->pipe, err);
  vr_free(text);
  if (rc) return vr_errctx(err, rc, "%s", app_json);
  int *have = NULL;
  if (!(rc = init_profiles(out, variants_dir, err))) {
    have = calloc(out->off[out->pipe->ntasks] + 1, sizeof *have);
    if (!have) rc = vr_errf(err, VR_ENOMEM, "loki: out of memory");
  }
  if (!rc) rc = load_runtimes(runtimes_csv, accel, out, have, err);
  if (!rc && branching_csv) rc = load_branching(branching_csv, out, err);
  if (!rc) rc = prune(out, have, err);
  free(have);
  for (int i = 0; !rc && i < out->off[out->pipe->ntasks]; i++)
    if ((rc = vr_profile_validate(&out->prof[i], err)))
      rc = vr_errctx(err, rc, "%s", runtimes_csv); /* the file to fix */
  if (!rc) rc = vr_pipeline_validate(out->pipe, err);
  if (rc) vr_pipe_data_free(out);
  return rc;
}

int vr_loki_load(const char *data_dir, const char *app, const char *accel,
                 vr_pipe_data *out, vr_errbuf *err) {
  char a[4096], v[4096], r[4096], b[4096];
  snprintf(a, sizeof a, "%s/apps/%s.json", data_dir, app);
  snprintf(v, sizeof v, "%s/model_variants/%s", data_dir, app);
  snprintf(r, sizeof r, "%s/profiling/simulator_runtimes.csv", data_dir);
  snprintf(b, sizeof b, "%s/profiling/branching.csv", data_dir);
  return vr_loki_load_files(a, v, r, b, accel, out, err);
}
