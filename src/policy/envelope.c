#include "policy/envelope.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"

#define MS 1000000LL
#define SEC 1000000000LL

int vr_envelope_windows(vr_envelope *e, int64_t service_ns, int64_t max_ns) {
  memset(e, 0, sizeof *e);
  if (service_ns < MS) service_ns = MS;
  if (max_ns < service_ns) return VR_EINVAL;
  int64_t w = service_ns;
  while (w < max_ns && e->nwin < VR_ENV_MAX_WIN - 1) {
    e->win_ns[e->nwin++] = w;
    w *= 2;
  }
  e->win_ns[e->nwin++] = max_ns;
  return 0;
}

/* Two pointers per window: the count of (t - w, t] is largest at some
 * arrival t, so scanning arrivals is exact. */
int vr_envelope_compute(vr_envelope *e, const int64_t *t, size_t n) {
  for (size_t j = 1; j < n; j++)
    if (t[j] < t[j - 1]) return VR_EINVAL;
  for (int i = 0; i < e->nwin; i++) {
    int64_t best = 0;
    size_t lo = 0;
    for (size_t j = 0; j < n; j++) {
      while (t[lo] <= t[j] - e->win_ns[i]) lo++;
      if ((int64_t)(j - lo + 1) > best) best = (int64_t)(j - lo + 1);
    }
    e->count[i] = best;
  }
  return 0;
}

double vr_envelope_rate(const vr_envelope *e, int i) {
  if (i < 0 || i >= e->nwin) return 0;
  return (double)e->count[i] * 1e9 / (double)e->win_ns[i];
}

void vr_tuner_cfg_default(vr_tuner_cfg *c) {
  memset(c, 0, sizeof *c);
  c->settle_ns = 15 * SEC;
  c->down_span_ns = 30 * SEC;
  c->down_win_ns = 5 * SEC;
}

int vr_tuner_cfg_validate(const vr_tuner_cfg *c, vr_errbuf *err) {
  if (c->plan.nwin < 1 || c->plan.nwin > VR_ENV_MAX_WIN)
    return vr_errf(err, VR_EINVAL, "tuner: plan envelope has no windows");
  for (int i = 0; i < c->plan.nwin; i++) {
    if (c->plan.win_ns[i] <= 0 || c->plan.win_ns[i] > VR_ENV_HORIZON_NS ||
        (i && c->plan.win_ns[i] <= c->plan.win_ns[i - 1]))
      return vr_errf(err, VR_EINVAL, "tuner: plan window %d out of order", i);
    if (c->plan.count[i] < 1)
      return vr_errf(err, VR_EINVAL,
                     "tuner: plan envelope is empty at window %d (planning "
                     "trace without arrivals?)", i);
  }
  if (!(c->plan_qps > 0) || !(c->plan_down_qps >= 0))
    return vr_errf(err, VR_EINVAL, "tuner: plan_qps must be positive "
                   "(plan_down_qps >= 0)");
  if (c->nstages < 1 || c->nstages > VR_TUNER_MAX_STAGES)
    return vr_errf(err, VR_EINVAL, "tuner: %d stages (1..%d)", c->nstages,
                   VR_TUNER_MAX_STAGES);
  for (int m = 0; m < c->nstages; m++)
    if (c->st[m].k_plan < 1 || !(c->st[m].scale > 0) ||
        !(c->st[m].mu_qps > 0))
      return vr_errf(err, VR_EINVAL,
                     "tuner: stage %d needs k_plan >= 1, scale > 0, "
                     "mu_qps > 0", m);
  if (c->settle_ns < 0 || c->down_win_ns < SEC / 10 ||
      c->down_win_ns > VR_ENV_HORIZON_NS || c->down_span_ns < c->down_win_ns ||
      c->down_span_ns > (VR_TUNER_DOWN_SLOTS - 2) * SEC)
    return vr_errf(err, VR_EINVAL,
                   "tuner: need settle >= 0, 0.1 s <= down window <= "
                   "down span <= %d s", VR_TUNER_DOWN_SLOTS - 2);
  if (c->max_replicas < 0)
    return vr_errf(err, VR_EINVAL, "tuner: max_replicas < 0");
  return 0;
}

