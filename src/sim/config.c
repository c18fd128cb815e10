/*
 * Simulator config (JSON, format in docs/API.md "Simulator config").
 * Every error names the file and the JSON path of the offending value
 * (syntax errors: file:line:column). Unknown keys are errors, so a typo
 * never silently falls back to a default.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "sim/sim.h"

typedef struct ctx {
  const char *name, *base, *data, *label;
  vr_errbuf *err;
} ctx;

static int bad(ctx *c, const char *where, const char *what) {
  return vr_errf(c->err, VR_EINVAL, "%s: %s: %s", c->name, where, what);
}

static int check_keys(ctx *c, const json_t *o, const char *where,
                      const char *const *allowed) {
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)o, k, v) {
    int ok = 0;
    for (int i = 0; allowed[i] && !ok; i++) ok = !strcmp(k, allowed[i]);
    if (!ok) {
      char msg[160];
      snprintf(msg, sizeof msg, "unknown key \"%.100s\"", k);
      return bad(c, where, msg);
    }
  }
  return 0;
}

/* Optional number in [lo, hi]. */
static int num(ctx *c, const json_t *o, const char *where, const char *k,
               double lo, double hi, double *dst) {
  json_t *v = json_object_get(o, k);
  if (!v) return 0;
  char path[160], msg[160];
  snprintf(path, sizeof path, "%s.%s", where, k);
  if (!json_is_number(v)) return bad(c, path, "must be a number");
  double x = json_number_value(v);
  if (!(x >= lo && x <= hi)) {
    snprintf(msg, sizeof msg, "must be in [%g, %g]", lo, hi);
    return bad(c, path, msg);
  }
  *dst = x;
  return 0;
}

/* Optional whole number in [lo, hi] (a count, an index, a seed): 1.5
 * cores is refused, not truncated. */
static int inum(ctx *c, const json_t *o, const char *where, const char *k,
                double lo, double hi, double *dst) {
  double x = *dst;
  int rc = num(c, o, where, k, lo, hi, &x);
  if (rc) return rc;
  if (x != floor(x)) {
    char path[160];
    snprintf(path, sizeof path, "%s.%s", where, k);
    return bad(c, path, "must be a whole number");
  }
  *dst = x;
  return 0;
}

static int str(ctx *c, const json_t *o, const char *where, const char *k,
               const char **dst) {
  json_t *v = json_object_get(o, k);
  if (!v) return 0;
  if (!json_is_string(v)) {
    char path[160];
    snprintf(path, sizeof path, "%s.%s", where, k);
    return bad(c, path, "must be a string");
  }
  *dst = json_string_value(v);
  return 0;
}

/* Resolves a path from the config: "data:REL" under the data directory,
 * relative paths under the config's directory. Caller frees. */
static char *resolve(ctx *c, const char *where, const char *p) {
  char buf[4096];
  if (!strncmp(p, "data:", 5)) {
    if (!c->data) {
      vr_errf(c->err, VR_ENOENT,
              "%s: %s: \"%s\" needs the shared data directory (--data DIR)",
              c->name, where, p);
      return NULL;
    }
    snprintf(buf, sizeof buf, "%s/%s", c->data, p + 5);
  } else if (p[0] == '/' || !c->base || !c->base[0]) {
    snprintf(buf, sizeof buf, "%s", p);
  } else {
    snprintf(buf, sizeof buf, "%s/%s", c->base, p);
  }
  char *r = vr_strdup(buf);
  if (!r) vr_errf(c->err, VR_ENOMEM, "out of memory");
  return r;
}

static int add_profile(vr_sim_cfg *cfg, const vr_profile *p, size_t *cap) {
  if (cfg->nprofiles == *cap) {
    size_t n = *cap ? *cap * 2 : 16;
    vr_profile *q = vr_realloc(cfg->profiles, n * sizeof *q);
    if (!q) return VR_ENOMEM;
    cfg->profiles = q;
    *cap = n;
  }
  cfg->profiles[cfg->nprofiles++] = *p;
  return 0;
}

