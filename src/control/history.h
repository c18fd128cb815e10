/*
 * The control plane's recent past, for the live dashboard (GET
 * /v2/dashboard/data): one row per control period (the same numbers as the
 * control CSV, plus a per-app breakdown) and the autoscaler's recent
 * actions with their reasons. Fixed-size rings; the control's mutex guards
 * them (written by the tick, read by the HTTP thread).
 */
#ifndef VR_CONTROL_HISTORY_H
#define VR_CONTROL_HISTORY_H

#include <stdint.h>

#define VR_HIST_ROWS 900   /* 15 min of 1-s periods */
#define VR_HIST_ACTS 256

typedef struct vr_hist_row {
  double t_s;
  uint64_t arrivals, served, late, failed;
  double attainment, p99_ms, accuracy, cost_per_s;
  int instances, cores;
  /* vr_malloc'd; the ring owns them once the row is added (NULL: "") */
  char *variants; /* "variant*count ..." */
  /* JSON object: app -> {arrivals, served, instances, cost_per_s,
   * accuracy, p99_ms, slo_attainment} */
  char *apps;
} vr_hist_row;

typedef struct vr_hist_act {
  double t_s;
  char kind[24], variant[128], why[160];
} vr_hist_act;

typedef struct vr_ctl_history {
  vr_hist_row rows[VR_HIST_ROWS];
  vr_hist_act acts[VR_HIST_ACTS];
  uint64_t nrows, nacts; /* written so far (ring index = n % size) */
} vr_ctl_history;

/* Adds r, taking its strings (the row it replaces is freed). */
void vr__hist_add_row(vr_ctl_history *h, const vr_hist_row *r);
/* Frees the rows' strings (not h). */
void vr__hist_free(vr_ctl_history *h);
void vr__hist_add_act(vr_ctl_history *h, double t_s, const char *kind,
                      const char *variant, const char *why);
/* {"rows":[...],"actions":[...]} with rows and actions newer than since_s,
 * as vr_malloc'd JSON text (NULL when out of memory). */
char *vr__hist_json(const vr_ctl_history *h, double since_s);

#endif
