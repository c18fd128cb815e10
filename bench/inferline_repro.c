/*
 * InferLine's evaluation in the pipeline simulator (SoCC'20 Fig. 5/6/10):
 * each policy plans on a 60 s sample trace, then serves a separate
 * evaluation trace with the same process (different seed); one line per
 * policy:
 *
 *   policy=<name> cost=<$/h> p99_miss_pct=<%> cv=<cv>  [details...]
 *
 *   bench_inferline_repro DATA_DIR APP [--cv 1|4] [--rate QPS]
 *       [--slo MS] [--ramp X] [--duration S] [--sample S] [--seed N] [--load-s S]
 *       [--accel NAME=PRICE_PER_H,...] [--policy a,b] [--plan-bench N]
 *
 * --ramp X: the evaluation rate ramps linearly from QPS to X*QPS over the
 * middle third of the run (Poisson; the sample trace stays at QPS).
 * --spike X: the evaluation rate steps to X*QPS for 20 s at a third of
 * the run, then back (Poisson).
 * --csv PREFIX writes psim's per-tick rows of each policy to
 * PREFIX.<policy>.csv (t_s, demand, ok, late, dropped, ..., workers).
 * --plan-bench N: time N planner runs and print plan_s p50/max instead.
 * --capacity S: InferLine's effective capacity on S workers instead (the
 * highest rate whose plan fits in S instances; the plan's misses on a
 * fresh trace are printed): policy=inferline_plan capacity_qps=<x> ...
 * --sample S: the sample trace's length (default 60 s, the paper's and the
 * issue's; longer samples show how much of the planner's misses on a
 * fresh trace come from planning on 60 s of a bursty process).
 * --cg-factor F: the coarse baselines' batch is the largest b with
 * F x service(b) <= SLO (default 2, Vario's SLO rule; 1 is the paper's
 * "maximum batch size capable of meeting the SLO").
 * --eval-seed N (default 1001) seeds the evaluation trace; --noise 0|1
 * (default 1) draws service times from the profiles' percentiles.
 * Exit 77 when DATA_DIR lacks the app (skip).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "bench_util.h"
#include "sim/il_sim.h"

typedef struct opts {
  const char *dir, *app, *accel, *policies, *csv;
  double cv, rate, slo, ramp, spike, duration, load_s, sample_s, cg_factor;
  int plan_bench, noise, capacity;
  uint64_t seed, eval_seed;
} opts;

/* Strict numbers: the whole of V a finite double (a non-negative decimal
 * integer for the _u variant), else a message naming option A and -1. */
static int num(const char *a, const char *v, double *out) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (end == v || *end || errno == ERANGE || !isfinite(x)) {
    fprintf(stderr, "inferline_repro: %s: not a finite number: '%s'\n", a, v);
    return -1;
  }
  *out = x;
  return 0;
}

static int num_u(const char *a, const char *v, unsigned long long max,
                 unsigned long long *out) {
  char *end;
  errno = 0;
  unsigned long long x = v[0] >= '0' && v[0] <= '9' ? strtoull(v, &end, 10) : 0;
  if (!(v[0] >= '0' && v[0] <= '9') || *end || errno == ERANGE || x > max) {
    fprintf(stderr, "inferline_repro: %s: expected an integer in [0, %llu]: '%s'\n",
            a, max, v);
    return -1;
  }
  *out = x;
  return 0;
}

/* A range check with its message: LO <= X (LO < X when OPEN), X <= HI. */
static int in_range(const char *a, double x, double lo, int open, double hi) {
  if ((open ? x > lo : x >= lo) && x <= hi) return 0;
  fprintf(stderr, "inferline_repro: %s: %g is out of range (%s %g, at most %g)\n",
          a, x, open ? "above" : "at least", lo, hi);
  return -1;
}