static int profile_json(ctx *c, vr_sim_cfg *cfg, size_t *cap, const json_t *j,
                        const char *where) {
  if (json_is_object(j) && json_object_get(j, "profiles"))
    j = json_object_get(j, "profiles");
  if (json_is_array(j)) {
    size_t i;
    json_t *x;
    json_array_foreach(j, i, x) {
      char w[200];
      snprintf(w, sizeof w, "%s[%zu]", where, i);
      int rc = profile_json(c, cfg, cap, x, w);
      if (rc) return rc;
    }
    return 0;
  }
  vr_profile p;
  vr_errbuf e = {0};
  if (vr_profile_from_json(j, &p, &e)) return bad(c, where, e.msg);
  for (size_t i = 0; i < cfg->nprofiles; i++)
    if (!strcmp(cfg->profiles[i].variant, p.variant))
      return bad(c, where, "duplicate variant name");
  return add_profile(cfg, &p, cap) ? vr_errf(c->err, VR_ENOMEM, "oom") : 0;
}

static int load_profiles(ctx *c, vr_sim_cfg *cfg, size_t *cap,
                         const json_t *arr) {
  if (!json_is_array(arr)) return bad(c, "profiles", "must be an array");
  size_t i;
  json_t *x;
  json_array_foreach(arr, i, x) {
    char where[64];
    snprintf(where, sizeof where, "profiles[%zu]", i);
    if (!json_is_string(x)) {
      int rc = profile_json(c, cfg, cap, x, where);
      if (rc) return rc;
      continue;
    }
    char *path = resolve(c, where, json_string_value(x));
    if (!path) return c->err ? c->err->code : VR_EINVAL;
    json_error_t je;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
      int rc = vr_errf(c->err, VR_EFORMAT, "%s:%d:%d: %s", path, je.line,
                       je.column, je.text);
      vr_free(path);
      return rc;
    }
    ctx c2 = {path, c->base, c->data, c->label, c->err};
    int rc = profile_json(&c2, cfg, cap, j, "profile");
    json_decref(j);
    vr_free(path);
    if (rc) return rc;
  }
  return 0;
}

static int str_list(ctx *c, const json_t *o, const char *where, const char *k,
                    const char **out, int max, int *n) {
  json_t *a = json_object_get(o, k);
  *n = 0;
  if (!a) return 0;
  if (!json_is_array(a) || json_array_size(a) > (size_t)max)
    return bad(c, where, "list of names expected (at most 64)");
  for (size_t i = 0; i < json_array_size(a); i++) {
    if (!json_is_string(json_array_get(a, i)))
      return bad(c, where, "list entries must be strings");
    out[(*n)++] = json_string_value(json_array_get(a, i));
  }
  return 0;
}

