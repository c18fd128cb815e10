/*
 * InferLine's serving-time control as one pure tick (SoCC'20 §5 and §6):
 * what runs every ~100 ms after the planner has chosen a configuration,
 * live and in the pipeline simulator alike.
 *
 *  - VR_ILT_STATIC: the configuration as planned (planner only; also the
 *    CG baselines of the paper's Fig. 5, which compares provisioning).
 *  - VR_ILT_TUNER: InferLine's tuner (policy/envelope.h) on the arrivals at
 *    the pipeline's entry; it sets each stage's replica count.
 *  - VR_ILT_AUTOSCALE: the coarse-grained baselines' tuning. The paper
 *    (§6) scales the number of whole-pipeline replicas "using the scaling
 *    algorithm introduced in AutoScale" (Gandhi et al., TOCS 2012): the
 *    units needed are ceil(n / p) with n the requests in the system and p
 *    the packing factor (requests one unit holds within its SLO); scale up
 *    at once to that, and switch a unit off only after it has not been
 *    needed for t_wait (AutoScale's delayed off, 120 s). Here a unit is
 *    one replica of every stage; p = unit throughput x SLO (by Little's
 *    law, the queries a unit can hold and still finish them within the
 *    SLO; not rounded down: a unit of this pipeline holds 1.9 queries and
 *    a floor of 1 doubled every scale-up); n = root queries arrived and
 *    not finished.
 *
 * Purity: no clock, no I/O, no globals; the caller passes the arrivals
 * since its last call and its time. vr_il_tick_state owns the tuner's
 * ring (vr_il_tick_state_free releases it).
 */
#ifndef VR_POLICY_IL_TICK_H
#define VR_POLICY_IL_TICK_H

#include "policy/inferline.h"
#include "policy/pipe_plan.h"

typedef enum {
  VR_ILT_STATIC = 0,
  VR_ILT_TUNER,
  VR_ILT_AUTOSCALE,
} vr_ilt_mode;

typedef struct vr_il_autoscale_cfg {
  double pack;      /* p: root queries one unit holds within the SLO */
  int64_t wait_ns;  /* t_wait: a unit not needed this long goes (120 s) */
  int max_units;    /* 0: no cap */
} vr_il_autoscale_cfg;

typedef struct vr_il_tick_cfg {
  int mode;              /* vr_ilt_mode */
  vr_il_config base;     /* planned configuration: per stage the option
                            (= the task's variant index in the plan), max
                            batch and replicas; stage m is task m */
  vr_tuner_cfg tuner;    /* VR_ILT_TUNER */
  vr_il_autoscale_cfg as; /* VR_ILT_AUTOSCALE (base must be a coarse
                             configuration: equal replicas per stage) */
} vr_il_tick_cfg;

typedef struct vr_il_tick_state {
  vr_tuner_state ts;
  int units;            /* AutoScale: whole-pipeline units now */
  int64_t above_since;  /* AutoScale: when units first exceeded the need
                           (-1: they do not) */
  int wait_need;        /* AutoScale: the largest need since then */
  int k[VR_IL_MAX_STAGES]; /* replicas per stage now */
  int ups, downs;       /* changes made, for reports */
} vr_il_tick_state;

/* What one tick saw and decided. */
typedef struct vr_il_tick_in {
  int64_t now_ns;
  const int64_t *arrivals; /* entry arrivals since the last tick, sorted,
                              on the caller's clock (may be NULL with 0) */
  size_t narrivals;
  int64_t open_queries;    /* root queries in the system now */
} vr_il_tick_in;

/* Derived from the problem: the AutoScale packing factor of the coarse
 * configuration cfg under pb's SLO. */
double vr_il_autoscale_pack(const vr_il_problem *pb, const vr_il_config *cfg);
/* The AutoScale defaults (t_wait 120 s, no cap); pack left 0. */
void vr_il_autoscale_default(vr_il_autoscale_cfg *a);

/* 0 or VR_EINVAL naming the bad field (mode, empty base, tuner config,
 * pack <= 0). */
int vr_il_tick_validate(const vr_il_tick_cfg *c, vr_errbuf *err);
/* Starts at the base configuration as of now_ns. */
void vr_il_tick_state_init(vr_il_tick_state *s, const vr_il_tick_cfg *c,
                           int64_t now_ns);
void vr_il_tick_state_free(vr_il_tick_state *s);

/* One control period: observes the arrivals, decides, and writes the
 * configuration now in force into plan (initialised for the pipeline the
 * base configuration's options index; prof = its per-slot profiles).
 * Returns 1 when the replica counts changed, 0 when not, VR_EINVAL for
 * arrivals going backwards, VR_ENOMEM. */
int vr_il_tick(const vr_il_tick_cfg *c, vr_il_tick_state *s,
               const vr_il_tick_in *in, const vr_profile *prof,
               vr_pipe_plan *plan);

#endif
