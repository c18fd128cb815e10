/* `vario bench` arrivals from the simulator's workload streams. */
#include <string.h>

#include "base/alloc.h"
#include "cli/bench_args.h"
#include "sim/workload.h"

/* Arrival times from the simulator's workload streams (same generators
 * as `vario sim`, so a simulated and a measured run see equal traffic). */
int vr_bench_arrivals(bench_args *a, vr_lg_arrival **out, size_t *n,
                         vr_errbuf *err) {
  *out = NULL;
  *n = 0;
  if (!strcmp(a->arrival, "closed")) return 0;
  vr_workload w;
  memset(&w, 0, sizeof w);
  w.kind = vr_wl_kind_parse(a->arrival);
  if (w.kind < 0 || (w.kind != VR_WL_CONSTANT && w.kind != VR_WL_POISSON &&
                     w.kind != VR_WL_GAMMA && w.kind != VR_WL_TRACE))
    return vr_errf(err, VR_EINVAL, "--arrival '%s': use constant, poisson,"
                   " gamma, trace or closed", a->arrival);
  w.rate = a->rate;
  w.cv = a->cv;
  w.slo_ms = a->slo_ms;
  w.trace_slo = a->slo_ms <= 0;
  if (w.kind == VR_WL_TRACE) {
    if (!a->trace) return vr_errf(err, VR_EINVAL, "--arrival trace needs --trace");
    w.path = vr_strdup(a->trace);
  }
  int rc = vr_wl_open(&w, a->seed, err);
  size_t cap = 0;
  /* A trace is replayed from its first arrival, whenever that is in the
   * trace's own clock: read it without a horizon and stop `duration`
   * seconds (replay time) after that arrival. */
  int trace = w.kind == VR_WL_TRACE;
  double horizon = trace ? 1e15 : a->lg.duration_s;
  double speed = trace ? a->trace_speed : 1;
  vr_req r;
  int64_t first = -1;
  while (!rc && (rc = vr_wl_next(&w, horizon, &r, err)) == 1) {
    rc = 0;
    if (first < 0) first = trace ? r.t_ns : 0;
    if (trace && (r.t_ns - first) / speed >= a->lg.duration_s * 1e9) break;
    if (*n == cap) {
      cap = cap ? cap * 2 : 4096;
      vr_lg_arrival *p = vr_realloc(*out, cap * sizeof *p);
      if (!p) { rc = vr_errf(err, VR_ENOMEM, "out of memory"); break; }
      *out = p;
    }
    (*out)[*n].t_ns = (int64_t)((r.t_ns - first) / speed);
    (*out)[*n].slo_ns = (a->slo_ms > 0 || w.kind == VR_WL_TRACE)
                            ? r.deadline_ns - r.t_ns : 0;
    (*n)++;
  }
  vr_wl_close(&w);
  if (rc < 0) {
    vr_free(*out);
    *out = NULL;
    return rc;
  }
  if (*n == 0) return vr_errf(err, VR_EINVAL, "the arrival process produced"
                              " no request in %.1f s", a->lg.duration_s);
  return 0;
}

