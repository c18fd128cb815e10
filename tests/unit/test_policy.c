/* Policy unit tests: profiles, selection, state machine, autoscaler,
 * interference, baselines. Synthetic profiles only. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "vr_test.h"

#include "base/alloc.h"
#include "policy/drop.h"
#include "policy/place.h"
#include "policy/policy_int.h"
#include "policy/policy.h"
#include "policy/route.h"
#include "policy/select.h"

static vr_profile mkprof(const char *model, const char *app, const char *var,
                         double p50_b1, double acc, double cost) {
  vr_profile p;
  vr_profile_init(&p);
  snprintf(p.model, sizeof p.model, "%s", model);
  snprintf(p.app, sizeof p.app, "%s", app);
  snprintf(p.variant, sizeof p.variant, "%s", var);
  snprintf(p.precision, sizeof p.precision, "fp32");
  p.max_batch = 8;
  for (int s = 0; s < 4; s++) { /* batches 1..8: latency grows sublinearly */
    p.lat.p50_ms[s] = p50_b1 * (1 + 0.5 * s);
    p.lat.p99_ms[s] = p.lat.p50_ms[s] * 1.2;
  }
  p.accuracy = acc;
  p.cost_per_s = cost;
  p.load_ms = 500;
  p.mem_bytes = 100 << 20;
  return p;
}

static void test_profile_math(void **st) {
  (void)st;
  vr_profile p = mkprof("m", "a", "m-fp32-t1-b8", 10, 90, 1);
  assert_int_equal(vr_profile_validate(&p, NULL), 0);
  assert_true(fabs(vr_profile_latency_ms(&p, 1, 0.5) - 10) < 1e-9);
  assert_true(fabs(vr_profile_latency_ms(&p, 3, 0.5) - 17.5) < 1e-9);
  assert_true(fabs(vr_profile_latency_ms(&p, 2, 0.99) - 18) < 1e-9);
  /* beyond the largest measured batch: per-item extrapolation */
  assert_true(fabs(vr_profile_latency_ms(&p, 16, 0.5) - 50) < 1e-9);
  /* quantile interpolation is monotone */
  double prev = 0;
  for (double q = 0.01; q <= 1.0; q += 0.01) {
    double v = vr_profile_latency_ms(&p, 4, q);
    assert_true(v >= prev - 1e-12);
    prev = v;
  }
  assert_true(fabs(vr_profile_peak_qps(&p, 8) - 8 * 1000 / 25.0) < 1e-9);
  /* SLO 60 ms: 2 * tail(b) <= 60 -> tail <= 30: b=8 has 30 -> fits */
  assert_int_equal(vr_profile_batch_for_slo(&p, 60), 8);
  assert_int_equal(vr_profile_batch_for_slo(&p, 40), 2);
  assert_int_equal(vr_profile_batch_for_slo(&p, 13), 0); /* 2 x 12 > 13 */
  assert_int_equal(vr_profile_batch_for_slo(&p, 24), 1);
  assert_int_equal(vr_profile_batch_for_slo(&p, 5), 0);
  assert_true(vr_profile_sat_qps(&p, 5) == 0);
}

static void test_profile_json(void **st) {
  (void)st;
  vr_profile p = mkprof("fmnist_cnn_s", "fmnist", "fmnist_cnn_s-int8-t1-b8",
                        2.5, 91.5, 0.002);
  p.device = VR_DEV_GPU;
  json_t *j = vr_profile_to_json(&p);
  assert_non_null(j);
  vr_profile q;
  vr_errbuf err = {0};
  assert_int_equal(vr_profile_from_json(j, &q, &err), 0);
  assert_memory_equal(&p, &q, sizeof p);
  json_decref(j);

  static const char *bad[] = {
      "[]",
      "{\"variant\":\"v\",\"accuracy\":1,\"p50_ms\":[1]}",
      "{\"model\":\"m\",\"variant\":\"v\",\"p50_ms\":[1]}",
      "{\"model\":\"m\",\"variant\":\"v\",\"accuracy\":101,\"p50_ms\":[1]}",
      "{\"model\":\"m\",\"variant\":\"v\",\"accuracy\":1,\"p50_ms\":[null,2]}",
      "{\"model\":\"m\",\"variant\":\"v\",\"accuracy\":1,\"p50_ms\":[-1]}",
      "{\"model\":\"m\",\"variant\":\"v\",\"accuracy\":1,\"p50_ms\":[1],"
      "\"p99_ms\":[0.5]}",
      "{\"model\":\"m\",\"variant\":\"v\",\"accuracy\":1,\"p50_ms\":[1],"
      "\"batch\":[3]}",
      "{\"model\":\"m\",\"variant\":\"v\",\"accuracy\":1,\"p50_ms\":[1,2],"
      "\"batch\":[1]}",
      "{\"model\":\"m\",\"variant\":\"v\",\"accuracy\":1,\"p50_ms\":[1],"
      "\"max_batch\":65}",
      "{\"model\":\"m\",\"variant\":\"v\",\"accuracy\":1,\"p50_ms\":[1],"
      "\"device\":\"tpu\"}",
      "{\"model\":7,\"variant\":\"v\",\"accuracy\":1,\"p50_ms\":[1]}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_t *b = json_loads(bad[i], 0, NULL);
    assert_non_null(b);
    memset(&err, 0, sizeof err);
    assert_int_equal(vr_profile_from_json(b, &q, &err), VR_EINVAL);
    assert_true(strlen(err.msg) > 0);
    json_decref(b);
  }
  /* sparse batches via "batch" */
  json_t *ok = json_loads("{\"model\":\"m\",\"variant\":\"v\",\"accuracy\":50,"
                          "\"batch\":[1,4],\"p50_ms\":[1,2],\"max_batch\":4}",
                          0, NULL);
  assert_int_equal(vr_profile_from_json(ok, &q, &err), 0);
  assert_true(q.lat.p50_ms[1] < 0 && q.lat.p50_ms[2] == 2);
  assert_true(fabs(vr_profile_latency_ms(&q, 2, 0.5) - 1 - 1.0 / 3) < 1e-9);
  json_decref(ok);
}

/* A snapshot with variants A (fast, 80%), B (slow, 95%), C (medium, 90%),
 * one worker of 8 cores. */
typedef struct fx {
  vr_snap_variant v[4];
  vr_snap_instance in[8];
  vr_snap_worker w[2];
  vr_snap_wtype t[1];
  vr_snapshot s;
} fx;

