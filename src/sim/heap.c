#include "sim/heap.h"

#include "base/alloc.h"
#include "vario/status.h"

void vr_heap_init(vr_heap *h) {
  h->ev = NULL;
  h->len = h->cap = 0;
  h->seq = 0;
}

void vr_heap_free(vr_heap *h) {
  vr_free(h->ev);
  vr_heap_init(h);
}

static inline int before(const vr_event *a, const vr_event *b) {
  if (a->t_ns != b->t_ns) return a->t_ns < b->t_ns;
  return a->rank != b->rank ? a->rank < b->rank : a->seq < b->seq;
}

int vr_heap_push(vr_heap *h, vr_event e) {
  if (h->len == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 64;
    vr_event *ev = vr_realloc(h->ev, cap * sizeof *ev);
    if (!ev) return VR_ENOMEM;
    h->ev = ev;
    h->cap = cap;
  }
  e.seq = h->seq++;
  size_t i = h->len++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!before(&e, &h->ev[parent])) break;
    h->ev[i] = h->ev[parent];
    i = parent;
  }
  h->ev[i] = e;
  return 0;
}

int vr_heap_pop(vr_heap *h, vr_event *out) {
  if (!h->len) return 0;
  *out = h->ev[0];
  vr_event last = h->ev[--h->len];
  size_t i = 0, n = h->len;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && before(&h->ev[c + 1], &h->ev[c])) c++;
    if (!before(&h->ev[c], &last)) break;
    h->ev[i] = h->ev[c];
    i = c;
  }
  if (n) h->ev[i] = last;
  return 1;
}
