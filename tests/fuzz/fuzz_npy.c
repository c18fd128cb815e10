/* libFuzzer harness for the .npy parser. */
#include <stdint.h>
#include <stddef.h>

#include "base/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vr_npy n;
  vr_errbuf err;
  if (vr_npy_parse(data, size, &n, &err) == 0) {
    /* Touch the payload so ASan sees any size lie. */
    uint8_t sum = 0;
    for (size_t i = 0; i < n.nbytes; i++) sum += ((uint8_t *)n.data)[i];
    __asm__ volatile("" : : "r"(sum));
    vr_npy_free(&n);
  }
  return 0;
}
