#include "base/rate.h"

#include <string.h>

void vr_rate_init(vr_rate *r, int nslots, int64_t slot_ns) {
  memset(r, 0, sizeof *r);
  if (nslots < 1) nslots = 1;
  if (nslots > VR_RATE_MAX_SLOTS) nslots = VR_RATE_MAX_SLOTS;
  r->nslots = nslots;
  r->slot_ns = slot_ns > 0 ? slot_ns : 1;
  r->head_slot = 0;
}

/* Expires slots that fell out of the window ending at now. */
static void advance(vr_rate *r, int64_t now_ns) {
  int64_t slot = now_ns / r->slot_ns;
  if (slot <= r->head_slot) return;
  int64_t gap = slot - r->head_slot;
  if (gap >= r->nslots) {
    memset(r->counts, 0, sizeof r->counts);
    r->total = 0;
  } else {
    for (int64_t s = r->head_slot + 1; s <= slot; s++) {
      int i = (int)(s % r->nslots);
      r->total -= r->counts[i];
      r->counts[i] = 0;
    }
  }
  if (r->total < 1e-9) r->total = 0; /* float drift */
  r->head_slot = slot;
}

void vr_rate_add(vr_rate *r, double n, int64_t now_ns) {
  advance(r, now_ns);
  int64_t slot = now_ns / r->slot_ns;
  if (slot <= r->head_slot - r->nslots) return; /* too old to count */
  r->counts[slot % r->nslots] += n;
  r->total += n;
}

double vr_rate_count(vr_rate *r, int64_t now_ns) {
  advance(r, now_ns);
  return r->total;
}

double vr_rate_per_sec(vr_rate *r, int64_t now_ns) {
  double window_s = (double)r->slot_ns * r->nslots / 1e9;
  return vr_rate_count(r, now_ns) / window_s;
}
