/*
 * A model's measured slowdown (issue 18: interference across workers).
 * INFaaS detects interference as compute time above the profile; a
 * worker measures it for each model it serves and publishes it with its
 * heartbeat, so the controller's INFaaS policy can migrate the model
 * (policy/policy.c, vr_pol_interference: slowdown > interference_factor).
 *
 * Per window (a heartbeat): observed compute of the batches the model ran
 * (Triton's batch_stats: executions and infer time per batch size) over
 * what the reference profile says they take (its instance's profile as
 * measured at load, frozen when first seen: the runtime's own profile
 * follows what it observes, so it would follow the interference too).
 * Profiles come from tight loops while serving adds thread wake-ups, so
 * the first batches served set a baseline ratio and the slowdown is
 * measured against it (as the in-process control plane does,
 * control/control.c): interference that arrives later shows, a constant
 * offset does not. The baseline takes five windows' worth of batches: one
 * window on a busy host can be fast by chance, and every later window
 * would then look slowed down.
 *
 * Not thread-safe: one owner (the worker's heartbeat thread).
 */
#ifndef VR_RUNTIME_SLOWDOWN_H
#define VR_RUNTIME_SLOWDOWN_H

#include "policy/profile.h"
#include "runtime/runtime.h"

typedef struct vr_slowdown {
  int inst_id;               /* the reference profile's instance; 0 = none yet */
  vr_latency ref;            /* its profile when first seen */
  double batches, obs_ns, exp_ns; /* cumulative sums at the last window */
  double base;               /* baseline ratio; 0 = none yet */
  double base_b, base_obs, base_exp; /* what the baseline has summed so far */
  double value;              /* slowdown now; 0 = not measured yet */
} vr_slowdown;

/* Cumulative sums over model's variants in rt: executions, observed infer
 * ns, and what ref says they take (vr_batch_est_ns per batch size). */
void vr_slowdown_sums(vr_runtime *rt, const char *model, const vr_latency *ref, double *batches,
                      double *obs_ns, double *exp_ns);

/* One window ending with these cumulative sums: with at least min_batches
 * executions since the last window, its observed and expected times go to
 * the baseline until that holds 5 x min_batches executions (then the
 * value is 1), later the value is the window's ratio observed / expected
 * over the baseline's; fewer, the value stays. Returns the value. Sums
 * that went backwards (counters restarted) start over. */
double vr_slowdown_step(vr_slowdown *s, double batches, double obs_ns, double exp_ns,
                        int min_batches);

/* The heartbeat's call for one model: (re)takes the reference from the
 * model's first instance in st[0..n) when that instance changed (a
 * reload: the baseline starts over), then one window. */
double vr_slowdown_update(vr_slowdown *s, vr_runtime *rt, const char *model,
                          const vr_rt_instance_stats *st, int n, int min_batches);

#endif
