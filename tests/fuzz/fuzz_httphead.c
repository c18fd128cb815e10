/* libFuzzer harness for the HTTP/1.1 response-head parser (httpc.c) that
 * the front end's forwarder, the load generator and the blocking client
 * share on bytes a worker or server sends: it must read only buf[0..len),
 * say "need more" (0), "complete" (1) or VR_EFORMAT, and a complete head
 * must end within the buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/httpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an exact-size copy, so ASan sees any read past len */
  char *buf = malloc(size ? size : 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  vr_http_head h;
  memset(&h, 0, sizeof h);
  int rc = vr_http_parse_head(buf, size, &h);
  if (rc != 0 && rc != 1 && rc != VR_EFORMAT) abort();
  if (rc == 1 && (h.head_len < 4 || h.head_len > size)) abort();
  /* the headers the forwarder passes on to its client: a value found lies
   * inside the head, without its line end */
  static const char *const names[] = {"Content-Type", "WWW-Authenticate", "Retry-After",
                                      "Content-Length", "Vario-Due-Us", "Connection"};
  for (size_t i = 0; rc == 1 && i < sizeof names / sizeof names[0]; i++) {
    size_t vl = 0;
    const char *v = vr__http_head_value(buf, h.head_len, names[i], &vl);
    if (v && (v < buf || v + vl > buf + h.head_len || memchr(v, '\n', vl))) abort();
    size_t x = vr__http_head_num(buf, h.head_len, names[i]);
    if (x != (size_t)-1 && !v) abort();
  }
  free(buf);
  return 0;
}
