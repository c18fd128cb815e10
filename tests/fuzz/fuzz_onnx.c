/* libFuzzer harness for the ONNX loader and graph passes: parse from a
 * buffer; if the model loads and is small, compile a batch-1 session and
 * run it once on zeros (exercises shape inference, folding, fusions and
 * plan building on arbitrary graphs); two inputs in three run again in
 * bf16 or int8 (calibrated on the same zeros).
 *
 * Mutating the protobuf's bytes leaves almost nothing that parses (the
 * campaign of 2026-11-29: coverage 2588 after 1.3 M runs), so the graph
 * passes saw few new graphs. LLVMFuzzerCustomMutator below mutates the
 * decoded model instead: dims, types and data lengths of initializers,
 * graph input shapes, op types, node inputs and their order, attribute
 * values, opset; and hands a quarter of the calls to libFuzzer's byte
 * mutations. The replay build (replay.c) does not call it. */
#include <math.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"

#include "fuzz_model.h"
#include "fuzz_mutate.h"

#include "base/alloc.h"
#include "engine/graph.h"
#include "vario/engine.h"

#define MAX_FLOPS 2000000LL  /* keep each input fast */

/* Runs the model once more in another precision on the same inputs: bf16,
 * or int8 calibrated on those inputs (the quantisation passes, which the
 * fp32 session never reaches). */
static void run_other_precision(const vr_model *m, vr_precision prec,
                                const vr_tensor *in, int n) {
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.precision = prec;
  if (prec == VR_PREC_INT8) o.calibration = in, o.n_calibration = n;
  vr_session *s = NULL;
  vr_errbuf e;
  vr_tensor out[64];
  if (vr_session_create(m, &o, &s, &e)) return;
  if (vr_session_num_inputs(s) == n) vr_session_run(s, 1, in, n, out, 64, &e);
  vr_session_free(s);
}

/* prec: also run in bf16 (1) or int8 (2). */
static void run_once(const vr_model *m, int prec) {
  vr_tensor in[VR_FZ_MAX_IN], out[64];
  void *bufs[VR_FZ_MAX_IN];
  vr_errbuf e;
  int n;
  vr_session *s = vr_fz_session(m, in, bufs, &n);
  if (!s) return;
  int ok = n >= 0;
  /* int8's calibration runs the graph per sample (dim 0, in chunks of at
   * most 16): a fixed dim 0 of 2^20 rows of no elements took 65536 runs,
   * past libFuzzer's 10-s timeout in CI (seed calib_many_rows.onnx) */
  for (int i = 0; ok && i < n; i++)
    if (in[i].ndim > 0 && in[i].shape[0] > 64) prec = 0;
  if (ok && !vr_session_run(s, 1, in, n, out, 64, &e) && prec)
    run_other_precision(m, prec == 1 ? VR_PREC_BF16 : VR_PREC_INT8, in, n);
  for (int i = 0; i < VR_FZ_MAX_IN; i++) vr_free(bufs[i]);
  vr_session_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vr_model *m = NULL;
  vr_errbuf e;
  if (vr_model_load_buffer(data, size, NULL, &m, &e) == 0) {
    if (vr_model_flops(m) < MAX_FLOPS && vr_model_weight_bytes(m) < (8 << 20) &&
        vr_fz_largest_tensor(m) < (16 << 20))
      /* which other precision: fixed per input; only for small tensors,
       * as int8's calibration runs the graph on reference kernels (a Pad
       * to 16 MB took 40 s under the sanitizers) */
      run_once(m, vr_fz_largest_tensor(m) < (1 << 20) ? (int)(size % 3) : 0);
    vr_model_free(m);
  }
  return 0;
}

/* ---- structure-aware mutation ------------------------------------------ */

/* Replaces a protobuf-c string (malloc'd by the default allocator, or the
 * shared empty string) with a copy of `with`. */
static void set_str(char **slot, const char *with) {
  char *c = strdup(with);
  if (!c) return;
  if (*slot && *slot != protobuf_c_empty_string) free(*slot);
  *slot = c;
}

/* A name some node or the graph defines or uses: for rewiring. proto2
 * strings that were absent are NULL. */
static const char *pick_name(const Onnx__GraphProto *g) {
  unsigned k = rnd(4);
  if (k == 0 && g->n_initializer) return g->initializer[rnd(g->n_initializer)]->name;
  if (k == 1 && g->n_input) return g->input[rnd(g->n_input)]->name;
  if (g->n_node) {
    const Onnx__NodeProto *n = g->node[rnd(g->n_node)];
    if (n->n_output && rnd(2)) return n->output[rnd(n->n_output)];
    if (n->n_input) return n->input[rnd(n->n_input)];
  }
  return "";
}
static const char *any_name(const Onnx__GraphProto *g) {
  const char *s = pick_name(g);
  return s ? s : "";
}

static void mutate_tensor(Onnx__TensorProto *t) {
  switch (rnd(4)) {
  case 0:
    if (t->n_dims) t->dims[rnd(t->n_dims)] = edge_int(t->dims[rnd(t->n_dims)]);
    break;
  case 1: /* one dim fewer: the array stays, its tail unused */
    if (t->n_dims) {
      int64_t *d = malloc((t->n_dims - 1 + 1) * sizeof *d);
      if (!d) break;
      if (t->n_dims > 1) memcpy(d, t->dims, (t->n_dims - 1) * sizeof *d);
      free(t->dims);
      t->dims = d, t->n_dims--;
    }
    break;
  case 2:
    t->has_data_type = 1, t->data_type = (int32_t)rnd(17);
    break;
  default:
    if (t->has_raw_data && t->raw_data.len) t->raw_data.len = rnd((unsigned)t->raw_data.len);
    else if (t->n_float_data) t->n_float_data = rnd((unsigned)t->n_float_data);
    else if (t->n_int64_data) t->n_int64_data = rnd((unsigned)t->n_int64_data);
    break;
  }
}

