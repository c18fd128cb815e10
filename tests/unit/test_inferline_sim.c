/* InferLine on the pipeline simulator: the planner with psim as its
 * estimator, the coarse baselines and the tuner as a psim controller, on
 * a small Loki-format data set written here (two accelerators). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vr_test.h"

#include "base/alloc.h"
#include "sim/il_sim.h"
#include "sim/psim_stage.h"

static char dir[256];

/* Writes the data set: NULL-terminated (relative path, text) pairs. */
static int write_files(const char *const *kv) {
  const char *sub[] = {"", "/apps", "/model_variants", "/model_variants/demo",
                       "/model_variants/deep", "/profiling"};
  char path[512];
  for (size_t i = 0; i < sizeof sub / sizeof *sub; i++) {
    snprintf(path, sizeof path, "%s%s", dir, sub[i]);
    if (mkdir(path, 0700) && errno != EEXIST) return -1;
  }
  for (; kv[0]; kv += 2) {
    snprintf(path, sizeof path, "%s/%s", dir, kv[0]);
    FILE *f = fopen(path, "w");
    if (!f || fputs(kv[1], f) < 0 || fclose(f)) return -1;
  }
  return 0;
}

static int setup_dir(void **st) {
  (void)st;
  snprintf(dir, sizeof dir, "/tmp/vr_test_ilsim_%d", (int)getpid());
  /* det fans out 3 outputs per query: 2/3 to cls, 1/3 to face */
  static const char *const files[] = {
      "apps/demo.json",
      "{\"appName\":\"demo\",\"latencySLOInMSec\":150,\"root\":{"
      "\"task\":\"det\",\"model_variants\":[\"det_s\",\"det_l\"],"
      "\"children\":[{\"task\":\"cls\",\"label\":1,"
      "\"model_variants\":[\"cls_a\"],\"children\":[]},"
      "{\"task\":\"face\",\"label\":0,\"model_variants\":[\"face_a\"],"
      "\"children\":[]}]}}",
      "model_variants/demo/det", "det_s,80\ndet_l,100\n",
      "model_variants/demo/cls", "cls_a,100\n",
      "model_variants/demo/face", "face_a,100\n",
      "profiling/simulator_runtimes.csv",
      ",Model,Accel,batchsize,avg_runtime,50th_pct,90th_pct,95th_pct\n"
      "0,det_s,gpu,1,5,5,6,7\n"
      "1,det_l,gpu,1,10,10,11,12\n"
      "2,det_l,gpu,2,14,14,15,16\n"
      "3,det_l,gpu,4,20,20,21,22\n"
      "4,det_l,gpu,8,32,32,34,35\n"
      "5,det_l,cpu,1,40,40,44,45\n"
      "6,det_l,cpu,2,75,75,80,82\n"
      "7,det_s,cpu,1,20,20,22,23\n"
      "8,cls_a,gpu,1,3,3,4,4\n"
      "9,cls_a,gpu,2,4,4,5,5\n"
      "10,cls_a,gpu,4,6,6,7,7\n"
      "11,cls_a,gpu,8,10,10,11,11\n"
      "12,cls_a,cpu,1,8,8,9,9\n"
      "13,cls_a,cpu,2,15,15,16,16\n"
      "14,cls_a,cpu,4,29,29,30,30\n"
      "15,face_a,gpu,1,3,3,4,4\n"
      "16,face_a,gpu,2,5,5,6,6\n"
      "17,face_a,cpu,1,6,6,7,7\n"
      "18,face_a,cpu,2,11,11,12,12\n"
      "19,tail_a,gpu,1,2,2,3,3\n"
      "20,tail_a,gpu,2,3,3,4,4\n",
      "profiling/branching.csv",
      ",model,mult_factor,cls,face,tail\n"
      "0,det_s,2,0.5,0.5,0\n"
      "1,det_l,3,0.6666667,0.3333333,0\n"
      "2,cls_a,1.5,0,0,0.8\n",
      /* three levels: det -> cls -> tail, and face (demo's cls is a leaf) */
      "apps/deep.json",
      "{\"appName\":\"deep\",\"latencySLOInMSec\":150,\"root\":{"
      "\"task\":\"det\",\"model_variants\":[\"det_l\"],"
      "\"children\":[{\"task\":\"cls\",\"label\":1,"
      "\"model_variants\":[\"cls_a\"],\"children\":[{\"task\":\"tail\","
      "\"model_variants\":[\"tail_a\"],\"children\":[]}]},"
      "{\"task\":\"face\",\"label\":0,\"model_variants\":[\"face_a\"],"
      "\"children\":[]}]}}",
      "model_variants/deep/det", "det_l,100\n",
      "model_variants/deep/cls", "cls_a,100\n",
      "model_variants/deep/tail", "tail_a,100\n",
      "model_variants/deep/face", "face_a,100\n",
      NULL};
  return write_files(files);
}

