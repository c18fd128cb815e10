/* The job description a shadow process reads from shared memory that
 * another process wrote (runtime/shm_pair.h): vr__shm_check_job must
 * accept only self-consistent jobs that fit the buffer. Input: an 8-byte
 * buffer capacity, then the raw vr__shm_job bytes (zero-padded). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/shm_pair.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint64_t cap = 0;
  vr__shm_job j;
  memset(&j, 0, sizeof j);
  if (size >= sizeof cap) {
    memcpy(&cap, data, sizeof cap);
    data += sizeof cap, size -= sizeof cap;
  }
  cap %= (uint64_t)1 << 32;
  memcpy(&j, data, size < sizeof j ? size : sizeof j);
  vr_errbuf e = {0};
  if (vr__shm_check_job(&j, cap, &e) == 0) {
    /* accepted: the bytes it describes fit and the name is a string */
    uint64_t n = vr_dtype_size((vr_dtype)j.dtype);
    for (int d = 0; d < j.ndim; d++) n *= (uint64_t)j.shape[d];
    if (n != j.nbytes || n > cap || strlen(j.name) >= sizeof j.name || j.shape[0] != j.rows)
      abort();
  } else if (!e.msg[0]) {
    abort(); /* a refusal always says why */
  }
  return 0;
}
