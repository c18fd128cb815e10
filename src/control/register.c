/*
 * Registration pipeline (see register.h): check -> load -> accuracy ->
 * profile -> write repository entry -> store transaction. Each step is
 * one function; vr_register runs them in order and unwinds on failure.
 */
#include "control/register.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/cpus.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/proc.h"
#include "control/fsutil.h"
#include "runtime/config.h"
#include "policy/profile.h"

typedef struct reg_ctx {
  const vr_register_req *r;
  char name[VR_REG_NAME_MAX + 1];
  vr_valset vs;
  int have_vs;
  vr_npy calib;
  int have_calib;
  vr_model *model;
  double parse_ms;
  vr_prof_inputs in;
  vr_variant_spec *specs;
  int nspecs;
  vr_profile *profs;
  double acc[3]; /* fraction per precision; < 0 = not generated */
  char tmp_dir[VR_STORE_PATH_MAX];
  char dir[VR_STORE_PATH_MAX];
} reg_ctx;

#define say(c, ...)                                   \
  do {                                                \
    if (!(c)->r->quiet) fprintf(stderr, __VA_ARGS__); \
  } while (0)

void vr_register_req_init(vr_register_req *r) {
  memset(r, 0, sizeof *r);
  r->declared_accuracy = -1;
}

int vr_name_valid(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n > VR_REG_NAME_MAX || s[0] == '.') return 0;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i])) return 0;
  return 1;
}

/* ---- step 1: the request itself --------------------------------------- */

static void default_name(char *out, const char *path) {
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  snprintf(out, VR_REG_NAME_MAX + 1, "%s", b);
  size_t n = strlen(out);
  if (n > 5 && !strcmp(out + n - 5, ".onnx")) out[n - 5] = '\0';
  /* Repository layout <dir>/<name>/model.onnx: the directory names it. */
  if (!strcmp(out, "model") && b - path >= 2) {
    const char *e = b - 1, *s;
    while (e > path && e[-1] == '/') e--; /* "dir//model.onnx" */
    s = e;
    while (s > path && s[-1] != '/') s--;
    if (e > s) snprintf(out, VR_REG_NAME_MAX + 1, "%.*s", (int)(e - s), s);
  }
}

/* ---- the in-progress marker ---------------------------------------------
 * A registration writes MARKER (its pid, the process's start time, the
 * kernel's boot id and the host name) into
 * the entry before the rename and removes it once the store has the model.
 * An entry with a marker whose process is gone was left by a registration
 * that crashed between the two: it is removed, so the name is not blocked
 * for good. An entry without one was placed by hand (the KServe repository
 * API serves such models) and is never touched. */
#define MARKER ".vario-registering"

/* Start time of a live pid (clock ticks since boot), 0 when there is no
 * such process or it is a zombie: with the pid, it names one process. */
static unsigned long long proc_start(long pid) {
  char st = 0;
  unsigned long long start = 0;
  return vr_proc_stat(pid, &st, &start) || st == 'Z' || st == 'X' ? 0 : start;
}

/* Which kernel run and which host (container) a pid belongs to: a
 * repository shared between hosts, or between containers of one host with
 * pid namespaces of their own, holds markers whose pids mean nothing here. */
static void whereami(char *boot, size_t bcap, char *host, size_t hcap) {
  snprintf(boot, bcap, "-");
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (fscanf(f, "%63s", boot) != 1) snprintf(boot, bcap, "-");
    fclose(f);
  }
  if (gethostname(host, hcap) != 0 || !*host) snprintf(host, hcap, "-");
  host[hcap - 1] = 0;
  for (char *p = host; *p; p++)
    if (*p == ' ' || *p == '\n') *p = '_';
}

static int write_marker(const char *dir, vr_errbuf *err) {
  char path[VR_STORE_PATH_MAX + 32], boot[64], host[256];
  snprintf(path, sizeof path, "%s/" MARKER, dir);
  whereami(boot, sizeof boot, host, sizeof host);
  FILE *f = fopen(path, "w");
  int ok = f && fprintf(f, "%ld %llu %s %s\n", (long)getpid(), proc_start((long)getpid()),
                        boot, host) > 0;
  if (f && fclose(f) != 0) ok = 0;
  return ok ? 0 : vr_errf(err, VR_EIO, "cannot write in the repository: %s", strerror(errno));
}