static int teardown_dir(void **st) {
  (void)st;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) ? -1 : 0;
}

typedef struct fixture {
  vr_pipe_data d[2];
  vr_il_sim s;
  vr_workload sample;
} fixture;

static void load(fixture *f, double rate, double cv) {
  vr_errbuf err = {0};
  memset(f, 0, sizeof *f);
  const char *acc[] = {"gpu", "cpu"};
  double price[] = {1.0, 0.2};
  for (int h = 0; h < 2; h++)
    assert_int_equal(vr_loki_load(dir, "demo", acc[h], &f->d[h], &err), 0);
  const vr_pipe_data *by[] = {&f->d[0], &f->d[1]};
  assert_int_equal(vr_il_sim_init(&f->s, by, acc, price, 2, &err), 0);
  f->sample = vr_wl_gamma(rate, cv);
  assert_int_equal(vr_il_sim_sample(&f->s, &f->sample, 60, 7, &err), 0);
}

static void unload(fixture *f) {
  vr_il_sim_free(&f->s);
  vr_pipe_data_free(&f->d[0]);
  vr_pipe_data_free(&f->d[1]);
}

static void test_problem_from_data(void **st) {
  (void)st;
  fixture f;
  load(&f, 40, 1);
  const vr_il_problem *pb = &f.s.pb;
  assert_int_equal(pb->nstages, 3);
  assert_true(pb->slo_ms == 150);
  /* the most accurate detector, its factor split by the shares */
  assert_string_equal(pb->st[0].hw[0].variant, "det_l@gpu");
  assert_string_equal(pb->st[0].hw[1].variant, "det_l@cpu");
  assert_true(fabs(pb->st[1].scale - 2) < 1e-6);
  assert_true(fabs(pb->st[2].scale - 1) < 1e-6);
  assert_true(pb->st[0].hw[1].cost_per_s == 0.2);
  /* the sample is what psim replays: a static run counts as many */
  assert_true(fabs(pb->rate_qps - 40) < 4);
  vr_il_config c;
  vr_errbuf err = {0};
  assert_int_equal(vr_il_coarse(pb, 1000, &c, &err), 0);
  vr_pipe_plan plan;
  assert_int_equal(vr_il_sim_plan(&f.s, &c, &plan), 0);
  vr_workload wl = f.sample;
  vr_psim_cfg pc = {.data = &f.s.data, .arrivals = &wl, .workers = 1000,
                    .duration_s = 60, .tick_s = 1, .seed = 7,
                    .max_queue = 4096, .ctl_period_s = 10, .plan = &plan};
  vr_psim_summary sum;
  assert_int_equal(vr_psim_run(&pc, NULL, &sum, &err), 0);
  assert_int_equal(sum.queries, (int64_t)f.s.n);
  vr_psim_summary_free(&sum);
  vr_pipe_plan_free(&plan);
  unload(&f);
}

/* The planner's answer is one the simulator itself accepts, the same on
 * a second call (deterministic), and cheaper than both baselines. */
