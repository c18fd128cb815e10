/* A pipeline plan as text (policy/pipe_plan_text.c), as the controller
 * publishes it in Redis and workers parse it: arbitrary bytes are parsed
 * over a fixed two-task view or rejected with a message; a parsed plan
 * writes back to text that parses to the same allocations. Never a crash
 * or a leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "policy/pipe_plan.h"

static const char spec[] =
    "{\"name\":\"p\",\"latency_ms\":200,\"tasks\":["
    "{\"name\":\"det\",\"variants\":[\"a\",\"b\"],\"children\":[{\"task\":\"cls\"}]},"
    "{\"name\":\"cls\",\"variants\":[\"c\"]}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vr_pipeline *v = NULL;
  vr_errbuf err = {0};
  if (vr_pipeline_parse(spec, sizeof spec - 1, &v, &err)) __builtin_trap();
  vr_pipe_plan plan = {0}, back = {0};
  if (vr_pipe_plan_init(&plan, v) || vr_pipe_plan_init(&back, v)) __builtin_trap();
  double ewma = 0;
  int drop = 0;
  if (vr_pipe_plan_parse_text(v, (const char *)data, size, &plan, &ewma, &drop, &err)) {
    if (!err.msg[0]) __builtin_trap();
  } else {
    char *t = vr_pipe_plan_text(v, &plan, ewma, drop);
    if (t) {
      double e2;
      int d2;
      if (vr_pipe_plan_parse_text(v, t, strlen(t), &back, &e2, &d2, &err)) __builtin_trap();
      for (int i = 0; i < plan.off[plan.ntasks]; i++)
        if (back.a[i].inst != plan.a[i].inst || back.a[i].batch != plan.a[i].batch)
          __builtin_trap();
      if (d2 != drop) __builtin_trap();
      vr_free(t);
    }
  }
  vr_pipe_plan_free(&plan);
  vr_pipe_plan_free(&back);
  vr_pipeline_free(v);
  return 0;
}
