#include "control/variants.h"

static int batch_limit(const vr_gen_opts *o) {
  return o->max_batch > 0 ? o->max_batch : VR_GEN_MAX_BATCH;
}

unsigned vr_gen_precisions(const vr_gen_opts *o, unsigned supported_mask,
                           int have_calibration) {
  unsigned want = o->precisions ? o->precisions : 0x7u;
  unsigned m = want & supported_mask;
  if (!have_calibration) m &= ~(1u << VR_PREC_INT8);
  /* fp32 is the reference every model has; accuracy is measured on it. */
  return m | (1u << VR_PREC_FP32);
}

int vr_gen_count(const vr_gen_opts *o, unsigned supported_mask,
                 int have_calibration) {
  return vr_gen_variants(o, supported_mask, have_calibration, NULL, 0);
}

int vr_gen_variants(const vr_gen_opts *o, unsigned supported_mask,
                    int have_calibration, vr_variant_spec *out, int cap) {
  int bmax = batch_limit(o);
  int tmin = o->min_threads > 1 ? o->min_threads : 1;
  if (o->max_threads < tmin || bmax < 1 || bmax > VR_GEN_MAX_BATCH)
    return VR_EINVAL;
  unsigned precs = vr_gen_precisions(o, supported_mask, have_calibration);
  int n = 0;
  for (int p = VR_PREC_FP32; p <= VR_PREC_INT8; p++) {
    if (!(precs & (1u << p))) continue;
    for (int t = tmin; t <= o->max_threads; t++)
      for (int b = 1; b <= bmax; b *= 2) {
        if (out && n < cap) out[n] = (vr_variant_spec){(vr_precision)p, t, b};
        n++;
      }
  }
  return out && n > cap ? cap : n;
}
