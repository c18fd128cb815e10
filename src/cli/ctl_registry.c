/* The controller's reading of the registry each period (issue 18): who
 * is listed, who is kept through a grace after Redis came back without
 * them, who is gone, and when a period's reads cannot be trusted. The
 * period itself is tick() in cmd_controller.c. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "cli/ctl_int.h"

static int has_id(const vr_worker_info *ws, size_t n, const char *id) {
  for (size_t k = 0; k < n; k++)
    if (!strcmp(ws[k].id, id)) return 1;
  return 0;
}

static int has_left(const vr_worker_left *left, size_t n, const char *id) {
  for (size_t k = 0; k < n; k++)
    if (!strcmp(left[k].id, id)) return 1;
  return 0;
}

int vr__ctl_is_dead(const ctl *c, const char *id) {
  for (int i = 0; i < c->n_dead; i++)
    if (!strcmp(c->dead[i], id)) return 1;
  return 0;
}

/* When the grace of c->w[i], missing from the registry, ends: a lease
 * from when the registry came back, or from when it first went missing
 * within a grace, if it was kept already. Not renewed by the registry
 * coming back again while it is kept: a Redis that stalls again and again
 * kept a dead worker for as long. */
int64_t vr__ctl_grace_end(const ctl *c, size_t i) {
  return c->wkept_end[i] ? c->wkept_end[i] : c->back_ns + c->w[i].lease_ms * 1000000;
}

/* Workers the last period saw that the registry no longer lists, within
 * one of their leases from when the registry came back (c->back_ns):
 * after Redis restarted empty, or stalled past the leases, a live worker
 * is registered again by its next heartbeat (a lease spans two or more),
 * and a controller that read the registry before that published a table
 * without the worker (front ends answered 503 "no worker serves") and
 * placed its models again. They are kept as they were, appended to ws (room
 * for MAXW), until then; one not back by the end of its lease is gone like
 * any expired lease. One that deregistered (its tombstone is in left) is
 * gone at once: it said so. prev[k]: the index in c->w of a kept ws[k], -1
 * for a listed one. Under mu. */
size_t vr__ctl_keep_missing(ctl *c, vr_worker_info *ws, size_t n, int *prev,
                           const vr_worker_left *left, size_t nleft, int64_t now) {
  for (size_t k = 0; k < n; k++) prev[k] = -1;
  for (size_t i = 0; c->back_ns && i < c->nw && n < MAXW; i++) {
    int64_t end = vr__ctl_grace_end(c, i);
    if (now >= end || has_id(ws, n, c->w[i].id) || vr__ctl_is_dead(c, c->w[i].id) ||
        has_left(left, nleft, c->w[i].id))
      continue;
    ws[n] = c->w[i];
    ws[n].lease_left_ms = (end - now) / 1000000;
    prev[n++] = (int)i;
  }
  for (size_t i = 1; i < n; i++) /* by id, as listed (a stable table) */
    for (size_t j = i; j > 0 && strcmp(ws[j - 1].id, ws[j].id) > 0; j--) {
      vr_worker_info t = ws[j];
      ws[j] = ws[j - 1];
      ws[j - 1] = t;
      int p = prev[j];
      prev[j] = prev[j - 1];
      prev[j - 1] = p;
    }
  return n;
}

/* Who came, who went (a lease that ended: the worker stopped heartbeating;
 * kept: missing within the grace), against the last period's c->w. Only
 * for a period that is taken: a dropped one is read again, and logged
 * then. Under mu. */
void vr__ctl_log_changes(ctl *c, const vr_worker_info *ws, size_t n, const int *prev) {
  for (size_t i = 0; i < c->nw; i++)
    if (!has_id(ws, n, c->w[i].id))
      vr__ctl_event(c, "worker %s gone (lease ended or deregistered)", c->w[i].id);
  for (size_t k = 0; k < n; k++) {
    if (prev[k] >= 0) {
      if (!c->wkept_end[prev[k]])
        vr__ctl_event(c, "worker %s missing from the registry since it came back: kept for up "
                      "to %lld ms (a lease) to register again", ws[k].id,
                      (long long)ws[k].lease_left_ms);
      continue;
    }
    size_t i = 0;
    while (i < c->nw && strcmp(ws[k].id, c->w[i].id)) i++;
    if (i == c->nw) vr__ctl_event(c, "worker %s up at %s", ws[k].id, ws[k].addr);
    else if (c->wkept_end[i]) vr__ctl_event(c, "worker %s registered again", ws[k].id);
  }
}

/* The instance lists of the listed workers ws[k] (prev[k] < 0; a kept
 * one is not in the registry) into got/ngot. All or none when Redis
 * cannot be read (it went away after the listing: VR_EIO), or when a
 * listed worker is no longer live (VR_ENOENT): its lease ended after the
 * listing, e.g. when Redis ran the listing, stopped before it sent the
 * reply and resumed past the leases. Either list is unknown, not empty,
 * and taken as empty it routed the worker nothing and placed its models
 * again. A damaged list is one worker's fault: it holds nothing, as
 * before. */
int vr__ctl_read_instances(ctl *c, const vr_worker_info *ws, size_t n, const int *prev,
                          vr_instance_info **got, size_t *ngot, vr_errbuf *err) {
  int rc = 0;
  for (size_t k = 0; k < n; k++) {
    got[k] = NULL;
    ngot[k] = 0;
    if (rc || prev[k] >= 0) continue;
    int r = vr_registry_instances(c->reg, ws[k].id, &got[k], &ngot[k], err);
    if (r == VR_EIO || r == VR_ENOENT) rc = r;
  }
  for (size_t k = 0; rc && k < n; k++) {
    vr_free(got[k]); /* none is handed back: got[k] NULL, as the header says */
    got[k] = NULL;
    ngot[k] = 0;
  }
  return rc;
}

/* Whether Redis kept the controller waiting long enough (waited_ns, its
 * longest call since the last period) that a lease may have ended
 * meanwhile for want of a heartbeat getting through: a worker's key
 * outlives any stall shorter than its lease less its heartbeat period
 * (a vario worker beats twice a lease, registry.h asks at least that),
 * so a quarter of the shortest lease leaves room for a heartbeat that
 * was itself late. Under mu. */
int vr__ctl_stalled(const ctl *c, int64_t waited_ns) {
  for (size_t i = 0; i < c->nw; i++)
    if (waited_ns > c->w[i].lease_ms * 1000000 / 4) return 1;
  return 0;
}

/* vr__ctl_stalled() over the calls since the listing (their longest wait is
 * taken: a period dropped for it is back anyway). */
int vr__ctl_stalled_since(ctl *c, vr_redis *rd) {
  int64_t waited = vr_redis_take_wait_ns(rd);
  pthread_mutex_lock(&c->mu);
  int s = vr__ctl_stalled(c, waited);
  pthread_mutex_unlock(&c->mu);
  return s;
}

/* The registry could not be read this period: the last state stands (said
 * once, when it was reachable). Under mu. */
void vr__ctl_registry_lost(ctl *c, const char *why) {
  if (c->registry_ok) vr__ctl_event(c, "registry unreachable (%s); keeping the last state", why);
  c->registry_ok = 0;
}
