/*
 * Per-variant statistics: outcome counters, Prometheus-style histograms
 * (fixed buckets, so /metrics can be summed across scrapes) and an
 * HdrHistogram-layout vr_hist for exact-enough percentiles in /stats.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "runtime/runtime_int.h"

const double vr_rt_prom_le[VR_RT_PROM_BUCKETS] = {
    50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
    50e-3, 100e-3, 250e-3, 500e-3, 1.0, 2.5, 5.0, 10.0, 1e300};

static void prom_add(vr_rt_hist_prom *h, int64_t ns) {
  double s = ns > 0 ? (double)ns / 1e9 : 0;
  int i = 0;
  while (i < VR_RT_PROM_BUCKETS - 1 && s > vr_rt_prom_le[i]) i++;
  h->counts[i]++;
  h->count++;
  h->sum_s += s;
}

vr_rt_vstats *vr_rt_vstats_get(vr_runtime *rt, const char *model,
                               const char *variant) {
  pthread_mutex_lock(&rt->stats_mu);
  vr_rt_vstats *vs = vr_map_get(&rt->vstats, variant);
  if (!vs && (vs = VR_NEW(vr_rt_vstats))) {
    snprintf(vs->pub.model, sizeof vs->pub.model, "%s", model);
    snprintf(vs->pub.variant, sizeof vs->pub.variant, "%s", variant);
    vr_hist_init(&vs->lat);
    if (vr_map_put(&rt->vstats, variant, vs, NULL)) {
      vr_free(vs);
      vs = NULL;
    }
  }
  pthread_mutex_unlock(&rt->stats_mu);
  return vs;
}

void vr_rt_vstats_record(vr_runtime *rt, vr_rt_vstats *vs,
                         const vr_rt_request *r) {
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  int64_t lat = r->end_ns - r->arrival_ns;
  pthread_mutex_lock(&rt->stats_mu);
  vr_rt_variant_stats *p = &vs->pub;
  p->outcomes[r->outcome] += (uint64_t)(r->rows > 0 ? r->rows : 1);
  if (r->outcome == VR_OUT_OK) {
    prom_add(&p->request, lat);
    prom_add(&p->queue, r->start_ns - r->arrival_ns);
    prom_add(&p->compute, r->end_ns - r->start_ns);
    vr_hist_record(&vs->lat, (uint64_t)(lat > 0 ? lat : 0));
    p->last_inference_ms =
        (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000;
    if (r->deadline_ns != VR_NO_DEADLINE && r->end_ns > r->deadline_ns)
      p->slo_violations++;
  } else if (r->outcome == VR_OUT_DROPPED) {
    p->slo_violations++; /* an early drop is a missed SLO too */
  }
  pthread_mutex_unlock(&rt->stats_mu);
}

void vr_rt_settle(vr_runtime *rt, vr_rt_request *r, int dropped) {
  vr_rt_vstats *vs = r->owed;
  if (!vs || r->outcome != VR_OUT_OK || r->status) return;
  r->owed = NULL;
  if (dropped) r->outcome = VR_OUT_DROPPED;
  vr_rt_vstats_record(rt, vs, r);
}

void vr_rt_vstats_batch(vr_runtime *rt, vr_rt_vstats *vs, int rows, int nreq,
                        int64_t in_ns, int64_t infer_ns, int64_t out_ns) {
  pthread_mutex_lock(&rt->stats_mu);
  vr_rt_variant_stats *p = &vs->pub;
  p->batches++;
  p->batch_rows += (uint64_t)rows;
  p->compute_n += (uint64_t)nreq;
  p->compute_input_ns += (double)in_ns * nreq;
  p->compute_infer_ns += (double)infer_ns * nreq;
  p->compute_output_ns += (double)out_ns; /* each request's own copy */
  if (rows >= 1 && rows <= VR_RT_MAX_BATCH) {
    p->by_batch[rows].count++;
    p->by_batch[rows].input_ns += (double)in_ns;
    p->by_batch[rows].infer_ns += (double)infer_ns;
    p->by_batch[rows].output_ns += (double)out_ns;
  }
  pthread_mutex_unlock(&rt->stats_mu);
}

void vr_rt_foreach_variant(vr_runtime *rt, const char *model,
                           void (*fn)(const vr_rt_variant_stats *s, void *u),
                           void *u) {
  /* Copy under the lock, call outside it: fn may be slow (formatting). */
  pthread_mutex_lock(&rt->stats_mu);
  size_t n = rt->vstats.len, k = 0;
  vr_rt_variant_stats *copy = n ? vr_malloc(n * sizeof *copy) : NULL;
  const char *key;
  void *v;
  for (size_t it = 0; copy && vr_map_next(&rt->vstats, &it, &key, &v);) {
    vr_rt_vstats *vs = v;
    if (model && strcmp(model, vs->pub.model)) continue;
    copy[k] = vs->pub;
    copy[k].p50_ns = vr_hist_quantile(&vs->lat, 0.50);
    copy[k].p90_ns = vr_hist_quantile(&vs->lat, 0.90);
    copy[k].p99_ns = vr_hist_quantile(&vs->lat, 0.99);
    k++;
  }
  pthread_mutex_unlock(&rt->stats_mu);
  for (size_t i = 0; i < k; i++) fn(&copy[i], u);
  vr_free(copy);
}

void vr_rt_vstats_free_all(vr_runtime *rt) {
  const char *k;
  void *v;
  for (size_t it = 0; vr_map_next(&rt->vstats, &it, &k, &v);) vr_free(v);
  vr_map_free(&rt->vstats);
}
