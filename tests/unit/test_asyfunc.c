/* AsyFunc: block grouping on a hand-made graph, the paired-latency model,
 * MLS / LLS / scheduler decisions on hand-computed cases, the block
 * profile JSON, the simulator's accounting, and the real-engine profiler
 * on a small model. */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "control/blocks.h"
#include "engine_util.h"
#include "policy/asyfunc.h"
#include "policy/policy.h"
#include "sim/asyfunc_sim.h"
#include "vr_test.h"

/* Six nodes: sensitive, sensitive, flat, flat, sensitive, sensitive. */
static void test_group_hand_made(void **st) {
  double sens[6] = {4, 4, 1, 1, 4, 4}, ms[6] = {1, 1, 1, 1, 1, 1};
  char cut[6] = {1, 1, 1, 1, 1, 1};
  int b[7];
  assert_int_equal(vr_af_group(6, sens, ms, cut, 8, 0.15, b), 3);
  assert_int_equal(b[0], 0);
  assert_int_equal(b[1], 2);
  assert_int_equal(b[2], 4);
  assert_int_equal(b[3], 6);
  /* at most two blocks: the first pair of equally distant segments merges */
  assert_int_equal(vr_af_group(6, sens, ms, cut, 2, 0.15, b), 2);
  assert_int_equal(b[1], 4);
  /* no cut at nodes 4 and 5: nodes 3..5 are one segment (time-weighted
   * sensitivity 3), far from node 2's 1: blocks start only at cuts */
  cut[4] = cut[5] = 0;
  assert_int_equal(vr_af_group(6, sens, ms, cut, 8, 0.15, b), 3);
  assert_int_equal(b[1], 2);
  assert_int_equal(b[2], 3);
  /* a loose tolerance merges everything */
  assert_int_equal(vr_af_group(6, sens, ms, cut, 8, 10, b), 1);
  assert_int_equal(vr_af_group(0, sens, ms, cut, 8, 0.15, b), VR_EINVAL);
  /* alike nodes with weights 10 x 5 and 50: one block without a cap;
   * capped at 50 bytes, nodes 0..4 (50) and node 5 stay apart */
  double same[6] = {4, 4, 4, 4, 4, 4};
  int64_t w[6] = {10, 10, 10, 10, 10, 50};
  memset(cut, 1, sizeof cut);
  assert_int_equal(vr_af_group(6, same, ms, cut, 8, 0.15, b), 1);
  assert_int_equal(vr_af_group_capped(6, same, ms, w, 50, cut, 8, 0.15, b), 2);
  assert_int_equal(b[1], 5);
  assert_int_equal(b[2], 6);
  /* at most one block: the cap gives way */
  assert_int_equal(vr_af_group_capped(6, same, ms, w, 50, cut, 1, 0.15, b), 1);
}

/* Block 0: flat 2 ms, 1 MB; block 1: 10 ms per row on 1 core, 6 on 2,
 * sensitive, 1 MB; whole-model memory 10 MB. */
static void two_blocks(vr_af_model *m) {
  memset(m, 0, sizeof *m);
  snprintf(m->name, sizeof m->name, "hand");
  m->cmax = 2;
  m->bmax = 4;
  m->nblocks = 2;
  m->mem_bytes = 10000000;
  m->load_ms = 1000;
  for (int b = 0; b < 4; b++) {
    m->blk[0].lat_ms[0][b] = m->blk[0].lat_ms[1][b] = 2;
    m->blk[1].lat_ms[0][b] = 10.0 * (b + 1);
    m->blk[1].lat_ms[1][b] = 6.0 * (b + 1);
  }
  m->blk[0] = (vr_af_block){0, 3, {{0}}, 800000, 100, 200, 1000000, 1.0, 50};
  for (int b = 0; b < 4; b++) m->blk[0].lat_ms[0][b] = m->blk[0].lat_ms[1][b] = 2;
  m->blk[1].node_begin = 3;
  m->blk[1].node_end = 5;
  m->blk[1].param_bytes = 500000;
  m->blk[1].in_bytes = 200;
  m->blk[1].out_bytes = 40;
  m->blk[1].mem_bytes = 1000000;
  m->blk[1].sensitivity = 4;
  m->blk[1].load_ms = 5;
}

