/* Removing a model from a running control plane (DELETE
 * /v2/apps/{app}/models/{m}). */
#include <stdio.h>

#include "base/alloc.h"
#include "base/log.h"
#include "control/control.h"
#include "control/control_int.h"
#include "control/register.h"

int vr_control_unregister(vr_control *c, const char *model, vr_errbuf *err) {
  int rc = vr_unregister(c->o.store, model, err);
  if (rc) return rc;
  /* The variants leave the routing table first: no new query reaches
   * them; then the runtime drains what they hold and frees them. */
  rc = vr_control_reload_store(c, err);
  vr_errbuf e2 = {0};
  int u = vr_rt_unload(c->o.rt, model, &e2);
  if (u && u != VR_ENOENT && !rc) { /* ENOENT: it was never loaded */
    *err = e2;
    rc = u;
  }
  return rc;
}

/* Picks up what another process did to the store while the server runs
 * (`vario register`, `vario register --remove`): when the store changed,
 * the variants are reloaded (a removed model leaves the routing table) and
 * the runtime models that were registered and are gone are drained and
 * freed. Models the server loaded by name (KServe repository API) are not
 * the store's and are left alone. Control thread, once per period. */
void vr__control_sync_store(vr_control *c) {
  vr_store *s = c->o.store;
  size_t n = 0;
  char (*before)[VR_STORE_NAME_MAX] = NULL;
  vr_store_rdlock(s);
  size_t nm = vr_store_num_models(s);
  before = nm ? vr_malloc(nm * sizeof *before) : NULL;
  for (size_t i = 0; before && i < nm; i++)
    snprintf(before[n++], sizeof before[0], "%s", vr_store_model_at(s, i)->name);
  vr_store_unlock(s);
  int changed = 0;
  vr_errbuf err = {0};
  if (vr_store_refresh(s, &changed, &err)) vr_warn("store refresh: %s", err.msg);
  if (changed && vr_control_reload_store(c, &err)) vr_warn("store reload: %s", err.msg);
  for (size_t i = 0; changed && i < n; i++) {
    vr_store_rdlock(s);
    int gone = vr_store_model(s, before[i]) == NULL;
    vr_store_unlock(s);
    vr_errbuf e2 = {0};
    if (gone && vr_rt_unload(c->o.rt, before[i], &e2) == 0)
      vr_info("control: model '%s' removed from the store: unloaded", before[i]);
  }
  vr_free(before);
}
