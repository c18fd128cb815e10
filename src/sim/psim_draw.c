/* The random draws of the pipeline simulator, one code for its two
 * engines: the event engine (psim.c) and, under stage streams, the stage
 * by stage one (psim_stage.c). See psim_int.h. */
#include <math.h>

#include "sim/psim_int.h"

static int poisson(vr_rng *r, double mean) {
  if (mean <= 0) return 0;
  if (mean > 60) {
    double x = mean + sqrt(mean) * vr_rng_normal(r);
    return x < 0 ? 0 : (int)lround(x);
  }
  double l = exp(-mean), p = 1;
  int k = 0;
  do {
    k++;
    p *= vr_rng_unif(r);
  } while (p > l);
  return k - 1;
}

double vr__psim_quantile(vr_rng *r, int noise) {
  return noise ? 0.01 + 0.98 * vr_rng_unif(r) : 0.5;
}

int vr__psim_fan_count(vr_rng *r, const vr_pipe_variant *pv, int exact) {
  return exact ? (int)pv->mult + (vr_rng_unif(r) < pv->mult - (int)pv->mult)
               : poisson(r, pv->mult);
}

int vr__psim_fan_child(vr_rng *r, const vr_pipe_variant *pv, int nchildren) {
  double u = vr_rng_unif(r);
  for (int c = 0; c < nchildren; c++) {
    if (u < pv->share[c]) return c;
    u -= pv->share[c];
  }
  return -1;
}

/* splitmix64's finaliser: a well-mixed 64-bit value of x */
static uint64_t mix64(uint64_t x) {
  return vr_splitmix64(&x);
}

uint64_t vr__psim_id_root(uint64_t seed, int64_t query) {
  return mix64(mix64(seed ^ 0x51a9e5ULL) + (uint64_t)query);
}

uint64_t vr__psim_id_child(uint64_t id, int j) {
  return mix64(id + 0x632be59bd9b4e019ULL * (uint64_t)(j + 1));
}

void vr__psim_task_rng(vr_rng *r, uint64_t seed, int task) {
  vr_rng_seed(r, mix64(seed ^ 0x7a5cULL) + (uint64_t)task);
}

void vr__psim_depths(const vr_pipeline *p, uint32_t *depth) {
  for (int t = 0; t < p->ntasks; t++) { /* walk up: pipelines are shallow */
    uint32_t d = 0;
    for (int u = p->tasks[t].parent; u >= 0 && d <= (uint32_t)p->ntasks;
         u = p->tasks[u].parent)
      d++;
    depth[t] = d;
  }
}

double vr__psim_route_u(uint64_t id) {
  return (double)(mix64(id ^ 0x2f07ULL) >> 11) * 0x1.0p-53;
}
