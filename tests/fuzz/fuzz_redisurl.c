/* redis:// URLs (`--store redis://...`, the cluster registry): any bytes
 * are either parsed into an address that formats back to a URL which
 * parses to the same host, port and db, or rejected with a message —
 * never a crash or an overlong field. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/redis.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) return 0;
  memcpy(s, data, size);
  s[size] = 0;
  vr_redis_url u, v;
  vr_errbuf err = {0};
  if (vr_redis_url_parse(s, &u, &err) == 0) {
    if (!u.host[0] || u.port < 1 || u.port > 65535 || u.db < 0 || u.db > 9999)
      __builtin_trap();
    char again[VR_REDIS_HOST_MAX + 64];
    vr_redis_url_format(&u, again, sizeof again);
    if (vr_redis_url_parse(again, &v, &err) || strcmp(u.host, v.host) || u.port != v.port ||
        u.db != v.db)
      __builtin_trap(); /* formatting must round-trip */
  } else if (!err.msg[0]) {
    __builtin_trap(); /* a rejection must say why */
  }
  free(s);
  return 0;
}
