/*
 * Vario engine: runs ONNX models on oneDNN.
 *
 * Two objects:
 *  - vr_model: a parsed, shape-inferred and optimised graph with its
 *    weights. Immutable after load, so many sessions may share one model
 *    (from any threads). The caller owns it; free it after every session
 *    made from it.
 *  - vr_session: a model compiled for one precision, thread count and max
 *    batch size (one plan per batch size 1..max_batch, weights reordered
 *    once, activation memory planned). A session is used by one thread at a
 *    time (an instance's executor); it never uses more than `threads` cores
 *    even when other sessions run at the same time in the process.
 *    The caller owns it.
 *
 * All functions return 0 or a negative VR_E* code and fill err (may be
 * NULL) with a one-line message naming the file, node, op or tensor at fault.
 * The engine knows nothing about serving.
 */
#ifndef VARIO_ENGINE_H
#define VARIO_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "vario/dtype.h"
#include "vario/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VR_MAX_DIMS 8
#define VR_NAME_MAX 128

typedef struct vr_model vr_model;
typedef struct vr_session vr_session;

typedef enum vr_precision {
  VR_PREC_FP32 = 0,
  VR_PREC_BF16 = 1,
  VR_PREC_INT8 = 2,
} vr_precision;

const char *vr_precision_name(vr_precision p);        /* "fp32", ... */
int vr_precision_parse(const char *s, vr_precision *out); /* 0 or VR_EINVAL */
/* Whether this CPU can run the precision natively (bf16 needs AVX512-BF16
 * or AMX). */
int vr_precision_supported(vr_precision p);

/* Static description of a graph input or output. shape[0] is -1 when the
 * batch dimension is dynamic; other dims are concrete after inference. */
typedef struct vr_tensor_info {
  char name[VR_NAME_MAX];
  vr_dtype dtype;
  int ndim;
  int64_t shape[VR_MAX_DIMS];
} vr_tensor_info;

/* A tensor passed to or returned from vr_session_run. The struct never
 * owns data: inputs point at caller memory, outputs at session memory. */
typedef struct vr_tensor {
  const char *name;
  vr_dtype dtype;
  int ndim;
  int64_t shape[VR_MAX_DIMS];
  void *data;
  size_t nbytes;
} vr_tensor;

/* One node of the optimised graph, in execution (topological) order. */
typedef struct vr_node_info {
  char name[VR_NAME_MAX];
  char op_type[64];      /* after fusion, e.g. "Conv+Relu" */
  int64_t flops;         /* per sample (batch 1) */
  int64_t weight_bytes;  /* fp32 bytes of the node's initialisers */
} vr_node_info;

/* ---- models ------------------------------------------------------------ */

/* Loads an ONNX file. External data files are resolved relative to the
 * model's directory. */
int vr_model_load(const char *path, vr_model **out, vr_errbuf *err);
/* Same from memory; base_dir (may be NULL) resolves external data. The
 * buffer is not retained. */
int vr_model_load_buffer(const void *buf, size_t len, const char *base_dir,
                         vr_model **out, vr_errbuf *err);
void vr_model_free(vr_model *m);

int vr_model_num_inputs(const vr_model *m);
int vr_model_num_outputs(const vr_model *m);
const vr_tensor_info *vr_model_input(const vr_model *m, int i);
const vr_tensor_info *vr_model_output(const vr_model *m, int i);
int vr_model_num_nodes(const vr_model *m);
const vr_node_info *vr_model_node(const vr_model *m, int i);
/* Total FLOPs for one sample (multiply-add = 2). */
int64_t vr_model_flops(const vr_model *m);
/* Bytes of fp32 weights. */
int64_t vr_model_weight_bytes(const vr_model *m);

/* A standalone model made of nodes [node_begin, node_end) of m's optimised
 * graph (AsyFunc's layer blocks). It copies only the constants those nodes
 * read, so it holds just its range's weights, and m may be freed after.
 * Its inputs and outputs are the range's boundary tensors (those of a
 * partial session over the same range); the graph is not re-optimised, so
 * a session on the slice computes bit for bit what a partial session on m
 * computes. VR_EUNSUPPORTED when a boundary input does not carry the batch
 * in dim 0. The caller owns *out. */
int vr_model_slice(const vr_model *m, int node_begin, int node_end, vr_model **out,
                   vr_errbuf *err);
