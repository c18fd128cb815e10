/* Options of `vario bench`, shared by cmd_bench.c and
 * cmd_bench_arrivals.c (kept apart because the simulator's headers and the
 * engine's define VR_NAME_MAX differently). */
#ifndef VR_CLI_BENCH_ARGS_H
#define VR_CLI_BENCH_ARGS_H

#include <stdint.h>

#include "server/loadgen.h"

typedef struct bench_args {
  vr_lg_opts lg;
  const char *arrival, *trace, *input, *engine_dir;
  double rate, cv, slo_ms, trace_speed;
  int batch, json;
  uint64_t seed;
} bench_args;

/* Draws the arrival times (vario sim's workload generators); closed loop
 * gives none. *out is vr_malloc'd. */
int vr_bench_arrivals(bench_args *a, vr_lg_arrival **out, size_t *n,
                      vr_errbuf *err);

#endif
