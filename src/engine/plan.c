/* Plan building core: plan values, steps, layouts, weight cache, memory
 * planning, binding and execution (see plan.h). */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "engine/plan_int.h"

static dnnl_engine_t g_eng;
static pthread_once_t g_eng_once = PTHREAD_ONCE_INIT;
static void eng_init(void) {
  if (dnnl_engine_create(&g_eng, dnnl_cpu, 0) != dnnl_success) g_eng = NULL;
}
dnnl_engine_t vr_dnnl_engine(void) {
  pthread_once(&g_eng_once, eng_init);
  return g_eng;
}

int vr_dnnl_err(vr_errbuf *err, const vr_node *n, dnnl_status_t s, const char *what) {
  int code = s == dnnl_unimplemented ? VR_EUNSUPPORTED
             : s == dnnl_out_of_memory ? VR_ENOMEM : VR_EBACKEND;
  if (n) return vr_bad(err, n, code, "oneDNN %s failed (status %d)", what, (int)s);
  return vr_errf(err, code, "oneDNN %s failed (status %d)", what, (int)s);
}

dnnl_data_type_t vr_dnnl_dt(vr_dtype dt) {
  switch (dt) {
    case VR_DT_F32: return dnnl_f32;
    case VR_DT_I32: return dnnl_s32;
    case VR_DT_I8: return dnnl_s8;
    case VR_DT_U8: case VR_DT_BOOL: return dnnl_u8;
    case VR_DT_BF16: return dnnl_bf16;
    default: return dnnl_data_type_undef;
  }
}

void vr_md_plain(dnnl_memory_desc_t *md, const vr_tview *t) {
  dnnl_dims_t dims, strides;
  int nd = t->ndim ? t->ndim : 1;
  int64_t s = 1;
  for (int i = nd - 1; i >= 0; i--) {
    dims[i] = t->ndim ? t->shape[i] : 1;
    strides[i] = s;
    s *= dims[i] ? dims[i] : 1;
  }
  dnnl_memory_desc_init_by_strides(md, nd, dims, vr_dnnl_dt(t->dt), strides);
}

/* A dense blocked md whose non-unit dims have row-major strides is plain
 * data; oneDNN may describe it with another dim order when some dims are
 * 1 (e.g. "bac" for 1x197x768), which sends later primitives to slow
 * reference kernels. Rewrite such mds to the canonical plain form. */
static void md_canon(dnnl_memory_desc_t *md) {
  if (md->format_kind != dnnl_blocked || md->format_desc.blocking.inner_nblks != 0) return;
  if (md->extra.flags != 0) return;
  int64_t s = 1;
  for (int i = md->ndims - 1; i >= 0; i--) {
    if (md->padded_dims[i] != md->dims[i] || md->padded_offsets[i] != 0) return;
    if (md->dims[i] != 1 && md->format_desc.blocking.strides[i] != s) return;
    s *= md->dims[i];
  }
  if (md->offset0 != 0) return;
  s = 1;
  for (int i = md->ndims - 1; i >= 0; i--) {
    md->format_desc.blocking.strides[i] = s;
    s *= md->dims[i] ? md->dims[i] : 1;
  }
}

int vr_md_is_plain(const dnnl_memory_desc_t *md, const vr_tview *t) {
  dnnl_memory_desc_t p;
  vr_md_plain(&p, t);
  p.data_type = md->data_type;
  return dnnl_memory_desc_equal(md, &p);
}

/* Hands d (vr_aligned_alloc'd) to the plan; frees it on failure. */
static int own(vr_plan *p, void *d) {
  if (p->nowned == p->capowned) {
    int cap = p->capowned ? p->capowned * 2 : 16;
    void **o = vr_realloc(p->owned, sizeof(void *) * (size_t)cap);
    if (!o) {
      vr_aligned_free(d);
      return VR_ENOMEM;
    }
    p->owned = o;
    p->capowned = cap;
  }
  p->owned[p->nowned++] = d;
  return 0;
}

void *vr_pb_alloc(vr_pb *b, size_t bytes) {
  void *d = vr_aligned_alloc(64, bytes ? bytes : 64);
  return d && own(b->p, d) == 0 ? d : NULL;
}