static void test_plan_on_simulator(void **st) {
  (void)st;
  fixture f;
  load(&f, 40, 1);
  vr_il_config c, c2;
  vr_il_stats s;
  vr_errbuf err = {0};
  assert_int_equal(vr_il_plan(&f.s.pb, &c, &s, &err), 0);
  assert_true(c.p99_ms <= f.s.pb.slo_ms);
  double p99;
  assert_int_equal(vr_il_sim_estimate(&f.s, &f.s.pb, &c, f.s.pb.slo_ms, &p99), 0);
  assert_true(p99 == c.p99_ms);
  assert_int_equal(vr_il_plan(&f.s.pb, &c2, NULL, &err), 0);
  assert_memory_equal(c.st, c2.st, sizeof c.st[0] * 3);
  /* every replica removal from the plan misses the SLO per psim */
  for (int m = 0; m < 3; m++) {
    if (c.st[m].replicas < 2) continue;
    vr_il_config t = c;
    t.st[m].replicas--;
    assert_int_equal(vr_il_sim_estimate(&f.s, &f.s.pb, &t, f.s.pb.slo_ms, &p99), 0);
    assert_true(p99 > f.s.pb.slo_ms);
  }
  vr_il_config peak;
  double pq = vr_il_peak_qps(f.s.t, f.s.n, 150000000);
  assert_true(pq > f.s.pb.rate_qps);
  assert_int_equal(vr_il_coarse(&f.s.pb, pq, &peak, &err), 0);
  assert_true(c.cost_per_s < peak.cost_per_s);
  /* evaluating the plan on its own sample with the estimator's seed
   * reproduces the estimate exactly (the same service-time draws): the
   * estimator and the evaluation are one simulator */
  vr_il_result r;
  assert_int_equal(vr_il_sim_eval(&f.s, VR_ILP_PLAN_ONLY, &f.sample, 60, 7,
                                  1, 0, NULL, &r, &err), 0);
  assert_true(fabs(r.p99_ms - c.p99_ms) < 0.01);
  assert_true(r.miss_pct <= 1.0);
  assert_true(fabs(r.cost_per_s - c.cost_per_s) < 1e-9);
  unload(&f);
}

static void test_infeasible_slo(void **st) {
  (void)st;
  fixture f;
  load(&f, 40, 1);
  f.s.pb.slo_ms = 12; /* det_l alone takes 10 ms on the GPU, cls 3 more */
  vr_il_config c;
  vr_errbuf err = {0};
  assert_int_equal(vr_il_plan(&f.s.pb, &c, NULL, &err), VR_EINFEASIBLE);
  assert_non_null(strstr(err.msg, "bottleneck stage 'det'"));
  vr_il_result r;
  assert_int_equal(vr_il_sim_eval(&f.s, VR_ILP_CG_MEAN, &f.sample, 10, 1, 0,
                                  0, NULL, &r, &err), VR_EINFEASIBLE);
  unload(&f);
}

/* Planned on steady CV 1 traffic, served a 3x rate ramp: the tuner adds
 * replicas, planner-only misses far more. */
static void test_tuner_in_simulator(void **st) {
  (void)st;
  fixture f;
  load(&f, 40, 1);
  vr_workload ramp = vr_wl_gamma(40, 1);
  vr_wl_point pts[] = {{0, 40}, {20, 40}, {40, 120}, {90, 120}};
  ramp.kind = VR_WL_PIECEWISE;
  ramp.pts = pts, ramp.npts = 4;
  vr_il_result tuned, fixed;
  vr_errbuf err = {0};
  assert_int_equal(vr_il_sim_eval(&f.s, VR_ILP_INFERLINE, &ramp, 90, 3, 1, 1,
                                  NULL, &tuned, &err), 0);
  assert_int_equal(vr_il_sim_eval(&f.s, VR_ILP_PLAN_ONLY, &ramp, 90, 3, 1, 1,
                                  NULL, &fixed, &err), 0);
  assert_true(tuned.ups >= 1);
  assert_true(tuned.max_cost_per_s > tuned.cfg.cost_per_s);
  assert_true(tuned.cost_per_s > fixed.cost_per_s);
  assert_true(fixed.miss_pct > 10);
  assert_true(tuned.miss_pct < fixed.miss_pct / 5);
  assert_int_equal(vr_il_policy_parse("cg_peak"), VR_ILP_CG_PEAK);
  assert_int_equal(vr_il_policy_parse("nope"), -1);
  assert_string_equal(vr_il_policy_name(VR_ILP_INFERLINE), "inferline");
  unload(&f);
}

/* The estimator stops a run once the P99 is known to miss (psim's
 * stop_bad) and says so; the full run agrees that it misses. */
