/*
 * AsyFunc (SoCC'23): body instances hold a whole model for the steady load;
 * at a burst a body is paired with a shadow that holds only the layer
 * blocks most sensitive to CPU, and the two run those blocks on split rows.
 *
 * This header holds the measured facts of a model's layer blocks (the
 * ⟨c, b, l, p, d⟩ tuples of the paper's Profiler, plus sensitivity, load
 * time and resident memory) and the decisions made from them:
 *  - block grouping (Extractor/Profiler): adjacent nodes of similar
 *    sensitivity merged into few blocks, cut only where one batch-major
 *    tensor crosses;
 *  - the paired-latency model (Eq. 3) and the b_B/b_S split;
 *  - model-level scaling (Algorithm 1, MLS), layer-level scaling
 *    (Algorithm 2, LLS), the scheduler (Algorithm 3) and the BATCH
 *    baseline's fixed configuration.
 * Everything here is pure: no I/O, no clock, no threads; times in ms,
 * rates in queries/s. The simulator (src/sim/asyfunc_sim.c) and the
 * profiler (src/control/blocks.c) call it.
 */
#ifndef VR_POLICY_ASYFUNC_H
#define VR_POLICY_ASYFUNC_H

#include <jansson.h>
#include <stdint.h>

#include "vario/status.h"

#define VR_AF_MAXC 16  /* cores 1..cmax profiled */
#define VR_AF_MAXB 8   /* batch 1..bmax profiled */
#define VR_AF_MAXBLK 16

typedef struct vr_af_block {
  int node_begin, node_end;           /* optimised-graph node range */
  double lat_ms[VR_AF_MAXC][VR_AF_MAXB]; /* [c-1][b-1]: l of the tuple */
  int64_t param_bytes;                /* p: fp32 weight bytes */
  int64_t in_bytes, out_bytes;        /* per sample; d = out_bytes */
  int64_t mem_bytes;                  /* resident bytes of this block alone */
  double sensitivity;                 /* lat(1, bmax) / lat(1, 1) */
  double load_ms;                     /* slice + session of this block alone */
} vr_af_block;

typedef struct vr_af_model {
  char name[64];
  int cmax, bmax, nblocks;
  double load_ms;           /* whole model: parse + optimise + session */
  int64_t mem_bytes;        /* a body's resident bytes (weights + arena) */
  double transfer_ms_per_mb; /* boundary hand-off (measured memcpy) */
  vr_af_block blk[VR_AF_MAXBLK];
} vr_af_model;

/* ---- block grouping ------------------------------------------------------ */

/* Groups n nodes into at most max_blocks blocks. sens[i] is node i's
 * sensitivity, cut[i] != 0 when a block may start at node i (cut[0] is
 * implied). Adjacent segments between cuts are merged, most similar
 * sensitivity first (|log s_a - log s_b|, segment sensitivity = time
 * weighted by ms[i]), until no pair is closer than tol or the count is at
 * most max_blocks. bounds[0..nb] get the block starts and n; returns nb
 * (>= 1) or VR_EINVAL. bounds must hold n + 1 ints. */
int vr_af_group(int n, const double *sens, const double *ms, const char *cut, int max_blocks,
                double tol, int *bounds);
/* The same, with bytes[i] = node i's weight bytes: two segments are not
 * merged for similarity when the block would hold more than max_bytes
 * (the Profiler's memory filter would then drop a block whose parts it
 * keeps: on a clean profile every convolution of resnet50 scales alike
 * and would become one block too heavy for any shadow); only to get down
 * to max_blocks may a merge pass the cap (the closest allowed pair first). */
int vr_af_group_capped(int n, const double *sens, const double *ms, const int64_t *bytes,
                       int64_t max_bytes, const char *cut, int max_blocks, double tol,
                       int *bounds);

/* ---- latency model ------------------------------------------------------- */

/* Blocks as a bit mask; VR_AF_ALL(m) = every block. */
#define VR_AF_ALL(m) ((uint32_t)((1u << (m)->nblocks) - 1u))

/* Latency of the blocks in mask on c cores at batch b (0 when b == 0). */
double vr_af_lat(const vr_af_model *m, uint32_t mask, int c, int b);
/* Resident bytes of one session holding the blocks in mask: their weights
 * plus the largest block's activation arena (mem_bytes - param_bytes). */
int64_t vr_af_mask_mem(const vr_af_model *m, uint32_t mask);
double vr_af_mask_load_ms(const vr_af_model *m, uint32_t mask);
/* Hand-off time of bs rows into and out of the blocks in mask. */
double vr_af_transfer_ms(const vr_af_model *m, uint32_t mask, int bs);

/* A paired configuration: body on cb cores, shadow on cs cores holding
 * mask; b rows split b_B + b_S on the parallel part. */