static void test_latency_model(void **st) {
  vr_af_model m;
  two_blocks(&m);
  assert_true(fabs(vr_af_lat(&m, VR_AF_ALL(&m), 1, 4) - 42) < 1e-9);
  assert_true(fabs(vr_af_lat(&m, 2, 2, 3) - 18) < 1e-9);
  /* weights add, the arena is the larger one: 0.8 + 0.5 + max(0.2, 0.5) MB */
  assert_int_equal(vr_af_mask_mem(&m, 3), 1800000);
  vr_af_pair p = {1, 1, 4, 0, 0, 2};
  vr_af_split(&m, &p);
  assert_int_equal(p.bb, 2);
  assert_int_equal(p.bs, 2);
  assert_true(fabs(vr_af_pair_lat(&m, &p) - 22) < 1e-9); /* 2 + max(20, 20) */
  /* shadow on 2 cores: 10 bb vs 6 (4 - bb): bb = 2 -> |20 - 12| = 8 is the
   * closest (bb = 1: |10 - 18| = 8 too; ties go to more rows on the body) */
  p = (vr_af_pair){1, 2, 4, 0, 0, 2};
  vr_af_split(&m, &p);
  assert_int_equal(p.bb, 2);
  /* a transfer cost of 1 ms per MB: 2 rows x 240 B, negligible but counted */
  m.transfer_ms_per_mb = 1000;
  assert_true(fabs(vr_af_transfer_ms(&m, 2, 2) - 0.48) < 1e-9);
  int bb;
  /* R_max of a 1-core body at SLO 50: b/t = b/(2 + 10b) is best at b = 4 */
  assert_true(fabs(vr_af_rmax(&m, 1, 50, &bb) - 4000.0 / 42) < 1e-6);
  assert_int_equal(bb, 4);
  assert_true(vr_af_rmax(&m, 1, 1, &bb) == 0 && bb == 0);
}

/* One block, 10 ms per row on 1 core, 6 on 2: hand-computed MLS. */
static void linear_model(vr_af_model *m) {
  memset(m, 0, sizeof *m);
  snprintf(m->name, sizeof m->name, "lin");
  m->cmax = 2;
  m->bmax = 4;
  m->nblocks = 1;
  m->mem_bytes = 1000;
  m->blk[0].node_end = 1;
  for (int b = 0; b < 4; b++) {
    m->blk[0].lat_ms[0][b] = 10.0 * (b + 1);
    m->blk[0].lat_ms[1][b] = 6.0 * (b + 1);
  }
}

static void test_mls(void **st) {
  vr_af_model m;
  linear_model(&m);
  vr_af_scale_cfg cfg;
  vr_af_scale_cfg_init(&cfg, 50);
  vr_af_mls_out o;
  /* R = 250: c = 1 fits b = 3 (8 + 30 = 38 ms <= 50) with eta 200; c = 2
   * fits b = 4 (12 + 24 = 36) with eta 4/(2 x 0.024) + 4/0.024 = 250: two
   * 2-core bodies (R_max 333 > 250 / 0.8). */
  vr_af_mls(&m, &cfg, 250, NULL, 0, 100, &o);
  assert_int_equal(o.ncreate, 2);
  assert_int_equal(o.create_cores[0], 2);
  assert_int_equal(o.create_cores[1], 2);
  assert_int_equal(o.ndestroy, 0);
  /* only 3 free cores: a 2-core body, then a 1-core one, then no room */
  vr_af_mls(&m, &cfg, 250, NULL, 0, 3, &o);
  assert_int_equal(o.ncreate, 2);
  assert_int_equal(o.create_cores[1], 1);
  /* inside [beta, alpha] x R_max: nothing */
  int three[3] = {2, 2, 2};
  vr_af_mls(&m, &cfg, 350, three, 3, 100, &o);
  assert_int_equal(o.ncreate + o.ndestroy, 0);
  /* R = 50 over 500 qps: two go, the last stays (R > 0) */
  vr_af_mls(&m, &cfg, 50, three, 3, 100, &o);
  assert_int_equal(o.ndestroy, 2);
  /* R = 250 over 500: below beta (300); one fewer leaves 333 and
   * 250 <= 0.8 x 333 = 267: one goes, then 250 >= beta x 333 = 200 */
  vr_af_mls(&m, &cfg, 250, three, 3, 100, &o);
  assert_int_equal(o.ndestroy, 1);
  /* R = 280 over 500: below beta, but one fewer (333) would put it above
   * alpha (267): keep all, no flapping */
  vr_af_mls(&m, &cfg, 280, three, 3, 100, &o);
  assert_int_equal(o.ndestroy, 0);
  /* Algorithm 1 as written: one goes (280 >= beta x 333 = 200 after) */
  cfg.scale_in_guard = 0;
  vr_af_mls(&m, &cfg, 280, three, 3, 100, &o);
  assert_int_equal(o.ndestroy, 1);
  cfg.scale_in_guard = 1;
  /* Eq. (1) with pairs: R = 350 over one 2-core body (167 qps) with a pair
   * term of 300 qps: 0.8 x 300 = 240 < 350, one more 2-core body (467:
   * 373 >= 350); counted alone (167) it would take two more */
  int one[1] = {2};
  double pr[1] = {300};
  vr_af_mls_paired(&m, &cfg, 350, one, pr, 1, 100, &o);
  assert_int_equal(o.ncreate, 1);
  vr_af_mls_paired(&m, &cfg, 350, one, NULL, 1, 100, &o);
  assert_int_equal(o.ncreate, 2);
}

