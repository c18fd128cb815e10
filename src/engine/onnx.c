/* ONNX ModelProto / TensorProto parsing into the IR (see onnx.h). */
#include "engine/onnx.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "onnx.pb-c.h"

#define MAX_ELEMS ((int64_t)1 << 34) /* 16 Gi elements: beyond any model */

/* protobuf-c allocator for model parsing: every block (including each
 * bytes field) comes from vr_aligned_alloc, so tensor_from_proto can adopt
 * raw_data buffers as tensor storage. */
static void *pb_alloc(void *ud, size_t n) { return vr_aligned_alloc(64, n ? n : 1); }
static void pb_free(void *ud, void *p) { vr_aligned_free(p); }
static ProtobufCAllocator pb_allocator = {pb_alloc, pb_free, NULL};
/* Set while parsing with pb_allocator (one parse per thread at a time). */
static _Thread_local int steal_raw;

int vr_onnx_read_file(const char *path, void **buf, size_t *len, vr_errbuf *err) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return vr_errf(err, errno == ENOENT ? VR_ENOENT : VR_EIO, "%s: %s", path,
                   strerror(errno));
  if (fseek(f, 0, SEEK_END) != 0) goto io;
  long n = ftell(f);
  if (n < 0 || fseek(f, 0, SEEK_SET) != 0) goto io;
  void *b = vr_malloc(n ? (size_t)n : 1);
  if (!b) {
    fclose(f);
    return vr_errf(err, VR_ENOMEM, "%s: cannot allocate %ld bytes", path, n);
  }
  if (n && fread(b, 1, (size_t)n, f) != (size_t)n) {
    vr_free(b);
    goto io;
  }
  fclose(f);
  *buf = b;
  *len = (size_t)n;
  return 0;
io:
  fclose(f);
  return vr_errf(err, VR_EIO, "%s: read error", path);
}

/* Reads [offset, offset+length) of an external data file; length < 0 means
 * "to the end". Rejects absolute paths and '..' so a model cannot reach
 * outside its directory. */
static int read_external(const char *base_dir, const char *loc, int64_t off,
                         int64_t length, size_t want, void *dst,
                         const char *tname, vr_errbuf *err) {
  if (!base_dir)
    return vr_errf(err, VR_EINVAL,
                   "initializer '%s': external data '%s' but no model "
                   "directory (loaded from memory)", tname, loc);
  if (loc[0] == '/' || strstr(loc, ".."))
    return vr_errf(err, VR_EFORMAT,
                   "initializer '%s': external data location '%s' must be "
                   "relative to the model directory", tname, loc);
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", base_dir, loc) >= (int)sizeof path)
    return vr_errf(err, VR_EINVAL, "initializer '%s': path too long", tname);
  FILE *f = fopen(path, "rb");
  if (!f)
    return vr_errf(err, VR_ENOENT, "initializer '%s': external data %s: %s",
                   tname, path, strerror(errno));
  int rc = 0;
  if (length >= 0 && (uint64_t)length != want) {
    rc = vr_errf(err, VR_EFORMAT,
                 "initializer '%s': external length %lld but dims need %zu "
                 "bytes", tname, (long long)length, want);
  } else if (fseek(f, (long)off, SEEK_SET) != 0 ||
             fread(dst, 1, want, f) != want) {
    rc = vr_errf(err, VR_EFORMAT,
                 "initializer '%s': external data %s too short for %zu bytes "
                 "at offset %lld", tname, path, want, (long long)off);
  }
  fclose(f);
  return rc;
}

/* The product of a shape's dims other than 0, saturated past
 * VR_MAX_TENSOR_ELEMS. An empty tensor has no elements, yet every element
 * count and stride taken of it multiplies its other dims: these must stay
 * within the element limit too, or they overflow int64. */
