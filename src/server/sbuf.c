#include "server/sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "server/kjson.h"

void vr_sbuf_init(vr_sbuf *b) { memset(b, 0, sizeof *b); }

void vr_sbuf_free(vr_sbuf *b) {
  vr_free(b->p);
  memset(b, 0, sizeof *b);
}

int vr_sbuf_reserve(vr_sbuf *b, size_t extra) {
  if (b->oom) return -1;
  if (b->len + extra + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1) {
    if (cap > SIZE_MAX / 2) {
      b->oom = 1;
      return -1;
    }
    cap *= 2;
  }
  char *p = vr_realloc(b->p, cap);
  if (!p) {
    b->oom = 1;
    return -1;
  }
  b->p = p;
  b->cap = cap;
  return 0;
}

void vr_sbuf_add(vr_sbuf *b, const void *data, size_t n) {
  if (vr_sbuf_reserve(b, n)) return;
  memcpy(b->p + b->len, data, n);
  b->len += n;
  b->p[b->len] = 0;
}

void vr_sbuf_puts(vr_sbuf *b, const char *s) { vr_sbuf_add(b, s, strlen(s)); }

void vr_sbuf_printf(vr_sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char tmp[256];
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    vr_sbuf_add(b, tmp, (size_t)n);
    return;
  }
  if (vr_sbuf_reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void vr_sbuf_json_str(vr_sbuf *b, const char *s) {
  static const char hex[] = "0123456789abcdef";
  vr_sbuf_add(b, "\"", 1);
  const char *end = s + strlen(s);
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    size_t n = *p < 0x80 ? 1 : vr_kj_utf8_len((const char *)p, end);
    if (*p == '"' || *p == '\\') {
      char e[2] = {'\\', (char)*p};
      vr_sbuf_add(b, e, 2);
    } else if (*p < 0x20) {
      char e[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15]};
      vr_sbuf_add(b, e, 6);
    } else if (n) {
      vr_sbuf_add(b, p, n);
    } else { /* not UTF-8 (a URL's %FF, a cut name): JSON must be */
      vr_sbuf_add(b, "\\ufffd", 6);
      n = 1;
    }
    p += n;
  }
  vr_sbuf_add(b, "\"", 1);
}

char *vr_sbuf_take(vr_sbuf *b, size_t *len) {
  if (!b->p) vr_sbuf_add(b, "", 0);
  char *p = b->oom ? NULL : b->p;
  if (len) *len = b->oom ? 0 : b->len;
  if (b->oom) vr_free(b->p);
  memset(b, 0, sizeof *b);
  return p;
}