/* A pair's R_max term (Eq. 1): two_blocks, body and shadow on 1 core, the
 * sensitive block split: b = 4 -> 2 + max(10 x 2, 10 x 2) = 22 ms, 182
 * qps; alone 4 / 42 ms = 95 qps. */
static void test_pair_rmax(void **st) {
  vr_af_model m;
  two_blocks(&m);
  vr_af_pair p = {1, 1, 4, 2, 2, 2};
  assert_true(fabs(vr_af_pair_rmax(&m, &p, 50) - 4000.0 / 22) < 1e-6);
  /* SLO 15 ms: b = 2 (2 + 10 = 12 ms, 167 qps) is the most that fits */
  assert_true(fabs(vr_af_pair_rmax(&m, &p, 15) - 2000.0 / 12) < 1e-6);
  p.cs = 0; /* unpaired: the body's own */
  assert_true(fabs(vr_af_pair_rmax(&m, &p, 50) - vr_af_rmax(&m, 1, 50, NULL)) < 1e-9);
}

static void test_lls(void **st) {
  vr_af_model m;
  two_blocks(&m);
  vr_af_scale_cfg cfg;
  vr_af_scale_cfg_init(&cfg, 50);
  vr_af_body bodies[3] = {{1, 30, 4, 0}, {1, 10, 4, 0}, {1, 5, 0, 0}};
  vr_af_lls_out o;
  vr_af_lls(&m, &cfg, 1, bodies, 3, &o); /* queue below gamma */
  assert_int_equal(o.n, 0);
  /* Block 0 is flat (sensitivity 1 < 1.2): the shadow holds block 1 only.
   * Body 2 (idle first) has no free core; body 1 (idle at 10) comes next,
   * then body 0. b = 4 split 2 + 2: t_l = 2 + 20 = 22, + 5 ms load <= 50. */
  vr_af_lls(&m, &cfg, 2, bodies, 3, &o);
  assert_int_equal(o.n, 2);
  assert_int_equal(o.body[0], 1);
  assert_int_equal(o.body[1], 0);
  assert_int_equal(o.pair[0].mask, 2);
  assert_int_equal(o.pair[0].cs, 1);
  assert_int_equal(o.pair[0].b, 4);
  assert_int_equal(o.pair[0].bb, 2);
  /* kappa bounds the new shadows of one decision: 1, the earliest idle */
  cfg.kappa = 1;
  vr_af_lls(&m, &cfg, 2, bodies, 3, &o);
  assert_int_equal(o.n, 1);
  assert_int_equal(o.body[0], 1);
  cfg.kappa = 0;
  vr_af_lls(&m, &cfg, 2, bodies, 3, &o);
  assert_int_equal(o.n, 0);
  cfg.kappa = 10;
  /* paired bodies are skipped */
  bodies[0].paired = bodies[1].paired = 1;
  vr_af_lls(&m, &cfg, 2, bodies, 3, &o);
  assert_int_equal(o.n, 0);
  /* an SLO the load time alone breaks: 5 ms load + 2 + 10 > 15 at b = 1 */
  bodies[0].paired = 0;
  cfg.slo_ms = 15;
  vr_af_lls(&m, &cfg, 2, bodies, 3, &o);
  assert_int_equal(o.n, 0);
}

/* LLS adds blocks by the paper's sensitivity, the latency increase in ms
 * (not the ratio): block 1 adds 15 ms from b = 1 to 4 (ratio 2.5), block 0
 * 3 ms (ratio 4). Block 0's 100 ms load breaks the 60 ms SLO, so only a
 * prefix that starts with block 1 can be provisioned: {1}, t_l = 6 + 15
 * (split 2 + 2) + 1 ms load. Ranked by the ratio, the first prefix would
 * be {0} and no shadow would fit. */
