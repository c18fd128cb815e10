/* Removing a model from a running control plane (DELETE
 * /v2/apps/{app}/models/{m}). */
#include "control/control.h"
#include "control/register.h"
#include "control/control_int.h"

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
