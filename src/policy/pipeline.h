/*
 * vr_pipeline: an inference pipeline, a rooted tree of tasks (Loki,
 * InferLine). Pure data plus pure functions: no I/O, no clock, no globals.
 *
 * Model
 *  - A task is one inference step ("object_detection"). It is served by
 *    candidate variants: in Vario, the registered variants of an app (the
 *    task's `app`); in a Loki app definition, its `model_variants`.
 *  - Tasks form a tree. tasks[0] is the root; tasks are stored in preorder,
 *    so parent < child always holds and one forward pass over tasks visits
 *    parents before children (demand propagation, path accuracy).
 *  - The edge from a task to a child may carry a label: only outputs of the
 *    parent with that label go to the child (Loki: COCO class 2 "car" to
 *    car_classification). An empty label means every output that no
 *    labelled sibling takes goes there (siblings' labels are unique, so a
 *    task has at most one unlabelled child); each output goes to one
 *    child.
 *    Labels are strings; Loki's integer labels are kept as their decimal
 *    text.
 *  - One end-to-end latency SLO (slo_ms) for the whole tree.
 *  - Per variant: accuracy (percent, -1 = unknown), the multiplicative
 *    factor `mult` (mean outgoing requests per incoming request; Loki's
 *    branching.csv mult_factor, or measured live) and per child the share
 *    of those outgoing requests that go to it (Loki's per-child branch
 *    probabilities). Requests to child c per request served by variant v:
 *    mult x share[c]; a variant's shares sum to at most 1 (the rest of
 *    its outputs leave the pipeline). Until measured, mult = 1 and the
 *    shares split evenly among the children; the unlabelled child's share,
 *    when not given, is what its labelled siblings leave (1 - their sum).
 *  - Leaves are the pipeline's outputs. Loki writes them as a pseudo-task
 *    "sink" (variants ["sink"], no children) under each leaf; the Loki parser
 *    drops those markers, so the tree holds only real tasks (a sink repeated
 *    under two parents would otherwise make it a DAG).
 *  - A task may carry an `adapter` JSON object that the live server
 *    interprets (how outputs become child inputs, e.g. cropping detected
 *    regions); this layer keeps it verbatim and never looks inside.
 *
 * Ownership: a vr_pipeline and everything it points to (tasks, variants,
 * adapters) is owned by the pipeline and freed by vr_pipeline_free. Parsers
 * return a new pipeline (*out) or an error, never a half-built one.
 *
 * Formats (docs/API.md, "Pipeline spec"):
 *  - Vario spec:
 *      {"name": "scenes", "latency_ms": 250, "root": "detect",
 *       "tasks": [
 *         {"name": "detect", "app": "scene_det", "adapter": {...},
 *          "variants": ["det_s", {"name": "det_l", "accuracy": 91.5,
 *                        "mult": 2.1, "shares": {"garment": 0.6}}],
 *          "children": [{"task": "garment", "label": "0"}, ...]},
 *         {"name": "garment", "app": "fmnist"}, ...]}
 *    "root" defaults to the first task; "variants" (names or objects) is
 *    optional when "app" is given (the live side fills the app's variants).
 *  - Loki app definition, as published (apps/traffic_analysis.json):
 *      {"appName", "latencySLOInMSec", "root": {"task", "model_variants",
 *       "children": [{"task", "label", "model_variants", "children"}]}}
 */
#ifndef VR_POLICY_PIPELINE_H
#define VR_POLICY_PIPELINE_H

#include <jansson.h>
#include <stddef.h>

#include "vario/status.h"

#define VR_PIPE_NAME_MAX 64
#define VR_PIPE_LABEL_MAX 32
#define VR_PIPE_MAX_TASKS 64
#define VR_PIPE_MAX_CHILDREN 16
#define VR_PIPE_MAX_VARIANTS 64

typedef struct vr_pipe_variant {
  char name[VR_PIPE_NAME_MAX]; /* variant (Loki: model variant) name */
  double accuracy;             /* percent 0..100; -1 unknown */
  double mult;                 /* outgoing requests per incoming, >= 0 */
  double share[VR_PIPE_MAX_CHILDREN]; /* per child of the task, 0..1 */
} vr_pipe_variant;

typedef struct vr_pipe_task {
  char name[VR_PIPE_NAME_MAX];
  char app[VR_PIPE_NAME_MAX];     /* Vario app serving it; "" for Loki */
  char label[VR_PIPE_LABEL_MAX];  /* label on the edge from the parent */
  int parent;                     /* task index; -1 for the root */
  int nchildren;
  int children[VR_PIPE_MAX_CHILDREN]; /* task indexes, in spec order */
  int nvariants;
  vr_pipe_variant *variants; /* nvariants, owned */
  json_t *adapter;           /* owned reference or NULL */
} vr_pipe_task;

