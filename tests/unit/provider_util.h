/* Helpers shared by the local provider's tests (tests/unit/test_provider.c
 * with a stand-in worker, tests/integration/test_provider_worker.c with
 * the real `vario worker`; header-only, test code only): a millisecond
 * clock, one worker's record from list(), and polling it for a state. */
#ifndef VR_TEST_PROVIDER_UTIL_H
#define VR_TEST_PROVIDER_UTIL_H

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "cluster/provider.h"
#include "vr_test.h"

static inline int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* id's record as list() shows it now; state -1 when it is not listed. */
static inline vr_worker_info provider_get(vr_provider *p, const char *id) {
  vr_worker_info *ws = NULL, r;
  size_t n = 0;
  memset(&r, 0, sizeof r);
  r.state = -1;
  assert_int_equal(vr_provider_list(p, &ws, &n, NULL), 0);
  for (size_t i = 0; i < n; i++)
    if (!strcmp(ws[i].id, id)) r = ws[i];
  vr_free(ws);
  return r;
}

/* Polls list() every step_ms until id reaches `state` (ms at most: a bound
 * for a loaded machine, not a timing); fails the test if it did not. */
static inline vr_worker_info provider_wait_state(vr_provider *p, const char *id, int state,
                                                 int ms, int step_ms) {
  vr_worker_info w;
  for (int64_t t0 = now_ms();; sleep_ms(step_ms)) {
    w = provider_get(p, id);
    if (w.state == state || now_ms() - t0 > ms) break;
  }
  assert_int_equal(w.state, state);
  return w;
}

#endif
