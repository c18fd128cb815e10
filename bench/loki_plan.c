/* Loki's control-plane costs on a Loki app (default: traffic analysis):
 * the MILP solve (hardware scaling, and accuracy scaling when the cluster
 * is full) over a sweep of demands, and the MostAccurateFirst routing-table
 * rebuild, per task.
 *   bench_loki_plan DATA_DIR [APP] [WORKERS] [--compare] [--max-qps Q]
 *   bench_loki_plan --pipeline APP.json RUNTIMES.csv [WORKERS] [...]
 * The second form reads what `vario sim --pipeline` reads (accelerator
 * rows "cpu"), e.g. the example pipeline's files from
 * `OUT=DIR bench/fscenes_sim.sh`. Demands: 60 steps up to Q (900 qps).
 * --compare also solves every accuracy-scaling plan as one MILP
 * (opts.single_milp) and reports its times and the largest accuracy
 * difference between the two.
 * Prints one line per measurement; exit 77 when the data is absent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/loki.h"
#include "sim/loki_data.h"

static double clock_s(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}
static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }
/* CPU time of this thread: what a solve costs on a busy machine too */
static double cpu_s(void) { return clock_s(CLOCK_THREAD_CPUTIME_ID); }

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int compare = 0;
  double max_qps = 900;
  const char *pos[4] = {0};
  int npos = 0, pipe_form = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--compare")) compare = 1;
    else if (!strcmp(argv[i], "--max-qps") && i + 1 < argc)
      max_qps = atof(argv[++i]);
    else if (!strcmp(argv[i], "--pipeline")) pipe_form = 1;
    else if (npos < 4) pos[npos++] = argv[i];
  }
  if (npos < 1 + pipe_form || max_qps <= 0) {
    fprintf(stderr, "usage: %s DATA_DIR [APP] [WORKERS] [--compare] "
            "[--max-qps Q]\n       %s --pipeline APP.json RUNTIMES.csv "
            "[WORKERS] [--compare] [--max-qps Q]\n", argv[0], argv[0]);
    return 2;
  }
  const char *app = npos > 1 ? pos[1] : "traffic_analysis";
  int workers = npos > 2 ? atoi(pos[2]) : 20;
  vr_pipe_data d;
  vr_errbuf err = {0};
  int lrc = pipe_form
                ? vr_loki_load_files(pos[0], NULL, pos[1], NULL, "cpu", &d,
                                     &err)
                : vr_loki_load(pos[0], app, NULL, &d, &err);
  if (lrc) {
    fprintf(stderr, "skip: %s\n", err.msg);
    return 77;
  }
  vr_pipe_plan plan;
  if (vr_pipe_plan_init(&plan, d.pipe)) return 1;
  vr_loki_opts o;
  vr_loki_opts_default(&o);
  o.slack = 1.5;
  enum { N = 60 };
  /* [0] hardware scaling, [1] accuracy scaling, [2] the same as one MILP */
  double ms[3][N], cpu[3][N], diff = 0;
  int n[3] = {0, 0, 0}, cols = 0, rows = 0, sub = 0, worse = 0;
  for (int k = 0; k < N; k++) { /* max_qps / 60 .. max_qps */
    double demand = max_qps / N * (k + 1);
    vr_loki_stats st;
    double t0 = now_s(), c0 = cpu_s();
    if (vr_loki_plan(d.pipe, d.prof, demand, workers, &o, &plan, &st, &err)) {
      fprintf(stderr, "plan at %g qps: %s\n", demand, err.msg);
      return 1;
    }
    int s = st.step - 1;
    cpu[s][n[s]] = (cpu_s() - c0) * 1e3;
    ms[s][n[s]++] = (now_s() - t0) * 1e3;
    if (s == 1) cols = st.cols, rows = st.rows, sub += st.subsolves;
    if (s != 1 || !compare) continue;
    vr_loki_opts o1 = o;
    vr_loki_stats st1;
    o1.single_milp = 1;
    t0 = now_s(), c0 = cpu_s();
    if (vr_loki_plan(d.pipe, d.prof, demand, workers, &o1, &plan, &st1,
                     &err)) {
      fprintf(stderr, "one MILP at %g qps: %s\n", demand, err.msg);
      return 1;
    }
    cpu[2][n[2]] = (cpu_s() - c0) * 1e3;
    ms[2][n[2]++] = (now_s() - t0) * 1e3;
    double dd = st1.accuracy * st1.served - st.accuracy * st.served;
    if (dd > diff) diff = dd;
    worse += dd > 1e-6;
  }
  static const char *name[3] = {"hardware_scaling", "accuracy_scaling",
                                "accuracy_scaling_one_milp"};
  for (int s = 0; s < 3; s++) {
    if (!n[s]) continue;
    qsort(ms[s], n[s], sizeof ms[s][0], cmp);
    qsort(cpu[s], n[s], sizeof cpu[s][0], cmp);
    printf("milp step=%s solves=%d p50_ms=%.2f p90_ms=%.2f max_ms=%.2f "
           "cpu_p50_ms=%.2f cpu_p90_ms=%.2f p99_ms=%.2f cpu_p99_ms=%.2f\n",
           name[s], n[s], ms[s][n[s] / 2], ms[s][n[s] * 9 / 10],
           ms[s][n[s] - 1], cpu[s][n[s] / 2], cpu[s][n[s] * 9 / 10],
           ms[s][n[s] * 99 / 100], cpu[s][n[s] * 99 / 100]);
  }
  if (n[1])
    printf("milp level_split subsolves_per_plan=%.1f\n", (double)sub / n[1]);
  if (compare) /* accuracy points (objective x 100) the split gave up */
    printf("milp compare one_milp_better_by_max_pts=%.4f plans_worse=%d\n",
           diff, worse);
  printf("milp size cols=%d rows=%d tasks=%d variants=%d workers=%d\n", cols,
         rows, d.pipe->ntasks, d.off[d.pipe->ntasks], workers);
  /* routing rebuild on the last (accuracy-scaled) plan */
  vr_pipe_routes r;
  int reps = 20000;
  double t0 = cpu_s();
  for (int i = 0; i < reps; i++) {
    if (vr_pipe_route_build(d.pipe, &plan, 600 + i % 7, &r)) return 1;
    vr_pipe_routes_free(&r);
  }
  double us = (cpu_s() - t0) * 1e6 / reps; /* CPU time */
  printf("routing rebuild_us=%.2f per_task_us=%.2f tasks=%d\n", us,
         us / d.pipe->ntasks, d.pipe->ntasks);
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
  return 0;
}
