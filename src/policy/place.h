/*
 * Placement of new instances on workers within one policy tick (internal
 * to policy/). Keeps local copies of each worker's free cores, GPUs and
 * memory so that several loads decided in the same tick never overcommit a
 * worker. Owns its arrays (vr_place_free).
 */
#ifndef VR_POLICY_PLACE_H
#define VR_POLICY_PLACE_H

#include "policy/snapshot.h"

typedef struct vr_place {
  const vr_snapshot *s;
  int *free_cores, *free_gpus, *ninst;
  int64_t *free_mem;
  int want_wtype; /* worker type the last failed placement needs, or -1 */
  /* per worker type: resources of placements that found no room, so the
   * worker autoscaler adds enough workers in one step */
  double *want_cores, *want_gpus, *want_mem;
  char *gone;  /* per snapshot instance: unloaded or moved this tick */
  int up_only; /* pick only workers that are up (not starting) and
                  already hold an instance (consolidation packs onto used
                  workers; moving onto an empty one would ping-pong) */
} vr_place;

int vr_place_init(vr_place *p, const vr_snapshot *s);
void vr_place_free(vr_place *p);
/* Whether a worker of type t could ever hold the profile. */
int vr_place_type_fits(const vr_snap_wtype *t, const vr_profile *prof);

/* The placement rule for one worker, shared by the policies' placement and
 * the simulator's query-path loads: whether a worker with these free
 * resources holds one more instance of prof (a CPU variant may use a GPU
 * machine's spare cores: the machine runs anyway) ... */
int vr_place_holds(int free_cores, int free_gpus, int64_t free_mem,
                   const vr_profile *prof);
/* ... and whether worker a is the better place for prof than worker b
 * (up: it runs, not still starting; gpus: GPUs it has; free: free cores):
 * a worker that is up first (on one still starting the instance waits for
 * the machine); then, for a CPU variant, a CPU machine (on a GPU machine
 * it holds cores a GPU variant may need and can keep the dearer machine
 * from being released); then best fit (the fullest, so others empty out
 * and can be released). */
typedef struct vr_place_cand {
  int up, gpus, free_cores;
} vr_place_cand;
int vr_place_prefer(vr_place_cand a, vr_place_cand b, const vr_profile *prof);
/* Best-fit worker for one instance of prof (not `exclude`), resources
 * deducted; -1 when none fits (then want_wtype names the cheapest type
 * that would, and its want_* grow). Draining workers are never chosen. */
int vr_place_pick(vr_place *p, const vr_profile *prof, int exclude);
/* Instances of prof that fit now on workers that are up (starting ones
 * excluded: their room is a worker start away); nothing deducted. */
int vr_place_room(const vr_place *p, const vr_profile *prof);
/* Records k instances of prof that need a worker (the cheapest type that
 * can hold them), for the worker autoscaler. */
void vr_place_want(vr_place *p, const vr_profile *prof, int k);
/* Whether a worker other than `exclude` has room for prof now (nothing
 * deducted). */
int vr_place_fits_elsewhere(const vr_place *p, const vr_profile *prof,
                            int exclude);
/* Emits LOAD for prof's variant v placed by vr_place_pick; returns 1 if
 * placed, 0 if not, or VR_ENOMEM. */
int vr_place_load(vr_place *p, int v, vr_actions *out, const char *why);
/* Gives back the resources of one instance of prof on worker (one this
 * tick placed, so the worker may count as empty in the same tick). */
void vr_place_release(vr_place *p, int worker, const vr_profile *prof);
/* The same for snapshot instance i, unloaded or moved: its variant's
 * resources and its AsyFunc shadow's cores (the worker's free cores count
 * both as held; the shadow ends with its body). */
void vr_place_release_inst(vr_place *p, size_t i);
/* Whether snapshot instance i could make room, on its own worker, for one
 * instance of variant u if it went away (its cores and its shadow's count
 * as free: they are shared while u loads; memory must hold both); if so
 * releases them, deducts u, marks i gone and returns the worker, else -1
 * and nothing changes. */
int vr_place_swap(vr_place *p, size_t i, int u);
/* Whether the cluster can still grow: some worker type below its cap. */
int vr_place_growable(const vr_snapshot *s);

#endif
