/* Internals of live pipelines under a pipeline policy (pipes_policy.c),
 * for the request path (pipes_run.c) and the JSON (pipes.c). Not for use
 * outside src/control/. */
#ifndef VR_CONTROL_PIPES_POL_H
#define VR_CONTROL_PIPES_POL_H

#include <jansson.h>

#include "control/pipes_int.h"
#include "policy/pipe_policy.h"

typedef struct pl_pol pl_pol;

#define PL_HIST 600         /* per-tick rows kept for GET (10 min at 1 s) */
#define PL_MIN_OBS 20       /* requests before a variant's factor is trusted */
#define PL_MAX_SLOTS (VR_PIPE_MAX_TASKS * VR_PIPE_MAX_VARIANTS)

typedef struct pl_row {
  double t_s, demand, ewma, accuracy, plan_acc;
  int workers, scaled, feasible;
  uint64_t req, met, dropped, early, rerouted;
  char variants[256]; /* per task: its variants with instances */
} pl_row;

struct pl_pol {
  vr_pipeline *view;  /* planning view (owned) */
  vr_profile *prof;   /* per view slot */
  int *slot_var;      /* per view slot: control variant index (per tick) */
  char (*slot_model)[64];
  int nslots;
  int threads;        /* cores per instance (the view's variants share it) */
  /* published for the request path (under pp->mu) */
  vr_pipe_plan plan;
  vr_pipe_routes routes;
  int have_routes;
  int *slot_ids;      /* per slot, up to PL_SLOT_INST instance ids */
  int *slot_n;
  unsigned rr;
  /* the policy thread's own */
  int have_plan;
  double ewma, last_qps, planned_for, next_s, t0_s;
  double task_ewma[VR_PIPE_MAX_TASKS];
  uint64_t arr_seen, task_seen[VR_PIPE_MAX_TASKS];
  uint64_t req_seen, met_seen, drop_seen, early_seen, rr_seen;
  double accsum_seen;
  uint64_t accn_seen;
  int workers;
  int replans, solve_fail;
  double last_solve_ms;
  char last_err[200];
  uint64_t loads_failed;  /* the plan's loads the control plane refused or failed */
  char load_err[256];     /* the last one's reason */
  /* the policy's per-pipeline memory (pipe_policy.h ctx_new) */
  void *ctx;
  void (*ctx_free)(void *);
  double ctx_retry_s;   /* when ctx_new may be tried again after failing */
  int64_t arr[PL_ARR_RING]; /* this tick's root arrivals (copied) */
  int narr;
  /* following a plan the controller made (vr_pipes_follow): no policy
   * runs here; slot_remote[s] = the plan holds instances of slot s on
   * other workers (hops go there when this one holds none) */
  int follow, drop_mode;
  unsigned char *slot_remote;
  int *slot_cap;      /* per slot: batch cap of the instance here serving it (0: none) */
  uint64_t batch_set; /* the plan's batch caps applied here */
  /* counters (under pp->mu) */
  uint64_t early, rerouted, no_instance;
  pl_row hist[PL_HIST];
  int nhist, hhead;
};

#define PL_SLOT_INST 64

/* A hop's instance on another worker (vr_pipes_set_remote). */
#define PL_REMOTE_ID (-2)

/* The planning view of pp's pipeline (each task's variants the control
 * plane serves, at the fewest threads) and the slots' variant indexes,
 * profiles and models (refresh: 0, or VR_ENOENT when a variant went). */
int vr__pipe_pol_build_view(vr_pipes *ps, pl_pipe *pp, pl_pol **out, vr_errbuf *err);
int vr__pipe_pol_refresh_slots(vr_pipes *ps, pl_pipe *pp, pl_pol *pol);

/* The apps of pipes (n of them; a local policy's, or those this worker
 * follows the controller for) are managed by the pipeline side: the
 * control loop leaves their instances and batch caps alone. An app none
 * of them uses any more (deleted) goes back to the control loop. Called
 * from one thread only (the policy's or the follower's). */
void vr__pipes_manage_apps(vr_pipes *p, pl_pipe **pipes, int n);

/* A hop to route by the plan. */
typedef struct pl_pick_in {
  int task;
  int parent_slot;          /* the parent hop's slot; -1 for the root */
  double parent_budget_sum; /* budgets of the path up to the parent's task */
  double elapsed_ms;        /* since the request arrived */
  double spent_ms;          /* at the parent's task (queue + run) */
  double slo_ms;            /* the request's end-to-end SLO */
  int drop_mode;            /* vr_edrop_mode */
  int expired;              /* the hop starts past the request's deadline */
  double u;                 /* uniform in [0,1) */
} pl_pick_in;

typedef struct pl_pick {
  int slot;        /* view slot chosen (after a reroute), -1 none */
  int instance_id; /* -1: no instance serves the task now */
  int verdict;     /* vr_hop_verdict */
  int deadline_drops; /* the hop may be dropped for its deadline at its
                         queue (vr_edrop_deadline_drops) */
  int expired;        /* 1: drop it, it starts past its deadline and
                         deadline_drops (nothing else is filled) */
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
