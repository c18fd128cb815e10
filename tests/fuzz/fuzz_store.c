/* Metadata store files: arbitrary bytes as the SQLite file must be either
 * loaded (then every index is walked) or rejected with a message — never a
 * crash, a leak or a half-built store. Seeds: small valid stores. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "control/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/vr_fuzz_store_%d.db", (int)getpid());
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  fwrite(data, 1, size, f);
  fclose(f);
  vr_store *s = NULL;
  vr_errbuf err = {0};
  if (vr_store_open_path(path, &s, &err) == 0) {
    for (size_t i = 0; i < vr_store_num_apps(s); i++) {
      size_t n;
      const char *app = vr_store_app_at(s, i);
      const vr_variant_rec *const *v = vr_store_app_variants(s, app, VR_ORDER_LATENCY, &n);
      for (size_t k = 0; k < n; k++)
        if (!vr_store_variant(s, v[k]->name) || !vr_store_model(s, v[k]->model))
          __builtin_trap(); /* the index must be consistent */
      vr_store_app_count_accurate(s, app, 50);
    }
    vr_store_close(s);
  } else if (!err.msg[0]) {
    __builtin_trap(); /* a rejection must say why */
  }
  unlink(path);
  char j[80];
  snprintf(j, sizeof j, "%s-journal", path);
  unlink(j);
  return 0;
}
