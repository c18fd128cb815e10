#include "base/clock.h"

#include <time.h>

int64_t vr_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * VR_NS_PER_S + ts.tv_nsec;
}

static int64_t mono_now(vr_clock *self) {
  (void)self;
  return vr_now_ns();
}

static vr_clock g_mono = {mono_now, 0};

vr_clock *vr_clock_monotonic(void) { return &g_mono; }

/* Atomic: a test may move a virtual clock while runtime threads read it. */
static int64_t virtual_now(vr_clock *self) {
  return __atomic_load_n(&self->virtual_ns, __ATOMIC_ACQUIRE);
}

void vr_vclock_init(vr_clock *c, int64_t start_ns) {
  c->now_ns = virtual_now;
  c->virtual_ns = start_ns;
}

void vr_vclock_set(vr_clock *c, int64_t t_ns) {
  if (t_ns > c->virtual_ns) __atomic_store_n(&c->virtual_ns, t_ns, __ATOMIC_RELEASE);
}

void vr_vclock_advance(vr_clock *c, int64_t dt_ns) {
  if (dt_ns > 0) __atomic_fetch_add(&c->virtual_ns, dt_ns, __ATOMIC_ACQ_REL);
}
