/* libFuzzer harness for model packs (vr_model_unpack, engine/pack.c: what
 * an AsyFunc shadow process reads from its body): unpack arbitrary bytes;
 * if a model comes out and is small, open a batch-1 session and run it
 * once on zeros, so that a pack the checks let through is one the planner
 * and kernels can take. Seeds: packs of tests/data/engine models, whole
 * or a node range, written by
 *   vario shadow --model tests/data/engine/NAME.onnx --range B:E --pack-out NAME.pack
 * (tiny_cnn 0:9 and 3:7, alias_branch 0:4, avgpool_ceil 0:1, act_nan 0:9,
 * tiny_tf 0:23, gemm_alpha0_relu 0:2). A pack is in native byte order and
 * carries the build's limits: regenerate them after a format change.
 *
 * Byte mutations break a pack's counts and lengths, so most mutants
 * stopped at the reader's first checks. LLVMFuzzerCustomMutator below
 * unpacks the input and mutates the graph instead (value indices of node
 * ports and graph ports, op names, attribute values, post-ops and the SUM
 * addend, runtime values' shapes and types, flags, opsets, node order),
 * then packs it again: mutants that reach the wiring, op and shape
 * checks. A quarter of the calls go to libFuzzer's byte mutations. */
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include <dnnl.h>

#include "fuzz_model.h"
#include "fuzz_mutate.h"

#include "base/alloc.h"
#include "engine/graph.h"

static void run_once(const vr_model *m) {
  vr_tensor in[VR_FZ_MAX_IN], out[64];
  void *bufs[VR_FZ_MAX_IN];
  vr_errbuf e;
  int n;
  vr_session *s = vr_fz_session(m, in, bufs, &n);
  if (!s) return;
  if (n >= 0) vr_session_run(s, 1, in, n, out, 64, &e);
  for (int i = 0; i < VR_FZ_MAX_IN; i++) vr_free(bufs[i]);
  vr_session_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vr_model *m = NULL;
  vr_errbuf e;
  if (vr_model_unpack(data, size, &m, &e) == 0) {
    if (vr_model_flops(m) < 2000000 && vr_model_weight_bytes(m) < (8 << 20) &&
        vr_fz_largest_tensor(m) < (16 << 20))
      run_once(m);
    vr_model_free(m);
  }
  return 0;
}

/* ---- structure-aware mutation ------------------------------------------ */

/* A value index: mostly a valid one, sometimes just out of range or wild. */
static int any_val(const vr_graph *g, int old) {
  switch (rnd(8)) {
  case 0: return -1;
  case 1: return g->nvals;
  case 2: return (int)edge_int(old);
  default: return (int)rnd((unsigned)g->nvals);
  }
}

/* Only what the writer never reads through: indices, scalars, names. A
 * constant's shape and type size its data, so they are permuted, not
 * changed (the writer would read past the data). */
static void mutate_val(vr_val *v) {
  switch (rnd(5)) {
  case 0:
    if (v->kind == VR_VAL_RUNTIME) {
      if (v->ndim && rnd(2)) v->shape[rnd((unsigned)v->ndim)] = edge_int(v->shape[0]);
      else v->ndim = (int)rnd(VR_MAX_DIMS + 1);
    } else if (v->ndim > 1) { /* same element count */
      unsigned a = rnd((unsigned)v->ndim), b = rnd((unsigned)v->ndim);
      int64_t t = v->shape[a];
      v->shape[a] = v->shape[b], v->shape[b] = t;
    }
    break;
  case 1:
    if (v->kind == VR_VAL_RUNTIME) v->dtype = (vr_dtype)rnd(12);
    break;
  case 2: v->is_input ^= 1; break;
  case 3: v->is_output ^= 1; break;
  default: v->dyn_batch ^= 1; break;
  }
}

static void mutate_attr(vr_attr *a) {
  switch (rnd(4)) {
  case 0: a->i = edge_int(a->i); break;
  case 1: a->f = edge_float(a->f); break;
  case 2: if (a->ints && a->n > 0) a->ints[rnd((unsigned)a->n)] = edge_int(a->ints[0]); break;
  default: if (a->floats && a->n > 0) a->floats[rnd((unsigned)a->n)] = edge_float(a->floats[0]); break;
  }
}