static int load_proteus(ctx *c, vr_sim_cfg *cfg, size_t *cap,
                        const json_t *o) {
  static const char *keys[] = {"csv", "variants_dir", "families", "accels",
                               "cpu_threads", "cpu_core_price_s",
                               "gpu_price_s", "load_ms_cpu", "load_ms_gpu",
                               "mem_bytes", NULL};
  if (!json_is_object(o)) return bad(c, "proteus", "must be an object");
  int rc = check_keys(c, o, "proteus", keys);
  if (rc) return rc;
  const char *csv = NULL, *vdir = NULL, *fam[64], *acc[64];
  vr_proteus_opts po = {0};
  double threads = 4, mem = 1 << 30;
  po.cpu_core_price_s = 1.0 / 3600, po.gpu_price_s = 10.0 / 3600;
  po.load_ms_cpu = 1000, po.load_ms_gpu = 3000;
  if ((rc = str(c, o, "proteus", "csv", &csv)) ||
      (rc = str(c, o, "proteus", "variants_dir", &vdir)) ||
      (rc = str_list(c, o, "proteus.families", "families", fam, 64,
                     &po.nfamilies)) ||
      (rc = str_list(c, o, "proteus.accels", "accels", acc, 64, &po.naccels)) ||
      (rc = inum(c, o, "proteus", "cpu_threads", 1, 1024, &threads)) ||
      (rc = num(c, o, "proteus", "cpu_core_price_s", 0, 1e6,
                &po.cpu_core_price_s)) ||
      (rc = num(c, o, "proteus", "gpu_price_s", 0, 1e6, &po.gpu_price_s)) ||
      (rc = num(c, o, "proteus", "load_ms_cpu", 0, 1e7, &po.load_ms_cpu)) ||
      (rc = num(c, o, "proteus", "load_ms_gpu", 0, 1e7, &po.load_ms_gpu)) ||
      (rc = inum(c, o, "proteus", "mem_bytes", 0, 1e15, &mem)))
    return rc;
  if (!csv) return bad(c, "proteus", "\"csv\" is required");
  po.cpu_threads = (int)threads;
  po.mem_bytes = (int64_t)mem;
  po.families = po.nfamilies ? fam : NULL;
  po.accels = po.naccels ? acc : NULL;
  char *csv_path = resolve(c, "proteus.csv", csv);
  char *vdir_path = csv_path && vdir
                        ? resolve(c, "proteus.variants_dir", vdir) : NULL;
  if (!csv_path || (vdir && !vdir_path)) {
    vr_free(csv_path);
    return c->err ? c->err->code : VR_EINVAL;
  }
  po.csv_path = csv_path;
  po.variants_dir = vdir_path;
  vr_profile *ps = NULL;
  size_t n = 0;
  rc = vr_proteus_load(&po, &ps, &n, c->err);
  for (size_t i = 0; !rc && i < n; i++)
    if (add_profile(cfg, &ps[i], cap)) rc = VR_ENOMEM;
  vr_free(ps);
  vr_free(csv_path);
  vr_free(vdir_path);
  return rc;
}

static int load_workers(ctx *c, vr_sim_cfg *cfg, const json_t *a) {
  static const char *keys[] = {"name", "cores", "gpus", "mem_gb",
                               "price_per_s", "start_s", "initial", "max",
                               NULL};
  if (!json_is_array(a) || json_array_size(a) == 0 ||
      json_array_size(a) > 64)
    return bad(c, "workers", "must be an array of 1..64 worker types");
  cfg->nwtypes = json_array_size(a);
  cfg->wtypes = VR_NEWN(vr_sim_wtype, cfg->nwtypes);
  if (!cfg->wtypes) return VR_ENOMEM;
  for (size_t i = 0; i < cfg->nwtypes; i++) {
    json_t *o = json_array_get(a, i);
    char w[48];
    snprintf(w, sizeof w, "workers[%zu]", i);
    if (!json_is_object(o)) return bad(c, w, "must be an object");
    int rc = check_keys(c, o, w, keys);
    if (rc) return rc;
    vr_sim_wtype *t = &cfg->wtypes[i];
    double cores = 16, gpus = 0, mem = 64, price = 0, start = 0, init = 1,
           max = 0;
    const char *name = "worker";
    if ((rc = str(c, o, w, "name", &name)) ||
        (rc = inum(c, o, w, "cores", 1, 4096, &cores)) ||
        (rc = inum(c, o, w, "gpus", 0, 64, &gpus)) ||
        (rc = num(c, o, w, "mem_gb", 0.001, 1e6, &mem)) ||
        (rc = num(c, o, w, "price_per_s", 0, 1e6, &price)) ||
        (rc = num(c, o, w, "start_s", 0, 1e6, &start)) ||
        (rc = inum(c, o, w, "initial", 0, 10000, &init)) ||
        (rc = inum(c, o, w, "max", 0, 100000, &max)))
      return rc;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->cores = (int)cores, t->gpus = (int)gpus;
    t->mem_bytes = (int64_t)(mem * (1 << 30));
    t->price_per_s = price, t->start_s = start;
    t->initial = (int)init, t->max = (int)max;
    if (t->max && t->initial > t->max) return bad(c, w, "initial > max");
  }
  return 0;
}

