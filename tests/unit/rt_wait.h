/* Blocking completion of runtime requests in tests: point a request's
 * `done` at rt_wait_cb and its `user` at an rt_waiter (RT_WAITER_INIT),
 * submit it, then rt_wait() returns once the runtime has answered. */
#ifndef VR_TEST_RT_WAIT_H
#define VR_TEST_RT_WAIT_H

#include <pthread.h>

#include "runtime/runtime.h"

typedef struct rt_waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
} rt_waiter;

#define RT_WAITER_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0}

static inline void rt_wait_cb(vr_rt_request *q, void *user) {
  (void)q;
  rt_waiter *w = user;
  pthread_mutex_lock(&w->mu);
  w->done = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static inline void rt_wait(rt_waiter *w) {
  pthread_mutex_lock(&w->mu);
  while (!w->done) pthread_cond_wait(&w->cv, &w->mu);
  pthread_mutex_unlock(&w->mu);
}

#endif
