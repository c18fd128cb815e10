/* Loki's MILPs (policy/loki.h) against exhaustive search on small
 * instances, the Proteus-like per-task MILP, and infeasible demand: a best
 * effort plan and explicit drops, never an error, crash or hang. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "policy/loki.h"
#include "sim/psim.h"
#include "vr_test.h"

/* Chain a -> b; a1 (acc 100, mult 2), a2 (acc 80, mult 1); b1 (100), b2
 * (70). Latencies (ms) at batch 1, 2 below; SLO 60 (paths <= 30). */
static const char *CHAIN =
    "{\"name\":\"chain\",\"latency_ms\":60,\"tasks\":["
    "{\"name\":\"a\",\"variants\":[{\"name\":\"a1\",\"accuracy\":100,"
    "\"mult\":2},{\"name\":\"a2\",\"accuracy\":80,\"mult\":1}],"
    "\"children\":[\"b\"]},"
    "{\"name\":\"b\",\"variants\":[{\"name\":\"b1\",\"accuracy\":100},"
    "{\"name\":\"b2\",\"accuracy\":70}]}]}";
static const double LAT[4][2] = {{10, 16}, {4, 6}, {12, 18}, {3, 5}};

static void make(vr_pipe_data *d) {
  memset(d, 0, sizeof *d);
  vr_errbuf err = {0};
  assert_int_equal(vr_pipeline_parse(CHAIN, strlen(CHAIN), &d->pipe, &err), 0);
  vr_pipe_data_index(d);
  d->prof = VR_NEWN(vr_profile, 4);
  for (int i = 0; i < 4; i++) {
    vr_profile_init(&d->prof[i]);
    d->prof[i].lat.p50_ms[0] = LAT[i][0];
    d->prof[i].lat.p50_ms[1] = LAT[i][1];
    d->prof[i].max_batch = 2;
  }
}

static double cap(int slot, int b) { return b * 1000.0 / LAT[slot][b - 1]; }

/* Step 1 by brute force: the fewest workers with a1 and b1 only. */
static int brute_hw(double D, int S) {
  int best = -1;
  for (int na = 1; na <= S; na++)
    for (int nb = 1; na + nb <= S; nb++)
      for (int ba = 1; ba <= 2; ba++)
        for (int bb = 1; bb <= 2; bb++) {
          if (LAT[0][ba - 1] + LAT[2][bb - 1] > 30) continue;
          if (na * cap(0, ba) < D || nb * cap(2, bb) < 2 * D) continue;
          if (best < 0 || na + nb < best) best = na + nb;
        }
  return best;
}

/* Step 2, the flows for one allocation: the best accuracy, exact up to
 * the grid on F1 (the share through a1; the optimum is concave in it).
 * Given F1, the load on b is u = 2 F11 + F21 + ... : b1 carries u1 <= c2
 * and b2 the rest (<= c3); per unit of b1, F21 (from a2) gains 1 x .8 - .7
 * x .8 = .24, F11 (from a1, mult 2) gains (1 - .7) / 2 = .15: fill b1 with
 * a2's outputs first. -1: infeasible. */
static double best_flows(double D, const double *C) {
  double best = -1;
  for (int k = 0; k <= 2002; k++) {
    double F1 = k <= 2000 ? k / 2000.0 : k == 2001 ? C[0] / D : 1 - C[1] / D;
    if (F1 < 0 || F1 > 1) continue;
    double F2 = 1 - F1;
    if (D * F1 > C[0] + 1e-9 || D * F2 > C[1] + 1e-9) continue;
    double total = 2 * F1 + F2; /* b's load per root request */
    double u1 = fmin(C[2] / D, total);
    if (total - u1 > C[3] / D + 1e-9) continue;
    double F21 = fmin(F2, u1), F11 = (u1 - F21) / 2;
    double acc = F11 + (F1 - F11) * .7 + F21 * .8 + (F2 - F21) * .8 * .7;
    if (acc > best) best = acc;
  }
  return best;
}

/* Step 2 by brute force: every allocation of up to S workers (instances
 * and batch per variant) whose hosted paths fit 30 ms, with its best
 * flows. */
