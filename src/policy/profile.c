#include "policy/profile.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void vr_latency_init(vr_latency *l) {
  for (int i = 0; i < VR_PROF_NB; i++)
    l->p50_ms[i] = l->p90_ms[i] = l->p99_ms[i] = -1;
}

void vr_profile_init(vr_profile *p) {
  memset(p, 0, sizeof *p);
  p->threads = 1;
  p->max_batch = 1;
  vr_latency_init(&p->lat);
}

const char *vr_device_name(int device) {
  return device == VR_DEV_GPU ? "gpu" : "cpu";
}

int vr_device_parse(const char *s) {
  if (!s) return -1;
  if (!strcmp(s, "cpu")) return VR_DEV_CPU;
  if (!strcmp(s, "gpu")) return VR_DEV_GPU;
  return -1;
}

int vr_profile_validate(const vr_profile *p, vr_errbuf *err) {
  if (!p->model[0] || !p->variant[0])
    return vr_errf(err, VR_EINVAL, "profile: model and variant are required");
  if (p->threads < 1 || p->threads > 4096)
    return vr_errf(err, VR_EINVAL, "profile %s: threads %d out of range",
                   p->variant, p->threads);
  if (p->max_batch < 1 || p->max_batch > VR_PROF_MAX_BATCH)
    return vr_errf(err, VR_EINVAL, "profile %s: max_batch %d not in 1..64",
                   p->variant, p->max_batch);
  if (!(p->lat.p50_ms[0] > 0))
    return vr_errf(err, VR_EINVAL, "profile %s: p50 at batch 1 is required",
                   p->variant);
  for (int i = 0; i < VR_PROF_NB; i++) {
    double a = p->lat.p50_ms[i], b = p->lat.p90_ms[i], c = p->lat.p99_ms[i];
    if (!isfinite(a) || !isfinite(b) || !isfinite(c) || a > 1e9 || b > 1e9 ||
        c > 1e9)
      return vr_errf(err, VR_EINVAL, "profile %s: latency out of range",
                     p->variant);
    if ((b >= 0 || c >= 0) && a < 0)
      return vr_errf(err, VR_EINVAL,
                     "profile %s: batch %d has a tail but no p50", p->variant,
                     1 << i);
    if (a == 0 || b == 0 || c == 0)
      return vr_errf(err, VR_EINVAL, "profile %s: zero latency at batch %d",
                     p->variant, 1 << i);
    if ((b > 0 && b < a) || (c > 0 && c < a) || (b > 0 && c > 0 && c < b))
      return vr_errf(err, VR_EINVAL,
                     "profile %s: percentiles not ordered at batch %d",
                     p->variant, 1 << i);
  }
  if (!(p->accuracy >= 0 && p->accuracy <= 100))
    return vr_errf(err, VR_EINVAL, "profile %s: accuracy not in [0,100]",
                   p->variant);
  if (!(p->load_ms >= 0 && p->load_ms < 1e9) || !(p->cost_per_s >= 0) ||
      !isfinite(p->cost_per_s) || p->mem_bytes < 0)
    return vr_errf(err, VR_EINVAL,
                   "profile %s: load_ms, cost_per_s, mem_bytes must be >= 0",
                   p->variant);
  return 0;
}

/* Quantile function of one measured slot: piecewise linear through the
 * recorded points (0.5, p50), (0.9, p90), (0.99, p99). Below the median we
 * mirror the upper spread (bounded at half the median), because profiles
 * record only the median and the tail; above the last point we continue
 * its slope. With only p50 recorded the service time is deterministic. */
static void slot_prep(const vr_latency *p, int s, vr_lat_slot *o) {
  int n = 0;
  o->qs[n] = 0.5, o->vs[n++] = p->p50_ms[s];
  if (p->p90_ms[s] > 0) o->qs[n] = 0.9, o->vs[n++] = p->p90_ms[s];
  if (p->p99_ms[s] > 0) o->qs[n] = 0.99, o->vs[n++] = p->p99_ms[s];
  o->n = n;
  o->below = o->vs[0];
  if (n > 1) {
    double lo = 2 * o->vs[0] - o->vs[1];
    o->below = lo < 0.5 * o->vs[0] ? 0.5 * o->vs[0] : lo;
  }
}

void vr_lat_at_init(vr_lat_at *a, const vr_latency *p, int batch) {
  memset(a, 0, sizeof *a);
  if (batch < 1) batch = 1;
  int lo = -1, hi = -1;
  for (int s = 0; s < VR_PROF_NB; s++) {
    if (p->p50_ms[s] <= 0) continue;
    int b = 1 << s;
    if (b <= batch) lo = s;
    if (b >= batch && hi < 0) hi = s;
  }
  if (lo < 0 && hi < 0) return; /* kind 0: INFINITY */
  if (lo < 0) lo = hi; /* batch below the smallest measured: use it */
  slot_prep(p, lo, &a->lo);
  a->batch = (double)batch;
  a->blo = (double)(1 << lo);
  if (hi < 0) { /* beyond the largest measured batch: scale per item */
    a->kind = 2;
    return;
  }
  a->kind = hi == lo ? 1 : 3;
  if (hi != lo) {
    slot_prep(p, hi, &a->hi);
    a->bhi = (double)(1 << hi);
  }
}

