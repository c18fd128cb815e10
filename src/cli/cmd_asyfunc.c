/* `vario asyfunc BLOCKS.json`: AsyFunc vs AsyFunc⁻ vs BATCH in the
 * simulator on one model's block profile (from `vario perf --blocks
 * --out`), bursty arrivals from the seeded generator of asyfunc_sim.h. */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "cli/commands.h"
#include "sim/asyfunc_sim.h"

static void usage(void) {
  fprintf(stderr,
          "usage: vario asyfunc BLOCKS.json [--policy asyfunc|asyfunc-|batch|all]\n"
          "                     [--scale N] [--base-qps Q] [--duration S] [--seed K]\n"
          "                     [--slo-ms X] [--period S] [--periods-csv FILE] [-v]\n"
          "                     [--gamma G] [--gamma-total] [--kappa K] [--lookback P]\n"
          "                     [--spike MIN:MAX] [--cmax C] [--slo-cmax K]\n"
          "                     [--batch-objective cost|cores] [--rmax-pairs]\n"
          "                     [--release-ms T] [--paper-scale-in] [--paper-scheduler]\n"
          "Base rate: Q, or N (default 8) x the rate one 1-core body sustains\n"
          "within the SLO. SLO: X, or K x the latency at (C_max, B_max) (the\n"
          "paper's rule; arrivals as without it), or 1.5 x the model's latency at\n"
          "1 core, batch B_max. --rmax-pairs: MLS counts a paired body as its\n"
          "pair (Eq. 1). Shadows go once the queue stayed below the LLS threshold\n"
          "T ms (1000). MLS scales in only while one body fewer keeps r <= alpha\n"
          "R_max (--paper-scale-in: while r < beta R_max, Algorithm 1). LLS fires when the queue holds gamma (2) requests per live\n"
          "body (--gamma-total: gamma in all, as in the paper). The scheduler gives an idle instance\n"
          "the most rows whose oldest still meets the SLO, best throughput per core first\n"
          "(--paper-scheduler: Algorithm 3 as written, fewest cores first, the whole queue).\n"
          "BATCH provisions\n"
          "for the peak 1-s rate of the last P (10) periods, in one configuration\n"
          "with the least (cores + memory) per request (cost, default; memory of\n"
          "a whole model = 1 core as in MLS) or cores per request (cores).\n"
          "--cmax C uses only the profile's tuples for 1..C cores (C_max = C: bodies, shadows and\n"
          "BATCH get at most C cores; same SLO and arrivals). One line per policy:\n"
          "model=M policy=P cpu_core_s=X mem_gb_s=X violations_pct=X\n");
}

/* "MIN:MAX", both whole numbers of the string, 1 <= MIN <= MAX <= 1000. */
static int parse_spike(const char *s, double *lo, double *hi) {
  char buf[64];
  const char *colon = strchr(s, ':');
  if (!colon || (size_t)(colon - s) >= sizeof buf) return -1;
  memcpy(buf, s, (size_t)(colon - s));
  buf[colon - s] = 0;
  if (vr__cli_parse_num(buf, 1, 1000, lo) || vr__cli_parse_num(colon + 1, 1, 1000, hi)) return -1;
  return *lo <= *hi ? 0 : -1;
}

typedef struct af_args {
  const char *file, *csv;
  int all, verbose, gamma, kappa, lookback, gamma_total, cmax, rmax_pairs, paper_scale_in;
  int paper_sched;
  double release_ms;
  vr_af_policy pol;
  vr_af_batch_obj batch_obj;
  double scale, base, duration, slo, slo_cmax, period, mul_min, mul_max;
  uint64_t seed;
} af_args;

