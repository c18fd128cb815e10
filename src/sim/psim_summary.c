/* The pipeline simulator's summary (psim.h, vr_psim_summary): per-tick rows
 * to the CSV, totals after the warm-up, latency percentiles (a linear-time
 * sort: the InferLine planner's estimator sorts a trace's latencies on
 * every run), capacity and peak over 10-s windows, observed fan-out per
 * slot. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/psim_int.h"

/* Order-preserving key of a float (IEEE 754: flip the sign bit of a
 * non-negative, all bits of a negative). */
static uint32_t float_key(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* Sorts n floats ascending (no NaN: latencies) by LSD radix, 4 passes of
 * 8 bits: the same order as a comparison sort, in linear time — the
 * planner's estimator sorts a trace's latencies on every run. tmp holds
 * n. */
void vr__psim_sort_floats(float *a, float *tmp, size_t n) {
  float *src = a, *dst = tmp;
  for (int sh = 0; sh < 32; sh += 8) {
    size_t cnt[257] = {0};
    for (size_t i = 0; i < n; i++) cnt[((float_key(src[i]) >> sh) & 255) + 1]++;
    for (int b = 0; b < 256; b++) cnt[b + 1] += cnt[b];
    for (size_t i = 0; i < n; i++)
      dst[cnt[(float_key(src[i]) >> sh) & 255]++] = src[i];
    float *t = src;
    src = dst, dst = t;
  }
  /* four passes: the result is back in a */
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static void sort_lat(vr_vec *lat) {
  float *tmp = malloc(lat->len * sizeof(float));
  if (tmp) vr__psim_sort_floats(lat->data, tmp, lat->len);
  else qsort(lat->data, lat->len, sizeof(float), cmp_float);
  free(tmp);
}

void vr__psim_summarise(psim *s, FILE *csv) {
  vr_psim_summary *m = s->sum;
  const vr_psim_cfg *c = s->cfg;
  int first = (int)ceil(c->warmup_s / c->tick_s), n = 0;
  double acc = 0, workers = 0;
  if (csv)
    fprintf(csv, "t_s,demand,ok,late,dropped,accuracy,workers,demand_est,"
                 "paths,paths_bad\n");
  for (int i = 0; i < s->nrows - 1; i++) {
    vr_psim_row *r = &s->rows[i];
    int64_t served = r->ok + r->late;
    r->accuracy = served ? r->accuracy / served : 0;
    if (csv)
      fprintf(csv, "%.3f,%lld,%lld,%lld,%lld,%.3f,%d,%.2f,%lld,%lld\n",
              r->t_s, (long long)r->demand, (long long)r->ok,
              (long long)r->late, (long long)r->dropped, r->accuracy,
              r->workers, r->demand_est, (long long)r->paths,
              (long long)r->paths_bad);
    if (i < first) continue;
    m->queries += r->demand, m->ok += r->ok, m->late += r->late;
    m->dropped += r->dropped;
    m->paths += r->paths, m->paths_bad += r->paths_bad;
    acc += r->accuracy * served;
    workers += r->workers, n++;
  }
  for (size_t i = 0; i < s->queries.len; i++) { /* still in the system */
    const pquery *q = QRY(s, (int32_t)i);
    int row = vr__psim_row_of(s, q->t_ns);
    if (q->pending <= 0 || row < first || row >= s->nrows - 1) continue;
    m->unfinished++;
    m->unfinished_overdue += q->deadline_ns <= s->now;
  }
  m->query_violations_pct =
      m->queries ? 100.0 * (m->late + m->dropped + m->unfinished_overdue) / m->queries : 0;
  m->violations_pct = m->paths ? 100.0 * m->paths_bad / m->paths : 0;
  m->accuracy_pct = m->ok + m->late ? acc / (m->ok + m->late) : 0;
  m->mean_workers = n ? workers / n : 0;
  if (s->lat.len) {
    sort_lat(&s->lat);
    m->p50_ms = VR_VEC_AT(&s->lat, float, s->lat.len / 2);
    m->p99_ms = VR_VEC_AT(&s->lat, float, (size_t)(s->lat.len * 0.99));
  }
  /* 10-s windows: capacity, peak, off-peak */
  int w = (int)ceil(10 / c->tick_s), nw = 0;
  double peak = 0, peak_viol = 0, off_w = 0;
  int off_n = 0;
  for (int i = first; i + w <= s->nrows - 1; i += w) {
    int64_t d = 0, bad = 0, units = 0;
    for (int k = i; k < i + w; k++)
      d += s->rows[k].demand, bad += s->rows[k].paths_bad,
          units += s->rows[k].paths;
    double qps = d / (w * c->tick_s), viol = units ? 100.0 * bad / units : 0;
    if (viol <= 1 && qps > m->capacity_qps) m->capacity_qps = qps;
    if (qps > peak) peak = qps, peak_viol = viol;
    nw++;
  }
  m->peak_violations_pct = peak_viol;
  for (int i = first; i < s->nrows - 1; i++)
    if (s->rows[i].demand <= 0.2 * peak * c->tick_s)
      off_w += s->rows[i].workers, off_n++;
  m->offpeak_workers = off_n ? off_w / off_n : 0;
  int ns = c->data->off[s->p->ntasks];
  m->nslots = ns;
  m->mult_observed = calloc(ns + 1, sizeof *m->mult_observed);
  for (int i = 0; m->mult_observed && i < ns; i++)
    m->mult_observed[i] = s->served_slot[i]
                              ? (double)s->outputs[i] / s->served_slot[i]
                              : -1;
}

void vr_psim_summary_free(vr_psim_summary *s) {
  free(s->mult_observed);
  s->mult_observed = NULL;
}
