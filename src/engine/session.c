/* Public session API: compile plans per batch size, run with a per-session
 * thread count. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "engine/plan.h"
#include "engine/quant.h"

/* GNU OpenMP, the runtime Debian's oneDNN uses (see CMakeLists.txt). The
 * nthreads ICV is per calling thread, so setting it here bounds this
 * session's parallel regions without touching other sessions' threads. */
extern void omp_set_num_threads(int n);

/* Inputs one plan may have (boundary tensors of a partial session). */
#define VR_SESSION_MAX_PORTS 64

struct vr_session {
  const vr_model *m;
  int threads, max_batch;
  vr_precision precision;
  int node_begin, node_end;
  int lazy;
  int nin, nout;
  int *in_vals, *out_vals;
  vr_tensor_info *ins, *outs;
  vr_plan **plans; /* [max_batch], index batch - 1 */
  vr_wcache *wc;
  vr_qparams *q;
  void *arena;
  size_t arena_bytes;
  dnnl_stream_t stream;
  int profiling;
  int64_t prof_runs;
  int64_t *node_ns;
};

void vr_session_opts_init(vr_session_opts *o) {
  memset(o, 0, sizeof(*o));
  o->precision = VR_PREC_FP32;
  o->threads = 1;
  o->max_batch = 1;
}

/* Boundary tensors of the node range: inputs are runtime values read in
 * the range but produced before it; outputs are values produced in it and
 * read after it (or graph outputs). */
static int range_ports(vr_session *s, vr_errbuf *err) {
  const vr_graph *g = &s->m->g;
  s->in_vals = vr_calloc((size_t)g->nvals + 1, sizeof(int));
  s->out_vals = vr_calloc((size_t)g->nvals + 1, sizeof(int));
  if (!s->in_vals || !s->out_vals ||
      vr__graph_range_ports(g, s->node_begin, s->node_end, s->in_vals, &s->nin, s->out_vals,
                            &s->nout))
    return vr_errf(err, VR_ENOMEM, "out of memory");
  return 0;
}

/* Port descriptions at batch 1, with the dims that scale with the batch
 * (compared against batch 2) reported as -1. */
static int port_infos(vr_session *s, vr_errbuf *err) {
  const vr_graph *g = &s->m->g;
  s->ins = vr_calloc((size_t)s->nin + 1, sizeof(vr_tensor_info));
  s->outs = vr_calloc((size_t)s->nout + 1, sizeof(vr_tensor_info));
  vr_tview *v1 = vr_calloc((size_t)g->nvals + 1, sizeof(vr_tview));
  vr_tview *v2 = vr_calloc((size_t)g->nvals + 1, sizeof(vr_tview));
  void **o1 = vr_calloc((size_t)g->nvals + 1, sizeof(void *));
  void **o2 = vr_calloc((size_t)g->nvals + 1, sizeof(void *));
  int rc = 0;
  if (!s->ins || !s->outs || !v1 || !v2 || !o1 || !o2) rc = vr_errf(err, VR_ENOMEM, "out of memory");
  if (!rc) rc = vr_graph_shapes_at(g, 1, v1, o1, err);
  if (!rc) rc = vr_graph_shapes_at(g, 2, v2, o2, err);
  for (int k = 0; !rc && k < s->nin + s->nout; k++) {
    int v = k < s->nin ? s->in_vals[k] : s->out_vals[k - s->nin];
    vr_tensor_info *ti = k < s->nin ? &s->ins[k] : &s->outs[k - s->nin];
    snprintf(ti->name, sizeof ti->name, "%s", g->vals[v].name);
    ti->dtype = v1[v].dt;
    ti->ndim = v1[v].ndim;
    for (int d = 0; d < ti->ndim; d++)
      ti->shape[d] = v1[v].shape[d] == v2[v].shape[d] ? v1[v].shape[d] : -1;
  }
  for (int i = 0; o1 && o2 && i < g->nvals; i++) {
    vr_aligned_free(o1[i]);
    vr_aligned_free(o2[i]);
  }
  vr_free(o1);
  vr_free(o2);
  vr_free(v1);
  vr_free(v2);
  return rc;
}

