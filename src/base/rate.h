/*
 * Sliding-window event counter: events per second over the last
 * `window` = nslots * slot_ns, in slot-sized steps. Used for served QPS,
 * arrival rate and drop rate per variant and instance.
 *
 * Time is passed in, so it runs on a virtual clock too. Not thread-safe.
 * The struct owns nothing outside itself.
 */
#ifndef VR_BASE_RATE_H
#define VR_BASE_RATE_H

#include <stdint.h>

#define VR_RATE_MAX_SLOTS 64

typedef struct vr_rate {
  int64_t slot_ns;
  int nslots;
  int64_t head_slot; /* absolute slot number of the newest slot */
  double counts[VR_RATE_MAX_SLOTS];
  double total;
} vr_rate;

/* nslots in [1, VR_RATE_MAX_SLOTS]; e.g. 10 slots of 100 ms = 1 s window. */
void vr_rate_init(vr_rate *r, int nslots, int64_t slot_ns);
void vr_rate_add(vr_rate *r, double n, int64_t now_ns);
/* Events in the window that ends at now_ns. */
double vr_rate_count(vr_rate *r, int64_t now_ns);
/* Events per second over the window. */
double vr_rate_per_sec(vr_rate *r, int64_t now_ns);

#endif