static int find_variant(const vr_sim_cfg *cfg, const char *name) {
  for (size_t i = 0; i < cfg->nprofiles; i++)
    if (!strcmp(cfg->profiles[i].variant, name)) return (int)i;
  return -1;
}

static int load_policy(ctx *c, vr_sim_cfg *cfg, const json_t *o) {
  static const char *keys[] = {"name", "slack", "lambda",
                               "interference_factor", "down_headroom",
                               "worker_idle_s", "min_workers",
                               "max_instances", "backlog_step", "vm_util",
                               "burst_upgrade", "cpu_max_replicas", "fixed", NULL};
  if (!json_is_object(o)) return bad(c, "policy", "must be an object");
  int rc = check_keys(c, o, "policy", keys);
  if (rc) return rc;
  const char *name = "infaas";
  if ((rc = str(c, o, "policy", "name", &name))) return rc;
  int kind = vr_policy_parse(name);
  if (kind < 0)
    return bad(c, "policy.name", "must be \"infaas\", \"clipper\" or \"sm\"");
  vr_policy_cfg *p = &cfg->policy;
  vr_policy_cfg_default(p, kind);
  double idle = (double)p->worker_idle_ns / 1e9, minw = p->min_workers,
         maxi = 0, cpumax = 0;
  if ((rc = num(c, o, "policy", "slack", 1, 100, &p->slack)) ||
      (rc = num(c, o, "policy", "lambda", 0, 1e6, &p->lambda)) ||
      (rc = num(c, o, "policy", "interference_factor", 1, 1e6,
                &p->interference_factor)) ||
      (rc = num(c, o, "policy", "down_headroom", 0, 100, &p->down_headroom)) ||
      (rc = num(c, o, "policy", "worker_idle_s", 0, 1e7, &idle)) ||
      (rc = inum(c, o, "policy", "min_workers", 0, 1e5, &minw)) ||
      (rc = inum(c, o, "policy", "max_instances", 0, 1e6, &maxi)) ||
      (rc = inum(c, o, "policy", "cpu_max_replicas", 0, 1e6, &cpumax)) ||
      (rc = num(c, o, "policy", "backlog_step", 0, 100, &p->backlog_step)) ||
      (rc = num(c, o, "policy", "vm_util", 0, 1, &p->vm_util)))
    return rc;
  json_t *bu = json_object_get(o, "burst_upgrade");
  if (bu && !json_is_boolean(bu))
    return bad(c, "policy.burst_upgrade", "must be boolean");
  if (bu) p->burst_upgrade = json_is_true(bu);
  p->worker_idle_ns = (int64_t)(idle * 1e9);
  p->min_workers = (int)minw;
  p->max_instances = (int)maxi;
  p->cpu_max_replicas = (int)cpumax;
  /* the cap only redirects a burst upgrade's choice */
  if (p->cpu_max_replicas > 0 && !p->burst_upgrade)
    return bad(c, "policy.cpu_max_replicas", "needs \"burst_upgrade\"");
  json_t *f = json_object_get(o, "fixed");
  if (kind != VR_POL_INFAAS && !f)
    return bad(c, "policy", "baselines need \"fixed\" variants");
  if (!f) return 0;
  if (!json_is_array(f) || json_array_size(f) < 1 ||
      json_array_size(f) > VR_POL_MAX_FIXED)
    return bad(c, "policy.fixed", "must be an array of 1..64 entries");
  for (size_t i = 0; i < json_array_size(f); i++) {
    json_t *e = json_array_get(f, i);
    char w[64];
    snprintf(w, sizeof w, "policy.fixed[%zu]", i);
    static const char *fk[] = {"variant", "instances", NULL};
    if (!json_is_object(e)) return bad(c, w, "must be an object");
    if ((rc = check_keys(c, e, w, fk))) return rc;
    const char *vn = NULL;
    double n = 1;
    if ((rc = str(c, e, w, "variant", &vn)) ||
        (rc = inum(c, e, w, "instances", 1, 100000, &n)))
      return rc;
    int v = vn ? find_variant(cfg, vn) : -1;
    if (v < 0) return bad(c, w, "\"variant\" names no loaded profile");
    p->fixed[p->nfixed++] = (vr_policy_fixed){v, (int)n};
  }
  return 0;
}