static void fx_init(fx *f) {
  memset(f, 0, sizeof *f);
  f->v[0].prof = mkprof("small", "cls", "small/fp32", 5, 80, 1);
  f->v[1].prof = mkprof("big", "cls", "big/fp32", 50, 95, 4);
  f->v[2].prof = mkprof("mid", "cls", "mid/fp32", 20, 90, 2);
  f->v[3].prof = mkprof("mid", "cls", "mid/int8", 10, 90, 1);
  for (int i = 0; i < 4; i++) f->v[i].slo_ms = 200;
  f->w[0] = (vr_snap_worker){1, VR_WS_UP, 8, 8, 0, 0, 16LL << 30,
                             16LL << 30, 8, 0, -1};
  f->t[0] = (vr_snap_wtype){8, 0, 16LL << 30, 8, 4, 1};
  f->s.now_ns = 10 * 1000000000LL;
  f->s.variants = f->v;
  f->s.nvariants = 4;
  f->s.instances = f->in;
  f->s.workers = f->w;
  f->s.nworkers = 1;
  f->s.wtypes = f->t;
  f->s.nwtypes = 1;
}

static void fx_inst(fx *f, int variant, int state, double qps) {
  vr_snap_instance *in = &f->in[f->s.ninstances];
  memset(in, 0, sizeof *in);
  in->id = 100 + (int64_t)f->s.ninstances;
  in->variant = variant;
  in->state = state;
  in->max_batch = 8;
  in->arrival_qps = in->served_qps = qps;
  f->s.ninstances++;
  f->v[variant].state = VR_VS_ACTIVE;
  f->v[variant].arrival_qps += qps;
  f->v[variant].served_qps += qps;
  /* its queries asked for all the accuracy it has (the strictest case) */
  f->v[variant].req_accuracy = f->v[variant].prof.accuracy;
  f->w[0].free_cores -= 1;
}

static void test_select(void **st) {
  (void)st;
  fx f;
  fx_init(&f);
  vr_select_index *ix = vr_select_new();
  assert_int_equal(vr_select_build(ix, &f.s), 0);
  int g = vr_select_group(ix, 'a', "cls");
  assert_true(g >= 0);
  assert_int_equal(vr_select_group(ix, 'a', "nope"), -1);
  vr_selection r;
  /* nothing active: load the one with lowest load+latency meeting both */
  vr_query_req q = {g, 100, 85};
  assert_int_equal(vr_select(ix, &q, &r), 0);
  assert_int_equal(r.outcome, VR_SEL_LOAD);
  assert_int_equal(r.variant, 3); /* mid/int8: 90%, 12 ms */
  /* accuracy only B has (B: tail 60 ms, meets SLOs >= 120 ms) */
  q.min_accuracy = 93;
  q.latency_ms = 120;
  vr_select(ix, &q, &r);
  assert_int_equal(r.outcome, VR_SEL_LOAD);
  assert_int_equal(r.variant, 1);
  /* B's own accuracy, as a sum of percentages rounds it (95 + 1e-12):
   * selection meets it as the route fallbacks do (vr_acc_meets) */
  q.min_accuracy = 95 + 1e-12;
  vr_select(ix, &q, &r);
  assert_int_equal(r.outcome, VR_SEL_LOAD);
  assert_int_equal(r.variant, 1);
  q.min_accuracy = 93;
  /* SLO B cannot meet: infeasible, closest is B with its latency */
  q.latency_ms = 30;
  vr_select(ix, &q, &r);
  assert_int_equal(r.outcome, VR_SEL_INFEASIBLE);
  assert_int_equal(r.variant, 1);
  assert_true(fabs(r.latency_ms - 60) < 1e-9);
  /* accuracy nobody has: the most accurate */
  q.min_accuracy = 99;
  q.latency_ms = 1000;
  vr_select(ix, &q, &r);
  assert_int_equal(r.outcome, VR_SEL_INFEASIBLE);
  assert_int_equal(r.variant, 1);
  /* an active variant wins over loading a cheaper one */
  fx_inst(&f, 2, VR_IS_ACTIVE, 10);
  fx_inst(&f, 2, VR_IS_ACTIVE, 5);
  assert_int_equal(vr_select_build(ix, &f.s), 0);
  q = (vr_query_req){g, 100, 85};
  vr_select(ix, &q, &r);
  assert_int_equal(r.outcome, VR_SEL_ACTIVE);
  assert_int_equal(r.variant, 2);
  double load[2] = {3, 1};
  assert_int_equal(vr_select_instance(ix, 2, load), 1);
  assert_int_equal(vr_select_instance(ix, 0, load), -1);
  /* an interfered variant is routed around: loading another wins; with
   * loaded_only (no room to load) the busy variant serves */
  f.v[2].state = VR_VS_INTERFERED;
  assert_int_equal(vr_select_build(ix, &f.s), 0);
  vr_select(ix, &q, &r);
  assert_int_equal(r.outcome, VR_SEL_LOAD);
  assert_int_equal(r.variant, 3);
  q.loaded_only = 1;
  vr_select(ix, &q, &r);
  assert_int_equal(r.outcome, VR_SEL_ACTIVE);
  assert_int_equal(r.variant, 2);
  /* loaded_only with nothing loaded that meets it: infeasible */
  q.min_accuracy = 93;
  q.latency_ms = 120;
  vr_select(ix, &q, &r);
  assert_int_equal(r.outcome, VR_SEL_INFEASIBLE);
  q = (vr_query_req){g, 100, 85};
  f.v[2].state = VR_VS_ACTIVE;
  assert_int_equal(vr_select_build(ix, &f.s), 0);
  /* model group restricts to that model */
  q.group = vr_select_group(ix, 'm', "small");
  q.min_accuracy = 0;
  vr_select(ix, &q, &r);
  assert_int_equal(r.variant, 0);
  q.group = 999;
  assert_int_equal(vr_select(ix, &q, &r), VR_EINVAL);
  vr_select_free(ix);
}

static unsigned rnd(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return *s >> 8 & 0xffff;
}

