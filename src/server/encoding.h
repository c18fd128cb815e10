/*
 * Request bodies sent compressed (Content-Encoding), as Triton's HTTP
 * endpoint takes them: tritonclient's request_compression_algorithm
 * "gzip" or "deflate" (zlib format). Inflated by zlib, bounded by the
 * server's body limit so that a small body cannot expand without end.
 */
#ifndef VR_SERVER_ENCODING_H
#define VR_SERVER_ENCODING_H

#include <stddef.h>

#include "vario/status.h"

/* What a Content-Encoding header asks for. */
typedef enum {
  VR_CE_IDENTITY, /* none, or "identity": the body as it is */
  VR_CE_INFLATE,  /* "gzip", "x-gzip" or "deflate" */
  VR_CE_UNKNOWN   /* anything else, or more than one coding */
} vr_content_coding;

vr_content_coding vr_content_coding_of(const char *header);

/* Inflates in[0..n) (gzip or zlib, told apart by their headers) into a
 * new vr_malloc'd *out of *out_len bytes (NUL-terminated; caller frees).
 * Errors: VR_ERANGE when it inflates past max bytes, VR_EFORMAT when the
 * data is not a whole gzip/zlib stream, VR_ENOMEM. */
int vr_inflate_body(const char *in, size_t n, size_t max, char **out, size_t *out_len,
                    vr_errbuf *err);

#endif