static int check_opts(const vr_model *m, const vr_session_opts *o, vr_session *s,
                      vr_errbuf *err) {
  s->threads = o->threads > 0 ? o->threads : 1;
  s->max_batch = o->max_batch > 0 ? o->max_batch : 1;
  s->precision = o->precision;
  if (s->threads > 1024) return vr_errf(err, VR_EINVAL, "threads %d out of range", s->threads);
  if (s->max_batch > 4096) return vr_errf(err, VR_EINVAL, "max_batch %d out of range", s->max_batch);
  if (!m->dyn_batch && s->max_batch > 1)
    return vr_errf(err, VR_EINVAL, "model inputs have a fixed batch dimension: max_batch "
                   "must be 1 (got %d)", s->max_batch);
  if (o->precision != VR_PREC_FP32 && o->precision != VR_PREC_BF16 && o->precision != VR_PREC_INT8)
    return vr_errf(err, VR_EINVAL, "unknown precision %d", (int)o->precision);
  if (!vr_precision_supported(o->precision))
    return vr_errf(err, VR_EUNSUPPORTED, "precision %s is not supported by this CPU",
                   vr_precision_name(o->precision));
  int b = o->node_begin, e = o->node_end;
  if (b == 0 && e == 0) e = m->nnodes;
  if (b < 0 || e > m->nnodes || b > e || (b == e && m->nnodes > 0))
    return vr_errf(err, VR_ERANGE, "node range [%d, %d) outside [0, %d)", b, e, m->nnodes);
  s->node_begin = b;
  s->node_end = e;
  return 0;
}

/* Grows the arena to `need` bytes and re-points every built plan at it. */
static int ensure_arena(vr_session *s, size_t need, vr_errbuf *err) {
  if (s->arena && need <= s->arena_bytes) return 0;
  void *a = vr_aligned_alloc(4096, need ? need : 64);
  if (!a) return vr_errf(err, VR_ENOMEM, "cannot allocate %zu-byte arena", need);
  vr_aligned_free(s->arena);
  s->arena = a;
  s->arena_bytes = need;
  for (int bs = 1; bs <= s->max_batch; bs++) {
    if (!s->plans[bs - 1]) continue;
    int rc = vr_plan_bind(s->plans[bs - 1], s->arena, err);
    if (rc) return rc;
  }
  return 0;
}

static int build_plan(vr_session *s, int bs, vr_errbuf *err) {
  vr_plan_ctx c = {&s->m->g, vr_dnnl_engine(), &s->wc, s->node_begin, s->node_end,
                   s->in_vals, s->nin, s->out_vals, s->nout, s->precision, s->q};
  int rc = vr_plan_build(&c, bs, &s->plans[bs - 1], err);
  if (rc) {
    if (bs > 1) vr_errctx(err, rc, "batch %d", bs);
    return rc;
  }
  if (s->arena && s->plans[bs - 1]->arena_bytes <= s->arena_bytes)
    return vr_plan_bind(s->plans[bs - 1], s->arena, err);
  return ensure_arena(s, s->plans[bs - 1]->arena_bytes, err);
}

static int build_plans(vr_session *s, vr_errbuf *err) {
  s->plans = vr_calloc((size_t)s->max_batch, sizeof(vr_plan *));
  if (!s->plans) return vr_errf(err, VR_ENOMEM, "out of memory");
  /* Largest first: the arena is sized once and the others bind into it. */
  for (int bs = s->max_batch; bs >= 1; bs--) {
    if (s->lazy && bs != s->max_batch) continue;
    int rc = build_plan(s, bs, err);
    if (rc) return rc;
  }
  return 0;
}