typedef struct vr_pipeline {
  char name[VR_PIPE_NAME_MAX];
  double slo_ms; /* end-to-end latency SLO */
  int ntasks;
  vr_pipe_task *tasks; /* ntasks, preorder, tasks[0] = root; owned */
} vr_pipeline;

void vr_pipeline_free(vr_pipeline *p);

/* Parses a Vario pipeline spec (format above). On success *out owns a
 * validated pipeline. Errors name the task: unknown child task, a cycle
 * ("cycle: a -> b -> a"), a task with two parents, a task unreachable from
 * the root, a task with neither app nor variants, bad numbers. */
int vr_pipeline_from_json(const json_t *spec, vr_pipeline **out,
                          vr_errbuf *err);

/* Parses a Loki app definition as published. Accuracies stay unknown and
 * multiplicative factors at their defaults until the profile loaders fill
 * them (sim/loki_data.h). */
int vr_pipeline_from_loki_json(const json_t *app, vr_pipeline **out,
                               vr_errbuf *err);

/* Either format: a document with "latencySLOInMSec" is a Loki app
 * definition, anything else a Vario spec. */
int vr_pipeline_parse(const char *buf, size_t len, vr_pipeline **out,
                      vr_errbuf *err);

/* The pipeline as a Vario spec (every variant as an object with its
 * accuracy, mult and shares); parsing it back gives an equal pipeline.
 * New reference, or NULL on allocation failure. */
json_t *vr_pipeline_to_json(const vr_pipeline *p);

/* Structural checks on a pipeline built by hand or by a parser: the tree
 * (preorder, parent/child links agree, no cycles), unique task names,
 * every task has an app or at least one variant, unique variant names per
 * task, numbers in range (a variant's shares sum to at most 1), unique
 * labels among siblings. */
int vr_pipeline_validate(const vr_pipeline *p, vr_errbuf *err);

/* Deep copy; NULL on allocation failure. */
vr_pipeline *vr_pipeline_dup(const vr_pipeline *p);

/* Index of the task / variant with that name, or -1. */
int vr_pipeline_task(const vr_pipeline *p, const char *name);
int vr_pipe_task_variant(const vr_pipe_task *t, const char *name);

/* Which child of task t receives an output labelled `label`: the index in
 * t->children of the child whose edge has that label, else of an
 * unlabelled child, else -1 (the output leaves the pipeline). */
int vr_pipe_task_route_label(const vr_pipeline *p, const vr_pipe_task *t,
                             const char *label);

/* Replaces task t's candidate variants (e.g. with its app's registered
 * variants): n names, accuracies (NULL = unknown). mult/shares reset to the
 * defaults. 0, VR_EINVAL (bad n or name) or VR_ENOMEM. */
int vr_pipe_task_set_variants(vr_pipeline *p, int t, const char *const *names,
                              const double *accuracy, int n, vr_errbuf *err);

/* Default shares of task t (see the model above) into share[nchildren]. */
void vr_pipe_default_shares(const vr_pipeline *p, int t, double *share);

/* Sets the share of task t's unlabelled child, if it has one, to what the
 * other children's shares leave: 1 - their sum, at least 0. */
void vr_pipe_rest_share(const vr_pipeline *p, int t, double *share);

/* Expected request rates per task when the root receives root_qps and task
 * i is served by variant choice[i] (an index into its variants; a value
 * < 0 means "mix": weights mix[i][v] must then be given, fractions of the
 * task's requests per variant summing to 1). A task without variants yet
 * forwards with mult 1 and the default shares. rate[ntasks] out. */
void vr_pipeline_rates(const vr_pipeline *p, const int *choice,
                       const double *const *mix, double root_qps,
                       double *rate);

/* Leaves (tasks without children) in preorder: their indexes into out
 * (ntasks long). Returns the number of leaves = the number of paths. */
int vr_pipeline_leaves(const vr_pipeline *p, int *out);

/* The root-to-leaf path ending at task `leaf`: indexes into path (ntasks
 * long), root first. Returns its length. */
int vr_pipeline_path(const vr_pipeline *p, int leaf, int *path);

/* Per task (levels, ntasks long): the number of tasks on the longest path
 * from it down to a leaf, itself included (a leaf: 1). levels[0] is the
 * depth of the tree. A hop's share of the time left and a task's share of
 * an end-to-end accuracy floor (policy/fanout.h) are read from these, by
 * the live executor and the pipeline simulator alike. */
void vr_pipeline_levels(const vr_pipeline *p, int *levels);

#endif