static int load_points(ctx *c, const json_t *a, const char *w, int width,
                       double **out, int *n) {
  if (!json_is_array(a) || json_array_size(a) > 100000)
    return bad(c, w, "must be an array of arrays");
  size_t m = json_array_size(a);
  double *d = vr_malloc((m ? m : 1) * (size_t)width * sizeof *d);
  if (!d) return VR_ENOMEM;
  for (size_t i = 0; i < m; i++) {
    json_t *row = json_array_get(a, i);
    if (!json_is_array(row) || json_array_size(row) != (size_t)width) {
      vr_free(d);
      return bad(c, w, width == 2 ? "entries must be [t_s, rate]"
                                  : "entries must be [at_s, dur_s, mult]");
    }
    for (int k = 0; k < width; k++) {
      json_t *x = json_array_get(row, (size_t)k);
      double v = json_is_number(x) ? json_number_value(x) : -1;
      if (!(v >= 0 && v < 1e9) || (width == 2 && k == 0 && i > 0 &&
                                   v < d[(i - 1) * 2])) {
        vr_free(d);
        return bad(c, w, "numbers must be >= 0 and times non-decreasing");
      }
      d[i * (size_t)width + (size_t)k] = v;
    }
  }
  *out = d;
  *n = (int)m;
  return 0;
}