static int parse(int argc, char **argv, opts *o) {
  *o = (opts){.cv = 1, .rate = 30, .duration = 120, .load_s = 1, .sample_s = 60,
              .seed = 1, .eval_seed = 1001, .noise = 1, .accel = "onnxruntime_gpu_pascal=0.90",
              .policies = "inferline,inferline_plan,cg_peak,cg_mean,"
                           "cg_peak_static,cg_mean_static"};
  if (argc < 3) return -1;
  o->dir = argv[1], o->app = argv[2];
  for (int i = 3; i < argc; i += 2) {
    const char *a = argv[i];
    if (i + 1 >= argc) {
      fprintf(stderr, "inferline_repro: %s: missing value\n", a);
      return -1;
    }
    const char *v = argv[i + 1];
    double *d = NULL;
    double lo = 0, hi = 1e9;
    int open = 0;
    unsigned long long u, umax = 0;
    if (!strcmp(a, "--cv")) d = &o->cv, open = 1, hi = 1000;
    else if (!strcmp(a, "--rate")) d = &o->rate, open = 1;
    else if (!strcmp(a, "--slo")) d = &o->slo; /* 0: the app's */
    else if (!strcmp(a, "--ramp")) d = &o->ramp, hi = 1e6;
    else if (!strcmp(a, "--spike")) d = &o->spike, hi = 1e6;
    else if (!strcmp(a, "--duration")) d = &o->duration, open = 1, hi = 1e7;
    else if (!strcmp(a, "--sample")) d = &o->sample_s, open = 1, hi = 1e7;
    else if (!strcmp(a, "--cg-factor")) d = &o->cg_factor, hi = 1e6;
    else if (!strcmp(a, "--load-s")) d = &o->load_s, hi = 1e6;
    else if (!strcmp(a, "--seed") || !strcmp(a, "--eval-seed")) umax = UINT64_MAX;
    else if (!strcmp(a, "--noise")) umax = 1;
    else if (!strcmp(a, "--plan-bench") || !strcmp(a, "--capacity")) umax = 1000000;
    else if (!strcmp(a, "--accel")) { o->accel = v; continue; }
    else if (!strcmp(a, "--policy")) { o->policies = v; continue; }
    else if (!strcmp(a, "--csv")) { o->csv = v; continue; }
    else {
      fprintf(stderr, "inferline_repro: unknown option '%s'\n", a);
      return -1;
    }
    if (d) {
      if (num(a, v, d) || in_range(a, *d, lo, open, hi)) return -1;
      continue;
    }
    if (num_u(a, v, umax, &u)) return -1;
    if (!strcmp(a, "--seed")) o->seed = u;
    else if (!strcmp(a, "--eval-seed")) o->eval_seed = u;
    else if (!strcmp(a, "--noise")) o->noise = (int)u;
    else if (!strcmp(a, "--plan-bench")) o->plan_bench = (int)u;
    else o->capacity = (int)u;
  }
  /* --accel NAME=PRICE,...: every price a number >= 0 */
  for (const char *t = o->accel; *t;) {
    size_t len = strcspn(t, ",");
    const char *eq = memchr(t, '=', len);
    char buf[64];
    double p;
    if (!eq || eq == t || (size_t)(t + len - eq - 1) >= sizeof buf) {
      fprintf(stderr, "inferline_repro: --accel: expected NAME=PRICE_PER_H,... in '%s'\n",
              o->accel);
      return -1;
    }
    memcpy(buf, eq + 1, (size_t)(t + len - eq - 1));
    buf[t + len - eq - 1] = 0;
    if (num("--accel", buf, &p) || in_range("--accel", p, 0, 0, 1e9)) return -1;
    t += len + (t[len] == ',');
  }
  return 0;
}

/* Loads the app once per accelerator of "--accel name=price,...". */
static int load_all(const opts *o, vr_pipe_data *d, char names[][64],
                    double *price, int *n, vr_errbuf *err) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", o->accel);
  *n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '=');
    if (!eq || *n == VR_IL_MAX_HW)
      return vr_errf(err, VR_EINVAL, "--accel: expected NAME=PRICE_PER_H");
    *eq = 0;
    snprintf(names[*n], 64, "%s", tok);
    char *end;
    double p = strtod(eq + 1, &end);
    if (end == eq + 1 || *end || !isfinite(p) || p < 0)
      return vr_errf(err, VR_EINVAL, "--accel %s: price '%s' is not a number >= 0",
                     tok, eq + 1);
    price[*n] = p / 3600.0;
    int rc = vr_loki_load(o->dir, o->app, tok, &d[*n], err);
    if (rc) return rc;
    (*n)++;
  }
  return *n ? 0 : vr_errf(err, VR_EINVAL, "--accel: empty");
}

static void print_cfg(const vr_il_sim *s, const vr_il_config *c) {
  printf(" config=");
  for (int m = 0; m < c->nstages; m++)
    printf("%s%s:%s/b%d/x%d", m ? "," : "", s->pb.st[m].name,
           s->pb.st[m].hw[c->st[m].hw].variant, c->st[m].batch,
           c->st[m].replicas);
}

/* Plans at rate r (CV cv sample, seed): 1 when the planner's
 * configuration (P99 within the SLO on the sample, by its estimator) fits
 * in o->capacity instances, 0 when not, < 0 on an error other than an
 * infeasible SLO. *res: its evaluation on another trace of the same
 * process (reported, not judged: a plan at the edge of its sample misses
 * ~1 % of a fresh trace by construction). */
