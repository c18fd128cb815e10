/* Instance records of vario:worker:<id>:instances, written by whichever
 * process can write to Redis and read by the controller's policy
 * (registry.c): parsed into bounded fields — finite, non-negative rates
 * and latencies, at most VR_REG_NLAT latency slots, an AsyFunc body flag
 * (0/1) and shadow cores — or refused. What
 * parses must survive a write and a re-read unchanged. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/registry_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *m = malloc(size ? size : 1); /* exact size: ASan sees overreads */
  if (!m) return 0;
  memcpy(m, data, size);
  vr_instance_info v, w;
  if (vr__reg_inst_parse("i1", m, size, &v) == 0) {
    if (v.nlat < 0 || v.nlat > VR_REG_NLAT || !(v.arrival_qps >= 0) || !(v.served_qps >= 0) ||
        v.queue < 0 || v.cores < 0 || v.max_batch < 0 || v.body < 0 || v.body > 1 ||
        v.shadow_cores < 0 || !(v.slowdown >= 0))
      __builtin_trap();
    for (int i = 0; i < v.nlat; i++)
      if (!(v.p50_ms[i] >= 0) || !(v.p99_ms[i] >= 0)) __builtin_trap();
    char *j = vr__reg_inst_json(&v);
    if (!j || vr__reg_inst_parse("i1", j, strlen(j), &w) || strcmp(v.variant, w.variant) ||
        strcmp(v.state, w.state) || v.nlat != w.nlat || v.queue != w.queue ||
        v.cores != w.cores || v.max_batch != w.max_batch || v.body != w.body ||
        v.shadow_cores != w.shadow_cores || v.slowdown != w.slowdown)
      __builtin_trap();
    free(j);
  }
  free(m);
  return 0;
}
