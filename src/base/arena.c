#include "base/arena.h"

#include <string.h>

#include "base/alloc.h"

struct vr_arena_block {
  vr_arena_block *next;
  size_t size, off;
  _Alignas(16) unsigned char data[];
};

void vr_arena_init(vr_arena *a, size_t block_size) {
  a->head = NULL;
  a->block_size = block_size ? block_size : 64 * 1024;
  a->used = 0;
}

void *vr_arena_alloc(vr_arena *a, size_t size) {
  size_t need = (size + 15) & ~(size_t)15;
  if (need < size) return NULL;
  vr_arena_block *b = a->head;
  if (!b || b->size - b->off < need) {
    size_t bs = need > a->block_size ? need : a->block_size;
    b = vr_malloc(sizeof *b + bs);
    if (!b) return NULL;
    b->size = bs;
    b->off = 0;
    b->next = a->head;
    a->head = b;
  }
  void *p = b->data + b->off;
  b->off += need;
  a->used += need;
  return p;
}

void *vr_arena_calloc(vr_arena *a, size_t n, size_t size) {
  if (size && n > ((size_t)-1) / size) return NULL;
  void *p = vr_arena_alloc(a, n * size);
  if (p) memset(p, 0, n * size);
  return p;
}

char *vr_arena_strdup(vr_arena *a, const char *s) {
  size_t n = strlen(s) + 1;
  char *d = vr_arena_alloc(a, n);
  if (d) memcpy(d, s, n);
  return d;
}

void vr_arena_reset(vr_arena *a) {
  /* Keep the oldest block (the last in the list) to avoid churn. */
  vr_arena_block *b = a->head, *keep = NULL;
  while (b) {
    vr_arena_block *next = b->next;
    if (!next) keep = b;
    else vr_free(b);
    b = next;
  }
  if (keep) {
    keep->off = 0;
    keep->next = NULL;
  }
  a->head = keep;
  a->used = 0;
}

void vr_arena_free(vr_arena *a) {
  vr_arena_block *b = a->head;
  while (b) {
    vr_arena_block *next = b->next;
    vr_free(b);
    b = next;
  }
  a->head = NULL;
  a->used = 0;
}
