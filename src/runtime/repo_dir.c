/*
 * One model directory of a repository, in whichever layout it comes (see
 * vr_model_dir_load in config.h): Vario's config.json, Triton's
 * config.pbtxt + version directories, or a bare ONNX file whose config is
 * completed from the graph — so a Triton repository serves unchanged.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "runtime/config.h"
#include "runtime/pbtxt.h"
#include "vario/engine.h"

static int is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A whole (small) text file; caller frees *out. */
static int slurp(const char *path, char **out, size_t *len, vr_errbuf *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return vr_errf(err, VR_ENOENT, "%s: cannot open", path);
  char *buf = vr_malloc(1 << 20);
  size_t n = buf ? fread(buf, 1, 1 << 20, f) : 0;
  int big = buf && !feof(f);
  fclose(f);
  if (!buf) return vr_errf(err, VR_ENOMEM, "out of memory");
  if (big) {
    vr_free(buf);
    return vr_errf(err, VR_ELIMIT, "%s: larger than 1 MiB", path);
  }
  *out = buf;
  *len = n;
  return 0;
}

static int numeric(const char *s) {
  if (!*s || *s == '0') return 0;
  for (const char *p = s; *p; p++)
    if (*p < '0' || *p > '9') return 0;
  return strlen(s) < 10;
}

static int allowed(const vr_model_config *c, int v) {
  if (!c->n_versions) return 1;
  for (int i = 0; i < c->n_versions; i++)
    if (c->versions[i] == v) return 1;
  return 0;
}

/* The highest version directory (that the policy allows) holding file;
 * 0 when there is none. */
static int pick_version(const char *dir, const vr_model_config *c, const char *file) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int best = 0;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d))) {
    if (!numeric(e->d_name)) continue;
    int v = atoi(e->d_name);
    if (v <= best || !allowed(c, v)) continue;
    snprintf(path, sizeof path, "%s/%s/%s", dir, e->d_name, file);
    if (is_file(path)) best = v;
  }
  closedir(d);
  return best;
}

int vr_model_dir_is_model(const char *dir) {
  char path[4096];
  static const char *const k[] = {"config.pbtxt", "model.onnx"};
  for (size_t i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, k[i]);
    if (is_file(path)) return 1;
  }
  vr_model_config none = {0};
  return pick_version(dir, &none, "model.onnx") > 0;
}

/* Inputs/outputs the config left out come from the graph; those it gave
 * are checked later by the runtime against the graph, as for config.json. */
static int complete(vr_model_config *c, vr_errbuf *err) {
  if (c->n_inputs && c->n_outputs) return 0;
  vr_model *m;
  int rc = vr_model_load(c->model_path, &m, err);
  if (rc) return vr_errctx(err, rc, "auto-complete from %s", c->model_path);
  int ni = vr_model_num_inputs(m), no = vr_model_num_outputs(m);
  if (ni > VR_RT_MAX_IO || no > VR_RT_MAX_IO) {
    vr_model_free(m);
    return vr_errf(err, VR_ELIMIT, "%s: more than %d inputs or outputs",
                   c->model_path, VR_RT_MAX_IO);
  }
  if (!c->n_inputs)
    for (c->n_inputs = 0; c->n_inputs < ni; c->n_inputs++)
      c->inputs[c->n_inputs] = *vr_model_input(m, c->n_inputs);
  if (!c->n_outputs)
    for (c->n_outputs = 0; c->n_outputs < no; c->n_outputs++)
      c->outputs[c->n_outputs] = *vr_model_output(m, c->n_outputs);
  vr_model_free(m);
  c->autocompleted = 1;
  for (int i = 0; i < c->n_inputs + c->n_outputs; i++) {
    vr_tensor_info *t = i < c->n_inputs ? &c->inputs[i] : &c->outputs[i - c->n_inputs];
    if (t->ndim < 1 || t->shape[0] >= 0)
      return vr_errf(err, VR_EUNSUPPORTED, "%s: '%s' has no dynamic batch"
                     " dimension; give a config.pbtxt or config.json",
                     c->model_path, t->name);
    for (int d = 1; d < t->ndim; d++)
      if (t->shape[d] <= 0)
        return vr_errf(err, VR_EUNSUPPORTED, "%s: '%s' dim %d is not fixed;"
                       " Vario needs fixed dims after the batch", c->model_path,
                       t->name, d);
  }
  return 0;
}

static int load_triton(const char *dir, vr_model_config *c, vr_errbuf *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/config.pbtxt", dir);
  int rc = 0;
  if (is_file(path)) {
    char *text = NULL;
    size_t n = 0;
    if ((rc = slurp(path, &text, &n, err))) return rc;
    rc = vr_pbtxt_parse(text, n, c, err);
    vr_free(text);
    if (rc) return vr_errctx(err, rc, "%s", path);
  } else { /* no config at all: Triton's auto-complete */
    memset(c, 0, sizeof *c);
    c->threads = c->instances = 1;
    c->max_batch_size = 4;
    c->accuracy = -1;
    vr_model_config_queue_defaults(c);
    snprintf(c->platform, sizeof c->platform, "onnxruntime_onnx");
  }
  const char *file = c->model_file[0] ? c->model_file : "model.onnx";
  if (strchr(file, '/'))
    return vr_errf(err, VR_EINVAL, "%s: default_model_filename '%s' must be a"
                   " file name", dir, file);
  c->version = pick_version(dir, c, file);
  if (c->version)
    snprintf(c->model_path, sizeof c->model_path, "%s/%d/%s", dir, c->version, file);
  else
    snprintf(c->model_path, sizeof c->model_path, "%s/%s", dir, file);
  if (!is_file(c->model_path))
    return vr_errf(err, VR_ENOENT, "%s: no %s in a version directory%s", dir,
                   file, c->n_versions ? " that version_policy allows" : "");
  if ((size_t)snprintf(c->dir, sizeof c->dir, "%s", dir) >= sizeof c->dir)
    return vr_errf(err, VR_ELIMIT, "%s: path too long", dir);
  for (int i = 0; i < c->n_outputs; i++) {
    if (!c->label_file[i][0]) continue;
    char path[sizeof c->dir + sizeof c->label_file[0] + 1];
    snprintf(path, sizeof path, "%s/%s", dir, c->label_file[i]);
    if (!is_file(path))
      return vr_errf(err, VR_ENOENT, "%s: label_filename '%s' of output '%s' is"
                     " not a file", dir, c->label_file[i], c->outputs[i].name);
  }
  return complete(c, err);
}

int vr_model_dir_load(const char *dir, vr_model_config *out, vr_errbuf *err) {
  char path[4096];
  struct stat st;
  /* said as such: the layouts' own messages (no model.onnx in a version
   * directory) read as if the directory were there */
  if (stat(dir, &st) || !S_ISDIR(st.st_mode))
    return vr_errf(err, VR_ENOENT, "%s: no such model directory", dir);
  snprintf(path, sizeof path, "%s/config.json", dir);
  if (is_file(path)) return vr_model_config_load(dir, out, err); /* Vario's */
  return load_triton(dir, out, err);
}
