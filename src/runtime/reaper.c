/*
 * The reaper: one thread per runtime that answers queued requests as soon
 * as they are due for dropping (policy/drop.h) while their instance's
 * executor is stuck in a batch.
 *
 * Why: an executor applies the drop rule between batches, so a request
 * that becomes due during a batch is answered when the batch ends: at most
 * a batch time late, except when the batch itself is stuck. A paired run
 * waits up to 2 s for a shadow process that stopped (pair.c) before it
 * re-runs the rows itself, and every query queued behind it was answered
 * 504 that long after its deadline, too late for a client, or a Loki
 * reroute, to do anything with it. The reaper only acts on a batch well
 * past its profiled time (vr__inst_reap), which the simulator's batches
 * never are, and applies the executor's own rule: live and simulated
 * runs stay the same wherever the simulator models them.
 */
#include <time.h>

#include "base/clock.h"
#include "runtime/runtime_int.h"

/* Every listed instance, under rt->lock (read); answered after it. */
static void reap_once(vr_runtime *rt) {
  vr__rt_later later = VR__RT_LATER_INIT(later);
  pthread_rwlock_rdlock(&rt->lock);
  const char *k;
  void *v;
  for (size_t it = 0; vr_map_next(&rt->models, &it, &k, &v);) {
    vr_rt_model *m = v;
    for (size_t i = 0; i < m->instances.len; i++)
      vr__inst_reap(VR_VEC_AT(&m->instances, vr_rt_instance *, i), &later);
  }
  pthread_rwlock_unlock(&rt->lock);
  /* done() may submit again (a reroute, a pipeline's next stage) */
  vr__rt_answer_later(rt, &later);
}

static void *reaper(void *arg) {
  vr_runtime *rt = arg;
  pthread_mutex_lock(&rt->reap_mu);
  while (!rt->reap_stop) {
    /* the monotonic clock: the runtime's (only such a runtime has a
     * reaper) and the condition variable's */
    int64_t t = vr_now_ns() + VR__RT_REAP_NS;
    struct timespec ts = {(time_t)(t / VR_NS_PER_S), (long)(t % VR_NS_PER_S)};
    pthread_cond_timedwait(&rt->reap_cv, &rt->reap_mu, &ts);
    if (rt->reap_stop) break;
    pthread_mutex_unlock(&rt->reap_mu);
    pthread_mutex_lock(&rt->reap_pass_mu);
    reap_once(rt);
    pthread_mutex_unlock(&rt->reap_pass_mu);
    pthread_mutex_lock(&rt->reap_mu);
  }
  pthread_mutex_unlock(&rt->reap_mu);
  return NULL;
}

int vr__rt_reaper_start(vr_runtime *rt, vr_errbuf *err) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&rt->reap_cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&rt->reap_mu, NULL);
  pthread_mutex_init(&rt->reap_pass_mu, NULL);
  /* a virtual clock's test moves time itself, between the batches it
   * holds: a reaper on the real clock would race it */
  if (rt->opts.clock != vr_clock_monotonic()) return 0;
  int e = pthread_create(&rt->reap_th, NULL, reaper, rt);
  if (e) return vr_errf(err, VR_EIO, "runtime: cannot start the reaper thread (errno %d)", e);
  rt->reap_on = 1;
  return 0;
}

void vr__rt_reaper_stop(vr_runtime *rt) {
  if (!rt->reap_on) return;
  pthread_mutex_lock(&rt->reap_mu);
  rt->reap_stop = 1;
  pthread_cond_signal(&rt->reap_cv);
  pthread_mutex_unlock(&rt->reap_mu);
  pthread_join(rt->reap_th, NULL);
  rt->reap_on = 0;
}

void vr__rt_reaper_fence(vr_runtime *rt) {
  pthread_mutex_lock(&rt->reap_pass_mu);
  pthread_mutex_unlock(&rt->reap_pass_mu);
}

void vr__rt_reaper_fini(vr_runtime *rt) {
  vr__rt_reaper_stop(rt);
  pthread_cond_destroy(&rt->reap_cv);
  pthread_mutex_destroy(&rt->reap_mu);
  pthread_mutex_destroy(&rt->reap_pass_mu);
}
