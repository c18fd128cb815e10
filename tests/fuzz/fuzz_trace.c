/* libFuzzer harness for the Proteus trace line parser: the input is split
 * into lines as the streaming reader does. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sim/workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *p = (const char *)data, *end = p + size;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    vr_trace_rec r;
    vr_errbuf err;
    int rc = vr_trace_parse_line(p, len, &r, &err);
    if (rc == 1 && !(r.deadline_ms > 0 && r.arrival_ms >= 0)) __builtin_trap();
    p += len + 1;
  }
  return 0;
}
