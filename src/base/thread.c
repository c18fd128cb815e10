#include "base/thread.h"

#include <pthread.h>

int vr_thread_detached(void *(*fn)(void *), void *arg) {
  pthread_t t;
  pthread_attr_t a;
  int rc = pthread_attr_init(&a);
  if (rc) return rc;
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  rc = pthread_create(&t, &a, fn, arg);
  pthread_attr_destroy(&a);
  return rc;
}
