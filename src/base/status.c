#include "vario/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *vr_strerror(int status) {
  switch (status) {
#define VR_ERRNO_STR(name, val, msg) \
  case val:                          \
    return msg;
    VR_ERRNO_MAP(VR_ERRNO_STR)
#undef VR_ERRNO_STR
  }
  return "unknown error";
}

const char *vr_errname(int status) {
  switch (status) {
#define VR_ERRNO_NAME(name, val, msg) \
  case val:                           \
    return #name;
    VR_ERRNO_MAP(VR_ERRNO_NAME)
#undef VR_ERRNO_NAME
  }
  return "VR_E?";
}

int vr_errf(vr_errbuf *err, int code, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->code = code;
  }
  return code;
}

int vr_errctx(vr_errbuf *err, int code, const char *fmt, ...) {
  if (err) {
    char prefix[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    old[sizeof old - 1] = '\0';
    /* Truncation of over-long messages is acceptable: they are for people. */
    const char *rest = old[0] ? old : vr_strerror(code);
    size_t n = strlen(prefix);
    if (n > sizeof err->msg - 3) n = sizeof err->msg - 3;
    memcpy(err->msg, prefix, n);
    err->msg[n++] = ':';
    err->msg[n++] = ' ';
    size_t m = strlen(rest);
    if (m > sizeof err->msg - 1 - n) m = sizeof err->msg - 1 - n;
    memcpy(err->msg + n, rest, m);
    err->msg[n + m] = '\0';
    err->code = code;
  }
  return code;
}