typedef struct vr_af_pair {
  int cb, cs, b, bb, bs;
  uint32_t mask;
} vr_af_pair;

/* Eq. (3): t_np + max(t_pB, t_pS + transfer). With cs == 0 or mask == 0,
 * the body alone. */
double vr_af_pair_lat(const vr_af_model *m, const vr_af_pair *p);
/* Chooses bb (bs = b - bb) so that both parallel parts finish together
 * (min |t_pB - t_pS|; ties to more rows on the body). */
void vr_af_split(const vr_af_model *m, vr_af_pair *p);

/* Largest b/t_l over b in 1..bmax with t_l <= slo: an instance's R_max
 * term (Eq. 1); *best_b gets that b (0 if none meets the SLO). */
double vr_af_rmax(const vr_af_model *m, int cores, double slo_ms, int *best_b);

/* The SLO the experiments use for a model: 1.5 x its latency at one core
 * and a full batch (the paper sets SLOs from latency at (C_max, B_max);
 * with the 2 cores profiled here that would leave no room to queue). */
double vr_af_default_slo(const vr_af_model *m);

/* ---- model-level scaling (Algorithm 1) ---------------------------------- */

typedef struct vr_af_scale_cfg {
  double alpha, beta; /* 0.8, 0.6 */
  double slo_ms;
  int gamma, kappa;   /* LLS: queue threshold 2, new shadows per decision 10 */
  double min_sens;    /* LLS candidates: blocks at least this sensitive */
  double max_mem_frac; /* LLS candidates: block memory <= this x a body's */
  /* MLS scale-in keeps a body whose removal would put r above alpha R_max
   * (1, default: no flapping); 0 = Algorithm 1 as written, destroy while
   * r < beta R_max */
  int scale_in_guard;
} vr_af_scale_cfg;

void vr_af_scale_cfg_init(vr_af_scale_cfg *c, double slo_ms);

/* Resource efficiency of an instance: b/(c t) + b/(rho m t), rho = 1 /
 * (a body's memory), so a body's memory counts as one unit. */
double vr_af_eta(const vr_af_model *m, int cores, int64_t mem, int b, double t_ms);

typedef struct vr_af_mls_out {
  int ncreate;
  int create_cores[64]; /* cores of each body to create */
  int ndestroy;
  int destroy[64];      /* indices into the bodies given */
} vr_af_mls_out;

/* One MLS decision for expected rate r_qps over bodies with cores[i]
 * (nbody of them). Scale out while r > alpha R_max with the most
 * efficient core count that fits free_cores (per Algorithm 1: for each c
 * the largest b with (b-1)/r + t_l <= slo); scale in the least efficient
 * bodies while r < beta R_max and, with cfg->scale_in_guard, removing one
 * keeps r <= alpha R_max (so the next period does not scale straight back
 * out); never the last body while r > 0. */
void vr_af_mls(const vr_af_model *m, const vr_af_scale_cfg *cfg, double r_qps,
               const int *cores, int nbody, int free_cores, vr_af_mls_out *out);
/* The same, with rmax[i] > 0 the R_max term of body i when it is paired
 * (vr_af_pair_rmax): Eq. (1) sums "all the Body Function instances paired
 * with Shadow Function instances or not". rmax may be NULL (no pairs). */
void vr_af_mls_paired(const vr_af_model *m, const vr_af_scale_cfg *cfg, double r_qps,
                      const int *cores, const double *rmax, int nbody, int free_cores,
                      vr_af_mls_out *out);
/* A pair's R_max term: the largest b/t_l over b in 1..bmax (rows re-split
 * per b) with t_l <= slo; qps. */
double vr_af_pair_rmax(const vr_af_model *m, const vr_af_pair *p, double slo_ms);

/* ---- layer-level scaling (Algorithm 2) ---------------------------------- */

typedef struct vr_af_body {
  int cores;
  double idle_at_ms; /* when it becomes idle (<= now: idle) */
  int free_cores;    /* free cores on its node */
  int paired;        /* already has a shadow */
} vr_af_body;

typedef struct vr_af_lls_out {
  int n;
  int body[VR_AF_MAXBLK * 4];   /* index into bodies */
  vr_af_pair pair[VR_AF_MAXBLK * 4];
} vr_af_lls_out;

/* A block's resource sensitivity as the paper measures it (§2.2, Fig. 2
 * and 3): the latency its rows add as the batch grows, lat(1 core, B_max)
 * - lat(1 core, 1), in ms. (vr_af_block.sensitivity is the ratio of the
 * two, used to group nodes and to filter flat blocks.) */
double vr_af_increase_ms(const vr_af_model *m, int i);

