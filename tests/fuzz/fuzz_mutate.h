/* Helpers of the structure-aware mutators (LLVMFuzzerCustomMutator in
 * fuzz_onnx.c and fuzz_modelpack.c): a seeded xorshift and the edge values
 * a reader must refuse or handle. Static, one generator per harness. */
#ifndef VR_FUZZ_MUTATE_H
#define VR_FUZZ_MUTATE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* weak: the replay build (replay.c) links no libFuzzer and never mutates */
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size)
    __attribute__((weak));

static uint64_t g_rng;
static inline void vr_fz_seed(unsigned seed) {
  g_rng = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;
}
static inline unsigned rnd(unsigned n) { /* xorshift64*, 0..n-1 */
  g_rng ^= g_rng >> 12, g_rng ^= g_rng << 25, g_rng ^= g_rng >> 27;
  return n ? (unsigned)((g_rng * 2685821657736338717ull) >> 33) % n : 0;
}

/* Values at the edges the loader must refuse or handle. */
static inline int64_t edge_int(int64_t old) {
  static const int64_t v[] = {0, 1, 2, 3, -1, -2, 7, 64, 1 << 20, 1LL << 31,
                              1LL << 40, INT64_MAX, INT64_MIN};
  switch (rnd(3)) {
  case 0: return (int64_t)((uint64_t)old + rnd(5) - 2); /* wraps, no UB */
  case 1: return (int64_t)((uint64_t)old * 2);
  default: return v[rnd(sizeof v / sizeof *v)];
  }
}

static inline float edge_float(float old) {
  static const float v[] = {0, 1, -1, 0.5f, 1e-30f, 1e30f, NAN, INFINITY,
                            -INFINITY};
  return rnd(2) ? old * (float)(rnd(7) + 1) / 4 : v[rnd(sizeof v / sizeof *v)];
}

#endif