int vr_pb_new_pv(vr_pb *b, const vr_tview *tin, const dnnl_memory_desc_t *mdin) {
  vr_plan *p = b->p;
  /* Callers may pass pointers into p->pv, which the realloc below moves. */
  vr_tview tcopy = *tin;
  dnnl_memory_desc_t mdcopy;
  if (mdin) mdcopy = *mdin;
  const vr_tview *t = &tcopy;
  const dnnl_memory_desc_t *md = mdin ? &mdcopy : NULL;
  if (p->npv == p->cappv) {
    int cap = p->cappv ? p->cappv * 2 : 64;
    vr_pval *n = vr_realloc(p->pv, sizeof(vr_pval) * (size_t)cap);
    if (!n) return vr_errf(b->err, VR_ENOMEM, "out of memory");
    p->pv = n;
    p->cappv = cap;
  }
  vr_pval *v = &p->pv[p->npv];
  memset(v, 0, sizeof(*v));
  v->t = *t;
  v->t.data = NULL;
  v->val = -1;
  v->off = -1;
  v->root = p->npv;
  v->def = INT_MAX;
  v->last = -1;
  v->plain = -1;
  v->has_md = vr_dnnl_dt(t->dt) != dnnl_data_type_undef;
  if (md) v->md = *md;
  else if (v->has_md) vr_md_plain(&v->md, t);
  if (v->has_md) md_canon(&v->md);
  v->bytes = v->has_md ? dnnl_memory_desc_get_size(&v->md)
                       : (size_t)vr_tview_numel(t) * vr_dtype_size(t->dt);
  return p->npv++;
}

int vr_pb_pv_of(vr_pb *b, int v) {
  if (b->val2pv[v] >= 0) return b->val2pv[v];
  const vr_tview *t = &b->vt[v];
  if (!t->data)
    return vr_errf(b->err, VR_EINTERNAL, "tensor '%s' used before it is computed",
                   b->g->vals[v].name);
  int pv = vr_pb_new_pv(b, t, NULL);
  if (pv < 0) return pv;
  b->p->pv[pv].ext = t->data;
  b->p->pv[pv].val = v;
  b->val2pv[v] = pv;
  return pv;
}

static int add_step(vr_pb *b, vr_step **out) {
  vr_plan *p = b->p;
  if (p->nsteps == p->capsteps) {
    int cap = p->capsteps ? p->capsteps * 2 : 64;
    vr_step *n = vr_realloc(p->steps, sizeof(vr_step) * (size_t)cap);
    if (!n) return vr_errf(b->err, VR_ENOMEM, "out of memory");
    p->steps = n;
    p->capsteps = cap;
  }
  *out = &p->steps[p->nsteps];
  memset(*out, 0, sizeof(vr_step));
  return p->nsteps++;
}

static void touch(vr_pb *b, int pv, int step, int write) {
  vr_pval *v = &b->p->pv[pv];
  if (write) { if (step < v->def) v->def = step; }
  else if (step > v->last) v->last = step;
}

int vr_pb_prim(vr_pb *b, int node, dnnl_primitive_desc_t pd, const vr_arg *args,
               int nargs) {
  dnnl_primitive_t prim;
  dnnl_status_t s = dnnl_primitive_create(&prim, pd);
  dnnl_primitive_desc_destroy(pd);
  if (s != dnnl_success)
    return vr_dnnl_err(b->err, node >= 0 ? &b->g->nodes[node] : NULL, s, "primitive creation");
  vr_step *st;
  int si = add_step(b, &st);
  if (si < 0) {
    dnnl_primitive_destroy(prim);
    return si;
  }
  st->kind = VR_STEP_PRIM;
  st->node = node;
  st->prim = prim;
  st->nargs = nargs;
  for (int i = 0; i < nargs; i++) {
    st->args[i] = args[i];
    int w = args[i].arg == DNNL_ARG_DST;
    touch(b, args[i].pv, si, w);
    /* A sum post-op reads dst too. */
    if (w) touch(b, args[i].pv, si, 0);
  }
  return 0;
}

