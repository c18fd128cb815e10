/* libFuzzer harness for the multipart/form-data upload parser: the input's
 * first line is the Content-Type, the rest the body. Parts must lie inside
 * the body and be uniquely named. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nl = memchr(data, '\n', size);
  if (!nl || nl - data > 1000) return 0;
  char ct[1001];
  memcpy(ct, data, (size_t)(nl - data));
  ct[nl - data] = 0;
  size_t blen = size - (size_t)(nl + 1 - data);
  /* A copy of exactly blen bytes, so ASan sees any read past the body. */
  char *body = malloc(blen ? blen : 1);
  if (!body) return 0;
  memcpy(body, nl + 1, blen);
  char b[80];
  vr_errbuf err;
  vr_mp_part parts[VR_MP_MAX_PARTS];
  int n = 0;
  if (!vr_mp_boundary(ct, b, sizeof b, &err) &&
      !vr_mp_parse(b, body, blen, parts, &n, &err)) {
    if (n < 0 || n > VR_MP_MAX_PARTS) abort();
    for (int i = 0; i < n; i++) {
      if (parts[i].data < body || parts[i].data + parts[i].len > body + blen) abort();
      if (vr_mp_find(parts, n, parts[i].name) != &parts[i]) abort();
      uint8_t sum = 0;
      for (size_t k = 0; k < parts[i].len; k++) sum += (uint8_t)parts[i].data[k];
      __asm__ volatile("" : : "r"(sum));
    }
  }
  free(body);
  return 0;
}
