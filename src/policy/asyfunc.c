/* AsyFunc's decisions: block grouping, paired latency (Eq. 3), MLS
 * (Algorithm 1), LLS (Algorithm 2), the scheduler (Algorithm 3) and
 * BATCH's fixed configuration. Pure; see asyfunc.h. */
#include "policy/asyfunc.h"

#include <math.h>
#include <string.h>

/* ---- block grouping ------------------------------------------------------ */

typedef struct seg {
  int begin;
  double ms, wsens; /* time and time-weighted sensitivity */
  int64_t bytes;    /* weight bytes */
} seg;

static double seg_sens(const seg *s) { return s->ms > 0 ? s->wsens / s->ms : 1.0; }

/* The closest adjacent pair (|log s_a - log s_b|) whose merge stays within
 * max_bytes (any pair when max_bytes <= 0 or !capped); -1 if none. */
static int closest_pair(const seg *segs, int ns, int64_t max_bytes, int capped, double *dist) {
  int best = -1;
  *dist = INFINITY;
  for (int k = 0; k + 1 < ns; k++) {
    if (capped && max_bytes > 0 && segs[k].bytes + segs[k + 1].bytes > max_bytes) continue;
    double d = fabs(log(seg_sens(&segs[k])) - log(seg_sens(&segs[k + 1])));
    if (d < *dist) *dist = d, best = k;
  }
  return best;
}

int vr_af_group_capped(int n, const double *sens, const double *ms, const int64_t *bytes,
                       int64_t max_bytes, const char *cut, int max_blocks, double tol,
                       int *bounds) {
  if (n < 1 || max_blocks < 1 || !sens || !ms || !cut || !bounds) return VR_EINVAL;
  seg segs[256];
  int ns = 0;
  for (int i = 0; i < n; i++) {
    if ((i == 0 || cut[i]) && ns < 256) segs[ns++] = (seg){i, 0, 0, 0};
    double t = ms[i] > 0 ? ms[i] : 0, s = sens[i] > 0 ? sens[i] : 1;
    segs[ns - 1].ms += t;
    segs[ns - 1].wsens += t * s;
    segs[ns - 1].bytes += bytes && bytes[i] > 0 ? bytes[i] : 0;
  }
  for (;;) {
    double bd;
    int best = closest_pair(segs, ns, max_bytes, 1, &bd);
    if (best < 0 || bd > tol) {
      if (ns <= max_blocks) break;
      /* too many blocks: merge the closest pair the cap allows, or any */
      if (best < 0) best = closest_pair(segs, ns, max_bytes, 0, &bd);
      if (best < 0) break;
    }
    segs[best].ms += segs[best + 1].ms;
    segs[best].wsens += segs[best + 1].wsens;
    segs[best].bytes += segs[best + 1].bytes;
    memmove(&segs[best + 1], &segs[best + 2], sizeof(seg) * (size_t)(ns - best - 2));
    ns--;
  }
  for (int k = 0; k < ns; k++) bounds[k] = segs[k].begin;
  bounds[ns] = n;
  return ns;
}

int vr_af_group(int n, const double *sens, const double *ms, const char *cut, int max_blocks,
                double tol, int *bounds) {
  return vr_af_group_capped(n, sens, ms, NULL, 0, cut, max_blocks, tol, bounds);
}

/* ---- latency model ------------------------------------------------------- */

static int clampi(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }

double vr_af_lat(const vr_af_model *m, uint32_t mask, int c, int b) {
  if (b <= 0) return 0;
  c = clampi(c, 1, m->cmax);
  double t = 0;
  for (int i = 0; i < m->nblocks; i++) {
    if (!(mask >> i & 1u)) continue;
    if (b <= m->bmax) {
      t += m->blk[i].lat_ms[c - 1][b - 1];
    } else { /* beyond the profile: per row at bmax */
      t += m->blk[i].lat_ms[c - 1][m->bmax - 1] * b / m->bmax;
    }
  }
  return t;
}

