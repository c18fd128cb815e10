/* InferLine's serving-time tick and the coarse-grained AutoScale tuning
 * (il_tick.h). */
#include "policy/il_tick.h"

#include <math.h>
#include <string.h>

void vr_il_autoscale_default(vr_il_autoscale_cfg *a) {
  memset(a, 0, sizeof *a);
  a->wait_ns = 120000000000LL; /* AutoScale's t_wait */
}

double vr_il_autoscale_pack(const vr_il_problem *pb, const vr_il_config *cfg) {
  double unit = INFINITY; /* root queries/s one unit sustains */
  for (int m = 0; m < pb->nstages; m++) {
    double q = vr_il_stage_qps(pb, cfg, m) / pb->st[m].scale;
    if (q < unit) unit = q;
  }
  double p = unit * pb->slo_ms / 1e3;
  return p >= 1 ? p : 1;
}

int vr_il_tick_validate(const vr_il_tick_cfg *c, vr_errbuf *err) {
  if (c->mode < VR_ILT_STATIC || c->mode > VR_ILT_AUTOSCALE)
    return vr_errf(err, VR_EINVAL, "inferline tick: unknown mode %d",
                   c->mode);
  if (c->base.nstages < 1 || c->base.nstages > VR_IL_MAX_STAGES)
    return vr_errf(err, VR_EINVAL, "inferline tick: %d stages",
                   c->base.nstages);
  for (int m = 0; m < c->base.nstages; m++)
    if (c->base.st[m].replicas < 1 || c->base.st[m].batch < 1 ||
        c->base.st[m].hw < 0)
      return vr_errf(err, VR_EINVAL, "inferline tick: stage %d needs "
                     "replicas, batch >= 1 and an option", m);
  if (c->mode == VR_ILT_TUNER) {
    if (c->tuner.nstages != c->base.nstages)
      return vr_errf(err, VR_EINVAL, "inferline tick: tuner has %d stages, "
                     "the plan %d", c->tuner.nstages, c->base.nstages);
    return vr_tuner_cfg_validate(&c->tuner, err);
  }
  if (c->mode == VR_ILT_AUTOSCALE) {
    if (!(c->as.pack >= 1) || c->as.wait_ns < 0 || c->as.max_units < 0)
      return vr_errf(err, VR_EINVAL, "autoscale: need pack >= 1, t_wait "
                     ">= 0, max_units >= 0");
    for (int m = 1; m < c->base.nstages; m++)
      if (c->base.st[m].replicas != c->base.st[0].replicas)
        return vr_errf(err, VR_EINVAL, "autoscale: the base configuration "
                       "is not coarse (stage %d has %d replicas, stage 0 "
                       "%d)", m, c->base.st[m].replicas,
                       c->base.st[0].replicas);
  }
  return 0;
}

void vr_il_tick_state_init(vr_il_tick_state *s, const vr_il_tick_cfg *c,
                           int64_t now_ns) {
  memset(s, 0, sizeof *s);
  if (c->mode == VR_ILT_TUNER) vr_tuner_state_init(&s->ts, &c->tuner, now_ns);
  for (int m = 0; m < c->base.nstages; m++) s->k[m] = c->base.st[m].replicas;
  s->units = c->base.st[0].replicas;
  s->above_since = -1;
}

void vr_il_tick_state_free(vr_il_tick_state *s) {
  vr_tuner_state_free(&s->ts);
}

/* AutoScale: up at once to ceil(n / p); down to the largest need seen
 * once the units have exceeded it for t_wait. Returns 1 on a change. */
static int autoscale(const vr_il_tick_cfg *c, vr_il_tick_state *s,
                     const vr_il_tick_in *in) {
  double need_d = ceil((double)in->open_queries / c->as.pack - 1e-9);
  int need = need_d < 1 ? 1 : need_d > 1e6 ? 1000000 : (int)need_d;
  if (c->as.max_units && need > c->as.max_units) need = c->as.max_units;
  if (need >= s->units) {
    s->above_since = -1;
    if (need == s->units) return 0;
    s->units = need;
    s->ups++;
    return 1;
  }
  if (s->above_since < 0) {
    s->above_since = in->now_ns;
    s->wait_need = need;
    return 0;
  }
  if (need > s->wait_need) s->wait_need = need;
  if (in->now_ns - s->above_since < c->as.wait_ns) return 0;
  s->units = s->wait_need;
  s->above_since = -1;
  s->downs++;
  return 1;
}

static int tune(const vr_il_tick_cfg *c, vr_il_tick_state *s,
                const vr_il_tick_in *in) {
  for (size_t i = 0; i < in->narrivals; i++) {
    int rc = vr_tuner_observe(&c->tuner, &s->ts, in->arrivals[i]);
    if (rc) return rc;
  }
  vr_tuner_decision d;
  vr_tuner_decide(&c->tuner, &s->ts, in->now_ns, &d);
  if (!d.changed) return 0;
  s->ups += d.up > 0, s->downs += d.up < 0;
  return 1;
}

int vr_il_tick(const vr_il_tick_cfg *c, vr_il_tick_state *s,
               const vr_il_tick_in *in, const vr_profile *prof,
               vr_pipe_plan *plan) {
  int changed = 0;
  if (c->mode == VR_ILT_TUNER) {
    changed = tune(c, s, in);
    if (changed < 0) return changed;
    for (int m = 0; m < c->base.nstages; m++) s->k[m] = s->ts.k[m];
  } else if (c->mode == VR_ILT_AUTOSCALE) {
    changed = autoscale(c, s, in);
    for (int m = 0; m < c->base.nstages; m++) s->k[m] = s->units;
  }
  for (int t = 0; t < plan->ntasks; t++)
    for (int v = 0; v < plan->off[t + 1] - plan->off[t]; v++)
      vr_pipe_plan_set(plan, prof, t, v, 0, 1);
  for (int m = 0; m < c->base.nstages; m++)
    vr_pipe_plan_set(plan, prof, m, c->base.st[m].hw, s->k[m],
                     c->base.st[m].batch);
  plan->feasible = 1;
  return changed;
}
