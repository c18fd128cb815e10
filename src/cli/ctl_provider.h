/*
 * The controller's use of a worker provider (cluster/provider.h), kept in
 * its own file so the controller's registry code and the provider's types
 * never meet in one translation unit. Ownership: ctl_prov owns the
 * provider; strings passed in are borrowed for the call.
 */
#ifndef VR_CLI_CTL_PROVIDER_H
#define VR_CLI_CTL_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "vario/status.h"

typedef struct ctl_prov ctl_prov;

/* kind "local" or "kubernetes", "key=value" options (provider.h). */
int ctl_prov_open(const char *kind, const char *const *opts, size_t nopts, ctl_prov **out,
                  vr_errbuf *err);
void ctl_prov_close(ctl_prov *p);
/* Starts one worker named id (the name it registers under) with args;
 * controller_url (http://HOST:PORT, may be NULL) is where it fetches
 * models. */
int ctl_prov_start(ctl_prov *p, const char *id, int ncpus, const char *controller_url,
                   const char *const *args, size_t nargs, vr_errbuf *err);

/* Asks worker id to stop (asynchronous: poll sees it go). VR_ENOENT for
 * a worker this provider does not manage. */
int ctl_prov_stop(ctl_prov *p, const char *id, vr_errbuf *err);

/* Adopts a registered worker that an earlier controller's provider
 * started and left running (that controller crashed): meta is its
 * registry meta ({"pid":N,"cores":"LIST",...}). 0 = adopted now; else
 * VR_EEXIST (the provider knows it), VR_ENOENT (not a worker this
 * provider would have started on this host), VR_EUNSUPPORTED (the
 * provider lists its workers itself), VR_EINVAL (no pid in meta). */
int ctl_prov_adopt(ctl_prov *p, const char *id, const char *meta, vr_errbuf *err);

/* What became of the provider's workers: *starting = running but not in
 * `live` (ids registered in the registry) and started, or last seen
 * live, less than start_timeout_ms ago (so a registry that lost its data
 * does not get the running workers replaced before they re-register);
 * died[] = ids that exited without being asked to (reported once, then
 * forgotten). */
int ctl_prov_poll(ctl_prov *p, const char *const *live, size_t nlive, int64_t start_timeout_ms,
                  int *starting, char (*died)[64], int *n_died, int max_died, vr_errbuf *err);

#endif