int vr_tuner_state_init(vr_tuner_state *s, const vr_tuner_cfg *c,
                        int64_t now_ns) {
  memset(s, 0, sizeof *s);
  for (int i = 0; i < VR_TUNER_DOWN_SLOTS; i++) s->down_slot_t[i] = -1;
  for (int m = 0; m < c->nstages && m < VR_TUNER_MAX_STAGES; m++)
    s->k[m] = c->st[m].k_plan;
  s->last_change_ns = s->start_ns = now_ns;
  return 0;
}

void vr_tuner_state_free(vr_tuner_state *s) {
  vr_free(s->ring);
  s->ring = NULL;
  s->cap = s->len = s->head = 0;
}

static int64_t *at(vr_tuner_state *s, uint64_t seq) {
  uint64_t oldest = s->seen - s->len;
  return &s->ring[(s->head + (size_t)(seq - oldest)) % s->cap];
}

static int grow(vr_tuner_state *s) {
  size_t ncap = s->cap ? s->cap * 2 : 1024;
  int64_t *r = VR_NEWN(int64_t, ncap);
  if (!r) return VR_ENOMEM;
  for (size_t i = 0; i < s->len; i++)
    r[i] = s->ring[(s->head + i) % s->cap];
  vr_free(s->ring);
  s->ring = r;
  s->cap = ncap;
  s->head = 0;
  return 0;
}

/* Advances window i's tail past arrivals older than w; returns the count
 * of arrivals in (t - w, t]. */
static int64_t slide(vr_tuner_state *s, int i, int64_t w, int64_t t) {
  while (s->tail[i] < s->seen && *at(s, s->tail[i]) <= t - w) s->tail[i]++;
  return (int64_t)(s->seen - s->tail[i]);
}

int vr_tuner_observe(const vr_tuner_cfg *c, vr_tuner_state *s, int64_t t) {
  if (s->len && *at(s, s->seen - 1) > t) return VR_EINVAL;
  if (s->len == s->cap) {
    int rc = grow(s);
    if (rc) return rc;
  }
  s->ring[(s->head + s->len) % s->cap] = t;
  s->len++;
  s->seen++;
  uint64_t keep = s->seen - 1; /* oldest arrival still inside a window */
  for (int i = 0; i < c->plan.nwin; i++) {
    int64_t n = slide(s, i, c->plan.win_ns[i], t);
    if (n > s->peak[i]) s->peak[i] = n;
    if (s->tail[i] < keep) keep = s->tail[i];
  }
  int d = VR_ENV_MAX_WIN; /* the scale-down window */
  int64_t n = slide(s, d, c->down_win_ns, t);
  if (s->tail[d] < keep) keep = s->tail[d];
  int64_t slot = t / SEC;
  int idx = (int)(slot % VR_TUNER_DOWN_SLOTS);
  if (s->down_slot_t[idx] != slot) {
    s->down_slot_t[idx] = slot;
    s->down_peak[idx] = 0;
  }
  if (n > s->down_peak[idx]) s->down_peak[idx] = n;
  /* drop arrivals no window can see any more */
  uint64_t drop = keep - (s->seen - s->len);
  s->head = (s->head + (size_t)drop) % s->cap;
  s->len -= (size_t)drop;
  return 0;
}

static int cap_k(const vr_tuner_cfg *c, double k) {
  if (k < 1) k = 1;
  if (c->max_replicas && k > c->max_replicas) k = c->max_replicas;
  if (k > 1e6) k = 1e6;
  return (int)k;
}

