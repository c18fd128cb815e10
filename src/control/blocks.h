/*
 * AsyFunc's Extractor + Profiler on the real engine: splits a model into
 * layer blocks (vr_af_group over per-node sensitivity, cut only at chain
 * cuts) and measures each block's ⟨c, b, l, p, d⟩ tuples, sensitivity,
 * load time (vr_model_slice + session, what a shadow pays) and resident
 * memory, plus the whole model's load time and memory (what a body pays).
 * Stateless; everything it creates is freed before it returns.
 */
#ifndef VR_CONTROL_BLOCKS_H
#define VR_CONTROL_BLOCKS_H

#include "policy/asyfunc.h"
#include "vario/engine.h"

typedef struct vr_blocks_opts {
  int cmax;        /* cores profiled 1..cmax; 0 = 2 */
  int bmax;        /* batch 1..bmax; 0 = 4 (AsyFunc's B_max) */
  int runs;        /* timed runs per (c, b), minimum kept; 0 = 7 */
  int load_runs;   /* load-time repetitions (minimum kept); 0 = 3 */
  int max_blocks;  /* 0 = 8 */
  double tol;      /* merge blocks whose log-sensitivities differ less; 0 = 0.15 */
} vr_blocks_opts;

/* Profiles the ONNX model at path into *out (name = name). */
int vr_blocks_profile(const char *path, const char *name, const vr_blocks_opts *o,
                      vr_af_model *out, vr_errbuf *err);

/* Loads the blocks in mask as one shadow would (slice of the resident
 * model + session) and returns the wall time in ms of that load
 * (minimum over `runs`), or < 0 with err set. */
double vr_blocks_shadow_load_ms(const vr_model *m, const vr_af_model *af, uint32_t mask,
                                int bmax, int runs, vr_errbuf *err);

#endif