/* Brute force cross-check of vr_select on random snapshots. */
static void test_select_random(void **st) {
  (void)st;
  enum { NV = 60 };
  vr_snap_variant v[NV];
  vr_snap_instance in[NV];
  vr_snapshot s = {0};
  unsigned seed = 12345;
#define RND() rnd(&seed)
  for (int round = 0; round < 30; round++) {
    memset(v, 0, sizeof v);
    size_t ni = 0;
    for (int i = 0; i < NV; i++) {
      char name[32];
      snprintf(name, sizeof name, "m%d/v%d", i % 7, i);
      char model[16];
      snprintf(model, sizeof model, "m%d", i % 7);
      double lat = 1 + RND() % 100, acc = 50 + RND() % 50;
      v[i].prof = mkprof(model, i % 2 ? "x" : "y", name, lat, acc,
                         1 + RND() % 10);
      v[i].prof.load_ms = RND() % 1000;
      int k = RND() % 3;
      if (k) {
        in[ni] = (vr_snap_instance){.id = i, .variant = i,
                                    .state = VR_IS_ACTIVE};
        ni++;
        int st3[3] = {VR_VS_ACTIVE, VR_VS_OVERLOADED, VR_VS_INTERFERED};
        v[i].state = st3[RND() % 3];
      }
    }
    s.variants = v, s.nvariants = NV, s.instances = in, s.ninstances = ni;
    vr_select_index *ix = vr_select_new();
    assert_int_equal(vr_select_build(ix, &s), 0);
    for (int t = 0; t < 200; t++) {
      vr_query_req q = {vr_select_group(ix, 'a', t % 2 ? "x" : "y"), 0, 0};
      q.latency_ms = RND() % 200;
      q.min_accuracy = 50 + RND() % 55;
      vr_selection r;
      assert_int_equal(vr_select(ix, &q, &r), 0);
      /* brute force the same rule */
      int want = -1, outcome = VR_SEL_INFEASIBLE;
      for (int pass = 0; pass < 3 && want < 0; pass++) {
        double best = INFINITY;
        for (int i = 0; i < NV; i++) {
          const vr_profile *p = &v[i].prof;
          if (strcmp(p->app, t % 2 ? "x" : "y")) continue;
          double tail = vr_profile_tail_ms(p, 1);
          if (p->accuracy < q.min_accuracy || 2 * tail > q.latency_ms) continue;
          int has = 0;
          for (size_t j = 0; j < ni; j++) has |= in[j].variant == i;
          int cls = !has ? 1 : v[i].state == VR_VS_INTERFERED ? 2 : 0;
          if (cls != pass) continue;
          double val = pass == 1 ? p->load_ms + tail
                                 : p->cost_per_s / vr_profile_peak_qps(p, 8) +
                                       1e-9 * tail;
          if (val < best) best = val, want = i;
        }
        if (want >= 0) outcome = pass == 1 ? VR_SEL_LOAD : VR_SEL_ACTIVE;
      }
      assert_int_equal(r.outcome, outcome);
      if (want >= 0) {
        /* equal values may tie; compare the value, not the index */
        assert_true(r.variant == want ||
                    (v[r.variant].prof.cost_per_s == v[want].prof.cost_per_s));
      }
    }
    vr_select_free(ix);
  }
#undef RND
}

static int count(const vr_actions *a, int kind) {
  int n = 0;
  for (size_t i = 0; i < a->len; i++) n += vr_actions_at(a, i)->kind == kind;
  return n;
}