static int fits(vr_il_sim *s, const opts *o, double r, vr_il_result *res,
                vr_errbuf *err) {
  vr_workload sample = vr_wl_gamma(r, o->cv), eval = vr_wl_gamma(r, o->cv);
  int rc = vr_il_sim_sample(s, &sample, o->sample_s, o->seed, err);
  if (!rc) /* plans on the sample, then serves the evaluation trace */
    rc = vr_il_sim_eval(s, VR_ILP_PLAN_ONLY, &eval, o->duration, o->eval_seed,
                        o->noise, o->load_s, NULL, res, err);
  s->sample = NULL; /* it pointed at this frame */
  if (rc == VR_EINFEASIBLE) return 0;
  if (rc) return rc;
  int n = 0;
  for (int m = 0; m < res->cfg.nstages; m++) n += res->cfg.st[m].replicas;
  return n <= o->capacity;
}

/* InferLine's effective capacity on a fixed cluster (Loki's Fig. 5
 * metric): the highest root rate, to 2 %, whose plan fits in o->capacity
 * instances (one model instance per worker, as Loki's cluster).
 * Bisection: more load never needs fewer instances. */
static int capacity(vr_il_sim *s, const opts *o) {
  vr_errbuf err = {0};
  vr_il_result best = {0}, r;
  double lo = 0, hi = 1;
  int rc;
  while ((rc = fits(s, o, hi, &r, &err)) == 1 && hi < 1e6) {
    lo = hi, best = r;
    hi *= 2;
  }
  while (rc >= 0 && hi - lo > 0.02 * hi) {
    double mid = (lo + hi) / 2;
    rc = fits(s, o, mid, &r, &err);
    if (rc == 1) lo = mid, best = r;
    else if (rc == 0) hi = mid;
  }
  if (rc < 0) {
    fprintf(stderr, "capacity: %s\n", err.msg);
    return 1;
  }
  int n = 0;
  for (int m = 0; m < best.cfg.nstages; m++) n += best.cfg.st[m].replicas;
  printf("policy=inferline_plan capacity_qps=%.1f workers=%d used=%d "
         "p99_miss_pct=%.3f cv=%g slo_ms=%.0f", lo, o->capacity, n,
         best.miss_pct, o->cv, s->pb.slo_ms);
  if (lo > 0) print_cfg(s, &best.cfg);
  printf("\n");
  return 0;
}

static int64_t cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Wall and CPU time of n planner runs: on a shared machine the wall time
 * is the CPU time stretched by the load, so both are printed. */
static int plan_bench(vr_il_sim *s, int n) {
  int64_t *t = malloc(n * sizeof *t), *u = malloc(n * sizeof *u);
  vr_il_config c;
  vr_il_stats st = {0};
  vr_errbuf err = {0};
  for (int i = 0; i < n; i++) {
    vr_il_sim_forget(s); /* every round cold: no stage kept from the last */
    s->est_stages_run = s->est_stages_reused = 0;
    int64_t a = now_ns(), b = cpu_ns();
    int rc = vr_il_plan(&s->pb, &c, &st, &err);
    t[i] = now_ns() - a;
    u[i] = cpu_ns() - b;
    if (rc) {
      fprintf(stderr, "planner: %s\n", err.msg);
      free(t), free(u);
      return 1;
    }
  }
  qsort(t, n, sizeof *t, cmp_i64);
  qsort(u, n, sizeof *u, cmp_i64);
  printf("plan_s p50=%.3f max=%.3f cpu_s p50=%.3f max=%.3f estimates=%d "
         "memo_hits=%d iterations=%d "
         "arrivals=%zu stages=%d cost_per_h=%.2f p99_ms=%.1f slo_ms=%.0f "
         "stages_run=%lld stages_reused=%lld\n",
         t[n / 2] / 1e9, t[n - 1] / 1e9, u[n / 2] / 1e9, u[n - 1] / 1e9,
         st.estimates, st.memo_hits,
         st.iterations, s->n, s->pb.nstages, c.cost_per_s * 3600, c.p99_ms,
         s->pb.slo_ms, (long long)s->est_stages_run,
         (long long)s->est_stages_reused);
  free(t), free(u);
  return 0;
}

