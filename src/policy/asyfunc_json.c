/* AsyFunc block profile <-> JSON (format in docs/API.md, "AsyFunc block
 * profile"): what `vario perf --blocks --json` writes and the AsyFunc
 * simulator reads. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "policy/asyfunc.h"

static json_t *lat_json(const double lat[VR_AF_MAXC][VR_AF_MAXB], int cmax, int bmax) {
  json_t *a = json_array();
  for (int c = 0; c < cmax; c++) {
    json_t *row = json_array();
    for (int b = 0; b < bmax; b++) json_array_append_new(row, json_real(lat[c][b]));
    json_array_append_new(a, row);
  }
  return a;
}

json_t *vr_af_model_to_json(const vr_af_model *m) {
  json_t *blocks = json_array();
  for (int i = 0; i < m->nblocks; i++) {
    const vr_af_block *b = &m->blk[i];
    json_array_append_new(
        blocks, json_pack("{s:i,s:i,s:o,s:I,s:I,s:I,s:I,s:f,s:f}", "node_begin", b->node_begin,
                          "node_end", b->node_end, "lat_ms", lat_json(b->lat_ms, m->cmax, m->bmax),
                          "param_bytes", (json_int_t)b->param_bytes, "in_bytes",
                          (json_int_t)b->in_bytes, "out_bytes", (json_int_t)b->out_bytes,
                          "mem_bytes", (json_int_t)b->mem_bytes, "sensitivity", b->sensitivity,
                          "load_ms", b->load_ms));
  }
  return json_pack("{s:s,s:i,s:i,s:f,s:I,s:f,s:o}", "model", m->name, "cmax", m->cmax, "bmax",
                   m->bmax, "load_ms", m->load_ms, "mem_bytes", (json_int_t)m->mem_bytes,
                   "transfer_ms_per_mb", m->transfer_ms_per_mb, "blocks", blocks);
}

static int num(const json_t *o, const char *k, double lo, double hi, double *v, vr_errbuf *err,
               const char *ctx) {
  json_t *x = json_object_get(o, k);
  if (!json_is_number(x)) return vr_errf(err, VR_EINVAL, "%s'%s' must be a number", ctx, k);
  *v = json_number_value(x);
  if (!(*v >= lo && *v <= hi))
    return vr_errf(err, VR_ERANGE, "%s'%s' = %g outside [%g, %g]", ctx, k, *v, lo, hi);
  return 0;
}

static int block_from_json(const json_t *o, const vr_af_model *m, int i, int prev_end,
                           vr_af_block *b, vr_errbuf *err) {
  char ctx[48];
  snprintf(ctx, sizeof ctx, "blocks[%d]: ", i);
  if (!json_is_object(o)) return vr_errf(err, VR_EINVAL, "%snot an object", ctx);
  double nb = 0, ne = 0, pb = 0, ib = 0, ob = 0, mb = 0, s = 0, l = 0;
  int rc = num(o, "node_begin", 0, 1e6, &nb, err, ctx);
  if (!rc) rc = num(o, "node_end", 1, 1e6, &ne, err, ctx);
  if (!rc) rc = num(o, "param_bytes", 0, 1e13, &pb, err, ctx);
  if (!rc) rc = num(o, "in_bytes", 0, 1e13, &ib, err, ctx);
  if (!rc) rc = num(o, "out_bytes", 0, 1e13, &ob, err, ctx);
  if (!rc) rc = num(o, "mem_bytes", 0, 1e13, &mb, err, ctx);
  if (!rc) rc = num(o, "sensitivity", 0, 1e6, &s, err, ctx);
  if (!rc) rc = num(o, "load_ms", 0, 1e8, &l, err, ctx);
  if (rc) return rc;
  if ((int)nb != prev_end || ne <= nb || nb != floor(nb) || ne != floor(ne))
    return vr_errf(err, VR_EINVAL, "%snode range [%g, %g) must start at %d and be non-empty",
                   ctx, nb, ne, prev_end);
  *b = (vr_af_block){(int)nb, (int)ne, {{0}}, (int64_t)pb, (int64_t)ib, (int64_t)ob,
                     (int64_t)mb, s, l};
  json_t *lat = json_object_get(o, "lat_ms");
  if (!json_is_array(lat) || (int)json_array_size(lat) != m->cmax)
    return vr_errf(err, VR_EINVAL, "%s'lat_ms' must hold %d rows (cores)", ctx, m->cmax);
  for (int c = 0; c < m->cmax; c++) {
    json_t *row = json_array_get(lat, (size_t)c);
    if (!json_is_array(row) || (int)json_array_size(row) != m->bmax)
      return vr_errf(err, VR_EINVAL, "%s'lat_ms'[%d] must hold %d batch sizes", ctx, c, m->bmax);
    for (int k = 0; k < m->bmax; k++) {
      json_t *x = json_array_get(row, (size_t)k);
      double v = json_is_number(x) ? json_number_value(x) : -1;
      if (!(v >= 0 && v <= 1e7))
        return vr_errf(err, VR_ERANGE, "%s'lat_ms'[%d][%d] must be in [0, 1e7] ms", ctx, c, k);
      b->lat_ms[c][k] = v;
    }
  }
  return 0;
}

int vr_af_model_from_json(const json_t *j, vr_af_model *m, vr_errbuf *err) {
  memset(m, 0, sizeof *m);
  if (!json_is_object(j)) return vr_errf(err, VR_EINVAL, "block profile: not an object");
  const char *name = json_string_value(json_object_get(j, "model"));
  if (!name || !*name || strlen(name) >= sizeof m->name)
    return vr_errf(err, VR_EINVAL, "block profile: 'model' must be a name of 1..63 bytes");
  snprintf(m->name, sizeof m->name, "%s", name);
  double cm = 0, bm = 0, lm = 0, mb = 0, tr = 0;
  int rc = num(j, "cmax", 1, VR_AF_MAXC, &cm, err, "");
  if (!rc) rc = num(j, "bmax", 1, VR_AF_MAXB, &bm, err, "");
  if (!rc) rc = num(j, "load_ms", 0, 1e8, &lm, err, "");
  if (!rc) rc = num(j, "mem_bytes", 1, 1e13, &mb, err, "");
  if (!rc) rc = num(j, "transfer_ms_per_mb", 0, 1e4, &tr, err, "");
  if (rc) return rc;
  if (cm != floor(cm) || bm != floor(bm))
    return vr_errf(err, VR_EINVAL, "block profile: cmax and bmax must be integers");
  m->cmax = (int)cm;
  m->bmax = (int)bm;
  m->load_ms = lm;
  m->mem_bytes = (int64_t)mb;
  m->transfer_ms_per_mb = tr;
  json_t *bl = json_object_get(j, "blocks");
  size_t nb = json_is_array(bl) ? json_array_size(bl) : 0;
  if (nb < 1 || nb > VR_AF_MAXBLK)
    return vr_errf(err, VR_EINVAL, "block profile: 'blocks' must hold 1..%d blocks", VR_AF_MAXBLK);
  int prev = 0;
  for (size_t i = 0; i < nb; i++) {
    rc = block_from_json(json_array_get(bl, i), m, (int)i, prev, &m->blk[i], err);
    if (rc) return rc;
    prev = m->blk[i].node_end;
  }
  m->nblocks = (int)nb;
  for (int c = 1; c <= m->cmax; c++)
    if (!(vr_af_lat(m, VR_AF_ALL(m), c, 1) > 0))
      return vr_errf(err, VR_EINVAL, "block profile: zero latency at %d cores, batch 1", c);
  return 0;
}
