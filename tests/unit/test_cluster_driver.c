/* The controller's policy driver (control/cluster_driver.c): a registry
 * view in, INFaaS's decisions carried out through the cluster actuator
 * table — replicas loaded on other workers, workers added at the
 * utilisation threshold and removed when idle, a model's last copy never
 * unloaded, models nobody measured left out. The ops record the calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "control/cluster_driver.h"
#include "policy/asyfunc.h"

typedef struct rec {
  char loads[16][160], unloads[16][160], removes[16][64], pairs[16][160], unpairs[16][160];
  int nload, nunload, nadd, nremove, npair, nunpair;
  int split[16][16], nsplit[16];
} rec;

static int r_load(void *u, const char *m, const char *w, const char *why) {
  rec *r = u;
  (void)why;
  if (r->nload < 16) snprintf(r->loads[r->nload], 160, "%s@%s", m, w);
  r->nload++;
  return 0;
}
static int r_unload(void *u, const char *m, const char *w, const char *why) {
  rec *r = u;
  (void)why;
  if (r->nunload < 16) snprintf(r->unloads[r->nunload], 160, "%s@%s", m, w);
  r->nunload++;
  return 0;
}
static int r_pair(void *u, const char *m, const char *w, int cores, const int *split, int n,
                  const char *why) {
  rec *r = u;
  (void)why;
  if (r->npair < 16) {
    snprintf(r->pairs[r->npair], 160, "%s@%s:%d", m, w, cores);
    for (int b = 0; b < n && b < 16; b++) r->split[r->npair][b] = split[b];
    r->nsplit[r->npair] = n;
  }
  r->npair++;
  return 0;
}
static int r_unpair(void *u, const char *m, const char *w, const char *why) {
  rec *r = u;
  (void)why;
  if (r->nunpair < 16) snprintf(r->unpairs[r->nunpair], 160, "%s@%s", m, w);
  r->nunpair++;
  return 0;
}
static int r_add(void *u, const char *why) {
  (void)why;
  ((rec *)u)->nadd++;
  return 0;
}
static int r_remove(void *u, const char *w, const char *why) {
  rec *r = u;
  (void)why;
  if (r->nremove < 16) snprintf(r->removes[r->nremove], 64, "%s", w);
  r->nremove++;
  return 0;
}

/* A cluster of nw workers of `cores` cores; model "m" (1 thread, max
 * batch 8, p50 1 ms at batch 1 growing 0.5 ms per doubling) ready on the
 * first `copies` workers, each seeing qps arrivals. */
typedef struct fix {
  vr_worker_info w[4];
  vr_instance_info inst[4][1];
  const vr_instance_info *ip[4];
  size_t ni[4];
  vr_cdrv_model m;
  vr_cdrv_view v;
  rec r;
  vr_cdrv *d;
} fix;

static void setup_kind(fix *f, int kind, int nw, int cores, int copies, double qps,
                       int measured, int growable) {
  memset(f, 0, sizeof *f);
  for (int k = 0; k < nw; k++) {
    snprintf(f->w[k].id, sizeof f->w[k].id, "w%d", k);
    snprintf(f->w[k].addr, sizeof f->w[k].addr, "127.0.0.1:%d", 9000 + k);
    f->w[k].cores = cores;
    f->ip[k] = f->inst[k];
    if (k >= copies) continue;
    vr_instance_info *x = &f->inst[k][0];
    snprintf(x->id, sizeof x->id, "m");
    snprintf(x->variant, sizeof x->variant, "m");
    snprintf(x->state, sizeof x->state, "ready");
    x->cores = 1;
    x->max_batch = 8;
    x->arrival_qps = x->served_qps = qps;
    if (measured) {
      x->nlat = 4;
      for (int b = 0; b < 4; b++) x->p50_ms[b] = 1 + 0.5 * b, x->p99_ms[b] = 1.5 + 0.5 * b;
    }
    f->ni[k] = 1;
  }
  snprintf(f->m.name, sizeof f->m.name, "m");
  snprintf(f->m.app, sizeof f->m.app, "a");
  snprintf(f->m.precision, sizeof f->m.precision, "fp32");
  f->m.threads = 1;
  f->m.max_batch = 8;
  f->m.accuracy = 90;
  f->v = (vr_cdrv_view){.now_ns = 1000000000LL, .workers = f->w, .nworkers = (size_t)nw,
                        .inst = f->ip, .ninst = f->ni, .models = &f->m, .nmodels = 1,
                        .growable = growable, .worker_cores = cores, .slo_ms = 100,
                        .core_price_per_hour = 0.0425};
  vr_policy_cfg c;
  vr_policy_cfg_default(&c, kind);
  c.cross_model = 0;
  c.burst_upgrade = 0;
  c.worker_idle_ns = 2000000000LL;
  c.af_body_per_worker = 1; /* as the controller */
  c.af_mls_period_ns = 1000000000LL;
  vr_cdrv_ops ops = {r_load, r_unload, r_add, r_remove, &f->r, r_pair, r_unpair};
  assert_int_equal(vr_cdrv_new(&c, &ops, &f->d), 0);
}