static int parse(int argc, char **argv, af_args *a) {
  memset(a, 0, sizeof *a);
  a->all = 1;
  a->scale = 8;
  a->duration = 1800;
  a->seed = 1;
  a->period = 60;
  a->release_ms = -1;
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(s, "--policy") && more) {
      const char *p = argv[++i];
      a->all = !strcmp(p, "all");
      if (!a->all && vr_af_policy_parse(p, &a->pol)) {
        fprintf(stderr, "vario asyfunc: unknown policy '%s'\n", p);
        return 2;
      }
    } else if (!strcmp(s, "--scale") && more) {
      if (vr__cli_num("asyfunc", s, argv[++i], 1e-9, 1e6, &a->scale)) return 2;
    } else if (!strcmp(s, "--base-qps") && more) {
      if (vr__cli_num("asyfunc", s, argv[++i], 0, 1e9, &a->base)) return 2;
    } else if (!strcmp(s, "--duration") && more) {
      if (vr__cli_num("asyfunc", s, argv[++i], 1e-3, 86400 * 7, &a->duration)) return 2;
    } else if (!strcmp(s, "--seed") && more) {
      long long v;
      if (vr__cli_ll("asyfunc", s, argv[++i], 0, LLONG_MAX, &v)) return 2;
      a->seed = (uint64_t)v;
    } else if (!strcmp(s, "--slo-ms") && more) {
      if (vr__cli_num("asyfunc", s, argv[++i], 0, 1e7, &a->slo)) return 2;
    } else if (!strcmp(s, "--slo-cmax") && more) {
      if (vr__cli_num("asyfunc", s, argv[++i], 0, 1e6, &a->slo_cmax)) return 2;
    }
    else if (!strcmp(s, "--batch-objective") && more) {
      const char *o = argv[++i];
      if (!strcmp(o, "cost")) a->batch_obj = VR_AF_BATCH_COST;
      else if (!strcmp(o, "cores")) a->batch_obj = VR_AF_BATCH_CORES;
      else {
        fprintf(stderr, "vario asyfunc: --batch-objective wants cost or cores\n");
        return 2;
      }
    }
    else if (!strcmp(s, "--period") && more) {
      if (vr__cli_num("asyfunc", s, argv[++i], 1e-3, 86400, &a->period)) return 2;
    }
    else if (!strcmp(s, "--periods-csv") && more) a->csv = argv[++i];
    else if (!strcmp(s, "--gamma") && more) {
      if (vr__cli_int("asyfunc", s, argv[++i], 0, 1000000, &a->gamma)) return 2;
    }
    else if (!strcmp(s, "--gamma-total")) a->gamma_total = 1;
    else if (!strcmp(s, "--rmax-pairs")) a->rmax_pairs = 1;
    else if (!strcmp(s, "--paper-scale-in")) a->paper_scale_in = 1;
    else if (!strcmp(s, "--paper-scheduler")) a->paper_sched = 1;
    else if (!strcmp(s, "--release-ms") && more) {
      if (vr__cli_num("asyfunc", s, argv[++i], 0, 1e9, &a->release_ms)) return 2;
    }
    else if (!strcmp(s, "--spike") && more) {
      if (parse_spike(argv[++i], &a->mul_min, &a->mul_max)) {
        fprintf(stderr, "vario asyfunc: --spike wants MIN:MAX multipliers, 1 <= MIN <= MAX <= 1000, "
                "not '%s'\n", argv[i]);
        return 2;
      }
    }
    else if (!strcmp(s, "--kappa") && more) {
      if (vr__cli_int("asyfunc", s, argv[++i], 0, 1000000, &a->kappa)) return 2;
    } else if (!strcmp(s, "--lookback") && more) {
      if (vr__cli_int("asyfunc", s, argv[++i], 0, 1000000, &a->lookback)) return 2;
    } else if (!strcmp(s, "--cmax") && more) {
      if (vr__cli_int("asyfunc", s, argv[++i], 0, VR_AF_MAXC, &a->cmax)) return 2;
    }
    else if (!strcmp(s, "-v")) a->verbose = 1;
    else if (!strcmp(s, "-h") || !strcmp(s, "--help")) { usage(); return 1; }
    else if (s[0] != '-' && !a->file) a->file = s;
    else { fprintf(stderr, "vario asyfunc: unexpected argument '%s'\n", s); usage(); return 2; }
  }
  if (!a->file || !(a->scale > 0) || a->base < 0 || !(a->duration > 0) || a->slo < 0 || a->slo_cmax < 0 ||
      !(a->period > 0) || a->duration > 86400 * 7 || a->cmax < 0 || a->cmax > VR_AF_MAXC) {
    usage();
    return 2;
  }
  return 0;
}

static int load(const char *file, vr_af_model *m) {
  json_error_t je;
  json_t *j = json_load_file(file, 0, &je);
  if (!j) {
    fprintf(stderr, "vario asyfunc: %s:%d: %s\n", file, je.line, je.text);
    return 1;
  }
  vr_errbuf err = {0};
  int rc = vr_af_model_from_json(j, m, &err);
  json_decref(j);
  if (rc) fprintf(stderr, "vario asyfunc: %s: %s\n", file, err.msg);
  return rc ? 1 : 0;
}

