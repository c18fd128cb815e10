/* The control plane's side of pipeline policies (control.h, "pipeline
 * policies"): apps a pipeline policy manages, the instances and cores it
 * sees, and its actions through the live actuator table. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "control/control_int.h"
#include "control/history.h"

static int app_managed(const vr_control *c, const char *app) {
  for (int i = 0; i < c->nmanaged; i++)
    if (!strcmp(c->managed[i], app)) return 1;
  return 0;
}

int ctl_managed_locked(vr_control *c, const vr_action *a) {
  if (!c->nmanaged) return 0;
  switch (a->kind) {
    case VR_ACT_LOAD: case VR_ACT_UNLOAD: case VR_ACT_MIGRATE: case VR_ACT_SET_BATCH:
    case VR_ACT_PAIR_SHADOW: case VR_ACT_UNPAIR_SHADOW: break;
    default: return 0;
  }
  int v = a->variant;
  if (a->instance > 0) {
    ctl_inst *in = ctl_inst_by_id(c, (int)a->instance);
    if (in && in->var >= 0) {
      if (app_managed(c, c->var[in->var].prof.app)) return 1;
    }
  }
  return v >= 0 && (size_t)v < c->nvar && app_managed(c, c->var[v].prof.app);
}

int vr_control_set_managed(vr_control *c, const char *app, int on) {
  pthread_mutex_lock(&c->mu);
  int rc = 0, i = 0;
  while (i < c->nmanaged && strcmp(c->managed[i], app)) i++;
  if (on && i == c->nmanaged) {
    if (c->nmanaged < CTL_MAX_APPS)
      snprintf(c->managed[c->nmanaged++], sizeof c->managed[0], "%s", app);
    else
      rc = VR_ELIMIT;
  } else if (!on && i < c->nmanaged) {
    memmove(c->managed[i], c->managed[i + 1], (size_t)(c->nmanaged - i - 1) * sizeof c->managed[0]);
    c->nmanaged--;
  }
  pthread_mutex_unlock(&c->mu);
  return rc;
}

int vr_control_variant(vr_control *c, const char *name, vr_profile *prof) {
  pthread_mutex_lock(&c->mu);
  uintptr_t i = (uintptr_t)vr_map_get(&c->var_by_name, name);
  if (i && prof) *prof = c->var[i - 1].prof;
  pthread_mutex_unlock(&c->mu);
  return i ? (int)i - 1 : -1;
}

void vr_control_hold_indexes(vr_control *c) { pthread_rwlock_rdlock(&c->reload_rw); }

void vr_control_release_indexes(vr_control *c) { pthread_rwlock_unlock(&c->reload_rw); }

static int by_id(const void *a, const void *b) {
  return ((const vr_ctl_inst_info *)a)->id - ((const vr_ctl_inst_info *)b)->id;
}

int vr_control_instances(vr_control *c, vr_ctl_inst_info *out, int cap) {
  vr_rt_instance_stats st[CTL_MAX_INST];
  int n = vr_rt_instances(c->o.rt, NULL, st, CTL_MAX_INST);
  if (n > CTL_MAX_INST) n = CTL_MAX_INST;
  int k = 0;
  pthread_mutex_lock(&c->mu);
  for (int i = 0; i < n; i++) {
    int v = ctl_find_var(c, st[i].model, st[i].precision, st[i].threads, st[i].max_batch);
    if (v < 0) continue;
    if (k < cap) {
      const ctl_inst *in = ctl_inst_by_id(c, st[i].id);
      out[k] = (vr_ctl_inst_info){st[i].id, v, st[i].batch_cap,
                                  (st[i].state == VR_INST_ACTIVE ||
                                   st[i].state == VR_INST_OVERLOADED) &&
                                      !(in && in->removing)};
      snprintf(out[k].app, sizeof out[k].app, "%s", c->var[v].prof.app);
      out[k].cores = st[i].threads + st[i].shadow_threads;
    }
    k++;
  }
  pthread_mutex_unlock(&c->mu);
  qsort(out, (size_t)(k < cap ? k : cap), sizeof *out, by_id);
  return k;
}

int vr_control_managed_cores(vr_control *c) {
  vr_rt_instance_stats st[CTL_MAX_INST];
  int n = vr_rt_instances(c->o.rt, NULL, st, CTL_MAX_INST);
  if (n > CTL_MAX_INST) n = CTL_MAX_INST;
  pthread_mutex_lock(&c->mu);
  int used = 0;
  for (int i = 0; i < n; i++) {
    int v = ctl_find_var(c, st[i].model, st[i].precision, st[i].threads, st[i].max_batch);
    if (v < 0 || !app_managed(c, c->var[v].prof.app))
      used += st[i].threads + st[i].shadow_threads;
  }
  int free_cores = c->o.cores - used - c->loading_cores;
  pthread_mutex_unlock(&c->mu);
  return free_cores > 0 ? free_cores : 0;
}

int vr_control_apply(vr_control *c, const vr_action *a, vr_errbuf *err) {
  pthread_mutex_lock(&c->mu);
  const char *vn = a->variant >= 0 && (size_t)a->variant < c->nvar
                       ? c->var[a->variant].prof.variant : "";
  char name[VR_VARIANT_MAX];
  snprintf(name, sizeof name, "%s", vn);
  if (c->hist && a->kind != VR_ACT_SET_BATCH)
    vr__hist_add_act(c->hist, (vr_clock_now(c->o.clock) - c->t0_ns) / 1e9,
                     vr_action_name(a->kind), name, a->why);
  if (a->kind == VR_ACT_LOAD && c->last_tick_ns == 0) /* no snapshot yet: room unknown */
    ctl_refresh_locked(c, vr_clock_now(c->o.clock), 1.0);
  pthread_mutex_unlock(&c->mu);
  if (a->kind != VR_ACT_SET_BATCH)
    vr_info("control: pipeline policy: %s %s (%s)", vr_action_name(a->kind), name,
            a->why ? a->why : "");
  int rc = vr_driver_apply(&c->drv, a);
  if (a->kind == VR_ACT_LOAD || a->kind == VR_ACT_MIGRATE) {
    pthread_mutex_lock(&c->mu);
    if (rc) vr_errf(err, rc, "%s", c->act_err); /* refused or failed: why */
    int r2 = ctl_refresh_locked(c, c->last_tick_ns, 1.0); /* route to it, count its room */
    pthread_mutex_unlock(&c->mu);
    if (!rc) rc = r2;
  }
  return rc;
}
