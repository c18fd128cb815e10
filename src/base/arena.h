/*
 * Bump-pointer arena. Allocations are released all at once by
 * vr_arena_reset (keeps the first block for reuse) or vr_arena_free.
 * Used for per-request and per-parse scratch where many small objects share
 * one lifetime. The arena owns all its blocks.
 */
#ifndef VR_BASE_ARENA_H
#define VR_BASE_ARENA_H

#include <stddef.h>

typedef struct vr_arena_block vr_arena_block;

typedef struct vr_arena {
  vr_arena_block *head;
  size_t block_size; /* default size of new blocks */
  size_t used;       /* bytes handed out since the last reset */
} vr_arena;

void vr_arena_init(vr_arena *a, size_t block_size);
/* 16-byte aligned, or NULL on allocation failure. */
void *vr_arena_alloc(vr_arena *a, size_t size);
void *vr_arena_calloc(vr_arena *a, size_t n, size_t size);
char *vr_arena_strdup(vr_arena *a, const char *s);
void vr_arena_reset(vr_arena *a);
void vr_arena_free(vr_arena *a);

#endif
