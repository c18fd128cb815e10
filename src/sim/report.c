/* Simulator outputs: JSON summary and gnuplot plots of the time series. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "sim/sim.h"

int vr_sim_summary_write(const vr_sim_cfg *cfg, const vr_sim_summary *s,
                         FILE *f) {
  json_t *o = json_object();
  if (!o) return VR_ENOMEM;
  json_object_set_new(o, "name", json_string(cfg->name));
  json_object_set_new(o, "policy", json_string(vr_policy_name(cfg->policy.kind)));
  json_object_set_new(o, "duration_s", json_real(cfg->duration_s));
  json_object_set_new(o, "seed", json_integer((json_int_t)cfg->seed));
  json_object_set_new(o, "demand", json_integer(s->demand));
  json_object_set_new(o, "served", json_integer(s->served));
  json_object_set_new(o, "dropped", json_integer(s->dropped));
  json_object_set_new(o, "rejected", json_integer(s->rejected));
  json_object_set_new(o, "late", json_integer(s->late));
  json_object_set_new(o, "unfinished", json_integer(s->unfinished));
  json_object_set_new(o, "unfinished_overdue", json_integer(s->unfinished_overdue));
  json_object_set_new(o, "slo_violation_rate", json_real(s->violation_rate));
  /* goodput: served within the deadline, per counted second */
  double counted_s = cfg->duration_s - cfg->warmup_s;
  json_object_set_new(o, "throughput_qps",
                      json_real(counted_s > 0
                                    ? (double)(s->served - s->late) / counted_s
                                    : 0));
  json_object_set_new(o, "latency_p50_ms", json_real(s->p50_ms));
  json_object_set_new(o, "latency_p99_ms", json_real(s->p99_ms));
  json_object_set_new(o, "latency_mean_ms", json_real(s->mean_ms));
  json_object_set_new(o, "accuracy", json_real(s->accuracy));
  json_object_set_new(o, "cost", json_real(s->cost));
  json_object_set_new(o, "cost_per_1k_served",
                      json_real(s->served ? s->cost * 1000 / s->served : 0));
  json_object_set_new(o, "mean_instances", json_real(s->mean_instances));
  json_object_set_new(o, "max_instances", json_real(s->max_instances));
  json_object_set_new(o, "mean_workers", json_real(s->mean_workers));
  json_object_set_new(o, "events", json_integer(s->events));
  json_object_set_new(o, "policy_actions", json_integer(s->actions));
  json_object_set_new(o, "wall_s", json_real(s->wall_s));
  json_object_set_new(o, "sim_requests_per_s", json_real(s->sim_rps));
  int rc = json_dumpf(o, f, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) ? VR_EIO
                                                                      : 0;
  fputc('\n', f);
  json_decref(o);
  return rc;
}

/* Shell-safe single quoting is not needed: we pass paths to gnuplot inside
 * its own string syntax, so reject characters that would break it. */
static int plain_path(const char *p) {
  return p && !strpbrk(p, "'\"\n\\`$");
}

int vr_sim_plot(const char *csv, const char *inst_csv, const char *img,
                const char *title, vr_errbuf *err) {
  if (!plain_path(csv) || !plain_path(img) || !plain_path(title) ||
      (inst_csv && !plain_path(inst_csv)))
    return vr_errf(err, VR_EINVAL, "plot: paths must not contain quotes");
  const char *ext = strrchr(img, '.');
  int svg = ext && !strcmp(ext, ".svg");
  FILE *g = popen("gnuplot 2>&1", "w");
  if (!g) return vr_errf(err, VR_EUNSUPPORTED, "plot: cannot run gnuplot");
  fprintf(g,
          "set terminal %s size 900,900 noenhanced\n"
          "set output '%s'\nset datafile separator ','\n"
          "set key outside right top\nset grid\nset yrange [0:*]\n"
          "set multiplot layout 4,1 title '%s'\n"
          "set ylabel 'queries/s'\n"
          "plot '%s' every ::1 using 1:2 with lines title 'demand', "
          "'' every ::1 using 1:3 with lines title 'served', "
          "'' every ::1 using 1:($4+$5) with lines title 'dropped+late'\n"
          "set ylabel 'p99 ms'\n"
          "plot '%s' every ::1 using 1:6 with lines title 'p99'\n"
          "set ylabel 'instances'\n",
          svg ? "svg" : "pngcairo", img, title, csv, csv);
  if (inst_csv)
    fprintf(g,
            "plot '%s' every ::1 using 1:10 with steps title 'instances', "
            "'' every ::1 using 1:9 with steps title 'workers'\n",
            csv);
  else
    fprintf(g, "plot '%s' every ::1 using 1:10 with steps title 'instances'\n",
            csv);
  fprintf(g,
          "set ylabel 'cost/s'\nset xlabel 'time (s)'\n"
          "plot '%s' every ::1 using 1:8 with steps title 'cost'\n"
          "unset multiplot\n",
          csv);
  int st = pclose(g);
  if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return vr_errf(err, VR_EUNSUPPORTED,
                   "plot: gnuplot failed (is gnuplot installed?)");
  return 0;
}