static void mutate_post(vr_node *n) {
  static const int algs[] = {dnnl_eltwise_relu, dnnl_eltwise_logistic, dnnl_eltwise_clip_v2,
                             dnnl_eltwise_linear, dnnl_eltwise_gelu_erf, dnnl_eltwise_abs};
  switch (rnd(4)) {
  case 0: n->npost = (int)rnd(VR_MAX_POST + 1); break;
  case 1: n->sum_in = rnd(2) ? (int)rnd((unsigned)n->nin + 1) - 1 : (int)edge_int(n->sum_in); break;
  default: {
    vr_post *p = &n->post[rnd(VR_MAX_POST)];
    p->kind = (int)rnd(4);
    p->alg = rnd(4) ? algs[rnd(sizeof algs / sizeof *algs)] : (int)edge_int(p->alg);
    p->alpha = edge_float(p->alpha);
    p->beta = edge_float(p->beta);
    break;
  }
  }
}

static void mutate_node(const vr_graph *g, vr_node *n) {
  static const char *const ops[] = {"Conv", "Relu", "Add", "MatMul", "Gemm", "MaxPool",
                                    "AveragePool", "Reshape", "Flatten", "Concat", "Softmax",
                                    "Identity", "Transpose", "Mul", "Sigmoid", "Clip", "Pad",
                                    "GlobalAveragePool", "Slice", "Bogus"};
  switch (rnd(7)) {
  case 0: if (n->nin) n->in[rnd((unsigned)n->nin)] = any_val(g, n->in[0]); break;
  case 1: if (n->nout) n->out[rnd((unsigned)n->nout)] = any_val(g, n->out[0]); break;
  case 2: if (n->nin) n->nin--; break; /* the writer writes nin of them */
  case 3: {
    char *op = vr_strdup(ops[rnd(sizeof ops / sizeof *ops)]);
    if (op) vr_free(n->op), n->op = op;
    break;
  }
  case 4: n->opset = rnd(2) ? (int64_t)rnd(24) : edge_int(n->opset); break;
  case 5: mutate_post(n); break;
  default: if (n->nattr) mutate_attr(&n->attrs[rnd((unsigned)n->nattr)]); break;
  }
}

static void mutate_graph(vr_graph *g) {
  switch (rnd(6)) {
  case 0:
    if (g->nvals) mutate_val(&g->vals[rnd((unsigned)g->nvals)]);
    break;
  case 1: /* a graph port */
    if (g->nin && rnd(2)) g->inputs[rnd((unsigned)g->nin)] = any_val(g, g->inputs[0]);
    else if (g->nout) g->outputs[rnd((unsigned)g->nout)] = any_val(g, g->outputs[0]);
    break;
  case 2:
    if (g->nnodes > 1) { /* two nodes swap places */
      unsigned a = rnd((unsigned)g->nnodes), b = rnd((unsigned)g->nnodes);
      vr_node t = g->nodes[a];
      g->nodes[a] = g->nodes[b], g->nodes[b] = t;
    }
    break;
  case 3: g->opset = rnd(2) ? (int64_t)rnd(24) : edge_int(g->opset); break;
  default:
    if (g->nnodes) mutate_node(g, &g->nodes[rnd((unsigned)g->nnodes)]);
    break;
  }
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
                               unsigned int seed) {
  vr_fz_seed(seed);
  vr_model *m = NULL;
  vr_errbuf e;
  if (rnd(4) == 0 || vr_model_unpack(data, size, &m, &e))
    return LLVMFuzzerMutate(data, size, max_size);
  for (unsigned n = 1 + rnd(3); n--;) mutate_graph(&m->g);
  void *buf = NULL;
  size_t len = 0;
  int ok = vr_model_pack(m, &buf, &len, &e) == 0 && len <= max_size;
  if (ok) memcpy(data, buf, len);
  vr_free(buf);
  vr_model_free(m);
  return ok ? len : LLVMFuzzerMutate(data, size, max_size);
}