static void test_estimator_stops_early(void **st) {
  (void)st;
  fixture f;
  load(&f, 40, 1);
  vr_il_config c;
  vr_errbuf err = {0};
  assert_int_equal(vr_il_plan(&f.s.pb, &c, NULL, &err), 0);
  c.st[0] = (vr_il_stage_cfg){1, 1, 1}; /* detector on the CPU: 25 qps */
  double p99;
  assert_int_equal(vr_il_sim_estimate(&f.s, &f.s.pb, &c, f.s.pb.slo_ms, &p99), 0);
  assert_true(isinf(p99));
  vr_pipe_plan plan;
  assert_int_equal(vr_il_sim_plan(&f.s, &c, &plan), 0);
  vr_workload wl = f.sample;
  vr_psim_cfg pc = {.data = &f.s.data, .arrivals = &wl, .workers = 1000,
                    .duration_s = 60, .tick_s = 1, .seed = 7,
                    .max_queue = 4096, .ctl_period_s = 10, .plan = &plan,
                    .stop_bad = 10};
  vr_psim_summary sum;
  assert_int_equal(vr_psim_run(&pc, NULL, &sum, &err), 0);
  assert_int_equal(sum.stopped, 1);
  assert_true(sum.late + sum.dropped <= 10);
  vr_psim_summary_free(&sum);
  pc.stop_bad = 0;
  wl = f.sample;
  assert_int_equal(vr_psim_run(&pc, NULL, &sum, &err), 0);
  assert_int_equal(sum.stopped, 0);
  assert_true(sum.p99_ms > f.s.pb.slo_ms);
  vr_psim_summary_free(&sum);
  pc.stop_bad = -1;
  assert_int_equal(vr_psim_run(&pc, NULL, &sum, &err), VR_EINVAL);
  pc.stop_bad = 10, pc.stop_above_ms = -1;
  assert_int_equal(vr_psim_run(&pc, NULL, &sum, &err), VR_EINVAL);
  vr_pipe_plan_free(&plan);
  unload(&f);
}

/* A bound below the SLO (the planner comparing batch raises): exact at or
 * above the P99, INFINITY just below it, and that run stops early. */
static void test_estimator_bound(void **st) {
  (void)st;
  fixture f;
  load(&f, 40, 1);
  vr_il_config c;
  vr_errbuf err = {0};
  assert_int_equal(vr_il_plan(&f.s.pb, &c, NULL, &err), 0);
  double p99, b;
  assert_int_equal(vr_il_sim_estimate(&f.s, &f.s.pb, &c, f.s.pb.slo_ms, &p99), 0);
  assert_true(p99 < f.s.pb.slo_ms);
  assert_int_equal(vr_il_sim_estimate(&f.s, &f.s.pb, &c, p99, &b), 0);
  assert_true(b == p99);
  assert_int_equal(vr_il_sim_estimate(&f.s, &f.s.pb, &c, nextafter(p99, 0), &b), 0);
  assert_true(isinf(b));
  /* half the P99: many queries are above it, so psim stops early */
  vr_pipe_plan plan;
  assert_int_equal(vr_il_sim_plan(&f.s, &c, &plan), 0);
  vr_workload wl = f.sample;
  vr_psim_cfg pc = {.data = &f.s.data, .arrivals = &wl, .workers = 1000,
                    .duration_s = 60, .tick_s = 1, .seed = 7, .noise = 1,
                    .max_queue = 4096, .ctl_period_s = 10, .plan = &plan,
                    .replay_ns = f.s.t, .replay_n = f.s.n,
                    .stop_bad = 10, .stop_above_ms = p99 / 2};
  vr_psim_summary sum;
  assert_int_equal(vr_psim_run(&pc, NULL, &sum, &err), 0);
  assert_int_equal(sum.stopped, 1);
  assert_true(sum.ok + sum.late < (int64_t)f.s.n / 10);
  vr_psim_summary_free(&sum);
  vr_pipe_plan_free(&plan);
  unload(&f);
}

/* The estimator replays the sample's arrivals (psim's replay_ns) instead
 * of drawing them again: the run is the one drawing gives, to the
 * request. */
