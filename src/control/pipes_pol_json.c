/* GET /v2/pipelines/{p}'s "policy" object (vr__pipe_pol_json): the plan in
 * force per task (variants, instances, batch sizes, budgets), the last
 * solve's outcome and the history rows the policy thread records. Read
 * under the pipe's mutex; the thread that writes them is pipes_policy.c. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "control/pipes_pol.h"

static json_t *row_json(const pl_row *r) {
  json_t *j = json_pack("{s:f, s:f, s:f, s:i, s:f, s:b, s:b, s:s, s:I, s:I, s:I, s:I, s:I}",
                        "t_s", r->t_s, "demand_qps", r->demand, "demand_ewma", r->ewma,
                        "workers", r->workers, "plan_accuracy", r->plan_acc, "accuracy_scaled",
                        r->scaled, "feasible", r->feasible, "variants", r->variants,
                        "requests", (json_int_t)r->req, "met", (json_int_t)r->met,
                        "dropped", (json_int_t)r->dropped, "early_dropped",
                        (json_int_t)r->early, "rerouted", (json_int_t)r->rerouted);
  json_object_set_new(j, "slo_attainment",
                      r->req ? json_real((double)r->met / (double)r->req) : json_null());
  json_object_set_new(j, "accuracy", isnan(r->accuracy) ? json_null() : json_real(r->accuracy));
  return j;
}

static json_t *plan_json(const pl_pol *pol) {
  const vr_pipeline *v = pol->view;
  const vr_pipe_plan *pl = &pol->plan;
  const vr_pipe_routes *r = pol->have_routes ? &pol->routes : NULL;
  json_t *tasks = json_array(), *backup = json_array();
  for (int t = 0; t < v->ntasks; t++) {
    json_t *vs = json_array();
    for (int k = 0; k < v->tasks[t].nvariants; k++) {
      int s = pl->off[t] + k;
      const vr_pipe_alloc *a = &pl->a[s];
      if (a->inst <= 0 && !(pol->slot_n[s] > 0)) continue;
      json_t *x = json_pack("{s:s, s:f, s:i, s:i, s:f, s:f, s:i}", "variant",
                            v->tasks[t].variants[k].name, "accuracy",
                            v->tasks[t].variants[k].accuracy, "instances", a->inst, "batch",
                            a->batch, "lat_ms", a->lat_ms, "multiplicative_factor",
                            v->tasks[t].variants[k].mult, "serving", pol->slot_n[s]);
      if (pol->slot_remote) /* following the controller: held by other workers */
        json_object_set_new(x, "remote", json_boolean(pol->slot_remote[s]));
      if (pol->slot_cap && pol->slot_cap[s] > 0) /* the batch cap of its instance here */
        json_object_set_new(x, "batch_cap", json_integer(pol->slot_cap[s]));
      if (r) {
        json_object_set_new(x, "budget_ms", json_real(vr_pipe_budget_ms(pl, r, s)));
        json_object_set_new(x, "incoming_qps", json_real(r->incoming[s]));
        json_object_set_new(x, "spare_qps", json_real(r->spare[s]));
        if (a->inst > 0 && r->spare[s] > 0)
          json_array_append_new(backup, json_pack("{s:s, s:s, s:f, s:f}", "task",
                                                  v->tasks[t].name, "variant",
                                                  v->tasks[t].variants[k].name, "spare_qps",
                                                  r->spare[s], "lat_ms", a->lat_ms));
      }
      json_array_append_new(vs, x);
    }
    json_array_append_new(tasks, json_pack("{s:s, s:o}", "task", v->tasks[t].name, "variants", vs));
  }
  json_t *plan = json_pack("{s:f, s:f, s:i, s:b, s:b, s:o}", "demand_qps", pl->demand_qps,
                           "accuracy", pl->accuracy, "workers", pl->workers, "accuracy_scaled",
                           pl->accuracy_scaled, "feasible", pl->feasible, "tasks", tasks);
  json_t *routing = json_object();
  if (r) {
    json_t *front = json_array();
    for (int k = 0; k < v->tasks[0].nvariants; k++)
      if (r->front[k] > 0)
        json_array_append_new(front, json_pack("{s:s, s:f}", "variant",
                                               v->tasks[0].variants[k].name, "p", r->front[k]));
    json_object_set_new(routing, "front", front);
    json_t *tables = json_array();
    for (int c = 1; c < v->ntasks; c++) {
      int par = v->tasks[c].parent, nc = v->tasks[c].nvariants;
      for (int pv = 0; pv < v->tasks[par].nvariants; pv++) {
        if (pl->a[pl->off[par] + pv].inst <= 0) continue;
        json_t *to = json_array();
        for (int k = 0; k < nc; k++) {
          double pr = r->table[r->toff[c] + pv * nc + k];
          if (pr > 0)
            json_array_append_new(to, json_pack("{s:s, s:f}", "variant",
                                                v->tasks[c].variants[k].name, "p", pr));
        }
        json_array_append_new(tables, json_pack("{s:s, s:s, s:s, s:o}", "task",
                                                v->tasks[c].name, "parent_task",
                                                v->tasks[par].name, "parent_variant",
                                                v->tasks[par].variants[pv].name, "to", to));
      }
    }
    json_object_set_new(routing, "tables", tables);
    json_object_set_new(routing, "expected_accuracy", json_real(r->accuracy));
    json_object_set_new(routing, "budget_scale", json_real(r->budget_scale));
  }
  return json_pack("{s:o, s:o, s:o}", "plan", plan, "routing", routing, "backup", backup);
}

