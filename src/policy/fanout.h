/*
 * Fan-out adapters: what a pipeline hop forwards. A task's adapter turns
 * its output tensors into child requests; this is the one place that rule
 * lives, used by the live pipeline executor (control/pipeline) and checked
 * against the simulator's multiplicative factors.
 *
 * grid_crop: the task's input is an image [C,H,W] divided into a GH x GW
 * grid of regions (region r = row * GW + col, each (H/GH) x (W/GW)). The
 * task returns, per row of the batch, `scores` [R] (P(region holds an
 * object)) and `labels` [R, L] (class probabilities). Every region whose
 * score exceeds the threshold goes, one request each, to the child of the
 * edge labelled with its arg-max class; the child's input is the region's
 * crop [C, H/GH, W/GW].
 *
 * Pure: no threads, I/O, clock or globals. Ownership: plain values; the
 * caller owns every buffer.
 */
#ifndef VR_POLICY_FANOUT_H
#define VR_POLICY_FANOUT_H

#include <stddef.h>
#include <stdint.h>

#include "vario/status.h"

#define VR_FANOUT_MAX_LABELS 16
#define VR_FANOUT_NAME_MAX 64

typedef enum vr_fanout_kind {
  VR_FANOUT_NONE = 0, /* leaf task: no children */
  VR_FANOUT_GRID_CROP,
} vr_fanout_kind;

typedef struct vr_fanout {
  vr_fanout_kind kind;
  char scores[VR_FANOUT_NAME_MAX]; /* output tensor names */
  char labels[VR_FANOUT_NAME_MAX];
  double threshold;                /* score > threshold fans out */
  int grid_h, grid_w;
  int n_labels;
  char label_names[VR_FANOUT_MAX_LABELS][VR_FANOUT_NAME_MAX];
} vr_fanout;

/* One detected region of one input row. */
typedef struct vr_fanout_region {
  int region;  /* row * grid_w + col */
  int label;   /* index into label_names */
  float score;
  int y0, x0;  /* top-left pixel of the crop in the task's input */
} vr_fanout_region;

/* Parses an adapter object's JSON text ({"kind": "grid_crop", "scores": …,
 * "labels": …, "threshold": …, "grid": [GH, GW], "label_names": […]}).
 * Clear error for anything missing or out of range. */
int vr_fanout_parse(const char *json, size_t len, vr_fanout *out, vr_errbuf *err);
/* The index of a label name, or -1. */
int vr_fanout_label(const vr_fanout *a, const char *name);

/* Checks the task's input shape [C,H,W] (no batch dim) divides into the
 * grid and gives the crop shape [C, H/GH, W/GW]. */
int vr_fanout_crop_shape(const vr_fanout *a, const int64_t in_chw[3],
                         int64_t crop_chw[3], vr_errbuf *err);

/* Regions of one row that fan out, in region order: scores [R] and labels
 * [R * n_labels] of that row, R = grid_h * grid_w. Writes up to cap
 * regions (cap >= R always suffices) and returns how many fan out. A NaN
 * score never fans out. */
int vr_fanout_regions(const vr_fanout *a, const float *scores, const float *labels,
                      const int64_t in_chw[3], vr_fanout_region *out, int cap);

/* Copies region g's crop of one input row (float32 [C,H,W]) into out
 * (float32 [C, H/GH, W/GW]). */
void vr_fanout_crop(const vr_fanout *a, const float *in, const int64_t in_chw[3],
                    const vr_fanout_region *g, float *out);

/* ---- per-hop rules of a pipeline request ----------------------------------
 * A request carries one end-to-end deadline through every hop. */

/* A hop that starts (or is about to be queued) at or after the deadline is
 * dropped there, with an explicit outcome, instead of being served late. */
static inline int vr_fanout_hop_expired(int64_t now_ns, int64_t deadline_ns) {
  return now_ns >= deadline_ns;
}
/* The SLO a hop is routed with: the time left, shared evenly among the
 * `levels` tasks still ahead on its longest path (itself included), so a
 * parent does not pick a variant that leaves its children no time. */
double vr_fanout_hop_slo_ms(double remaining_ms, int levels);
/* The accuracy a task must reach for an end-to-end minimum (percent) when
 * paths have up to depth tasks: path accuracy is the product of the tasks'
 * accuracies (Loki), so each needs min^(1/depth). 0 when min <= 0. */
double vr_fanout_task_min_accuracy(double min_pct, int depth);

#endif
