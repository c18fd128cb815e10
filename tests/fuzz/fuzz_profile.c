/* Variant profile JSON (profiles/<variant>.json, the store's profile
 * column, the simulator's inline profiles): arbitrary bytes are either
 * rejected with a message or give a profile that passes validation and
 * survives a round trip through vr_profile_to_json unchanged. */
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "policy/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  json_error_t je;
  json_t *j = json_loadb((const char *)data, size, 0, &je);
  if (!j) return 0;
  vr_profile p, q;
  vr_errbuf err = {0};
  if (vr_profile_from_json(j, &p, &err)) {
    json_decref(j);
    if (!err.msg[0]) __builtin_trap();
    return 0;
  }
  json_decref(j);
  if (vr_profile_validate(&p, &err)) __builtin_trap();
  json_t *k = vr_profile_to_json(&p);
  if (!k) __builtin_trap();
  if (vr_profile_from_json(k, &q, &err) || memcmp(&p, &q, sizeof p))
    __builtin_trap();
  json_decref(k);
  return 0;
}
