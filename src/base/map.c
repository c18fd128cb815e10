#include "base/map.h"

#include <string.h>

#include "base/alloc.h"
#include "vario/status.h"

/* FNV-1a with a final avalanche (from splitmix64): cheap, and the mixer
 * makes the low bits used for the slot index depend on every input byte. */
uint64_t vr_hash_bytes(const void *data, size_t len) {
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 1099511628211ULL;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

void vr_map_init(vr_map *m) { memset(m, 0, sizeof *m); }

void vr_map_free(vr_map *m) {
  for (size_t i = 0; i < m->cap; i++) vr_free(m->slots[i].key);
  vr_free(m->slots);
  memset(m, 0, sizeof *m);
}

static size_t find(const vr_map *m, const char *key, uint64_t h) {
  size_t mask = m->cap - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    vr_map_slot *s = &m->slots[i];
    if (!s->key || (s->hash == h && strcmp(s->key, key) == 0)) return i;
  }
}

static int resize(vr_map *m, size_t cap) {
  vr_map_slot *old = m->slots;
  size_t oldcap = m->cap;
  vr_map_slot *slots = vr_calloc(cap, sizeof *slots);
  if (!slots) return VR_ENOMEM;
  m->slots = slots;
  m->cap = cap;
  for (size_t i = 0; i < oldcap; i++) {
    if (!old[i].key) continue;
    size_t j = find(m, old[i].key, old[i].hash);
    m->slots[j] = old[i];
  }
  vr_free(old);
  return 0;
}

int vr_map_put(vr_map *m, const char *key, void *value, void **old) {
  /* Keep load <= 0.75 so probe sequences stay short. */
  if ((m->len + 1) * 4 > m->cap * 3 && resize(m, m->cap ? m->cap * 2 : 16))
    return VR_ENOMEM;
  uint64_t h = vr_hash_bytes(key, strlen(key));
  size_t i = find(m, key, h);
  vr_map_slot *s = &m->slots[i];
  if (s->key) {
    if (old) *old = s->value;
    s->value = value;
    return 0;
  }
  char *k = vr_strdup(key);
  if (!k) return VR_ENOMEM;
  s->key = k;
  s->hash = h;
  s->value = value;
  m->len++;
  if (old) *old = NULL;
  return 0;
}

void *vr_map_get(const vr_map *m, const char *key) {
  if (!m->cap) return NULL;
  size_t i = find(m, key, vr_hash_bytes(key, strlen(key)));
  return m->slots[i].key ? m->slots[i].value : NULL;
}

int vr_map_has(const vr_map *m, const char *key) {
  if (!m->cap) return 0;
  return m->slots[find(m, key, vr_hash_bytes(key, strlen(key)))].key != NULL;
}

void *vr_map_del(vr_map *m, const char *key) {
  if (!m->cap) return NULL;
  size_t mask = m->cap - 1;
  size_t i = find(m, key, vr_hash_bytes(key, strlen(key)));
  if (!m->slots[i].key) return NULL;
  void *value = m->slots[i].value;
  vr_free(m->slots[i].key);
  m->slots[i].key = NULL;
  m->len--;
  /* Backward-shift: pull later entries of the probe run into the hole so
   * lookups never stop early at it. */
  for (size_t j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
    size_t home = m->slots[j].hash & mask;
    /* Move j into hole i if its home is not in the cyclic range (i, j]. */
    int in_range = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
    if (!in_range) {
      m->slots[i] = m->slots[j];
      m->slots[j].key = NULL;
      i = j;
    }
  }
  return value;
}

int vr_map_next(const vr_map *m, size_t *it, const char **key, void **value) {
  while (*it < m->cap) {
    vr_map_slot *s = &m->slots[(*it)++];
    if (s->key) {
      if (key) *key = s->key;
      if (value) *value = s->value;
      return 1;
    }
  }
  return 0;
}
