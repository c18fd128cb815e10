#include "base/ewma.h"

#include <math.h>

void vr_ewma_init_alpha(vr_ewma *e, double alpha) {
  e->value = 0;
  e->alpha = alpha;
  e->tau_ns = 0;
  e->last_ns = 0;
  e->primed = 0;
}

void vr_ewma_init_tau(vr_ewma *e, int64_t tau_ns) {
  vr_ewma_init_alpha(e, 0);
  e->tau_ns = tau_ns;
}

void vr_ewma_add(vr_ewma *e, double sample, int64_t now_ns) {
  if (!e->primed) {
    e->value = sample;
    e->primed = 1;
    e->last_ns = now_ns;
    return;
  }
  double a = e->alpha;
  if (e->tau_ns > 0) {
    double dt = (double)(now_ns - e->last_ns);
    if (dt < 0) dt = 0;
    a = 1.0 - exp(-dt / (double)e->tau_ns);
  }
  e->value += a * (sample - e->value);
  e->last_ns = now_ns;
}

double vr_ewma_get(const vr_ewma *e) { return e->value; }
