#include "policy/place.h"

#include "base/alloc.h"

int vr_place_init(vr_place *p, const vr_snapshot *s) {
  size_t n = s->nworkers ? s->nworkers : 1;
  p->s = s;
  p->want_wtype = -1;
  p->free_cores = VR_NEWN(int, n);
  p->free_gpus = VR_NEWN(int, n);
  p->ninst = VR_NEWN(int, n);
  p->free_mem = VR_NEWN(int64_t, n);
  size_t nt = s->nwtypes ? s->nwtypes : 1;
  p->want_cores = VR_NEWN(double, nt);
  p->want_gpus = VR_NEWN(double, nt);
  p->want_mem = VR_NEWN(double, nt);
  p->gone = VR_NEWN(char, s->ninstances ? s->ninstances : 1);
  p->up_only = 0;
  if (!p->free_cores || !p->free_gpus || !p->ninst || !p->free_mem ||
      !p->want_cores || !p->want_gpus || !p->want_mem || !p->gone) {
    vr_place_free(p);
    return VR_ENOMEM;
  }
  for (size_t w = 0; w < s->nworkers; w++) {
    p->free_cores[w] = s->workers[w].free_cores;
    p->free_gpus[w] = s->workers[w].free_gpus;
    p->free_mem[w] = s->workers[w].free_mem;
  }
  for (size_t i = 0; i < s->ninstances; i++) {
    int w = s->instances[i].worker;
    if (w >= 0 && (size_t)w < s->nworkers) p->ninst[w]++;
  }
  return 0;
}

void vr_place_free(vr_place *p) {
  vr_free(p->free_cores);
  vr_free(p->free_gpus);
  vr_free(p->ninst);
  vr_free(p->free_mem);
  vr_free(p->want_cores);
  vr_free(p->want_gpus);
  vr_free(p->want_mem);
  vr_free(p->gone);
  p->gone = NULL;
  p->free_cores = p->free_gpus = p->ninst = NULL;
  p->free_mem = NULL;
  p->want_cores = p->want_gpus = p->want_mem = NULL;
}

static int needs_gpu(const vr_profile *prof) {
  return prof->device == VR_DEV_GPU;
}

int vr_place_type_fits(const vr_snap_wtype *t, const vr_profile *prof) {
  return t->cores >= prof->threads && t->mem_bytes >= prof->mem_bytes &&
         (!needs_gpu(prof) || t->gpus >= 1);
}

int vr_place_holds(int free_cores, int free_gpus, int64_t free_mem,
                   const vr_profile *prof) {
  return free_cores >= prof->threads && free_mem >= prof->mem_bytes &&
         (!needs_gpu(prof) || free_gpus >= 1);
}

int vr_place_prefer(vr_place_cand a, vr_place_cand b, const vr_profile *prof) {
  if (!a.up != !b.up) return a.up != 0;
  int a2 = !needs_gpu(prof) && a.gpus > 0, b2 = !needs_gpu(prof) && b.gpus > 0;
  return a2 != b2 ? a2 < b2 : a.free_cores < b.free_cores;
}

static vr_place_cand cand(const vr_place *p, size_t w) {
  const vr_snap_worker *k = &p->s->workers[w];
  return (vr_place_cand){k->state == VR_WS_UP, k->gpus, p->free_cores[w]};
}

/* Whether worker w has room for one instance of prof now. */
static int worker_fits(const vr_place *p, size_t w, const vr_profile *prof) {
  if (p->s->workers[w].state == VR_WS_DRAINING) return 0;
  return vr_place_holds(p->free_cores[w], p->free_gpus[w], p->free_mem[w],
                        prof);
}

int vr_place_fits_elsewhere(const vr_place *p, const vr_profile *prof,
                            int exclude) {
  for (size_t w = 0; w < p->s->nworkers; w++)
    if ((int)w != exclude && worker_fits(p, w, prof)) return 1;
  return 0;
}

int vr_place_pick(vr_place *p, const vr_profile *prof, int exclude) {
  const vr_snapshot *s = p->s;
  int best = -1;
  for (size_t w = 0; w < s->nworkers; w++) {
    if ((int)w == exclude || !worker_fits(p, w, prof) ||
        (p->up_only && (s->workers[w].state != VR_WS_UP || p->ninst[w] == 0)))
      continue;
    if (best < 0 || vr_place_prefer(cand(p, w), cand(p, (size_t)best), prof))
      best = (int)w;
  }
  if (best >= 0) {
    p->free_cores[best] -= prof->threads;
    p->free_mem[best] -= prof->mem_bytes;
    if (needs_gpu(prof)) p->free_gpus[best] -= 1;
    p->ninst[best]++;
    return best;
  }
  vr_place_want(p, prof, 1);
  return -1;
}