int64_t vr_af_mask_mem(const vr_af_model *m, uint32_t mask) {
  /* weights add up; activations reuse one arena, sized by the largest */
  int64_t w = 0, arena = 0;
  for (int i = 0; i < m->nblocks; i++) {
    if (!(mask >> i & 1u)) continue;
    int64_t a = m->blk[i].mem_bytes - m->blk[i].param_bytes;
    w += m->blk[i].param_bytes;
    if (a > arena) arena = a;
  }
  return w + arena;
}

double vr_af_mask_load_ms(const vr_af_model *m, uint32_t mask) {
  double s = 0;
  for (int i = 0; i < m->nblocks; i++)
    if (mask >> i & 1u) s += m->blk[i].load_ms;
  return s;
}

double vr_af_transfer_ms(const vr_af_model *m, uint32_t mask, int bs) {
  double bytes = 0;
  for (int i = 0; i < m->nblocks; i++) {
    if (!(mask >> i & 1u)) continue;
    /* a run of adjacent blocks hands off once in and once out */
    if (i == 0 || !(mask >> (i - 1) & 1u)) bytes += (double)m->blk[i].in_bytes;
    if (i + 1 == m->nblocks || !(mask >> (i + 1) & 1u)) bytes += (double)m->blk[i].out_bytes;
  }
  return bytes * bs / 1e6 * m->transfer_ms_per_mb;
}

double vr_af_pair_lat(const vr_af_model *m, const vr_af_pair *p) {
  if (p->cs <= 0 || !p->mask) return vr_af_lat(m, VR_AF_ALL(m), p->cb, p->b);
  double np = vr_af_lat(m, VR_AF_ALL(m) & ~p->mask, p->cb, p->b);
  double pb = vr_af_lat(m, p->mask, p->cb, p->bb);
  double ps = p->bs > 0 ? vr_af_lat(m, p->mask, p->cs, p->bs) + vr_af_transfer_ms(m, p->mask, p->bs)
                        : 0;
  return np + (pb > ps ? pb : ps);
}

void vr_af_split(const vr_af_model *m, vr_af_pair *p) {
  double best = INFINITY;
  int bb = p->b;
  for (int x = p->b; x >= 0; x--) {
    double pb = vr_af_lat(m, p->mask, p->cb, x);
    int y = p->b - x;
    double ps = y ? vr_af_lat(m, p->mask, p->cs, y) + vr_af_transfer_ms(m, p->mask, y) : 0;
    double d = fabs(pb - ps);
    if (d < best - 1e-12) best = d, bb = x;
  }
  p->bb = bb;
  p->bs = p->b - bb;
}

double vr_af_rmax(const vr_af_model *m, int cores, double slo_ms, int *best_b) {
  double best = 0;
  int bb = 0;
  for (int b = 1; b <= m->bmax; b++) {
    double t = vr_af_lat(m, VR_AF_ALL(m), cores, b);
    if (t > 0 && t <= slo_ms && b / t > best) best = b / t, bb = b;
  }
  if (best_b) *best_b = bb;
  return best * 1000.0;
}

double vr_af_default_slo(const vr_af_model *m) {
  return 1.5 * vr_af_lat(m, VR_AF_ALL(m), 1, m->bmax);
}

/* ---- MLS ----------------------------------------------------------------- */

void vr_af_scale_cfg_init(vr_af_scale_cfg *c, double slo_ms) {
  c->alpha = 0.8;
  c->beta = 0.6;
  c->slo_ms = slo_ms;
  c->gamma = 2;
  c->kappa = 10;
  c->min_sens = 1.2;
  c->max_mem_frac = 0.5;
  c->scale_in_guard = 1;
}

double vr_af_eta(const vr_af_model *m, int cores, int64_t mem, int b, double t_ms) {
  if (t_ms <= 0 || cores <= 0) return 0;
  double t = t_ms / 1000.0, rho_m = m->mem_bytes > 0 ? (double)mem / (double)m->mem_bytes : 1;
  return b / (cores * t) + (rho_m > 0 ? b / (rho_m * t) : 0);
}

/* Algorithm 1 lines 3-10: the best eta per core count at rate r. */
static double mls_eta(const vr_af_model *m, const vr_af_scale_cfg *cfg, double r, int c) {
  for (int b = m->bmax; b >= 1; b--) {
    double tl = vr_af_lat(m, VR_AF_ALL(m), c, b);
    double ts = (r > 0 ? (b - 1) / r * 1000.0 : 0) + tl;
    if (ts <= cfg->slo_ms) return vr_af_eta(m, c, m->mem_bytes, b, tl);
  }
  return 0;
}