/* 1: dir holds a marker whose registration is still running (in this
 * process or another); 0: a marker whose process is gone (or whose host
 * has rebooted since); -1: no marker, or one written on another host. */
static int marker_live(const char *dir) {
  char path[VR_STORE_PATH_MAX + 32], boot[64], host[256], mboot[64], mhost[256];
  snprintf(path, sizeof path, "%s/" MARKER, dir);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  long pid = 0;
  unsigned long long start = 0;
  int n = fscanf(f, "%ld %llu %63s %255s", &pid, &start, mboot, mhost);
  fclose(f);
  if (n != 4 || pid <= 0) return -1;
  whereami(boot, sizeof boot, host, sizeof host);
  if (strcmp(mhost, host)) return -1;
  if (strcmp(mboot, boot)) return 0;
  return proc_start(pid) == start && start != 0;
}

static int check_request(reg_ctx *c, vr_store *s, vr_errbuf *err) {
  const vr_register_req *r = c->r;
  if (!r->app || !r->model_path || !r->repo_dir)
    return vr_errf(err, VR_EINVAL, "registration needs an app, a model file and a repository");
  if (r->name) snprintf(c->name, sizeof c->name, "%s", r->name);
  else default_name(c->name, r->model_path);
  if (!vr_name_valid(c->name) || (r->name && strlen(r->name) > VR_REG_NAME_MAX))
    return vr_errf(err, VR_EINVAL,
                   "model name '%s' is not 1..48 characters of [A-Za-z0-9_.-]",
                   r->name ? r->name : c->name);
  if (!vr_name_valid(r->app))
    return vr_errf(err, VR_EINVAL, "app name '%s' is not 1..48 characters of [A-Za-z0-9_.-]",
                   r->app);
  if (!r->val_inputs != !r->val_labels)
    return vr_errf(err, VR_EINVAL, "give both validation inputs and labels, or neither");
  double d = r->declared_accuracy;
  if (!r->val_inputs && !(d > 0 && d <= 100))
    return vr_errf(err, VR_EINVAL,
                   "without a validation set a declared accuracy in percent, (0, 100], is needed");
  if (!vr_path_exists(r->model_path))
    return vr_errf(err, VR_ENOENT, "model file '%s' does not exist", r->model_path);
  vr_store_rdlock(s);
  int taken = vr_store_model(s, c->name) != NULL;
  vr_store_unlock(s);
  if (taken) return vr_errf(err, VR_EEXIST, "model '%s' is already registered", c->name);
  if (vr_path_join(c->dir, sizeof c->dir, r->repo_dir, c->name) ||
      snprintf(c->tmp_dir, sizeof c->tmp_dir, "%s/.%s.tmpXXXXXX", r->repo_dir, c->name) >=
          (int)sizeof c->tmp_dir)
    return vr_errf(err, VR_ERANGE, "repository path too long");
  /* The message names the model, not the path: over HTTP it goes to a
   * client, who has no business learning the server's file layout. */
  int live = vr_path_exists(c->dir) ? marker_live(c->dir) : -1;
  if (live == 0) {
    vr_warn("register: removing the repository entry of '%s' left by a registration "
            "that did not finish (its process is gone)", c->name);
    vr_rmtree(c->dir);
  } else if (live == 1) {
    return vr_errf(err, VR_EEXIST, "model '%s' is being registered by another request",
                   c->name);
  }
  if (vr_path_exists(c->dir))
    return vr_errf(err, VR_EEXIST,
                   "model '%s' is not registered but the repository already has an entry of "
                   "that name (placed by hand or left by an interrupted registration)",
                   c->name);
  return 0;
}

/* ---- step 2: model and data ------------------------------------------- */

