#include "base/vec.h"

#include <string.h>

#include "base/alloc.h"
#include "vario/status.h"

void vr_vec_init(vr_vec *v, size_t elem) {
  v->data = NULL;
  v->len = v->cap = 0;
  v->elem = elem;
}

void vr_vec_free(vr_vec *v) {
  vr_free(v->data);
  v->data = NULL;
  v->len = v->cap = 0;
}

int vr_vec_reserve(vr_vec *v, size_t n) {
  if (n <= v->cap) return 0;
  size_t cap = v->cap ? v->cap : 8;
  while (cap < n) {
    if (cap > ((size_t)-1) / 2 / v->elem) return VR_ENOMEM;
    cap *= 2;
  }
  void *d = vr_realloc(v->data, cap * v->elem);
  if (!d) return VR_ENOMEM;
  v->data = d;
  v->cap = cap;
  return 0;
}

int vr_vec_push(vr_vec *v, const void *x) {
  if (v->len == v->cap && vr_vec_reserve(v, v->len + 1)) return VR_ENOMEM;
  memcpy((char *)v->data + v->len * v->elem, x, v->elem);
  v->len++;
  return 0;
}

void *vr_vec_grow(vr_vec *v, size_t n) {
  if (n > ((size_t)-1) - v->len) return NULL;
  if (vr_vec_reserve(v, v->len + n)) return NULL;
  void *p = (char *)v->data + v->len * v->elem;
  memset(p, 0, n * v->elem);
  v->len += n;
  return p;
}

int vr_vec_pop(vr_vec *v, void *out) {
  if (v->len == 0) return -1;
  v->len--;
  if (out) memcpy(out, (char *)v->data + v->len * v->elem, v->elem);
  return 0;
}

void vr_vec_remove(vr_vec *v, size_t i) {
  if (i >= v->len) return;
  char *p = (char *)v->data + i * v->elem;
  memmove(p, p + v->elem, (v->len - i - 1) * v->elem);
  v->len--;
}

void vr_vec_swap_remove(vr_vec *v, size_t i) {
  if (i >= v->len) return;
  if (i != v->len - 1)
    memcpy((char *)v->data + i * v->elem,
           (char *)v->data + (v->len - 1) * v->elem, v->elem);
  v->len--;
}

void vr_vec_clear(vr_vec *v) { v->len = 0; }
