/* A model's measured slowdown (slowdown.h). */
#include "runtime/slowdown.h"

#include <string.h>

#include "policy/batch.h"

typedef struct sums {
  const vr_latency *ref;
  double batches, obs, exp;
} sums;

static void add_variant(const vr_rt_variant_stats *v, void *u) {
  sums *s = u;
  for (int k = 1; k <= VR_RT_MAX_BATCH; k++) {
    if (!v->by_batch[k].count) continue;
    double n = (double)v->by_batch[k].count;
    s->batches += n;
    s->obs += v->by_batch[k].infer_ns;
    s->exp += n * (double)vr_batch_est_ns(s->ref, k);
  }
}

void vr_slowdown_sums(vr_runtime *rt, const char *model, const vr_latency *ref, double *batches,
                      double *obs_ns, double *exp_ns) {
  sums s = {ref, 0, 0, 0};
  vr_rt_foreach_variant(rt, model, add_variant, &s);
  *batches = s.batches, *obs_ns = s.obs, *exp_ns = s.exp;
}

double vr_slowdown_step(vr_slowdown *s, double batches, double obs_ns, double exp_ns,
                        int min_batches) {
  double db = batches - s->batches, dobs = obs_ns - s->obs_ns, dexp = exp_ns - s->exp_ns;
  if (db < 0 || dobs < 0 || dexp < 0) { /* restarted: this window is the start */
    s->batches = batches, s->obs_ns = obs_ns, s->exp_ns = exp_ns;
    return s->value;
  }
  int min = min_batches > 0 ? min_batches : 1;
  if (db < min || !(dexp > 0)) return s->value;
  s->batches = batches, s->obs_ns = obs_ns, s->exp_ns = exp_ns;
  if (!(dobs > 0)) return s->value;
  if (s->base <= 0) {
    s->base_b += db, s->base_obs += dobs, s->base_exp += dexp;
    if (s->base_b >= 5.0 * min) {
      s->base = s->base_obs / s->base_exp;
      s->value = 1.0;
    }
    return s->value;
  }
  s->value = dobs / dexp / s->base;
  return s->value;
}

double vr_slowdown_update(vr_slowdown *s, vr_runtime *rt, const char *model,
                          const vr_rt_instance_stats *st, int n, int min_batches) {
  const vr_rt_instance_stats *first = NULL;
  for (int i = 0; i < n && !first; i++)
    if (!strcmp(st[i].model, model)) first = &st[i];
  if (!first) return s->value;
  double b, o, e;
  if (first->id != s->inst_id) { /* new or reloaded: a new reference */
    memset(s, 0, sizeof *s);
    s->inst_id = first->id;
    s->ref = first->profile;
    vr_slowdown_sums(rt, model, &s->ref, &b, &o, &e);
    s->batches = b, s->obs_ns = o, s->exp_ns = e; /* count from now */
    return 0;
  }
  vr_slowdown_sums(rt, model, &s->ref, &b, &o, &e);
  return vr_slowdown_step(s, b, o, e, min_batches);
}