static void setup(fix *f, int nw, int cores, int copies, double qps, int measured,
                  int growable) {
  setup_kind(f, VR_POL_INFAAS, nw, cores, copies, qps, measured, growable);
}

static void tick(fix *f) {
  vr_errbuf err = {0};
  assert_int_equal(vr_cdrv_tick(f->d, &f->v, &err), 0);
}

static void unmeasured_left_out(void **state) {
  (void)state;
  fix f;
  setup(&f, 2, 2, 1, 5000, 0, 1);
  tick(&f);
  vr_cdrv_stats st;
  vr_cdrv_get_stats(f.d, &st);
  assert_int_equal(st.nvariants, 0);
  assert_int_equal(st.ninstances, 0);
  assert_int_equal(f.r.nload, 0);
  vr_cdrv_free(f.d);
}

static void replicates_on_another_worker(void **state) {
  (void)state;
  fix f;
  /* one copy on w0 (1 core of 1); ~8 rows per 2.5 ms -> ~3200 qps per
   * instance; 5000 qps needs two: the replica goes to w1 */
  setup(&f, 2, 1, 1, 5000, 1, 0);
  tick(&f);
  assert_true(f.r.nload >= 1);
  assert_string_equal(f.r.loads[0], "m@w1");
  assert_int_equal(f.r.nunload, 0);
  vr_cdrv_stats st;
  vr_cdrv_get_stats(f.d, &st);
  assert_int_equal(st.nvariants, 1);
  assert_true(st.applied[VR_ACT_LOAD] >= 1);
  vr_cdrv_free(f.d);
}

static void adds_worker_over_threshold(void **state) {
  (void)state;
  fix f;
  /* one 1-core worker, busy at 80%+ of its instance's capacity: the VM
   * autoscaler (vm_util 0.8) asks the provider for a worker */
  setup(&f, 1, 1, 1, 2900, 1, 1);
  tick(&f);
  assert_true(f.r.nadd >= 1);
  /* not growable: nobody to ask */
  fix g;
  setup(&g, 1, 1, 1, 2900, 1, 0);
  tick(&g);
  assert_int_equal(g.r.nadd, 0);
  /* a worker already starting absorbs the need: no second add */
  fix h;
  setup(&h, 1, 1, 1, 2900, 1, 1);
  h.v.starting = 1;
  tick(&h);
  assert_int_equal(h.r.nadd, 0);
  vr_cdrv_free(f.d);
  vr_cdrv_free(g.d);
  vr_cdrv_free(h.d);
}

static void removes_idle_worker(void **state) {
  (void)state;
  fix f;
  /* w1 holds nothing; after worker_idle_ns (2 s) it is released */
  setup(&f, 2, 2, 1, 10, 1, 1);
  tick(&f);
  assert_int_equal(f.r.nremove, 0);
  f.v.now_ns += 3000000000LL;
  tick(&f);
  assert_int_equal(f.r.nremove, 1);
  assert_string_equal(f.r.removes[0], "w1");
  vr_cdrv_free(f.d);
}

static void keeps_last_copy(void **state) {
  (void)state;
  fix f;
  /* two idle copies: INFaaS releases idle instances after their load
   * time (1 s until one was timed); one goes, the last stays */
  setup(&f, 2, 2, 2, 0, 1, 0);
  for (int i = 0; i < 6; i++) {
    tick(&f);
    f.v.now_ns += 1000000000LL;
  }
  assert_int_equal(f.r.nunload, 1);
  vr_cdrv_stats st;
  vr_cdrv_get_stats(f.d, &st);
  assert_true(st.kept_last >= 1);
  vr_cdrv_free(f.d);
}

/* The baselines run on every model's variant as their fixed set: SM+
 * replicates under load like INFaaS; Clipper+ provisions its fixed count
 * (fixed_instances) whatever the load, and nothing runs before a model
 * was measured (no fixed set yet: no EINVAL). */