static void test_replay_matches_draw(void **st) {
  (void)st;
  fixture f;
  load(&f, 40, 4);
  vr_il_config c;
  vr_errbuf err = {0};
  assert_int_equal(vr_il_plan(&f.s.pb, &c, NULL, &err), 0);
  c.st[0].replicas++; /* not the planned one: not memoised anywhere */
  vr_pipe_plan plan;
  assert_int_equal(vr_il_sim_plan(&f.s, &c, &plan), 0);
  vr_psim_summary a, b;
  for (int replay = 0; replay < 2; replay++) {
    vr_workload wl = f.sample;
    vr_psim_cfg pc = {.data = &f.s.data, .arrivals = &wl, .workers = 1000,
                      .duration_s = 60, .tick_s = 1, .seed = 7, .noise = 1,
                      .max_queue = 4096, .ctl_period_s = 10, .plan = &plan,
                      .stage_rng = 1};
    if (replay) pc.replay_ns = f.s.t, pc.replay_n = f.s.n;
    assert_int_equal(vr_psim_run(&pc, NULL, replay ? &b : &a, &err), 0);
  }
  assert_int_equal(a.queries, (int64_t)f.s.n);
  assert_int_equal(a.queries, b.queries);
  assert_int_equal(a.ok, b.ok);
  assert_int_equal(a.late, b.late);
  assert_int_equal(a.dropped, b.dropped);
  assert_int_equal(a.paths, b.paths);
  assert_true(a.p50_ms == b.p50_ms);
  assert_true(a.p99_ms == b.p99_ms);
  assert_true(a.p99_ms > 0);
  double p99;
  assert_int_equal(vr_il_sim_estimate(&f.s, &f.s.pb, &c, f.s.pb.slo_ms, &p99), 0);
  assert_true(p99 == a.p99_ms);
  vr_psim_summary_free(&a);
  vr_workload wl = f.sample;
  vr_psim_cfg live = {.data = &f.s.data, .arrivals = &wl, .workers = 1000,
                      .duration_s = 60, .tick_s = 1, .seed = 7,
                      .max_queue = 4096, .ctl_period_s = 10, .plan = &plan,
                      .live_rules = 1, .replay_ns = f.s.t,
                      .replay_n = f.s.n};
  assert_int_equal(vr_psim_run(&live, NULL, &a, &err), VR_EINVAL);
  assert_non_null(strstr(err.msg, "replayed"));
  vr_psim_summary_free(&a);
  vr_psim_summary_free(&b);
  vr_pipe_plan_free(&plan);
  unload(&f);
}

/* The coarse baselines under AutoScale (the paper's CG tuning): on a rate
 * ramp past one unit's capacity (143 queries/s at batch 2) CG-Mean adds
 * whole-pipeline units (every stage alike) and misses less than the same
 * provisioning left static. */
static void test_cg_autoscale_in_simulator(void **st) {
  (void)st;
  fixture f;
  load(&f, 40, 1);
  vr_workload ramp = vr_wl_gamma(40, 1);
  vr_wl_point pts[] = {{0, 40}, {20, 40}, {40, 300}, {90, 300}};
  ramp.kind = VR_WL_PIECEWISE;
  ramp.pts = pts, ramp.npts = 4;
  vr_il_result as, fixed;
  vr_errbuf err = {0};
  assert_int_equal(vr_il_sim_eval(&f.s, VR_ILP_CG_MEAN, &ramp, 90, 3, 1, 1,
                                  NULL, &as, &err), 0);
  assert_int_equal(vr_il_sim_eval(&f.s, VR_ILP_CG_MEAN_STATIC, &ramp, 90, 3,
                                  1, 1, NULL, &fixed, &err), 0);
  assert_true(as.ups >= 1);
  assert_true(as.max_cost_per_s > as.cfg.cost_per_s);
  assert_int_equal(fixed.ups, 0);
  assert_true(as.miss_pct < fixed.miss_pct);
  vr_il_tick_cfg tc;
  assert_int_equal(vr_il_sim_tick_cfg(&f.s, VR_ILP_CG_PEAK, &as.cfg, &tc,
                                      &err), 0);
  assert_int_equal(tc.mode, VR_ILT_AUTOSCALE);
  assert_true(tc.as.pack >= 1);
  assert_int_equal(vr_il_policy_parse("cg_mean_static"),
                   VR_ILP_CG_MEAN_STATIC);
  unload(&f);
}

/* A serving view (registered variants: model x precision x threads x
 * batch cap): per task the options are the most accurate model's
 * variants, one per (precision, threads) with the largest cap, mapped
 * back to view indexes; the planner runs on it. */
