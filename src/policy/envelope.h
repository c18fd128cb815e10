/*
 * InferLine's traffic envelopes and high-frequency tuner (SoCC'20, §5).
 *
 * A traffic envelope maps a window size w to the largest number of
 * arrivals seen in any window of that size. Windows start at the
 * pipeline's service time and double up to 60 s (the last one is clamped
 * to 60 s), so one envelope captures burstiness (short windows) and the
 * sustained rate (long windows) at once.
 *
 * The tuner compares the envelope of the arrivals it observes with the
 * envelope of the planning trace. As soon as the observed count in some
 * window exceeds the planned one, each stage is scaled to
 *   k = ceil(lambda_new * s_m / (mu_m * rho_m))
 * (paper §5) where lambda_new is the observed rate at that window, s_m the
 * stage's scale factor, mu_m one replica's throughput in the planned
 * configuration and rho_m the max-provisioning ratio; rho_m is taken at
 * the same window (the planned rate there over what the plan provisions),
 * which keeps the plan's slack at that time scale and makes the rule
 * k = ceil(k_plan * r_obs / r_plan) for the worst window. Scaling down is
 * conservative: only after `settle_ns` without a change, sized for the
 * largest rate over the last `down_span_ns` in `down_win_ns` windows, and
 * never below what the scale-up rule asks for at that moment. That rate
 * is compared with the same statistic measured on the planning trace,
 * at its lowest there (plan_down_qps), as scale-up compares like with
 * like per window: traffic like the sample's then sizes every stage at
 * >= its plan, and only a drop below anything the sample showed goes
 * under it. Against the mean (the paper's rho_m uses the sample's arrival
 * rate) the 5-s peaks of stationary traffic read as 1.1-1.5x load and the
 * tuner never returned to the plan after a scale-up. Unlike the
 * paper, each stage keeps its own max-provisioning ratio when scaling
 * down (the paper takes the pipeline's minimum): a stage held at one
 * replica by the minimum has a tiny ratio (0.07 for facial recognition in
 * Loki's traffic pipeline vs 0.6 for detection), and the minimum then
 * sized detection at 9x its plan, so the tuner never scaled down at all.
 *
 * Purity: no clock, no I/O, no globals. Callers feed arrival times
 * (vr_tuner_observe) and ask for decisions (vr_tuner_decide) with their
 * own notion of "now" (simulated or real). vr_tuner_state owns its ring
 * of arrival times; vr_tuner_state_free releases it.
 */
#ifndef VR_POLICY_ENVELOPE_H
#define VR_POLICY_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#include "vario/status.h"

#define VR_ENV_MAX_WIN 24
#define VR_ENV_HORIZON_NS 60000000000LL /* largest window: 60 s */
#define VR_TUNER_MAX_STAGES 16

typedef struct vr_envelope {
  int nwin;
  int64_t win_ns[VR_ENV_MAX_WIN]; /* increasing; w[i+1] = 2 w[i] or 60 s */
  int64_t count[VR_ENV_MAX_WIN];  /* max arrivals in any window of w[i] */
} vr_envelope;

/* Sets the windows: service_ns, 2x, 4x, ... while below max_ns, then
 * max_ns itself; counts zeroed. service_ns is clamped to >= 1 ms (shorter
 * windows than the tick of any driver carry no information).
 * VR_EINVAL if max_ns < the first window. */
int vr_envelope_windows(vr_envelope *e, int64_t service_ns, int64_t max_ns);

/* Fills e->count from n arrival times sorted ascending (ns). A window of
 * size w counts arrivals in (t - w, t]. VR_EINVAL if not sorted. */
int vr_envelope_compute(vr_envelope *e, const int64_t *t_ns, size_t n);

/* Rate (queries/s) at window i: count / w. */
double vr_envelope_rate(const vr_envelope *e, int i);

/* One stage as the plan left it. */
typedef struct vr_tuner_stage {
  int k_plan;    /* replicas in the plan (>= 1) */
  double scale;  /* s_m: requests reaching the stage per pipeline request */
  double mu_qps; /* one replica's throughput in the planned configuration */
} vr_tuner_stage;