static void test_autoscale(void **st) {
  (void)st;
  fx f;
  fx_init(&f);
  vr_policy_cfg c;
  vr_policy_cfg_default(&c, VR_POL_INFAAS);
  vr_policy_state ps;
  vr_policy_state_init(&ps);
  vr_actions a;
  vr_actions_init(&a);
  /* mid/fp32 saturates at 8 / 50 ms = 160 qps under a 200 ms SLO; 500 qps
   * needs 4 instances with slack; mid/int8 (cost 1) can take it for less:
   * the autoscaler upgrades rather than replicates. */
  fx_inst(&f, 2, VR_IS_ACTIVE, 500);
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  int loads_int8 = 0, loads_fp32 = 0;
  for (size_t i = 0; i < a.len; i++) {
    vr_action *x = vr_actions_at(&a, i);
    if (x->kind == VR_ACT_LOAD) {
      if (x->variant == 3) loads_int8++;
      else loads_fp32++;
    }
  }
  assert_int_equal(loads_fp32, 0);
  assert_true(loads_int8 >= 2);
  assert_int_equal(count(&a, VR_ACT_SET_VSTATE), 1); /* -> overloaded */
  assert_int_equal(count(&a, VR_ACT_MIGRATE), 0); /* there was room */

  /* The same upgrade on a full worker that cannot grow (no worker types,
   * as in `vario serve`): the int8 variant replaces the fp32 instance in
   * place — one MIGRATE on the same worker, nothing else loaded. */
  vr_vec_clear(&a);
  fx_init(&f);
  fx_inst(&f, 2, VR_IS_ACTIVE, 500);
  f.w[0].free_cores = 0;
  f.s.nwtypes = 0;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_LOAD), 0);
  assert_int_equal(count(&a, VR_ACT_MIGRATE), 1);
  for (size_t i = 0; i < a.len; i++) {
    vr_action *x = vr_actions_at(&a, i);
    if (x->kind != VR_ACT_MIGRATE) continue;
    assert_int_equal(x->variant, 3);
    assert_int_equal(x->instance, 100);
    assert_int_equal(x->worker, 0);
  }
  /* memory must hold both instances during the overlap: 50 MiB free is
   * not enough for the 100 MiB replacement, so nothing is replaced */
  vr_vec_clear(&a);
  int64_t mem = f.w[0].free_mem;
  f.w[0].free_mem = 50 << 20;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_MIGRATE), 0);
  f.w[0].free_mem = mem;
  /* a worker type at its cap cannot grow either */
  vr_vec_clear(&a);
  f.s.nwtypes = 1;
  f.t[0].count = 1, f.t[0].max_count = 1;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_MIGRATE), 1);
  assert_int_equal(count(&a, VR_ACT_ADD_WORKER), 0);
  /* one that can grow asks for a worker instead */
  vr_vec_clear(&a);
  f.t[0].max_count = 0;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_MIGRATE), 0);
  assert_true(count(&a, VR_ACT_ADD_WORKER) >= 1);
  /* also where the only type that can grow has GPUs: a CPU variant runs
   * on its cores (it asked for no worker at all) */
  f.t[0].gpus = 1;
  vr_place pl;
  assert_int_equal(vr_place_init(&pl, &f.s), 0);
  vr_place_want(&pl, &f.v[1].prof, 1);
  assert_int_equal(pl.want_wtype, 0);
  vr_place_free(&pl);
  f.t[0].gpus = 0;
  /* no cheaper variant to upgrade to: nothing is replaced */
  vr_vec_clear(&a);
  fx_init(&f);
  fx_inst(&f, 1, VR_IS_ACTIVE, 100);
  f.w[0].free_cores = 0;
  f.s.nwtypes = 0;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_MIGRATE), 0);
  assert_int_equal(count(&a, VR_ACT_LOAD), 0);
  /* Cross-model: mid/fp32's queries asked for only 80%, so the "small"
   * model of the same app (80%, 4x faster at the same cost) may take its
   * load — cheaper than mid/int8; with 85% asked it may not. */
  vr_vec_clear(&a);
  fx_init(&f);
  fx_inst(&f, 2, VR_IS_ACTIVE, 500);
  f.v[2].req_accuracy = 80;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  int loads_small = 0, loads_other = 0;
  for (size_t i = 0; i < a.len; i++) {
    vr_action *x = vr_actions_at(&a, i);
    if (x->kind == VR_ACT_LOAD) *(x->variant == 0 ? &loads_small : &loads_other) += 1;
  }
  assert_true(loads_small >= 1);
  assert_int_equal(loads_other, 0);
  vr_vec_clear(&a);
  f.v[2].req_accuracy = 85;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  for (size_t i = 0; i < a.len; i++)
    if (vr_actions_at(&a, i)->kind == VR_ACT_LOAD)
      assert_int_not_equal(vr_actions_at(&a, i)->variant, 0);
  /* another app's model never qualifies */
  vr_vec_clear(&a);
  f.v[2].req_accuracy = 80;
  snprintf(f.v[0].prof.app, sizeof f.v[0].prof.app, "other");
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  for (size_t i = 0; i < a.len; i++)
    if (vr_actions_at(&a, i)->kind == VR_ACT_LOAD)
      assert_int_not_equal(vr_actions_at(&a, i)->variant, 0);
  /* Backlog: big (26.7 qps per instance under 200 ms) serves 20 qps, below
   * its profile, but 10 rows are queued (0.37 s to drain > half the SLO).
   * Off by default; with backlog_step 1.25 it counts as 33 qps: one more
   * instance. */
  vr_vec_clear(&a);
  fx_init(&f);
  fx_inst(&f, 1, VR_IS_ACTIVE, 20);
  f.in[0].queue_len = 10;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_LOAD), 0);
  vr_vec_clear(&a);
  vr_policy_cfg cb = c;
  cb.backlog_step = 1.25;
  assert_int_equal(vr_policy_tick(&cb, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_LOAD), 1);
  vr_vec_clear(&a);
  f.in[0].queue_len = 2; /* 75 ms to drain: within half the SLO */
  assert_int_equal(vr_policy_tick(&cb, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_LOAD), 0);
  /* replicate when no cheaper variant of the model exists */

  vr_vec_clear(&a);
  fx_init(&f);
  /* big under 200 ms: 2*p99(b) <= 200 allows batch 2 (p99 90 ms), so one
   * instance saturates at 2/75ms = 26.7 qps; 100*1.05/26.7 -> 4 */
  fx_inst(&f, 1, VR_IS_ACTIVE, 100);
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_LOAD), 3);
  /* never exceeds the worker: 8 cores, 1000 qps would need 17 */
  vr_vec_clear(&a);
  f.v[1].arrival_qps = f.v[1].served_qps = 1000;
  f.t[0].count = 1, f.t[0].max_count = 1;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_LOAD), 7);
  assert_int_equal(count(&a, VR_ACT_ADD_WORKER), 0);
  /* with room for more workers it asks for enough at once: 32 cores that
   * found no room = 4 workers of 8 cores, capped at max_count 4 (1 up) */
  vr_vec_clear(&a);
  f.t[0].max_count = 4;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_ADD_WORKER), 3);
  vr_vec_clear(&a);
  f.t[0].max_count = 0; /* unlimited */
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_ADD_WORKER), 4);
  /* scale down only after removable for load time (500 ms) */
  vr_vec_clear(&a);
  fx_init(&f);
  fx_inst(&f, 1, VR_IS_ACTIVE, 5);
  fx_inst(&f, 1, VR_IS_ACTIVE, 5);
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_UNLOAD), 0);
  f.s.now_ns += 400 * 1000000LL;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_UNLOAD), 0);
  f.s.now_ns += 200 * 1000000LL;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_UNLOAD), 1);
  vr_actions_free(&a);
  vr_policy_state_free(&ps);
}

static void test_interference_and_states(void **st) {
  (void)st;
  fx f;
  fx_init(&f);
  f.s.nworkers = 2;
  f.w[1] = f.w[0];
  f.w[1].id = 2;
  fx_inst(&f, 0, VR_IS_ACTIVE, 10);
  f.in[0].slowdown = 3; /* batches take 3x their profiled median */
  f.in[0].obs_batch = 1;
  vr_policy_cfg c;
  vr_policy_cfg_default(&c, VR_POL_INFAAS);
  vr_actions a;
  vr_actions_init(&a);
  assert_int_equal(vr_policy_interference(&c, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_MIGRATE), 1);
  for (size_t i = 0; i < a.len; i++)
    if (vr_actions_at(&a, i)->kind == VR_ACT_MIGRATE)
      assert_int_equal(vr_actions_at(&a, i)->worker, 1);
  /* overloaded instance is slow for a reason: no interference */
  vr_vec_clear(&a);
  f.in[0].arrival_qps = 1e6;
  assert_int_equal(vr_policy_interference(&c, &f.s, &a), 0);
  assert_int_equal(a.len, 0);
  assert_int_equal(vr_policy_states(&c, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_SET_ISTATE), 1);
  /* one worker that cannot grow (as in `vario serve`): nowhere to move the
   * slow instance, so it is not marked (routing around it would pile its
   * load onto the same cores), and a marked one is set back to active */
  vr_vec_clear(&a);
  f.in[0].arrival_qps = 10;
  f.s.nworkers = 1;
  f.s.nwtypes = 0;
  assert_int_equal(vr_policy_interference(&c, &f.s, &a), 0);
  assert_int_equal(a.len, 0);
  f.in[0].state = VR_IS_INTERFERED;
  assert_int_equal(vr_policy_interference(&c, &f.s, &a), 0);
  assert_int_equal(a.len, 1);
  assert_int_equal(vr_actions_at(&a, 0)->kind, VR_ACT_SET_ISTATE);
  assert_int_equal(vr_actions_at(&a, 0)->value, VR_IS_ACTIVE);
  /* with a worker type that can grow it is marked (and a worker asked) */
  vr_vec_clear(&a);
  f.in[0].state = VR_IS_ACTIVE;
  f.s.nwtypes = 1;
  assert_int_equal(vr_policy_interference(&c, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_SET_ISTATE), 1);
  vr_actions_free(&a);
}

