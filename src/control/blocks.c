/* AsyFunc Extractor + Profiler on the real engine (see blocks.h). */
#include "control/blocks.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"

static double ms_since(int64_t t0) { return (double)(vr_now_ns() - t0) / 1e6; }

/* Deterministic inputs for batch b, one buffer per session input. */
static int fill_inputs(vr_session *s, int b, vr_tensor *t, void **bufs) {
  uint32_t x = 777;
  int n = vr_session_num_inputs(s);
  for (int i = 0; i < n && i < 8; i++) {
    const vr_tensor_info *in = vr_session_input(s, i);
    t[i] = (vr_tensor){in->name, in->dtype, in->ndim, {0}, NULL, 0};
    int64_t cnt = 1;
    for (int d = 0; d < in->ndim; d++) {
      t[i].shape[d] = in->shape[d] < 0 ? b : in->shape[d];
      cnt *= t[i].shape[d];
    }
    t[i].nbytes = (size_t)cnt * vr_dtype_size(in->dtype);
    if (!(bufs[i] = vr_aligned_alloc(64, t[i].nbytes ? t[i].nbytes : 64))) return VR_ENOMEM;
    memset(bufs[i], 0, t[i].nbytes);
    for (int64_t k = 0; in->dtype == VR_DT_F32 && k < cnt; k++) {
      x = x * 1664525u + 1013904223u;
      ((float *)bufs[i])[k] = (float)(x >> 8) / (float)(1 << 23) - 1.0f;
    }
    t[i].data = bufs[i];
  }
  return n > 8 ? VR_ELIMIT : 0;
}

/* Per-node ms at (c, b): the minimum over `runs` single profiled runs
 * after two warm-ups (the minimum resists other processes on the cores). */
static int node_times(const vr_model *m, int c, int bmax, int runs, double *ms /* [bmax][n] */,
                      vr_errbuf *err) {
  int n = vr_model_num_nodes(m);
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.threads = c;
  o.max_batch = bmax;
  vr_session *s = NULL;
  vr_tensor in[8], out[64];
  void *bufs[8] = {0};
  double *one = vr_calloc((size_t)n + 1, sizeof(double));
  int rc = one ? vr_session_create(m, &o, &s, err) : vr_errf(err, VR_ENOMEM, "out of memory");
  for (int b = 1; !rc && b <= bmax; b++) {
    for (int i = 0; i < 8; i++) vr_aligned_free(bufs[i]), bufs[i] = NULL;
    rc = fill_inputs(s, b, in, bufs);
    int nin = vr_session_num_inputs(s);
    double *row = ms + (size_t)(b - 1) * (size_t)n;
    for (int w = 0; !rc && w < 2; w++) rc = vr_session_run(s, b, in, nin, out, 64, err);
    for (int r = 0; !rc && r < runs; r++) {
      vr_session_set_profiling(s, 1);
      rc = vr_session_run(s, b, in, nin, out, 64, err);
      if (!rc) rc = vr_session_node_times(s, one, n);
      for (int i = 0; !rc && i < n; i++)
        if (r == 0 || one[i] < row[i]) row[i] = one[i];
    }
    vr_session_set_profiling(s, 0);
  }
  for (int i = 0; i < 8; i++) vr_aligned_free(bufs[i]);
  vr_free(one);
  vr_session_free(s);
  return rc;
}

static int64_t per_sample_bytes(const vr_tensor_info *t) {
  int64_t n = (int64_t)vr_dtype_size(t->dtype);
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d] < 0 ? 1 : t->shape[d];
  return n;
}

/* Slices [b, e) and opens a session on it; *ms = the time both took. */
static int load_range(const vr_model *m, int b, int e, int bmax, double *ms, vr_model **sm,
                      vr_session **ss, vr_errbuf *err) {
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.max_batch = bmax;
  int64_t t0 = vr_now_ns();
  int rc = vr_model_slice(m, b, e, sm, err);
  if (!rc) rc = vr_session_create(*sm, &o, ss, err);
  *ms = ms_since(t0);
  return rc;
}

