/*
 * Seeded random numbers for the simulator (xoshiro256**, seeded through
 * splitmix64). A vr_rng is a plain value owned by its user; the same seed
 * gives the same stream on every machine, so runs are reproducible.
 */
#ifndef VR_SIM_RNG_H
#define VR_SIM_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct vr_rng {
  uint64_t s[4];
} vr_rng;

static inline uint64_t vr_splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static inline void vr_rng_seed(vr_rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = vr_splitmix64(&seed);
}

static inline uint64_t vr_rng_next(vr_rng *r) {
  uint64_t *s = r->s;
  uint64_t x = s[1] * 5, res = ((x << 7) | (x >> 57)) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = (s[3] << 45) | (s[3] >> 19);
  return res;
}

/* Uniform in [0, 1). */
static inline double vr_rng_unif(vr_rng *r) {
  return (double)(vr_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform in (0, 1]: safe for log(). */
static inline double vr_rng_unif_pos(vr_rng *r) { return 1.0 - vr_rng_unif(r); }

static inline double vr_rng_exp(vr_rng *r, double rate) {
  return -log(vr_rng_unif_pos(r)) / rate;
}

static inline double vr_rng_normal(vr_rng *r) {
  double u = vr_rng_unif_pos(r), v = vr_rng_unif(r);
  return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* Gamma(shape k, scale 1), Marsaglia-Tsang; k < 1 by the boost trick. */
static inline double vr_rng_gamma(vr_rng *r, double k) {
  if (k < 1) return vr_rng_gamma(r, k + 1) * pow(vr_rng_unif_pos(r), 1 / k);
  double d = k - 1.0 / 3, c = 1 / sqrt(9 * d);
  for (;;) {
    double x = vr_rng_normal(r), v = 1 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = vr_rng_unif_pos(r);
    if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) return d * v;
  }
}

#endif