static void test_baselines(void **st) {
  (void)st;
  fx f;
  fx_init(&f);
  vr_policy_cfg c;
  vr_policy_cfg_default(&c, VR_POL_CLIPPER);
  c.nfixed = 1;
  c.fixed[0] = (vr_policy_fixed){1, 3};
  vr_policy_state ps;
  vr_policy_state_init(&ps);
  vr_actions a;
  vr_actions_init(&a);
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_LOAD), 3);
  /* SM+: scales the fixed variant only, to load */
  vr_vec_clear(&a);
  vr_policy_cfg_default(&c, VR_POL_SM);
  c.nfixed = 1;
  c.fixed[0] = (vr_policy_fixed){2, 1};
  fx_inst(&f, 2, VR_IS_ACTIVE, 500);
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_LOAD), 3); /* 500*1.05/160 -> 4 */
  for (size_t i = 0; i < a.len; i++)
    if (vr_actions_at(&a, i)->kind == VR_ACT_LOAD)
      assert_int_equal(vr_actions_at(&a, i)->variant, 2);
  c.fixed[0].variant = 9;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), VR_EINVAL);
  vr_actions_free(&a);
  vr_policy_state_free(&ps);
}


static void test_recovery_unloads_consolidation(void **st) {
  (void)st;
  fx f;
  fx_init(&f);
  vr_policy_cfg c;
  vr_policy_cfg_default(&c, VR_POL_INFAAS);
  vr_actions a;
  vr_actions_init(&a);
  /* an interfered instance whose batches are back to profile recovers */
  fx_inst(&f, 0, VR_IS_INTERFERED, 10);
  f.in[0].slowdown = 1.0;
  fx_inst(&f, 0, VR_IS_ACTIVE, 10);
  assert_int_equal(vr_policy_states(&c, &f.s, &a), 0);
  int back = 0;
  for (size_t i = 0; i < a.len; i++) {
    vr_action *x = vr_actions_at(&a, i);
    back += x->kind == VR_ACT_SET_ISTATE && x->value == VR_IS_ACTIVE &&
            x->instance == f.in[0].id;
    /* one interfered of two: the variant is not avoided */
    assert_false(x->kind == VR_ACT_SET_VSTATE && x->value == VR_VS_INTERFERED);
  }
  assert_int_equal(back, 1);
  /* idle variant with three instances: after its load time all three go,
   * each unloaded once */
  vr_vec_clear(&a);
  fx_init(&f);
  for (int i = 0; i < 3; i++) fx_inst(&f, 1, VR_IS_ACTIVE, 0);
  vr_policy_state ps;
  vr_policy_state_init(&ps);
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  f.s.now_ns += 1000000000LL;
  vr_vec_clear(&a);
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  int64_t seen[3];
  int n = 0;
  for (size_t i = 0; i < a.len; i++) {
    vr_action *x = vr_actions_at(&a, i);
    if (x->kind != VR_ACT_UNLOAD) continue;
    for (int k = 0; k < n; k++) assert_true(seen[k] != x->instance);
    seen[n++] = x->instance;
  }
  assert_int_equal(n, 3);
  vr_policy_state_free(&ps);
  /* consolidation: two up workers, one instance each; the least-used
   * worker's instance moves to the other (which has room) */
  vr_vec_clear(&a);
  fx_init(&f);
  f.s.nworkers = 2;
  f.w[1] = f.w[0];
  f.w[1].id = 2;
  fx_inst(&f, 0, VR_IS_ACTIVE, 50); /* worker 0 (fx_inst uses worker 0) */
  fx_inst(&f, 0, VR_IS_ACTIVE, 50);
  f.in[1].worker = 1;
  f.w[0].free_cores = 7, f.w[1].free_cores = 7;
  f.in[0].p99_ms = f.in[1].p99_ms = 1;
  vr_policy_state_init(&ps);
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  int moves = 0;
  for (size_t i = 0; i < a.len; i++) {
    vr_action *x = vr_actions_at(&a, i);
    if (x->kind != VR_ACT_MIGRATE) continue;
    moves++;
    assert_true(x->worker != f.in[x->instance - 100].worker);
  }
  assert_int_equal(moves, 1);
  /* never onto an empty worker: all instances on worker 1, worker 0
   * empty -> nothing moves (moving would just ping-pong) */
  vr_vec_clear(&a);
  f.in[0].worker = 1;
  f.w[0].free_cores = 8, f.w[1].free_cores = 6;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  for (size_t i = 0; i < a.len; i++)
    assert_int_not_equal(vr_actions_at(&a, i)->kind, VR_ACT_MIGRATE);
  f.in[0].worker = 0;
  f.w[0].free_cores = 7, f.w[1].free_cores = 7;
  /* not while something is loading */
  vr_vec_clear(&a);
  f.in[0].state = VR_IS_LOADING;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  for (size_t i = 0; i < a.len; i++)
    assert_int_not_equal(vr_actions_at(&a, i)->kind, VR_ACT_MIGRATE);
  vr_policy_state_free(&ps);
  vr_actions_free(&a);
}

/* The answer-time drop point: within deadline + one batch is served,
 * beyond it dropped; no deadline never drops. */
static void test_drop_answer(void **st) {
  (void)st;
  int64_t d = 1000000000, batch = 2000000;
  assert_false(vr_drop_answer_due(d - 1, d, batch));        /* on time */
  assert_false(vr_drop_answer_due(d + batch, d, batch));    /* at the bound */
  assert_true(vr_drop_answer_due(d + batch + 1, d, batch)); /* beyond it */
  assert_true(vr_drop_answer_due(d + 1, d, 0));             /* no batch time */
  assert_false(vr_drop_answer_due(INT64_MAX - 1, VR_NO_DEADLINE, batch));
}

/* A stuck batch: past its time by 50 ms and by its time again; the give-up
 * point of a helper it waits on: its earliest deadline less twice its
 * time, never before it is stuck, none without a deadline. Hand-computed. */