double vr_blocks_shadow_load_ms(const vr_model *m, const vr_af_model *af, uint32_t mask,
                                int bmax, int runs, vr_errbuf *err) {
  double best = -1;
  for (int r = 0; r < (runs > 0 ? runs : 1); r++) {
    double total = 0;
    for (int i = 0; i < af->nblocks; i++) {
      if (!(mask >> i & 1u)) continue;
      int j = i;
      while (j + 1 < af->nblocks && (mask >> (j + 1) & 1u)) j++;
      vr_model *sm = NULL;
      vr_session *ss = NULL;
      double ms;
      int rc = load_range(m, af->blk[i].node_begin, af->blk[j].node_end, bmax, &ms, &sm, &ss, err);
      vr_session_free(ss);
      vr_model_free(sm);
      if (rc) return -1;
      total += ms;
      i = j;
    }
    if (best < 0 || total < best) best = total;
  }
  return best;
}

/* Whole-model load (parse + optimise + session), minimum over runs. */
static int full_load(const char *path, const vr_blocks_opts *o, vr_af_model *af, vr_errbuf *err) {
  af->load_ms = -1;
  for (int r = 0; r < o->load_runs; r++) {
    vr_session_opts so;
    vr_session_opts_init(&so);
    so.max_batch = o->bmax;
    vr_model *m = NULL;
    vr_session *s = NULL;
    int64_t t0 = vr_now_ns();
    int rc = vr_model_load(path, &m, err);
    if (!rc) rc = vr_session_create(m, &so, &s, err);
    double ms = ms_since(t0);
    if (!rc) af->mem_bytes = vr_session_memory_bytes(s);
    vr_session_free(s);
    vr_model_free(m);
    if (rc) return rc;
    if (af->load_ms < 0 || ms < af->load_ms) af->load_ms = ms;
  }
  return 0;
}

static double memcpy_ms_per_mb(void) {
  size_t n = 16u << 20;
  char *a = vr_malloc(n), *b = vr_malloc(n);
  if (!a || !b) {
    vr_free(a);
    vr_free(b);
    return 0.1;
  }
  memset(a, 1, n);
  memset(b, 2, n);
  double best = 1e9;
  for (int r = 0; r < 5; r++) {
    int64_t t0 = vr_now_ns();
    memcpy(b, a, n);
    double ms = ms_since(t0);
    if (ms < best) best = ms;
  }
  volatile char sink = b[n / 2];
  (void)sink;
  vr_free(a);
  vr_free(b);
  return best / ((double)n / 1e6);
}

/* Fills one block's tuples from the per-node times and its slice. */
static int block_facts(const vr_model *m, const vr_blocks_opts *o, const double *const *ms,
                       int n, vr_af_block *bk, vr_errbuf *err) {
  for (int c = 0; c < o->cmax; c++)
    for (int b = 0; b < o->bmax; b++) {
      double t = 0;
      for (int i = bk->node_begin; i < bk->node_end; i++) t += ms[c][(size_t)b * (size_t)n + (size_t)i];
      bk->lat_ms[c][b] = t;
    }
  bk->sensitivity = bk->lat_ms[0][0] > 0 ? bk->lat_ms[0][o->bmax - 1] / bk->lat_ms[0][0] : 1;
  for (int i = bk->node_begin; i < bk->node_end; i++)
    bk->param_bytes += vr_model_node(m, i)->weight_bytes;
  bk->load_ms = -1;
  for (int r = 0; r < o->load_runs; r++) {
    vr_model *sm = NULL;
    vr_session *ss = NULL;
    double t;
    int rc = load_range(m, bk->node_begin, bk->node_end, o->bmax, &t, &sm, &ss, err);
    if (!rc) {
      bk->mem_bytes = vr_session_memory_bytes(ss);
      bk->in_bytes = per_sample_bytes(vr_session_input(ss, 0));
      bk->out_bytes = per_sample_bytes(vr_session_output(ss, 0));
    }
    vr_session_free(ss);
    vr_model_free(sm);
    if (rc) return rc;
    if (bk->load_ms < 0 || t < bk->load_ms) bk->load_ms = t;
  }
  return 0;
}

