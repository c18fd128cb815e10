/*
 * GET /metrics: Prometheus text exposition (format 0.0.4) with the metric
 * names of DESIGN.md. Counters and histograms are per variant and survive
 * unload (they live in the runtime); gauges describe the instances now.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/prom.h"
#include "control/pipes.h"
#include "server/server_int.h"

typedef struct prom_ctx {
  vr_sbuf *b;
  int section; /* which family fn() writes on this pass */
} prom_ctx;

/* One label value, quoted and escaped (base/prom.h). */
static void prom_str(vr_sbuf *b, const char *s) {
  char *q = vr_prom_quote(s);
  vr_sbuf_puts(b, q ? q : "\"\"");
  vr_free(q);
}

static void labels(vr_sbuf *b, const vr_rt_variant_stats *v) {
  vr_sbuf_puts(b, "model=");
  prom_str(b, v->model);
  vr_sbuf_puts(b, ",variant=");
  prom_str(b, v->variant);
}

static void hist(vr_sbuf *b, const char *name, const vr_rt_variant_stats *v,
                 const vr_rt_hist_prom *h) {
  uint64_t cum = 0;
  for (int i = 0; i < VR_RT_PROM_BUCKETS; i++) {
    cum += h->counts[i];
    vr_sbuf_printf(b, "%s_bucket{", name);
    labels(b, v);
    if (i == VR_RT_PROM_BUCKETS - 1)
      vr_sbuf_printf(b, ",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    else
      vr_sbuf_printf(b, ",le=\"%g\"} %llu\n", vr_rt_prom_le[i],
                     (unsigned long long)cum);
  }
  vr_sbuf_printf(b, "%s_sum{", name);
  labels(b, v);
  vr_sbuf_printf(b, "} %.9f\n%s_count{", h->sum_s, name);
  labels(b, v);
  vr_sbuf_printf(b, "} %llu\n", (unsigned long long)h->count);
}

static void one(const vr_rt_variant_stats *v, void *u) {
  prom_ctx *c = u;
  vr_sbuf *b = c->b;
  switch (c->section) {
  case 0:
    for (int o = 0; o < VR_OUT_COUNT; o++) {
      vr_sbuf_puts(b, "vario_requests_total{");
      labels(b, v);
      vr_sbuf_printf(b, ",outcome=\"%s\"} %llu\n",
                     vr_rt_outcome_name((vr_rt_outcome)o),
                     (unsigned long long)v->outcomes[o]);
    }
    break;
  case 1: hist(b, "vario_request_duration_seconds", v, &v->request); break;
  case 2: hist(b, "vario_queue_duration_seconds", v, &v->queue); break;
  case 3: hist(b, "vario_compute_duration_seconds", v, &v->compute); break;
  case 4:
    vr_sbuf_puts(b, "vario_slo_violations_total{");
    labels(b, v);
    vr_sbuf_printf(b, "} %llu\n", (unsigned long long)v->slo_violations);
    break;
  case 5:
    vr_sbuf_puts(b, "vario_batches_total{");
    labels(b, v);
    vr_sbuf_printf(b, "} %llu\n", (unsigned long long)v->batches);
    break;
  case 6:
    vr_sbuf_puts(b, "vario_batch_rows_total{");
    labels(b, v);
    vr_sbuf_printf(b, "} %llu\n", (unsigned long long)v->batch_rows);
    break;
  }
}

static const char *k_families[][3] = {
    {"vario_requests_total", "counter", "Requests by outcome (ok, dropped ="
     " early drop on a deadline or answered 504 at answer time, rejected,"
     " failed), counted in rows."},
    {"vario_request_duration_seconds", "histogram",
     "Arrival to answer of served requests."},
    {"vario_queue_duration_seconds", "histogram",
     "Arrival to batch start of served requests."},
    {"vario_compute_duration_seconds", "histogram",
     "Run time of the batch a served request was in."},
    {"vario_slo_violations_total", "counter",
     "Requests served after their deadline or dropped early."},
    {"vario_batches_total", "counter", "Batches run."},
    {"vario_batch_rows_total", "counter", "Rows in the batches run."},
};

static void instance_gauges(vr_server *s, vr_sbuf *b) {
  vr_rt_instance_stats is[256];
  int n = vr_rt_instances(s->rt, NULL, is, 256);
  if (n > 256) n = 256;
  vr_sbuf_puts(b, "# HELP vario_queue_depth Rows waiting per instance.\n"
               "# TYPE vario_queue_depth gauge\n");
  for (int i = 0; i < n; i++) {
    vr_sbuf_puts(b, "vario_queue_depth{model=");
    prom_str(b, is[i].model);
    vr_sbuf_puts(b, ",variant=");
    prom_str(b, is[i].variant);
    vr_sbuf_printf(b, ",instance=\"%d\"} %d\n", is[i].id, is[i].queue_rows);
  }
  vr_sbuf_puts(b, "# HELP vario_instances Instances by variant and state.\n"
               "# TYPE vario_instances gauge\n");
  /* Count per (variant, state); instances of one variant are few. */
  for (int i = 0; i < n; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++)
      seen = !strcmp(is[j].variant, is[i].variant) &&
             is[j].state == is[i].state;
    if (seen) continue;
    int cnt = 0;
    for (int j = i; j < n; j++)
      cnt += !strcmp(is[j].variant, is[i].variant) &&
             is[j].state == is[i].state;
    vr_sbuf_puts(b, "vario_instances{model=");
    prom_str(b, is[i].model);
    vr_sbuf_puts(b, ",variant=");
    prom_str(b, is[i].variant);
    vr_sbuf_printf(b, ",state=\"%s\"} %d\n", vr_rt_state_name(is[i].state),
                   cnt);
  }
  vr_sbuf_puts(b, "# HELP vario_served_qps Rows served per second over the"
               " last second.\n# TYPE vario_served_qps gauge\n");
  for (int i = 0; i < n; i++) {
    vr_sbuf_puts(b, "vario_served_qps{model=");
    prom_str(b, is[i].model);
    vr_sbuf_printf(b, ",instance=\"%d\"} %.2f\n", is[i].id, is[i].served_qps);
  }
  /* AsyFunc bodies: the shadow attached now (its cores), and what shadows
   * did so far */
  static const char *const af[][3] = {
      {"vario_shadow_cores", "gauge", "AsyFunc: cores of the body's shadow now (0: none)."},
      {"vario_shadows_attached_total", "counter", "AsyFunc: shadows paired with the body."},
      {"vario_shadows_released_total", "counter", "AsyFunc: shadows the body released."},
      {"vario_paired_batches_total", "counter", "AsyFunc: batches run with a shadow."},
      {"vario_shadow_rows_total", "counter", "AsyFunc: rows the shadow ran."},
      {"vario_shadow_load_ms", "gauge", "AsyFunc: load time of the body's last shadow."},
  };
  for (size_t f = 0; f < sizeof af / sizeof af[0]; f++) {
    vr_sbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", af[f][0], af[f][2], af[f][0], af[f][1]);
    for (int i = 0; i < n; i++) {
      if (!is[i].body) continue;
      vr_rt_instance_stats *x = &is[i];
      double v = f == 0 ? x->shadow_threads : f == 1 ? (double)x->shadows_attached
                 : f == 2 ? (double)x->shadows_released : f == 3 ? (double)x->paired_batches
                 : f == 4 ? (double)x->shadow_rows : x->shadow_load_ms;
      vr_sbuf_printf(b, "%s{model=", af[f][0]);
      prom_str(b, x->model);
      vr_sbuf_printf(b, ",instance=\"%d\"} %.6g\n", x->id, v);
    }
  }
}

