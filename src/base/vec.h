/*
 * Growable vector of fixed-size elements.
 *
 * The vector owns its buffer (vr_vec_free releases it); elements are copied
 * in by value. Pointers into the buffer are invalidated by any call that
 * grows it. Typed access: VR_VEC_AT(&v, T, i).
 */
#ifndef VR_BASE_VEC_H
#define VR_BASE_VEC_H

#include <stddef.h>

typedef struct vr_vec {
  void *data;
  size_t len;
  size_t cap;
  size_t elem; /* element size in bytes */
} vr_vec;

void vr_vec_init(vr_vec *v, size_t elem);
void vr_vec_free(vr_vec *v);
/* Ensures room for n elements in total. 0 or VR_ENOMEM. */
int vr_vec_reserve(vr_vec *v, size_t n);
/* Appends one element copied from x. 0 or VR_ENOMEM. */
int vr_vec_push(vr_vec *v, const void *x);
/* Appends n zeroed elements and returns a pointer to the first, or NULL. */
void *vr_vec_grow(vr_vec *v, size_t n);
/* Copies the last element to out (if non-NULL) and removes it; -1 if empty. */
int vr_vec_pop(vr_vec *v, void *out);
/* Removes element i, preserving order. */
void vr_vec_remove(vr_vec *v, size_t i);
/* Removes element i by moving the last one into its place (O(1)). */
void vr_vec_swap_remove(vr_vec *v, size_t i);
void vr_vec_clear(vr_vec *v);

static inline void *vr_vec_at(const vr_vec *v, size_t i) {
  return (char *)v->data + i * v->elem;
}
#define VR_VEC_AT(v, T, i) (((T *)(v)->data)[i])

#endif