static int64_t nonzero_numel(int ndim, const int64_t *shape) {
  int64_t p = 1;
  for (int i = 0; i < ndim; i++)
    if (shape[i] > 0 && (p *= shape[i]) > VR_MAX_TENSOR_ELEMS) return VR_MAX_TENSOR_ELEMS + 1;
  return p;
}

static int supported_dtype(int dt) {
  switch (dt) {
    case VR_DT_F32: case VR_DT_U8: case VR_DT_I8: case VR_DT_U16:
    case VR_DT_I16: case VR_DT_I32: case VR_DT_I64: case VR_DT_BOOL:
    case VR_DT_F64: case VR_DT_U32: case VR_DT_U64:
      return 1;
    default:
      return 0;
  }
}

/* Copies typed repeated fields into dst (numel elements of dt). */
static int copy_typed(const Onnx__TensorProto *tp, vr_dtype dt, int64_t numel,
                      void *dst, const char *tname, vr_errbuf *err) {
  size_t have = 0;
  switch (dt) {
    case VR_DT_F32: have = tp->n_float_data; break;
    case VR_DT_F64: have = tp->n_double_data; break;
    case VR_DT_I64: have = tp->n_int64_data; break;
    case VR_DT_U32: case VR_DT_U64: have = tp->n_uint64_data; break;
    default: have = tp->n_int32_data; break;
  }
  if ((int64_t)have != numel)
    return vr_errf(err, VR_EFORMAT,
                   "initializer '%s': %zu values for %lld elements", tname,
                   have, (long long)numel);
  for (int64_t i = 0; dst && i < numel; i++) {
    switch (dt) {
      case VR_DT_F32: ((float *)dst)[i] = tp->float_data[i]; break;
      case VR_DT_F64: ((double *)dst)[i] = tp->double_data[i]; break;
      case VR_DT_I64: ((int64_t *)dst)[i] = tp->int64_data[i]; break;
      case VR_DT_U64: ((uint64_t *)dst)[i] = tp->uint64_data[i]; break;
      case VR_DT_U32: ((uint32_t *)dst)[i] = (uint32_t)tp->uint64_data[i]; break;
      case VR_DT_I32: ((int32_t *)dst)[i] = tp->int32_data[i]; break;
      case VR_DT_I16: ((int16_t *)dst)[i] = (int16_t)tp->int32_data[i]; break;
      case VR_DT_U16: ((uint16_t *)dst)[i] = (uint16_t)tp->int32_data[i]; break;
      case VR_DT_I8: ((int8_t *)dst)[i] = (int8_t)tp->int32_data[i]; break;
      case VR_DT_U8: case VR_DT_BOOL:
        ((uint8_t *)dst)[i] = (uint8_t)tp->int32_data[i];
        break;
      default: break;
    }
  }
  return 0;
}

