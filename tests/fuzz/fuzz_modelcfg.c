/* Model repository config.json (<repo>/<model>/config.json): arbitrary
 * bytes are either parsed into a config that satisfies the parser's own
 * limits or rejected with a message, never a crash or a leak. */
#include <stdint.h>
#include <string.h>

#include "runtime/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vr_model_config c;
  vr_errbuf err = {0};
  if (vr_model_config_parse((const char *)data, size, "/nonexistent", &c, &err)) {
    if (!err.msg[0]) __builtin_trap(); /* a rejection always says why */
    return 0;
  }
  if (c.max_batch_size < 1 || c.n_inputs < 1 || c.n_outputs < 1 ||
      c.instances < 0 || c.threads < 0 || !memchr(c.name, 0, sizeof c.name))
    __builtin_trap();
  return 0;
}