static void test_init_view(void **st) {
  (void)st;
  fixture f;
  load(&f, 40, 1);
  vr_errbuf err = {0};
  vr_pipeline *p = vr_pipeline_dup(f.d[0].pipe);
  assert_non_null(p);
  const char *names[] = {"det_l-fp32-t1-b2", "det_l-fp32-t1-b8",
                         "det_s-fp32-t1-b8", "det_l-fp32-t2-b8"};
  double acc[] = {100, 100, 80, 100};
  assert_int_equal(vr_pipe_task_set_variants(p, 0, names, acc, 4, &err), 0);
  for (int v = 0; v < 4; v++) { /* the factor the view observed */
    p->tasks[0].variants[v].mult = v == 2 ? 2 : 3;
    p->tasks[0].variants[v].share[0] = 2.0 / 3;
    p->tasks[0].variants[v].share[1] = 1.0 / 3;
  }
  int nslots = 4 + p->tasks[1].nvariants + p->tasks[2].nvariants;
  vr_profile *prof = calloc((size_t)nslots, sizeof *prof);
  const vr_profile *det_l = &f.d[0].prof[f.d[0].off[0] + 1];
  for (int i = 0; i < 4; i++) {
    prof[i] = *det_l;
    snprintf(prof[i].model, sizeof prof[i].model, "%s", i == 2 ? "det_s" : "det_l");
    snprintf(prof[i].precision, sizeof prof[i].precision, "fp32");
    prof[i].threads = i == 3 ? 2 : 1;
    prof[i].max_batch = i == 0 ? 2 : 8;
    prof[i].cost_per_s = i == 3 ? 2 : 1;
  }
  prof[0].lat.p50_ms[0] = 1; /* not chosen: a smaller cap of the same shape */
  for (int i = 4; i < nslots; i++) {
    int t = i < 4 + p->tasks[1].nvariants ? 1 : 2;
    prof[i] = f.d[0].prof[f.d[0].off[t]];
    snprintf(prof[i].model, sizeof prof[i].model, "%s", p->tasks[t].variants[0].name);
  }
  vr_il_sim s;
  int opt[VR_PIPE_MAX_TASKS][VR_IL_MAX_HW];
  assert_int_equal(vr_il_sim_init_view(&s, p, prof, opt, &err), 0);
  assert_int_equal(s.pb.st[0].nhw, 2);
  assert_int_equal(opt[0][0], 1); /* det_l t1, cap 8 */
  assert_int_equal(opt[0][1], 3); /* det_l t2 */
  assert_int_equal(opt[0][2], -1);
  assert_int_equal(opt[1][0], 0);
  assert_true(fabs(s.pb.st[1].scale - 2) < 1e-6);
  assert_true(s.pb.st[0].hw[1].cost_per_s == 2);
  vr_workload w = vr_wl_gamma(40, 1);
  assert_int_equal(vr_il_sim_sample(&s, &w, 30, 3, &err), 0);
  vr_il_config c;
  assert_int_equal(vr_il_plan(&s.pb, &c, NULL, &err), 0);
  assert_true(c.p99_ms <= s.pb.slo_ms);
  assert_int_equal(c.st[0].hw, 0); /* t2 is dearer for the same profile */
  vr_il_sim_free(&s);
  free(prof);
  vr_pipeline_free(p);
  unload(&f);
}

/* psim stage by stage (the estimator) against psim's event engine with
 * stage streams: the same P50, P99, late queries, drops and early stops
 * for a walk of configurations that change one stage at a time (so the
 * stage engine reuses what it kept), with and without service-time noise
 * (without it, equal times are common: batches of one latency start
 * together), and with short queues that overflow. */
/* psim's event engine (pc: stage streams, a static plan, replayed
 * arrivals, no early stop) and the stage engine on the same plan: the
 * same drop and, unless a queue overflowed (the stage engine stops
 * there), the same late count, P50 and P99. *sum (the caller frees it)
 * and *r hold both answers. */
static void run_both(const vr_psim_cfg *pc, vr_psim_stages *ps,
                     vr_psim_summary *sum, vr_psim_stages_result *r) {
  vr_errbuf err = {0};
  vr_psim_cfg c = *pc;
  vr_workload wl = *pc->arrivals; /* a run opens and closes it */
  c.arrivals = &wl;
  assert_int_equal(vr_psim_run(&c, NULL, sum, &err), 0);
  assert_int_equal(vr_psim_stages_run(ps, c.plan, 0, 0, r, &err), 0);
  assert_int_equal(r->dropped, sum->dropped > 0);
  if (r->dropped) return;
  assert_int_equal(r->late, sum->late);
  assert_true(r->p50_ms == sum->p50_ms);
  assert_true(r->p99_ms == sum->p99_ms);
}