static int tensor_from_proto(const Onnx__TensorProto *tp, const char *base_dir,
                             vr_tview *out, vr_errbuf *err) {
  const char *tname = tp->name ? tp->name : "";
  int dt = tp->has_data_type ? tp->data_type : 0;
  if (!supported_dtype(dt))
    return vr_errf(err, VR_EUNSUPPORTED,
                   "initializer '%s': unsupported data type %d", tname, dt);
  if (tp->n_dims > VR_MAX_DIMS)
    return vr_errf(err, VR_EUNSUPPORTED, "initializer '%s': %zu dims (max %d)",
                   tname, tp->n_dims, VR_MAX_DIMS);
  memset(out, 0, sizeof(*out));
  out->dt = (vr_dtype)dt;
  out->ndim = (int)tp->n_dims;
  int64_t numel = 1, nz = 1; /* nz: of the dims other than 0 (nonzero_numel) */
  for (size_t i = 0; i < tp->n_dims; i++) {
    if (tp->dims[i] < 0 || (tp->dims[i] && nz > MAX_ELEMS / tp->dims[i]))
      return vr_errf(err, VR_EFORMAT, "initializer '%s': bad dim %lld", tname,
                     (long long)tp->dims[i]);
    out->shape[i] = tp->dims[i];
    numel *= tp->dims[i];
    if (tp->dims[i]) nz *= tp->dims[i];
  }
  size_t esz = vr_dtype_size(out->dt);
  size_t bytes = (size_t)numel * esz;
  int external = tp->has_data_location &&
                 tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  /* Validate the payload size BEFORE allocating: dims are untrusted. */
  if (!external && tp->has_raw_data && tp->raw_data.len != bytes)
    return vr_errf(err, VR_EFORMAT, "initializer '%s': raw_data has %zu bytes, dims need %zu",
                   tname, tp->raw_data.len, bytes);
  if (!external && !tp->has_raw_data) {
    int rc0 = copy_typed(tp, out->dt, numel, NULL, tname, err);
    if (rc0) return rc0;
  }
  const char *loc = NULL;
  int64_t off = 0, length = -1;
  if (external) {
    for (size_t i = 0; i < tp->n_external_data; i++) {
      const Onnx__StringStringEntryProto *e = tp->external_data[i];
      if (!e->key || !e->value) continue;
      if (!strcmp(e->key, "location")) loc = e->value;
      else if (!strcmp(e->key, "offset")) off = strtoll(e->value, NULL, 10);
      else if (!strcmp(e->key, "length")) length = strtoll(e->value, NULL, 10);
    }
    if (!loc || off < 0)
      return vr_errf(err, VR_EFORMAT,
                     "initializer '%s': external data without a valid location", tname);
    if (length >= 0 && (uint64_t)length != bytes)
      return vr_errf(err, VR_EFORMAT,
                     "initializer '%s': external length %lld but dims need %zu bytes", tname,
                     (long long)length, bytes);
    if (bytes > ((size_t)1 << 36))
      return vr_errf(err, VR_ELIMIT, "initializer '%s': %zu bytes", tname, bytes);
    /* no directory, or a location outside it: read_external's refusal,
     * before the claimed size is allocated */
    if (!base_dir || loc[0] == '/' || strstr(loc, ".."))
      return read_external(base_dir, loc, off, length, bytes, NULL, tname, err);
  }
  /* raw_data was allocated 64-byte aligned by pb_alloc (vr_onnx_parse_model):
   * take it over instead of copying (a model's weights are most of its file). */
  if (!external && tp->has_raw_data && bytes && tp->raw_data.data && steal_raw) {
    Onnx__TensorProto *w = (Onnx__TensorProto *)tp;
    out->data = w->raw_data.data;
    w->raw_data.data = NULL;
    w->raw_data.len = 0;
    return 0;
  }
  if (external) {
    /* a file shorter than the tensor claims is an error before the
     * tensor's memory is taken (a tiny model may claim 64 GiB) */
    char path[4096];
    struct stat st;
    int fits = snprintf(path, sizeof path, "%s/%s", base_dir, loc) < (int)sizeof path;
    /* a missing file too: the claimed size was allocated first and its
     * failure ("N bytes", ENOMEM) hid the missing file */
    if (fits && stat(path, &st))
      return vr_errf(err, errno == ENOENT ? VR_ENOENT : VR_EIO,
                     "initializer '%s': external data %s: %s", tname, path, strerror(errno));
    if (fits && (!S_ISREG(st.st_mode) || (uint64_t)off + bytes > (uint64_t)st.st_size))
      return vr_errf(err, VR_EFORMAT,
                     "initializer '%s': external data '%s' holds %lld bytes, the tensor needs "
                     "%zu from offset %lld", tname, loc, (long long)st.st_size, bytes,
                     (long long)off);
  }
  void *d = vr_aligned_alloc(64, bytes ? bytes : 64);
  if (!d) return vr_errf(err, VR_ENOMEM, "initializer '%s': %zu bytes", tname, bytes);
  int rc = 0;
  if (external)
    rc = read_external(base_dir, loc, off, length, bytes, d, tname, err);
  else if (tp->has_raw_data && bytes)
    memcpy(d, tp->raw_data.data, bytes);
  else if (!tp->has_raw_data)
    rc = copy_typed(tp, out->dt, numel, d, tname, err);
  if (rc) {
    vr_aligned_free(d);
    return rc;
  }
  out->data = d;
  return 0;
}

