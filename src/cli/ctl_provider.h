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

/* What ctl_prov_poll judges the provider's workers by. */
typedef struct ctl_prov_view {
  const char *const *live;  /* ids registered in the registry now */
  const int64_t *lease_ms;  /* their leases, parallel to live */
  size_t nlive;
  int64_t start_timeout_ms; /* a started worker registers within it */
  int64_t lost_timeout_ms;  /* one that had registered and dropped out is
                               back within it (and two of its leases) */
  int64_t back_ns;          /* when the registry was last back after a loss
                               or stall (vr_now_ns; 0: never) */
} ctl_prov_view;

/* What ctl_prov_poll saw. died and stopped point at the caller's arrays
 * of max entries each. */
typedef struct ctl_prov_out {
  int starting;        /* running, not registered, within their grace */
  char (*died)[64];    /* exited without being asked to (reported once) */
  int n_died;
  char (*stopped)[160]; /* asked to stop now, each with the reason */
  int n_stopped;
  int max;
} ctl_prov_out;

/* What became of the provider's workers. A running worker not in
 * v->live is stopped (and so replaced by the plan) once it has been out
 * too long: one that never registered, start_timeout_ms after its start
 * (or after the registry was last back, when later);
 * one that had registered (hung, stopped, cut off from the registry: its
 * queries wait in its sockets), lost_timeout_ms or two of its leases,
 * whichever is longer, after it or the registry was last seen (so that a
 * registry that lost its data or stalled does not get the running
 * workers replaced before they re-register). Until then it counts in
 * o->starting. */
int ctl_prov_poll(ctl_prov *p, const ctl_prov_view *v, ctl_prov_out *o, vr_errbuf *err);

#endif
