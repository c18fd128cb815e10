/* Public model API: load, optimise, describe. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "engine/graph.h"
#include "engine/onnx.h"
#include "engine/ops.h"

const char *vr_precision_name(vr_precision p) {
  switch (p) {
    case VR_PREC_FP32: return "fp32";
    case VR_PREC_BF16: return "bf16";
    case VR_PREC_INT8: return "int8";
  }
  return "?";
}

int vr_precision_parse(const char *s, vr_precision *out) {
  if (!s) return VR_EINVAL;
  if (!strcmp(s, "fp32")) *out = VR_PREC_FP32;
  else if (!strcmp(s, "bf16")) *out = VR_PREC_BF16;
  else if (!strcmp(s, "int8")) *out = VR_PREC_INT8;
  else return VR_EINVAL;
  return 0;
}

int vr_precision_supported(vr_precision p) {
  if (p == VR_PREC_FP32) return 1;
  __builtin_cpu_init();
  if (p == VR_PREC_BF16) return __builtin_cpu_supports("avx512bf16");
  return __builtin_cpu_supports("avx512vnni") || __builtin_cpu_supports("avx512bw");
}

static void fill_info(vr_tensor_info *ti, const vr_val *v, int dyn) {
  snprintf(ti->name, sizeof ti->name, "%s", v->name);
  ti->dtype = v->dtype;
  ti->ndim = v->ndim;
  for (int i = 0; i < v->ndim; i++) ti->shape[i] = v->shape[i];
  if (dyn && v->ndim > 0) ti->shape[0] = -1;
}

/* Node descriptions: label, FLOPs at batch 1, fp32 weight bytes. */
static int describe(vr_model *m, vr_errbuf *err) {
  vr_graph *g = &m->g;
  m->nodes = vr_calloc((size_t)g->nnodes + 1, sizeof(vr_node_info));
  vr_tview *vt = vr_calloc((size_t)g->nvals + 1, sizeof(vr_tview));
  void **owned = vr_calloc((size_t)g->nvals + 1, sizeof(void *));
  int rc = 0;
  if (!m->nodes || !vt || !owned) rc = vr_errf(err, VR_ENOMEM, "out of memory");
  if (!rc) rc = vr_graph_shapes_at(g, 1, vt, owned, err);
  m->nnodes = g->nnodes;
  /* Shapes are at batch 1; a model with a fixed batch of B counts per
   * sample by dividing by B. */
  int64_t per_sample = 1;
  if (!rc && !m->dyn_batch && g->nin > 0 && vt[g->inputs[0]].ndim > 0 && vt[g->inputs[0]].shape[0] > 0)
    per_sample = vt[g->inputs[0]].shape[0];
  for (int i = 0; !rc && i < g->nnodes; i++) {
    const vr_node *n = &g->nodes[i];
    vr_node_info *ni = &m->nodes[i];
    snprintf(ni->name, sizeof ni->name, "%s", n->name);
    snprintf(ni->op_type, sizeof ni->op_type, "%s", n->label);
    vr_tview in[64], out[64];
    int nin = n->nin < 64 ? n->nin : 64, nout = n->nout < 64 ? n->nout : 64;
    for (int k = 0; k < nin; k++) {
      memset(&in[k], 0, sizeof in[k]);
      if (n->in[k] < 0) continue;
      in[k] = vt[n->in[k]];
      const vr_val *v = &g->vals[n->in[k]];
      if (v->kind == VR_VAL_CONST && v->dtype == VR_DT_F32)
        ni->weight_bytes += vr_numel(v->ndim, v->shape) * 4;
    }
    for (int k = 0; k < nout; k++) {
      memset(&out[k], 0, sizeof out[k]);
      if (n->out[k] >= 0) out[k] = vt[n->out[k]];
    }
    const vr_op *op = vr_op_get(n->op_id);
    ni->flops = op->flops ? op->flops(n, in, out) / per_sample : 0;
    m->flops += ni->flops;
    m->weight_bytes += ni->weight_bytes;
  }
  for (int i = 0; owned && i < g->nvals; i++) vr_aligned_free(owned[i]);
  vr_free(owned);
  vr_free(vt);
  return rc;
}

int vr__model_finish(vr_model *m, vr_errbuf *err) {
  vr_graph *g = &m->g;
  for (int i = 0; i < g->nin; i++) m->dyn_batch |= g->vals[g->inputs[i]].dyn_batch;
  m->nin = g->nin;
  m->nout = g->nout;
  m->inputs = vr_calloc((size_t)g->nin + 1, sizeof(vr_tensor_info));
  m->outputs = vr_calloc((size_t)g->nout + 1, sizeof(vr_tensor_info));
  if (!m->inputs || !m->outputs) return vr_errf(err, VR_ENOMEM, "out of memory");
  for (int i = 0; i < g->nin; i++)
    fill_info(&m->inputs[i], &g->vals[g->inputs[i]], g->vals[g->inputs[i]].dyn_batch);
  for (int i = 0; i < g->nout; i++)
    fill_info(&m->outputs[i], &g->vals[g->outputs[i]], m->dyn_batch);
  return describe(m, err);
}

