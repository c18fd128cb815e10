/*
 * int8 post-training quantisation: calibration statistics gathered by
 * running the fp32 graph over the calibration set.
 *
 * vr_qparams holds, per graph value, the max |x| seen (activation scale =
 * max/127 for s8, max/255 for u8 when the value is non-negative). The
 * session owns it.
 */
#ifndef VR_ENGINE_QUANT_H
#define VR_ENGINE_QUANT_H

#include "engine/graph.h"
#include "engine/plan.h"

struct vr_qparams {
  int nvals;
  float *absmax;  /* per graph value; <0 = not observed */
  char *nonneg;   /* per graph value: min >= 0 seen */
};

int vr_quant_calibrate(const vr_model *m, const vr_session_opts *o,
                       int node_begin, int node_end, vr_qparams **out,
                       vr_errbuf *err);
void vr_quant_free(vr_qparams *q);

#endif