static void test_lls_rank(void **st) {
  (void)st;
  vr_af_model m;
  memset(&m, 0, sizeof m);
  m.cmax = 2;
  m.bmax = 4;
  m.nblocks = 3;
  m.mem_bytes = 10000000;
  m.load_ms = 1000;
  for (int b = 0; b < 4; b++) {
    m.blk[0].lat_ms[0][b] = b + 1.0;
    m.blk[0].lat_ms[1][b] = (b + 1.0) / 2;
    m.blk[1].lat_ms[0][b] = 10.0 + 5 * b;
    m.blk[1].lat_ms[1][b] = 6.0 + 3 * b;
    m.blk[2].lat_ms[0][b] = m.blk[2].lat_ms[1][b] = 2;
  }
  for (int i = 0; i < 3; i++) {
    m.blk[i].node_begin = i;
    m.blk[i].node_end = i + 1;
    m.blk[i].param_bytes = 100000;
    m.blk[i].mem_bytes = 1000000;
    m.blk[i].in_bytes = m.blk[i].out_bytes = 100;
  }
  m.blk[0].sensitivity = 4;
  m.blk[0].load_ms = 100;
  m.blk[1].sensitivity = 2.5;
  m.blk[1].load_ms = 1;
  m.blk[2].sensitivity = 1;
  m.blk[2].load_ms = 1;
  assert_true(fabs(vr_af_increase_ms(&m, 1) - 15) < 1e-9);
  assert_true(fabs(vr_af_increase_ms(&m, 0) - 3) < 1e-9);
  vr_af_scale_cfg cfg;
  vr_af_scale_cfg_init(&cfg, 60);
  vr_af_body body = {1, 0, 2, 0};
  vr_af_lls_out o;
  vr_af_lls(&m, &cfg, 2, &body, 1, &o);
  assert_int_equal(o.n, 1);
  assert_int_equal(o.pair[0].mask, 2);
  assert_int_equal(o.pair[0].b, 4);
  assert_int_equal(o.pair[0].bs, 2);
}

static void test_schedule(void **st) {
  vr_af_model m;
  two_blocks(&m);
  vr_af_cand c[2] = {{{1, 0, 4, 4, 0, 0}}, {{1, 1, 4, 2, 2, 2}}};
  double waits[4] = {10, 5, 1, 0};
  int b, drop;
  /* oldest waited 10: the body alone fits 3 rows (10 + 32 <= 50, 3 per
   * 32 ms on 1 core), the pair 4 (10 + 22, 4 per 22 ms on 2): the body */
  assert_int_equal(vr_af_schedule(&m, 50, c, 2, waits, 4, &b, &drop), 0);
  assert_int_equal(b, 3);
  assert_int_equal(drop, 0);
  /* oldest waited 20: the body fits 2 rows (2 per 22 ms), the pair 4 (4
   * per 2 x 22 ms): equal per core, the first wins */
  waits[0] = 20;
  assert_int_equal(vr_af_schedule(&m, 50, c, 2, waits, 4, &b, &drop), 0);
  assert_int_equal(b, 2);
  /* a body capped at 1 row (1 per 12 ms) loses to the pair */
  c[0].cfg.b = 1;
  assert_int_equal(vr_af_schedule(&m, 50, c, 2, waits, 4, &b, &drop), 1);
  assert_int_equal(b, 4);
  c[0].cfg.b = 4;
  waits[0] = 10;
  /* nobody makes it for the two oldest: they are dropped, the pair (most
   * cores) takes the two that still can (1 + 12 and 0 + 12 <= 13) */
  double late[4] = {40, 30, 1, 0};
  assert_int_equal(vr_af_schedule(&m, 13, c, 2, late, 4, &b, &drop), 1);
  assert_int_equal(drop, 2);
  assert_int_equal(b, 2);
  assert_int_equal(vr_af_schedule(&m, 50, c, 0, waits, 3, &b, &drop), -1);
  /* BATCH by cores per request, 2 t <= 50: 1 core, b = 2 (2 per 22 ms)
   * beats 1 core b = 1 (1 / 12) and 2 cores b = 3 (3 / (2 x 20)) */
  int cores, bb;
  assert_true(vr_af_batch_cfg_obj(&m, 50, VR_AF_BATCH_CORES, &cores, &bb) > 0);
  assert_int_equal(cores, 1);
  assert_int_equal(bb, 2);
  /* by (cores + rho m) per request, a body's memory = 1 core: 2 cores,
   * b = 3 (3 / (3 x 20) = 0.050) beats 1 core b = 2 (2 / (2 x 22) =
   * 0.045) and 2 cores b = 2 (2 / (3 x 14) = 0.048); b = 4 (26 ms) is
   * past 2 t <= 50. The default is this one. */
  assert_true(fabs(vr_af_batch_cfg(&m, 50, &cores, &bb) - 3000.0 / 20) < 1e-9);
  assert_int_equal(cores, 2);
  assert_int_equal(bb, 3);
  assert_true(vr_af_batch_cfg_obj(&m, 50, VR_AF_BATCH_COST, &cores, &bb) > 0);
  assert_int_equal(cores, 2);
  /* nothing meets a 5 ms SLO */
  assert_true(vr_af_batch_cfg(&m, 5, &cores, &bb) == 0 && cores == 0 && bb == 0);
}

/* Algorithm 3 as written: t(1 core, b) = 2 + 10 b, t(2 cores, b) = 2 + 6 b
 * (two_blocks), SLO 50. */
