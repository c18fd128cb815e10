/* libFuzzer harness for the simulator config loader (and profile JSON).
 * Configs that parse and describe a small synthetic run are also run, so
 * the simulator itself sees odd but valid inputs. */
#include <stddef.h>
#include <stdint.h>

#include "sim/sim.h"

static int small(const vr_sim_cfg *c) {
  if (c->duration_s > 5 || c->nstreams > 4 || c->nprofiles > 16) return 0;
  for (size_t i = 0; i < c->nwtypes; i++)
    if (c->wtypes[i].initial > 4 || c->wtypes[i].max < 1 ||
        c->wtypes[i].max > 8)
      return 0;
  for (size_t i = 0; i < c->nstreams; i++) {
    const vr_workload *w = &c->streams[i];
    if (w->kind == VR_WL_COUNTS || w->kind == VR_WL_TRACE) return 0;
    if (w->rate > 2000 || w->base > 1000 || w->nspikes > 2 || w->npts > 64)
      return 0;
    for (int k = 0; k < w->npts; k++)
      if (w->pts[k].rate > 2000) return 0;
    for (int k = 0; k < w->nspikes; k++)
      if (w->spikes[k].mult > 2) return 0;
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vr_sim_cfg cfg;
  vr_errbuf err;
  if (vr_sim_cfg_parse((const char *)data, size, "fuzz.json",
                       "/nonexistent-vario", NULL, NULL, &cfg, &err))
    return 0;
  if (small(&cfg)) {
    vr_sim_summary s;
    vr_sim_out out = {0};
    vr_sim_run(&cfg, &out, &s, &err);
  }
  vr_sim_cfg_free(&cfg);
  return 0;
}