static int load_stream(ctx *c, vr_workload *w, const json_t *o,
                       const char *where) {
  static const char *keys[] = {"kind", "app", "model", "slo_ms",
                               "min_accuracy", "start_s", "end_s", "rate",
                               "cv", "points", "step", "base", "amp",
                               "period_s", "phase_s", "spikes", "file",
                               "trace_slo", NULL};
  if (!json_is_object(o)) return bad(c, where, "must be an object");
  int rc = check_keys(c, o, where, keys);
  if (rc) return rc;
  const char *kind = NULL, *app = NULL, *model = NULL, *file = NULL;
  if ((rc = str(c, o, where, "kind", &kind)) ||
      (rc = str(c, o, where, "app", &app)) ||
      (rc = str(c, o, where, "model", &model)) ||
      (rc = str(c, o, where, "file", &file)))
    return rc;
  if ((w->kind = vr_wl_kind_parse(kind)) < 0)
    return bad(c, where, "\"kind\" must be constant, poisson, gamma, "
                         "piecewise, diurnal, counts or trace");
  if (!app == !model) return bad(c, where, "exactly one of app/model");
  const char *target = app ? app : model;
  if (strlen(target) >= sizeof w->target) return bad(c, where, "name too long");
  w->target_kind = app ? 'a' : 'm';
  snprintf(w->target, sizeof w->target, "%s", target);
  w->slo_ms = 100, w->cv = 1, w->period_s = 86400, w->trace_slo = 1;
  double step = 0, tslo = 1;
  if ((rc = num(c, o, where, "slo_ms", 0.001, 1e7, &w->slo_ms)) ||
      (rc = num(c, o, where, "min_accuracy", 0, 100, &w->min_accuracy)) ||
      (rc = num(c, o, where, "start_s", 0, 1e9, &w->start_s)) ||
      (rc = num(c, o, where, "end_s", 0, 1e9, &w->end_s)) ||
      (rc = num(c, o, where, "rate", 0, 1e8, &w->rate)) ||
      (rc = num(c, o, where, "cv", 0.01, 100, &w->cv)) ||
      (rc = num(c, o, where, "base", 0, 1e8, &w->base)) ||
      (rc = num(c, o, where, "amp", 0, 1, &w->amp)) ||
      (rc = num(c, o, where, "period_s", 0.001, 1e9, &w->period_s)) ||
      (rc = num(c, o, where, "phase_s", -1e9, 1e9, &w->phase_s)))
    return rc;
  json_t *b;
  if ((b = json_object_get(o, "step"))) {
    if (!json_is_boolean(b)) return bad(c, where, "\"step\" must be boolean");
    step = json_is_true(b);
  }
  if ((b = json_object_get(o, "trace_slo"))) {
    if (!json_is_boolean(b))
      return bad(c, where, "\"trace_slo\" must be boolean");
    tslo = json_is_true(b);
  }
  w->step = step != 0, w->trace_slo = tslo != 0;
  if (w->end_s > 0 && !(w->end_s > w->start_s))
    return bad(c, where, "\"end_s\" must be after \"start_s\" (or 0: the run's end)");
  json_t *pts = json_object_get(o, "points"), *sp = json_object_get(o, "spikes");
  if (pts && w->kind != VR_WL_PIECEWISE)
    return bad(c, where, "\"points\" is for kind piecewise only");
  if (sp && w->kind != VR_WL_DIURNAL)
    return bad(c, where, "\"spikes\" is for kind diurnal only");
  if (w->kind == VR_WL_PIECEWISE) {
    if (!pts) return bad(c, where, "piecewise needs \"points\"");
    double *d;
    if ((rc = load_points(c, pts, where, 2, &d, &w->npts))) return rc;
    w->pts = (vr_wl_point *)d; /* same layout: pairs of doubles */
  }
  if (w->kind == VR_WL_DIURNAL && sp) {
    double *d;
    if ((rc = load_points(c, sp, where, 3, &d, &w->nspikes))) return rc;
    w->spikes = (vr_wl_spike *)d;
  }
  if ((w->kind <= VR_WL_GAMMA) && !(w->rate > 0))
    return bad(c, where, "\"rate\" must be > 0");
  if (w->kind == VR_WL_DIURNAL && !(w->base > 0))
    return bad(c, where, "diurnal needs \"base\" > 0");
  if (w->kind == VR_WL_COUNTS || w->kind == VR_WL_TRACE) {
    if (!file) return bad(c, where, "needs \"file\"");
    if (!(w->path = resolve(c, where, file)))
      return c->err ? c->err->code : VR_EINVAL;
  }
  return 0;
}

static int load_interference(ctx *c, vr_sim_cfg *cfg, const json_t *a) {
  static const char *keys[] = {"worker", "at_s", "until_s", "factor", NULL};
  if (!json_is_array(a) || json_array_size(a) > 1000)
    return bad(c, "interference", "must be an array");
  cfg->ninterf = json_array_size(a);
  cfg->interf = VR_NEWN(vr_sim_interf, cfg->ninterf ? cfg->ninterf : 1);
  if (!cfg->interf) return VR_ENOMEM;
  for (size_t i = 0; i < cfg->ninterf; i++) {
    json_t *o = json_array_get(a, i);
    char w[48];
    snprintf(w, sizeof w, "interference[%zu]", i);
    if (!json_is_object(o)) return bad(c, w, "must be an object");
    int rc = check_keys(c, o, w, keys);
    if (rc) return rc;
    vr_sim_interf *x = &cfg->interf[i];
    double wk = 0;
    x->factor = 2;
    if ((rc = inum(c, o, w, "worker", 0, 1e6, &wk)) ||
        (rc = num(c, o, w, "at_s", 0, 1e9, &x->at_s)) ||
        (rc = num(c, o, w, "until_s", 0, 1e9, &x->until_s)) ||
        (rc = num(c, o, w, "factor", 0.01, 1000, &x->factor)))
      return rc;
    if (!(x->until_s > x->at_s)) return bad(c, w, "\"until_s\" must be after \"at_s\"");
    x->worker = (int)wk;
  }
  return 0;
}