static int build(vr_model *m, vr_errbuf *err) {
  int rc = vr_graph_optimize(&m->g, err);
  return rc ? rc : vr__model_finish(m, err);
}

static int freeze(vr_graph *g, const vr_tview *frozen, int n, vr_errbuf *err) {
  int j = 0, nin = g->nin;
  for (int i = 0; i < nin; i++) {
    vr_val *v = &g->vals[g->inputs[i]];
    const vr_tview *f = i < n ? &frozen[i] : NULL;
    if (!f || !f->dt) {
      g->inputs[j++] = g->inputs[i];
      continue;
    }
    if (f->dt != v->dtype || f->ndim != v->ndim)
      return vr_errf(err, VR_ESHAPE, "frozen input '%s': type/rank differs", v->name);
    size_t bytes = (size_t)vr_tview_numel(f) * vr_dtype_size(f->dt);
    void *d = vr_aligned_alloc(64, bytes ? bytes : 64);
    if (!d) return vr_errf(err, VR_ENOMEM, "out of memory");
    if (bytes) memcpy(d, f->data, bytes);
    vr_val_set_const(v, f->dt, f->ndim, f->shape, d);
    v->is_input = v->dyn_batch = 0;
  }
  g->nin = j;
  return 0;
}

int vr_model_load_frozen(const void *buf, size_t len, const char *base_dir,
                         const vr_tview *frozen, int n, vr_model **out,
                         vr_errbuf *err) {
  if (!out) return vr_errf(err, VR_EINVAL, "out is NULL");
  *out = NULL;
  vr_model *m = VR_NEW(vr_model);
  if (!m) return vr_errf(err, VR_ENOMEM, "out of memory");
  vr_graph_init(&m->g);
  int rc = vr_onnx_parse_model(buf, len, base_dir, &m->g, err);
  if (!rc && n > 0) rc = freeze(&m->g, frozen, n, err);
  if (!rc) rc = build(m, err);
  if (rc) {
    if (rc == VR_ENOMEM && err && !err->msg[0]) vr_errf(err, rc, "out of memory");
    vr_model_free(m);
    return rc;
  }
  *out = m;
  return 0;
}

int vr_model_load(const char *path, vr_model **out, vr_errbuf *err) {
  if (!path || !out) return vr_errf(err, VR_EINVAL, "path/out is NULL");
  /* Map the file rather than read it: no second copy of the weights. */
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return vr_errf(err, errno == ENOENT ? VR_ENOENT : VR_EIO, "%s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
    close(fd);
    return vr_errf(err, VR_EIO, "%s: not a regular file", path);
  }
  size_t len = (size_t)sb.st_size;
  void *buf = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  close(fd);
  if (len && buf == MAP_FAILED) return vr_errf(err, VR_EIO, "%s: mmap: %s", path, strerror(errno));
  int rc;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  else snprintf(dir, sizeof dir, ".");
  rc = vr_model_load_buffer(buf, len, dir, out, err);
  if (buf) munmap(buf, len);
  if (rc && err) vr_errctx(err, rc, "%s", path);
  return rc;
}

int vr_model_load_buffer(const void *buf, size_t len, const char *base_dir,
                         vr_model **out, vr_errbuf *err) {
  return vr_model_load_frozen(buf, len, base_dir, NULL, 0, out, err);
}

void vr_model_free(vr_model *m) {
  if (!m) return;
  vr_graph_free(&m->g);
  vr_free(m->inputs);
  vr_free(m->outputs);
  vr_free(m->nodes);
  vr_free(m);
}

int vr_model_num_inputs(const vr_model *m) { return m->nin; }
int vr_model_num_outputs(const vr_model *m) { return m->nout; }
const vr_tensor_info *vr_model_input(const vr_model *m, int i) {
  return i >= 0 && i < m->nin ? &m->inputs[i] : NULL;
}
const vr_tensor_info *vr_model_output(const vr_model *m, int i) {
  return i >= 0 && i < m->nout ? &m->outputs[i] : NULL;
}
int vr_model_num_nodes(const vr_model *m) { return m->nnodes; }
const vr_node_info *vr_model_node(const vr_model *m, int i) {
  return i >= 0 && i < m->nnodes ? &m->nodes[i] : NULL;
}
int64_t vr_model_flops(const vr_model *m) { return m->flops; }
int64_t vr_model_weight_bytes(const vr_model *m) { return m->weight_bytes; }