static double brute_acc(double D, int S) {
  double best = -1;
  int nopt = 1 + 2 * S, ncode = nopt * nopt * nopt * nopt;
  for (int code = 0; code < ncode; code++) {
    int c = code, used = 0, n[4], b[4];
    for (int i = 0; i < 4; i++, c /= nopt) {
      int o = c % nopt; /* 0: none; else (n, b) */
      n[i] = (o + 1) / 2;
      b[i] = o ? 2 - o % 2 : 1;
      used += n[i];
    }
    if (used > S) continue;
    int ok = 1; /* every path between hosted variants within 30 ms */
    for (int i = 0; i < 2; i++)
      for (int j = 2; j < 4; j++)
        if (n[i] && n[j] && LAT[i][b[i] - 1] + LAT[j][b[j] - 1] > 30) ok = 0;
    if (!ok) continue;
    double C[4];
    for (int i = 0; i < 4; i++) C[i] = n[i] * cap(i, b[i]);
    double acc = best_flows(D, C);
    if (acc > best) best = acc;
  }
  return best;
}

static void check_plan(const vr_pipe_data *d, const vr_pipe_plan *plan,
                       int S) {
  assert_true(plan->workers <= S);
  for (int i = 0; i < 2; i++)
    for (int j = 2; j < 4; j++)
      if (plan->a[i].inst && plan->a[j].inst)
        assert_true(plan->a[i].lat_ms + plan->a[j].lat_ms <= 30 + 1e-9);
  (void)d;
}

