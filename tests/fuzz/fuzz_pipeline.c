/* Pipeline specs (Vario's own format and Loki's app definitions): arbitrary
 * bytes are either rejected with a message and nothing returned, or give a
 * pipeline that validates, whose rates are finite, and that survives a
 * round trip through vr_pipeline_to_json and a deep copy unchanged. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "policy/pipeline.h"

static void check(const vr_pipeline *p) {
  vr_errbuf err = {0};
  if (vr_pipeline_validate(p, &err)) __builtin_trap();
  json_t *a = vr_pipeline_to_json(p);
  vr_pipeline *q = NULL, *r = NULL;
  if (!a || vr_pipeline_from_json(a, &q, &err)) __builtin_trap();
  json_t *b = vr_pipeline_to_json(q);
  r = vr_pipeline_dup(q);
  json_t *c = r ? vr_pipeline_to_json(r) : NULL;
  if (!b || !c || !json_equal(a, b) || !json_equal(a, c)) __builtin_trap();
  json_decref(a), json_decref(b), json_decref(c);
  vr_pipeline_free(q), vr_pipeline_free(r);
  int choice[VR_PIPE_MAX_TASKS], leaves[VR_PIPE_MAX_TASKS];
  int path[VR_PIPE_MAX_TASKS];
  double rate[VR_PIPE_MAX_TASKS];
  for (int i = 0; i < p->ntasks; i++)
    choice[i] = p->tasks[i].nvariants ? p->tasks[i].nvariants - 1 : 0;
  vr_pipeline_rates(p, choice, NULL, 10, rate);
  for (int i = 0; i < p->ntasks; i++)
    if (!(rate[i] >= 0) || isnan(rate[i])) __builtin_trap();
  int n = vr_pipeline_leaves(p, leaves);
  if (n < 1) __builtin_trap();
  for (int k = 0; k < n; k++)
    if (path[vr_pipeline_path(p, leaves[k], path) - 1] != leaves[k] ||
        path[0] != 0)
      __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vr_pipeline *p = (vr_pipeline *)1;
  vr_errbuf err = {0};
  if (vr_pipeline_parse((const char *)data, size, &p, &err)) {
    if (p || !err.msg[0]) __builtin_trap();
    return 0;
  }
  check(p);
  vr_pipeline_free(p);
  return 0;
}
