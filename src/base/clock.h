/*
 * Clocks. Everything that needs "now" takes a vr_clock so that the same
 * code runs on the wall (monotonic) clock in the server and on a virtual
 * clock in the simulator and in tests. Policies never read a clock: they
 * get `now` in their snapshot.
 */
#ifndef VR_BASE_CLOCK_H
#define VR_BASE_CLOCK_H

#include <stdint.h>

#define VR_NS_PER_US 1000LL
#define VR_NS_PER_MS 1000000LL
#define VR_NS_PER_S 1000000000LL

typedef struct vr_clock vr_clock;
struct vr_clock {
  int64_t (*now_ns)(vr_clock *self);
  int64_t virtual_ns; /* used by the virtual clock only */
};

/* The process-wide monotonic clock (static storage; never freed). */
vr_clock *vr_clock_monotonic(void);
/* Initialise a caller-owned virtual clock at t = start_ns. */
void vr_vclock_init(vr_clock *c, int64_t start_ns);
/* Moves a virtual clock to t (never backwards; earlier t is ignored). */
void vr_vclock_set(vr_clock *c, int64_t t_ns);
void vr_vclock_advance(vr_clock *c, int64_t dt_ns);

static inline int64_t vr_clock_now(vr_clock *c) { return c->now_ns(c); }
/* Monotonic nanoseconds, without going through a vr_clock. */
int64_t vr_now_ns(void);

#endif