static int reorder(vr_pb *b, int src, int dst, const_dnnl_primitive_attr_t attr) {
  dnnl_primitive_desc_t pd;
  dnnl_status_t s = dnnl_reorder_primitive_desc_create(
      &pd, &b->p->pv[src].md, b->c->eng, &b->p->pv[dst].md, b->c->eng, attr);
  if (s != dnnl_success) return vr_dnnl_err(b->err, NULL, s, "reorder");
  vr_arg a[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
  return vr_pb_prim(b, -1, pd, a, 2);
}

int vr_pb_as(vr_pb *b, int pv, const dnnl_memory_desc_t *md) {
  if (dnnl_memory_desc_equal(&b->p->pv[pv].md, md)) return pv;
  vr_tview t = b->p->pv[pv].t;
  int n = vr_pb_new_pv(b, &t, md);
  if (n < 0) return n;
  b->p->pv[n].val = b->p->pv[pv].val;
  int rc = reorder(b, pv, n, NULL);
  return rc < 0 ? rc : n;
}

int vr_pb_quantize(vr_pb *b, int pv, const dnnl_memory_desc_t *md, float scale) {
  vr_tview t = b->p->pv[pv].t;
  int n = vr_pb_new_pv(b, &t, md);
  if (n < 0) return n;
  b->p->pv[n].val = b->p->pv[pv].val;
  dnnl_primitive_attr_t attr;
  if (dnnl_primitive_attr_create(&attr) != dnnl_success) return VR_ENOMEM;
  dnnl_primitive_attr_set_output_scales(attr, 1, 0, &scale);
  int rc = reorder(b, pv, n, attr);
  dnnl_primitive_attr_destroy(attr);
  return rc < 0 ? rc : n;
}

int vr_pb_plain(vr_pb *b, int pv) {
  vr_pval *v = &b->p->pv[pv];
  if (!v->has_md || vr_md_is_plain(&v->md, &v->t)) return pv;
  if (v->plain >= 0) return v->plain;
  dnnl_memory_desc_t md;
  vr_md_plain(&md, &v->t);
  int n = vr_pb_as(b, pv, &md);
  if (n >= 0) b->p->pv[pv].plain = n;
  return n;
}

int vr_pb_def(vr_pb *b, int v, const dnnl_memory_desc_t *md) {
  int pv = vr_pb_new_pv(b, &b->vt[v], md);
  if (pv < 0) return pv;
  b->p->pv[pv].val = v;
  b->val2pv[v] = pv;
  return pv;
}

int vr_pb_def_alias(vr_pb *b, int v, const dnnl_memory_desc_t *md, int alias) {
  int pv = vr_pb_def(b, v, md);
  if (pv < 0) return pv;
  vr_pval *a = &b->p->pv[alias];
  b->p->pv[pv].root = a->root;
  b->p->pv[pv].ext = a->ext;
  return pv;
}

int vr_pb_ref(vr_pb *b, int ni) {
  const vr_node *n = &b->g->nodes[ni];
  const vr_op *op = vr_op_get(n->op_id);
  /* post-ops of an empty output have nothing to change (a MatMul of an
   * empty slice with a fused Relu) */
  int empty = 1;
  for (int k = 0; k < n->nout; k++)
    if (n->out[k] >= 0 && vr_tview_numel(&b->vt[n->out[k]])) empty = 0;
  if (!op->eval || (n->npost && !empty))
    return vr_bad(b->err, n, VR_EUNSUPPORTED, "no kernel for this configuration");
  int ipv[64];
  if (n->nin > 64) return vr_bad(b->err, n, VR_EUNSUPPORTED, "too many inputs");
  for (int i = 0; i < n->nin; i++) {
    ipv[i] = -1;
    if (n->in[i] < 0) continue;
    int pv = vr_pb_pv_of(b, n->in[i]);
    if (pv >= 0) pv = vr_pb_plain(b, pv);
    if (pv < 0) return pv;
    ipv[i] = pv;
  }
  vr_step *st;
  int si = add_step(b, &st);
  if (si < 0) return si;
  st->kind = VR_STEP_REF;
  st->node = ni;
  st->nin = n->nin;
  st->nout = n->nout;
  st->ipv = vr_calloc((size_t)n->nin + 1, sizeof(int));
  st->opv = vr_calloc((size_t)n->nout + 1, sizeof(int));
  st->iv = vr_calloc((size_t)n->nin + 1, sizeof(vr_tview));
  st->ov = vr_calloc((size_t)n->nout + 1, sizeof(vr_tview));
  if (!st->ipv || !st->opv || !st->iv || !st->ov)
    return vr_errf(b->err, VR_ENOMEM, "out of memory");
  for (int i = 0; i < n->nin; i++) {
    st->ipv[i] = ipv[i];
    if (ipv[i] >= 0) touch(b, ipv[i], si, 0);
  }
  for (int i = 0; i < n->nout; i++) {
    st->opv[i] = -1;
    if (n->out[i] < 0) continue;
    int pv = vr_pb_def(b, n->out[i], NULL);
    if (pv < 0) return pv;
    b->p->steps[si].opv[i] = pv;
    touch(b, pv, si, 1);
  }
  return 0;
}

/* ---- weight cache --------------------------------------------------------- */

struct vr_wcache {
  vr_wcache *next;
  int val;
  dnnl_memory_desc_t src, md;
  int attr_tag; /* distinguishes scaled (int8) variants */
  void *data;
  size_t bytes;
};

void vr_wcache_free(vr_wcache *w) {
  while (w) {
    vr_wcache *n = w->next;
    vr_aligned_free(w->data);
    vr_free(w);
    w = n;
  }
}

int64_t vr_wcache_bytes(const vr_wcache *w) {
  int64_t s = 0;
  for (; w; w = w->next) s += (int64_t)w->bytes;
  return s;
}

int vr_pb_weights(vr_pb *b, int v, const dnnl_memory_desc_t *src,
                  const dnnl_memory_desc_t *want, const dnnl_primitive_attr_t attr,
                  void **out) {
  int tag = attr ? 1 : 0;
  for (vr_wcache *w = *b->c->wcache; w; w = w->next)
    if (w->val == v && w->attr_tag == tag && dnnl_memory_desc_equal(&w->md, want) &&
        dnnl_memory_desc_equal(&w->src, src)) {
      *out = w->data;
      return 0;
    }
  vr_wcache *w = VR_NEW(vr_wcache);
  if (!w) return vr_errf(b->err, VR_ENOMEM, "out of memory");
  w->val = v;
  w->src = *src;
  w->md = *want;
  w->attr_tag = tag;
  w->bytes = dnnl_memory_desc_get_size(want);
  w->data = vr_aligned_alloc(64, w->bytes ? w->bytes : 64);
  if (!w->data) {
    vr_free(w);
    return vr_errf(b->err, VR_ENOMEM, "out of memory for weights");
  }
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_t prim = NULL;
  dnnl_memory_t ms = NULL, md = NULL;
  dnnl_stream_t st = NULL;
  dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, src, b->c->eng, want, b->c->eng, attr);
  if (s == dnnl_success) s = dnnl_primitive_create(&prim, pd);
  if (s == dnnl_success) s = dnnl_memory_create(&ms, src, b->c->eng, b->vt[v].data);
  if (s == dnnl_success) s = dnnl_memory_create(&md, want, b->c->eng, w->data);
  if (s == dnnl_success) s = dnnl_stream_create(&st, b->c->eng, dnnl_stream_default_flags);
  if (s == dnnl_success) {
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, ms}, {DNNL_ARG_TO, md}};
    s = dnnl_primitive_execute(prim, st, 2, a);
    if (s == dnnl_success) s = dnnl_stream_wait(st);
  }
  if (st) dnnl_stream_destroy(st);
  if (ms) dnnl_memory_destroy(ms);
  if (md) dnnl_memory_destroy(md);
  if (prim) dnnl_primitive_destroy(prim);
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (s != dnnl_success) {
    vr_aligned_free(w->data);
    vr_free(w);
    return vr_dnnl_err(b->err, NULL, s, "weight reorder");
  }
  w->next = *b->c->wcache;
  *b->c->wcache = w;
  *out = w->data;
  return 0;
}

