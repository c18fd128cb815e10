/* `vario sim --loki DIR --app APP | --pipeline APP.json --runtimes CSV ...`:
 * the pipeline simulator (sim/psim.h) on a Loki app definition and its
 * profiles as published. One line per policy on stdout:
 *   policy=<name> violations_pct=<x> capacity_qps=<x> offpeak_servers=<x>
 *   accuracy_pct=<x> */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "cli/commands.h"
#include "sim/il_sim.h"
#include "sim/psim_ctl.h"

static void usage(FILE *f) {
  fprintf(f,
      "usage: vario sim --loki DATA_DIR --app APP [options]\n"
      "       vario sim --pipeline APP.json --runtimes CSV [--branching CSV]\n"
      "                 [--variants DIR] [options]\n"
      "  --accel NAME      runtimes rows to use (onnxruntime_gpu_pascal)\n"
      "  --policy LIST     comma-separated pipeline policies (hw)\n"
      "  --drop-mode MODE  none|last_task|per_task|reroute (policy default)\n"
      "  --workers N       cluster size (20)\n"
      "  --demand SPEC     root rate points T:QPS,... (linear ramps, Poisson)\n"
      "  --duration S      (default: the last demand point)\n"
      "  --warmup S, --seed N, --period S (replan, 10), --load-s S (0),\n"
      "  --slack X         planners provision X x the demand (1.0)\n"
      "  --noise           draw service times from the percentiles\n"
      "  --output PREFIX   PREFIX.<policy>.csv, .plans.csv and .json (alias --out)\n"
      "Exit codes: 0 ok, 1 error, 2 usage, 77 data missing.\n");
}

/* "T:QPS,T:QPS,..." into a piecewise workload. */
static int parse_demand(const char *spec, vr_workload *w, vr_errbuf *err) {
  memset(w, 0, sizeof *w);
  w->kind = VR_WL_PIECEWISE;
  int n = 1;
  for (const char *s = spec; *s; s++) n += *s == ',';
  if (!(w->pts = VR_NEWN(vr_wl_point, n)))
    return vr_errf(err, VR_ENOMEM, "out of memory");
  const char *s = spec;
  for (int i = 0; i < n; i++) {
    char *end;
    double t = strtod(s, &end);
    if (*end != ':') goto bad;
    double r = strtod(end + 1, &end);
    if ((*end && *end != ',') || !(t >= 0) || !(r >= 0) ||
        (i && t < w->pts[i - 1].t_s) || r > 1e6)
      goto bad;
    w->pts[i] = (vr_wl_point){t, r};
    w->npts = i + 1;
    s = end + (*end == ',');
  }
  return 0;
bad:
  vr_wl_close(w);
  return vr_errf(err, VR_EINVAL, "--demand: expected T:QPS,... with times "
                 "non-decreasing, got '%s'", spec);
}

static FILE *open_out(const char *prefix, const char *pol, const char *ext) {
  char path[4096];
  snprintf(path, sizeof path, "%s.%s.%s", prefix, pol, ext);
  FILE *f = fopen(path, "w");
  if (!f) fprintf(stderr, "vario sim: %s: %s\n", path, strerror(errno));
  return f;
}

typedef struct opts {
  const char *loki, *app, *pipeline, *runtimes, *branching, *variants;
  const char *accel, *policies, *drop, *demand, *out;
  int workers, noise;
  long long seed;
  double duration, warmup, period, load_s, slack;
} opts;

static int parse_args(int argc, char **argv, opts *o) {
  *o = (opts){.policies = "hw", .workers = 20, .demand = "0:20,300:20",
              .duration = -1, .period = 10, .seed = 1, .slack = 1.0};
  /* anywhere: `vario sim --loki --help` (as `vario sim --help` says) would
   * take --help for the data directory */
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--noise")) { o->noise = 1; continue; }
    if (!v) return -1;
    i++;
    if (!strcmp(a, "--loki")) o->loki = v;
    else if (!strcmp(a, "--app")) o->app = v;
    else if (!strcmp(a, "--pipeline")) o->pipeline = v;
    else if (!strcmp(a, "--runtimes")) o->runtimes = v;
    else if (!strcmp(a, "--branching")) o->branching = v;
    else if (!strcmp(a, "--variants")) o->variants = v;
    else if (!strcmp(a, "--accel")) o->accel = v;
    else if (!strcmp(a, "--policy")) o->policies = v;
    else if (!strcmp(a, "--drop-mode")) o->drop = v;
    else if (!strcmp(a, "--demand")) o->demand = v;
    else if (!strcmp(a, "--output") || !strcmp(a, "--out")) o->out = v;
    else if (!strcmp(a, "--workers")) {
      if (vr__cli_int("sim", a, v, 1, 100000, &o->workers)) return -2;
    } else if (!strcmp(a, "--seed")) {
      if (vr__cli_ll("sim", a, v, 0, LLONG_MAX, &o->seed)) return -2;
    } else if (!strcmp(a, "--duration")) {
      if (vr__cli_num("sim", a, v, 1e-3, 1e8, &o->duration)) return -2;
    } else if (!strcmp(a, "--warmup")) {
      if (vr__cli_num("sim", a, v, 0, 1e8, &o->warmup)) return -2;
    } else if (!strcmp(a, "--period")) {
      if (vr__cli_num("sim", a, v, 1e-3, 1e6, &o->period)) return -2;
    } else if (!strcmp(a, "--load-s")) {
      if (vr__cli_num("sim", a, v, 0, 1e6, &o->load_s)) return -2;
    } else if (!strcmp(a, "--slack")) {
      if (vr__cli_num("sim", a, v, 0, 1e6, &o->slack)) return -2;
    }
    else return -1;
  }
  if (!!o->loki + !!o->pipeline != 1 || (o->loki && !o->app) ||
      (o->pipeline && !o->runtimes))
    return -1;
  return 0;
}

