/*
 * Graph passes (opt.c, fuse.c) and the model object built from them.
 *
 * vr_graph_optimize runs, in order: op lookup and arity checks; shape
 * inference at three probe batch sizes with constant folding (values equal
 * at every probe become CONST, integer values linear in the batch become
 * AFFINE); dead-node elimination; fusions; compaction so that live nodes
 * are 0..nnodes-1 in execution order.
 */
#ifndef VR_ENGINE_GRAPH_H
#define VR_ENGINE_GRAPH_H

#include "engine/ir.h"
#include "vario/engine.h"

int vr_graph_optimize(vr_graph *g, vr_errbuf *err);

/* The optimizer's first pass alone: every node's op looked up (op_id),
 * its attributes' types and its arity checked. Also run on unpacked
 * models (pack.c), which skip the rest: with `fused`, the inputs fusions
 * add (a Conv's SUM addend, a MatMul's bias) are allowed. */
int vr__graph_check_ops(vr_graph *g, int fused, vr_errbuf *err);

/* Shapes of every value at a concrete batch size. vt[i] gets dtype/shape;
 * data points at constant data (CONST: the graph's; AFFINE: a buffer in
 * owned[i] that the caller frees with vr_aligned_free). Runtime values get
 * data NULL. Nodes with n->dead set are skipped. */
int vr_graph_shapes_at(const vr_graph *g, int64_t batch, vr_tview *vt,
                       void **owned, vr_errbuf *err);

/* Runs the op's shape inference for node ni with input views from vt and
 * writes its outputs into vt. */
int vr_graph_infer_node(const vr_graph *g, int ni, vr_tview *vt, vr_errbuf *err);

/* Fusions (fuse.c): BatchNorm into Conv, activations as post-ops, Add as a
 * Conv sum post-op, MatMul + constant bias. Marks absorbed nodes dead. */
int vr_graph_fuse(vr_graph *g, vr_errbuf *err);

/* Number of live uses of each value (graph outputs count once). uses must
 * hold g->nvals ints. */
void vr_graph_count_uses(const vr_graph *g, int *uses);

/* Loads a model with some graph inputs frozen into constants: frozen[i]
 * (n entries, by graph-input order; dt == VR_DT_UNDEFINED = keep as input)
 * gives their values, copied. Used by the conformance runner, whose cases
 * pass shape-like tensors (Reshape's shape, Slice's starts) as inputs while
 * the engine compiles static plans. */
int vr_model_load_frozen(const void *buf, size_t len, const char *base_dir,
                         const vr_tview *frozen, int n, vr_model **out,
                         vr_errbuf *err);

/* Boundary tensors of nodes [b, e): in_vals gets the runtime values read in
 * the range but produced before it (graph inputs included), out_vals those
 * produced in it and read after it or graph outputs. Both arrays must hold
 * g->nvals ints. The whole range gives the graph's inputs and outputs. */
int vr__graph_range_ports(const vr_graph *g, int b, int e, int *in_vals, int *nin,
                          int *out_vals, int *nout);

/* Fills a model's descriptions (inputs, outputs, node infos, FLOPs) from its
 * already optimised graph (model.c; used by load and by vr_model_slice). */
int vr__model_finish(vr_model *m, vr_errbuf *err);

struct vr_model {
  vr_graph g;
  int nin, nout;
  vr_tensor_info *inputs, *outputs;
  int nnodes;
  vr_node_info *nodes;
  int64_t flops, weight_bytes;
  int dyn_batch; /* any input has a dynamic batch dim */
};

#endif
