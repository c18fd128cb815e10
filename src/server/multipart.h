/*
 * A small, strict multipart/form-data parser (RFC 7578) for uploads: model
 * files and data sets travel in the request body, never as server paths.
 *
 * Zero-copy: parts point into the body, which the caller keeps alive.
 * Strict on purpose: the boundary must be declared in Content-Type and be
 * 1..70 characters of RFC 2046's set; every part must have a
 * Content-Disposition of form-data with a name of [A-Za-z0-9_] (1..63);
 * names are unique; at most VR_MP_MAX_PARTS parts, 8 header lines per
 * part, 1024 bytes per header line; the closing delimiter must be there.
 * Anything else is VR_EFORMAT with a message saying what.
 */
#ifndef VR_SERVER_MULTIPART_H
#define VR_SERVER_MULTIPART_H

#include <stddef.h>

#include "vario/status.h"

#define VR_MP_MAX_PARTS 16

typedef struct vr_mp_part {
  char name[64];
  int has_filename;  /* a file part (filename="..." given) */
  const char *data;  /* into the body */
  size_t len;
} vr_mp_part;

/* Copies the boundary parameter of a multipart/form-data Content-Type
 * into out (cap >= 71). VR_EFORMAT when not multipart/form-data or bad. */
int vr_mp_boundary(const char *content_type, char *out, size_t cap,
                   vr_errbuf *err);
/* Parses body into parts[0..*n). */
int vr_mp_parse(const char *boundary, const char *body, size_t len,
                vr_mp_part *parts, int *n, vr_errbuf *err);
/* The part named name, or NULL. */
const vr_mp_part *vr_mp_find(const vr_mp_part *parts, int n, const char *name);

#endif