/* Scale up: the worst ratio of observed to planned count over windows. */
static double decide_up(const vr_tuner_cfg *c, vr_tuner_state *s,
                        vr_tuner_decision *d) {
  double worst = 1;
  for (int i = 0; i < c->plan.nwin; i++) {
    double r = (double)s->peak[i] / (double)c->plan.count[i];
    if (r > worst) {
      worst = r;
      d->window = i;
      d->rate_qps = (double)s->peak[i] * 1e9 / (double)c->plan.win_ns[i];
    }
  }
  if (d->window < 0) return 1;
  for (int m = 0; m < c->nstages; m++) {
    int k = cap_k(c, ceil(c->st[m].k_plan * worst - 1e-9));
    if (k > s->k[m]) {
      s->k[m] = k;
      d->changed++;
    }
  }
  if (d->changed) d->up = 1;
  return worst;
}

/* The scale-down statistic at now: the largest count in down_win_ns
 * windows over the last down_span_ns, as a rate. */
static double down_rate(const vr_tuner_cfg *c, const vr_tuner_state *s,
                        int64_t now) {
  int64_t first = (now - c->down_span_ns) / SEC, last = now / SEC, mx = 0;
  for (int i = 0; i < VR_TUNER_DOWN_SLOTS; i++)
    if (s->down_slot_t[i] > first && s->down_slot_t[i] <= last &&
        s->down_peak[i] > mx)
      mx = s->down_peak[i];
  return (double)mx * 1e9 / (double)c->down_win_ns;
}

/* Scale down; never below what the scale-up rule asks for right now
 * (`worst` > 1 while a long window still holds a past burst), else the
 * two rules would undo each other every settle period. */
static void decide_down(const vr_tuner_cfg *c, vr_tuner_state *s,
                        int64_t now, double worst, vr_tuner_decision *d) {
  double rate = down_rate(c, s, now);
  double plan = c->plan_down_qps > 0 ? c->plan_down_qps : c->plan_qps;
  for (int m = 0; m < c->nstages; m++) {
    /* rho_m = plan s_m / (k_plan mu_m): need = k_plan rate / plan */
    double need = c->st[m].k_plan * rate / plan;
    if (worst > 1 && need < c->st[m].k_plan * worst)
      need = c->st[m].k_plan * worst;
    int k = cap_k(c, ceil(need - 1e-9));
    if (k < s->k[m]) {
      s->k[m] = k;
      d->changed++;
    }
  }
  if (d->changed) {
    d->up = -1;
    d->rate_qps = rate;
  }
}

double vr_tuner_plan_down_qps(const vr_tuner_cfg *c, const int64_t *t,
                              size_t n) {
  if (!n) return 0;
  vr_tuner_state s;
  vr_tuner_state_init(&s, c, 0);
  int64_t end = t[n - 1], at = c->down_span_ns < end ? c->down_span_ns : end;
  double lo = INFINITY;
  for (size_t j = 0; at <= end; at += SEC) {
    for (; j < n && t[j] <= at; j++)
      if (vr_tuner_observe(c, &s, t[j])) { /* unsorted or no memory */
        vr_tuner_state_free(&s);
        return 0;
      }
    double r = down_rate(c, &s, at);
    if (r < lo) lo = r;
  }
  vr_tuner_state_free(&s);
  return isfinite(lo) ? lo : 0;
}

void vr_tuner_decide(const vr_tuner_cfg *c, vr_tuner_state *s, int64_t now,
                     vr_tuner_decision *d) {
  memset(d, 0, sizeof *d);
  d->window = -1;
  double worst = decide_up(c, s, d);
  /* scale-down reads the last down_span_ns: wait until it has seen them,
   * or a quiet start of the look-back reads as a drop in load */
  if (!d->changed && now - s->last_change_ns >= c->settle_ns &&
      now - s->start_ns >= c->down_span_ns)
    decide_down(c, s, now, worst, d);
  if (d->changed) s->last_change_ns = now;
  memset(s->peak, 0, sizeof s->peak);
  for (int m = 0; m < c->nstages; m++) d->k[m] = s->k[m];
}
