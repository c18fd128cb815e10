/*
 * Growable byte buffer for building HTTP bodies. Allocation failure is
 * sticky (oom = 1, later appends are no-ops) so callers check once at the
 * end. The buffer owns p (vr_free); vr_sbuf_take hands it over.
 */
#ifndef VR_SERVER_SBUF_H
#define VR_SERVER_SBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct vr_sbuf {
  char *p;
  size_t len, cap;
  int oom;
} vr_sbuf;

void vr_sbuf_init(vr_sbuf *b);
void vr_sbuf_free(vr_sbuf *b);
int vr_sbuf_reserve(vr_sbuf *b, size_t extra);
void vr_sbuf_add(vr_sbuf *b, const void *data, size_t n);
void vr_sbuf_puts(vr_sbuf *b, const char *s);
void vr_sbuf_printf(vr_sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (quotes and escapes included). */
void vr_sbuf_json_str(vr_sbuf *b, const char *s);
/* Returns the NUL-terminated contents (caller frees) and resets b. */
char *vr_sbuf_take(vr_sbuf *b, size_t *len);

#endif