static void test_drop_stuck(void **st) {
  (void)st;
  const int64_t ms = 1000000, t0 = 1000 * ms;
  /* a 2-ms batch is stuck after 2 + 50 ms, a 80-ms one after 80 + 80 */
  assert_int_equal(vr_drop_stuck_after(2 * ms), 52 * ms);
  assert_int_equal(vr_drop_stuck_after(80 * ms), 160 * ms);
  assert_false(vr_drop_batch_stuck(t0 + 52 * ms, t0, 2 * ms));
  assert_true(vr_drop_batch_stuck(t0 + 52 * ms + 1, t0, 2 * ms));
  assert_false(vr_drop_batch_stuck(t0 + 100 * ms, t0, 80 * ms));
  /* deadline 300 ms out, 6-ms batch: give up at 288 ms */
  assert_int_equal(vr_drop_give_up_at(t0, 6 * ms, t0 + 300 * ms), t0 + 288 * ms);
  /* 68 ms out: 56 ms, exactly when the batch is stuck; 67: still 56 */
  assert_int_equal(vr_drop_give_up_at(t0, 6 * ms, t0 + 68 * ms), t0 + 56 * ms);
  assert_int_equal(vr_drop_give_up_at(t0, 6 * ms, t0 + 67 * ms), t0 + 56 * ms);
  /* a deadline too close: not before the batch is stuck (56 ms) */
  assert_int_equal(vr_drop_give_up_at(t0, 6 * ms, t0 + 20 * ms), t0 + 56 * ms);
  assert_int_equal(vr_drop_give_up_at(t0, 6 * ms, VR_NO_DEADLINE), 0);
}

/* Request-path rules added for the INFaaS state machine (issue 13):
 * "behind" (a query joining this queue would miss its SLO), the per-query
 * spill from an Overloaded variant to the cheapest Active one, and the
 * placement preference. */
typedef struct spill_fx {
  long rows[4];  /* backlog per variant; < 0: no serving instance */
  int loading[4]; /* an instance of the variant loads */
  int room;       /* any variant fits */
} spill_fx;

static int spill_available(void *self, int v) {
  spill_fx *x = self;
  return x->rows[v] >= 0 || x->loading[v];
}
static int spill_fits(void *self, int v) {
  (void)v;
  return ((spill_fx *)self)->room;
}
static int spill_backlog(void *self, int v, long *rows) {
  spill_fx *x = self;
  if (x->rows[v] < 0) return 0;
  *rows = x->rows[v];
  return 1;
}

/* Scale-in takes a still-loading instance before a serving one, whatever
 * their arrivals (a loading one can have some: queries join it), and
 * whatever their order. */
static void test_unload_prefers_loading(void **st) {
  (void)st;
  for (int order = 0; order < 2; order++) {
    fx f;
    fx_init(&f);
    fx_inst(&f, 1, order ? VR_IS_ACTIVE : VR_IS_LOADING, order ? 1 : 5);
    fx_inst(&f, 1, order ? VR_IS_LOADING : VR_IS_ACTIVE, order ? 5 : 1);
    vr_place pl;
    assert_int_equal(vr_place_init(&pl, &f.s), 0);
    vr_actions a;
    vr_actions_init(&a);
    assert_int_equal(vr_pol_unload_one(&pl, 1, &a, "test"), 0);
    assert_int_equal(a.len, 1);
    int64_t want = f.in[0].state == VR_IS_LOADING ? f.in[0].id : f.in[1].id;
    assert_int_equal(vr_actions_at(&a, 0)->instance, want);
    vr_vec_free(&a);
    vr_place_free(&pl);
  }
}

/* An AsyFunc body's shadow holds cores of the worker (its free cores
 * count them held) and ends with the body. The placement helpers counted
 * only the body's threads: an unload gave back 1 core of 4, and an
 * in-place upgrade the freed shadow made room for was refused (the
 * controller's MIGRATE had the same fault, fixed in 3694d7e). */
static void test_place_counts_shadow(void **st) {
  (void)st;
  for (int unload = 1; unload >= 0; unload--) {
    fx f;
    fx_init(&f);
    f.v[0].prof.threads = 1, f.v[1].prof.threads = 4;
    fx_inst(&f, 0, VR_IS_ACTIVE, 1);
    f.in[0].worker = 0;
    f.in[0].body = 1, f.in[0].shadow_cores = 3;
    f.w[0].free_cores = 0; /* others hold the other 4 */
    vr_place pl;
    assert_int_equal(vr_place_init(&pl, &f.s), 0);
    if (unload) {
      vr_actions a;
      vr_actions_init(&a);
      assert_int_equal(vr_pol_unload_one(&pl, 0, &a, "test"), 0);
      assert_int_equal(a.len, 1);
      assert_int_equal(pl.free_cores[0], 4); /* body 1 + shadow 3 */
      vr_vec_free(&a);
    } else {
      /* big (4 threads) in place of small: 0 free + 1 + 3 */
      assert_int_equal(vr_place_swap(&pl, 0, 1), 0);
      assert_int_equal(pl.free_cores[0], 0);
      assert_true(pl.gone[0]);
    }
    vr_place_free(&pl);
  }
}

static int fits_only_3(void *self, int v) {
  (void)self;
  return v == 3;
}
static int never(void *self, int v) {
  (void)self, (void)v;
  return 0;
}

/* Step 3's fallback to a variant that fits: the answer describes the
 * variant it routes to (its latency and accuracy), not selection's first
 * choice. */
static void test_route_fallback_describes_variant(void **st) {
  (void)st;
  fx f;
  fx_init(&f);
  vr_select_index *ix = vr_select_new();
  assert_int_equal(vr_select_build(ix, &f.s), 0);
  vr_route_env e = {ix, &f.s, 'a', "cls", never, fits_only_3, never, NULL, NULL};
  vr_query_req q = {vr_select_group(ix, 'a', "cls"), 200, 85, 0};
  vr_selection first = {VR_SEL_LOAD, 2, 999, 99}; /* mid/fp32: no room */
  vr_route r;
  vr_route_decide_sel(&e, &q, &first, &r);
  assert_int_equal(r.outcome, VR_ROUTE_LOAD);
  assert_int_equal(r.variant, 3);
  assert_int_equal(r.sel.variant, 3);
  assert_true(fabs(r.sel.latency_ms - vr_profile_tail_ms(&f.v[3].prof, 1)) < 1e-9);
  assert_true(fabs(r.sel.accuracy - 90) < 1e-9);
  vr_select_free(ix);
}

