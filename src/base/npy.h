/*
 * NumPy .npy files (format versions 1.0, 2.0 and 3.0), C order only.
 *
 * Validation sets, calibration sets, offline-job inputs and `vario run`
 * tensors are .npy. The parser is strict: a header that lies about the
 * payload size, an unknown dtype, Fortran order or absurd shapes are
 * rejected with a message, never read past. Little-endian dtypes only
 * ('<' or '|'), which is what numpy writes on x86.
 */
#ifndef VR_BASE_NPY_H
#define VR_BASE_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "vario/dtype.h"
#include "vario/status.h"

#define VR_NPY_MAX_DIMS 8

typedef struct vr_npy {
  vr_dtype dtype;
  int ndim;
  int64_t shape[VR_NPY_MAX_DIMS];
  size_t nbytes; /* product(shape) * dtype size */
  void *data;    /* owned; 64-byte aligned; free with vr_npy_free */
} vr_npy;

/* Parses an in-memory .npy image; copies the payload into out->data. */
int vr_npy_parse(const void *buf, size_t len, vr_npy *out, vr_errbuf *err);
int vr_npy_read(const char *path, vr_npy *out, vr_errbuf *err);
/* Writes data (not owned) with the given dtype and shape. */
int vr_npy_write(const char *path, vr_dtype dt, const int64_t *shape, int ndim,
                 const void *data, vr_errbuf *err);
void vr_npy_free(vr_npy *n);
int64_t vr_npy_numel(const vr_npy *n);

#endif
