/* int8 calibration (see quant.h). */
#include "engine/quant.h"

#include "base/alloc.h"

int vr_quant_calibrate(const vr_model *m, const vr_session_opts *o,
                       int node_begin, int node_end, vr_qparams **out,
                       vr_errbuf *err) {
  *out = NULL;
  return vr_errf(err, VR_EUNSUPPORTED, "int8 precision is not implemented yet");
}

void vr_quant_free(vr_qparams *q) {
  if (!q) return;
  vr_free(q->absmax);
  vr_free(q->nonneg);
  vr_free(q);
}
