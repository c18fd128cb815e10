/* The live dashboard's view of the pipelines (vr_pipes_dashboard): per
 * pipeline its cumulative counters (the page turns them into rates and an
 * attainment per poll), a live end-to-end p99 over the recent windows,
 * and per task the variants that served it, its fan-out and its drops. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "control/pipes_int.h"

double vr__pipe_recent_p99(const pl_pipe *pp, int64_t now_ns) {
  int64_t age = now_ns - pp->win_start;
  if (pp->win_start == 0 || age >= 2 * PL_WIN_NS) return NAN;
  if (age >= PL_WIN_NS) /* the current window is the previous one by now */
    return pp->win[pp->cur].count ? vr_hist_quantile(&pp->win[pp->cur], 0.99) / 1e6 : NAN;
  vr_hist *h = vr_malloc(sizeof *h);
  if (!h) return NAN;
  *h = pp->win[pp->cur];
  vr_hist_merge(h, &pp->win[pp->cur ^ 1]);
  double ms = h->count ? vr_hist_quantile(h, 0.99) / 1e6 : NAN;
  vr_free(h);
  return ms;
}

static json_t *num_or_null(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static json_t *outcomes(const uint64_t *o) {
  json_t *j = json_object();
  for (int i = 0; i < VR_POUT_COUNT; i++)
    json_object_set_new(j, vr_pipe_outcome_name(i), json_integer((json_int_t)o[i]));
  return j;
}

static json_t *pipe_dash(pl_pipe *pp, int64_t now_ns) {
  pthread_mutex_lock(&pp->mu);
  uint64_t total = 0;
  for (int o = 0; o < VR_POUT_COUNT; o++) total += pp->outcomes[o];
  json_t *j = json_pack("{s:s, s:f, s:I, s:I, s:o, s:o, s:o}", "name", pp->spec->name,
                        "slo_ms", pp->spec->slo_ms, "requests", (json_int_t)total, "met",
                        (json_int_t)pp->met, "outcomes", outcomes(pp->outcomes), "p99_ms",
                        num_or_null(vr__pipe_recent_p99(pp, now_ns)), "p99_total_ms",
                        num_or_null(pp->lat.count ? vr_hist_quantile(&pp->lat, 0.99) / 1e6
                                                  : NAN));
  json_t *ts = json_array();
  for (int t = 0; t < pp->spec->ntasks; t++) {
    const vr_pipe_task *task = &pp->spec->tasks[t];
    const pl_task *pt = &pp->t[t];
    json_t *vs = json_array();
    for (int i = 0; i < pt->nvs; i++) {
      double acc = NAN; /* the candidate's accuracy, percent */
      for (int c = 0; c < task->nvariants; c++)
        if (!strcmp(task->variants[c].name, pt->vs[i].variant)) acc = task->variants[c].accuracy;
      json_array_append_new(vs, json_pack("{s:s, s:I, s:I, s:o}", "variant", pt->vs[i].variant,
                                          "requests", (json_int_t)pt->vs[i].in, "fanout",
                                          (json_int_t)pt->vs[i].out, "accuracy",
                                          num_or_null(acc)));
    }
    json_array_append_new(
        ts, json_pack("{s:s, s:s, s:o, s:I, s:I, s:I, s:o, s:o}", "name", task->name, "app",
                      task->app, "parent",
                      t > 0 ? json_string(pp->spec->tasks[task->parent].name) : json_null(),
                      "requests", (json_int_t)pt->in, "fanout", (json_int_t)pt->out,
                      "dropped", (json_int_t)pt->outcomes[VR_POUT_DROPPED], "outcomes",
                      outcomes(pt->outcomes), "variants", vs));
  }
  json_object_set_new(j, "tasks", ts);
  json_object_set_new(j, "accuracy_sum", json_real(pp->acc_sum));
  json_object_set_new(j, "accuracy_n", json_integer((json_int_t)pp->acc_n));
  pthread_mutex_unlock(&pp->mu);
  return j;
}

char *vr_pipes_dashboard(vr_pipes *p) {
  json_t *arr = json_array();
  int64_t now = vr_clock_now(p->clock);
  pthread_mutex_lock(&p->mu);
  size_t it = 0;
  const char *k;
  void *v;
  while (vr_map_next(&p->by_name, &it, &k, &v)) json_array_append_new(arr, pipe_dash(v, now));
  pthread_mutex_unlock(&p->mu);
  char *t = json_dumps(arr, JSON_COMPACT);
  json_decref(arr);
  char *out = t ? vr_strdup(t) : NULL;
  free(t);
  return out;
}
