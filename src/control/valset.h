/*
 * Validation sets for registration: inputs (.npy, N x ...) and integer
 * class labels (.npy, N or N x 1). Loading checks everything that can be
 * checked without the model — readable files, a non-empty set, integer
 * labels, one label per input row — so bad input is rejected before any
 * file is copied or any store row written.
 *
 * The vr_valset owns both arrays (vr_valset_free).
 */
#ifndef VR_CONTROL_VALSET_H
#define VR_CONTROL_VALSET_H

#include <stdint.h>

#include "base/npy.h"
#include "vario/status.h"

typedef struct vr_valset {
  vr_npy inputs;
  vr_npy labels;
  int64_t n;          /* rows */
  size_t row_bytes;   /* bytes of one input row */
} vr_valset;

int vr_valset_load(const char *inputs_path, const char *labels_path,
                   vr_valset *out, vr_errbuf *err);
void vr_valset_free(vr_valset *v);
/* Label of row i as an integer class id. */
int64_t vr_valset_label(const vr_valset *v, int64_t i);
/* Index of the largest of n floats (first on ties); -1 when n <= 0. */
int vr_argmax_f32(const float *x, int n);

#endif