/* ---- memory planning ------------------------------------------------------ */

typedef struct buf {
  int pv;
  size_t bytes;
  int def, last;
  size_t off;
} buf;

static int cmp_buf(const void *a, const void *b) {
  const buf *x = a, *y = b;
  return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : x->pv - y->pv;
}

/* Greedy by size: each buffer takes the lowest offset that does not overlap
 * a placed buffer whose lifetime intersects its own. */
static int plan_memory(vr_plan *p, vr_errbuf *err) {
  int n = p->npv;
  for (int i = 0; i < n; i++) {
    vr_pval *v = &p->pv[i];
    vr_pval *r = &p->pv[v->root];
    if (v->pinned) r->pinned = 1;
    if (v->def < r->def) r->def = v->def;
    if (v->last > r->last) r->last = v->last;
    if (v->bytes > r->bytes && !r->ext) r->bytes = v->bytes;
  }
  buf *bs = vr_calloc((size_t)n + 1, sizeof(buf));
  if (!bs) return vr_errf(err, VR_ENOMEM, "out of memory");
  int nb = 0;
  for (int i = 0; i < n; i++) {
    vr_pval *v = &p->pv[i];
    if (v->root != i || v->ext) continue;
    int last = v->pinned ? INT_MAX : v->last < v->def ? v->def : v->last;
    bs[nb++] = (buf){i, (v->bytes + 63) & ~(size_t)63, v->def, last, 0};
  }
  qsort(bs, (size_t)nb, sizeof(buf), cmp_buf);
  size_t total = 0;
  for (int i = 0; i < nb; i++) {
    size_t off = 0;
    for (int again = 1; again;) {
      again = 0;
      for (int j = 0; j < i; j++) {
        if (bs[j].last < bs[i].def || bs[i].last < bs[j].def) continue;
        if (off < bs[j].off + bs[j].bytes && bs[j].off < off + bs[i].bytes) {
          off = bs[j].off + bs[j].bytes;
          again = 1;
        }
      }
    }
    bs[i].off = off;
    if (off + bs[i].bytes > total) total = off + bs[i].bytes;
    p->pv[bs[i].pv].off = (int64_t)off;
  }
  p->arena_bytes = total ? total : 64;
  vr_free(bs);
  return 0;
}