int vr_onnx_parse_tensor(const void *buf, size_t len, vr_tview *out,
                         char *name, vr_errbuf *err) {
  Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, buf);
  if (!tp) return vr_errf(err, VR_EFORMAT, "not a valid TensorProto");
  int rc = tensor_from_proto(tp, NULL, out, err);
  if (!rc && name) snprintf(name, VR_NAME_MAX, "%s", tp->name ? tp->name : "");
  onnx__tensor_proto__free_unpacked(tp, NULL);
  return rc;
}

/* Adds a CONST value from a TensorProto under `name`. */
static int add_initializer(vr_graph *g, const Onnx__TensorProto *tp,
                           const char *name, const char *base_dir,
                           vr_errbuf *err) {
  if (!name || !*name)
    return vr_errf(err, VR_EFORMAT, "initializer without a name");
  if (vr_graph_find(g, name) >= 0)
    return vr_errf(err, VR_EFORMAT, "initializer '%s' defined twice", name);
  vr_tview t;
  int rc = tensor_from_proto(tp, base_dir, &t, err);
  if (rc) return rc;
  int vi = vr_graph_add_val(g, name);
  if (vi < 0) {
    vr_aligned_free(t.data);
    return vr_errf(err, VR_ENOMEM, "out of memory");
  }
  vr_val_set_const(&g->vals[vi], t.dt, t.ndim, t.shape, t.data);
  return vi;
}

static int copy_attr(vr_attr *a, const Onnx__AttributeProto *p, vr_graph *g,
                     const char *node, vr_errbuf *err) {
  a->name = vr_strdup(p->name ? p->name : "");
  if (!a->name) return VR_ENOMEM;
  a->type = p->has_type ? (int)p->type : 0;
  switch (a->type) {
    case VR_ATTR_FLOAT: a->f = p->f; return 0;
    case VR_ATTR_INT: a->i = p->i; return 0;
    case VR_ATTR_STRING:
      a->s = vr_strndup(p->s.data ? (const char *)p->s.data : "", p->s.len);
      return a->s ? 0 : VR_ENOMEM;
    case VR_ATTR_FLOATS:
      a->n = (int)p->n_floats;
      a->floats = vr_malloc(sizeof(float) * (p->n_floats + 1));
      if (!a->floats) return VR_ENOMEM;
      if (a->n) memcpy(a->floats, p->floats, sizeof(float) * p->n_floats);
      return 0;
    case VR_ATTR_INTS:
      a->n = (int)p->n_ints;
      a->ints = vr_malloc(sizeof(int64_t) * (p->n_ints + 1));
      if (!a->ints) return VR_ENOMEM;
      if (a->n) memcpy(a->ints, p->ints, sizeof(int64_t) * p->n_ints);
      return 0;
    case VR_ATTR_TENSOR: {
      if (!p->t)
        return vr_errf(err, VR_EFORMAT, "node '%s': attribute '%s' has no tensor",
                       node, a->name);
      a->t = VR_NEW(vr_tview);
      if (!a->t) return VR_ENOMEM;
      int rc = tensor_from_proto(p->t, NULL, a->t, err);
      if (rc) {
        vr_free(a->t);
        a->t = NULL;
      }
      return rc;
    }
    default:
      return 0; /* graphs, sparse tensors...: kept as untyped; ops reject */
  }
}