double vr_af_pair_rmax(const vr_af_model *m, const vr_af_pair *p, double slo_ms) {
  double best = 0;
  for (int b = 1; b <= m->bmax; b++) {
    vr_af_pair q = *p;
    q.b = b;
    if (q.cs > 0 && q.mask) vr_af_split(m, &q);
    double t = vr_af_pair_lat(m, &q);
    if (t > 0 && t <= slo_ms && b / t > best) best = b / t;
  }
  return best * 1000.0;
}

/* Body i's R_max term: its pair's when given, else its own. */
static double body_rmax(const vr_af_model *m, double slo_ms, const int *cores,
                        const double *rmax, int i) {
  return rmax && rmax[i] > 0 ? rmax[i] : vr_af_rmax(m, cores[i], slo_ms, NULL);
}

void vr_af_mls(const vr_af_model *m, const vr_af_scale_cfg *cfg, double r, const int *cores,
               int nbody, int free_cores, vr_af_mls_out *out) {
  vr_af_mls_paired(m, cfg, r, cores, NULL, nbody, free_cores, out);
}

void vr_af_mls_paired(const vr_af_model *m, const vr_af_scale_cfg *cfg, double r,
                      const int *cores, const double *rmax_each, int nbody, int free_cores,
                      vr_af_mls_out *out) {
  memset(out, 0, sizeof *out);
  double rmax = 0;
  for (int i = 0; i < nbody; i++) rmax += body_rmax(m, cfg->slo_ms, cores, rmax_each, i);
  if (r > cfg->alpha * rmax) {
    double eta[VR_AF_MAXC + 1] = {0};
    for (int c = 1; c <= m->cmax; c++) eta[c] = mls_eta(m, cfg, r, c);
    while (r > cfg->alpha * rmax && out->ncreate < 64) {
      int best = 0;
      for (int c = 1; c <= m->cmax && c <= free_cores; c++)
        if (eta[c] > 0 && vr_af_rmax(m, c, cfg->slo_ms, NULL) > 0 && (!best || eta[c] > eta[best]))
          best = c;
      if (!best) break; /* no room, or nothing meets the SLO */
      out->create_cores[out->ncreate++] = best;
      free_cores -= best;
      rmax += vr_af_rmax(m, best, cfg->slo_ms, NULL);
    }
    return;
  }
  if (r >= cfg->beta * rmax) return;
  /* Scale in: least efficient first (eta at its own best batch). */
  int order[256], n = nbody < 256 ? nbody : 256;
  double e[256];
  for (int i = 0; i < n; i++) {
    int b;
    double q = vr_af_rmax(m, cores[i], cfg->slo_ms, &b);
    e[i] = q > 0 ? vr_af_eta(m, cores[i], m->mem_bytes, b, b * 1000.0 / q) : 0;
    order[i] = i;
  }
  for (int i = 1; i < n; i++)
    for (int k = i; k > 0 && e[order[k]] < e[order[k - 1]]; k--) {
      int t = order[k];
      order[k] = order[k - 1];
      order[k - 1] = t;
    }
  for (int k = 0; k < n && out->ndestroy < 64 && r < cfg->beta * rmax; k++) {
    double left = rmax - body_rmax(m, cfg->slo_ms, cores, rmax_each, order[k]);
    if ((cfg->scale_in_guard && r > cfg->alpha * left) || (left <= 0 && r > 0)) continue;
    out->destroy[out->ndestroy++] = order[k];
    rmax = left;
  }
}

/* ---- LLS ----------------------------------------------------------------- */

double vr_af_increase_ms(const vr_af_model *m, int i) {
  const vr_af_block *bk = &m->blk[i];
  return bk->lat_ms[0][m->bmax - 1] - bk->lat_ms[0][0];
}

/* Candidate blocks L: sensitive enough (the ratio: latency grows with the
 * batch at all), small enough; ranked by the paper's resource sensitivity,
 * the latency increase in ms (§2.2, Fig. 2-3), largest first. */
