/*
 * KServe v2 gRPC: a ModelInferRequest (unpacked by protobuf-c) checked and
 * turned into a vr_ks_request, as kserve_req.c does for HTTP bodies: shapes,
 * datatypes, element counts against the contents, and parameters (the
 * unsupported ones refused by name). Fuzzed by tests/fuzz/fuzz_grpcreq.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "server/grpc_int.h"

static int param_int(const Inference__InferParameter *p, int64_t *v) {
  if (p->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM)
    *v = p->int64_param;
  else if (p->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM)
    *v = (int64_t)(p->uint64_param > INT64_MAX ? INT64_MAX : p->uint64_param);
  else
    return -1;
  return 0;
}

static int request_params(Inference__ModelInferRequest *q, vr_ks_request *ks,
                          vr_errbuf *err) {
  for (size_t i = 0; i < q->n_parameters; i++) {
    const char *k = q->parameters[i]->key;
    const Inference__InferParameter *p = q->parameters[i]->value;
    int64_t v;
    if (!p) continue;
    if (!strcmp(k, "timeout") || !strcmp(k, "priority")) {
      if (param_int(p, &v) || v < 0)
        return vr_errf(err, VR_EINVAL, "parameter \"%s\" must be a non-negative integer", k);
      if (k[0] == 't' && v > INT64_MAX / 1000) /* as HTTP: in ns it must fit */
        return vr_errf(err, VR_EINVAL, "parameter \"timeout\" (microseconds) must be at "
                       "most %lld", (long long)(INT64_MAX / 1000));
      if (k[0] == 't') ks->timeout_us = v;
      else ks->priority = (int)(v > 1000000 ? 1000000 : v);
    } else if (strcmp(k, "binary_data_output")) { /* gRPC data is raw anyway */
      return vr_ks_refuse_param(k, " in the request", err);
    }
  }
  return 0;
}

/* Typed contents copied into an owned buffer of t's dtype. */
static int contents(const Inference__InferTensorContents *ct, vr_ks_input *t, int64_t n,
                    vr_errbuf *err) {
  size_t have = 0;
  const void *src = NULL;
  size_t esz = vr_dtype_size(t->dtype);
  switch (t->dtype) {
  case VR_DT_F32: have = ct->n_fp32_contents, src = ct->fp32_contents; break;
  case VR_DT_F64: have = ct->n_fp64_contents, src = ct->fp64_contents; break;
  case VR_DT_I64: have = ct->n_int64_contents, src = ct->int64_contents; break;
  case VR_DT_I32: have = ct->n_int_contents, src = ct->int_contents; break;
  default:
    return vr_errf(err, VR_EUNSUPPORTED, "input '%s': send %s data in"
                   " raw_input_contents", t->name, vr_dtype_kserve(t->dtype));
  }
  if ((int64_t)have != n)
    return vr_errf(err, VR_ESHAPE, "input '%s': %zu values for a shape of %lld",
                   t->name, have, (long long)n);
  t->data = vr_aligned_alloc(64, t->nbytes ? t->nbytes : 64);
  if (!t->data) return vr_errf(err, VR_ENOMEM, "out of memory");
  t->owned = 1;
  if (n) memcpy(t->data, src, (size_t)n * esz);
  return 0;
}