/* ---- build / bind / run / free -------------------------------------------- */

static int lower_range(vr_pb *b) {
  const vr_plan_ctx *c = b->c;
  for (int ni = c->node_begin; ni < c->node_end; ni++) {
    int rc = vr_lower_node(b, ni);
    if (rc == 1) rc = vr_pb_ref(b, ni);
    if (rc < 0) return rc;
  }
  return 0;
}

static int setup_ports(vr_pb *b) {
  vr_plan *p = b->p;
  const vr_plan_ctx *c = b->c;
  p->in = vr_calloc((size_t)c->nin + 1, sizeof(vr_port));
  p->out = vr_calloc((size_t)c->nout + 1, sizeof(vr_port));
  if (!p->in || !p->out) return vr_errf(b->err, VR_ENOMEM, "out of memory");
  p->nin = c->nin;
  p->nout = c->nout;
  for (int i = 0; i < c->nin; i++) {
    int v = c->in_vals[i];
    int pv = vr_pb_def(b, v, NULL);
    if (pv < 0) return pv;
    p->pv[pv].def = -1;
    p->in[i] = (vr_port){v, pv, b->vt[v]};
  }
  return 0;
}

static int finish_outputs(vr_pb *b) {
  vr_plan *p = b->p;
  for (int i = 0; i < b->c->nout; i++) {
    int v = b->c->out_vals[i];
    int pv = b->val2pv[v] >= 0 || !b->vt[v].data ? b->val2pv[v] : vr_pb_pv_of(b, v);
    if (pv < 0) return vr_errf(b->err, VR_EINTERNAL, "output '%s' not computed", b->g->vals[v].name);
    pv = vr_pb_plain(b, pv);
    if (pv < 0) return pv;
    p->pv[pv].pinned = 1;
    p->out[i] = (vr_port){v, pv, b->vt[v]};
  }
  return 0;
}

