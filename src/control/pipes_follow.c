/* Live pipelines following a plan made elsewhere (pipes.h, "following
 * the controller"): `vario controller --pipeline-policy` runs the policy
 * over the cluster and publishes its plan; each worker maps it onto its
 * own planning view, builds the same routing and backup tables, and
 * routes hops by them (vr__pipe_pol_pick, the same per-hop rule as under
 * a local policy): to an instance on this worker when it holds one of the
 * chosen variant, else to the workers that do (vr_pipes_set_remote). */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "control/pipes_pol.h"

void vr_pipes_set_remote(vr_pipes *p, vr_pipes_remote_fn fn, vr_pipes_remote_has_fn has,
                         void *user) {
  p->remote = fn;
  p->remote_has = has;
  p->remote_user = user;
}

/* Slot -> local ready instances (of the slot's model), and which slots
 * only other workers hold. Caller holds pp->mu. */
static void slot_lists(vr_pipes *ps, pl_pol *pol) {
  memset(pol->slot_n, 0, (size_t)pol->nslots * sizeof *pol->slot_n);
  vr_rt_instance_stats st[64];
  for (int s = 0; s < pol->nslots; s++) {
    int n = vr_rt_instances(ps->rt, pol->slot_model[s], st, 64);
    for (int i = 0; i < n && i < 64 && pol->slot_n[s] < PL_SLOT_INST; i++)
      if (st[i].state == VR_INST_ACTIVE || st[i].state == VR_INST_OVERLOADED)
        pol->slot_ids[s * PL_SLOT_INST + pol->slot_n[s]++] = st[i].id;
    pol->slot_remote[s] = pol->have_plan && pol->plan.a[s].inst > 0 && pol->slot_n[s] == 0 &&
                          ps->remote && ps->remote_has &&
                          ps->remote_has(ps->remote_user, pol->slot_model[s]);
  }
}

static int start_follow(vr_pipes *ps, pl_pipe *pp, vr_errbuf *err) {
  pl_pol *pol = NULL;
  int rc = vr__pipe_pol_build_view(ps, pp, &pol, err);
  if (rc) return rc;
  pol->follow = 1;
  pol->slot_remote = vr_calloc((size_t)pol->nslots, 1);
  if (!pol->slot_remote) {
    vr__pipe_pol_free(pol);
    return vr_errf(err, VR_ENOMEM, "out of memory");
  }
  pthread_mutex_lock(&pp->mu);
  pp->pol = pol;
  pthread_mutex_unlock(&pp->mu);
  return 0;
}

int vr_pipes_follow(vr_pipes *ps, const char *name, const char *plan, size_t len,
                    vr_errbuf *err) {
  if (ps->pdef) return vr_errf(err, VR_ESTATE, "this server runs its own pipeline policy");
  pl_pipe *pp = vr__pipes_get(ps, name);
  if (!pp) return vr_errf(err, VR_ENOENT, "no registered pipeline named '%.100s'", name);
  int rc = pp->pol ? 0 : start_follow(ps, pp, err);
  pl_pol *pol = pp->pol;
  if (!rc && vr__pipe_pol_refresh_slots(ps, pol))
    rc = vr_errf(err, VR_ENOENT, "pipeline '%s': a variant is no longer served", name);
  vr_pipe_plan next = {0};
  vr_pipe_routes routes = {0};
  double ewma = 0;
  int drop = 0, have = 0;
  if (!rc && plan) {
    rc = vr_pipe_plan_init(&next, pol->view);
    if (!rc) rc = vr_pipe_plan_parse_text(pol->view, plan, len, &next, &ewma, &drop, err);
    if (!rc && vr_pipe_route_build(pol->view, &next, ewma, &routes))
      rc = vr_errf(err, VR_ENOMEM, "out of memory");
    have = !rc;
  }
  pthread_mutex_lock(&pp->mu);
  if (have) {
    vr_pipe_plan_free(&pol->plan);
    pol->plan = next; /* moved */
    if (pol->have_routes) vr_pipe_routes_free(&pol->routes);
    pol->routes = routes;
    pol->have_plan = pol->have_routes = 1;
    pol->ewma = ewma;
    pol->drop_mode = drop;
  }
  if (pol) slot_lists(ps, pol);
  pthread_mutex_unlock(&pp->mu);
  if (!have) vr_pipe_plan_free(&next);
  vr__pipe_unref(pp);
  return rc;
}

int vr_pipes_names(vr_pipes *p, char (*names)[VR_PIPE_NAME_MAX], int cap) {
  pthread_mutex_lock(&p->mu);
  size_t it = 0;
  const char *k;
  void *v;
  int n = 0;
  while (vr_map_next(&p->by_name, &it, &k, &v)) {
    if (n < cap) snprintf(names[n], VR_PIPE_NAME_MAX, "%s", k);
    n++;
  }
  pthread_mutex_unlock(&p->mu);
  return n;
}
