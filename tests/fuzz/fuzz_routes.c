/* Routing tables (server/fwd_table.c) as the controller publishes them in
 * Redis: arbitrary bytes are parsed into a table whose routes name only
 * listed workers, or rejected with a message; a parsed table writes back
 * to JSON that parses to the same table. Never a crash or a leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "server/fwd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vr_fwd_table t;
  vr_errbuf err = {0};
  if (vr_fwd_table_parse((const char *)data, size, 7, &t, &err)) {
    if (!err.msg[0]) __builtin_trap();
    return 0;
  }
  for (int r = 0; r < t.n_routes; r++)
    for (int k = 0; k < t.routes[r].n; k++)
      if (t.routes[r].workers[k] < 0 || t.routes[r].workers[k] >= t.n_workers)
        __builtin_trap();
  char *j = vr_fwd_table_json(&t);
  if (j) {
    vr_fwd_table u;
    if (vr_fwd_table_parse(j, strlen(j), 7, &u, &err)) __builtin_trap();
    if (u.n_workers != t.n_workers || u.n_routes != t.n_routes) __builtin_trap();
    for (int w = 0; w < t.n_workers; w++)
      if (strcmp(u.workers[w].id, t.workers[w].id) || u.workers[w].port != t.workers[w].port)
        __builtin_trap();
    vr_fwd_table_free(&u);
    vr_free(j);
  }
  vr_fwd_table_free(&t);
  return 0;
}