static void test_schedule_paper(void **st) {
  vr_af_model m;
  two_blocks(&m);
  vr_af_cand c[2] = {{{2, 0, 4, 4, 0, 0}}, {{1, 0, 4, 4, 0, 0}}};
  double waits[4] = {10, 5, 1, 0};
  int b, drop;
  /* fewest cores first, the whole queue: 1 core misses (10 + 42 > 50), 2
   * cores make it (10 + 26). The default picks the 1-core body's 3 rows
   * (3 per 32 ms a core beats 4 per 2 x 26 ms). */
  assert_int_equal(vr_af_schedule_paper(&m, 50, c, 2, waits, 4, &b, &drop), 0);
  assert_int_equal(b, 4);
  assert_int_equal(drop, 0);
  assert_int_equal(vr_af_schedule(&m, 50, c, 2, waits, 4, &b, &drop), 1);
  assert_int_equal(b, 3);
  /* oldest waited 5: the 1-core body takes all four (5 + 42 <= 50) */
  waits[0] = 5;
  assert_int_equal(vr_af_schedule_paper(&m, 50, c, 2, waits, 4, &b, &drop), 1);
  assert_int_equal(b, 4);
  /* a queue longer than the cap: the cap's rows, the rest stays */
  double six[6] = {5, 4, 3, 2, 1, 0};
  assert_int_equal(vr_af_schedule_paper(&m, 50, c, 2, six, 6, &b, &drop), 1);
  assert_int_equal(b, 4);
  assert_int_equal(drop, 0);
  /* nobody makes it (SLO 13): the most cores take the latest requests they
   * can (1 row: 0 + 8; 2 rows: 1 + 14 > 13) and the three before are
   * dropped; the default drops only the two that cannot make it anywhere */
  double late[4] = {40, 30, 1, 0};
  assert_int_equal(vr_af_schedule_paper(&m, 13, c, 2, late, 4, &b, &drop), 0);
  assert_int_equal(b, 1);
  assert_int_equal(drop, 3);
  assert_int_equal(vr_af_schedule(&m, 13, c, 2, late, 4, &b, &drop), 0);
  assert_int_equal(drop, 2);
  assert_int_equal(b, 1);
  /* equal cores: the first fits first; the last is the "largest i" */
  c[0].cfg.cb = 1;
  assert_int_equal(vr_af_schedule_paper(&m, 50, c, 2, waits, 4, &b, &drop), 0);
  assert_int_equal(vr_af_schedule_paper(&m, 13, c, 2, late, 4, &b, &drop), 1);
  /* even the newest cannot make it alone: all dropped */
  double stale[2] = {40, 30};
  assert_int_equal(vr_af_schedule_paper(&m, 13, c, 2, stale, 2, &b, &drop), 1);
  assert_int_equal(b, 0);
  assert_int_equal(drop, 2);
  assert_int_equal(vr_af_schedule_paper(&m, 50, c, 0, waits, 4, &b, &drop), -1);
}

static void test_json(void **st) {
  vr_af_model m, k;
  two_blocks(&m);
  m.transfer_ms_per_mb = 0.25;
  json_t *j = vr_af_model_to_json(&m);
  vr_errbuf e = {0};
  assert_int_equal(vr_af_model_from_json(j, &k, &e), 0);
  assert_memory_equal(&m, &k, sizeof m);
  json_object_set_new(json_array_get(json_object_get(j, "blocks"), 1), "node_begin",
                      json_integer(4));
  assert_int_equal(vr_af_model_from_json(j, &k, &e), VR_EINVAL);
  assert_non_null(strstr(e.msg, "blocks[1]"));
  json_object_set_new(j, "cmax", json_integer(99));
  assert_int_equal(vr_af_model_from_json(j, &k, &e), VR_ERANGE);
  json_decref(j);
}

/* Body and shadow accounting on generated bursty arrivals: shadows appear
 * only under AsyFunc, cut violations against AsyFunc⁻, and the totals are
 * at least what the bodies alone hold. */