static void test_hw_vs_brute(void **st) {
  (void)st;
  vr_pipe_data d;
  make(&d);
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
  vr_errbuf err = {0};
  vr_loki_stats ls;
  const double demand[] = {10, 60, 100, 130, 170, 240};
  for (int k = 0; k < 6; k++) {
    int S = 6, want = brute_hw(demand[k], S);
    assert_int_equal(vr_loki_plan(d.pipe, d.prof, demand[k], S, NULL, &plan,
                                  &ls, &err), 0);
    if (want < 0) { /* accuracy scaling took over */
      assert_int_equal(ls.step, 2);
      continue;
    }
    assert_int_equal(ls.step, 1);
    assert_int_equal(plan.workers, want);
    assert_int_equal(plan.a[1].inst + plan.a[3].inst, 0); /* most accurate */
    assert_true(plan.feasible && !plan.accuracy_scaled);
    check_plan(&d, &plan, S);
  }
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

/* Both searches (latency levels and the one MILP) against brute force:
 * as good as any allocation, and not better than the flows' grid allows.
 * The demands span every regime: a1/b1 only, mixes, the fast paths only,
 * and beyond them. {340, 6}: the one MILP aborted the process inside
 * Clp (an assertion in the feasibility pump's branch and bound, milp.c). */
static void acc_vs_brute(int single) {
  vr_pipe_data d;
  make(&d);
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
  vr_errbuf err = {0};
  vr_loki_stats ls;
  vr_loki_opts o;
  vr_loki_opts_default(&o);
  o.no_hw_scaling = 1;
  o.single_milp = single;
  static const struct { double D; int S; } cases[] = {
      {60, 3},  {100, 3}, {130, 3}, {150, 3}, {175, 3}, {200, 3},
      {225, 3}, {250, 3}, {300, 3}, {120, 4}, {210, 4}, {290, 4},
      {380, 4}, {340, 6}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    double D = cases[k].D;
    int S = cases[k].S;
    double want = brute_acc(D, S);
    assert_int_equal(vr_loki_plan(d.pipe, d.prof, D, S, &o, &plan, &ls,
                                  &err), 0);
    assert_int_equal(ls.subsolves > 0, !single);
    if (want < 0) {
      assert_true(ls.served < 0.999 && !plan.feasible);
      continue;
    }
    double got = ls.accuracy / 100 * ls.served;
    if (!(got >= want - 1e-6 && got <= want + 1e-3))
      fprintf(stderr, "D=%g S=%d single=%d milp %.5f brute %.5f\n", D, S,
              single, got, want);
    assert_true(ls.served > 0.999);
    assert_true(got >= want - 1e-6); /* as good as any allocation */
    assert_true(got <= want + 1e-3); /* and the grid on F1 above */
    assert_true(plan.accuracy_scaled);
    assert_int_equal(plan.workers, S); /* idle workers became headroom */
    check_plan(&d, &plan, S);
  }
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

static void test_accuracy_vs_brute(void **st) {
  (void)st;
  acc_vs_brute(0);
}

static void test_accuracy_single_milp_vs_brute(void **st) {
  (void)st;
  acc_vs_brute(1);
}

/* Accuracy scaling prices workers at 0, so the solver could leave an
 * instance on a variant no flow uses (a2 and b2 at light load, 4 workers:
 * a1 + b1 carry it all); the plan held it, serving nothing (MostAccurateFirst
 * routes it nothing). Every instance is on a variant that carries load, and
 * the idle workers are headroom on those. */
static void test_no_idle_variants(void **st) {
  (void)st;
  vr_pipe_data d;
  make(&d);
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
  vr_errbuf err = {0};
  vr_loki_stats ls;
  vr_loki_opts o;
  vr_loki_opts_default(&o);
  o.no_hw_scaling = 1;
  for (int single = 0; single < 2; single++)
    for (int S = 4; S <= 6; S++)
      for (double D = 10; D <= 60; D += 25) {
        o.single_milp = single;
        assert_int_equal(vr_loki_plan(d.pipe, d.prof, D, S, &o, &plan, &ls,
                                      &err), 0);
        assert_true(ls.served > 0.999);
        assert_int_equal(plan.workers, S);
        vr_pipe_routes r;
        memset(&r, 0, sizeof r);
        assert_int_equal(vr_pipe_route_build(d.pipe, &plan, D, &r), 0);
        for (int i = 0; i < 4; i++)
          if (plan.a[i].inst > 0 && !(r.incoming[i] > 0))
            fail_msg("single=%d S=%d D=%g: %d idle instance(s) of slot %d",
                     single, S, D, plan.a[i].inst, i);
        vr_pipe_routes_free(&r);
      }
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

/* Far beyond what even the fastest variants carry: a best-effort plan,
 * and the simulator drops the excess explicitly. */
static void test_infeasible(void **st) {
  (void)st;
  vr_pipe_data d;
  make(&d);
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
  vr_errbuf err = {0};
  vr_loki_stats ls;
  assert_int_equal(vr_loki_plan(d.pipe, d.prof, 5000, 3, NULL, &plan, &ls,
                                &err), 0);
  assert_int_equal(ls.step, 2);
  assert_true(ls.served > 0.05 && ls.served < 0.5);
  assert_false(plan.feasible);
  assert_int_equal(plan.workers, 3);
  vr_workload wl;
  memset(&wl, 0, sizeof wl);
  wl.kind = VR_WL_POISSON;
  wl.rate = 5000;
  vr_psim_cfg cfg = {.data = &d, .arrivals = &wl, .workers = 3,
                     .duration_s = 5, .tick_s = 1, .seed = 1,
                     .max_queue = 256, .drop_mode = VR_EDROP_REROUTE,
                     .plan = &plan, .ctl_period_s = 10};
  vr_psim_summary s;
  assert_int_equal(vr_psim_run(&cfg, NULL, &s, &err), 0);
  assert_true(s.queries > 20000);
  assert_int_equal(s.ok + s.late + s.dropped, s.queries);
  assert_true(s.dropped > s.queries / 2);
  assert_true(s.ok > 0);
  vr_psim_summary_free(&s);
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

/* An SLO no path can meet at any load (a2 + b2 = 7 ms > 10 / 2) is an
 * error naming the bottleneck stage, not an empty best-effort plan (which
 * unloads the pipeline's every instance and drops every request); so
 * are too few workers for the tasks (test_fewer_workers_than_tasks). */
static void test_slo_infeasible(void **st) {
  (void)st;
  vr_pipe_data d;
  make(&d);
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
  vr_errbuf err = {0};
  d.pipe->slo_ms = 10;
  assert_int_equal(vr_loki_plan(d.pipe, d.prof, 100, 4, NULL, &plan, NULL,
                                &err), VR_EINFEASIBLE);
  assert_non_null(strstr(err.msg, "SLO 10.0 ms is infeasible"));
  assert_non_null(strstr(err.msg, "bottleneck stage 'a' (4.0 ms on 'a2')"));
  d.pipe->slo_ms = 60;
  memset(&err, 0, sizeof err);
  vr_loki_stats ls;
  assert_int_equal(vr_loki_plan(d.pipe, d.prof, 100, 1, NULL, &plan, &ls,
                                &err), VR_EINFEASIBLE);
  assert_non_null(strstr(err.msg, "1 worker(s) cannot host pipeline 'chain'"));
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

/* A task no variant and batch can serve, for a cause other than the SLO
 * along the paths or the workers: no batch size within the max batch (b's
 * profiles allow none; the planner's max_batch 0), or, for the
 * Proteus-like plan, every variant of a task over its own share of the SLO
 * (SLO 14 over 2 tasks, halved: 3.5 ms < a2's 4 ms). Loki's best effort
 * came back rc 0 with an empty plan, the Proteus-like one rc 0 with only
 * the other task hosted; each is VR_EINFEASIBLE naming the task and the
 * cause. */
static void test_unservable_task(void **st) {
  (void)st;
  vr_pipe_data d;
  make(&d);
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
  vr_errbuf err = {0};
  double q[2] = {50, 100};
  d.prof[2].max_batch = d.prof[3].max_batch = 0;
  assert_int_equal(vr_loki_plan(d.pipe, d.prof, 50, 4, NULL, &plan, NULL,
                                &err), VR_EINFEASIBLE);
  assert_non_null(strstr(err.msg, "loki: task 'b' cannot be served: no "
                                  "batch size fits"));
  memset(&err, 0, sizeof err);
  assert_int_equal(vr_proteus_plan(d.pipe, d.prof, q, 4, NULL, &plan, NULL,
                                   &err), VR_EINFEASIBLE);
  assert_non_null(strstr(err.msg, "proteus: task 'b' cannot be served: no "
                                  "batch size fits"));
  d.prof[2].max_batch = d.prof[3].max_batch = 2;
  vr_loki_opts o;
  vr_loki_opts_default(&o);
  o.max_batch = 0;
  memset(&err, 0, sizeof err);
  assert_int_equal(vr_loki_plan(d.pipe, d.prof, 50, 4, &o, &plan, NULL,
                                &err), VR_EINFEASIBLE);
  assert_non_null(strstr(err.msg, "task 'a' cannot be served"));
  assert_non_null(strstr(err.msg, "0 the planner's"));
  d.pipe->slo_ms = 14; /* Loki: a2 + b2 = 7 ms within 7 ms, served */
  vr_loki_stats ls;
  assert_int_equal(vr_loki_plan(d.pipe, d.prof, 50, 4, NULL, &plan, &ls,
                                &err), 0);
  assert_true(ls.served > 0.999);
  memset(&err, 0, sizeof err);
  assert_int_equal(vr_proteus_plan(d.pipe, d.prof, q, 4, NULL, &plan, NULL,
                                   &err), VR_EINFEASIBLE);
  assert_non_null(strstr(err.msg, "proteus: task 'a' cannot be served: "
                                  "every variant takes over the 3.5 ms"));
  assert_non_null(strstr(err.msg, "'a2', 4.0 ms"));
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

/* Variants tied at the top accuracy (one model at two thread counts, as
 * Vario registers them) are all hardware scaling's: 300 req/s fit one
 * worker of the fast one (2 ms), so step 1 plans 1 worker, not accuracy
 * scaling over the whole cluster (the quick bound once looked at the slow
 * one alone: 10 ms, 3 workers > 2). */
static void test_hw_scaling_ties(void **st) {
  (void)st;
  static const char *TIE =
      "{\"name\":\"tie\",\"latency_ms\":60,\"tasks\":[{\"name\":\"a\","
      "\"variants\":[{\"name\":\"a_1thr\",\"accuracy\":90},{\"name\":"
      "\"a_2thr\",\"accuracy\":90},{\"name\":\"a_small\",\"accuracy\":60}]}]}";
  vr_pipe_data d;
  memset(&d, 0, sizeof d);
  vr_errbuf err = {0};
  assert_int_equal(vr_pipeline_parse(TIE, strlen(TIE), &d.pipe, &err), 0);
  vr_pipe_data_index(&d);
  const double lat[3] = {10, 2, 1};
  d.prof = VR_NEWN(vr_profile, 3);
  for (int i = 0; i < 3; i++) {
    vr_profile_init(&d.prof[i]);
    d.prof[i].lat.p50_ms[0] = lat[i];
    d.prof[i].max_batch = 1;
  }
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
  vr_loki_stats ls;
  assert_int_equal(vr_loki_plan(d.pipe, d.prof, 300, 2, NULL, &plan, &ls,
                                &err), 0);
  assert_int_equal(ls.step, 1);
  assert_int_equal(plan.workers, 1);
  assert_int_equal(plan.a[1].inst, 1);
  assert_false(plan.accuracy_scaled);
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

/* Proteus-like: per-task demand, whole cluster, accuracy lowered where a
 * task alone cannot keep up; unaware of the detector's fan-out. */
static void test_proteus(void **st) {
  (void)st;
  vr_pipe_data d;
  make(&d);
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
  vr_errbuf err = {0};
  vr_loki_stats ls;
  double q[2] = {50, 50}; /* light: most accurate everywhere */
  assert_int_equal(vr_proteus_plan(d.pipe, d.prof, q, 4, NULL, &plan, &ls,
                                   &err), 0);
  assert_int_equal(plan.workers, 4);
  assert_true(plan.a[0].inst > 0 && plan.a[2].inst > 0);
  assert_int_equal(plan.a[1].inst + plan.a[3].inst, 0);
  assert_true(fabs(ls.accuracy - 100) < 1e-6);
  q[0] = 150, q[1] = 600; /* b needs its fast variant */
  assert_int_equal(vr_proteus_plan(d.pipe, d.prof, q, 4, NULL, &plan, &ls,
                                   &err), 0);
  assert_true(plan.a[3].inst > 0);
  assert_true(ls.accuracy < 100 && ls.served > 0.999);
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

/* Proteus-like on fewer workers than the tasks a request reaches: each
 * task planned on its own, one worker went to one task and the plan (rc
 * 0) passed no request; it is VR_EINFEASIBLE naming the tasks, as in
 * vr_loki_plan. Two workers host both. */
static void test_proteus_fewer_workers(void **st) {
  (void)st;
  vr_pipe_data d;
  make(&d);
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
  vr_errbuf err = {0};
  double q[2] = {50, 100};
  assert_int_equal(vr_proteus_plan(d.pipe, d.prof, q, 1, NULL, &plan, NULL,
                                   &err), VR_EINFEASIBLE);
  assert_non_null(strstr(err.msg, "1 worker(s) cannot host pipeline "
                                  "'chain': a request needs an instance of "
                                  "each task it reaches ('a', 'b'), 2"));
  vr_loki_stats ls;
  assert_int_equal(vr_proteus_plan(d.pipe, d.prof, q, 2, NULL, &plan, &ls,
                                   &err), 0);
  assert_true(plan.a[0].inst + plan.a[1].inst > 0);
  assert_true(plan.a[2].inst + plan.a[3].inst > 0);
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

/* det (5 variants, fan-out 2..18) -> car (8) and face (5), Loki's traffic
 * analysis in shape: large enough that CBC's root LP takes a millisecond
 * or more. */
static void make_big(vr_pipe_data *d) {
  char js[4096];
  int n = snprintf(js, sizeof js, "{\"name\":\"big\",\"latency_ms\":250,"
                   "\"tasks\":[{\"name\":\"det\",\"variants\":[");
  for (int v = 0; v < 5; v++)
    n += snprintf(js + n, sizeof js - n, "%s{\"name\":\"d%d\",\"accuracy\":"
                  "%d,\"mult\":%d}", v ? "," : "", v, 50 + 10 * v, 2 + 4 * v);
  n += snprintf(js + n, sizeof js - n, "],\"children\":[{\"task\":\"car\","
                "\"label\":\"car\"},{\"task\":\"face\",\"label\":\"face\"}]},"
                "{\"name\":\"car\",\"variants\":[");
  for (int v = 0; v < 8; v++)
    n += snprintf(js + n, sizeof js - n, "%s{\"name\":\"c%d\",\"accuracy\":"
                  "%d}", v ? "," : "", v, 60 + 5 * v);
  n += snprintf(js + n, sizeof js - n, "]},{\"name\":\"face\",\"variants\":[");
  for (int v = 0; v < 5; v++)
    n += snprintf(js + n, sizeof js - n, "%s{\"name\":\"f%d\",\"accuracy\":"
                  "%d}", v ? "," : "", v, 70 + 6 * v);
  snprintf(js + n, sizeof js - n, "]}]}");
  memset(d, 0, sizeof *d);
  vr_errbuf err = {0};
  assert_int_equal(vr_pipeline_parse(js, strlen(js), &d->pipe, &err), 0);
  vr_pipe_data_index(d);
  d->prof = VR_NEWN(vr_profile, 18);
  for (int i = 0; i < 18; i++) {
    int v = i < 5 ? i : i < 13 ? i - 5 : i - 13;
    vr_profile_init(&d->prof[i]);
    for (int b = 0; b < 7; b++)
      d->prof[i].lat.p50_ms[b] = (2 + 3 * v) * (1 + 0.25 * (1 << b));
    d->prof[i].max_batch = 64;
  }
}

/* CBC's time limit: a plan CBC stopped with is used if it serves; no plan
 * in time (or only one serving nothing: the best effort's zero vector) is
 * VR_EBACKEND saying so, never VR_EINFEASIBLE (which the time limit once
 * passed off as a proof, with no message) and never rc 0 with an empty
 * plan; hardware scaling out of time goes on to accuracy scaling, as when
 * it has no plan. Limits from far too short to enough, every demand
 * regime (under ASan the short ones ran out inside CBC's preprocessing,
 * which crashed: milp.c). */
static void test_time_limit(void **st) {
  (void)st;
  vr_pipe_data d;
  make_big(&d);
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
  double q[3];
  int timed_out = 0;
  for (double tl = 1e-6; tl < 0.005; tl *= 4)
    for (int kind = 0; kind < 3; kind++) /* levels, one MILP, Proteus */
      for (double D = 10; D <= 3000; D *= 6) {
        vr_loki_opts o;
        vr_loki_opts_default(&o);
        o.time_limit_s = tl, o.single_milp = kind == 1, o.slack = 1.5;
        vr_errbuf err = {0};
        vr_loki_stats ls;
        q[0] = D, q[1] = q[2] = 5 * D;
        int rc = kind == 2 ? vr_proteus_plan(d.pipe, d.prof, q, 20, &o,
                                             &plan, &ls, &err)
                           : vr_loki_plan(d.pipe, d.prof, D, 20, &o, &plan,
                                          &ls, &err);
        if (rc == 0 && ls.served > 1e-9 && plan.workers > 0) continue;
        if (rc != VR_EBACKEND || !strstr(err.msg, "time limit"))
          fail_msg("limit %g s, kind %d, D=%g: rc %d, served %.3f, '%s'", tl,
                   kind, D, rc, ls.served, err.msg);
        if (kind < 2 && ls.step == 1) /* Loki scales accuracy next */
          fail_msg("limit %g s, kind %d, D=%g: no hardware plan in time "
                   "ended the plan", tl, kind, D);
        timed_out++;
      }
  assert_true(timed_out > 0); /* the limits did bind */
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

/* The plan's budget (opts.plan_budget_s) bounds all its solves, where the
 * per-solve limit let a plan of hundreds of solves run hundreds of times
 * it: with a budget spent by the first solve, no other solve starts (the
 * loop of latency levels stops) and the answer says the plan's limit ran
 * out. Without a budget, or with the default one, plans are the same. */
static void test_plan_budget(void **st) {
  (void)st;
  vr_pipe_data d;
  make_big(&d);
  vr_pipe_plan plan, ref;
  assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
  assert_int_equal(vr_pipe_plan_init(&ref, d.pipe), 0);
  for (double D = 10; D <= 3000; D *= 6) {
    vr_loki_opts o;
    vr_loki_opts_default(&o);
    o.slack = 1.5, o.plan_budget_s = 1e-9;
    vr_errbuf err = {0};
    vr_loki_stats ls;
    int rc = vr_loki_plan(d.pipe, d.prof, D, 20, &o, &plan, &ls, &err);
    if (rc != VR_EBACKEND || !strstr(err.msg, "per plan") || !ls.budget_out ||
        ls.subsolves > 1)
      fail_msg("D=%g: rc %d, budget_out %d, %d subsolves, '%s'", D, rc,
               ls.budget_out, ls.subsolves, err.msg);
    double acc[2];
    for (int k = 0; k < 2; k++) { /* no budget, the default budget */
      vr_loki_opts_default(&o);
      o.slack = 1.5, o.plan_budget_s = k ? o.plan_budget_s : 0;
      assert_int_equal(vr_loki_plan(d.pipe, d.prof, D, 20, &o, k ? &plan : &ref,
                                    &ls, &err), 0);
      assert_false(ls.budget_out);
      acc[k] = ls.accuracy;
    }
    assert_true(fabs(acc[0] - acc[1]) < 1e-9);
    assert_int_equal(plan.workers, ref.workers);
  }
  vr_pipe_plan_free(&plan);
  vr_pipe_plan_free(&ref);
  vr_pipe_data_free(&d);
}

/* One labelled and one unlabelled child: each detection goes to one child
 * (its label's, else the unlabelled one), so until shares are measured the
 * two split the detector's outputs (1/2 each), and what the planner and
 * MostAccurateFirst expect at each child is what the simulator sends. The
 * unlabelled child's default share was 1 beside the labelled child's 1:
 * the planner provisioned both for every output (2 instances each here),
 * while each output reached one child. */
static void test_labelled_and_unlabelled_child(void **st) {
  (void)st;
  static const char *FORK =
      "{\"name\":\"fork\",\"latency_ms\":100,\"tasks\":["
      "{\"name\":\"det\",\"variants\":[{\"name\":\"d1\",\"accuracy\":100,"
      "\"mult\":2}],\"children\":[{\"task\":\"car\",\"label\":\"car\"},"
      "\"rest\"]},"
      "{\"name\":\"car\",\"variants\":[{\"name\":\"c1\",\"accuracy\":100}]},"
      "{\"name\":\"rest\",\"variants\":[{\"name\":\"r1\",\"accuracy\":100}]}]}";
  vr_pipe_data d;
  memset(&d, 0, sizeof d);
  vr_errbuf err = {0};
  assert_int_equal(vr_pipeline_parse(FORK, strlen(FORK), &d.pipe, &err), 0);
  const vr_pipeline *p = d.pipe;
  /* the live router: "car" to car, any other label to rest */
  assert_int_equal(vr_pipe_task_route_label(p, &p->tasks[0], "car"), 0);
  assert_int_equal(vr_pipe_task_route_label(p, &p->tasks[0], "person"), 1);
  vr_pipe_data_index(&d);
  d.prof = VR_NEWN(vr_profile, 3);
  for (int i = 0; i < 3; i++) { /* 10 ms alone: 100/s per instance */
    vr_profile_init(&d.prof[i]);
    d.prof[i].lat.p50_ms[0] = 10;
    d.prof[i].max_batch = 1;
  }
  /* 80 frames/s, 160 detections/s: 80/s to each child, one instance each */
  double rate[3];
  int choice[3] = {0, 0, 0};
  vr_pipeline_rates(p, choice, NULL, 80, rate);
  assert_true(fabs(rate[1] + rate[2] - 160) < 1e-9);
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, p), 0);
  vr_loki_stats ls;
  assert_int_equal(vr_loki_plan(p, d.prof, 80, 8, NULL, &plan, &ls, &err), 0);
  assert_int_equal(ls.step, 1);
  assert_int_equal(plan.a[1].inst, 1);
  assert_int_equal(plan.a[2].inst, 1);
  vr_pipe_routes r;
  memset(&r, 0, sizeof r);
  assert_int_equal(vr_pipe_route_build(p, &plan, 80, &r), 0);
  assert_true(fabs(r.incoming[1] + r.incoming[2] - 160) < 1e-9);
  /* the simulator, exactly 2 detections per frame: what reaches each
   * child is what was planned for it */
  vr_workload wl;
  memset(&wl, 0, sizeof wl);
  wl.kind = VR_WL_CONSTANT;
  wl.rate = 80;
  vr_psim_cfg cfg = {.data = &d, .arrivals = &wl, .workers = 8,
                     .duration_s = 20, .tick_s = 1, .seed = 5,
                     .max_queue = 256, .drop_mode = VR_EDROP_NONE,
                     .plan = &plan, .ctl_period_s = 10, .fanout_exact = 1};
  vr_psim_summary s;
  assert_int_equal(vr_psim_run(&cfg, NULL, &s, &err), 0);
  assert_int_equal(s.task[1].requests + s.task[2].requests, 2 * s.task[0].served);
  for (int c = 1; c <= 2; c++) {
    double sent = (double)s.task[c].requests / cfg.duration_s;
    assert_true(fabs(sent - r.incoming[c]) < 0.1 * r.incoming[c]);
    assert_true(fabs(sent - rate[c]) < 0.1 * rate[c]);
  }
  vr_psim_summary_free(&s);
  vr_pipe_routes_free(&r);
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

/* scratch: not committed */
/* A detector and two children (fashion_scenes' shape) on 2 workers: a
 * request reaches all 3 tasks, so nothing can be served. The best effort
 * once came back as a plan (rc 0) with the solver's arbitrary instances,
 * e.g. on both children and none on the root, and every live request
 * ended "task 'detect': no instance serves the task"; it is an error
 * naming the tasks. 3 workers serve, through every task. */
static void test_fewer_workers_than_tasks(void **st) {
  (void)st;
  static const char *FS =
      "{\"name\":\"fs\",\"latency_ms\":100,\"tasks\":["
      "{\"name\":\"detect\",\"variants\":[{\"name\":\"d1\",\"accuracy\":80,"
      "\"mult\":3},{\"name\":\"d2\",\"accuracy\":99,\"mult\":4.5}],"
      "\"children\":[{\"task\":\"garment\",\"label\":\"garment\"},"
      "{\"task\":\"footwear_bag\",\"label\":\"footwear_bag\"}]},"
      "{\"name\":\"garment\",\"variants\":[{\"name\":\"g1\",\"accuracy\":77},"
      "{\"name\":\"g2\",\"accuracy\":87}]},"
      "{\"name\":\"footwear_bag\",\"variants\":[{\"name\":\"f1\","
      "\"accuracy\":77},{\"name\":\"f2\",\"accuracy\":87}]}]}";
  vr_pipe_data d;
  memset(&d, 0, sizeof d);
  vr_errbuf err = {0};
  assert_int_equal(vr_pipeline_parse(FS, strlen(FS), &d.pipe, &err), 0);
  vr_pipe_data_index(&d);
  d.prof = VR_NEWN(vr_profile, 6);
  const double base[6] = {1, 4, 0.3, 1, 0.3, 1};
  for (int i = 0; i < 6; i++) {
    vr_profile_init(&d.prof[i]);
    for (int b = 0; b < 7; b++)
      d.prof[i].lat.p50_ms[b] = base[i] * (1 + 0.3 * (1 << b));
    d.prof[i].max_batch = 64;
  }
  const double demand[3] = {1, 200, 1000};
  for (int k = 0; k < 3; k++)
    for (int hw = 0; hw < 2; hw++) {
      vr_loki_opts o;
      vr_loki_opts_default(&o);
      o.hw_only = hw;
      vr_pipe_plan plan;
      assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
      memset(&err, 0, sizeof err);
      assert_int_equal(vr_loki_plan(d.pipe, d.prof, demand[k], 2, &o, &plan,
                                    NULL, &err), VR_EINFEASIBLE);
      assert_non_null(strstr(err.msg, "2 worker(s) cannot host pipeline 'fs'"));
      assert_non_null(strstr(err.msg, "('detect', 'garment', 'footwear_bag'), 3"));
      vr_loki_stats ls;
      assert_int_equal(vr_loki_plan(d.pipe, d.prof, demand[k], 3, &o, &plan,
                                    &ls, &err), 0);
      assert_true(ls.served > 0.01);
      for (int t = 0; t < 3; t++) /* an instance on every task */
        assert_true(plan.a[plan.off[t]].inst + plan.a[plan.off[t] + 1].inst > 0);
      vr_pipe_plan_free(&plan);
    }
  vr_pipe_data_free(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hw_vs_brute),
      cmocka_unit_test(test_accuracy_vs_brute),
      cmocka_unit_test(test_accuracy_single_milp_vs_brute),
      cmocka_unit_test(test_no_idle_variants),
      cmocka_unit_test(test_infeasible),
      cmocka_unit_test(test_slo_infeasible),
      cmocka_unit_test(test_unservable_task),
      cmocka_unit_test(test_hw_scaling_ties),
      cmocka_unit_test(test_proteus),
      cmocka_unit_test(test_proteus_fewer_workers),
      cmocka_unit_test(test_time_limit),
      cmocka_unit_test(test_plan_budget),
      cmocka_unit_test(test_labelled_and_unlabelled_child),
      cmocka_unit_test(test_fewer_workers_than_tasks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