/* "policy": one policy; "policies": {label: policy, ...}, one picked by
 * label (--policy), so one config compares several policies. */
static int pick_policy(ctx *c, vr_sim_cfg *cfg, const json_t *root) {
  json_t *one = json_object_get(root, "policy");
  json_t *many = json_object_get(root, "policies");
  if (one && many) return bad(c, "(root)", "both \"policy\" and \"policies\"");
  if (many) {
    if (!json_is_object(many) || !json_object_size(many))
      return bad(c, "policies", "must be an object of label: policy");
    if (!c->label) {
      char msg[400];
      size_t n = (size_t)snprintf(msg, sizeof msg, "pick one with --policy:");
      const char *k;
      json_t *v;
      json_object_foreach(many, k, v) if (n < sizeof msg)
        n += (size_t)snprintf(msg + n, sizeof msg - n, " %s", k);
      return bad(c, "policies", msg);
    }
    one = json_object_get(many, c->label);
    if (!one) return bad(c, "policies", "no policy with that label");
  } else if (c->label && one) {
    json_t *nm = json_object_get(one, "name");
    if (!json_is_string(nm) || strcmp(json_string_value(nm), c->label))
      return bad(c, "policy", "--policy names a policy this config lacks");
  }
  if (!one) {
    vr_policy_cfg_default(&cfg->policy, VR_POL_INFAAS);
    return 0;
  }
  return load_policy(c, cfg, one);
}

static int parse_root(ctx *c, vr_sim_cfg *cfg, const json_t *root) {
  static const char *keys[] = {"name", "duration_s", "warmup_s", "tick_s",
                               "seed",
                               "noise", "max_queue", "batching", "billing",
                               "request_overhead_us", "warm_start", "profiles",
                               "proteus",
                               "workers", "policy", "policies", "workloads",
                               "interference", "comment", NULL};
  if (!json_is_object(root)) return bad(c, "(root)", "must be an object");
  int rc = check_keys(c, root, "(root)", keys);
  if (rc) return rc;
  const char *name = "sim";
  double seed = 1, mq = 100000, ovh = 0;
  cfg->duration_s = 60, cfg->tick_s = 1, cfg->noise = 1, cfg->warm_start = 1;
  if ((rc = str(c, root, "(root)", "name", &name)) ||
      (rc = num(c, root, "(root)", "duration_s", 0.001, 1e8,
                &cfg->duration_s)) ||
      (rc = num(c, root, "(root)", "tick_s", 0.01, 3600, &cfg->tick_s)) ||
      (rc = num(c, root, "(root)", "warmup_s", 0, 1e8, &cfg->warmup_s)) ||
      (rc = inum(c, root, "(root)", "seed", 0, 9e15, &seed)) ||
      (rc = inum(c, root, "(root)", "max_queue", 1, 1e8, &mq)) ||
      (rc = num(c, root, "(root)", "request_overhead_us", 0, 1e6, &ovh)))
    return rc;
  cfg->request_overhead_ms = ovh / 1000;
  snprintf(cfg->name, sizeof cfg->name, "%s", name);
  cfg->seed = (uint64_t)seed;
  cfg->max_queue = (int)mq;
  json_t *x;
  if ((x = json_object_get(root, "noise"))) {
    if (!json_is_boolean(x)) return bad(c, "noise", "must be boolean");
    cfg->noise = json_is_true(x);
  }
  if ((x = json_object_get(root, "warm_start"))) {
    if (!json_is_boolean(x)) return bad(c, "warm_start", "must be boolean");
    cfg->warm_start = json_is_true(x);
  }
  if ((x = json_object_get(root, "batching"))) {
    const char *b = json_string_value(x);
    if (!b || (strcmp(b, "greedy") && strcmp(b, "runtime")))
      return bad(c, "batching", "must be \"greedy\" or \"runtime\"");
    cfg->runtime_batching = !strcmp(b, "runtime");
  }
  if ((x = json_object_get(root, "billing"))) {
    const char *b = json_string_value(x);
    if (!b || (strcmp(b, "workers") && strcmp(b, "instances")))
      return bad(c, "billing", "must be \"workers\" or \"instances\"");
    cfg->bill_instances = !strcmp(b, "instances");
  }
  size_t cap = 0;
  if ((x = json_object_get(root, "profiles")) &&
      (rc = load_profiles(c, cfg, &cap, x)))
    return rc;
  if ((x = json_object_get(root, "proteus")) &&
      (rc = load_proteus(c, cfg, &cap, x)))
    return rc;
  if (cfg->nprofiles == 0)
    return bad(c, "(root)", "no profiles (\"profiles\" or \"proteus\")");
  if (!(x = json_object_get(root, "workers")))
    return bad(c, "(root)", "\"workers\" is required");
  if ((rc = load_workers(c, cfg, x))) return rc;
  if ((rc = pick_policy(c, cfg, root))) return rc;
  x = json_object_get(root, "workloads");
  if (!json_is_array(x) || json_array_size(x) < 1 ||
      json_array_size(x) > 10000)
    return bad(c, "workloads", "must be an array of 1..10000 streams");
  cfg->streams = VR_NEWN(vr_workload, json_array_size(x));
  if (!cfg->streams) return VR_ENOMEM;
  for (size_t i = 0; i < json_array_size(x); i++) {
    char w[48];
    snprintf(w, sizeof w, "workloads[%zu]", i);
    cfg->nstreams++;
    if ((rc = load_stream(c, &cfg->streams[i], json_array_get(x, i), w)))
      return rc;
  }
  if ((x = json_object_get(root, "interference")) &&
      (rc = load_interference(c, cfg, x)))
    return rc;
  return 0;
}

