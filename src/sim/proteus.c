/*
 * Profiles from the Proteus artifact's profiling CSV
 * (`Model,Accel,Trials,batchsize,50th_pct,90th_pct,avg_latency(ms),Min,Max,
 * Accuracy,Normalized_Accuracy`) and its model_variants/<family> lists
 * (`variant,accuracy`). One vr_profile per (model, accelerator): variant
 * name "MODEL/cpu", "MODEL/gpu_ampere", ...; app = the family; accuracy =
 * the normalised accuracy (what the traces' accuracy column uses). What the
 * CSV does not record (threads, memory, load time, price) comes from the
 * options and is documented in docs/API.md.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/lines.h"
#include "base/map.h"
#include "sim/sim.h"

typedef struct famrec {
  char family[VR_PROF_NAME_MAX];
  double accuracy;
} famrec;

static int listed(const char **list, int n, const char *s) {
  if (!list) return 1;
  for (int i = 0; i < n; i++)
    if (!strcmp(list[i], s)) return 1;
  return 0;
}

/* Reads every family file: model -> famrec (owned by the map's caller). */
static int load_families(const char *dir, vr_map *m, vr_errbuf *err) {
  DIR *d = opendir(dir);
  if (!d) return vr_errf(err, VR_EIO, "%s: cannot open: %s", dir,
                         strerror(errno));
  struct dirent *e;
  int rc = 0;
  while (!rc && (e = readdir(d))) {
    if (e->d_name[0] == '.' || strlen(e->d_name) >= VR_PROF_NAME_MAX) continue;
    char path[4096], line[512];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = vr_open_regular(path);
    if (!f) continue;
    long ln = 0;
    while (!rc && (rc = vr_read_line(f, line, sizeof line, path, &ln, NULL, err)) == 1) {
      rc = 0;
      if (!line[0] || line[0] == '#') continue;
      char *comma = strrchr(line, ',');
      char *end = NULL;
      double acc = comma ? strtod(comma + 1, &end) : -1;
      if (!comma || end == comma + 1 || *end || !(acc >= 0 && acc <= 100)) {
        rc = vr_errf(err, VR_EFORMAT, "%s:%ld: expected variant,accuracy",
                     path, ln);
        break;
      }
      *comma = 0;
      famrec *r = VR_NEW(famrec);
      if (!r) {
        rc = VR_ENOMEM;
        break;
      }
      memcpy(r->family, e->d_name, strlen(e->d_name) + 1); /* < 64 */
      r->accuracy = acc;
      void *old = NULL;
      if (vr_map_put(m, line, r, &old)) {
        vr_free(r);
        rc = VR_ENOMEM;
      }
      vr_free(old);
    }
    fclose(f);
  }
  closedir(d);
  return rc;
}

static void free_families(vr_map *m) {
  const char *k;
  void *v;
  for (size_t it = 0; vr_map_next(m, &it, &k, &v);) vr_free(v);
  vr_map_free(m);
}

/* Splits a CSV line (no quoting in this file) into at most n fields. */
static int split(char *line, char **f, int n) {
  int k = 0;
  f[k++] = line;
  for (char *p = line; *p; p++)
    if (*p == ',') {
      if (k == n) return -1;
      *p = 0;
      f[k++] = p + 1;
    }
  return k;
}

static int num(const char *s, double *out) {
  char *e;
  errno = 0;
  *out = strtod(s, &e);
  return e != s && !*e && !errno;
}

static vr_profile *find_or_add(vr_profile **ps, size_t *n, size_t *cap,
                               const char *variant) {
  for (size_t i = *n; i > 0; i--) /* rows of one variant are adjacent */
    if (!strcmp((*ps)[i - 1].variant, variant)) return &(*ps)[i - 1];
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 64;
    vr_profile *q = vr_realloc(*ps, c * sizeof *q);
    if (!q) return NULL;
    *ps = q;
    *cap = c;
  }
  vr_profile *p = &(*ps)[(*n)++];
  vr_profile_init(p);
  snprintf(p->variant, sizeof p->variant, "%s", variant);
  return p;
}