typedef struct vr_tuner_cfg {
  vr_envelope plan;  /* envelope of the planning trace */
  double plan_qps;   /* mean rate of the planning trace */
  double plan_down_qps; /* the scale-down statistic (largest rate in
                           down_win_ns windows over down_span_ns) at its
                           lowest over the planning trace
                           (vr_tuner_plan_down_qps); 0: use plan_qps */
  int nstages;
  vr_tuner_stage st[VR_TUNER_MAX_STAGES];
  int64_t settle_ns;    /* no scale-down this long after a change (15 s) */
  int64_t down_span_ns; /* look-back for scale-down (30 s) */
  int64_t down_win_ns;  /* window of the scale-down rate (5 s) */
  int max_replicas;     /* per stage cap (0 = none) */
} vr_tuner_cfg;

/* Defaults of the paper: settle 15 s, look back 30 s in 5 s windows. The
 * caller fills plan, plan_qps and the stages. */
void vr_tuner_cfg_default(vr_tuner_cfg *c);
/* plan_down_qps for c (its windows and settle/down fields set) from the
 * planning trace t (n sorted arrivals, ns from 0): the scale-down
 * statistic replayed over the trace, its minimum over every second with
 * a full look-back (the trace's end if it is shorter); 0 if empty. */
double vr_tuner_plan_down_qps(const vr_tuner_cfg *c, const int64_t *t,
                              size_t n);
/* 0 or VR_EINVAL naming the bad field. */
int vr_tuner_cfg_validate(const vr_tuner_cfg *c, vr_errbuf *err);

#define VR_TUNER_DOWN_SLOTS 64

/* Caller-owned memory between calls: the arrivals of the last 60 s (a
 * ring), per window the index of its oldest arrival and the largest count
 * seen since the last decision, the scale-down rate history, the current
 * replica counts and the time of the last change. */
typedef struct vr_tuner_state {
  int64_t *ring;
  size_t cap, head, len; /* ring[head] is the oldest kept arrival */
  uint64_t seen;         /* arrivals observed so far */
  uint64_t tail[VR_ENV_MAX_WIN + 1]; /* per window: first arrival inside */
  int64_t peak[VR_ENV_MAX_WIN];      /* max count since the last decision */
  int64_t down_peak[VR_TUNER_DOWN_SLOTS]; /* max down-window count per slot */
  int64_t down_slot_t[VR_TUNER_DOWN_SLOTS];
  int64_t last_change_ns;
  int64_t start_ns; /* init: no scale-down before a full look-back */
  int k[VR_TUNER_MAX_STAGES];
} vr_tuner_state;

/* Starts with the planned replica counts, as if a change happened at
 * now_ns (so the first scale-down waits settle_ns). */
int vr_tuner_state_init(vr_tuner_state *s, const vr_tuner_cfg *c,
                        int64_t now_ns);
void vr_tuner_state_free(vr_tuner_state *s);

/* Records one arrival at the pipeline's entry; times non-decreasing.
 * O(windows) amortised. VR_ENOMEM if the ring cannot grow, VR_EINVAL on
 * a time going backwards. */
int vr_tuner_observe(const vr_tuner_cfg *c, vr_tuner_state *s, int64_t t_ns);

/* Outcome of one decision. */
typedef struct vr_tuner_decision {
  int k[VR_TUNER_MAX_STAGES]; /* replicas wanted per stage */
  int changed;                /* stages whose count changed */
  int up;                     /* 1 scale up, -1 scale down, 0 none */
  int window;                 /* scale up: the window that triggered */
  double rate_qps;            /* the rate provisioned for */
} vr_tuner_decision;

/* Decides at now_ns (>= the last observed arrival), updates s->k and
 * resets the per-decision peaks. Never allocates. */
void vr_tuner_decide(const vr_tuner_cfg *c, vr_tuner_state *s, int64_t now_ns,
                     vr_tuner_decision *d);

#endif