static int lls_candidates(const vr_af_model *m, const vr_af_scale_cfg *cfg, int *L) {
  int n = 0;
  double inc[VR_AF_MAXBLK];
  for (int i = 0; i < m->nblocks; i++) {
    const vr_af_block *bk = &m->blk[i];
    inc[i] = vr_af_increase_ms(m, i);
    if (bk->sensitivity < cfg->min_sens) continue;
    if ((double)bk->mem_bytes > cfg->max_mem_frac * (double)m->mem_bytes) continue;
    L[n++] = i;
  }
  for (int i = 1; i < n; i++)
    for (int k = i; k > 0 && inc[L[k]] > inc[L[k - 1]]; k--) {
      int t = L[k];
      L[k] = L[k - 1];
      L[k - 1] = t;
    }
  return n;
}

/* Algorithm 2 lines 6-18 for one body: the best shadow, or 0. */
static int lls_one(const vr_af_model *m, const vr_af_scale_cfg *cfg, const vr_af_body *bd,
                   int c, const int *L, int nl, vr_af_pair *best) {
  double eta_max = 0;
  uint32_t phi = 0;
  for (int k = 0; k < nl; k++) {
    phi |= 1u << L[k];
    int64_t mphi = vr_af_mask_mem(m, phi);
    double tload = vr_af_mask_load_ms(m, phi);
    for (int b = m->bmax; b >= 1; b--) {
      vr_af_pair p = {bd->cores, c, b, 0, 0, phi};
      vr_af_split(m, &p);
      double tl = vr_af_pair_lat(m, &p);
      if (tload + tl > cfg->slo_ms) continue;
      double eta = vr_af_eta(m, bd->cores + c, m->mem_bytes + mphi, b, tl);
      if (eta > eta_max) eta_max = eta, *best = p;
      break;
    }
  }
  return eta_max > 0;
}

void vr_af_lls(const vr_af_model *m, const vr_af_scale_cfg *cfg, int qlen,
               const vr_af_body *bodies, int nbody, vr_af_lls_out *out) {
  out->n = 0;
  if (qlen < cfg->gamma || cfg->kappa <= 0) return;
  int L[VR_AF_MAXBLK], nl = lls_candidates(m, cfg, L);
  if (!nl) return;
  /* bodies by earliest idle, unpaired only */
  int order[256], n = 0;
  for (int i = 0; i < nbody && n < 256; i++)
    if (!bodies[i].paired) order[n++] = i;
  for (int i = 1; i < n; i++)
    for (int k = i; k > 0 && bodies[order[k]].idle_at_ms < bodies[order[k - 1]].idle_at_ms; k--) {
      int t = order[k];
      order[k] = order[k - 1];
      order[k - 1] = t;
    }
  int quarter = m->cmax / 4 > 0 ? m->cmax / 4 : 1, half = m->cmax / 2 > 0 ? m->cmax / 2 : 1;
  int cap = (int)(sizeof out->body / sizeof out->body[0]);
  for (int k = 0; k < n && out->n < cfg->kappa && out->n < cap; k++) {
    const vr_af_body *bd = &bodies[order[k]];
    if (bd->free_cores < quarter) continue;
    int c = bd->free_cores < half ? bd->free_cores : half;
    vr_af_pair p;
    if (!lls_one(m, cfg, bd, c, L, nl, &p)) continue;
    out->body[out->n] = order[k];
    out->pair[out->n++] = p;
  }
}

/* ---- scheduler ----------------------------------------------------------- */

static int cand_cores(const vr_af_cand *c) { return c->cfg.cb + (c->cfg.cs > 0 ? c->cfg.cs : 0); }

/* Latency of candidate c on b rows (a pair re-splits for b). */
static double cand_lat(const vr_af_model *m, const vr_af_cand *c, int b) {
  vr_af_pair p = c->cfg;
  p.b = b;
  if (p.cs > 0 && p.mask) vr_af_split(m, &p);
  return vr_af_pair_lat(m, &p);
}

/* The most rows (<= limit) candidate c can take with the oldest of them
 * having waited `wait` and still finishing within the SLO; 0 if none. */
