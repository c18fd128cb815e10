#include "base/prom.h"

#include <string.h>

#include "base/alloc.h"

char *vr_prom_quote(const char *s) {
  size_t n = strlen(s);
  char *q = vr_malloc(2 * n + 3), *w = q;
  if (!q) return NULL;
  *w++ = '"';
  for (; *s; s++) {
    if (*s == '\\' || *s == '"') *w++ = '\\', *w++ = *s;
    else if (*s == '\n') *w++ = '\\', *w++ = 'n';
    else *w++ = *s;
  }
  *w++ = '"';
  *w = 0;
  return q;
}
