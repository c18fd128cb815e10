/* libFuzzer harness for the recorded-conversation reader the kubernetes
 * provider's test replays (tests/support/k8s_conv.c). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../support/k8s_conv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vr_kc_conv c;
  char err[256];
  if (vr_kc_parse((const char *)data, size, &c, err, sizeof err) == 0) {
    if (c.n == 0) abort();
    for (size_t i = 0; i < c.n; i++) {
      const vr_kc_exchange *e = &c.ex[i];
      if (!e->method || !e->path || e->path[0] != '/' || !e->rbody) abort();
      if (e->status < 100 || e->status > 599) abort();
    }
    vr_kc_free(&c);
  }
  char *u = vr_kc_unescape((const char *)data, size);
  if (u && strlen(u) > size) abort();
  free(u);
  return 0;
}
