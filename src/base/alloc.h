/*
 * Allocation wrappers with accounting.
 *
 * All project allocations go through these so that resident memory per
 * component can be reported (profiles record it) and leaks show up in
 * tests as a non-zero vr_mem_used(). They return NULL on failure; callers
 * turn that into VR_ENOMEM — nothing here aborts.
 *
 * Memory from vr_malloc/vr_calloc/vr_realloc/vr_strdup is released with
 * vr_free; memory from vr_aligned_alloc with vr_aligned_free.
 */
#ifndef VR_BASE_ALLOC_H
#define VR_BASE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *vr_malloc(size_t size);
void *vr_calloc(size_t n, size_t size);
void *vr_realloc(void *p, size_t size);
void vr_free(void *p);
char *vr_strdup(const char *s);
char *vr_strndup(const char *s, size_t n);
/* align must be a power of two >= sizeof(void*). */
void *vr_aligned_alloc(size_t align, size_t size);
void vr_aligned_free(void *p);

/* Bytes currently allocated through these wrappers, process-wide. */
int64_t vr_mem_used(void);
/* High-water mark since start (or the last vr_mem_reset_peak). */
int64_t vr_mem_peak(void);
void vr_mem_reset_peak(void);
/* Number of live allocations (for leak checks in tests). */
int64_t vr_mem_blocks(void);

/* Typed helpers: overflow-checked array allocation. */
#define VR_NEW(T) ((T *)vr_calloc(1, sizeof(T)))
#define VR_NEWN(T, n) ((T *)vr_calloc((n), sizeof(T)))

#endif