static int is_view_op(const char *op) {
  return !strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Squeeze") ||
         !strcmp(op, "Unsqueeze") || !strcmp(op, "Identity") || !strcmp(op, "Dropout");
}

/* A node whose output is its first input's bytes under another shape. */
static int is_alias_node(const vr_node *n) {
  return is_view_op(n->op) || (!strcmp(n->op, "Concat") && n->nin == 1);
}

/* b->uses[v] = index of the last node in the range that reads v's storage
 * (INT_MAX for session outputs, -1 if none). Values that share bytes (a
 * view and what it views, transitively) share the last use of all of
 * them: a node may overwrite its input in place only when nothing reads
 * those bytes after it under any name. */
static void last_uses(vr_pb *b) {
  const vr_graph *g = b->g;
  const vr_plan_ctx *c = b->c;
  for (int i = 0; i < g->nvals; i++) b->uses[i] = -1;
  for (int ni = c->node_begin; ni < c->node_end; ni++)
    for (int k = 0; k < g->nodes[ni].nin; k++)
      if (g->nodes[ni].in[k] >= 0) b->uses[g->nodes[ni].in[k]] = ni;
  for (int i = 0; i < c->nout; i++) b->uses[c->out_vals[i]] = INT_MAX;
  for (int ni = c->node_end - 1; ni >= c->node_begin; ni--) {
    const vr_node *n = &g->nodes[ni];
    if (!is_alias_node(n) || n->in[0] < 0 || n->out[0] < 0) continue;
    if (b->uses[n->out[0]] > b->uses[n->in[0]]) b->uses[n->in[0]] = b->uses[n->out[0]];
  }
  /* the roots now hold their group's last use: hand it down to the views */
  for (int ni = c->node_begin; ni < c->node_end; ni++) {
    const vr_node *n = &g->nodes[ni];
    if (!is_alias_node(n) || n->in[0] < 0 || n->out[0] < 0) continue;
    if (b->uses[n->in[0]] > b->uses[n->out[0]]) b->uses[n->out[0]] = b->uses[n->in[0]];
  }
}

int vr_plan_build(const vr_plan_ctx *c, int batch, vr_plan **out, vr_errbuf *err) {
  *out = NULL;
  const vr_graph *g = c->g;
  vr_plan *p = VR_NEW(vr_plan);
  vr_pb b = {c, g, p, NULL, NULL, NULL, err, 0};
  void **owned = vr_calloc((size_t)g->nvals + 1, sizeof(void *));
  b.vt = vr_calloc((size_t)g->nvals + 1, sizeof(vr_tview));
  b.val2pv = vr_malloc(sizeof(int) * ((size_t)g->nvals + 1));
  b.uses = vr_calloc((size_t)g->nvals + 1, sizeof(int));
  int rc = 0;
  if (!p || !owned || !b.vt || !b.val2pv || !b.uses) {
    rc = vr_errf(err, VR_ENOMEM, "out of memory");
    goto done;
  }
  p->batch = batch;
  p->g = g;
  for (int i = 0; i < g->nvals; i++) b.val2pv[i] = -1;
  rc = vr_graph_shapes_at(g, batch, b.vt, owned, err);
  /* AFFINE constants materialised for this batch belong to the plan. */
  for (int i = 0; i < g->nvals; i++)
    if (owned[i] && own(p, owned[i]) && !rc) rc = vr_errf(err, VR_ENOMEM, "out of memory");
  if (rc) goto done;
  last_uses(&b);
  if ((rc = setup_ports(&b)) || (rc = lower_range(&b)) || (rc = finish_outputs(&b)) ||
      (rc = plan_memory(p, err)))
    goto done;
done:
  vr_free(owned);
  vr_free(b.vt);
  vr_free(b.val2pv);
  vr_free(b.uses);
  if (rc) {
    vr_plan_free(p);
    return rc;
  }
  *out = p;
  return 0;
}