double vr_latency_ms(const vr_latency *p, int batch, double q) {
  vr_lat_at a;
  vr_lat_at_init(&a, p, batch);
  return vr_lat_at_ms(&a, q);
}

double vr_latency_tail_ms(const vr_latency *p, int batch) {
  /* the highest percentile the profile records at all */
  double q = 0.5;
  for (int s = 0; s < VR_PROF_NB; s++) {
    if (p->p99_ms[s] > 0) q = 0.99;
    else if (p->p90_ms[s] > 0 && q < 0.9) q = 0.9;
  }
  return vr_latency_ms(p, batch, q);
}

void vr_latency_observe(vr_latency *l, int batch, double ms) {
  if (batch < 1 || batch > VR_PROF_MAX_BATCH || (batch & (batch - 1)) ||
      !(ms > 0))
    return;
  int k = __builtin_ctz((unsigned)batch);
  double old = l->p50_ms[k];
  l->p50_ms[k] = old > 0 ? old + (ms - old) / 8 : ms;
}

double vr_profile_peak_qps(const vr_profile *p, int batch) {
  double ms = vr_profile_latency_ms(p, batch, 0.5);
  if (!(ms > 0) || !isfinite(ms)) return 0;
  return (double)batch * 1000.0 / ms;
}

int vr_profile_batch_for_slo(const vr_profile *p, double slo_ms) {
  int best = 0;
  /* A query may wait for the batch in service, then run in its own: with
   * dynamic batching its latency is at most two batch times. */
  for (int b = 1;; b *= 2) {
    if (b > p->max_batch) b = p->max_batch;
    if (2 * vr_profile_tail_ms(p, b) <= slo_ms) best = b;
    if (b == p->max_batch) break;
  }
  /* No exception for a lone query on an idle instance: a variant whose
   * batch-1 time leaves no room to wait for one batch in service misses
   * the SLO as soon as two queries meet (we saw 70% violations in the
   * simulator when selection admitted such variants). */
  return best;
}

double vr_profile_sat_qps(const vr_profile *p, double slo_ms) {
  int b = vr_profile_batch_for_slo(p, slo_ms);
  return b ? vr_profile_peak_qps(p, b) : 0;
}

/* ---- JSON ---- */

static json_t *lat_array(const double *v) {
  json_t *a = json_array();
  if (!a) return NULL;
  for (int i = 0; i < VR_PROF_NB; i++)
    json_array_append_new(a, v[i] > 0 ? json_real(v[i]) : json_null());
  return a;
}

json_t *vr_profile_to_json(const vr_profile *p) {
  json_t *o = json_object();
  if (!o) return NULL;
  json_object_set_new(o, "model", json_string(p->model));
  json_object_set_new(o, "app", json_string(p->app));
  json_object_set_new(o, "variant", json_string(p->variant));
  json_object_set_new(o, "precision", json_string(p->precision));
  json_object_set_new(o, "threads", json_integer(p->threads));
  json_object_set_new(o, "max_batch", json_integer(p->max_batch));
  json_object_set_new(o, "device", json_string(vr_device_name(p->device)));
  json_object_set_new(o, "load_ms", json_real(p->load_ms));
  json_object_set_new(o, "mem_bytes", json_integer(p->mem_bytes));
  json_t *b = json_array();
  for (int i = 0; i < VR_PROF_NB; i++)
    json_array_append_new(b, json_integer(1 << i));
  json_object_set_new(o, "batch", b);
  json_object_set_new(o, "p50_ms", lat_array(p->lat.p50_ms));
  json_object_set_new(o, "p90_ms", lat_array(p->lat.p90_ms));
  json_object_set_new(o, "p99_ms", lat_array(p->lat.p99_ms));
  json_object_set_new(o, "accuracy", json_real(p->accuracy));
  json_object_set_new(o, "cost_per_s", json_real(p->cost_per_s));
  return o;
}

static int get_str(const json_t *o, const char *k, char *dst, size_t cap,
                   int required, vr_errbuf *err) {
  json_t *v = json_object_get(o, k);
  if (!v) {
    if (required) return vr_errf(err, VR_EINVAL, "profile: missing \"%s\"", k);
    return 0;
  }
  if (!json_is_string(v))
    return vr_errf(err, VR_EINVAL, "profile: \"%s\" must be a string", k);
  const char *s = json_string_value(v);
  if (strlen(s) >= cap)
    return vr_errf(err, VR_EINVAL, "profile: \"%s\" longer than %zu", k,
                   cap - 1);
  memcpy(dst, s, strlen(s) + 1);
  return 0;
}