const double vr_late_le[VR_LATE_BUCKETS] = {0, 0.25, 0.5, 1, 2, 4, INFINITY};

static void atomic_max(int64_t *p, int64_t v) {
  int64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v > cur &&
         !__atomic_compare_exchange_n(p, &cur, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

void vr_server_app_lateness(vr_server *s, int64_t deadline_ns, int64_t batch_ns,
                            int64_t answered_ns) {
  int64_t late = answered_ns - deadline_ns, batch = batch_ns;
  double units = late <= 0 ? 0 : batch > 0 ? (double)late / (double)batch : INFINITY;
  int k = 0;
  while (k < VR_LATE_BUCKETS - 1 && units > vr_late_le[k]) k++;
  __atomic_fetch_add(&s->app_late.bucket[k], 1, __ATOMIC_RELAXED);
  /* a batch of no measured time counts 1e6 units in the sum (+Inf bucket) */
  __atomic_fetch_add(&s->app_late.sum_milli, (uint64_t)((units < 1e6 ? units : 1e6) * 1000),
                     __ATOMIC_RELAXED);
  atomic_max(&s->app_late.max_late_ns, late);
  atomic_max(&s->app_late.max_excess_ns, late - batch);
}

void vr_server_app_dropped_late(vr_server *s, int64_t deadline_ns, int64_t start_ns) {
  __atomic_fetch_add(start_ns > deadline_ns ? &s->app_late.beyond_start
                                            : &s->app_late.beyond_answer,
                     1, __ATOMIC_RELAXED);
}

static void app_lateness(vr_server *s, vr_sbuf *b) {
  vr_sbuf_puts(b, "# HELP vario_app_lateness_batches Model-less responses (200) by "
               "how long after the query's deadline they were handed to HTTP, in "
               "units of the execution time of the batch that served them (0: on "
               "time; le=\"1\": within deadline + one batch).\n"
               "# TYPE vario_app_lateness_batches histogram\n");
  uint64_t cum = 0;
  for (int k = 0; k < VR_LATE_BUCKETS; k++) {
    cum += __atomic_load_n(&s->app_late.bucket[k], __ATOMIC_RELAXED);
    if (k < VR_LATE_BUCKETS - 1)
      vr_sbuf_printf(b, "vario_app_lateness_batches_bucket{le=\"%g\"} %llu\n",
                     vr_late_le[k], (unsigned long long)cum);
    else
      vr_sbuf_printf(b, "vario_app_lateness_batches_bucket{le=\"+Inf\"} %llu\n"
                     "vario_app_lateness_batches_sum %.3f\n"
                     "vario_app_lateness_batches_count %llu\n",
                     (unsigned long long)cum,
                     __atomic_load_n(&s->app_late.sum_milli, __ATOMIC_RELAXED) / 1000.0,
                     (unsigned long long)cum);
  }
  vr_sbuf_printf(b, "# HELP vario_app_late_beyond_batch_total Model-less queries "
                 "whose answer was ready later than deadline + their batch's execution "
                 "time, answered 504 instead (policy/drop.h vr_drop_answer_due), by "
                 "cause: the batch started after the deadline, or the answer was slow "
                 "after a batch that started in time.\n"
                 "# TYPE vario_app_late_beyond_batch_total counter\n"
                 "vario_app_late_beyond_batch_total{cause=\"started_late\"} %llu\n"
                 "vario_app_late_beyond_batch_total{cause=\"answer\"} %llu\n",
                 (unsigned long long)__atomic_load_n(&s->app_late.beyond_start,
                                                     __ATOMIC_RELAXED),
                 (unsigned long long)__atomic_load_n(&s->app_late.beyond_answer,
                                                     __ATOMIC_RELAXED));
  vr_sbuf_printf(b, "# HELP vario_app_lateness_max_seconds Largest lateness of a "
                 "model-less response beyond its deadline, and beyond deadline + "
                 "its batch's execution time (0: none that late).\n"
                 "# TYPE vario_app_lateness_max_seconds gauge\n"
                 "vario_app_lateness_max_seconds{beyond=\"deadline\"} %.6f\n"
                 "vario_app_lateness_max_seconds{beyond=\"deadline_plus_batch\"} %.6f\n",
                 __atomic_load_n(&s->app_late.max_late_ns, __ATOMIC_RELAXED) / 1e9,
                 __atomic_load_n(&s->app_late.max_excess_ns, __ATOMIC_RELAXED) / 1e9);
}

void vr_server_metrics(vr_server *s, vr_sbuf *b) {
  prom_ctx c = {b, 0};
  for (c.section = 0; c.section < (int)(sizeof k_families / sizeof *k_families); c.section++) {
    vr_sbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n",
                   k_families[c.section][0], k_families[c.section][2],
                   k_families[c.section][0], k_families[c.section][1]);
    vr_rt_foreach_variant(s->rt, NULL, one, &c);
  }
  instance_gauges(s, b);
  if (s->ctl) { /* model-less control plane (control/control.h) */
    char *t = vr_control_prometheus(s->ctl);
    if (t) vr_sbuf_puts(b, t);
    vr_free(t);
    app_lateness(s, b);
  }
  if (s->pipes) { /* live pipelines (control/pipes.h) */
    char *t = vr_pipes_prometheus(s->pipes);
    if (t) vr_sbuf_puts(b, t);
    vr_free(t);
  }
  vr_sbuf_puts(b, "# HELP vario_http_responses_total HTTP responses by"
               " status class.\n# TYPE vario_http_responses_total counter\n");
  uint64_t own[6] = {0};
  if (s->http) vr_http_own_counts(s->http, own);
  for (int k = 2; k <= 5; k++)
    vr_sbuf_printf(b, "vario_http_responses_total{code=\"%dxx\"} %llu\n", k,
                   (unsigned long long)(__atomic_load_n(&s->http_status[k],
                                                        __ATOMIC_RELAXED) + own[k]));
  if (s->overhead) {
    vr_sbuf_puts(b, "# HELP vario_server_overhead_seconds Server-side overhead of"
                 " served inferences: headers complete to response queued,"
                 " minus batch compute.\n# TYPE vario_server_overhead_seconds"
                 " summary\n");
    static const double q[] = {0.5, 0.9, 0.99};
    for (int i = 0; i < 3; i++)
      vr_sbuf_printf(b, "vario_server_overhead_seconds{quantile=\"%g\"} %.9f\n",
                     q[i], vr_hist_quantile(s->overhead, q[i]) / 1e9);
    vr_sbuf_printf(b, "vario_server_overhead_seconds_sum %.9f\n"
                   "vario_server_overhead_seconds_count %llu\n",
                   s->overhead->sum / 1e9,
                   (unsigned long long)s->overhead->count);
  }
  vr_sbuf_printf(b, "# HELP vario_invalid_requests_total Inference requests"
                 " refused before routing (bad input, unknown model).\n"
                 "# TYPE vario_invalid_requests_total counter\n"
                 "vario_invalid_requests_total %llu\n",
                 (unsigned long long)__atomic_load_n(&s->invalid,
                                                     __ATOMIC_RELAXED));
}
