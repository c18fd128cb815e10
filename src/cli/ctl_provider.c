/* The controller's provider glue (ctl_provider.h). */
#include "cli/ctl_provider.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/log.h"
#include "cluster/provider.h"

/* When each provider worker was last seen registered, and with what
 * lease: one that drops out of the registry while its process runs is
 * given a grace from then (ctl_provider.h) to come back before it is
 * replaced, as a new one is from its start. */
#define CTL_SEEN_MAX 256
typedef struct seen_rec {
  char id[64];
  int64_t at_ns;
  int64_t lease_ms; /* > 0: it has been seen registered */
  int stopped;      /* asked to stop for not registering in time */
} seen_rec;

struct ctl_prov {
  vr_provider *p;
  seen_rec seen[CTL_SEEN_MAX];
  int nseen;
};

static seen_rec *seen_of(ctl_prov *c, const char *id, int add) {
  for (int i = 0; i < c->nseen; i++)
    if (!strcmp(c->seen[i].id, id)) return &c->seen[i];
  if (!add) return NULL;
  int k = 0;
  if (c->nseen < CTL_SEEN_MAX) k = c->nseen++;
  else /* full: the slot seen longest ago goes */
    for (int i = 1; i < CTL_SEEN_MAX; i++)
      if (c->seen[i].at_ns < c->seen[k].at_ns) k = i;
  snprintf(c->seen[k].id, sizeof c->seen[k].id, "%s", id);
  c->seen[k].at_ns = 0;
  c->seen[k].lease_ms = 0;
  c->seen[k].stopped = 0;
  return &c->seen[k];
}

static void forget_seen(ctl_prov *c, const char *id) {
  seen_rec *r = seen_of(c, id, 0);
  if (r) *r = c->seen[--c->nseen];
}

int ctl_prov_open(const char *kind, const char *const *opts, size_t nopts, ctl_prov **out,
                  vr_errbuf *err) {
  ctl_prov *c = VR_NEW(ctl_prov);
  if (!c) return vr_errf(err, VR_ENOMEM, "out of memory");
  int rc = vr_provider_open(kind, opts, nopts, &c->p, err);
  if (rc) {
    vr_free(c);
    return rc;
  }
  *out = c;
  return 0;
}

void ctl_prov_close(ctl_prov *c) {
  if (!c) return;
  vr_provider_destroy(c->p);
  vr_free(c);
}

int ctl_prov_start(ctl_prov *c, const char *id, int ncpus, const char *controller_url,
                   const char *const *args, size_t nargs, vr_errbuf *err) {
  vr_worker_spec s = {.name = id, .kind = "worker", .ncpus = ncpus,
                      .controller_url = controller_url, .args = args, .nargs = nargs};
  char got[64];
  return vr_provider_start(c->p, &s, got, sizeof got, err);
}

int ctl_prov_stop(ctl_prov *c, const char *id, vr_errbuf *err) {
  return vr_provider_stop(c->p, id, err);
}

int ctl_prov_adopt(ctl_prov *c, const char *id, const char *meta, vr_errbuf *err) {
  json_t *j = json_loads(meta ? meta : "", 0, NULL);
  json_t *pid = json_object_get(j, "pid"), *cores = json_object_get(j, "cores");
  int rc = json_is_integer(pid) && (!cores || json_is_string(cores))
               ? vr_provider_adopt(c->p, id, json_integer_value(pid),
                                   cores ? json_string_value(cores) : "", err)
               : vr_errf(err, VR_EINVAL, "worker %s: no pid in its registry meta", id);
  json_decref(j);
  return rc;
}

/* How long worker w, not registered now, may stay so before it is
 * stopped, and from when (ctl_provider.h). */
static int64_t out_since(const ctl_prov_view *v, const seen_rec *r, const vr_worker_info *w,
                         int64_t *grace_ns) {
  if (r && r->lease_ms > 0) {
    int64_t g = v->lost_timeout_ms > 2 * r->lease_ms ? v->lost_timeout_ms : 2 * r->lease_ms;
    *grace_ns = g * 1000000;
    return r->at_ns > v->back_ns ? r->at_ns : v->back_ns;
  }
  *grace_ns = v->start_timeout_ms * 1000000;
  int64_t since = r && r->at_ns > w->since_ns ? r->at_ns : w->since_ns;
  return since > v->back_ns ? since : v->back_ns;
}

static void stop_late(ctl_prov *c, seen_rec *r, const vr_worker_info *w, int64_t grace_ns,
                      ctl_prov_out *o) {
  /* Left running, every timeout would add one more worker: it goes, once
   * asked. Never registered: a bad image, no route to Redis, a hung
   * start. Registered before: hung or stopped, and the queries waiting
   * in its sockets are answered when it drains or dies (local: SIGTERM
   * with SIGCONT, SIGKILL after the grace), not at the front end's
   * timeout. */
  r->stopped = 1;
  if (!r->at_ns) r->at_ns = w->since_ns;
  char why[160];
  long long ms = (long long)(grace_ns / 1000000);
  if (r->lease_ms > 0)
    snprintf(why, sizeof why, "worker %s out of the registry for %lld ms while it runs (hung"
             " or stopped?): stopping it", w->id, ms);
  else
    snprintf(why, sizeof why, "worker %s not registered within %lld ms: stopping it", w->id, ms);
  if (o->n_stopped < o->max) memcpy(o->stopped[o->n_stopped++], why, sizeof why); /* an event */
  else vr_warn("controller: %s", why);
  vr_errbuf e2 = {0};
  if (vr_provider_stop(c->p, w->id, &e2)) vr_warn("controller: stopping %s: %s", w->id, e2.msg);
}

int ctl_prov_poll(ctl_prov *c, const ctl_prov_view *v, ctl_prov_out *o, vr_errbuf *err) {
  vr_worker_info *w = NULL;
  size_t n = 0;
  o->starting = o->n_died = o->n_stopped = 0;
  int rc = vr_provider_list(c->p, &w, &n, err);
  if (rc) return rc;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  for (size_t i = 0; i < n; i++) {
    size_t live = v->nlive;
    for (size_t k = 0; k < v->nlive && live == v->nlive; k++)
      if (!strcmp(v->live[k], w[i].id)) live = k;
    if (w[i].state == VR_PW_EXITED) {
      /* more deaths than died[] holds: the rest are reported (and only
       * then forgotten) at the next poll */
      if (w[i].unexpected && o->n_died >= o->max) continue;
      if (w[i].unexpected) snprintf(o->died[o->n_died++], 64, "%s", w[i].id);
      vr_errbuf e2 = {0};
      vr_provider_forget(c->p, w[i].id, &e2);
      forget_seen(c, w[i].id);
    } else if (live < v->nlive) {
      seen_rec *r = seen_of(c, w[i].id, 1);
      r->at_ns = now;
      /* the registry's word, bounded (a day) so that the grace's ns fit */
      int64_t lm = v->lease_ms[live];
      r->lease_ms = lm < 1 ? 1 : lm > 86400000 ? 86400000 : lm;
      r->stopped = 0;
    } else if (w[i].state == VR_PW_STARTING || w[i].state == VR_PW_RUNNING) {
      seen_rec *r = seen_of(c, w[i].id, 0);
      int64_t grace;
      int64_t since = out_since(v, r, &w[i], &grace);
      if (now - since < grace) o->starting++;
      else if ((r = seen_of(c, w[i].id, 1)) && !r->stopped) stop_late(c, r, &w[i], grace, o);
    }
  }
  vr_free(w);
  return 0;
}