static void check_stages_match(fixture *f, int noise, int max_queue,
                               int steps) {
  vr_errbuf err = {0};
  vr_psim_stages_cfg sc = {.data = &f->s.data, .t = f->s.t, .n = f->s.n,
                           .duration_s = 60, .seed = 7, .noise = noise,
                           .max_queue = max_queue};
  vr_psim_stages *st;
  assert_int_equal(vr_psim_stages_new(&sc, &st, &err), 0);
  vr_il_config c;
  assert_int_equal(vr_il_plan(&f->s.pb, &c, NULL, &err), 0);
  uint64_t x = 12345 + (uint64_t)noise;
  int reused = 0, stopped = 0, dropped = 0, late = 0;
  for (int i = 0; i < steps; i++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    int m = (int)((x >> 33) % 3), what = (int)((x >> 40) % 3);
    vr_il_stage_cfg *sg = &c.st[m];
    if (what == 0) sg->replicas = 1 + (int)((x >> 45) % 4);
    else if (what == 1) sg->batch = 1 << (int)((x >> 45) % 4);
    else sg->hw = (int)((x >> 45) % 2);
    vr_pipe_plan plan;
    assert_int_equal(vr_il_sim_plan(&f->s, &c, &plan), 0);
    vr_workload wl = f->sample;
    vr_psim_cfg pc = {.data = &f->s.data, .arrivals = &wl, .workers = 1000,
                      .duration_s = 60, .tick_s = 1, .seed = 7,
                      .noise = noise, .max_queue = max_queue,
                      .ctl_period_s = 10, .plan = &plan,
                      .replay_ns = f->s.t, .replay_n = f->s.n,
                      .stage_rng = 1};
    vr_psim_summary sum;
    vr_psim_stages_result r;
    run_both(&pc, st, &sum, &r);
    reused += r.stages_reused;
    if (!r.dropped) {
      assert_int_equal(sum.ok + sum.late, (int64_t)f->s.n);
      late += sum.late > 0;
      /* the early stop: at half the P99 both engines stop; at the P99
       * neither does */
      pc.stop_bad = (int64_t)f->s.n - (int64_t)floor(0.99 * (double)f->s.n);
      for (int k = 0; k < 2; k++) {
        double above = k ? sum.p99_ms : sum.p99_ms / 2;
        pc.stop_above_ms = above;
        wl = f->sample;
        vr_psim_summary s2;
        assert_int_equal(vr_psim_run(&pc, NULL, &s2, &err), 0);
        assert_int_equal(vr_psim_stages_run(st, &plan, pc.stop_bad, above,
                                            &r, &err), 0);
        assert_int_equal(r.stopped, s2.stopped);
        assert_int_equal(r.stopped, !k);
        stopped += r.stopped;
        vr_psim_summary_free(&s2);
      }
    }
    dropped += r.dropped;
    vr_psim_summary_free(&sum);
    vr_pipe_plan_free(&plan);
  }
  assert_true(stopped > 0);
  assert_true(late > 0);
  if (max_queue < 100) assert_true(dropped > 0 && dropped < steps);
  else assert_true(reused > steps); /* most stages were kept */
  /* a task whose instances are of two variants is not its case */
  vr_pipe_plan plan;
  assert_int_equal(vr_il_sim_plan(&f->s, &c, &plan), 0);
  plan.a[plan.off[0] + 1 - c.st[0].hw].inst = 1;
  vr_psim_stages_result r;
  assert_int_equal(vr_psim_stages_run(st, &plan, 0, 0, &r, &err), VR_EINVAL);
  assert_non_null(strstr(err.msg, "two variants"));
  vr_pipe_plan_free(&plan);
  vr_psim_stages_free(st);
}

static void test_stages_match_psim(void **st) {
  (void)st;
  fixture f;
  load(&f, 40, 4);
  check_stages_match(&f, 1, 4096, 40);
  check_stages_match(&f, 0, 4096, 40);
  check_stages_match(&f, 1, 24, 40);
  unload(&f);
}

/* Equal times across stages: arrivals exactly 10 ms apart, the detector
 * at batch 1 on the GPU (10 ms) and service times without noise, so the
 * children's completions often fall on a detector completion. psim
 * orders the parent's first (its outputs join the child's queue before
 * the child forms its next batch); stage by stage must agree. (Without
 * that order in psim, 3 of these 16 configurations come out different.) */