static void defaults(vr_blocks_opts *o, const vr_blocks_opts *in) {
  memset(o, 0, sizeof *o);
  if (in) *o = *in;
  if (o->cmax <= 0) o->cmax = 2;
  if (o->cmax > VR_AF_MAXC) o->cmax = VR_AF_MAXC;
  if (o->bmax <= 0) o->bmax = 4;
  if (o->bmax > VR_AF_MAXB) o->bmax = VR_AF_MAXB;
  if (o->runs <= 0) o->runs = 7;
  if (o->load_runs <= 0) o->load_runs = 3;
  if (o->max_blocks <= 0 || o->max_blocks > VR_AF_MAXBLK) o->max_blocks = 8;
  if (o->tol <= 0) o->tol = 0.15;
}

int vr_blocks_profile(const char *path, const char *name, const vr_blocks_opts *oin,
                      vr_af_model *af, vr_errbuf *err) {
  vr_blocks_opts o;
  defaults(&o, oin);
  memset(af, 0, sizeof *af);
  snprintf(af->name, sizeof af->name, "%s", name ? name : "model");
  af->cmax = o.cmax;
  af->bmax = o.bmax;
  int rc = full_load(path, &o, af, err);
  vr_model *m = NULL;
  if (!rc) rc = vr_model_load(path, &m, err);
  int n = m ? vr_model_num_nodes(m) : 0;
  double *ms[VR_AF_MAXC] = {0}, *sens = vr_calloc((size_t)n + 1, sizeof(double));
  char *cut = vr_calloc((size_t)n + 1, 1);
  int *bounds = vr_calloc((size_t)n + 2, sizeof(int));
  if (!rc && (!sens || !cut || !bounds)) rc = vr_errf(err, VR_ENOMEM, "out of memory");
  for (int c = 0; !rc && c < o.cmax; c++) {
    if (!(ms[c] = vr_calloc((size_t)n * (size_t)o.bmax + 1, sizeof(double))))
      rc = vr_errf(err, VR_ENOMEM, "out of memory");
    if (!rc) rc = node_times(m, c + 1, o.bmax, o.runs, ms[c], err);
  }
  if (!rc && vr_model_chain_cuts(m, cut)) rc = vr_errf(err, VR_ENOMEM, "out of memory");
  for (int i = 0; !rc && i < n; i++) {
    double t1 = ms[0][i], tb = ms[0][(size_t)(o.bmax - 1) * (size_t)n + (size_t)i];
    sens[i] = t1 > 0 ? tb / t1 : 1;
  }
  /* blocks no heavier than what LLS may give a shadow (max_mem_frac of
   * the model's weights), so grouping does not merge its candidates away */
  int64_t *wb = rc ? NULL : vr_calloc((size_t)n + 1, sizeof(int64_t)), wsum = 0;
  if (!rc && !wb) rc = vr_errf(err, VR_ENOMEM, "out of memory");
  for (int i = 0; !rc && i < n; i++) wsum += wb[i] = vr_model_node(m, i)->weight_bytes;
  vr_af_scale_cfg sc;
  vr_af_scale_cfg_init(&sc, 0);
  int nb = rc ? 0
              : vr_af_group_capped(n, sens, ms[0], wb, (int64_t)(sc.max_mem_frac * (double)wsum),
                                   cut, o.max_blocks, o.tol, bounds);
  vr_free(wb);
  if (!rc && nb < 1) rc = vr_errf(err, VR_EINVAL, "cannot group %d nodes into blocks", n);
  af->nblocks = nb;
  for (int k = 0; !rc && k < nb; k++) {
    af->blk[k].node_begin = bounds[k];
    af->blk[k].node_end = bounds[k + 1];
    rc = block_facts(m, &o, (const double *const *)ms, n, &af->blk[k], err);
  }
  if (!rc) af->transfer_ms_per_mb = memcpy_ms_per_mb();
  for (int c = 0; c < o.cmax; c++) vr_free(ms[c]);
  vr_free(sens);
  vr_free(cut);
  vr_free(bounds);
  vr_model_free(m);
  return rc;
}