static int parse_value_info(vr_graph *g, const Onnx__ValueInfoProto *vi,
                            vr_errbuf *err) {
  const char *name = vi->name ? vi->name : "";
  if (!*name) return vr_errf(err, VR_EFORMAT, "graph input without a name");
  if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
      !vi->type->tensor_type)
    return vr_errf(err, VR_EUNSUPPORTED, "graph input '%s': not a tensor", name);
  const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
  int dt = tt->has_elem_type ? tt->elem_type : 0;
  if (!supported_dtype(dt))
    return vr_errf(err, VR_EUNSUPPORTED,
                   "graph input '%s': unsupported element type %d", name, dt);
  if (vr_graph_find(g, name) >= 0)
    return vr_errf(err, VR_EFORMAT, "graph input '%s' defined twice", name);
  int idx = vr_graph_add_val(g, name);
  if (idx < 0) return VR_ENOMEM;
  vr_val *v = &g->vals[idx];
  v->dtype = (vr_dtype)dt;
  v->is_input = 1;
  const Onnx__TensorShapeProto *sh = tt->shape;
  if (!sh)
    return vr_errf(err, VR_EUNSUPPORTED, "graph input '%s': no shape", name);
  if (sh->n_dim > VR_MAX_DIMS)
    return vr_errf(err, VR_EUNSUPPORTED, "graph input '%s': %zu dims", name,
                   sh->n_dim);
  v->ndim = (int)sh->n_dim;
  for (size_t i = 0; i < sh->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
    int fixed = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    if (fixed && d->dim_value >= 0 && d->dim_value <= (1 << 30)) {
      v->shape[i] = d->dim_value;
    } else if (i == 0 && !fixed) {
      v->shape[i] = 1;
      v->dyn_batch = 1;
    } else if (fixed) { /* was told "must be a fixed size": it is one, out of range */
      return vr_errf(err, VR_EUNSUPPORTED, "graph input '%s': dim %zu is %lld (a size must "
                     "be 0..2^30; only dim 0 may be symbolic: the batch)", name, i,
                     (long long)d->dim_value);
    } else {
      return vr_errf(err, VR_EUNSUPPORTED,
                     "graph input '%s': dim %zu must be a fixed size (only "
                     "dim 0 may be symbolic: the batch)", name, i);
    }
  }
  if (nonzero_numel(v->ndim, v->shape) > VR_MAX_TENSOR_ELEMS)
    return vr_errf(err, VR_EUNSUPPORTED, "graph input '%s': its dims other than 0 multiply "
                   "past 2^31", name);
  return idx;
}

