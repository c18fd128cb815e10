/* Internals of live pipelines under a pipeline policy (pipes_policy.c),
 * for the request path (pipes_run.c) and the JSON (pipes.c). Not for use
 * outside src/control/. */
#ifndef VR_CONTROL_PIPES_POL_H
#define VR_CONTROL_PIPES_POL_H

#include <jansson.h>

#include "control/pipes_int.h"
#include "policy/pipe_policy.h"

typedef struct pl_pol pl_pol;

/* A hop to route by the plan. */
typedef struct pl_pick_in {
  int task;
  int parent_slot;          /* the parent hop's slot; -1 for the root */
  double parent_budget_sum; /* budgets of the path up to the parent's task */
  double elapsed_ms;        /* since the request arrived */
  double spent_ms;          /* at the parent's task (queue + run) */
  double slo_ms;            /* the request's end-to-end SLO */
  int drop_mode;            /* vr_edrop_mode */
  double u;                 /* uniform in [0,1) */
} pl_pick_in;

typedef struct pl_pick {
  int slot;        /* view slot chosen (after a reroute), -1 none */
  int instance_id; /* -1: no instance serves the task now */
  int verdict;     /* vr_hop_verdict */
  double budget_sum, behind_ms;
  char model[64];
  char variant[128];
  double accuracy;
} pl_pick;

/* Routes one hop by the routing tables and the per-hop rule (pipe_plan.h).
 * -1 when the pipeline has no plan in force (route it as without a
 * policy), else 0 with *out filled. Caller holds pp->mu. */
int vr__pipe_pol_pick(pl_pipe *pp, const pl_pick_in *in, pl_pick *out);
/* The policy's state for GET /v2/pipelines/{p} (plan, routing, backup,
 * history), or NULL without a policy. Caller holds pp->mu. */
json_t *vr__pipe_pol_json(vr_pipes *ps, pl_pipe *pp);

#endif
