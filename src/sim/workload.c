#include "sim/workload.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/lines.h"

static const char *k_names[VR_WL__COUNT] = {
    "constant", "poisson", "gamma", "piecewise", "diurnal", "counts", "trace"};

const char *vr_wl_kind_name(int kind) {
  return kind >= 0 && kind < VR_WL__COUNT ? k_names[kind] : "?";
}

vr_workload vr_wl_gamma(double rate, double cv) {
  vr_workload w;
  memset(&w, 0, sizeof w);
  w.kind = VR_WL_GAMMA;
  w.target_kind = 'a';
  w.rate = rate, w.cv = cv;
  return w;
}

int vr_wl_kind_parse(const char *s) {
  for (int k = 0; s && k < VR_WL__COUNT; k++)
    if (!strcmp(s, k_names[k])) return k;
  return -1;
}

/* Strict number field: digits etc. up to `,` or end; no empty fields. */
static int field(const char **p, const char *end, double *out) {
  const char *s = *p;
  while (s < end && (*s == ' ' || *s == '\t')) s++;
  char buf[64];
  size_t n = 0;
  while (s < end && *s != ',' && n < sizeof buf - 1) buf[n++] = *s++;
  if (s < end && *s != ',') return -1; /* field too long */
  while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\t' ||
                   buf[n - 1] == '\r'))
    n--;
  buf[n] = 0;
  if (!n) return -1;
  char *e;
  errno = 0;
  double v = strtod(buf, &e);
  if (*e || errno || !isfinite(v)) return -1;
  *out = v;
  *p = s < end ? s + 1 : s; /* skip the comma */
  return s < end ? 1 : 0;   /* 1: more fields follow */
}

int vr_trace_parse_line(const char *line, size_t len, vr_trace_rec *out,
                        vr_errbuf *err) {
  const char *p = line, *end = line + len;
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
  if (p == end || *p == '#') return 0;
  static const char *names[] = {"arrival_ms", "qos", "deadline_ms",
                                "accuracy"};
  double v[4] = {0, 0, 0, -1};
  int n = 0, more = 1;
  while (more) {
    if (n == 4)
      return vr_errf(err, VR_EFORMAT, "more than 4 fields");
    more = field(&p, end, &v[n]);
    if (more < 0)
      return vr_errf(err, VR_EFORMAT, "field %d (%s) is not a number", n + 1,
                     names[n]);
    n++;
  }
  if (n < 3)
    return vr_errf(err, VR_EFORMAT,
                   "expected arrival_ms,qos,deadline_ms[,accuracy], got %d "
                   "field%s", n, n == 1 ? "" : "s");
  if (v[0] < 0 || v[0] > 1e12)
    return vr_errf(err, VR_EFORMAT, "arrival_ms out of range");
  if (v[1] < 0 || v[1] > 1e6 || v[1] != floor(v[1]))
    return vr_errf(err, VR_EFORMAT, "qos must be a small integer");
  if (!(v[2] > 0) || v[2] > 1e9)
    return vr_errf(err, VR_EFORMAT, "deadline_ms must be positive");
  if (n == 4 && !(v[3] >= 0 && v[3] <= 100))
    return vr_errf(err, VR_EFORMAT, "accuracy not in [0,100]");
  out->arrival_ms = v[0];
  out->qos = (int)v[1];
  out->deadline_ms = v[2];
  out->accuracy = v[3];
  return 1;
}

double vr_wl_rate_at(const vr_workload *w, double t) {
  switch (w->kind) {
  case VR_WL_PIECEWISE: {
    if (w->npts == 0) return 0;
    if (t <= w->pts[0].t_s) return w->pts[0].rate;
    for (int i = 1; i < w->npts; i++) {
      const vr_wl_point *a = &w->pts[i - 1], *b = &w->pts[i];
      if (t < b->t_s) {
        if (w->step || b->t_s <= a->t_s) return a->rate;
        return a->rate + (b->rate - a->rate) * (t - a->t_s) / (b->t_s - a->t_s);
      }
    }
    return w->pts[w->npts - 1].rate;
  }
  case VR_WL_DIURNAL: {
    double r = w->base * (1 + w->amp * sin(2 * M_PI * (t + w->phase_s) /
                                           w->period_s));
    for (int i = 0; i < w->nspikes; i++)
      if (t >= w->spikes[i].at_s && t < w->spikes[i].at_s + w->spikes[i].dur_s)
        r *= w->spikes[i].mult;
    return r > 0 ? r : 0;
  }
  default: return w->rate;
  }
}

static double max_rate(const vr_workload *w) {
  double m = 0;
  if (w->kind == VR_WL_PIECEWISE) {
    for (int i = 0; i < w->npts; i++) m = fmax(m, w->pts[i].rate);
  } else if (w->kind == VR_WL_DIURNAL) {
    m = w->base * (1 + fabs(w->amp));
    double k = 1;
    for (int i = 0; i < w->nspikes; i++) k *= fmax(1, w->spikes[i].mult);
    m *= k; /* overlapping spikes multiply */
  } else {
    m = w->rate;
  }
  return m;
}

int vr_wl_open(vr_workload *w, uint64_t seed, vr_errbuf *err) {
  vr_rng_seed(&w->rng, seed);
  w->line = 0;
  w->t_s = w->start_s;
  w->done = 0;
  w->cnt_left = 0;
  w->cnt_sec = -1;
  w->rmax = max_rate(w);
  if (w->kind == VR_WL_COUNTS || w->kind == VR_WL_TRACE) {
    if (!w->path) return vr_errf(err, VR_EINVAL, "workload: no file");
    w->f = fopen(w->path, "r");
    if (!w->f)
      return vr_errf(err, VR_EIO, "%s: cannot open: %s", w->path,
                     strerror(errno));
  }
  return 0;
}

