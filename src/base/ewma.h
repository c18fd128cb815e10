/*
 * Exponentially weighted moving average over irregularly spaced samples.
 *
 * With a time constant tau, a sample arriving dt after the previous one gets
 * weight alpha = 1 - exp(-dt / tau), so the average forgets at the same rate
 * whatever the sampling rate. With tau <= 0 a fixed alpha is used instead.
 * Plain struct, no allocation; time is passed in (pure, simulator-safe).
 */
#ifndef VR_BASE_EWMA_H
#define VR_BASE_EWMA_H

#include <stdint.h>

typedef struct vr_ewma {
  double value;
  double alpha; /* fixed weight when tau_ns <= 0 */
  int64_t tau_ns;
  int64_t last_ns;
  int primed; /* 0 until the first sample */
} vr_ewma;

void vr_ewma_init_alpha(vr_ewma *e, double alpha);
void vr_ewma_init_tau(vr_ewma *e, int64_t tau_ns);
void vr_ewma_add(vr_ewma *e, double sample, int64_t now_ns);
double vr_ewma_get(const vr_ewma *e);

#endif