void vr_place_want(vr_place *p, const vr_profile *prof, int k) {
  const vr_snapshot *s = p->s;
  double price = 0;
  int want = -1;
  /* a CPU variant asks for a machine without GPUs, the cheapest; where
   * every type that holds it has GPUs, for one of those (it runs on their
   * spare cores, vr_place_holds): no worker at all was asked for */
  for (int any = 0; any < 2 && want < 0; any++)
    for (size_t t = 0; t < s->nwtypes; t++) {
      const vr_snap_wtype *wt = &s->wtypes[t];
      if (!vr_place_type_fits(wt, prof) || (!any && !needs_gpu(prof) && wt->gpus > 0))
        continue;
      if (want < 0 || wt->price_per_s < price) want = (int)t, price = wt->price_per_s;
    }
  if (want >= 0 && k > 0) {
    p->want_wtype = want;
    p->want_cores[want] += (double)k * prof->threads;
    p->want_gpus[want] += (double)k * needs_gpu(prof);
    p->want_mem[want] += (double)k * (double)prof->mem_bytes;
  }
}

int vr_place_room(const vr_place *p, const vr_profile *prof) {
  const vr_snapshot *s = p->s;
  int64_t n = 0;
  for (size_t w = 0; w < s->nworkers; w++) {
    if (s->workers[w].state != VR_WS_UP || !worker_fits(p, w, prof)) continue;
    int64_t k = prof->threads > 0 ? p->free_cores[w] / prof->threads : 1000000;
    if (prof->mem_bytes > 0 && p->free_mem[w] / prof->mem_bytes < k)
      k = p->free_mem[w] / prof->mem_bytes;
    if (needs_gpu(prof) && p->free_gpus[w] < k) k = p->free_gpus[w];
    n += k;
  }
  return n > 1000000 ? 1000000 : (int)n;
}

int vr_place_load(vr_place *p, int v, vr_actions *out, const char *why) {
  int w = vr_place_pick(p, &p->s->variants[v].prof, -1);
  if (w < 0) return 0;
  if (vr_actions_push(out, VR_ACT_LOAD, v, -1, w, -1, 0, why))
    return VR_ENOMEM;
  return 1;
}

void vr_place_release(vr_place *p, int worker, const vr_profile *prof) {
  if (worker < 0 || (size_t)worker >= p->s->nworkers) return;
  p->free_cores[worker] += prof->threads;
  p->free_mem[worker] += prof->mem_bytes;
  if (needs_gpu(prof)) p->free_gpus[worker] += 1;
  p->ninst[worker]--;
}

/* An AsyFunc body's shadow runs in the body (its cores are the worker's,
 * counted held in free_cores) and ends with it. */
static int shadow_cores(const vr_snap_instance *in) {
  return in->shadow_cores > 0 ? in->shadow_cores : 0;
}

void vr_place_release_inst(vr_place *p, size_t i) {
  const vr_snap_instance *in = &p->s->instances[i];
  int w = in->worker;
  if (w < 0 || (size_t)w >= p->s->nworkers) return;
  vr_place_release(p, w, &p->s->variants[in->variant].prof);
  p->free_cores[w] += shadow_cores(in);
}

int vr_place_swap(vr_place *p, size_t i, int u) {
  const vr_snapshot *s = p->s;
  const vr_snap_instance *in = &s->instances[i];
  int w = in->worker;
  if (p->gone[i] || in->state == VR_IS_DRAINING || w < 0 ||
      (size_t)w >= s->nworkers || s->workers[w].state == VR_WS_DRAINING)
    return -1;
  const vr_profile *old = &s->variants[in->variant].prof;
  const vr_profile *nw = &s->variants[u].prof;
  int gpu_old = needs_gpu(old), gpu_new = needs_gpu(nw);
  /* cores are time-shared during the short overlap (the old instance
   * serves while the new one loads), its shadow's with them; memory must
   * hold both at once */
  if (p->free_cores[w] + old->threads + shadow_cores(in) < nw->threads ||
      p->free_mem[w] < nw->mem_bytes ||
      (gpu_new && p->free_gpus[w] + gpu_old < 1))
    return -1;
  vr_place_release_inst(p, i);
  p->free_mem[w] -= old->mem_bytes; /* freed only after the overlap */
  p->gone[i] = 1;
  p->free_cores[w] -= nw->threads;
  p->free_mem[w] -= nw->mem_bytes;
  p->free_gpus[w] -= gpu_new;
  p->ninst[w]++;
  return w;
}

int vr_place_growable(const vr_snapshot *s) {
  for (size_t t = 0; t < s->nwtypes; t++)
    if (s->wtypes[t].max_count <= 0 || s->wtypes[t].count < s->wtypes[t].max_count)
      return 1;
  return 0;
}
