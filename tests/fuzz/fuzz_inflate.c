/* Compressed request bodies (Content-Encoding gzip/deflate, server/
 * encoding.h): the first byte picks the body limit (0..255 KiB, so the
 * bound is hit often), the rest is the body. Any bytes are inflated to at
 * most the limit, NUL-terminated, or rejected with a message; the header
 * classifier takes the same bytes as a header value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "server/encoding.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t max = (size_t)data[0] * 1024;
  char *out = NULL;
  size_t len = 0;
  vr_errbuf err = {0};
  if (vr_inflate_body((const char *)data + 1, size - 1, max, &out, &len, &err) == 0) {
    if (len > max || out[len] != 0) __builtin_trap();
    vr_free(out);
  } else if (!err.msg[0]) {
    __builtin_trap(); /* a rejection must say why */
  }
  char *h = malloc(size);
  if (!h) return 0;
  memcpy(h, data + 1, size - 1);
  h[size - 1] = 0;
  vr_content_coding c = vr_content_coding_of(h);
  if (c != VR_CE_IDENTITY && c != VR_CE_INFLATE && c != VR_CE_UNKNOWN) __builtin_trap();
  free(h);
  return 0;
}
