/* Classification label files (runtime/labels.h): arbitrary bytes are read
 * into labels or rejected with a message, never a crash or a leak; every
 * label is a NUL-terminated string holding no line end. */
#include <stdint.h>
#include <string.h>

#include "runtime/labels.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vr_labels *l;
  vr_errbuf err = {0};
  int64_t classes = size ? data[0] % 4 : 0; /* 0: any count */
  if (vr_labels_parse((const char *)data, size, "fuzz", classes, &l, &err)) {
    if (!err.msg[0] || l) __builtin_trap();
    return 0;
  }
  int64_t n = vr_labels_count(l);
  if (n < 1 || (classes && n != classes) || vr_labels_get(l, n) ||
      vr_labels_get(l, -1))
    __builtin_trap();
  for (int64_t i = 0; i < n; i++)
    if (strchr(vr_labels_get(l, i), '\n')) __builtin_trap();
  vr_labels_retain(l);
  vr_labels_release(l);
  vr_labels_release(l);
  return 0;
}