static void mutate_value_info(Onnx__ValueInfoProto *vi) {
  Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
      !tp->tensor_type)
    return;
  Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  if (rnd(3) == 0 || !tt->shape || !tt->shape->n_dim) {
    tt->has_elem_type = 1, tt->elem_type = (int32_t)rnd(17);
    return;
  }
  Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[rnd(tt->shape->n_dim)];
  if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
    free(d->dim_param != protobuf_c_empty_string ? d->dim_param : NULL),
        d->dim_value = 1;
  d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
  d->dim_value = edge_int(d->dim_value);
}

static void mutate_attr(Onnx__AttributeProto *a) {
  switch (rnd(5)) {
  case 0: a->has_i = 1, a->i = edge_int(a->i); break;
  case 1: if (a->n_ints) a->ints[rnd(a->n_ints)] = edge_int(a->ints[rnd(a->n_ints)]); break;
  case 2: a->has_f = 1, a->f = edge_float(a->f); break;
  case 3: if (a->n_floats) a->floats[rnd(a->n_floats)] = edge_float(a->floats[0]); break;
  default: a->has_type = 1, a->type = (Onnx__AttributeProto__AttributeType)rnd(15); break;
  }
}

static void mutate_node(Onnx__GraphProto *g, Onnx__NodeProto *n) {
  static const char *ops[] = {"Conv", "Relu", "Add", "Mul", "MatMul", "Gemm",
                              "Reshape", "Transpose", "Concat", "Split",
                              "Slice", "Gather", "Softmax", "MaxPool",
                              "AveragePool", "BatchNormalization", "Clip",
                              "Pad", "Expand", "Squeeze", "Unsqueeze",
                              "Flatten", "Shape", "Cast", "Sigmoid", "Where",
                              "ConvTranspose", "QuantizeLinear",
                              "DequantizeLinear", "Resize", "ReduceMean"};
  switch (rnd(6)) {
  case 0: set_str(&n->op_type, ops[rnd(sizeof ops / sizeof *ops)]); break;
  case 1: if (n->n_input) set_str(&n->input[rnd(n->n_input)], any_name(g)); break;
  case 2: if (n->n_output) set_str(&n->output[rnd(n->n_output)], any_name(g)); break;
  case 3: /* one input fewer */
    if (n->n_input) {
      n->n_input--;
      if (n->input[n->n_input] != protobuf_c_empty_string) free(n->input[n->n_input]);
    }
    break;
  case 4: /* an input added (array grown with malloc, as protobuf-c's own) */
    {
      char **in = malloc((n->n_input + 1) * sizeof *in), *c = strdup(any_name(g));
      if (!in || !c) {
        free(in), free(c);
        break;
      }
      if (n->n_input) memcpy(in, n->input, n->n_input * sizeof *in);
      in[n->n_input] = c;
      free(n->input);
      n->input = in, n->n_input++;
    }
    break;
  default:
    if (n->n_attribute) mutate_attr(n->attribute[rnd(n->n_attribute)]);
    break;
  }
}

static void mutate_model(Onnx__ModelProto *m) {
  Onnx__GraphProto *g = m->graph;
  unsigned k = rnd(10);
  if (k == 0 && m->n_opset_import) {
    Onnx__OperatorSetIdProto *o = m->opset_import[rnd(m->n_opset_import)];
    o->has_version = 1, o->version = rnd(3) ? (int64_t)rnd(24) : edge_int(o->version);
  } else if (k <= 2 && g->n_initializer) {
    mutate_tensor(g->initializer[rnd(g->n_initializer)]);
  } else if (k == 3 && g->n_input) {
    mutate_value_info(g->input[rnd(g->n_input)]);
  } else if (k == 4 && g->n_node > 1) { /* two nodes swap places */
    unsigned a = rnd(g->n_node), b = rnd(g->n_node);
    Onnx__NodeProto *t = g->node[a];
    g->node[a] = g->node[b], g->node[b] = t;
  } else if (k == 5 && g->n_node > 1) { /* a node removed */
    unsigned a = rnd(g->n_node);
    onnx__node_proto__free_unpacked(g->node[a], NULL);
    memmove(g->node + a, g->node + a + 1, (g->n_node - a - 1) * sizeof *g->node);
    g->n_node--;
  } else if (g->n_node) {
    mutate_node(g, g->node[rnd(g->n_node)]);
  }
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
                               unsigned int seed) {
  vr_fz_seed(seed);
  if (rnd(4) == 0) return LLVMFuzzerMutate(data, size, max_size);
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, size, data);
  if (!m || !m->graph) {
    if (m) onnx__model_proto__free_unpacked(m, NULL);
    return LLVMFuzzerMutate(data, size, max_size);
  }
  for (unsigned n = 1 + rnd(3); n--;) mutate_model(m);
  size_t out = onnx__model_proto__get_packed_size(m);
  if (out <= max_size) onnx__model_proto__pack(m, data);
  onnx__model_proto__free_unpacked(m, NULL);
  return out <= max_size ? out : LLVMFuzzerMutate(data, size, max_size);
}