static int fit_rows(const vr_af_model *m, const vr_af_cand *c, double slo_ms, double wait,
                    int limit) {
  for (int b = limit < c->cfg.b ? limit : c->cfg.b; b >= 1; b--)
    if (wait + cand_lat(m, c, b) <= slo_ms) return b;
  return 0;
}

int vr_af_schedule(const vr_af_model *m, double slo_ms, const vr_af_cand *c, int n,
                   const double *waits, int qlen, int *b, int *drop) {
  *b = *drop = 0;
  if (n <= 0 || qlen <= 0) return -1;
  int best = -1, best_b = 0;
  double best_tpc = 0;
  for (int i = 0; i < n; i++) {
    int bi = fit_rows(m, &c[i], slo_ms, waits[0], qlen);
    if (bi < 1) continue;
    double tpc = bi / (cand_lat(m, &c[i], bi) * cand_cores(&c[i]));
    if (tpc > best_tpc) best_tpc = tpc, best = i, best_b = bi;
  }
  if (best >= 0) {
    *b = best_b;
    return best;
  }
  /* Nobody makes it for the oldest: the largest instance takes the oldest
   * requests that still can; older ones than those are dropped. */
  for (int i = 0; i < n; i++)
    if (best < 0 || cand_cores(&c[i]) > cand_cores(&c[best])) best = i;
  int d = 0;
  while (d < qlen && !(*b = fit_rows(m, &c[best], slo_ms, waits[d], qlen - d))) d++;
  *drop = d;
  return best;
}

int vr_af_schedule_paper(const vr_af_model *m, double slo_ms, const vr_af_cand *c, int n,
                         const double *waits, int qlen, int *b, int *drop) {
  *b = *drop = 0;
  if (n <= 0 || qlen <= 0) return -1;
  /* ascending cores without sorting: the fewest cores first, ties by index */
  int first = -1, first_b = 0, largest = 0;
  for (int i = 0; i < n; i++) {
    int rows = qlen < c[i].cfg.b ? qlen : c[i].cfg.b;
    int ci = cand_cores(&c[i]);
    if (ci >= cand_cores(&c[largest])) largest = i;
    if (rows < 1 || waits[0] + cand_lat(m, &c[i], rows) > slo_ms) continue;
    if (first < 0 || ci < cand_cores(&c[first])) first = i, first_b = rows;
  }
  if (first >= 0) {
    *b = first_b;
    return first;
  }
  /* the latest requests the largest can serve; the rest is dropped */
  int cap = qlen < c[largest].cfg.b ? qlen : c[largest].cfg.b;
  int k = cap;
  while (k >= 1 && waits[qlen - k] + cand_lat(m, &c[largest], k) > slo_ms) k--;
  *b = k;
  *drop = qlen - k;
  return largest;
}

/* ---- BATCH --------------------------------------------------------------- */

double vr_af_batch_cfg_obj(const vr_af_model *m, double slo_ms, vr_af_batch_obj obj, int *cores,
                           int *b) {
  *cores = *b = 0;
  /* a whole-model instance's memory in core units: rho m = 1 (vr_af_eta) */
  double mem_units = obj == VR_AF_BATCH_COST ? 1.0 : 0.0;
  /* 2 t <= slo when some configuration allows it, else t <= slo */
  for (int pass = 0; pass < 2 && !*cores; pass++) {
    double best = 0, k_slo = pass ? 1 : 2;
    for (int c = 1; c <= m->cmax; c++)
      for (int k = 1; k <= m->bmax; k++) {
        double t = vr_af_lat(m, VR_AF_ALL(m), c, k);
        if (t <= 0 || k_slo * t > slo_ms) continue;
        double per_unit = k / (t * (c + mem_units)); /* 1 / cost per request */
        if (per_unit > best) best = per_unit, *cores = c, *b = k;
      }
  }
  return *cores ? *b * 1000.0 / vr_af_lat(m, VR_AF_ALL(m), *cores, *b) : 0;
}

double vr_af_batch_cfg(const vr_af_model *m, double slo_ms, int *cores, int *b) {
  return vr_af_batch_cfg_obj(m, slo_ms, VR_AF_BATCH_COST, cores, b);
}
