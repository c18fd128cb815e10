/*
 * Small filesystem helpers for the model repository (registration copies a
 * model in, writes profiles, and must be able to undo all of it).
 */
#ifndef VR_CONTROL_FSUTIL_H
#define VR_CONTROL_FSUTIL_H

#include <stddef.h>

#include "vario/status.h"

/* mkdir -p. 0 or VR_EIO with a message. */
int vr_mkdirs(const char *path, vr_errbuf *err);
/* Copies a regular file (dst is created or truncated). */
int vr_copy_file(const char *src, const char *dst, vr_errbuf *err);
/* rm -rf; silently ignores a missing path. */
int vr_rmtree(const char *path);
int vr_path_exists(const char *path);
/* Reads a whole file into a NUL-terminated vr_malloc'd buffer. */
int vr_read_file(const char *path, char **out, size_t *len, vr_errbuf *err);
/* "dir/name" into out; VR_ERANGE if it does not fit. */
int vr_path_join(char *out, size_t cap, const char *dir, const char *name);

#endif
