/*
 * Worker consolidation (part of INFaaS's worker scaling): scaling decisions
 * place instances where they fit at the time, so a cluster fragments and
 * keeps paying for workers that are mostly empty. When nothing is waiting
 * for room, move every instance off the least-used worker if all of them
 * fit elsewhere (MIGRATE: the replacement loads first, then the old one
 * drains), so that worker goes idle and is released.
 */
#include "policy/policy_int.h"

#include "base/alloc.h"

static int on_worker_all_active(const vr_snapshot *s, int w, int *n) {
  *n = 0;
  for (size_t i = 0; i < s->ninstances; i++) {
    const vr_snap_instance *in = &s->instances[i];
    if (in->worker != w) continue;
    if (in->state == VR_IS_LOADING || in->state == VR_IS_DRAINING) return 0;
    (*n)++;
  }
  return 1;
}

int vr_pol_consolidate(const vr_snapshot *s, vr_place *pl, vr_actions *out) {
  if (pl->want_wtype >= 0) return 0; /* scaling out: not now */
  /* only a settled cluster: while anything loads (a previous move among
   * them) the picture is about to change */
  for (size_t i = 0; i < s->ninstances; i++)
    if (s->instances[i].state == VR_IS_LOADING || pl->gone[i]) return 0;
  int cand = -1, n;
  for (size_t w = 0; w < s->nworkers; w++) {
    const vr_snap_worker *wk = &s->workers[w];
    if (wk->state != VR_WS_UP || !on_worker_all_active(s, (int)w, &n) || !n)
      continue;
    int used = wk->cores - pl->free_cores[w];
    if (cand < 0 || used < s->workers[cand].cores - pl->free_cores[cand])
      cand = (int)w;
  }
  if (cand < 0) return 0;
  int *dst = VR_NEWN(int, s->ninstances ? s->ninstances : 1);
  if (!dst) return VR_ENOMEM;
  int ok = 1, rc = 0;
  size_t i;
  pl->up_only = 1;
  for (i = 0; i < s->ninstances && ok; i++) {
    dst[i] = -1;
    if (s->instances[i].worker != cand) continue;
    dst[i] = vr_place_pick(pl, &s->variants[s->instances[i].variant].prof,
                           cand);
    ok = dst[i] >= 0;
  }
  pl->up_only = 0;
  pl->want_wtype = -1; /* a failed trial pick is no demand for workers */
  for (size_t t = 0; t < s->nwtypes; t++)
    pl->want_cores[t] = pl->want_gpus[t] = pl->want_mem[t] = 0;
  for (size_t k = 0; k < i; k++) {
    if (dst[k] < 0) continue;
    const vr_snap_instance *in = &s->instances[k];
    if (!ok) {
      vr_place_release(pl, dst[k], &s->variants[in->variant].prof);
      continue;
    }
    vr_place_release_inst(pl, k);
    pl->gone[k] = 1;
    if ((rc = vr_actions_push(out, VR_ACT_MIGRATE, in->variant, in->id,
                              dst[k], -1, 0, "consolidate workers")))
      break;
  }
  vr_free(dst);
  return rc;
}
