/* The node range between a model's first and last interior chain cut
 * (vr_model_chain_cuts), so that both of its boundary tensors carry a
 * real activation: what bench_pair_handoff and bench_shadow_start split
 * a model at by default. Header-only (each bench is its own executable). */
#ifndef VR_BENCH_INTERIOR_RANGE_H
#define VR_BENCH_INTERIOR_RANGE_H

#include "base/alloc.h"
#include "vario/engine.h"

/* *pb, *pe: the range, or -1 when the model has fewer than two cuts. */
static inline void vr_bench_interior_range(const vr_model *m, int *pb, int *pe) {
  int n = vr_model_num_nodes(m);
  *pb = *pe = -1;
  char *cut = vr_calloc((size_t)n + 1, 1);
  if (!cut || vr_model_chain_cuts(m, cut)) {
    vr_free(cut);
    return;
  }
  for (int k = 1; k < n; k++)
    if (cut[k]) {
      if (*pb < 0) *pb = k;
      *pe = k;
    }
  vr_free(cut);
}

#endif