static void test_sim(void **st) {
  vr_af_model m;
  two_blocks(&m);
  vr_af_workload w;
  vr_af_workload_init(&w, 200, 300, 7);
  double *arr;
  int64_t n;
  assert_int_equal(vr_af_arrivals(&w, &arr, &n), 0);
  assert_true(n > 60000 && n < 150000);
  for (int64_t i = 1; i < n; i++) assert_true(arr[i] >= arr[i - 1]);
  vr_af_sim_result *r = vr_malloc(3 * sizeof *r);
  for (int p = 0; p < 3; p++) {
    vr_af_sim_cfg cfg;
    vr_af_sim_cfg_init(&cfg, (vr_af_policy)p, 60);
    assert_int_equal(vr_af_simulate(&m, &cfg, arr, n, &r[p]), 0);
    assert_int_equal(r[p].requests, n);
    assert_true(r[p].cpu_core_s > 0 && r[p].mem_gb_s > 0);
    assert_true(r[p].nperiods >= 5);
    assert_int_equal(r[p].shadows_created, r[p].shadows_released);
    /* executing cores never exceed what is allocated */
    assert_true(r[p].busy_core_s > 0 && r[p].busy_core_s <= r[p].cpu_core_s + 1e-6);
  }
  assert_true(r[VR_AFP_ASYFUNC].shadows_created > 0);
  assert_int_equal(r[VR_AFP_MINUS].shadows_created, 0);
  assert_int_equal(r[VR_AFP_BATCH].shadows_created, 0);
  assert_true(r[VR_AFP_ASYFUNC].violations_pct < r[VR_AFP_MINUS].violations_pct);
  /* bodies are 10 MB: memory-seconds >= 0.01 GB x 300 s */
  assert_true(r[VR_AFP_MINUS].mem_gb_s >= 0.01 * 300);
  /* BATCH by cores per request runs 1-core b = 2 instances, by (cores +
   * rho m) 2-core b = 4 ones (SLO 60: 2 t <= 60): other allocations */
  vr_af_sim_cfg cfg;
  vr_af_sim_cfg_init(&cfg, VR_AFP_BATCH, 60);
  cfg.batch_obj = VR_AF_BATCH_CORES;
  assert_int_equal(vr_af_simulate(&m, &cfg, arr, n, &r[1]), 0);
  assert_true(fabs(r[1].cpu_core_s - r[VR_AFP_BATCH].cpu_core_s) > 1);
  /* shadows released as soon as the queue drops: thousands come and go
   * (the simulator compacts the released ones); every one is accounted */
  vr_af_sim_cfg_init(&cfg, VR_AFP_ASYFUNC, 60);
  cfg.release_idle_ms = 0;
  assert_int_equal(vr_af_simulate(&m, &cfg, arr, n, &r[1]), 0);
  assert_true(r[1].shadows_created > 64);
  assert_int_equal(r[1].shadows_created, r[1].shadows_released);
  assert_true(r[1].violated <= n && r[1].busy_core_s <= r[1].cpu_core_s + 1e-6);
  vr_free(r);
  vr_free(arr);
  w.mul_min = 0.5;
  assert_int_equal(vr_af_arrivals(&w, &arr, &n), VR_EINVAL);
  /* a NaN (a `--spike 1.5:nan` once) generated an empty run */
  w.mul_min = 1.5;
  w.mul_max = NAN;
  assert_int_equal(vr_af_arrivals(&w, &arr, &n), VR_EINVAL);
  w.mul_max = 2;
  w.drift = NAN;
  assert_int_equal(vr_af_arrivals(&w, &arr, &n), VR_EINVAL);
}

/* The profiler on a real model: blocks tile the graph at chain cuts, every
 * block has its tuples, load time and memory; a shadow of the last block
 * loads. */
static void test_profile_tiny_cnn(void **st) {
  vr_blocks_opts o = {0};
  o.runs = 2;
  o.load_runs = 1;
  vr_af_model af;
  vr_errbuf e = {0};
  const char *path = src_path("tests/data/engine/tiny_cnn.onnx");
  if (vr_blocks_profile(path, "tiny_cnn", &o, &af, &e)) fail_msg("%s", e.msg);
  vr_model *m;
  if (vr_model_load(path, &m, &e)) fail_msg("%s", e.msg);
  int n = vr_model_num_nodes(m);
  char *cut = vr_calloc((size_t)n + 1, 1);
  assert_int_equal(vr_model_chain_cuts(m, cut), 0);
  assert_true(af.nblocks >= 1 && af.cmax == 2 && af.bmax == 4);
  assert_true(af.load_ms > 0 && af.mem_bytes > 0);
  int64_t params = 0;
  for (int i = 0; i < af.nblocks; i++) {
    const vr_af_block *b = &af.blk[i];
    assert_int_equal(b->node_begin, i ? af.blk[i - 1].node_end : 0);
    if (i) assert_true(cut[b->node_begin]);
    assert_true(b->load_ms > 0 && b->mem_bytes > 0 && b->in_bytes > 0 && b->out_bytes > 0);
    assert_true(b->lat_ms[0][0] >= 0 && b->sensitivity > 0); /* a reshape may take 0 ns */
    params += b->param_bytes;
  }
  assert_int_equal(af.blk[af.nblocks - 1].node_end, n);
  assert_true(vr_af_lat(&af, VR_AF_ALL(&af), 1, 1) > 0);
  assert_int_equal(params, vr_model_weight_bytes(m));
  assert_true(vr_blocks_shadow_load_ms(m, &af, 1u << (af.nblocks - 1), 4, 1, &e) > 0);
  vr_free(cut);
  vr_model_free(m);
}