/* Constant nodes become CONST values right away. */
static int parse_constant(vr_graph *g, const Onnx__NodeProto *np,
                          const char *nname, vr_errbuf *err) {
  if (np->n_output != 1 || np->n_attribute != 1)
    return vr_errf(err, VR_EFORMAT, "node '%s' (Constant): needs 1 output and "
                   "1 attribute", nname);
  const Onnx__AttributeProto *a = np->attribute[0];
  const char *out = np->output[0];
  if (vr_graph_find(g, out) >= 0)
    return vr_errf(err, VR_EFORMAT, "node '%s': output '%s' defined twice",
                   nname, out);
  if (a->name && !strcmp(a->name, "value") && a->t)
  {
    int vi = add_initializer(g, a->t, out, NULL, err);
    return vi < 0 ? vi : 0;
  }
  vr_dtype dt;
  int64_t n = 1;
  int ndim = 0;
  const char *an = a->name ? a->name : "";
  if (!strcmp(an, "value_float")) dt = VR_DT_F32;
  else if (!strcmp(an, "value_int")) dt = VR_DT_I64;
  else if (!strcmp(an, "value_floats")) { dt = VR_DT_F32; n = (int64_t)a->n_floats; ndim = 1; }
  else if (!strcmp(an, "value_ints")) { dt = VR_DT_I64; n = (int64_t)a->n_ints; ndim = 1; }
  else
    return vr_errf(err, VR_EUNSUPPORTED, "node '%s' (Constant): attribute '%s' "
                   "not supported", nname, an);
  /* the value is read from the field the name implies: an attribute of
   * another type (value_ints holding floats) gave an empty tensor */
  int want = ndim ? (dt == VR_DT_F32 ? VR_ATTR_FLOATS : VR_ATTR_INTS)
                  : (dt == VR_DT_F32 ? VR_ATTR_FLOAT : VR_ATTR_INT);
  if (!a->has_type || (int)a->type != want)
    return vr_errf(err, VR_EFORMAT, "node '%s' (Constant): attribute '%s' has type %d, "
                   "not %d", nname, an, a->has_type ? (int)a->type : 0, want);
  void *d = vr_aligned_alloc(64, (size_t)(n ? n : 1) * 8);
  if (!d) return VR_ENOMEM;
  for (int64_t i = 0; i < n; i++) {
    if (!strcmp(an, "value_float")) ((float *)d)[i] = a->f;
    else if (!strcmp(an, "value_int")) ((int64_t *)d)[i] = a->i;
    else if (!strcmp(an, "value_floats")) ((float *)d)[i] = a->floats[i];
    else ((int64_t *)d)[i] = a->ints[i];
  }
  int vi = vr_graph_add_val(g, out);
  if (vi < 0) {
    vr_aligned_free(d);
    return VR_ENOMEM;
  }
  vr_val_set_const(&g->vals[vi], dt, ndim, &n, d);
  return 0;
}

static int parse_node(vr_graph *g, const Onnx__NodeProto *np, int idx,
                      vr_errbuf *err) {
  char gen[32];
  snprintf(gen, sizeof gen, "node_%d", idx);
  const char *nname = np->name && *np->name ? np->name : gen;
  const char *op = np->op_type ? np->op_type : "";
  if (!*op) return vr_errf(err, VR_EFORMAT, "node '%s': empty op_type", nname);
  if (np->domain && *np->domain && strcmp(np->domain, "ai.onnx"))
    return vr_errf(err, VR_EUNSUPPORTED, "node '%s': op '%s' of domain '%s' "
                   "is not supported", nname, op, np->domain);
  if (!strcmp(op, "Constant")) return parse_constant(g, np, nname, err);
  int ni = vr_graph_add_node(g);
  if (ni < 0) return VR_ENOMEM;
  vr_node *n = &g->nodes[ni];
  n->name = vr_strdup(nname);
  n->op = vr_strdup(op);
  n->opset = g->opset;
  n->nin = (int)np->n_input;
  n->nout = (int)np->n_output;
  n->in = vr_malloc(sizeof(int) * (np->n_input + 1));
  n->out = vr_malloc(sizeof(int) * (np->n_output + 1));
  n->attrs = vr_calloc(np->n_attribute + 1, sizeof(vr_attr));
  if (!n->name || !n->op || !n->in || !n->out || !n->attrs) return VR_ENOMEM;
  snprintf(n->label, sizeof n->label, "%s", op);
  for (size_t i = 0; i < np->n_attribute; i++) {
    int rc = copy_attr(&n->attrs[i], np->attribute[i], g, nname, err);
    n = &g->nodes[ni];
    n->nattr = (int)i + 1;
    if (rc) return rc == VR_ENOMEM ? vr_errf(err, rc, "out of memory") : rc;
  }
  for (size_t i = 0; i < np->n_input; i++) {
    const char *in = np->input[i];
    if (!in || !*in) {
      n->in[i] = -1;
      continue;
    }
    int vi = vr_graph_find(g, in);
    if (vi < 0)
      return vr_errf(err, VR_EFORMAT, "node '%s' (%s): input '%s' is not "
                     "defined before use", nname, op, in);
    n->in[i] = vi;
  }
  for (size_t i = 0; i < np->n_output; i++) {
    const char *out = np->output[i];
    if (!out || !*out) {
      n->out[i] = -1;
      continue;
    }
    if (vr_graph_find(g, out) >= 0)
      return vr_errf(err, VR_EFORMAT, "node '%s' (%s): output '%s' defined "
                     "twice", nname, op, out);
    int vi = vr_graph_add_val(g, out);
    if (vi < 0) return VR_ENOMEM;
    n = &g->nodes[ni];
    n->out[i] = vi;
    g->vals[vi].producer = ni;
  }
  return 0;
}

