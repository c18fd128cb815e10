/*
 * Cluster placement (issue 18): which models go on which live workers, and
 * how many workers to ask the provider for. Pure: the controller (`vario
 * controller`) fills the inputs from the registry each period and carries
 * the decisions out (remote loads over HTTP, provider starts).
 *
 * Rules:
 *  - every model should be loaded (or loading) on `replicas` workers
 *    (0 = every live worker); a missing copy goes to the worker without it
 *    holding the fewest models (ties: lowest index), so a worker that
 *    replaces a dead one gets what the dead one held;
 *  - the cluster keeps at least min_workers workers (live + starting), at
 *    most max_workers (0 = no cap): the provider replaces a worker that
 *    died.
 */
#ifndef VR_POLICY_CLUSTER_PLAN_H
#define VR_POLICY_CLUSTER_PLAN_H

typedef struct vr_cplan_in {
  int n_workers;        /* live workers (registered, lease valid) */
  int n_models;
  /* has[m * n_workers + w]: 0 = model m not on worker w, 1 = loaded,
   * 2 = being loaded */
  const unsigned char *has;
  int replicas;         /* copies per model; 0 = on every worker */
  int min_workers, max_workers;
  int starting;         /* workers asked of the provider, not live yet */
} vr_cplan_in;

typedef struct vr_cplan_out {
  /* caller-allocated, n_models * n_workers entries each */
  int *load_model, *load_worker;
  int n_loads;
  int add_workers;      /* workers to ask the provider for */
} vr_cplan_out;

/* 0, or VR_EINVAL for inconsistent inputs. */
int vr_cluster_plan(const vr_cplan_in *in, vr_cplan_out *out);

/* The worker for one more copy of a pipeline stage's model (`vario
 * controller --pipeline-policy`, cli/ctl_pipes.c): among the n workers
 * with at least `need` free cores that do not hold the model (holds[w]:
 * loaded or loading; a worker runs one copy per model), the one with the
 * fewest of the pipeline's instances (mine[w]: spread), then the most
 * free cores, then the lowest index. -1 when none qualifies (the caller
 * asks the provider for a worker). */
int vr_cluster_pick_worker(int n, const int *free_cores, const unsigned char *holds,
                           const int *mine, int need);

#endif