static int load_inputs(reg_ctx *c, vr_errbuf *err) {
  const vr_register_req *r = c->r;
  int rc;
  if (r->val_inputs) {
    if ((rc = vr_valset_load(r->val_inputs, r->val_labels, &c->vs, err))) return rc;
    c->have_vs = 1;
  }
  if (r->calibration) {
    if ((rc = vr_npy_read(r->calibration, &c->calib, err)))
      return vr_errctx(err, rc, "calibration '%s'", r->calibration);
    c->have_calib = 1;
    if (c->calib.ndim < 1 || c->calib.shape[0] < 1)
      return vr_errf(err, VR_EINVAL, "calibration '%s' is empty", r->calibration);
  }
  int64_t t0 = vr_now_ns();
  if ((rc = vr_model_load(r->model_path, &c->model, err)))
    return vr_errctx(err, rc, "model '%s'", r->model_path);
  c->parse_ms = (vr_now_ns() - t0) / 1e6;
  rc = vr_prof_inputs_init(&c->in, c->model, c->have_vs ? &c->vs : NULL,
                           c->have_calib ? &c->calib : NULL, &r->prof, err);
  return rc ? vr_errctx(err, rc, "model '%s'", r->model_path) : 0;
}

/* ---- step 2b: the app's one input signature --------------------------- */

static void put_shape(char *out, size_t cap, const int64_t *shape, int ndim) {
  int k = snprintf(out, cap, "[N");
  for (int d = 1; d < ndim && k > 0 && (size_t)k < cap; d++)
    k += snprintf(out + k, cap - (size_t)k, ",%lld", (long long)shape[d]);
  if (k > 0 && (size_t)k < cap) snprintf(out + k, cap - (size_t)k, "]");
}

/* An app's queries must suit every model that may serve them, so an app
 * has one input signature: names, dtypes and shapes without the batch
 * dimension, those of its first model. A model that differs is refused
 * (VR_EEXIST: HTTP 409) naming the difference. */
static int check_signature(reg_ctx *c, vr_store *s, vr_errbuf *err) {
  char dir[VR_STORE_PATH_MAX] = "", other[VR_STORE_NAME_MAX] = "";
  vr_store_rdlock(s);
  for (size_t i = 0; i < vr_store_num_models(s) && !dir[0]; i++) {
    const vr_model_rec *m = vr_store_model_at(s, i);
    if (strcmp(m->app, c->r->app)) continue;
    snprintf(dir, sizeof dir, "%s", m->dir);
    snprintf(other, sizeof other, "%s", m->name);
  }
  vr_store_unlock(s);
  vr_model_config cfg;
  if (!dir[0] || vr_model_config_load(dir, &cfg, NULL)) return 0; /* first model */
  const char *app = c->r->app;
  int n = vr_model_num_inputs(c->model);
  if (n != cfg.n_inputs)
    return vr_errf(err, VR_EEXIST, "model '%s' has %d input(s); app '%s' takes %d (as "
                   "model '%s')", c->name, n, app, cfg.n_inputs, other);
  for (int i = 0; i < n; i++) {
    const vr_tensor_info *a = vr_model_input(c->model, i), *b = &cfg.inputs[i];
    char sa[160], sb[160];
    put_shape(sa, sizeof sa, a->shape, a->ndim);
    put_shape(sb, sizeof sb, b->shape, b->ndim);
    const char *da = vr_dtype_kserve(a->dtype), *db = vr_dtype_kserve(b->dtype);
    if (strcmp(a->name, b->name) || a->dtype != b->dtype || strcmp(sa, sb))
      return vr_errf(err, VR_EEXIST, "model '%s' input %d is '%s' %s %s; app '%s' takes "
                     "'%s' %s %s (as model '%s')", c->name, i, a->name, da ? da : "?", sa,
                     app, b->name, db ? db : "?", sb, other);
  }
  return 0;
}

/* Precisions to try: what the request asks for and the CPU runs. */
static unsigned candidate_precisions(reg_ctx *c) {
  unsigned supported = 1u << VR_PREC_FP32;
  if (vr_precision_supported(VR_PREC_BF16)) supported |= 1u << VR_PREC_BF16;
  if (vr_precision_supported(VR_PREC_INT8)) supported |= 1u << VR_PREC_INT8;
  /* No validation set: other precisions' accuracy could not be measured,
   * so only the declared fp32 model is offered. */
  if (!c->have_vs) supported = 1u << VR_PREC_FP32;
  return vr_gen_precisions(&c->r->gen, supported, c->in.calib.data != NULL);
}