static int parse_graph(const Onnx__GraphProto *gp, const char *base_dir,
                       vr_graph *g, vr_errbuf *err) {
  int rc;
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *tp = gp->initializer[i];
    if ((rc = add_initializer(g, tp, tp->name, base_dir, err)) < 0) return rc;
  }
  if (gp->n_sparse_initializer)
    return vr_errf(err, VR_EUNSUPPORTED, "sparse initializers are not supported");
  g->inputs = vr_malloc(sizeof(int) * (gp->n_input + 1));
  g->outputs = vr_malloc(sizeof(int) * (gp->n_output + 1));
  if (!g->inputs || !g->outputs) return VR_ENOMEM;
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    /* Old exporters list initializers as inputs too: those are weights. */
    if (vi->name && vr_graph_find(g, vi->name) >= 0 &&
        g->vals[vr_graph_find(g, vi->name)].kind == VR_VAL_CONST)
      continue;
    if ((rc = parse_value_info(g, vi, err)) < 0) return rc;
    g->inputs[g->nin++] = rc;
  }
  for (size_t i = 0; i < gp->n_node; i++)
    if ((rc = parse_node(g, gp->node[i], (int)i, err)) < 0) return rc;
  if (!gp->n_output) return vr_errf(err, VR_EFORMAT, "graph has no outputs");
  for (size_t i = 0; i < gp->n_output; i++) {
    const char *name = gp->output[i]->name ? gp->output[i]->name : "";
    int vi = vr_graph_find(g, name);
    if (vi < 0)
      return vr_errf(err, VR_EFORMAT, "graph output '%s' is not produced by "
                     "any node", name);
    g->vals[vi].is_output = 1;
    g->outputs[g->nout++] = vi;
  }
  return 0;
}

/* ---- nesting depth, before protobuf-c ------------------------------------
 * protobuf-c unpacks nested messages recursively, and ONNX messages can
 * nest without bound: a graph in a node's attribute (If, Loop), in a
 * function or training info; a TypeProto in a sequence, map or optional.
 * A 650 KB model nested 30 000 deep overflowed the stack. This walks the
 * wire format of those fields iteratively and refuses deep nesting; the
 * engine runs none of these ops anyway. */
#define MAX_NEST 100
enum { M_MODEL, M_GRAPH, M_NODE, M_ATTR, M_VINFO, M_TYPE, M_TELEM, M_TMAP, M_FUNC, M_TRAIN,
       M_SKIP };

/* The kind of field `f` of a message of kind `k` when it may nest, else
 * M_SKIP (onnx.proto's field numbers). */
static int nest_kind(int k, uint64_t f) {
  switch (k) {
    case M_MODEL: return f == 7 ? M_GRAPH : f == 20 ? M_TRAIN : f == 25 ? M_FUNC : M_SKIP;
    case M_GRAPH: return f == 1 ? M_NODE : f >= 11 && f <= 13 ? M_VINFO : M_SKIP;
    case M_NODE: return f == 5 ? M_ATTR : M_SKIP;
    case M_ATTR: return f == 6 || f == 11 ? M_GRAPH : f == 14 || f == 15 ? M_TYPE : M_SKIP;
    case M_VINFO: return f == 2 ? M_TYPE : M_SKIP;
    case M_TYPE: return f == 4 || f == 9 ? M_TELEM : f == 5 ? M_TMAP : M_SKIP;
    case M_TELEM: return f == 1 ? M_TYPE : M_SKIP; /* Sequence / Optional elem_type */
    case M_TMAP: return f == 2 ? M_TYPE : M_SKIP;  /* value_type */
    case M_FUNC: return f == 7 ? M_NODE : f == 11 ? M_ATTR : f == 12 ? M_VINFO : M_SKIP;
    case M_TRAIN: return f == 1 || f == 2 ? M_GRAPH : M_SKIP;
  }
  return M_SKIP;
}