json_t *vr__pipe_pol_json(vr_pipes *ps, pl_pipe *pp) {
  const pl_pol *pol = pp->pol;
  if (!ps->pdef && pol && pol->follow) { /* the controller's plan (vr_pipes_follow) */
    json_t *j = json_pack("{s:s, s:s, s:s, s:f}", "name", "controller", "drop_mode",
                          vr_edrop_name(pol->drop_mode), "state",
                          pol->have_routes ? "planned" : "no plan yet", "demand_ewma", pol->ewma);
    json_object_set_new(j, "rerouted", json_integer((json_int_t)pol->rerouted));
    json_object_set_new(j, "early_dropped", json_integer((json_int_t)pol->early));
    json_object_set_new(j, "no_instance", json_integer((json_int_t)pol->no_instance));
    json_object_set_new(j, "batch_caps_set", json_integer((json_int_t)pol->batch_set));
    if (pol->have_plan) json_object_update_new(j, plan_json(pol));
    return j;
  }
  if (!ps->pdef) return NULL;
  json_t *j = json_pack("{s:s, s:s, s:f, s:f, s:f, s:f}", "name", ps->pdef->name, "drop_mode",
                        vr_edrop_name(ps->pdef->drop_mode), "period_s", ps->popts.period_s,
                        "tick_s", ps->popts.tick_s, "change", ps->popts.change, "slack",
                        ps->popts.slack);
  if (!pol) { /* (pp->mu held: nopol is written under it) */
    json_object_set_new(j, "state", json_string(pp->nopol[0] ? "not planned (hops routed by "
                                                "selection)" : "waiting for the first tick"));
    if (pp->nopol[0]) json_object_set_new(j, "reason", json_string(pp->nopol));
    return j;
  }
  json_object_set_new(j, "state", json_string(pol->have_routes ? "planned" : "no plan yet"));
  json_object_set_new(j, "demand_qps", json_real(pol->last_qps));
  json_object_set_new(j, "demand_ewma", json_real(pol->ewma));
  json_object_set_new(j, "workers", json_integer(pol->workers));
  json_object_set_new(j, "threads_per_worker", json_integer(pol->threads));
  json_object_set_new(j, "replans", json_integer(pol->replans));
  json_object_set_new(j, "solve_failures", json_integer(pol->solve_fail));
  json_object_set_new(j, "last_solve_ms", json_real(pol->last_solve_ms));
  if (pol->last_err[0]) json_object_set_new(j, "last_error", json_string(pol->last_err));
  json_object_set_new(j, "loads_failed", json_integer((json_int_t)pol->loads_failed));
  if (pol->load_err[0]) json_object_set_new(j, "last_load_error", json_string(pol->load_err));
  json_object_set_new(j, "early_dropped", json_integer((json_int_t)pol->early));
  json_object_set_new(j, "rerouted", json_integer((json_int_t)pol->rerouted));
  json_object_set_new(j, "no_instance", json_integer((json_int_t)pol->no_instance));
  if (pol->have_plan) json_object_update_new(j, plan_json(pol));
  json_t *h = json_array();
  int from = pol->nhist > 60 ? pol->nhist - 60 : 0; /* the last minute */
  for (int i = from; i < pol->nhist; i++)
    json_array_append_new(h, row_json(&pol->hist[(pol->hhead - pol->nhist + i + PL_HIST) % PL_HIST]));
  json_object_set_new(j, "history", h);
  return j;
}
