/*
 * Binary min-heap of simulator events ordered by (time, rank, seq): equal
 * times pop by rank, then in insertion order, so a run is deterministic.
 * Owns its array.
 */
#ifndef VR_SIM_HEAP_H
#define VR_SIM_HEAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct vr_event {
  int64_t t_ns;
  uint64_t seq;
  int kind;
  int32_t a;   /* event-specific: stream index, ... */
  void *p;     /* event-specific: instance, worker */
  int64_t gen; /* generation tag to ignore stale events */
  uint32_t rank; /* among equal times, lower first (0 for most events;
                    psim's stage streams: the task's depth, so a parent's
                    completions precede its children's at the same time) */
} vr_event;

typedef struct vr_heap {
  vr_event *ev;
  size_t len, cap;
  uint64_t seq;
} vr_heap;

void vr_heap_init(vr_heap *h);
void vr_heap_free(vr_heap *h);
/* 0 or VR_ENOMEM. */
int vr_heap_push(vr_heap *h, vr_event e);
/* Removes the earliest event into *out; 0 if empty. */
int vr_heap_pop(vr_heap *h, vr_event *out);
static inline const vr_event *vr_heap_top(const vr_heap *h) {
  return h->len ? &h->ev[0] : NULL;
}

#endif