static int row(const vr_proteus_opts *o, vr_map *fam, char **f,
               vr_profile **ps, size_t *n, size_t *cap, const char *where,
               vr_errbuf *err) {
  const char *model = f[0], *accel = f[1];
  if (!listed(o->accels, o->naccels, accel)) return 0;
  famrec *fr = vr_map_get(fam, model);
  if (o->families && (!fr || !listed(o->families, o->nfamilies, fr->family)))
    return 0;
  double b, p50, p90, acc;
  p90 = 0; /* empty in the GPU rows of the vision models */
  if (!num(f[3], &b) || !num(f[4], &p50) || (f[5][0] && !num(f[5], &p90)) ||
      !num(f[10], &acc) || b < 1 || b > 64 || b != (int)b || ((int)b & ((int)b - 1)) ||
      !(p50 > 0) || !(p90 >= 0) || !(acc >= 0 && acc <= 100))
    return vr_errf(err, VR_EFORMAT, "%s: bad batchsize/latency/accuracy",
                   where);
  if (strlen(model) >= VR_PROF_NAME_MAX || strlen(accel) >= 48)
    return vr_errf(err, VR_EFORMAT, "%s: name too long", where);
  const char *shortacc = strncmp(accel, "onnxruntime_", 12) ? accel
                                                             : accel + 12;
  char vname[VR_VARIANT_MAX];
  snprintf(vname, sizeof vname, "%s/%s", model, shortacc);
  vr_profile *p = find_or_add(ps, n, cap, vname);
  if (!p) return VR_ENOMEM;
  int gpu = strstr(accel, "gpu") != NULL;
  snprintf(p->model, sizeof p->model, "%s", model);
  snprintf(p->app, sizeof p->app, "%s", fr ? fr->family : model);
  snprintf(p->precision, sizeof p->precision, "fp32");
  p->device = gpu ? VR_DEV_GPU : VR_DEV_CPU;
  p->threads = gpu ? 1 : (o->cpu_threads > 0 ? o->cpu_threads : 1);
  p->accuracy = fr ? fr->accuracy : acc;
  p->load_ms = gpu ? o->load_ms_gpu : o->load_ms_cpu;
  p->mem_bytes = o->mem_bytes;
  p->cost_per_s = p->threads * o->cpu_core_price_s + (gpu ? o->gpu_price_s : 0);
  int slot = __builtin_ctz((unsigned)b);
  p->lat.p50_ms[slot] = p50;
  /* GPU rows of vision models leave p90 empty (not measured); a few rows
   * record it a hair below p50 (timer noise): clamp */
  p->lat.p90_ms[slot] = p90 <= 0 ? -1 : p90 > p50 ? p90 : p50;
  if ((int)b > p->max_batch) p->max_batch = (int)b;
  return 0;
}

int vr_proteus_load(const vr_proteus_opts *o, vr_profile **profiles,
                    size_t *n, vr_errbuf *err) {
  vr_map fam;
  vr_map_init(&fam);
  *profiles = NULL;
  *n = 0;
  int rc = o->variants_dir ? load_families(o->variants_dir, &fam, err) : 0;
  FILE *f = rc ? NULL : fopen(o->csv_path, "r");
  if (!rc && !f)
    rc = vr_errf(err, VR_EIO, "%s: cannot open: %s", o->csv_path,
                 strerror(errno));
  size_t cap = 0;
  char line[1024];
  long ln = 0;
  while (!rc && (rc = vr_read_line(f, line, sizeof line, o->csv_path, &ln, NULL, err)) == 1) {
    rc = 0;
    if (ln == 1 && !strncmp(line, "Model,", 6)) continue; /* header */
    if (!line[0] || line[0] == '#') continue;
    char *fields[11], where[4200];
    snprintf(where, sizeof where, "%s:%ld", o->csv_path, ln);
    if (split(line, fields, 11) != 11) {
      rc = vr_errf(err, VR_EFORMAT, "%s: expected 11 fields", where);
      break;
    }
    rc = row(o, &fam, fields, profiles, n, &cap, where, err);
  }
  if (f) fclose(f);
  for (size_t i = 0; !rc && i < *n; i++)
    if ((rc = vr_profile_validate(&(*profiles)[i], err)))
      rc = vr_errctx(err, rc, "%s", o->csv_path); /* the file to fix */
  if (!rc && *n == 0)
    rc = vr_errf(err, VR_ENOENT, "%s: no rows match the families/accels",
                 o->csv_path);
  free_families(&fam);
  if (rc) {
    vr_free(*profiles);
    *profiles = NULL;
    *n = 0;
  }
  return rc;
}