static void baselines(void **state) {
  (void)state;
  fix f;
  setup_kind(&f, VR_POL_SM, 2, 1, 1, 5000, 1, 0);
  tick(&f);
  assert_true(f.r.nload >= 1);
  assert_string_equal(f.r.loads[0], "m@w1");
  vr_cdrv_free(f.d);
  fix g;
  setup_kind(&g, VR_POL_CLIPPER, 2, 1, 1, 0, 1, 0);
  g.v.fixed_instances = 2;
  tick(&g);
  assert_int_equal(g.r.nload, 1);
  assert_string_equal(g.r.loads[0], "m@w1");
  vr_cdrv_free(g.d);
  fix h;
  setup_kind(&h, VR_POL_CLIPPER, 2, 1, 1, 0, 0, 0);
  tick(&h);
  assert_int_equal(h.r.nload, 0);
  vr_cdrv_free(h.d);
}

/* A block profile: block 0 flat 2 ms (nodes 0..3), block 1 10 ms a row
 * on one core, 6 on two (nodes 3..5), sensitive and light: one 1-core
 * body at SLO 50 ms serves at most 4 rows / 42 ms (~95 qps). */
static void af_blocks(vr_af_model *m) {
  memset(m, 0, sizeof *m);
  snprintf(m->name, sizeof m->name, "m");
  m->cmax = 2;
  m->bmax = 4;
  m->nblocks = 2;
  m->mem_bytes = 10000000;
  m->load_ms = 1000;
  m->blk[0] = (vr_af_block){0, 3, {{0}}, 800000, 100, 200, 1000000, 1.0, 50};
  m->blk[1] = (vr_af_block){3, 5, {{0}}, 500000, 200, 40, 1000000, 4.0, 5};
  for (int b = 0; b < 4; b++) {
    m->blk[0].lat_ms[0][b] = m->blk[0].lat_ms[1][b] = 2;
    m->blk[1].lat_ms[0][b] = 10.0 * (b + 1);
    m->blk[1].lat_ms[1][b] = 6.0 * (b + 1);
  }
}

/* AsyFunc across workers: MLS places new bodies on the workers with the
 * most free cores, never a second on a worker that has one; LLS pairs a
 * shadow inside the body's worker (with the split table of the body's
 * range), once until the worker shows it, and releases it after the
 * burst. */
static void asyfunc_across_workers(void **state) {
  (void)state;
  static vr_af_model blk;
  af_blocks(&blk);
  fix f;
  /* w0 (2 cores) holds a body seeing 200 qps, ~2x one body; w1 has 2
   * cores, w2 4: MLS wants two more bodies */
  setup_kind(&f, VR_POL_ASYFUNC, 3, 2, 1, 200, 1, 0);
  f.w[2].cores = 4;
  f.m.blocks = &blk;
  f.m.max_batch = 4;
  f.inst[0][0].body = 1;
  f.inst[0][0].max_batch = 4;
  f.v.slo_ms = 50;
  int pb, pe;
  assert_int_equal(vr_cdrv_body_range(&f.m, 50, &pb, &pe), 0);
  assert_int_equal(pb, 3); /* the sensitive block */
  assert_int_equal(pe, 5);
  tick(&f); /* MLS starts its period; queue 0: no shadow */
  assert_int_equal(f.r.nload, 0);
  assert_int_equal(f.r.npair, 0);
  f.v.now_ns += 1500000000LL;
  tick(&f);
  assert_int_equal(f.r.nload, 2);
  assert_string_equal(f.r.loads[0], "m@w2"); /* 4 free cores */
  assert_string_equal(f.r.loads[1], "m@w1"); /* not w0: it has a body */
  /* a burst queues 6 rows at the body: LLS pairs a 1-core shadow on w0
   * (its free core), split per batch 0..4 */
  f.inst[0][0].queue = 6;
  f.v.now_ns += 100000000LL;
  tick(&f);
  assert_int_equal(f.r.npair, 1);
  assert_string_equal(f.r.pairs[0], "m@w0:1");
  assert_int_equal(f.r.nsplit[0], 5);
  assert_int_equal(f.r.split[0][0], 0);
  for (int b = 1; b < 5; b++) assert_true(f.r.split[0][b] >= 0 && f.r.split[0][b] <= b);
  /* still queued, the worker not yet showing the shadow: no second pair */
  f.v.now_ns += 100000000LL;
  tick(&f);
  assert_int_equal(f.r.npair, 1);
  /* the worker shows it; the queue drains; after the release delay (1 s)
   * the shadow is released, once */
  f.inst[0][0].shadow_cores = 1;
  f.inst[0][0].queue = 0;
  for (int i = 0; i < 8; i++) {
    f.v.now_ns += 200000000LL;
    tick(&f);
  }
  assert_int_equal(f.r.nunpair, 1);
  assert_string_equal(f.r.unpairs[0], "m@w0");
  vr_cdrv_stats st;
  vr_cdrv_get_stats(f.d, &st);
  assert_true(st.applied[VR_ACT_PAIR_SHADOW] >= 1);
  vr_cdrv_free(f.d);
  /* without a block profile AsyFunc decides nothing */
  fix g;
  setup_kind(&g, VR_POL_ASYFUNC, 2, 2, 1, 200, 1, 0);
  g.inst[0][0].queue = 6;
  for (int i = 0; i < 3; i++) {
    tick(&g);
    g.v.now_ns += 1500000000LL;
  }
  assert_int_equal(g.r.nload + g.r.npair, 0);
  vr_cdrv_free(g.d);
}

