#include "base/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* A 16-byte header in front of each block keeps its size so that frees can
 * be accounted without a side table; 16 keeps malloc's alignment. */
#define HDR 16

static _Atomic int64_t g_used, g_peak, g_blocks;

static void account(int64_t bytes, int64_t blocks) {
  int64_t now = atomic_fetch_add(&g_used, bytes) + bytes;
  int64_t peak = atomic_load(&g_peak);
  while (now > peak && !atomic_compare_exchange_weak(&g_peak, &peak, now)) {
  }
  atomic_fetch_add(&g_blocks, blocks);
}

void *vr_malloc(size_t size) {
  if (size > SIZE_MAX - HDR) return NULL;
  unsigned char *p = malloc(size + HDR);
  if (!p) return NULL;
  memcpy(p, &size, sizeof size);
  account((int64_t)size, 1);
  return p + HDR;
}

void *vr_calloc(size_t n, size_t size) {
  if (size && n > (SIZE_MAX - HDR) / size) return NULL;
  size_t total = n * size;
  unsigned char *p = calloc(1, total + HDR);
  if (!p) return NULL;
  memcpy(p, &total, sizeof total);
  account((int64_t)total, 1);
  return p + HDR;
}

void *vr_realloc(void *ptr, size_t size) {
  if (!ptr) return vr_malloc(size);
  if (size > SIZE_MAX - HDR) return NULL;
  unsigned char *base = (unsigned char *)ptr - HDR;
  size_t old;
  memcpy(&old, base, sizeof old);
  unsigned char *p = realloc(base, size + HDR);
  if (!p) return NULL;
  memcpy(p, &size, sizeof size);
  account((int64_t)size - (int64_t)old, 0);
  return p + HDR;
}

void vr_free(void *ptr) {
  if (!ptr) return;
  unsigned char *base = (unsigned char *)ptr - HDR;
  size_t size;
  memcpy(&size, base, sizeof size);
  account(-(int64_t)size, -1);
  free(base);
}

char *vr_strdup(const char *s) { return vr_strndup(s, strlen(s)); }

char *vr_strndup(const char *s, size_t n) {
  size_t len = strnlen(s, n);
  char *d = vr_malloc(len + 1);
  if (!d) return NULL;
  memcpy(d, s, len);
  d[len] = '\0';
  return d;
}

/* Aligned blocks keep {size, raw pointer} just below the returned address. */
void *vr_aligned_alloc(size_t align, size_t size) {
  if (align < sizeof(void *) || (align & (align - 1))) return NULL;
  if (size > SIZE_MAX - align - HDR) return NULL;
  unsigned char *raw = malloc(size + align + HDR);
  if (!raw) return NULL;
  uintptr_t a = ((uintptr_t)raw + HDR + align - 1) & ~(uintptr_t)(align - 1);
  unsigned char *p = (unsigned char *)a;
  memcpy(p - HDR, &size, sizeof size);
  memcpy(p - HDR + 8, &raw, sizeof raw);
  account((int64_t)size, 1);
  return p;
}

void vr_aligned_free(void *ptr) {
  if (!ptr) return;
  unsigned char *p = ptr;
  size_t size;
  void *raw;
  memcpy(&size, p - HDR, sizeof size);
  memcpy(&raw, p - HDR + 8, sizeof raw);
  account(-(int64_t)size, -1);
  free(raw);
}

int64_t vr_mem_used(void) { return atomic_load(&g_used); }
int64_t vr_mem_peak(void) { return atomic_load(&g_peak); }
void vr_mem_reset_peak(void) { atomic_store(&g_peak, atomic_load(&g_used)); }
int64_t vr_mem_blocks(void) { return atomic_load(&g_blocks); }