static void report(const af_args *a, const vr_af_model *m, vr_af_policy p,
                   const vr_af_sim_result *r, FILE *csv) {
  printf("model=%s policy=%s cpu_core_s=%.1f mem_gb_s=%.1f violations_pct=%.3f\n", m->name,
         vr_af_policy_name(p), r->cpu_core_s, r->mem_gb_s, r->violations_pct);
  if (a->verbose)
    fprintf(stderr,
            "  requests %lld violated %lld dropped %lld bodies created %d (max %d) shadows "
            "created %d released %d (max %d) paired batches %.1f%% busy core-s %.1f\n",
            (long long)r->requests, (long long)r->violated, (long long)r->dropped,
            r->bodies_created, r->max_bodies, r->shadows_created, r->shadows_released,
            r->max_shadows, r->paired_batches_pct, r->busy_core_s);
  for (int k = 0; csv && k < r->nperiods; k++)
    fprintf(csv, "%s,%s,%d,%.3f,%.4f\n", m->name, vr_af_policy_name(p), k, r->period_cores[k],
            r->period_gb[k]);
}

int vr_cmd_asyfunc(int argc, char **argv) {
  af_args a;
  int rc = parse(argc, argv, &a);
  if (rc) return rc == 1 ? 0 : rc;
  vr_af_model m;
  if (load(a.file, &m)) return 1;
  if (a.cmax > 0 && a.cmax < m.cmax) m.cmax = a.cmax;
  double slo = a.slo > 0        ? a.slo
               : a.slo_cmax > 0 ? a.slo_cmax * vr_af_lat(&m, VR_AF_ALL(&m), m.cmax, m.bmax)
                                : vr_af_default_slo(&m);
  /* under --slo-cmax the arrivals stay those of the default SLO, so that
   * the two SLO rules compare on the same requests */
  double unit = vr_af_rmax(&m, 1, a.slo_cmax > 0 ? vr_af_default_slo(&m) : slo, NULL);
  double base = a.base > 0 ? a.base : a.scale * unit;
  if (!(base > 0)) {
    fprintf(stderr, "vario asyfunc: no configuration meets the %.2f ms SLO\n", slo);
    return 1;
  }
  vr_af_workload w;
  vr_af_workload_init(&w, base, a.duration, a.seed);
  if (a.mul_min > 0) w.mul_min = a.mul_min, w.mul_max = a.mul_max;
  double *arr = NULL;
  int64_t n = 0;
  if (vr_af_arrivals(&w, &arr, &n)) {
    fprintf(stderr, "vario asyfunc: cannot generate arrivals\n");
    return 1;
  }
  if (a.verbose) {
    int bc, bb;
    vr_af_batch_cfg_obj(&m, slo, a.batch_obj, &bc, &bb);
    fprintf(stderr, "%s: slo %.2f ms, base %.1f qps, %lld requests over %.0f s; BATCH: %d cores, "
            "batch %d\n", m.name, slo, base, (long long)n, a.duration, bc, bb);
  }
  FILE *csv = a.csv ? fopen(a.csv, "a") : NULL;
  if (a.csv && !csv) {
    fprintf(stderr, "vario asyfunc: cannot open %s\n", a.csv);
    vr_free(arr);
    return 1;
  }
  for (int p = 0; p < 3; p++) {
    if (!a.all && p != (int)a.pol) continue;
    vr_af_sim_cfg cfg;
    vr_af_sim_cfg_init(&cfg, (vr_af_policy)p, slo);
    cfg.period_s = a.period;
    if (a.gamma > 0) cfg.scale.gamma = a.gamma;
    if (a.gamma_total) cfg.gamma_per_body = 0;
    if (a.kappa > 0) cfg.scale.kappa = a.kappa;
    if (a.lookback > 0) cfg.batch_lookback = a.lookback;
    cfg.batch_obj = a.batch_obj;
    cfg.rmax_pairs = a.rmax_pairs;
    if (a.paper_scale_in) cfg.scale.scale_in_guard = 0;
    cfg.paper_scheduler = a.paper_sched;
    if (a.release_ms >= 0) cfg.release_idle_ms = a.release_ms;
    vr_af_sim_result *r = vr_malloc(sizeof *r);
    if (!r || vr_af_simulate(&m, &cfg, arr, n, r)) {
      fprintf(stderr, "vario asyfunc: out of memory\n");
      vr_free(r);
      rc = 1;
      break;
    }
    report(&a, &m, (vr_af_policy)p, r, csv);
    vr_free(r);
  }
  if (csv) fclose(csv);
  vr_free(arr);
  return rc;
}
