/*
 * Execution plans: one per batch size of a session.
 *
 * Building a plan walks the session's node range, lowers each node either to
 * oneDNN primitives (Conv, Gemm/MatMul, pools, BatchNorm, eltwise, binary,
 * Softmax, LRN, Concat) or to a reference-kernel step on plain tensors, and
 * inserts reorders only where a consumer needs a different layout than its
 * producer chose (convolutions pick blocked layouts via format_tag_any, so
 * conv chains stay blocked). Activation buffers live in the session's one
 * arena at offsets assigned by lifetime (values that are never alive at the
 * same time share bytes). Weights are reordered into the layout each
 * primitive wants once per session (cached across plans).
 *
 * Ownership: a plan owns its primitives, memory objects and materialised
 * constants; the session owns plans, the weight cache and the arena.
 */
#ifndef VR_ENGINE_PLAN_H
#define VR_ENGINE_PLAN_H

#include <dnnl.h>
#include <stdint.h>

#include "engine/graph.h"

typedef struct vr_wcache vr_wcache;  /* session weight cache (plan.c) */
typedef struct vr_qparams vr_qparams; /* int8 calibration (quant.c) */

typedef struct vr_step vr_step;
typedef struct vr_pval vr_pval;

/* A tensor that crosses a plan boundary (session input or output). */
typedef struct vr_port {
  int val;       /* graph value index */
  int pv;        /* plan value holding it (plain layout) */
  vr_tview t;    /* dtype and shape at this batch; data = arena pointer */
} vr_port;

typedef struct vr_plan {
  int batch;
  const vr_graph *g;
  int nsteps, capsteps;
  vr_step *steps;
  int npv, cappv;
  vr_pval *pv;
  int nin, nout;
  vr_port *in, *out;
  size_t arena_bytes;
  void **owned; /* materialised AFFINE constants and other plan buffers */
  int nowned, capowned;
} vr_plan;

typedef struct vr_plan_ctx {
  const vr_graph *g;
  dnnl_engine_t eng;
  vr_wcache **wcache;   /* session-owned cache of reordered weights */
  int node_begin, node_end;
  const int *in_vals;   /* session inputs (graph value indices) */
  int nin;
  const int *out_vals;  /* session outputs */
  int nout;
  vr_precision precision;
  const vr_qparams *q;  /* int8 only */
} vr_plan_ctx;

/* Builds the plan for one batch size. On failure *out is NULL. */
int vr_plan_build(const vr_plan_ctx *c, int batch, vr_plan **out,
                  vr_errbuf *err);
/* Points every memory object and view at arena (plan->arena_bytes long). */
int vr_plan_bind(vr_plan *p, void *arena, vr_errbuf *err);
/* Points plan input i at caller memory (nbytes long, 64-byte aligned) in
 * place of its arena bytes, or back at the arena (data NULL, or memory
 * that does not qualify). Returns 1 when the input now reads `data`.
 * Sets *dirty when a binding changed: call vr_plan_bind before running. */
int vr_plan_borrow_input(vr_plan *p, int i, void *data, size_t nbytes, int *dirty);
/* Executes the steps; node_ns (may be NULL) accumulates per-node time
 * indexed by node - node_begin. */
int vr_plan_run(vr_plan *p, dnnl_stream_t st, int node_begin, int64_t *node_ns,
                vr_errbuf *err);
void vr_plan_free(vr_plan *p);
void vr_wcache_free(vr_wcache *w);
int64_t vr_wcache_bytes(const vr_wcache *w);

/* The process-wide CPU engine (created on first use; thread-safe). */
dnnl_engine_t vr_dnnl_engine(void);

#endif