static const uint8_t *get_varint(const uint8_t *p, const uint8_t *end, uint64_t *v) {
  uint64_t r = 0;
  for (int s = 0; s < 64 && p < end; s += 7) {
    uint8_t b = *p++;
    r |= (uint64_t)(b & 0x7f) << s;
    if (!(b & 0x80)) {
      *v = r;
      return p;
    }
  }
  return NULL;
}

/* 1 if messages nest deeper than MAX_NEST; malformed input is left to
 * protobuf-c to report (0). */
static int nests_too_deep(const uint8_t *buf, size_t len) {
  struct { const uint8_t *end; int kind; } st[MAX_NEST + 1];
  int top = 0;
  st[0].end = buf + len;
  st[0].kind = M_MODEL;
  const uint8_t *p = buf;
  while (top >= 0) {
    const uint8_t *end = st[top].end;
    if (p >= end) { /* this message is done: back to its parent */
      top--;
      continue;
    }
    uint64_t tag, v;
    if (!(p = get_varint(p, end, &tag))) return 0;
    switch (tag & 7) {
      case 0: if (!(p = get_varint(p, end, &v))) return 0; break;
      case 1: if (end - p < 8) return 0; p += 8; break;
      case 5: if (end - p < 4) return 0; p += 4; break;
      case 2: {
        if (!(p = get_varint(p, end, &v)) || v > (uint64_t)(end - p)) return 0;
        int k = nest_kind(st[top].kind, tag >> 3);
        if (k == M_SKIP) {
          p += v;
        } else {
          if (top == MAX_NEST) return 1;
          st[++top].end = p + v;
          st[top].kind = k;
        }
        break;
      }
      default: return 0;
    }
  }
  return 0;
}

int vr_onnx_parse_model(const void *buf, size_t len, const char *base_dir,
                        vr_graph *g, vr_errbuf *err) {
  if (!buf || len == 0) return vr_errf(err, VR_EFORMAT, "empty model file");
  if (nests_too_deep(buf, len))
    return vr_errf(err, VR_EFORMAT, "model nests graphs or types more than %d messages "
                   "deep (subgraphs of subgraphs...)", MAX_NEST);
  Onnx__ModelProto *mp = onnx__model_proto__unpack(&pb_allocator, len, buf);
  if (!mp)
    return vr_errf(err, VR_EFORMAT, "not a valid ONNX model (protobuf parse "
                   "failed: truncated or garbage file)");
  int rc = 0;
  g->opset = 0;
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
    if ((!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")) &&
        o->has_version)
      g->opset = o->version;
  }
  if (!mp->graph)
    rc = vr_errf(err, VR_EFORMAT, "model has no graph");
  else if (g->opset == 0)
    rc = vr_errf(err, VR_EFORMAT, "model imports no ai.onnx opset");
  else if (g->opset < 7 || g->opset > 18)
    rc = vr_errf(err, VR_EUNSUPPORTED, "opset %lld not supported (7..18)",
                 (long long)g->opset);
  else {
    steal_raw = 1;
    rc = parse_graph(mp->graph, base_dir, g, err);
    steal_raw = 0;
  }
  if (rc == VR_ENOMEM && err && !err->msg[0]) vr_errf(err, rc, "out of memory");
  onnx__model_proto__free_unpacked(mp, &pb_allocator);
  return rc < 0 ? rc : 0;
}
