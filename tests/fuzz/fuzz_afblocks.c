/* AsyFunc block profile JSON (`vario perf --blocks --out`, read by `vario
 * asyfunc`): arbitrary bytes are either rejected with a message or give a
 * profile that survives a round trip through vr_af_model_to_json unchanged
 * and whose latency model, LLS and scheduler run. */
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "policy/asyfunc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  json_error_t je;
  json_t *j = json_loadb((const char *)data, size, 0, &je);
  if (!j) return 0;
  static vr_af_model m, k;
  vr_errbuf err = {0};
  if (vr_af_model_from_json(j, &m, &err)) {
    json_decref(j);
    if (!err.msg[0]) __builtin_trap();
    return 0;
  }
  json_decref(j);
  json_t *o = vr_af_model_to_json(&m);
  if (!o || vr_af_model_from_json(o, &k, &err) || memcmp(&m, &k, sizeof m)) __builtin_trap();
  json_decref(o);
  vr_af_scale_cfg cfg;
  vr_af_scale_cfg_init(&cfg, vr_af_default_slo(&m));
  vr_af_body b = {1, 0, m.cmax, 0};
  vr_af_lls_out lo;
  vr_af_lls(&m, &cfg, cfg.gamma, &b, 1, &lo);
  vr_af_mls_out mo;
  int cores[2] = {1, m.cmax};
  vr_af_mls(&m, &cfg, 100, cores, 2, 64, &mo);
  return 0;
}
