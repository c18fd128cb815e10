/* Triton config.pbtxt (protobuf text): arbitrary bytes are either read
 * into a config within the parser's own limits or rejected with a message
 * naming the problem, never a crash, a hang or a leak. */
#include <stdint.h>
#include <string.h>

#include "runtime/pbtxt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vr_model_config c;
  vr_errbuf err = {0};
  if (vr_pbtxt_parse((const char *)data, size, &c, &err)) {
    if (!err.msg[0]) __builtin_trap(); /* a rejection always says why */
    return 0;
  }
  if (c.max_batch_size < 1 || c.max_batch_size > VR_RT_MAX_BATCH ||
      c.instances < 1 || c.instances > VR_RT_MAX_INSTANCES ||
      c.n_inputs < 0 || c.n_inputs > VR_RT_MAX_IO || c.n_outputs < 0 ||
      c.n_outputs > VR_RT_MAX_IO || c.n_preferred_batch > 8 ||
      c.n_versions > 8 || !memchr(c.name, 0, sizeof c.name))
    __builtin_trap();
  for (int i = 0; i < c.n_outputs; i++) /* a file name in the model dir */
    if (!memchr(c.label_file[i], 0, sizeof c.label_file[i]) ||
        strchr(c.label_file[i], '/'))
      __builtin_trap();
  for (int i = 0; i < c.n_inputs; i++)
    if (c.inputs[i].ndim < 1 || c.inputs[i].ndim > VR_MAX_DIMS ||
        c.inputs[i].shape[0] != -1)
      __builtin_trap();
  /* a sample's size (vr_tensor_info_row_bytes, what the runtime allocates
   * and checks requests by) is bounded as config.json's: 2^28 elements */
  for (int i = 0; i < c.n_inputs + c.n_outputs; i++) {
    const vr_tensor_info *t = i < c.n_inputs ? &c.inputs[i] : &c.outputs[i - c.n_inputs];
    int64_t row = 1;
    for (int d = 1; d < t->ndim; d++)
      if (__builtin_mul_overflow(row, t->shape[d], &row) || row > ((int64_t)1 << 28))
        __builtin_trap();
  }
  return 0;
}