/* A model as bytes for another process of the same build on the same
 * host (an AsyFunc body hands its shadow process its slice this way, so
 * the shadow neither parses the ONNX file nor optimises again): native
 * byte order, no file format. *buf (vr_malloc'd; the caller frees it with
 * vr_free) and *len; VR_EINVAL for a graph that is not optimised. */
int vr_model_pack(const vr_model *m, void **buf, size_t *len, vr_errbuf *err);
/* The model packed in buf. Every field is checked, and the graph is
 * checked as loading checks one (ops, attributes, arity, order, shapes
 * inferred again), so a bad or foreign pack is VR_EFORMAT (or
 * VR_EUNSUPPORTED for an unknown op), never a crash. The caller owns *out;
 * buf is not retained. */
int vr_model_unpack(const void *buf, size_t len, vr_model **out, vr_errbuf *err);

/* Chain cuts: cut[k] (k in 0..num_nodes) = 1 when exactly one tensor,
 * batch-major, crosses from nodes [0, k) to [k, n), so the range can be
 * split by rows there. cut must hold num_nodes + 1 bytes. 0 or VR_ENOMEM. */
int vr_model_chain_cuts(const vr_model *m, char *cut);

/* ---- sessions ---------------------------------------------------------- */

typedef struct vr_session_opts {
  vr_precision precision; /* default fp32 */
  int threads;            /* cores this session may use; 0 = 1 */
  int max_batch;          /* plans for 1..max_batch; 0 = 1 */
  /* int8 only: calibration inputs for post-training quantisation, one
   * tensor per model input with N samples along dim 0 (also for a partial
   * session: scales come from the whole graph). Not retained. */
  const vr_tensor *calibration;
  int n_calibration;
  /* Partial execution: run nodes [node_begin, node_end) of the optimised
   * graph only. Both 0 = the whole graph. The session's inputs are then the
   * tensors that cross into the range, its outputs those that leave it. */
  int node_begin, node_end;
  /* Build each batch size's plan at its first run instead of all of them
   * at creation (one-off runs with a large batch, e.g. `vario run`). The
   * first run of a batch size then pays the compilation. Default 0. */
  int lazy_plans;
} vr_session_opts;

void vr_session_opts_init(vr_session_opts *o);
int vr_session_create(const vr_model *m, const vr_session_opts *o,
                      vr_session **out, vr_errbuf *err);
void vr_session_free(vr_session *s);

/* The session's inputs/outputs (differ from the model's for partial
 * sessions). Pointers live as long as the session. */
int vr_session_num_inputs(const vr_session *s);
int vr_session_num_outputs(const vr_session *s);
const vr_tensor_info *vr_session_input(const vr_session *s, int i);
const vr_tensor_info *vr_session_output(const vr_session *s, int i);
int vr_session_max_batch(const vr_session *s);
/* Bytes the session holds (weights in its precision + activation arena). */
int64_t vr_session_memory_bytes(const vr_session *s);

/* Runs `batch` samples (1..max_batch). inputs[i] must match the session's
 * inputs by name (any order), dtype and shape with dim 0 == batch. On
 * success outputs[0..n_out) are filled in the session's output order with
 * pointers into session memory valid until the next run or free.
 * n_out must be >= vr_session_num_outputs(s). */
int vr_session_run(vr_session *s, int batch, const vr_tensor *inputs, int n_in,
                   vr_tensor *outputs, int n_out, vr_errbuf *err);

/* Same as vr_session_run, but with no copy of the inputs: an input whose
 * data is 64-byte aligned and large enough is read in place (the session
 * computes on it as on its own arena bytes), which is how one partial
 * session consumes another's output (AsyFunc's boundary hand-off). Others
 * are copied as vr_session_run does. The session may overwrite the
 * borrowed buffers (in-place operators) and its outputs may point into
 * them; they must stay valid until the next run. */
int vr_session_run_borrowed(vr_session *s, int batch, const vr_tensor *inputs, int n_in,
                            vr_tensor *outputs, int n_out, vr_errbuf *err);

/* Per-node timing: when enabled, each run records each node's wall time;
 * ms[i] receives the mean over runs since enabling (n = node count of the
 * session's range). */
void vr_session_set_profiling(vr_session *s, int enable);
int vr_session_node_times(const vr_session *s, double *ms, int n);

#ifdef __cplusplus
}
#endif
#endif
