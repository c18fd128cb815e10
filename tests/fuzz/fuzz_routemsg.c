/* Routing-change messages from the vario:routes channel ("<table>
 * <version>\n<body>"), which arrive from whoever can publish to Redis:
 * parsed into a valid table id, a positive version and a body inside the
 * message, or rejected — never read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* An exact-size copy, so ASan sees any read past the end. */
  char *m = malloc(size ? size : 1);
  if (!m) return 0;
  memcpy(m, data, size);
  char table[VR_REG_ID_MAX];
  int64_t v = 0;
  const char *body = NULL;
  if (vr_registry_parse_route_msg(m, size, table, &v, &body) == 0) {
    if (!vr_registry_valid_id(table) || v < 1 || body < m || body > m + size)
      __builtin_trap();
  }
  free(m);
  return 0;
}