static int one_input(Inference__ModelInferRequest *q, size_t i, vr_ks_input *t,
                     vr_errbuf *err) {
  const Inference__ModelInferRequest__InferInputTensor *in = q->inputs[i];
  if (strlen(in->name) >= sizeof t->name) /* as HTTP: refused, not cut */
    return vr_errf(err, VR_EFORMAT, "input %zu: name longer than %zu bytes", i,
                   sizeof t->name - 1);
  snprintf(t->name, sizeof t->name, "%s", in->name);
  t->dtype = vr_dtype_from_kserve(in->datatype);
  if (t->dtype == VR_DT_UNDEFINED)
    return vr_ks_bad_dtype(t->name, in->datatype, err);
  if (in->n_shape < 1 || in->n_shape > VR_MAX_DIMS)
    return vr_errf(err, VR_ESHAPE, "input '%s': shape must have 1..%d dims", t->name,
                   VR_MAX_DIMS);
  int64_t n = 1;
  t->ndim = (int)in->n_shape;
  for (size_t d = 0; d < in->n_shape; d++) {
    if (in->shape[d] < 0 || in->shape[d] > ((int64_t)1 << 28))
      return vr_errf(err, VR_ESHAPE, "input '%s': bad dim %lld", t->name,
                     (long long)in->shape[d]);
    t->shape[d] = in->shape[d];
    n *= in->shape[d];
    if (n > VR_KS_MAX_ELEMS)
      return vr_errf(err, VR_ELIMIT, "input '%s': too many elements", t->name);
  }
  t->nbytes = (size_t)n * vr_dtype_size(t->dtype);
  for (size_t k = 0; k < in->n_parameters; k++)
    if (strcmp(in->parameters[k]->key, "binary_data_size")) {
      char where[VR_NAME_MAX + 16];
      snprintf(where, sizeof where, " in input '%s'", t->name);
      return vr_ks_refuse_param(in->parameters[k]->key, where, err);
    }
  if (q->n_raw_input_contents) {
    if (in->contents) /* the spec forbids both: one of them would be ignored */
      return vr_errf(err, VR_EFORMAT, "input '%s': contents given with"
                     " raw_input_contents; send the data in one of them", t->name);
    if (q->raw_input_contents[i].len != t->nbytes)
      return vr_errf(err, VR_ESHAPE, "input '%s': raw_input_contents has %zu bytes,"
                     " shape and datatype need %zu", t->name,
                     q->raw_input_contents[i].len, t->nbytes);
    t->data = q->raw_input_contents[i].data; /* lives as long as q */
    return 0;
  }
  if (!in->contents)
    return vr_errf(err, VR_EFORMAT, "input '%s': no contents", t->name);
  return contents(in->contents, t, n, err);
}

int vr__grpc_to_ks(Inference__ModelInferRequest *q, vr_ks_request *ks, vr_errbuf *err) {
  memset(ks, 0, sizeof *ks);
  /* as HTTP: refused, not cut (a cut can split a UTF-8 character, and
   * the echoed id is then a string protobuf clients reject) */
  if (strlen(q->id) >= sizeof ks->id)
    return vr_errf(err, VR_EFORMAT, "\"id\" must be a string under %zu bytes", sizeof ks->id);
  snprintf(ks->id, sizeof ks->id, "%s", q->id);
  int rc = request_params(q, ks, err);
  if (rc) return rc;
  if (q->n_inputs < 1 || q->n_inputs > VR_RT_MAX_IO)
    return vr_errf(err, VR_EFORMAT, "a request needs 1..%d inputs", VR_RT_MAX_IO);
  if (q->n_raw_input_contents && q->n_raw_input_contents != q->n_inputs)
    return vr_errf(err, VR_EFORMAT, "raw_input_contents has %zu entries for %zu"
                   " inputs", q->n_raw_input_contents, q->n_inputs);
  for (size_t i = 0; i < q->n_inputs; i++, ks->n_in++)
    if ((rc = one_input(q, i, &ks->in[i], err))) return rc;
  if (q->n_outputs > VR_RT_MAX_IO)
    return vr_errf(err, VR_EFORMAT, "more than %d outputs", VR_RT_MAX_IO);
  for (size_t i = 0; i < q->n_outputs; i++, ks->n_out++) {
    vr_ks_output_req *o = &ks->out[i];
    if (strlen(q->outputs[i]->name) >= sizeof o->name)
      return vr_errf(err, VR_EFORMAT, "output %zu: name longer than %zu bytes", i,
                     sizeof o->name - 1);
    snprintf(o->name, sizeof o->name, "%s", q->outputs[i]->name);
    o->binary = -1;
    for (size_t k = 0; k < q->outputs[i]->n_parameters; k++) {
      const char *key = q->outputs[i]->parameters[k]->key;
      const Inference__InferParameter *p = q->outputs[i]->parameters[k]->value;
      int64_t v;
      char where[40];
      snprintf(where, sizeof where, " in outputs[%zu]", i);
      if (!strcmp(key, "classification")) {
        if (!p || param_int(p, &v) || v < 1 || v > (1 << 20))
          return vr_errf(err, VR_EINVAL, "parameter \"classification\"%s must be"
                         " an integer >= 1", where);
        o->classification = (int)v;
      } else if (strcmp(key, "binary_data")) {
        return vr_ks_refuse_param(key, where, err);
      }
    }
  }
  return 0;
}
