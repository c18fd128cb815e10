/* Policy driver (see driver.h). */
#include "policy/driver.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int vr_driver_init(vr_driver *d, const vr_policy_cfg *cfg,
                   const vr_actuator *act, vr_clock *clock) {
  memset(d, 0, sizeof *d);
  d->cfg = *cfg;
  d->act = *act;
  d->clock = clock;
  vr_policy_state_init(&d->st);
  vr_actions_init(&d->acts);
  vr_vec_init(&d->sv, sizeof(vr_snap_variant));
  vr_vec_init(&d->si, sizeof(vr_snap_instance));
  vr_vec_init(&d->sw, sizeof(vr_snap_worker));
  vr_vec_init(&d->swt, sizeof(vr_snap_wtype));
  d->ix = vr_select_new();
  return d->ix ? 0 : VR_ENOMEM;
}

void vr_driver_free(vr_driver *d) {
  vr_select_free(d->ix);
  d->ix = NULL;
  vr_actions_free(&d->acts);
  vr_policy_state_free(&d->st);
  vr_vec_free(&d->sv);
  vr_vec_free(&d->si);
  vr_vec_free(&d->sw);
  vr_vec_free(&d->swt);
}

/* Points the snapshot at the vectors (they may have moved). */
static void sync(vr_driver *d) {
  vr_snapshot *s = &d->snap;
  s->variants = d->sv.data, s->nvariants = d->sv.len;
  s->instances = d->si.data, s->ninstances = d->si.len;
  s->workers = d->sw.data, s->nworkers = d->sw.len;
  s->wtypes = d->swt.data, s->nwtypes = d->swt.len;
}

void vr_driver_begin(vr_driver *d, int64_t now_ns) {
  vr_vec_clear(&d->sv);
  vr_vec_clear(&d->si);
  vr_vec_clear(&d->sw);
  vr_vec_clear(&d->swt);
  d->snap.now_ns = now_ns;
  sync(d);
}

static int add(vr_driver *d, vr_vec *v, const void *x) {
  if (vr_vec_push(v, x)) return VR_ENOMEM;
  sync(d);
  return (int)v->len - 1;
}

int vr_driver_add_variant(vr_driver *d, const vr_snap_variant *v) {
  return add(d, &d->sv, v);
}
int vr_driver_add_instance(vr_driver *d, const vr_snap_instance *in) {
  return add(d, &d->si, in);
}
int vr_driver_add_worker(vr_driver *d, const vr_snap_worker *w) {
  return add(d, &d->sw, w);
}
int vr_driver_add_wtype(vr_driver *d, const vr_snap_wtype *t) {
  return add(d, &d->swt, t);
}

int vr_driver_decide(vr_driver *d) {
  vr_vec_clear(&d->acts);
  return vr_policy_tick(&d->cfg, &d->st, &d->snap, &d->acts);
}

int vr_driver_apply(vr_driver *d, const vr_action *a) {
  int (*fn)(void *, const vr_action *) = NULL;
  switch (a->kind) {
  case VR_ACT_LOAD: fn = d->act.load; break;
  case VR_ACT_UNLOAD: fn = d->act.unload; break;
  case VR_ACT_SET_BATCH: fn = d->act.set_batch; break;
  case VR_ACT_MIGRATE: fn = d->act.migrate; break;
  case VR_ACT_PAIR_SHADOW: fn = d->act.pair_shadow; break;
  case VR_ACT_UNPAIR_SHADOW: fn = d->act.unpair_shadow; break;
  case VR_ACT_SET_ROUTES: fn = d->act.set_routes; break;
  case VR_ACT_ADD_WORKER: fn = d->act.add_worker; break;
  case VR_ACT_REMOVE_WORKER: fn = d->act.remove_worker; break;
  case VR_ACT_SET_VSTATE: fn = d->act.set_vstate; break;
  case VR_ACT_SET_ISTATE: fn = d->act.set_istate; break;
  default: return VR_EINVAL;
  }
  /* atomic: the live side applies outside its lock while /metrics reads */
  if (!fn) {
    __atomic_fetch_add(&d->skipped[a->kind], 1, __ATOMIC_RELAXED);
    return 0;
  }
  __atomic_fetch_add(&d->applied[a->kind], 1, __ATOMIC_RELAXED);
  return fn(d->act.self, a);
}

int vr_driver_apply_all(vr_driver *d) {
  int rc = 0;
  for (size_t i = 0; i < d->acts.len && !rc; i++)
    rc = vr_driver_apply(d, vr_actions_at(&d->acts, i));
  return rc;
}

int vr_driver_index(vr_driver *d) {
  d->ix_gen++;
  return vr_select_build(d->ix, &d->snap);
}

/* ---- monitoring helpers ---- */

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static int sorted_copy(float *dst, const float *v, int n) {
  if (n > VR_SNAP_MAX_SAMPLES) n = VR_SNAP_MAX_SAMPLES;
  if (n <= 0) return 0;
  memcpy(dst, v, (size_t)n * sizeof *dst);
  qsort(dst, (size_t)n, sizeof *dst, cmp_float);
  return n;
}

double vr_snap_median(const float *v, int n) {
  float t[VR_SNAP_MAX_SAMPLES];
  n = sorted_copy(t, v, n);
  return n ? t[(n - 1) / 2] : 0;
}

void vr_snap_latency(vr_snap_instance *x, const float *v, int n) {
  float t[VR_SNAP_MAX_SAMPLES];
  n = sorted_copy(t, v, n);
  if (!n) return;
  x->p50_ms = t[(n - 1) / 2];
  x->p99_ms = t[(int)floor(0.99 * (n - 1))];
}