static void test_request_path_rules(void **st) {
  (void)st;
  /* small: p50 5, 7.5, 10, 12.5 ms (p99 6, 9, 12, 15) at batches 1, 2,
   * 4, 8; the batch for an SLO keeps 2 x p99 within it: 1 under 12 ms,
   * 8 under 30 ms */
  vr_profile p = mkprof("small", "cls", "small/fp32", 5, 80, 1);
  assert_int_equal(vr_profile_batch_for_slo(&p, 12), 1);
  assert_int_equal(vr_profile_batch_for_slo(&p, 30), 8);
  assert_false(vr_route_behind(&p, 0, 12));  /* alone: 5 ms */
  assert_false(vr_route_behind(&p, 1, 12));  /* one batch of 1 ahead: 10 */
  assert_true(vr_route_behind(&p, 2, 12));   /* two ahead: 15 ms */
  assert_false(vr_route_behind(&p, 7, 30));  /* joins a batch of 8: 12.5 */
  assert_false(vr_route_behind(&p, 8, 30));  /* one full batch ahead: 17.5 */
  assert_false(vr_route_behind(&p, 16, 30)); /* two full ahead: 30 ms, not after */
  assert_true(vr_route_behind(&p, 17, 30));  /* and a batch of 2: 32.5 ms */

  fx f;
  fx_init(&f);
  spill_fx x = {{-1, -1, 0, 100}}; /* mid/fp32 idle, mid/int8 far behind */
  vr_route_env e = {NULL, &f.s, 'a', "cls", spill_available, spill_fits,
                    NULL, spill_backlog, &x};
  vr_query_req q = {0, 200, 85, 0};
  vr_selection first = {VR_SEL_ACTIVE, 3, 12, 90};
  vr_route r;
  vr_route_decide_sel(&e, &q, &first, &r);
  assert_int_equal(r.outcome, VR_ROUTE_SERVE);
  assert_int_equal(r.variant, 2); /* spilled to the Active variant */
  assert_int_equal(r.wanted, 3);  /* the demand stays where it was */
  assert_int_equal(r.prefetch, -1); /* 3b took it: nothing to load */
  x.rows[2] = 100;                /* both behind: it stays */
  vr_route_decide_sel(&e, &q, &first, &r);
  assert_int_equal(r.variant, 3);
  assert_int_equal(r.prefetch, -1); /* no room for an inactive variant */
  /* 3c: with room, and int8 Overloaded (the monitoring's state, not only
   * a long queue now), the inactive variant that meets the query with the
   * lowest load + inference time starts loading (big: small is not
   * accurate enough); the query stays and is served where it was sent */
  x.room = 1;
  f.v[3].state = VR_VS_ACTIVE; /* a momentary queue: nothing loads */
  vr_route_decide_sel(&e, &q, &first, &r);
  assert_int_equal(r.variant, 3);
  assert_int_equal(r.prefetch, -1);
  f.v[3].state = VR_VS_OVERLOADED;
  vr_route_decide_sel(&e, &q, &first, &r);
  assert_int_equal(r.outcome, VR_ROUTE_SERVE);
  assert_int_equal(r.variant, 3);
  assert_int_equal(r.prefetch, 1);
  q.min_accuracy = 0; /* small qualifies: as fast to load, faster to run */
  vr_route_decide_sel(&e, &q, &first, &r);
  assert_int_equal(r.prefetch, 0);
  /* one already loading pays no load: the next late query picks it again
   * (and needs no room), not another variant */
  x.room = 0, x.loading[1] = 1;
  vr_route_decide_sel(&e, &q, &first, &r);
  assert_int_equal(r.prefetch, 1);
  x.loading[1] = 0, q.min_accuracy = 85;
  x.rows[2] = 0, x.rows[3] = 2; /* int8 not behind: no spill */
  x.room = 1;
  vr_route_decide_sel(&e, &q, &first, &r);
  assert_int_equal(r.variant, 3);
  assert_int_equal(r.prefetch, -1); /* not overloaded: nothing loads */
  x.room = 0;
  x.rows[3] = 100;
  e.backlog = NULL; /* a caller that does not say never spills */
  vr_route_decide_sel(&e, &q, &first, &r);
  assert_int_equal(r.variant, 3);
  e.backlog = spill_backlog;
  q.min_accuracy = 92; /* only big meets it, and it does not serve */
  vr_route_decide_sel(&e, &q, &first, &r);
  assert_int_equal(r.variant, 3);

  /* placement: a CPU variant may use a GPU machine's spare cores, but a
   * CPU machine first; a machine that is up before one still starting;
   * then the fullest */
  vr_profile cpu = mkprof("m", "a", "m/cpu", 5, 80, 1), gpu = cpu;
  cpu.threads = 4;
  gpu.threads = 1, gpu.device = VR_DEV_GPU;
  assert_true(vr_place_holds(4, 1, 1LL << 30, &cpu));
  assert_false(vr_place_holds(3, 1, 1LL << 30, &cpu));
  assert_false(vr_place_holds(4, 0, 1LL << 30, &gpu));
  assert_false(vr_place_holds(4, 1, 1, &cpu)); /* no memory */
  vr_place_cand cpu_up = {1, 0, 12}, gpu_up = {1, 4, 8}, cpu_start = {0, 0, 4};
  assert_true(vr_place_prefer(cpu_up, gpu_up, &cpu));
  assert_false(vr_place_prefer(gpu_up, cpu_up, &cpu));
  assert_true(vr_place_prefer(gpu_up, cpu_up, &gpu)); /* fuller */
  assert_true(vr_place_prefer(gpu_up, cpu_start, &cpu));
  assert_false(vr_place_prefer(cpu_start, gpu_up, &cpu));
  vr_place_cand fuller = {1, 0, 4};
  assert_true(vr_place_prefer(fuller, cpu_up, &cpu));
}

/* The VM autoscaler (policy.c vr_pol_workers): rule 3 of the paper
 * (§4.2.3) starts a worker when more than 80% of a type's workers hold an
 * overloaded instance, even while replicas still fit; not while one of
 * the type is starting (its room is on the way); replicas that find no
 * room go to a starting worker before another is asked for. */