/* On an arrival: when qlen >= gamma, pairs unpaired bodies (earliest idle
 * first) with shadows, at most kappa new ones per decision (Algorithm 2:
 * "until the number of newly provisioned Shadow Functions exceeds kappa";
 * in all, at most one per body). Per body: shadow cores c = min(free,
 * cmax/2) if free >= cmax/4 (at least 1); candidate blocks added by
 * descending latency increase (vr_af_increase_ms); for each prefix the
 * largest b whose t_load + t_l meets the SLO; the most efficient (eta)
 * prefix wins. */
void vr_af_lls(const vr_af_model *m, const vr_af_scale_cfg *cfg, int qlen,
               const vr_af_body *bodies, int nbody, vr_af_lls_out *out);

/* ---- scheduler (Algorithm 3) --------------------------------------------- */

typedef struct vr_af_cand {
  vr_af_pair cfg; /* cs == 0: a body alone; cfg.b = its batch cap */
} vr_af_cand;

/* Among idle candidates, the one with the best throughput per core on the
 * most rows it can take (up to its cap and qlen) with the oldest request
 * (waits[0], its wait so far) still meeting the SLO: returns its index and
 * *b those rows. None can: the candidate with the most cores takes the
 * oldest requests it still can, and *drop = the older ones before them,
 * which cannot make it anywhere (waits[] oldest first). -1 when there is
 * no candidate. */
int vr_af_schedule(const vr_af_model *m, double slo_ms, const vr_af_cand *c, int n,
                   const double *waits, int qlen, int *b, int *drop);
/* Algorithm 3 as the paper writes it (`vario asyfunc --paper-scheduler`):
 * idle candidates in ascending order of cores (ties: by index); the first
 * on which the whole queue, up to its cap, finishes within the SLO for
 * the oldest request (waits[0] + t_l <= slo) takes it ("schedule Q to x_i
 * and clear Q"). None does: the candidate with the most cores (the
 * largest i) takes the latest requests it can serve within the SLO and
 * *drop = every request before them (the paper clears Q), so the caller
 * must pass the whole queue. -1 when there is no candidate. */
int vr_af_schedule_paper(const vr_af_model *m, double slo_ms, const vr_af_cand *c, int n,
                         const double *waits, int qlen, int *b, int *drop);

/* ---- live bodies (policy/asyfunc_tick.c) -------------------------------- */

/* The node range a body keeps splittable, [*pb, *pe): the blocks LLS picks
 * for one idle body of body_cores with shadow_cores free, widened to the
 * contiguous run of blocks that covers them (a live pair shares one
 * range); *mask gets those blocks. VR_ENOENT when LLS picks none. */
int vr_af_body_range(const vr_af_model *m, const vr_af_scale_cfg *cfg, int body_cores,
                     int shadow_cores, int *pb, int *pe, uint32_t *mask);
/* split[b] = the shadow's rows b_S of a batch of b (vr_af_split), for b =
 * 0..max_batch (split holds max_batch + 1 ints). */
void vr_af_split_table(const vr_af_model *m, uint32_t mask, int body_cores, int shadow_cores,
                       int max_batch, int *split);

/* ---- BATCH baseline ------------------------------------------------------ */

/* What BATCH's offline choice minimises per request served:
 *  - VR_AF_BATCH_COST (default): the resources an instance holds for the
 *    batch, (c + rho m) t / b, rho m = 1 for a whole-model instance — the
 *    objective of the paper's Eq. (2) per request, and BATCH's own (Ali et
 *    al., SC'20: the cost per request of a serverless bill, which charges
 *    the memory an instance holds for its run, CPU in proportion);
 *  - VR_AF_BATCH_CORES: c t / b only (throughput per core; the model's
 *    memory is free), what this repository used before: BATCH then
 *    optimises CPU while MLS optimises CPU + memory. */
typedef enum { VR_AF_BATCH_COST = 0, VR_AF_BATCH_CORES = 1 } vr_af_batch_obj;

/* BATCH's offline configuration: cores and batch minimising obj's cost
 * per request with 2 t_l <= slo (a query may wait for the batch in
 * service), or with t_l <= slo when nothing allows that. Returns that
 * configuration's throughput per instance (0 if nothing meets the SLO:
 * *cores = *b = 0). vr_af_batch_cfg: VR_AF_BATCH_COST. */
double vr_af_batch_cfg_obj(const vr_af_model *m, double slo_ms, vr_af_batch_obj obj, int *cores,
                           int *b);
double vr_af_batch_cfg(const vr_af_model *m, double slo_ms, int *cores, int *b);

/* ---- JSON (docs/API.md, "AsyFunc block profile") ----------------------- */

json_t *vr_af_model_to_json(const vr_af_model *m);
/* 0, or VR_EINVAL/VR_ERANGE with a message naming the field. */
int vr_af_model_from_json(const json_t *j, vr_af_model *m, vr_errbuf *err);

#endif