void vr_wl_close(vr_workload *w) {
  if (w->f) fclose(w->f);
  w->f = NULL;
  vr_free(w->pts);
  vr_free(w->spikes);
  vr_free(w->path);
  w->pts = NULL;
  w->spikes = NULL;
  w->path = NULL;
}

static int next_trace(vr_workload *w, vr_req *out, vr_errbuf *err) {
  char buf[512];
  size_t len;
  for (;;) {
    int rc = vr_read_line(w->f, buf, sizeof buf, w->path, &w->line, &len, err);
    if (rc <= 0) return rc;
    if (memchr(buf, 0, len))
      return vr_errf(err, VR_EFORMAT, "%s:%ld: NUL byte", w->path, w->line);
    vr_trace_rec r;
    vr_errbuf e = {0};
    rc = vr_trace_parse_line(buf, len, &r, &e);
    if (rc < 0)
      return vr_errf(err, rc, "%s:%ld: %s", w->path, w->line, e.msg);
    if (rc == 0) continue;
    double t = w->start_s + r.arrival_ms / 1000.0;
    if (t < w->t_s - 1e-9)
      return vr_errf(err, VR_EFORMAT, "%s:%ld: arrival_ms goes backwards",
                     w->path, w->line);
    w->t_s = t;
    double slo = w->trace_slo ? r.deadline_ms : w->slo_ms;
    out->t_ns = (int64_t)llround(t * 1e9);
    out->deadline_ns = out->t_ns + (int64_t)llround(slo * 1e6);
    out->min_acc = (float)(r.accuracy >= 0 ? r.accuracy : w->min_accuracy);
    return 1;
  }
}

/* Counts file: one non-negative integer per line = requests in second i.
 * Within a second, arrivals are the order statistics of uniforms,
 * generated one at a time: the next of k remaining uniforms on [pos, 1)
 * sits at pos + (1 - pos) * (1 - U^(1/k)). */
static int next_count(vr_workload *w, double *t, vr_errbuf *err) {
  while (w->cnt_left == 0) {
    char buf[128];
    size_t len;
    int rc = vr_read_line(w->f, buf, sizeof buf, w->path, &w->line, &len, err);
    if (rc <= 0) return rc;
    buf[len] = 0;
    char *s = buf;
    while (*s == ' ' || *s == '\t') s++;
    if (!*s || *s == '#' || *s == '\r') continue;
    char *e;
    errno = 0;
    long long n = strtoll(s, &e, 10);
    while (*e == ' ' || *e == '\t' || *e == '\r') e++;
    if (*e || errno || n < 0 || n > 100000000)
      return vr_errf(err, VR_EFORMAT,
                     "%s:%ld: expected a request count (integer >= 0)",
                     w->path, w->line);
    w->cnt_sec++;
    w->cnt_left = (long)n;
    w->cnt_pos = 0;
  }
  double u = vr_rng_unif_pos(&w->rng);
  w->cnt_pos += (1 - w->cnt_pos) * (1 - pow(u, 1.0 / (double)w->cnt_left));
  w->cnt_left--;
  *t = w->start_s + (double)w->cnt_sec + w->cnt_pos;
  return 1;
}

/* Next arrival time of a synthetic stream after w->t_s. */
static int next_synth(vr_workload *w, double horizon, double *t) {
  double now = w->t_s;
  switch (w->kind) {
  case VR_WL_CONSTANT:
    if (!(w->rate > 0)) return 0;
    *t = now + 1 / w->rate;
    return 1;
  case VR_WL_POISSON:
    if (!(w->rate > 0)) return 0;
    *t = now + vr_rng_exp(&w->rng, w->rate);
    return 1;
  case VR_WL_GAMMA: {
    if (!(w->rate > 0)) return 0;
    double k = 1 / (w->cv * w->cv);
    *t = now + vr_rng_gamma(&w->rng, k) / (k * w->rate);
    return 1;
  }
  default: /* thinning of a Poisson process with rate bound rmax */
    if (!(w->rmax > 0)) return 0;
    for (;;) {
      now += vr_rng_exp(&w->rng, w->rmax);
      if (now > horizon) return 0;
      if (vr_rng_unif(&w->rng) * w->rmax <= vr_wl_rate_at(w, now)) break;
    }
    *t = now;
    return 1;
  }
}

int vr_wl_next(vr_workload *w, double horizon_s, vr_req *out,
               vr_errbuf *err) {
  if (w->done) return 0;
  double end = w->end_s > 0 && w->end_s < horizon_s ? w->end_s : horizon_s;
  int rc;
  if (w->kind == VR_WL_TRACE) {
    rc = next_trace(w, out, err);
    if (rc == 1 && w->t_s >= end) rc = 0;
  } else {
    double t = 0;
    rc = w->kind == VR_WL_COUNTS ? next_count(w, &t, err)
                                 : next_synth(w, end, &t);
    if (rc == 1 && t >= end) rc = 0;
    if (rc == 1) {
      w->t_s = t;
      out->t_ns = (int64_t)llround(t * 1e9);
      out->deadline_ns = out->t_ns + (int64_t)llround(w->slo_ms * 1e6);
      out->min_acc = (float)w->min_accuracy;
    }
  }
  if (rc <= 0) w->done = 1;
  return rc;
}
