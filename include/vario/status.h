/*
 * Status codes shared by every Vario layer.
 *
 * Convention (as in libuv): functions return 0 on success or a negative
 * VR_E* code. Where a caller needs user-facing detail ("node 'conv3' has
 * unsupported op 'NonMaxSuppression'"), the function also takes a
 * vr_errbuf* (may be NULL) that it fills with a one-line message.
 */
#ifndef VARIO_STATUS_H
#define VARIO_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VR_ERRNO_MAP(X)                                                   \
  X(VR_OK, 0, "success")                                                  \
  X(VR_ENOMEM, -1, "out of memory")                                       \
  X(VR_EINVAL, -2, "invalid argument")                                    \
  X(VR_ENOENT, -3, "not found")                                           \
  X(VR_EIO, -4, "input/output error")                                     \
  X(VR_EFORMAT, -5, "malformed input")                                    \
  X(VR_EUNSUPPORTED, -6, "unsupported")                                   \
  X(VR_ESHAPE, -7, "shape mismatch")                                      \
  X(VR_ETYPE, -8, "data type mismatch")                                   \
  X(VR_EBUSY, -9, "resource busy")                                        \
  X(VR_ETIMEDOUT, -10, "timed out")                                       \
  X(VR_EDEADLINE, -11, "deadline cannot be met")                          \
  X(VR_ERANGE, -12, "value out of range")                                 \
  X(VR_EEXIST, -13, "already exists")                                     \
  X(VR_ESTATE, -14, "operation not valid in current state")               \
  X(VR_ELIMIT, -15, "limit exceeded")                                     \
  X(VR_EINFEASIBLE, -16, "requirements cannot be met")                    \
  X(VR_ESHUTDOWN, -17, "shutting down")                                   \
  X(VR_EBACKEND, -18, "backend library error")                            \
  X(VR_EINTERNAL, -19, "internal error")

enum {
#define VR_ERRNO_ENUM(name, val, msg) name = val,
  VR_ERRNO_MAP(VR_ERRNO_ENUM)
#undef VR_ERRNO_ENUM
};

/* Static description of a status code; never NULL. */
const char *vr_strerror(int status);
/* The code's symbolic name ("VR_ESHAPE"); never NULL. */
const char *vr_errname(int status);

/* User-facing detail for a failed call. Callers own it (usually on the
 * stack); functions that take one fill msg on failure and leave it alone on
 * success. */
typedef struct vr_errbuf {
  int code;
  char msg[512];
} vr_errbuf;

/* Formats into err (if non-NULL) and returns code, so that error paths read
 * `return vr_errf(err, VR_ESHAPE, "input '%s': expected %d dims", ...);` */
int vr_errf(vr_errbuf *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes an existing message with context ("loading model.onnx: ..."). */
int vr_errctx(vr_errbuf *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