static void test_stages_equal_times(void **st) {
  (void)st;
  fixture f;
  load(&f, 40, 1);
  vr_errbuf err = {0};
  size_t n = 3000;
  int64_t *t = calloc(n, sizeof *t);
  for (size_t i = 0; i < n; i++) t[i] = (int64_t)i * 10000000;
  vr_psim_stages_cfg sc = {.data = &f.s.data, .t = t, .n = n,
                           .duration_s = 30, .seed = 3, .max_queue = 4096};
  vr_psim_stages *ps;
  assert_int_equal(vr_psim_stages_new(&sc, &ps, &err), 0);
  for (int hw = 0; hw < 2; hw++)
    for (int b = 1; b <= 8; b *= 2)
      for (int r = 1; r <= 2; r++) {
        vr_il_config c = {.nstages = 3};
        c.st[0] = (vr_il_stage_cfg){0, 1, 1};
        c.st[1] = (vr_il_stage_cfg){hw, b, r};
        c.st[2] = (vr_il_stage_cfg){hw, b > 2 ? 2 : b, r};
        vr_pipe_plan plan;
        assert_int_equal(vr_il_sim_plan(&f.s, &c, &plan), 0);
        vr_workload wl = f.sample;
        vr_psim_cfg pc = {.data = &f.s.data, .arrivals = &wl, .workers = 100,
                          .duration_s = 30, .tick_s = 1, .seed = 3,
                          .max_queue = 4096, .ctl_period_s = 10,
                          .plan = &plan, .replay_ns = t, .replay_n = n,
                          .stage_rng = 1};
        vr_psim_summary sum;
        vr_psim_stages_result res;
        run_both(&pc, ps, &sum, &res);
        assert_false(res.dropped);
        vr_psim_summary_free(&sum);
        vr_pipe_plan_free(&plan);
      }
  vr_psim_stages_free(ps);
  free(t);
  unload(&f);
}

/* Three levels (det -> cls -> tail, and face): a middle task passes its
 * requests' identities on, so its children's fan-out draws match psim's
 * too. */
static void test_stages_three_levels(void **st) {
  (void)st;
  vr_errbuf err = {0};
  vr_pipe_data d;
  assert_int_equal(vr_loki_load(dir, "deep", "gpu", &d, &err), 0);
  assert_int_equal(d.pipe->ntasks, 4);
  int cls = vr_pipeline_task(d.pipe, "cls"), tail = vr_pipeline_task(d.pipe, "tail");
  assert_int_equal(d.pipe->tasks[cls].nchildren, 1);
  assert_true(d.pipe->tasks[cls].variants[0].mult == 1.5);
  vr_workload w = vr_wl_gamma(40, 4);
  int64_t *t;
  size_t n;
  assert_int_equal(vr_il_sim_arrivals(&w, 30, 5, &t, &n, &err), 0);
  vr_psim_stages_cfg sc = {.data = &d, .t = t, .n = n, .duration_s = 30,
                           .seed = 5, .noise = 1, .max_queue = 4096};
  vr_psim_stages *ps;
  assert_int_equal(vr_psim_stages_new(&sc, &ps, &err), 0);
  int inst[4] = {2, 2, 1, 1}, batch[4] = {1, 2, 1, 1}, reused = 0;
  for (int i = 0; i < 24; i++) {
    int m = i % 4;
    if (i >= 4) { /* one task at a time, so the others are kept */
      inst[m] = 1 + (inst[m] + i) % 3;
      batch[m] = 1 << ((batch[m] + i) % 2);
    }
    vr_pipe_plan plan;
    assert_int_equal(vr_pipe_plan_init(&plan, d.pipe), 0);
    for (int k = 0; k < 4; k++) vr_pipe_plan_set(&plan, d.prof, k, 0, inst[k], batch[k]);
    vr_workload wl = w;
    vr_psim_cfg pc = {.data = &d, .arrivals = &wl, .workers = 100,
                      .duration_s = 30, .tick_s = 1, .seed = 5, .noise = 1,
                      .max_queue = 4096, .ctl_period_s = 10, .plan = &plan,
                      .replay_ns = t, .replay_n = n, .stage_rng = 1};
    vr_psim_summary sum;
    vr_psim_stages_result r;
    run_both(&pc, ps, &sum, &r);
    assert_false(r.dropped);
    assert_true(sum.task[tail].served > 0);
    reused += r.stages_reused;
    vr_psim_summary_free(&sum);
    vr_pipe_plan_free(&plan);
  }
  assert_true(reused > 24);
  vr_psim_stages_free(ps);
  vr_free(t);
  vr_pipe_data_free(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_problem_from_data),
      cmocka_unit_test(test_plan_on_simulator),
      cmocka_unit_test(test_infeasible_slo),
      cmocka_unit_test(test_tuner_in_simulator),
      cmocka_unit_test(test_estimator_stops_early),
      cmocka_unit_test(test_estimator_bound),
      cmocka_unit_test(test_replay_matches_draw),
      cmocka_unit_test(test_cg_autoscale_in_simulator),
      cmocka_unit_test(test_init_view),
      cmocka_unit_test(test_stages_match_psim),
      cmocka_unit_test(test_stages_equal_times),
      cmocka_unit_test(test_stages_three_levels),
  };
  return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