static int max_threads(const reg_ctx *c) {
  int t = c->r->gen.max_threads;
  if (t <= 0) t = vr_cpus_usable(NULL);
  return t < 1 ? 1 : t;
}

/* The largest variant's max batch: the accuracy runs take no more rows,
 * or a model that only works at the batches asked for would be refused
 * there. Out of 1..64 the generator refuses the request after. */
static int max_batch(const reg_ctx *c) {
  int b = c->r->gen.max_batch;
  return b >= 1 && b <= VR_GEN_MAX_BATCH ? b : VR_GEN_MAX_BATCH;
}

/* Variants of the precisions that survived the accuracy step. */
static int generate(reg_ctx *c, vr_errbuf *err) {
  vr_gen_opts g = c->r->gen;
  g.max_threads = max_threads(c);
  unsigned precs = 0;
  for (int p = 0; p < 3; p++)
    if (c->acc[p] >= 0) precs |= 1u << p;
  g.precisions = precs;
  int n = vr_gen_count(&g, precs, 1);
  if (n <= 0) return vr_errf(err, VR_EINVAL, "variant generator: bad limits");
  c->specs = VR_NEWN(vr_variant_spec, n);
  c->profs = VR_NEWN(vr_profile, n);
  if (!c->specs || !c->profs) return vr_errf(err, VR_ENOMEM, "out of memory");
  c->nspecs = vr_gen_variants(&g, precs, 1, c->specs, n);
  return 0;
}

/* ---- step 3: accuracy per precision ----------------------------------- */

/* Fills c->acc per candidate precision. A precision the engine turns out
 * not to run (VR_EUNSUPPORTED) is dropped with a note, not an error: the
 * model is still offered in the others. fp32 must work. */
static int measure_accuracy(reg_ctx *c, vr_errbuf *err) {
  double d = c->r->declared_accuracy;
  unsigned cand = candidate_precisions(c);
  for (int p = 0; p < 3; p++) {
    c->acc[p] = -1;
    if (!(cand & (1u << p))) continue;
    if (!c->have_vs) {
      c->acc[p] = d / 100; /* declared in percent; c->acc is a fraction */
      continue;
    }
    vr_session *s;
    double ms;
    int64_t mem;
    vr_errbuf e2 = {0};
    int rc = vr_prof_open(c->model, &c->in, (vr_precision)p, max_threads(c), max_batch(c), &s,
                          &ms, &mem, &e2);
    if (rc == VR_EUNSUPPORTED && p != VR_PREC_FP32) {
      say(c, "register %s: no %s variants: %s\n", c->name, vr_precision_name(p), e2.msg);
      continue;
    }
    int opened = rc == 0;
    if (rc == 0) rc = vr_prof_accuracy(s, &c->vs, &c->acc[p], &e2);
    if (opened) vr_session_free(s); /* a failed measurement too: a server
                                     * refusing registrations leaked one each */
    if (rc != 0) {
      if (err) *err = e2;
      return vr_errctx(err, rc, "accuracy of %s", vr_precision_name(p));
    }
    say(c, "register %s: %s accuracy %.2f%% on %lld rows\n", c->name,
        vr_precision_name(p), 100 * c->acc[p], (long long)c->vs.n);
  }
  return 0;
}

/* ---- step 4: latency, load time, memory per variant -------------------- */

static void fill_profile(reg_ctx *c, int i, double create_ms, int64_t mem,
                         const vr_latency *lat) {
  const vr_variant_spec *v = &c->specs[i];
  vr_profile *p = &c->profs[i];
  char vname[VR_STORE_VNAME_MAX];
  vr_variant_name(vname, c->name, v->precision, v->threads, v->max_batch);
  vr_profile_init(p);
  snprintf(p->model, sizeof p->model, "%s", c->name);
  snprintf(p->app, sizeof p->app, "%s", c->r->app);
  snprintf(p->variant, sizeof p->variant, "%.127s", vname);
  snprintf(p->precision, sizeof p->precision, "%s", vr_precision_name(v->precision));
  p->threads = v->threads;
  p->max_batch = v->max_batch;
  p->device = VR_DEV_CPU;
  p->load_ms = c->parse_ms + create_ms;
  p->mem_bytes = mem;
  for (int k = 0; k < VR_PROF_NB && (1 << k) <= v->max_batch; k++) {
    p->lat.p50_ms[k] = lat->p50_ms[k];
    p->lat.p90_ms[k] = lat->p90_ms[k];
    p->lat.p99_ms[k] = lat->p99_ms[k];
  }
  p->accuracy = 100.0 * c->acc[v->precision];
  double price = c->r->core_price_per_hour > 0 ? c->r->core_price_per_hour : 0.0425;
  p->cost_per_s = v->threads * price / 3600.0;
}