/* The policy tick (VR_POL_ASYFUNC) on a snapshot: one body of the
 * two-block model; a queue at gamma pairs a 1-core shadow (LLS), a shadow
 * stays while the queue is crowded and is released after
 * af_release_idle_ms of quiet; no decision for a variant without blocks;
 * kappa 0 pairs none; the body range is the LLS block. */
static int count(const vr_actions *a, int kind, int64_t inst) {
  int n = 0;
  for (size_t i = 0; i < a->len; i++)
    n += vr_actions_at(a, i)->kind == kind && vr_actions_at(a, i)->instance == inst;
  return n;
}

static void test_policy_tick(void **st) {
  vr_af_model m;
  two_blocks(&m);
  vr_policy_cfg cfg;
  vr_policy_cfg_default(&cfg, VR_POL_ASYFUNC);
  vr_policy_state ps;
  vr_policy_state_init(&ps);
  vr_snap_variant v[2];
  memset(v, 0, sizeof v);
  snprintf(v[0].prof.variant, sizeof v[0].prof.variant, "hand-fp32-t1-b4");
  snprintf(v[1].prof.variant, sizeof v[1].prof.variant, "other-fp32-t1-b4");
  v[0].prof.threads = v[1].prof.threads = 1;
  v[0].prof.max_batch = v[1].prof.max_batch = 4;
  v[0].slo_ms = v[1].slo_ms = 50;
  v[0].blocks = &m; /* v[1] has no block profile */
  vr_snap_instance in[2];
  in[0] = (vr_snap_instance){.id = 7, .variant = 0, .worker = 0, .state = VR_IS_ACTIVE,
                             .max_batch = 4, .queue_len = 1, .body = 1};
  in[1] = (vr_snap_instance){.id = 8, .variant = 1, .worker = 0, .state = VR_IS_ACTIVE,
                             .max_batch = 4, .queue_len = 9, .body = 1};
  vr_snap_worker w = {.id = 0, .state = VR_WS_UP, .cores = 4, .free_cores = 2};
  vr_snapshot s = {0, v, 2, in, 2, &w, 1, NULL, 0};
  vr_actions a;
  vr_actions_init(&a);
  s.now_ns = 1000000000LL;
  assert_int_equal(vr_policy_tick(&cfg, &ps, &s, &a), 0); /* below gamma = 2 */
  assert_int_equal(count(&a, VR_ACT_PAIR_SHADOW, 7) + count(&a, VR_ACT_PAIR_SHADOW, 8), 0);
  in[0].queue_len = 2;
  vr_vec_clear(&a);
  assert_int_equal(vr_policy_tick(&cfg, &ps, &s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_PAIR_SHADOW, 7), 1);
  assert_int_equal(count(&a, VR_ACT_PAIR_SHADOW, 8), 0); /* no blocks: no decision */
  for (size_t i = 0; i < a.len; i++)
    if (vr_actions_at(&a, i)->kind == VR_ACT_PAIR_SHADOW)
      assert_int_equal(vr_actions_at(&a, i)->value, 1); /* cmax 2 -> 1 shadow core */
  /* paired now: nothing new while crowded; released 1 s after quiet */
  in[0].shadow_cores = 1;
  w.free_cores = 1;
  s.now_ns += 500000000LL;
  vr_vec_clear(&a);
  assert_int_equal(vr_policy_tick(&cfg, &ps, &s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_PAIR_SHADOW, 7) + count(&a, VR_ACT_UNPAIR_SHADOW, 7), 0);
  in[0].queue_len = 0;
  s.now_ns += 900000000LL; /* 0.9 s after the last crowded tick */
  vr_vec_clear(&a);
  assert_int_equal(vr_policy_tick(&cfg, &ps, &s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_UNPAIR_SHADOW, 7), 0);
  s.now_ns += 200000000LL;
  vr_vec_clear(&a);
  assert_int_equal(vr_policy_tick(&cfg, &ps, &s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_UNPAIR_SHADOW, 7), 1);
  /* the crowd rule the live route checks too: gamma per body */
  assert_false(vr_pol_af_crowded(&cfg, 3, 2));
  assert_true(vr_pol_af_crowded(&cfg, 4, 2));
  assert_false(vr_pol_af_crowded(&cfg, 4, 0));
  cfg.af_gamma = 3;
  assert_false(vr_pol_af_crowded(&cfg, 5, 2));
  assert_true(vr_pol_af_crowded(&cfg, 6, 2));
  cfg.af_gamma = 0;
  /* AsyFunc-: kappa 0 pairs none */
  in[0].shadow_cores = 0;
  in[0].queue_len = 6;
  cfg.af_kappa = 0;
  vr_vec_clear(&a);
  assert_int_equal(vr_policy_tick(&cfg, &ps, &s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_PAIR_SHADOW, 7), 0);
  /* the range a body keeps splittable: block 1 (nodes [3, 5)) */
  vr_af_scale_cfg sc;
  vr_af_scale_cfg_init(&sc, 50);
  int pb, pe;
  uint32_t mask;
  assert_int_equal(vr_af_body_range(&m, &sc, 1, 1, &pb, &pe, &mask), 0);
  assert_int_equal(pb, 3);
  assert_int_equal(pe, 5);
  assert_int_equal(mask, 2);
  int split[9];
  vr_af_split_table(&m, mask, 1, 1, 8, split);
  assert_int_equal(split[0], 0);
  assert_int_equal(split[4], 2); /* equal cores: half the rows */
  for (int b = 1; b <= 8; b++) assert_true(split[b] >= 0 && split[b] <= b);
  vr_actions_free(&a);
  vr_policy_state_free(&ps);
}