int vr_sim_cfg_parse(const char *text, size_t len, const char *name,
                     const char *base_dir, const char *data_dir,
                     const char *policy, vr_sim_cfg *cfg, vr_errbuf *err) {
  memset(cfg, 0, sizeof *cfg);
  json_error_t je;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!root)
    return vr_errf(err, VR_EFORMAT, "%s:%d:%d: %s", name, je.line, je.column,
                   je.text);
  ctx c = {name, base_dir, data_dir, policy, err};
  int rc = parse_root(&c, cfg, root);
  json_decref(root);
  if (rc == VR_ENOMEM && err && !err->msg[0])
    vr_errf(err, rc, "%s: out of memory", name);
  if (rc) vr_sim_cfg_free(cfg);
  return rc;
}

int vr_sim_cfg_load(const char *path, const char *data_dir,
                    const char *policy, vr_sim_cfg *cfg, vr_errbuf *err) {
  memset(cfg, 0, sizeof *cfg);
  FILE *f = fopen(path, "rb");
  if (!f) return vr_errf(err, VR_EIO, "%s: cannot open: %s", path,
                         strerror(errno));
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 4096 > cap) {
      cap = cap ? cap * 2 : 65536;
      if (cap > (64u << 20)) {
        vr_free(buf);
        fclose(f);
        return vr_errf(err, VR_ELIMIT, "%s: larger than 64 MiB", path);
      }
      char *nb = vr_realloc(buf, cap);
      if (!nb) {
        vr_free(buf);
        fclose(f);
        return vr_errf(err, VR_ENOMEM, "out of memory");
      }
      buf = nb;
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (n == 0) break;
  }
  fclose(f);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  else snprintf(dir, sizeof dir, ".");
  int rc = vr_sim_cfg_parse(buf, len, path, dir, data_dir, policy, cfg, err);
  vr_free(buf);
  return rc;
}

void vr_sim_cfg_free(vr_sim_cfg *cfg) {
  for (size_t i = 0; i < cfg->nstreams; i++) vr_wl_close(&cfg->streams[i]);
  vr_free(cfg->streams);
  vr_free(cfg->profiles);
  vr_free(cfg->wtypes);
  vr_free(cfg->interf);
  memset(cfg, 0, sizeof *cfg);
}
