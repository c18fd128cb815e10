/* The body of POST /v2/repository/models/{m}/shadow and the "pair_range"
 * load parameter (server/server_shadow.c), written by whoever can reach a
 * worker's admin API: parsed into bounded fields — cores 1..256, a split
 * table of 2..max batch + 1 entries with split[0] = 0 and 0 <= split[b]
 * <= b — or refused with a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *m = malloc(size ? size : 1); /* exact size: ASan sees overreads */
  if (!m) return 0;
  memcpy(m, data, size);
  vr__srv_shadow_req *q = malloc(sizeof *q);
  vr_errbuf err = {0};
  if (q && vr__srv_shadow_parse(m, size, q, &err) == 0) {
    if (q->cores < 1 || q->cores > 256 || q->nsplit < 2 || q->nsplit > VR_RT_MAX_BATCH + 1 ||
        q->split[0] != 0)
      __builtin_trap();
    for (int b = 0; b < q->nsplit; b++)
      if (q->split[b] < 0 || q->split[b] > b) __builtin_trap();
  } else if (q && !err.msg[0]) {
    __builtin_trap(); /* refused without saying why */
  }
  /* the same bytes as a pair_range value (NUL-terminated copy) */
  char *z = malloc(size + 1);
  if (z) {
    memcpy(z, data, size);
    z[size] = 0;
    int pb = -1, pe = -1;
    vr_errbuf e2 = {0};
    if (vr__srv_pair_range(z, &pb, &pe, &e2) == 0 && (pb < 0 || pe <= pb)) __builtin_trap();
  }
  free(z);
  free(q);
  free(m);
  return 0;
}
