/* The live side of the seam tests (test_seam.c, test_pipe_seam.c;
 * header-only, test code only): a gated backend on a virtual clock. Each
 * backend session holds a seam_gate; seam_gate_batch() blocks a batch
 * until the test has moved the clock to the batch's end (start + its
 * modelled time), and seam_gate_step() moves time only to the next event —
 * the earliest end of a blocked batch, or the next arrival — so the
 * executors decide at exactly the simulator's times whatever the
 * machine's load. Until seam_gate_arm(), batches (the runtime's profiling
 * at load) run at once and advance the clock by their time. */
#ifndef VR_TEST_SEAM_GATE_H
#define VR_TEST_SEAM_GATE_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "base/clock.h"
#include "control/control.h"
#include "vr_test.h"

typedef struct seam_gate {
  int blocked, release;
  int64_t end_ns; /* when the blocked batch ends */
} seam_gate;

#define SEAM_GATES_MAX 16
static vr_clock g_clock;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_armed; /* 0: runs (profiling at load) advance the clock */
static seam_gate *g_gates[SEAM_GATES_MAX];
static int g_ngates;

/* A session's gate (g_mu held: sessions open on the runtime's threads). */
static inline void seam_gate_add(seam_gate *g) {
  assert_true(g_ngates < SEAM_GATES_MAX);
  g_gates[g_ngates++] = g;
}

static inline void seam_gate_arm(void) {
  pthread_mutex_lock(&g_mu);
  g_armed = 1;
  pthread_mutex_unlock(&g_mu);
}

/* A batch taking run_ns (the backend's run, on an executor thread). */
static inline void seam_gate_batch(seam_gate *g, int64_t run_ns) {
  pthread_mutex_lock(&g_mu);
  if (!g_armed) {
    vr_vclock_advance(&g_clock, run_ns);
  } else {
    g->blocked = 1;
    g->end_ns = vr_clock_now(&g_clock) + run_ns;
    pthread_cond_broadcast(&g_cv);
    while (!g->release) pthread_cond_wait(&g_cv, &g_mu);
    g->release = 0;
    g->blocked = 0;
  }
  pthread_mutex_unlock(&g_mu);
}

/* Moves the clock to the next event (call with every instance quiescent):
 * the earliest end of a blocked batch, whose executor it then releases and
 * waits for (1), or the next arrival at `arrival` (INT64_MAX: none left),
 * which the caller then submits (0); -1 when neither is left. */
static inline int seam_gate_step(int64_t arrival) {
  pthread_mutex_lock(&g_mu);
  seam_gate *first = NULL;
  for (int i = 0; i < g_ngates; i++)
    if (g_gates[i]->blocked && !g_gates[i]->release &&
        (!first || g_gates[i]->end_ns < first->end_ns))
      first = g_gates[i];
  if (!first && arrival == INT64_MAX) {
    pthread_mutex_unlock(&g_mu);
    return -1;
  }
  if (first && first->end_ns < arrival) {
    vr_vclock_set(&g_clock, first->end_ns);
    first->release = 1;
    pthread_cond_broadcast(&g_cv);
    /* wait until its executor took the release (it is then no longer
     * blocked in this batch) */
    while (first->release) {
      pthread_mutex_unlock(&g_mu);
      usleep(20);
      pthread_mutex_lock(&g_mu);
    }
    pthread_mutex_unlock(&g_mu);
    return 1;
  }
  pthread_mutex_unlock(&g_mu);
  vr_vclock_set(&g_clock, arrival);
  return 0;
}

/* Waits until quiescent(ctx) holds (called with g_mu held): nothing can
 * happen before the clock moves. */
static inline void seam_gate_settle(int (*quiescent)(void *ctx), void *ctx) {
  int64_t until = vr_now_ns() + 30 * VR_NS_PER_S; /* a bound, not a timing */
  pthread_mutex_lock(&g_mu);
  while (!quiescent(ctx)) {
    pthread_mutex_unlock(&g_mu);
    usleep(50);
    pthread_mutex_lock(&g_mu);
    if (vr_now_ns() > until) fail_msg("live side did not settle");
  }
  pthread_mutex_unlock(&g_mu);
}

/* Registers model `name` of `app` (its folder `dir` already written) with
 * one FP32 variant `vname`, single-threaded at max_batch, profiled as
 * `prof`. */
static inline void seam_store_add(vr_store *st, const char *name, const char *app,
                                  const char *dir, double acc, int max_batch,
                                  const vr_profile *prof, const char *vname) {
  vr_model_rec rec = {0};
  snprintf(rec.name, sizeof rec.name, "%s", name);
  snprintf(rec.app, sizeof rec.app, "%s", app);
  snprintf(rec.dir, sizeof rec.dir, "%s", dir);
  rec.accuracy = acc;
  json_t *j = vr_profile_to_json(prof);
  char *text = json_dumps(j, JSON_COMPACT);
  json_decref(j);
  vr_variant_rec v;
  memset(&v, 0, sizeof v);
  assert_true(snprintf(v.name, sizeof v.name, "%s", vname) < (int)sizeof v.name);
  snprintf(v.model, sizeof v.model, "%s", name);
  snprintf(v.app, sizeof v.app, "%s", app);
  v.precision = VR_PREC_FP32;
  v.threads = 1;
  v.max_batch = max_batch;
  v.accuracy = acc;
  v.lat_b1_ms = prof->lat.p50_ms[0];
  v.memory_bytes = 1 << 20;
  v.profile_json = text;
  vr_errbuf e = {0};
  if (vr_store_add_model(st, &rec, &v, 1, &e)) fail_msg("store: %s", e.msg);
  free(text);
}

#endif