/* Profiles specs[first..last] (same precision and threads, max batch
 * ascending): one latency sweep on the largest, load/memory on each. */
static int profile_group(reg_ctx *c, int first, int last, vr_errbuf *err) {
  const vr_variant_spec *g = &c->specs[last];
  vr_session *s;
  double create_ms;
  int64_t mem;
  vr_latency lat;
  int rc = vr_prof_open(c->model, &c->in, g->precision, g->threads, g->max_batch,
                        &s, &create_ms, &mem, err);
  if (rc != 0) return rc;
  rc = vr_prof_latency_sweep(s, &c->in, &c->r->prof, &lat, err);
  vr_session_free(s);
  if (rc != 0) return rc;
  fill_profile(c, last, create_ms, mem, &lat);
  for (int i = first; i < last; i++) {
    rc = vr_prof_open(c->model, &c->in, c->specs[i].precision, c->specs[i].threads,
                      c->specs[i].max_batch, &s, &create_ms, &mem, err);
    if (rc != 0) return rc;
    vr_session_free(s);
    fill_profile(c, i, create_ms, mem, &lat);
  }
  say(c, "register %s: %s t%d: p50 b1 %.3f ms, b%d %.3f ms\n", c->name,
      vr_precision_name(g->precision), g->threads, lat.p50_ms[0], g->max_batch,
      c->profs[last].lat.p50_ms[__builtin_ctz((unsigned)g->max_batch)]);
  return 0;
}

static int profile_all(reg_ctx *c, vr_errbuf *err) {
  for (int first = 0; first < c->nspecs;) {
    int last = first;
    while (last + 1 < c->nspecs && c->specs[last + 1].precision == c->specs[first].precision &&
           c->specs[last + 1].threads == c->specs[first].threads)
      last++;
    int rc = profile_group(c, first, last, err);
    if (rc != 0)
      return vr_errctx(err, rc, "profiling %s t%d",
                       vr_precision_name(c->specs[first].precision), c->specs[first].threads);
    first = last + 1;
  }
  for (int i = 0; i < c->nspecs; i++) {
    int rc = vr_profile_validate(&c->profs[i], err);
    if (rc != 0) return vr_errctx(err, rc, "profile of %s", c->profs[i].variant);
  }
  return 0;
}

/* ---- step 5: repository entry ----------------------------------------- */

static json_t *tensor_json(const vr_tensor_info *t) {
  json_t *shape = json_array();
  for (int d = 0; d < t->ndim; d++)
    json_array_append_new(shape, json_integer(d == 0 ? -1 : t->shape[d]));
  const char *dt = vr_dtype_kserve(t->dtype);
  return json_pack("{s:s, s:s, s:o}", "name", t->name, "datatype", dt ? dt : "?",
                   "shape", shape);
}