int main(int argc, char **argv) {
  opts o;
  if (parse(argc, argv, &o)) {
    fprintf(stderr, "usage: %s DATA_DIR APP [--cv X] [--rate QPS] [--slo MS]"
            " [--ramp X] [--spike X] [--duration S] [--sample S] [--cg-factor F] [--seed N] [--eval-seed N] [--noise "
            "0|1] [--load-s S] [--accel NAME=PRICE_PER_H,...] [--policy a,b]"
            " [--csv PREFIX] [--plan-bench N] [--capacity WORKERS]\n",
            argv[0]);
    return 2;
  }
  vr_pipe_data d[VR_IL_MAX_HW];
  memset(d, 0, sizeof d);
  char names[VR_IL_MAX_HW][64];
  double price[VR_IL_MAX_HW];
  int nhw = 0, rc;
  vr_errbuf err = {0};
  if ((rc = load_all(&o, d, names, price, &nhw, &err))) {
    fprintf(stderr, "inferline_repro: %s\n", err.msg);
    for (int h = 0; h < VR_IL_MAX_HW; h++) vr_pipe_data_free(&d[h]);
    return rc == VR_EIO || rc == VR_ENOENT ? 77 : 1;
  }
  const vr_pipe_data *by[VR_IL_MAX_HW];
  const char *np[VR_IL_MAX_HW];
  for (int h = 0; h < nhw; h++) by[h] = &d[h], np[h] = names[h];
  vr_il_sim s;
  if ((rc = vr_il_sim_init(&s, by, np, price, nhw, &err))) {
    fprintf(stderr, "inferline_repro: %s\n", err.msg);
    return 1;
  }
  if (o.slo > 0) s.pb.slo_ms = s.data.pipe->slo_ms = o.slo;
  s.pb.coarse_factor = o.cg_factor;
  vr_workload sample = vr_wl_gamma(o.rate, o.cv);
  vr_workload eval = vr_wl_gamma(o.rate, o.cv);
  vr_wl_point ramp[4];
  if (o.ramp > 0) {
    double d3 = o.duration / 3;
    ramp[0] = (vr_wl_point){0, o.rate};
    ramp[1] = (vr_wl_point){d3, o.rate};
    ramp[2] = (vr_wl_point){2 * d3, o.rate * o.ramp};
    ramp[3] = (vr_wl_point){o.duration, o.rate * o.ramp};
    eval.kind = VR_WL_PIECEWISE;
    eval.pts = ramp, eval.npts = 4;
  } else if (o.spike > 0) {
    double d3 = o.duration / 3;
    ramp[0] = (vr_wl_point){0, o.rate};
    ramp[1] = (vr_wl_point){d3, o.rate * o.spike};
    ramp[2] = (vr_wl_point){d3 + 20, o.rate};
    ramp[3] = (vr_wl_point){o.duration, o.rate};
    eval.kind = VR_WL_PIECEWISE;
    eval.step = 1;
    eval.pts = ramp, eval.npts = 4;
  }
  rc = vr_il_sim_sample(&s, &sample, o.sample_s, o.seed, &err);
  if (!rc && o.capacity > 0) {
    rc = capacity(&s, &o);
  } else if (!rc && o.plan_bench > 0) {
    rc = plan_bench(&s, o.plan_bench);
  } else if (!rc) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", o.policies);
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); !rc && p;
         p = strtok_r(NULL, ",", &save)) {
      int pol = vr_il_policy_parse(p);
      if (pol < 0) {
        rc = vr_errf(&err, VR_EINVAL, "unknown policy '%s'", p);
        break;
      }
      vr_il_result r;
      FILE *csv = NULL;
      if (o.csv) {
        char path[1024];
        snprintf(path, sizeof path, "%s.%s.csv", o.csv, p);
        if (!(csv = fopen(path, "w"))) {
          rc = vr_errf(&err, VR_EIO, "cannot write %s", path);
          break;
        }
      }
      rc = vr_il_sim_eval(&s, pol, &eval, o.duration, o.eval_seed, o.noise,
                          o.load_s, csv, &r, &err);
      if (csv) fclose(csv);
      if (rc == VR_EINFEASIBLE) { /* the policy has no configuration */
        printf("policy=%s cost=nan p99_miss_pct=nan cv=%g  error=\"%s\"\n",
               p, o.cv, err.msg);
        rc = 0;
        continue;
      }
      if (rc) break;
      printf("policy=%s cost=%.3f p99_miss_pct=%.3f cv=%g  p99_ms=%.1f "
             "slo_ms=%.0f rate=%.1f ramp=%g spike=%g queries=%lld peak_cost=%.3f "
             "ups=%d downs=%d plan_s=%.3f estimates=%d",
             p, r.cost_per_s * 3600, r.miss_pct, o.cv, r.p99_ms, s.pb.slo_ms,
             s.pb.rate_qps, o.ramp, o.spike, (long long)r.queries,
             r.max_cost_per_s * 3600, r.ups, r.downs, r.plan_s,
             r.stats.estimates);
      print_cfg(&s, &r.cfg);
      printf("\n");
      fflush(stdout);
    }
  }
  if (rc) fprintf(stderr, "inferline_repro: %s\n", err.msg);
  vr_il_sim_free(&s);
  for (int h = 0; h < nhw; h++) vr_pipe_data_free(&d[h]);
  return rc ? 1 : 0;
}