int vr_plan_bind(vr_plan *p, void *arena, vr_errbuf *err) {
  for (int i = 0; i < p->npv; i++) {
    vr_pval *v = &p->pv[i];
    vr_pval *r = &p->pv[v->root];
    v->t.data = v->ext ? v->ext : r->ext ? r->ext : (char *)arena + r->off;
    if (v->has_md && !v->mem) {
      dnnl_status_t s = dnnl_memory_create(&v->mem, &v->md, vr_dnnl_engine(), v->t.data);
      if (s != dnnl_success) return vr_dnnl_err(err, NULL, s, "memory creation");
    } else if (v->mem) {
      dnnl_memory_set_data_handle(v->mem, v->t.data);
    }
  }
  for (int i = 0; i < p->nsteps; i++) {
    vr_step *s = &p->steps[i];
    for (int a = 0; a < s->nargs; a++)
      s->ex[a] = (dnnl_exec_arg_t){s->args[a].arg, p->pv[s->args[a].pv].mem};
    for (int k = 0; k < s->nin; k++) {
      memset(&s->iv[k], 0, sizeof(vr_tview));
      if (s->ipv && s->ipv[k] >= 0) s->iv[k] = p->pv[s->ipv[k]].t;
    }
    for (int k = 0; k < s->nout; k++) {
      memset(&s->ov[k], 0, sizeof(vr_tview));
      if (s->opv && s->opv[k] >= 0) s->ov[k] = p->pv[s->opv[k]].t;
    }
  }
  for (int i = 0; i < p->nin; i++) p->in[i].t.data = p->pv[p->in[i].pv].t.data;
  for (int i = 0; i < p->nout; i++) p->out[i].t.data = p->pv[p->out[i].pv].t.data;
  return 0;
}

int vr_plan_borrow_input(vr_plan *p, int i, void *data, size_t nbytes, int *dirty) {
  vr_pval *r = &p->pv[p->pv[p->in[i].pv].root];
  /* The root holds the input and every in-place alias of it: the caller's
   * buffer must cover the largest (plan_memory sized the root so). */
  int ok = data && ((uintptr_t)data & 63) == 0 && nbytes >= r->bytes && r->off >= 0;
  void *want = ok ? data : NULL;
  if (r->ext != want) {
    r->ext = want;
    *dirty = 1;
  }
  return ok;
}

int vr_plan_run(vr_plan *p, dnnl_stream_t st, int node_begin, int64_t *node_ns,
                vr_errbuf *err) {
  for (int i = 0; i < p->nsteps; i++) {
    vr_step *s = &p->steps[i];
    int64_t t0 = node_ns ? vr_now_ns() : 0;
    if (s->kind == VR_STEP_PRIM) {
      dnnl_status_t r = dnnl_primitive_execute(s->prim, st, s->nargs, s->ex);
      if (r != dnnl_success) return vr_dnnl_err(err, NULL, r, "execution");
    } else {
      const vr_node *n = &p->g->nodes[s->node];
      int rc = vr_op_get(n->op_id)->eval(n, s->iv, s->ov, err);
      if (rc) return rc;
    }
    if (node_ns && s->node >= 0) node_ns[s->node - node_begin] += vr_now_ns() - t0;
  }
  return 0;
}

void vr_plan_free(vr_plan *p) {
  if (!p) return;
  for (int i = 0; i < p->nsteps; i++) {
    vr_step *s = &p->steps[i];
    if (s->prim) dnnl_primitive_destroy(s->prim);
    vr_free(s->ipv);
    vr_free(s->opv);
    vr_free(s->iv);
    vr_free(s->ov);
  }
  for (int i = 0; i < p->npv; i++)
    if (p->pv[i].mem) dnnl_memory_destroy(p->pv[i].mem);
  for (int i = 0; i < p->nowned; i++) vr_aligned_free(p->owned[i]);
  vr_free(p->owned);
  vr_free(p->steps);
  vr_free(p->pv);
  vr_free(p->in);
  vr_free(p->out);
  vr_free(p);
}
