/* Internals of the live control plane shared by control.c (lifecycle,
 * snapshot, tick, actions) and control_route.c (queries, loader, JSON).
 * Not for use outside src/control/. */
#ifndef VR_CONTROL_INT_H
#define VR_CONTROL_INT_H

#include <pthread.h>

#include "base/hist.h"
#include "base/map.h"
#include "base/vec.h"
#include "control/control.h"
#include "policy/asyfunc.h"
#include "policy/driver.h"
#include "policy/select.h"

#define CTL_LAT_SAMPLES 256
#define CTL_MAX_INST VR_RT_MAX_INSTANCES * 4

typedef struct ctl_var {
  vr_profile prof;
  char dir[VR_STORE_PATH_MAX]; /* model's repository entry */
  vr_precision prec;
  int state;             /* vr_vstate as last recorded by the policy */
  double slo_ms;         /* tightest SLO its traffic asked for (sticky) */
  double period_slo;     /* tightest this period; 0 = none yet */
  double period_acc;     /* highest min_accuracy asked this period */
  uint64_t arrivals;     /* routed this period */
  uint64_t served;       /* completed this period */
  int loading;           /* a load is queued or running */
  const vr_af_model *blocks; /* AsyFunc block profile (in c->af), or NULL */
  int64_t af_cross_ns;       /* a routed query found its bodies crowded; 0 = no */
} ctl_var;

typedef struct ctl_inst {
  int id;
  int var;
  int istate;    /* policy's SET_ISTATE override (interfered) or -1 */
  int removing;  /* unload decided: route nothing more to it */
  int inflight;  /* routed and not completed */
  int cap;       /* its batch cap at the last refresh (0 = unknown) */
  int shadow_cores; /* of its shadow at the last refresh (0: none, not paired) */
  uint64_t arrivals, items, batches; /* this period */
  int nlat;
  float lat[CTL_LAT_SAMPLES]; /* compute ms of requests this period */
  /* Slowdown = observed compute / the runtime's own at-load profile of
   * this instance at that batch size. The reference is measured in the
   * serving process, so thread wake-ups and the server's own threads are
   * in both and only a real slowdown (interference) moves the ratio. */
  vr_latency lp;
  /* Both profiles come from tight loops, while serving adds wake-ups of
   * sleeping threads; so the first period with enough samples sets the
   * instance's baseline ratio, and slowdown is measured against it:
   * interference that arrives later shows, the constant offset does not. */
  double base_ratio;
  int nratio;
  float ratio[CTL_LAT_SAMPLES];
} ctl_inst;

typedef struct ctl_wait {
  vr_ctl_route_cb cb;
  void *tag;
  vr_ctl_route r;
  struct ctl_wait *next;
} ctl_wait;

typedef struct ctl_load {
  int var;      /* index into c->var, remapped by a store reload; -1: the
                 * variant left the store while this load waited */
  char name[VR_VARIANT_MAX]; /* the variant, which a reload keeps */
  int cores;    /* what queue_load reserved, given back as reserved */
  int64_t mem;
  int evict_id; /* instance to unload first to make room, or 0 */
  ctl_wait *waiters;
  struct ctl_load *next;
} ctl_load;

/* One app's completions this period: the dashboard's per-app p99 and SLO
 * attainment (the period totals below are over all apps). */
#define CTL_MAX_APPS 64
typedef struct ctl_app_period {
  char app[VR_PROF_NAME_MAX];
  uint64_t served, late;
  vr_hist lat; /* end-to-end us */
} ctl_app_period;

struct vr_control {
  vr_control_opts o;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop, started;
  int kick;                /* run the tick now (AsyFunc's crowd rule) */
  int64_t af_kick_ns;      /* the last such kick */
  int64_t af_kick_gap_ns;  /* the least time between two (CTL_AF_KICK_NS, doubled
                            * after a kicked tick that paired nothing) */
  uint64_t af_pairs;       /* shadows paired so far */
  double af_provision_ms;  /* crowd seen -> shadow paired, the last one; < 0 none */
  pthread_t tick_thread, load_thread;