static int load(const opts *o, vr_pipe_data *d, vr_errbuf *err) {
  if (o->loki) return vr_loki_load(o->loki, o->app, o->accel, d, err);
  return vr_loki_load_files(o->pipeline, o->variants, o->runtimes,
                            o->branching, o->accel, d, err);
}

static int run_policy(const opts *o, const vr_pipe_data *d, vr_workload *wl,
                      const char *pol, vr_errbuf *err) {
  vr_psim_cfg cfg = {.data = d, .arrivals = wl, .workers = o->workers,
                     .duration_s = o->duration, .warmup_s = o->warmup,
                     .tick_s = 1, .seed = (uint64_t)o->seed,
                     .noise = o->noise, .max_queue = 4096, .drop_mode = -1,
                     .load_s = o->load_s, .ctl_period_s = o->period,
                     .ctl_change = 0.2};
  if (o->drop && (cfg.drop_mode = vr_edrop_parse(o->drop)) < 0)
    return vr_errf(err, VR_EINVAL, "--drop-mode: unknown mode '%s'", o->drop);
  vr_psim_ctl ctl;
  int rc = vr_psim_policy(pol, d, &ctl, &cfg, err);
  if (rc) return rc;
  /* InferLine's policies plan once, at t = 0, on a Gamma CV 1 sample at
   * the demand's starting rate (sim/il_sim.h), then tick every period */
  vr_il_live_opts ilo = {.rate_qps = vr_wl_rate_at(wl, 0), .cv = 1};
  /* (il_sim's own message names vario serve's --inferline-rate) */
  if (vr_pipe_policies[ctl.kind].ctx_new && !(ilo.rate_qps > 0))
    return vr_errf(err, VR_EINVAL, "InferLine's planner samples the demand's "
                   "rate at t = 0, and the first --demand point is 0 q/s");
  vr_il_pipe_arg ila = {.configure = vr_il_sim_configure, .self = &ilo};
  ctl.arg = &ila;
  if (!(o->slack >= 1 && o->slack <= 10))
    return vr_errf(err, VR_EINVAL, "--slack %g not in [1,10]", o->slack);
  ctl.slack = o->slack;
  FILE *csv = o->out ? open_out(o->out, pol, "csv") : NULL;
  cfg.plans_csv = o->out ? open_out(o->out, pol, "plans.csv") : NULL;
  if (o->out && (!csv || !cfg.plans_csv)) {
    if (csv) fclose(csv);
    if (cfg.plans_csv) fclose(cfg.plans_csv);
    return VR_EIO;
  }
  if (cfg.plans_csv)
    fprintf(cfg.plans_csv, "t_s,task,variant,instances,batch,lat_ms,"
                           "accuracy_scaled,feasible\n");
  vr_psim_summary s;
  rc = vr_psim_run(&cfg, csv, &s, err);
  vr_psim_ctl_free(&ctl);
  if (csv) fclose(csv);
  if (cfg.plans_csv) fclose(cfg.plans_csv);
  if (rc) return rc;
  printf("policy=%s violations_pct=%.3f capacity_qps=%.1f offpeak_servers=%.2f"
         " accuracy_pct=%.2f\n", pol, s.violations_pct, s.capacity_qps,
         s.offpeak_workers, s.accuracy_pct);
  fflush(stdout);
  if (o->out) {
    FILE *j = open_out(o->out, pol, "json");
    if (!j || vr_psim_summary_write(&cfg, pol, &s, j)) rc = VR_EIO;
    if (j) fclose(j);
  }
  vr_psim_summary_free(&s);
  return rc;
}

int vr_cmd_sim_pipe(int argc, char **argv) {
  opts o;
  int a = parse_args(argc, argv, &o);
  if (a) {
    usage(a > 0 ? stdout : stderr);
    return a > 0 ? 0 : 2;
  }
  vr_errbuf err = {0};
  vr_workload wl;
  if (parse_demand(o.demand, &wl, &err)) {
    fprintf(stderr, "vario sim: %s\n", err.msg);
    return 2;
  }
  vr_pipe_data d;
  int rc = load(&o, &d, &err);
  if (rc) {
    fprintf(stderr, "vario sim: %s\n", err.msg);
    vr_wl_close(&wl);
    return rc == VR_EIO && o.loki ? 77 : 1;
  }
  if (d.notes[0]) fprintf(stderr, "vario sim: note: %s\n", d.notes);
  if (o.duration <= 0) o.duration = wl.pts[wl.npts - 1].t_s;
  char *list = vr_strdup(o.policies), *save = NULL;
  for (char *pol = strtok_r(list, ",", &save); !rc && pol;
       pol = strtok_r(NULL, ",", &save))
    if ((rc = run_policy(&o, &d, &wl, pol, &err)))
      fprintf(stderr, "vario sim: %s: %s\n", pol, err.msg);
  vr_free(list);
  vr_wl_close(&wl);
  vr_pipe_data_free(&d);
  return rc ? 1 : 0;
}