static void test_vm_autoscaler(void **st) {
  (void)st;
  fx f;
  fx_init(&f);
  vr_policy_cfg c;
  vr_policy_cfg_default(&c, VR_POL_SM);
  vr_policy_state ps;
  vr_policy_state_init(&ps);
  vr_actions a;
  vr_actions_init(&a);
  c.nfixed = 1;
  c.fixed[0].variant = 1, c.fixed[0].instances = 1;
  /* big/fp32 (26.7 qps per instance) at 100 qps: overloaded; 7 cores free */
  fx_inst(&f, 1, VR_IS_ACTIVE, 100);
  f.t[0].max_count = 0;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_LOAD), 3);
  assert_int_equal(count(&a, VR_ACT_ADD_WORKER), 1); /* rule 3 */
  /* off without vm_util (Clipper+-like) */
  vr_vec_clear(&a);
  vr_policy_cfg c0 = c;
  c0.vm_util = 0;
  assert_int_equal(vr_policy_tick(&c0, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_ADD_WORKER), 0);
  /* not while a worker of the type is starting; the replicas go to the
   * worker that is up */
  vr_vec_clear(&a);
  f.w[1] = f.w[0];
  f.w[1].id = 2, f.w[1].state = VR_WS_STARTING, f.w[1].free_cores = 8;
  f.s.nworkers = 2;
  f.t[0].count = 2;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_ADD_WORKER), 0);
  for (size_t i = 0; i < a.len; i++)
    if (vr_actions_at(&a, i)->kind == VR_ACT_LOAD)
      assert_int_equal(vr_actions_at(&a, i)->worker, 0);
  /* the worker that is up is full: the replicas go to the starting one,
   * and still no worker is asked for */
  vr_vec_clear(&a);
  f.w[0].free_cores = 0;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_ADD_WORKER), 0);
  assert_int_equal(count(&a, VR_ACT_LOAD), 3);
  vr_actions_free(&a);
  vr_policy_state_free(&ps);
}

/* A variant that serves only overflow spilled to it (route step 3b): no
 * query chose it this period, so its load is counted in the demand of the
 * variant that overflowed. The autoscaler does not grow it, and releases
 * it as idle after its load time. */
static void test_spill_only(void **st) {
  (void)st;
  fx f;
  fx_init(&f);
  vr_policy_cfg c;
  vr_policy_cfg_default(&c, VR_POL_INFAAS);
  c.consolidate = 0;
  vr_policy_state ps;
  vr_policy_state_init(&ps);
  vr_actions a;
  vr_actions_init(&a);
  /* mid/fp32 serves 300 qps of spill: more than one instance holds (160
   * qps at batch 8 under the 200 ms SLO) */
  fx_inst(&f, 2, VR_IS_ACTIVE, 300);
  f.v[2].arrival_qps = 0, f.in[0].arrival_qps = 0;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_LOAD), 0);
  assert_int_equal(count(&a, VR_ACT_UNLOAD), 0);
  vr_vec_clear(&a);
  f.s.now_ns += 600 * 1000000LL; /* its load time (500 ms) later */
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_int_equal(count(&a, VR_ACT_UNLOAD), 1);
  /* the same load chosen by selection: it grows */
  vr_vec_clear(&a);
  vr_policy_state_free(&ps);
  vr_policy_state_init(&ps);
  f.v[2].arrival_qps = 300, f.in[0].arrival_qps = 300;
  assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
  assert_true(count(&a, VR_ACT_LOAD) > 0);
  assert_int_equal(count(&a, VR_ACT_UNLOAD), 0);
  vr_actions_free(&a);
  vr_policy_state_free(&ps);
}

static int loads_of(vr_actions *a, int variant) {
  int n = 0;
  for (size_t i = 0; i < a->len; i++) {
    vr_action *x = vr_actions_at(a, i);
    n += x->kind == VR_ACT_LOAD && x->variant == variant;
  }
  return n;
}

/* The artifact's CPU replica cap (cpu_max_replicas): a CPU variant that
 * would need more instances than the cap upgrades to a higher-throughput
 * variant that fits now (a GPU one) instead of replicating; where none
 * fits, it replicates anyway, as autoscaler.cc does. */
static void test_cpu_replica_cap(void **st) {
  (void)st;
  vr_policy_cfg c;
  vr_policy_cfg_default(&c, VR_POL_INFAAS);
  c.consolidate = 0;
  vr_actions a;
  vr_actions_init(&a);
  for (int round = 0; round < 3; round++) {
    fx f;
    fx_init(&f);
    /* mid/gpu: 8 rows in 5 ms = 1600 qps, dearer per query than
     * mid/int8 (320 qps at batch 8 under the 200 ms SLO) */
    f.v[1].prof = mkprof("mid", "cls", "mid/gpu", 2, 90, 8);
    f.v[1].prof.device = VR_DEV_GPU;
    f.w[1] = (vr_snap_worker){2, VR_WS_UP, 8, 8, 1, round == 2 ? 0 : 1,
                              16LL << 30, 16LL << 30, 8, 0, -1};
    f.s.nworkers = 2;
    f.t[0].gpus = 1;
    /* two int8 instances at 800 qps need a third */
    fx_inst(&f, 3, VR_IS_ACTIVE, 400);
    fx_inst(&f, 3, VR_IS_ACTIVE, 400);
    c.cpu_max_replicas = round == 0 ? 0 : 2;
    vr_policy_state ps;
    vr_policy_state_init(&ps);
    vr_vec_clear(&a);
    assert_int_equal(vr_policy_tick(&c, &ps, &f.s, &a), 0);
    if (round == 1) { /* capped, and the GPU has room: upgrade */
      assert_int_equal(loads_of(&a, 1), 1);
      assert_int_equal(loads_of(&a, 3), 0);
    } else { /* no cap, or no room for the upgrade: replicate */
      assert_int_equal(loads_of(&a, 1), 0);
      assert_int_equal(loads_of(&a, 3), 1);
    }
    vr_policy_state_free(&ps);
  }
  vr_actions_free(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_drop_answer),
      cmocka_unit_test(test_drop_stuck),
      cmocka_unit_test(test_profile_math),
      cmocka_unit_test(test_profile_json),
      cmocka_unit_test(test_select),
      cmocka_unit_test(test_select_random),
      cmocka_unit_test(test_autoscale),
      cmocka_unit_test(test_interference_and_states),
      cmocka_unit_test(test_baselines),
      cmocka_unit_test(test_recovery_unloads_consolidation),
      cmocka_unit_test(test_request_path_rules),
      cmocka_unit_test(test_route_fallback_describes_variant),
      cmocka_unit_test(test_unload_prefers_loading),
      cmocka_unit_test(test_place_counts_shadow),
      cmocka_unit_test(test_spill_only),
      cmocka_unit_test(test_vm_autoscaler),
      cmocka_unit_test(test_cpu_replica_cap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
