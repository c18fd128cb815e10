/*
 * Hash map from string keys to void* values (open addressing, linear
 * probing, tombstone-free backward-shift deletion).
 *
 * The map copies keys and owns the copies; it never owns values — callers
 * free values themselves (e.g. while iterating before vr_map_free).
 */
#ifndef VR_BASE_MAP_H
#define VR_BASE_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct vr_map_slot {
  char *key; /* NULL = empty */
  uint64_t hash;
  void *value;
} vr_map_slot;

typedef struct vr_map {
  vr_map_slot *slots;
  size_t cap; /* power of two, or 0 */
  size_t len;
} vr_map;

void vr_map_init(vr_map *m);
void vr_map_free(vr_map *m);
/* Inserts or replaces. If old is non-NULL it receives the replaced value
 * (or NULL). 0 or VR_ENOMEM. */
int vr_map_put(vr_map *m, const char *key, void *value, void **old);
/* Returns the value, or NULL when absent (use vr_map_has to tell a stored
 * NULL apart). */
void *vr_map_get(const vr_map *m, const char *key);
int vr_map_has(const vr_map *m, const char *key);
/* Removes key; returns its value (or NULL). */
void *vr_map_del(vr_map *m, const char *key);

/* Iteration: for (size_t it = 0; vr_map_next(m, &it, &k, &v);) {...}
 * Must not insert or delete while iterating. */
int vr_map_next(const vr_map *m, size_t *it, const char **key, void **value);

uint64_t vr_hash_bytes(const void *data, size_t len);

#endif