/* AsyFunc with a provider: a body MLS wants and no worker has room for
 * (each holds one) asks for a worker — not while one is starting, not
 * past the cap — and a worker without instances goes once idle. */
static void asyfunc_grows_workers(void **state) {
  (void)state;
  static vr_af_model blk;
  af_blocks(&blk);
  fix f;
  setup_kind(&f, VR_POL_ASYFUNC, 1, 2, 1, 200, 1, 1);
  f.m.blocks = &blk;
  f.m.max_batch = 4;
  f.inst[0][0].body = 1;
  f.inst[0][0].max_batch = 4;
  f.v.slo_ms = 50;
  f.v.max_workers = 2;
  tick(&f);
  f.v.now_ns += 1500000000LL;
  tick(&f);
  assert_int_equal(f.r.nload, 0); /* w0 holds the body: no room */
  assert_int_equal(f.r.nadd, 1);
  vr_cdrv_free(f.d);
  fix g; /* one starting already, or at the cap: none */
  for (int k = 0; k < 2; k++) {
    setup_kind(&g, VR_POL_ASYFUNC, 1, 2, 1, 200, 1, 1);
    g.m.blocks = &blk;
    g.m.max_batch = 4;
    g.inst[0][0].body = 1;
    g.v.slo_ms = 50;
    if (k) g.v.max_workers = 1;
    else g.v.starting = 1;
    tick(&g);
    g.v.now_ns += 1500000000LL;
    tick(&g);
    assert_int_equal(g.r.nadd, 0);
    vr_cdrv_free(g.d);
  }
  fix h; /* w1 holds nothing: released after worker_idle_ns (2 s) */
  setup_kind(&h, VR_POL_ASYFUNC, 2, 2, 1, 10, 1, 1);
  h.m.blocks = &blk;
  h.inst[0][0].body = 1;
  h.v.slo_ms = 50;
  tick(&h);
  assert_int_equal(h.r.nremove, 0);
  h.v.now_ns += 3000000000LL;
  tick(&h);
  assert_int_equal(h.r.nremove, 1);
  assert_string_equal(h.r.removes[0], "w1");
  vr_cdrv_free(h.d);
}

/* Interference across workers: a worker reports its copy's compute 2x
 * its profile (slowdown, runtime/slowdown.h) at a load far below
 * saturation; INFaaS marks it interfered and migrates it to the worker
 * with room; once the new copy is ready the old one is unloaded. A
 * slowdown within the factor (1.5) moves nothing. */
static void interference_migrates(void **state) {
  (void)state;
  fix f;
  setup(&f, 2, 1, 1, 100, 1, 0);
  f.inst[0][0].slowdown = 1.2;
  tick(&f);
  assert_int_equal(f.r.nload + f.r.nunload, 0);
  f.inst[0][0].slowdown = 2.0;
  f.v.now_ns += 1000000000LL;
  tick(&f);
  assert_int_equal(f.r.nload, 1);
  assert_string_equal(f.r.loads[0], "m@w1");
  vr_cdrv_stats st;
  vr_cdrv_get_stats(f.d, &st);
  assert_true(st.applied[VR_ACT_MIGRATE] >= 1);
  assert_int_equal(f.r.nunload, 0); /* the old copy serves until the new one is ready */
  /* w1 reports the new copy ready: the interfered one goes */
  f.inst[1][0] = f.inst[0][0];
  f.inst[1][0].slowdown = 1.0;
  f.ni[1] = 1;
  f.v.now_ns += 1000000000LL;
  tick(&f);
  assert_int_equal(f.r.nunload, 1);
  assert_string_equal(f.r.unloads[0], "m@w0");
  vr_cdrv_free(f.d);
}

int main(void) {
  const struct CMUnitTest t[] = {cmocka_unit_test(unmeasured_left_out),
                                 cmocka_unit_test(replicates_on_another_worker),
                                 cmocka_unit_test(adds_worker_over_threshold),
                                 cmocka_unit_test(removes_idle_worker),
                                 cmocka_unit_test(keeps_last_copy),
                                 cmocka_unit_test(baselines),
                                 cmocka_unit_test(asyfunc_across_workers),
                                 cmocka_unit_test(asyfunc_grows_workers),
                                 cmocka_unit_test(interference_migrates)};
  return cmocka_run_group_tests(t, NULL, NULL);
}
