/* `vario sim --config FILE [--data DIR] [--policy LABEL] [--output PREFIX]
 *            [--plot png|svg] [--seed N] [--duration S] [--quiet]` */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "sim/sim.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: vario sim --config FILE [options]\n"
          "       vario sim --loki DIR --app APP ... (pipelines; --loki "
          "--help)\n"
          "  --data DIR      shared data directory for \"data:\" paths\n"
          "  --output PREFIX write PREFIX.csv, PREFIX.instances.csv,\n"
          "                  PREFIX.json (and a plot with --plot)\n"
          "  --plot FMT      png or svg: PREFIX.FMT via gnuplot\n"
          "  --policy LABEL  pick one entry of the config's \"policies\"\n"
          "  --seed N        override the config's seed\n"
          "  --duration S    override duration_s\n"
          "  --quiet         no summary on stdout\n"
          "  --list-variants print the variants (SLO of the first stream)\n"
          "Exit codes: 0 ok, 1 error, 2 usage, 77 shared data missing.\n");
}

/* Prints each variant's facts under the SLO of the first stream: what an
 * operator needs to size the baselines' fixed variants. */
static void list_variants(const vr_sim_cfg *cfg) {
  double slo = cfg->nstreams ? cfg->streams[0].slo_ms : 100;
  printf("%-36s %-4s %3s %5s %8s %8s %6s %9s %10s\n", "variant", "dev", "thr",
         "maxb", "tail1_ms", "acc", "batch", "sat_qps", "cost/s");
  for (size_t i = 0; i < cfg->nprofiles; i++) {
    const vr_profile *p = &cfg->profiles[i];
    printf("%-36s %-4s %3d %5d %8.2f %8.2f %6d %9.2f %10.3g\n", p->variant,
           vr_device_name(p->device), p->threads, p->max_batch,
           vr_profile_tail_ms(p, 1), p->accuracy,
           vr_profile_batch_for_slo(p, slo), vr_profile_sat_qps(p, slo),
           p->cost_per_s);
  }
}

static FILE *open_out(const char *prefix, const char *suffix, char *path,
                      size_t cap) {
  snprintf(path, cap, "%s%s", prefix, suffix);
  FILE *f = fopen(path, "w");
  if (!f) fprintf(stderr, "vario sim: %s: %s\n", path, strerror(errno));
  return f;
}

int vr_cmd_sim(int argc, char **argv) {
  for (int i = 1; i < argc; i++) /* pipelines: cmd_sim_pipe.c */
    if (!strcmp(argv[i], "--loki") || !strcmp(argv[i], "--pipeline"))
      return vr_cmd_sim_pipe(argc, argv);
  const char *config = NULL, *data = NULL, *out = NULL, *plot = NULL,
             *policy = NULL;
  long long seed = -1;
  double duration = -1;
  int quiet = 0, list = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--quiet")) {
      quiet = 1;
    } else if (!strcmp(a, "--list-variants")) {
      list = 1;
    } else if (v && !strcmp(a, "--config")) config = v, i++;
    else if (v && !strcmp(a, "--data")) data = v, i++;
    else if (v && (!strcmp(a, "--output") || !strcmp(a, "--out"))) out = v, i++;
    else if (v && !strcmp(a, "--plot")) plot = v, i++;
    else if (v && !strcmp(a, "--policy")) policy = v, i++;
    else if (v && !strcmp(a, "--seed")) {
      if (vr__cli_ll("sim", a, v, 0, LLONG_MAX, &seed)) return 2;
      i++;
    } else if (v && !strcmp(a, "--duration")) {
      if (vr__cli_num("sim", a, v, 1e-3, 1e8, &duration)) return 2;
      i++;
    }
    else {
      fprintf(stderr, "vario sim: unknown or incomplete option '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (!config || (plot && strcmp(plot, "png") && strcmp(plot, "svg")) ||
      (plot && !out)) {
    usage(stderr);
    return 2;
  }
  if (out) { /* PREFIX.json must not overwrite the config itself */
    char js[4096];
    snprintf(js, sizeof js, "%s.json", out);
    if (!strcmp(js, config)) {
      fprintf(stderr, "vario sim: --out %s would overwrite the config\n", out);
      return 2;
    }
  }
  vr_sim_cfg cfg;
  vr_errbuf err = {0};
  int rc = vr_sim_cfg_load(config, data, policy, &cfg, &err);
  if (rc) {
    fprintf(stderr, "vario sim: %s\n", err.msg);
    /* an experiment over the shared data, run without it: skip */
    return rc == VR_ENOENT && strstr(err.msg, "--data") ? 77 : 1;
  }
  if (list) {
    list_variants(&cfg);
    vr_sim_cfg_free(&cfg);
    return 0;
  }
  if (seed >= 0) cfg.seed = (uint64_t)seed;
  if (duration > 0) cfg.duration_s = duration;
  if (cfg.warmup_s >= cfg.duration_s) { /* nothing would be counted */
    fprintf(stderr, "vario sim: warmup_s %g is not below the duration %g s\n", cfg.warmup_s,
            cfg.duration_s);
    vr_sim_cfg_free(&cfg);
    return 2;
  }
  char csv_path[4096] = "", inst_path[4096] = "", path[4096];
  vr_sim_out o = {0};
  if (out) {
    o.csv = open_out(out, ".csv", csv_path, sizeof csv_path);
    o.instances_csv = open_out(out, ".instances.csv", inst_path,
                               sizeof inst_path);
    if (!o.csv || !o.instances_csv) rc = VR_EIO;
  }
  vr_sim_summary sum = {0};
  if (!rc && (rc = vr_sim_run(&cfg, &o, &sum, &err)))
    fprintf(stderr, "vario sim: %s\n", err.msg[0] ? err.msg : vr_strerror(rc));
  if (o.csv) fclose(o.csv);
  if (o.instances_csv) fclose(o.instances_csv);
  if (!rc && out) {
    FILE *j = open_out(out, ".json", path, sizeof path);
    if (!j || vr_sim_summary_write(&cfg, &sum, j)) rc = VR_EIO;
    if (j) fclose(j);
  }
  if (!rc && plot) {
    char img[4096];
    snprintf(img, sizeof img, "%s.%s", out, plot);
    if (vr_sim_plot(csv_path, inst_path, img, cfg.name, &err))
      fprintf(stderr, "vario sim: %s (results are still written)\n", err.msg);
  }
  if (!rc && !quiet) vr_sim_summary_write(&cfg, &sum, stdout);
  vr_sim_cfg_free(&cfg);
  return rc ? 1 : 0;
}
