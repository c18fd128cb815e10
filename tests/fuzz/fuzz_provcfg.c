/* libFuzzer harness for the worker-provider config file and options:
 * vr__prov_parse_config (the file), then the local provider's option
 * parser on every line (no side effects: nothing is spawned or created).
 * Options that parse must describe a sane config. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "cluster/provider_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *kind = NULL, **opts = NULL;
  size_t n = 0;
  vr_errbuf err;
  if (vr__prov_parse_config((const char *)data, size, &kind, &opts, &n,
                            &err))
    return 0;
  if (!kind) abort();
  for (size_t i = 0; i < n; i++)
    if (!strchr(opts[i], '=')) abort();
  vr__local_opts *lo = VR_NEW(vr__local_opts);
  if (lo && vr__prov_local_opts((const char *const *)opts, n, lo, &err) == 0) {
    if (lo->cfg.npool > VR_PROV_MAX_CPU + 1) abort();
    for (size_t i = 0; i < lo->cfg.npool; i++)
      if (lo->cfg.pool[i] < 0 || lo->cfg.pool[i] > VR_PROV_MAX_CPU) abort();
    if (lo->cfg.nprefix > VR_PROV_MAX_ARGS) abort();
  }
  vr_free(lo);
  vr__prov_free_opts(opts, n);
  vr_free(kind);
  return 0;
}