static int get_num(const json_t *o, const char *k, double *dst, int required,
                   vr_errbuf *err) {
  json_t *v = json_object_get(o, k);
  if (!v) {
    if (required) return vr_errf(err, VR_EINVAL, "profile: missing \"%s\"", k);
    return 0;
  }
  if (!json_is_number(v))
    return vr_errf(err, VR_EINVAL, "profile: \"%s\" must be a number", k);
  *dst = json_number_value(v);
  return 0;
}

/* Reads a latency array aligned with "batch" (default 1,2,4,...). Entries
 * may be null (not measured). Batch sizes must be powers of two <= 64. */
static int get_lat(const json_t *o, const char *k, const json_t *batch,
                   double *dst, vr_errbuf *err) {
  json_t *a = json_object_get(o, k);
  if (!a || json_is_null(a)) return 0;
  if (!json_is_array(a))
    return vr_errf(err, VR_EINVAL, "profile: \"%s\" must be an array", k);
  size_t n = json_array_size(a);
  if (batch && json_array_size(batch) != n)
    return vr_errf(err, VR_EINVAL,
                   "profile: \"%s\" has %zu entries but \"batch\" has %zu", k,
                   n, json_array_size(batch));
  if (!batch && n > VR_PROF_NB)
    return vr_errf(err, VR_EINVAL, "profile: \"%s\" has more than %d entries",
                   k, VR_PROF_NB);
  for (size_t i = 0; i < n; i++) {
    int slot = (int)i;
    if (batch) {
      json_t *bv = json_array_get(batch, i);
      json_int_t b = json_is_integer(bv) ? json_integer_value(bv) : -1;
      if (b < 1 || b > VR_PROF_MAX_BATCH || (b & (b - 1)))
        return vr_errf(err, VR_EINVAL,
                       "profile: batch[%zu] must be a power of two in 1..64",
                       i);
      slot = __builtin_ctzll((unsigned long long)b);
    }
    json_t *v = json_array_get(a, i);
    if (json_is_null(v)) continue;
    if (!json_is_number(v) || !(json_number_value(v) > 0))
      return vr_errf(err, VR_EINVAL,
                     "profile: \"%s\"[%zu] must be a positive number or null",
                     k, i);
    dst[slot] = json_number_value(v);
  }
  return 0;
}

int vr_profile_from_json(const json_t *o, vr_profile *p, vr_errbuf *err) {
  vr_profile_init(p);
  if (!json_is_object(o))
    return vr_errf(err, VR_EINVAL, "profile: expected a JSON object");
  int rc;
  if ((rc = get_str(o, "model", p->model, sizeof p->model, 1, err)) ||
      (rc = get_str(o, "app", p->app, sizeof p->app, 0, err)) ||
      (rc = get_str(o, "variant", p->variant, sizeof p->variant, 1, err)) ||
      (rc = get_str(o, "precision", p->precision, sizeof p->precision, 0,
                    err)))
    return rc;
  char dev[16] = "cpu";
  if ((rc = get_str(o, "device", dev, sizeof dev, 0, err))) return rc;
  if ((p->device = vr_device_parse(dev)) < 0)
    return vr_errf(err, VR_EINVAL, "profile: device \"%s\" not cpu/gpu", dev);
  double threads = 1, max_batch = 1, mem = 0;
  if ((rc = get_num(o, "threads", &threads, 0, err)) ||
      (rc = get_num(o, "max_batch", &max_batch, 0, err)) ||
      (rc = get_num(o, "mem_bytes", &mem, 0, err)) ||
      (rc = get_num(o, "load_ms", &p->load_ms, 0, err)) ||
      (rc = get_num(o, "accuracy", &p->accuracy, 1, err)) ||
      (rc = get_num(o, "cost_per_s", &p->cost_per_s, 0, err)))
    return rc;
  if (!(threads >= 1 && threads <= 4096) || !(max_batch >= 1 && max_batch <= 64)
      || !(mem >= 0 && mem < 9e18))
    return vr_errf(err, VR_EINVAL,
                   "profile: threads, max_batch or mem_bytes out of range");
  p->threads = (int)threads;
  p->max_batch = (int)max_batch;
  p->mem_bytes = (int64_t)mem;
  json_t *batch = json_object_get(o, "batch");
  if (batch && !json_is_array(batch))
    return vr_errf(err, VR_EINVAL, "profile: \"batch\" must be an array");
  if ((rc = get_lat(o, "p50_ms", batch, p->lat.p50_ms, err)) ||
      (rc = get_lat(o, "p90_ms", batch, p->lat.p90_ms, err)) ||
      (rc = get_lat(o, "p99_ms", batch, p->lat.p99_ms, err)))
    return rc;
  return vr_profile_validate(p, err);
}