static int write_config(reg_ctx *c, const char *dir, vr_errbuf *err) {
  json_t *in = json_array(), *out = json_array();
  for (int i = 0; i < vr_model_num_inputs(c->model); i++)
    json_array_append_new(in, tensor_json(vr_model_input(c->model, i)));
  for (int i = 0; i < vr_model_num_outputs(c->model); i++)
    json_array_append_new(out, tensor_json(vr_model_output(c->model, i)));
  json_t *cfg = json_pack(
      "{s:s, s:s, s:s, s:f, s:b, s:o, s:o, s:i, s:i, s:i, s:s, s:i, s:I}", "name",
      c->name, "app", c->r->app, "task", "classification", "accuracy",
      100 * c->acc[VR_PREC_FP32], "accuracy_declared", !c->have_vs, "inputs", in, "outputs",
      out, "max_batch_size", max_batch(c), "instances", 1, "threads", 1, "precision", "fp32",
      "max_queue_delay_us", 0, "flops", (json_int_t)vr_model_flops(c->model));
  /* int8 variants are served live: the runtime quantises with the same
   * calibration rows the profiler used, kept next to the model. */
  if (cfg && c->acc[VR_PREC_INT8] >= 0 && c->in.calib.data)
    json_object_set_new(cfg, "calibration", json_string("calibration.npy"));
  char path[VR_STORE_PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/config.json", dir);
  int rc = cfg && json_dump_file(cfg, path, JSON_INDENT(2)) == 0
               ? 0
               : vr_errf(err, VR_EIO, "cannot write '%s'", path);
  json_decref(cfg);
  return rc;
}

/* <dir>/calibration.npy: the profiler's calibration rows, when int8
 * variants were generated (write_config names the file then). */
static int write_calibration(reg_ctx *c, const char *dir, vr_errbuf *err) {
  const vr_tensor *t = &c->in.calib;
  if (c->acc[VR_PREC_INT8] < 0 || !t->data) return 0;
  char path[VR_STORE_PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/calibration.npy", dir);
  int rc = vr_npy_write(path, t->dtype, t->shape, t->ndim, t->data, err);
  return rc ? vr_errctx(err, rc, "cannot write '%s'", path) : 0;
}

static int write_profiles(reg_ctx *c, const char *dir, vr_errbuf *err) {
  char pdir[VR_STORE_PATH_MAX + 16], path[VR_STORE_PATH_MAX + 256];
  snprintf(pdir, sizeof pdir, "%s/profiles", dir);
  int rc = vr_mkdirs(pdir, err);
  for (int i = 0; rc == 0 && i < c->nspecs; i++) {
    json_t *j = vr_profile_to_json(&c->profs[i]);
    snprintf(path, sizeof path, "%s/%s.json", pdir, c->profs[i].variant);
    if (!j || json_dump_file(j, path, JSON_INDENT(2)) != 0)
      rc = vr_errf(err, VR_EIO, "cannot write profile '%s'", path);
    json_decref(j);
  }
  return rc;
}

static int write_repo(reg_ctx *c, vr_errbuf *err) {
  char path[VR_STORE_PATH_MAX + 32];
  /* A directory of its own (mkdtemp): two registrations of one name at
   * once (HTTP requests share the pid) wrote into one and removed each
   * other's files. */
  int rc = vr_mkdirs(c->r->repo_dir, err);
  if (rc == 0 && !mkdtemp(c->tmp_dir))
    rc = vr_errf(err, VR_EIO, "cannot create a directory in the repository");
  if (rc) return rc;
  snprintf(path, sizeof path, "%s/model.onnx", c->tmp_dir);
  if (rc == 0) rc = write_marker(c->tmp_dir, err);
  if (rc == 0) rc = vr_copy_file(c->r->model_path, path, err);
  if (rc == 0) rc = write_calibration(c, c->tmp_dir, err);
  if (rc == 0) rc = write_config(c, c->tmp_dir, err);
  if (rc == 0) rc = write_profiles(c, c->tmp_dir, err);
  /* rename() is atomic: the entry appears whole or not at all. */
  if (rc == 0 && rename(c->tmp_dir, c->dir) != 0)
    rc = errno == EEXIST || errno == ENOTEMPTY
             ? vr_errf(err, VR_EEXIST, "model '%s' is already registered (another "
                       "registration of it finished first)", c->name)
             : vr_errf(err, VR_EIO, "cannot move the model into the repository: %s",
                       strerror(errno));
  if (rc != 0) vr_rmtree(c->tmp_dir);
  return rc;
}

/* ---- step 6: the store ------------------------------------------------ */

static int commit(reg_ctx *c, vr_store *s, vr_errbuf *err) {
  vr_model_rec m = {0};
  snprintf(m.name, sizeof m.name, "%s", c->name);
  snprintf(m.app, sizeof m.app, "%s", c->r->app);
  if (!realpath(c->dir, m.dir)) snprintf(m.dir, sizeof m.dir, "%s", c->dir);
  m.accuracy = 100.0 * c->acc[VR_PREC_FP32];
  m.accuracy_declared = !c->have_vs;
  m.registered_unix = (int64_t)time(NULL);
  vr_variant_rec *v = VR_NEWN(vr_variant_rec, c->nspecs);
  if (!v) return vr_errf(err, VR_ENOMEM, "out of memory");
  int rc = 0;
  for (int i = 0; i < c->nspecs && rc == 0; i++) {
    const vr_profile *p = &c->profs[i];
    snprintf(v[i].name, sizeof v[i].name, "%s", p->variant);
    snprintf(v[i].model, sizeof v[i].model, "%s", c->name);
    snprintf(v[i].app, sizeof v[i].app, "%s", c->r->app);
    v[i].precision = c->specs[i].precision;
    v[i].threads = p->threads;
    v[i].max_batch = p->max_batch;
    v[i].accuracy = p->accuracy;
    v[i].lat_b1_ms = p->lat.p50_ms[0];
    v[i].load_ms = p->load_ms;
    v[i].memory_bytes = p->mem_bytes;
    json_t *j = vr_profile_to_json(p);
    v[i].profile_json = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!v[i].profile_json) rc = vr_errf(err, VR_ENOMEM, "out of memory");
  }
  if (rc == 0) rc = vr_store_add_model(s, &m, v, c->nspecs, err);
  for (int i = 0; i < c->nspecs; i++) free(v[i].profile_json); /* jansson's */
  vr_free(v);
  return rc;
}

static void ctx_free(reg_ctx *c) {
  vr_prof_inputs_free(&c->in);
  if (c->model) vr_model_free(c->model);
  if (c->have_vs) vr_valset_free(&c->vs);
  if (c->have_calib) vr_npy_free(&c->calib);
  vr_free(c->specs);
  vr_free(c->profs);
}

int vr_register(vr_store *s, const vr_register_req *r, vr_register_result *res,
                vr_errbuf *err) {
  reg_ctx c;
  memset(&c, 0, sizeof c);
  c.r = r;
  int64_t t0 = vr_now_ns();
  int rc = check_request(&c, s, err);
  if (rc == 0) rc = load_inputs(&c, err);
  if (rc == 0) rc = check_signature(&c, s, err);
  if (rc == 0) rc = measure_accuracy(&c, err);
  if (rc == 0) rc = generate(&c, err);
  if (rc == 0) rc = profile_all(&c, err);
  if (rc == 0) rc = write_repo(&c, err);
  /* again, just before the store: another model of the app registered
   * while this one was being profiled (seconds) sets its signature too */
  if (rc == 0 && (rc = check_signature(&c, s, err)) != 0) vr_rmtree(c.dir);
  if (rc == 0) {
    rc = commit(&c, s, err);
    if (rc != 0) vr_rmtree(c.dir); /* the store said no: undo the files */
  }
  if (rc == 0) {
    char path[VR_STORE_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/" MARKER, c.dir);
    /* left behind, it is only consulted if the store forgets the model */
    if (unlink(path) != 0) vr_warn("register: cannot remove %s: %s", path, strerror(errno));
  }
  if (rc == 0 && res) {
    snprintf(res->name, sizeof res->name, "%s", c.name);
    res->n_variants = c.nspecs;
    for (int p = 0; p < 3; p++) res->accuracy_pct[p] = c.acc[p] < 0 ? -1 : 100 * c.acc[p];
    res->seconds = (vr_now_ns() - t0) / 1e9;
  }
  ctx_free(&c);
  return rc;
}

int vr_unregister(vr_store *s, const char *name, vr_errbuf *err) {
  char dir[VR_STORE_PATH_MAX];
  vr_store_rdlock(s);
  const vr_model_rec *m = vr_store_model(s, name);
  if (m) snprintf(dir, sizeof dir, "%s", m->dir);
  vr_store_unlock(s);
  if (!m) return vr_errf(err, VR_ENOENT, "no model named '%s'", name);
  int rc = vr_store_remove_model(s, name, err);
  if (rc == 0) vr_rmtree(dir);
  return rc;
}