  ctl_var *var;
  size_t nvar;
  vr_map var_by_name; /* variant name -> (void *)(index + 1) */
  /* A store reload rebuilds var[] in another order: it takes this for
   * writing, a tick for reading from its decision to its last action, so
   * that no action applies an index of the array it was not decided on.
   * Taken before mu, never under it. */
  pthread_rwlock_t reload_rw;
  vr_af_model *af;    /* AsyFunc block profiles from the store (owned) */
  size_t naf;
  vr_vec insts;       /* ctl_inst */
  int loading_cores;  /* threads of loads in progress */
  int64_t loading_mem;
  char act_err[256];  /* why the last LOAD / MIGRATE applied was refused or
                       * failed (vr_control_apply's err) */

  /* policy, its state, selection index, actions, snapshot buffers; the
   * actuator table is control.c's */
  vr_driver drv;
  vr_snap_worker worker; /* this process: the one worker */
  int64_t last_tick_ns;
  int64_t t0_ns; /* creation: the time series counts from here */

  ctl_load *loads;   /* FIFO of pending loads */
  ctl_load *running; /* the load the loader performs now (waiters join it) */

  /* Period totals for the time series. */
  uint64_t p_arrivals, p_served, p_late, p_failed, p_infeasible;
  uint64_t last_late; /* late answers in the previous period (offline jobs) */
  double p_acc_sum;
  vr_hist p_hist; /* end-to-end ms x 1000 (us) */
  /* apps whose instances a pipeline policy manages (vr_control_set_managed) */
  char managed[CTL_MAX_APPS][VR_PROF_NAME_MAX];
  int nmanaged;
  ctl_app_period *apps[CTL_MAX_APPS]; /* owned; found by name, kept */
  int napps;
  /* Totals since start, for /metrics. */
  uint64_t total_late, total_infeasible;
  vr_hist sel_hist; /* selection decision time, ns */
  struct vr_ctl_history *hist; /* recent periods and actions (dashboard) */
};

/* control.c */
int ctl_find_var(const vr_control *c, const char *model, vr_precision p,
                 int threads, int max_batch);
ctl_inst *ctl_inst_by_id(vr_control *c, int id);
/* Rebuilds snapshot + selection index from the runtime; caller holds mu. */
int ctl_refresh_locked(vr_control *c, int64_t now_ns, double dt_s);
/* Starts one instance of variant v (model loaded on demand). Called
 * without mu; returns the instance id or a negative VR_E*. */
int ctl_load_variant_named(vr_control *c, const char *variant, vr_errbuf *err);
/* Whether the worker has room for one more instance of v (caller holds mu). */
int ctl_fits_locked(const vr_control *c, int v);

/* Whether action a touches an instance or variant of a managed app
 * (caller holds mu). */
int ctl_managed_locked(vr_control *c, const vr_action *a);

/* control_asyfunc.c: block profiles from the store, body ranges, and the
 * PAIR/UNPAIR actuator slots. */
int ctl_af_load(vr_control *c, vr_errbuf *err); /* caller holds mu */
/* A new instance of v as an AsyFunc body, when the policy is AsyFunc and
 * v has a block profile: fills pair_begin/pair_end. Caller holds mu
 * (v->blocks points into c->af, which a store reload frees). */
void ctl_af_body_opts(vr_control *c, const ctl_var *v, vr_rt_instance_opts *io);
int ctl_af_pair(void *self, const vr_action *a);
/* A query was routed to variant v (mu held): wakes the tick thread at
 * once when v's bodies are crowded (vr_pol_af_crowded), at most once per
 * af_kick_gap_ns. A burst routes thousands of queries a second, hence the
 * floor; a kicked tick that pairs nothing (no free cores, kappa spent, the
 * exact queue below gamma) doubles the gap up to the period, and a pair
 * or a periodic tick resets it. */
#define CTL_AF_KICK_NS (5 * 1000000LL)
void ctl_af_routed(vr_control *c, int v);
int ctl_af_unpair(void *self, const vr_action *a);

/* control_route.c */
void *ctl_loader_main(void *arg);
/* The period entry of an app, created on first use (NULL past
 * CTL_MAX_APPS or out of memory); caller holds mu. */
ctl_app_period *ctl_app_period_of(vr_control *c, const char *app);

/* control_unreg.c: registrations/removals by another process (tick). */
void vr__control_sync_store(vr_control *c);

#endif