/* MLS in the policy tick sizes for the mean rate over its period (the
 * simulator's input), not for the last control period's: ticks every 1 s,
 * MLS every 3 s; the queries come in the last second only, so the mean is
 * a third of the last period's rate, and the bodies MLS creates are those
 * vr_af_mls gives for the mean. */
static void test_policy_mls_mean(void **st) {
  vr_af_model m;
  two_blocks(&m);
  vr_policy_cfg cfg;
  vr_policy_cfg_default(&cfg, VR_POL_ASYFUNC);
  cfg.af_mls_period_ns = 3000000000LL;
  vr_policy_state ps;
  vr_policy_state_init(&ps);
  vr_snap_variant v;
  memset(&v, 0, sizeof v);
  snprintf(v.prof.variant, sizeof v.prof.variant, "hand-fp32-t1-b4");
  v.prof.threads = 1;
  v.prof.max_batch = 4;
  v.slo_ms = 50;
  v.blocks = &m;
  vr_snap_instance in = {.id = 7, .variant = 0, .worker = 0, .state = VR_IS_ACTIVE,
                         .max_batch = 4, .body = 1};
  vr_snap_worker w = {.id = 0, .state = VR_WS_UP, .cores = 16, .free_cores = 15};
  vr_snapshot s = {0, &v, 1, &in, 1, &w, 1, NULL, 0};
  vr_actions a;
  vr_actions_init(&a);
  const double last = 600, mean = last / 3;
  vr_af_scale_cfg sc;
  vr_af_scale_cfg_init(&sc, 50);
  int one[1] = {1};
  vr_af_mls_out at_mean, at_last;
  vr_af_mls(&m, &sc, mean, one, 1, 15, &at_mean);
  vr_af_mls(&m, &sc, last, one, 1, 15, &at_last);
  assert_true(at_mean.ncreate > 0);
  assert_true(at_last.ncreate > at_mean.ncreate); /* the two readings differ */
  for (int t = 1; t <= 4; t++) {
    s.now_ns = t * 1000000000LL;
    v.arrival_qps = t == 4 ? last : 0; /* t = 1 starts MLS's period */
    vr_vec_clear(&a);
    assert_int_equal(vr_policy_tick(&cfg, &ps, &s, &a), 0);
    if (t < 4) assert_int_equal(count(&a, VR_ACT_LOAD, -1), 0);
  }
  assert_int_equal(count(&a, VR_ACT_LOAD, -1), at_mean.ncreate);
  /* the next period starts from zero: a quiet one creates nothing and
   * keeps the last body */
  for (int t = 5; t <= 7; t++) {
    s.now_ns = t * 1000000000LL;
    v.arrival_qps = 0;
    vr_vec_clear(&a);
    assert_int_equal(vr_policy_tick(&cfg, &ps, &s, &a), 0);
    assert_int_equal(count(&a, VR_ACT_LOAD, -1) + count(&a, VR_ACT_UNLOAD, 7), 0);
  }
  vr_actions_free(&a);
  vr_policy_state_free(&ps);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_group_hand_made), cmocka_unit_test(test_latency_model),
      cmocka_unit_test(test_mls),             cmocka_unit_test(test_lls),
      cmocka_unit_test(test_lls_rank),        cmocka_unit_test(test_pair_rmax),
      cmocka_unit_test(test_schedule),        cmocka_unit_test(test_schedule_paper),
      cmocka_unit_test(test_json),
      cmocka_unit_test(test_sim),             cmocka_unit_test(test_profile_tiny_cnn),
      cmocka_unit_test(test_policy_tick),     cmocka_unit_test(test_policy_mls_mean),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