int vr_session_create(const vr_model *m, const vr_session_opts *o,
                      vr_session **out, vr_errbuf *err) {
  if (!m || !out) return vr_errf(err, VR_EINVAL, "model/out is NULL");
  *out = NULL;
  vr_session_opts def;
  if (!o) {
    vr_session_opts_init(&def);
    o = &def;
  }
  if (!vr_dnnl_engine()) return vr_errf(err, VR_EBACKEND, "cannot create the oneDNN CPU engine");
  vr_session *s = VR_NEW(vr_session);
  if (!s) return vr_errf(err, VR_ENOMEM, "out of memory");
  s->m = m;
  s->lazy = o->lazy_plans != 0;
  int rc = check_opts(m, o, s, err);
  if (!rc) rc = range_ports(s, err);
  if (!rc) rc = port_infos(s, err);
  /* Primitive creation sizes its thread decomposition from this ICV. */
  omp_set_num_threads(s->threads);
  if (!rc && s->precision == VR_PREC_INT8) rc = vr_quant_calibrate(s->m, o, s->node_begin,
                                                                    s->node_end, &s->q, err);
  if (!rc) rc = build_plans(s, err);
  if (!rc && dnnl_stream_create(&s->stream, vr_dnnl_engine(), dnnl_stream_default_flags) != dnnl_success)
    rc = vr_errf(err, VR_EBACKEND, "cannot create a oneDNN stream");
  if (!rc && !(s->node_ns = vr_calloc((size_t)(s->node_end - s->node_begin) + 1, sizeof(int64_t))))
    rc = vr_errf(err, VR_ENOMEM, "out of memory");
  if (rc) {
    vr_session_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

void vr_session_free(vr_session *s) {
  if (!s) return;
  for (int i = 0; s->plans && i < s->max_batch; i++) vr_plan_free(s->plans[i]);
  vr_free(s->plans);
  vr_wcache_free(s->wc);
  vr_quant_free(s->q);
  vr_aligned_free(s->arena);
  if (s->stream) dnnl_stream_destroy(s->stream);
  vr_free(s->in_vals);
  vr_free(s->out_vals);
  vr_free(s->ins);
  vr_free(s->outs);
  vr_free(s->node_ns);
  vr_free(s);
}

int vr_session_num_inputs(const vr_session *s) { return s->nin; }
int vr_session_num_outputs(const vr_session *s) { return s->nout; }
const vr_tensor_info *vr_session_input(const vr_session *s, int i) {
  return i >= 0 && i < s->nin ? &s->ins[i] : NULL;
}
const vr_tensor_info *vr_session_output(const vr_session *s, int i) {
  return i >= 0 && i < s->nout ? &s->outs[i] : NULL;
}
int vr_session_max_batch(const vr_session *s) { return s->max_batch; }
int64_t vr_session_memory_bytes(const vr_session *s) {
  return vr_wcache_bytes(s->wc) + (int64_t)s->arena_bytes;
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *sh) {
  size_t l = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && l < n; i++)
    l += (size_t)snprintf(buf + l, n - l, "%s%lld", i ? "," : "", (long long)sh[i]);
  if (l < n) snprintf(buf + l, n - l, "]");
}

static int run(vr_session *s, int batch, const vr_tensor *inputs, int n_in,
               vr_tensor *outputs, int n_out, int borrow, vr_errbuf *err) {
  if (!s) return vr_errf(err, VR_EINVAL, "session is NULL");
  if (batch < 1 || batch > s->max_batch)
    return vr_errf(err, VR_ERANGE, "batch %d outside 1..%d", batch, s->max_batch);
  if (n_out < s->nout || (s->nout && !outputs))
    return vr_errf(err, VR_EINVAL, "need room for %d outputs (got %d)", s->nout, n_out);
  if (n_in < 0 || (n_in && !inputs)) return vr_errf(err, VR_EINVAL, "bad inputs array");
  if (!s->plans[batch - 1]) { /* lazy_plans */
    omp_set_num_threads(s->threads);
    int rc = build_plan(s, batch, err);
    if (rc) return rc;
  }
  vr_plan *p = s->plans[batch - 1];
  const vr_graph *g = &s->m->g;
  const vr_tensor *copy[VR_SESSION_MAX_PORTS] = {0};
  size_t copy_bytes[VR_SESSION_MAX_PORTS];
  int dirty = 0;
  if (p->nin > VR_SESSION_MAX_PORTS)
    return vr_errf(err, VR_EUNSUPPORTED, "%d session inputs (at most %d)", p->nin,
                   VR_SESSION_MAX_PORTS);
  for (int k = 0; k < n_in; k++) {
    int known = 0;
    if (!inputs[k].name) return vr_errf(err, VR_EINVAL, "input %d has no name", k);
    for (int i = 0; i < p->nin; i++)
      if (!strcmp(inputs[k].name, g->vals[p->in[i].val].name)) known = 1;
    if (!known) return vr_errf(err, VR_ENOENT, "unknown input '%s'", inputs[k].name);
  }
  for (int i = 0; i < p->nin; i++) {
    const vr_port *pt = &p->in[i];
    const char *name = g->vals[pt->val].name;
    const vr_tensor *t = NULL;
    for (int k = 0; k < n_in; k++)
      if (!strcmp(inputs[k].name, name)) t = &inputs[k];
    if (!t) return vr_errf(err, VR_ENOENT, "missing input '%s'", name);
    if (t->dtype != pt->t.dt)
      return vr_errf(err, VR_ETYPE, "input '%s': dtype %s, expected %s", name,
                     vr_dtype_name(t->dtype), vr_dtype_name(pt->t.dt));
    int ok = t->ndim == pt->t.ndim;
    for (int d = 0; ok && d < t->ndim; d++) ok = t->shape[d] == pt->t.shape[d];
    if (!ok) {
      char want[160], got[160];
      shape_str(want, sizeof want, pt->t.ndim, pt->t.shape);
      shape_str(got, sizeof got, t->ndim < 0 || t->ndim > VR_MAX_DIMS ? 0 : t->ndim, t->shape);
      return vr_errf(err, VR_ESHAPE, "input '%s': shape %s, expected %s at batch %d",
                     name, got, want, batch);
    }
    size_t need = (size_t)vr_tview_numel(&pt->t) * vr_dtype_size(pt->t.dt);
    if (t->nbytes < need || (need && !t->data))
      return vr_errf(err, VR_EINVAL, "input '%s': %zu bytes, need %zu", name, t->nbytes, need);
    copy[i] = t, copy_bytes[i] = need;
  }
  /* Only once every input is valid, so that a failed run leaves no
   * binding half-changed. */
  for (int i = 0; i < p->nin; i++)
    if (vr_plan_borrow_input(p, i, borrow ? copy[i]->data : NULL, copy[i]->nbytes, &dirty) ||
        !copy_bytes[i])
      copy[i] = NULL;
  /* Rebind first: the input ports' data pointers move back to the arena
   * when a borrowed input is returned. */
  if (dirty) {
    int rc = vr_plan_bind(p, s->arena, err);
    if (rc) return rc;
  }
  for (int i = 0; i < p->nin; i++)
    if (copy[i]) memcpy(p->in[i].t.data, copy[i]->data, copy_bytes[i]);
  omp_set_num_threads(s->threads);
  int64_t *ns = s->profiling ? s->node_ns : NULL;
  int rc = vr_plan_run(p, s->stream, s->node_begin, ns, err);
  if (rc) return rc;
  if (ns) s->prof_runs++;
  for (int i = 0; i < p->nout; i++) {
    const vr_port *pt = &p->out[i];
    vr_tensor *o = &outputs[i];
    o->name = g->vals[pt->val].name;
    o->dtype = pt->t.dt;
    o->ndim = pt->t.ndim;
    memcpy(o->shape, pt->t.shape, sizeof o->shape);
    o->data = pt->t.data;
    o->nbytes = (size_t)vr_tview_numel(&pt->t) * vr_dtype_size(pt->t.dt);
  }
  return 0;
}

int vr_session_run(vr_session *s, int batch, const vr_tensor *inputs, int n_in,
                   vr_tensor *outputs, int n_out, vr_errbuf *err) {
  return run(s, batch, inputs, n_in, outputs, n_out, 0, err);
}

int vr_session_run_borrowed(vr_session *s, int batch, const vr_tensor *inputs, int n_in,
                            vr_tensor *outputs, int n_out, vr_errbuf *err) {
  return run(s, batch, inputs, n_in, outputs, n_out, 1, err);
}

void vr_session_set_profiling(vr_session *s, int enable) {
  s->profiling = enable != 0;
  s->prof_runs = 0;
  memset(s->node_ns, 0, sizeof(int64_t) * (size_t)(s->node_end - s->node_begin));
}

int vr_session_node_times(const vr_session *s, double *ms, int n) {
  int cnt = s->node_end - s->node_begin;
  if (!ms || n < cnt) return VR_EINVAL;
  for (int i = 0; i < cnt; i++)
    ms[i] = s->prof_runs ? (double)s->node_ns[i] / (double)s->prof_runs / 1e6 : 0;
  return 0;
}
