/*
 * Variant generator: the configurations a registered model is offered in.
 *
 * precision {fp32, bf16 where the CPU runs it, int8 when calibration data
 * exists} x threads {1, 2, ..., max_threads} x max batch {1, 2, 4, ..., 64}
 * (powers of two up to max_batch). Pure: the caller says which precisions
 * the machine supports, so the generator is testable anywhere.
 */
#ifndef VR_CONTROL_VARIANTS_H
#define VR_CONTROL_VARIANTS_H

#include "vario/engine.h"

#define VR_GEN_MAX_BATCH 64

typedef struct vr_gen_opts {
  unsigned precisions; /* bitmask of 1u << vr_precision; 0 = all */
  int max_threads;     /* >= 1 */
  int max_batch;       /* 1..64; 0 = 64 */
  int min_threads;     /* 0 or 1 = start at 1 */
} vr_gen_opts;

typedef struct vr_variant_spec {
  vr_precision precision;
  int threads;
  int max_batch;
} vr_variant_spec;

/* Precisions actually generated: requested & supported, int8 dropped when
 * there is no calibration data, fp32 always kept. */
unsigned vr_gen_precisions(const vr_gen_opts *o, unsigned supported_mask,
                           int have_calibration);
/* Number of variants vr_gen_variants would produce. */
int vr_gen_count(const vr_gen_opts *o, unsigned supported_mask,
                 int have_calibration);
/* Writes up to cap specs, in (precision, threads, max_batch) order;
 * returns how many were produced (<= cap) or VR_EINVAL for bad options. */
int vr_gen_variants(const vr_gen_opts *o, unsigned supported_mask,
                    int have_calibration, vr_variant_spec *out, int cap);

#endif
