/* libFuzzer harness for the KServe v2 gRPC request check (grpc_req.c):
 * the input is a serialised inference.ModelInferRequest; what protobuf-c
 * unpacks goes through vr__grpc_to_ks, which must answer every message
 * with a request or a clear error, and whose accepted inputs must have
 * exactly the bytes their shape and datatype need. Seeds: the text-form
 * messages in seeds/grpcreq, encoded by gen_grpcreq_seeds.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/grpc_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Inference__ModelInferRequest *q =
      inference__model_infer_request__unpack(NULL, size, data);
  if (!q) return 0;
  vr_ks_request ks;
  vr_errbuf err = {0};
  int rc = vr__grpc_to_ks(q, &ks, &err);
  if (rc && !err.msg[0]) abort(); /* an error must say why */
  if (!rc) {
    if (ks.n_in < 1 || ks.n_in > VR_RT_MAX_IO) abort();
    for (int i = 0; i < ks.n_in; i++) {
      const vr_ks_input *t = &ks.in[i];
      size_t n = 1;
      for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
      if (t->nbytes != n * vr_dtype_size(t->dtype)) abort();
      /* every byte is readable (ASan checks the touch) */
      volatile uint8_t sum = 0;
      for (size_t k = 0; k < t->nbytes; k++) sum += ((const uint8_t *)t->data)[k];
      (void)sum;
    }
  }
  vr_ks_request_free(&ks);
  inference__model_infer_request__free_unpacked(q, NULL);
  return 0;
}
