/* The pipeline simulator, Loki's artifact loaders, MostAccurateFirst and
 * the per-hop decision, on small hand-made pipelines and files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/psim.h"
#include "sim/psim_ctl.h"
#include "sim/psim_int.h"
#include "vr_test.h"

static char dir[256];

static void put(const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static int setup_dir(void **st) {
  (void)st;
  snprintf(dir, sizeof dir, "/tmp/vr_test_psim_%d", (int)getpid());
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "mkdir -p %s/apps %s/model_variants/demo "
           "%s/profiling", dir, dir, dir);
  if (system(cmd)) return -1;
  /* detector (2 variants) fans out to cls (label 1) and face (label 0) */
  put("apps/demo.json",
      "{\"appName\":\"demo\",\"latencySLOInMSec\":200,\"root\":{"
      "\"task\":\"det\",\"model_variants\":[\"det_s\",\"det_l\"],"
      "\"children\":[{\"task\":\"cls\",\"label\":1,"
      "\"model_variants\":[\"cls_a\",\"cls_b\",\"cls_missing\","
      "\"cls_c\"],"
      "\"children\":[{\"task\":\"sink\",\"model_variants\":[\"sink\"],"
      "\"children\":[]}]},"
      "{\"task\":\"face\",\"label\":0,\"model_variants\":[\"face_a\"],"
      "\"children\":[]}]}}");
  put("model_variants/demo/det", "det_s,80\ndet_l,100\n");
  put("model_variants/demo/cls", "cls_a,100\ncls_b,90\ncls_c,80\n");
  put("model_variants/demo/face", "face_a,100\n");
  put("profiling/simulator_runtimes.csv",
      ",Model,Accel,batchsize,avg_runtime,50th_pct,90th_pct,95th_pct\n"
      "0,det_s,gpu,1,9,5,6,7\n"
      "1,det_s,gpu,2,9,8,9,9\n"
      "2,det_l,gpu,1,30,10,12,13\n"
      "3,det_l,gpu,2,30,18,20,21\n"
      "4,det_l,gpu,3,30,25,27,28\n"
      "5,det_l,cpu,1,30,99,99,99\n"
      "6,cls_a,gpu,1,9,4,5,5\n"
      "7,cls_a,gpu,2,9,6,7,7\n"
      "8,cls_a,gpu,4,9,10,11,11\n"
      "9,cls_b,gpu,1,9,2,3,3\n"
      "10,cls_b,gpu,2,9,3,4,4\n"
      "12,cls_c,gpu,1,9,1,2,2\n"
      "11,face_a,gpu,1,9,3,4,4\n");
  put("profiling/branching.csv",
      ",model,mult_factor,cls,face\n"
      "0,det_s,2.0,0.75,0.25\n"
      "1,det_l,4.0,0.5,0.5\n");
  return 0;
}

static int teardown_dir(void **st) {
  (void)st;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) ? -1 : 0;
}

/* Leaves garbage where the next call's locals will be: a local the code
 * reads before writing then shows, instead of passing on a fresh stack. */
static __attribute__((noinline)) void dirty_stack(void) {
  volatile double junk[16384];
  for (int i = 0; i < 16384; i++) junk[i] = 1e6 + i;
  (void)junk[0];
}

static void load_demo(vr_pipe_data *d) {
  vr_errbuf err = {0};
  int rc = vr_loki_load(dir, "demo", "gpu", d, &err);
  if (rc) fprintf(stderr, "%s\n", err.msg);
  assert_int_equal(rc, 0);
}

static void test_loader(void **st) {
  (void)st;
  vr_pipe_data d;
  load_demo(&d);
  const vr_pipeline *p = d.pipe;
  assert_int_equal(p->ntasks, 3);
  assert_true(p->slo_ms == 200);
  int cls = vr_pipeline_task(p, "cls");
  assert_int_equal(p->tasks[cls].nvariants, 3); /* cls_missing left out */
  assert_string_equal(p->tasks[cls].variants[2].name, "cls_c");
  assert_non_null(strstr(d.notes, "cls/cls_missing: no runtimes"));
  const vr_pipe_variant *dl = &p->tasks[0].variants[1];
  assert_string_equal(dl->name, "det_l");
  assert_true(dl->mult == 4.0 && dl->accuracy == 100);
  assert_true(dl->share[0] == 0.5 && dl->share[1] == 0.5);
  assert_true(p->tasks[0].variants[0].share[0] == 0.75);
  assert_true(p->tasks[cls].variants[1].accuracy == 90);
  /* profiles: power-of-two rows only (batch 3 ignored), accel gpu only */
  const vr_profile *pr = &d.prof[d.off[0] + 1];
  assert_true(pr->lat.p50_ms[0] == 10 && pr->lat.p50_ms[1] == 18);
  assert_true(pr->lat.p90_ms[0] == 12);
  assert_int_equal(pr->max_batch, 2);
  assert_int_equal(d.prof[d.off[cls]].max_batch, 4);
  assert_int_equal(d.off[3], 6);
  vr_pipe_data_free(&d);
}

/* An unlabelled child beside a labelled one, with no branching column of
 * its own, gets what the labelled child's share leaves: each detection
 * goes to one child (pipeline.h). */
static void test_loader_unlabelled_rest(void **st) {
  (void)st;
  put("apps/mixed.json",
      "{\"appName\":\"mixed\",\"latencySLOInMSec\":200,\"root\":{"
      "\"task\":\"det\",\"model_variants\":[\"det_s\",\"det_l\"],"
      "\"children\":[{\"task\":\"cls\",\"label\":1,"
      "\"model_variants\":[\"cls_a\"],\"children\":[]},"
      "{\"task\":\"face\",\"model_variants\":[\"face_a\"],"
      "\"children\":[]}]}}");
  put("profiling/branching_cls.csv",
      ",model,mult_factor,cls\n0,det_s,2.0,0.75\n1,det_l,4.0,0.5\n");
  char app[512], rt[512], br[512];
  snprintf(app, sizeof app, "%s/apps/mixed.json", dir);
  snprintf(rt, sizeof rt, "%s/profiling/simulator_runtimes.csv", dir);
  snprintf(br, sizeof br, "%s/profiling/branching_cls.csv", dir);
  vr_pipe_data d;
  vr_errbuf err = {0};
  assert_int_equal(vr_loki_load_files(app, NULL, rt, br, "gpu", &d, &err), 0);
  const vr_pipe_task *det = &d.pipe->tasks[0];
  assert_true(det->variants[0].share[0] == 0.75);
  assert_true(fabs(det->variants[0].share[1] - 0.25) < 1e-12);
  assert_true(fabs(det->variants[1].share[1] - 0.5) < 1e-12);
  vr_pipe_data_free(&d);
}

static void test_loader_errors(void **st) {
  (void)st;
  vr_pipe_data d;
  vr_errbuf err = {0};
  char app[512], rt[512], bad[512];
  snprintf(app, sizeof app, "%s/apps/demo.json", dir);
  snprintf(rt, sizeof rt, "%s/profiling/simulator_runtimes.csv", dir);
  snprintf(bad, sizeof bad, "%s/profiling/bad.csv", dir);
  put("profiling/bad.csv", ",Model,Accel,batchsize,avg_runtime,50th_pct\n"
                           "0,det_s,gpu,1,9,fast\n");
  assert_int_equal(vr_loki_load_files(app, NULL, bad, NULL, "gpu", &d, &err),
                   VR_EFORMAT);
  assert_non_null(strstr(err.msg, "bad.csv:2"));
  /* a row longer than the reader's line is one error at its line, not
   * two half-rows (the second half once failed as "line 4: 1 fields") */
  char longrow[2100];
  int k = snprintf(longrow, sizeof longrow, ",Model,Accel,batchsize,avg_runtime,50th_pct\n"
                                            "0,det_s,gpu,1,9,5\n0,det_s,gpu,2,9,5,");
  memset(longrow + k, 'x', 2000);
  memcpy(longrow + k + 2000, "\n", 2);
  put("profiling/long.csv", longrow);
  snprintf(bad, sizeof bad, "%s/profiling/long.csv", dir);
  assert_int_equal(vr_loki_load_files(app, NULL, bad, NULL, "gpu", &d, &err),
                   VR_EFORMAT);
  assert_non_null(strstr(err.msg, "long.csv:3: line longer than"));
  assert_int_equal(vr_loki_load_files(app, NULL, rt, NULL, "tpu", &d, &err),
                   VR_ENOENT);
  assert_non_null(strstr(err.msg, "no variant with runtimes"));
  assert_int_equal(vr_loki_load(dir, "nope", NULL, &d, &err), VR_EIO);
  assert_non_null(strstr(err.msg, "nope.json"));
}

/* Hand-computed MostAccurateFirst: det_l (100) holds 1 instance at batch 1
 * (100 qps), det_s (80) 1 at batch 2 (250 qps). Demand 150: det_l takes
 * 100, det_s 50. det_l emits 4 x 100 x 0.5 = 200/s to cls, det_s emits
 * 2 x 50 x 0.75 = 75/s. cls_a (acc 100, batch 4: 400 qps) takes det_l's
 * 200 first, then det_s's 75. */
static void test_most_accurate_first(void **st) {
  (void)st;
  vr_pipe_data d;
  load_demo(&d);
  const vr_pipeline *p = d.pipe;
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, p), 0);
  vr_pipe_plan_set(&plan, d.prof, 0, 1, 1, 1); /* det_l */
  vr_pipe_plan_set(&plan, d.prof, 0, 0, 1, 2); /* det_s */
  vr_pipe_plan_set(&plan, d.prof, 1, 0, 1, 4); /* cls_a */
  vr_pipe_plan_set(&plan, d.prof, 1, 1, 1, 2); /* cls_b */
  vr_pipe_plan_set(&plan, d.prof, 2, 0, 1, 1); /* face_a */
  assert_int_equal(plan.workers, 5);
  assert_true(fabs(plan.a[1].cap_qps - 100) < 1e-9);
  assert_true(fabs(plan.a[0].cap_qps - 250) < 1e-9);
  vr_pipe_routes r;
  dirty_stack();
  assert_int_equal(vr_pipe_route_build(p, &plan, 150, &r), 0);
  /* leaves: cls_a 200 x 1.0 (det_l) + 75 x 0.8 (det_s), face_a 200 x 1.0 +
   * 25 x 0.8: 480 of 500 */
  assert_true(fabs(r.accuracy - 96) < 1e-9);
  assert_true(fabs(r.front[1] - 100.0 / 150) < 1e-9);
  assert_true(fabs(r.front[0] - 50.0 / 150) < 1e-9);
  int cls = 1, nv = 3;
  /* det_l -> cls: all 200 to cls_a; det_s -> cls: all 75 to cls_a */
  assert_true(fabs(r.table[r.toff[cls] + 1 * nv + 0] - 1) < 1e-9);
  assert_true(fabs(r.table[r.toff[cls] + 0 * nv + 0] - 1) < 1e-9);
  assert_true(fabs(r.incoming[d.off[cls]] - 275) < 1e-9);
  assert_true(fabs(r.spare[d.off[cls]] - 125) < 1e-9);
  /* face: 200 + 25 qps on face_a, capacity 333: all of it */
  assert_true(fabs(r.incoming[d.off[2]] - 225) < 1e-9);
  /* picking follows the table */
  assert_int_equal(vr_pipe_route_pick(p, &r, 0, -1, 0.1), 0); /* 1/3 */
  assert_int_equal(vr_pipe_route_pick(p, &r, 0, -1, 0.9), 1); /* 2/3 */
  assert_int_equal(vr_pipe_route_pick(p, &r, cls, 1, 0.99), d.off[cls]);
  /* more demand than cls_a holds spills to cls_b in accuracy order */
  vr_pipe_routes_free(&r);
  vr_pipe_plan_set(&plan, d.prof, 1, 0, 1, 1); /* cls_a: 250 qps */
  assert_int_equal(vr_pipe_route_build(p, &plan, 150, &r), 0);
  assert_true(fabs(r.table[r.toff[cls] + 1 * nv + 0] - 1) < 1e-9);
  assert_true(fabs(r.table[r.toff[cls] + 0 * nv + 0] - 50.0 / 75) < 1e-9);
  assert_true(fabs(r.table[r.toff[cls] + 0 * nv + 1] - 25.0 / 75) < 1e-9);
  vr_pipe_routes_free(&r);
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

/* Rerouting: behind by x, the most accurate backup with spare capacity
 * whose time is <= y - x; none: drop. The other modes' rules too. */
static void test_hop(void **st) {
  (void)st;
  vr_pipe_data d;
  load_demo(&d);
  const vr_pipeline *p = d.pipe;
  vr_pipe_plan plan;
  vr_pipe_routes r;
  assert_int_equal(vr_pipe_plan_init(&plan, p), 0);
  vr_pipe_plan_set(&plan, d.prof, 0, 1, 1, 1);
  vr_pipe_plan_set(&plan, d.prof, 1, 0, 1, 4); /* cls_a: 10 ms */
  vr_pipe_plan_set(&plan, d.prof, 1, 1, 1, 1); /* cls_b: 2 ms */
  vr_pipe_plan_set(&plan, d.prof, 2, 0, 1, 1);
  assert_int_equal(vr_pipe_route_build(p, &plan, 10, &r), 0);
  int a = d.off[1], b = d.off[1] + 1, alt = -1;
  vr_hop h = {.mode = VR_EDROP_REROUTE, .elapsed_ms = 20, .spent_ms = 20,
              .budget_ms = 20, .budget_sum_ms = 20, .slo_ms = 200,
              .child_is_leaf = 1};
  assert_int_equal(vr_pipe_hop(p, &plan, &r, 1, a, &h, &alt), VR_HOP_FORWARD);
  h.elapsed_ms = 27; /* x = 7: y - x = 3 >= cls_b's 2 ms */
  assert_int_equal(vr_pipe_hop(p, &plan, &r, 1, a, &h, &alt), VR_HOP_REROUTE);
  assert_int_equal(alt, b);
  h.elapsed_ms = 29; /* x = 9: y - x = 1 < 2 */
  assert_int_equal(vr_pipe_hop(p, &plan, &r, 1, a, &h, &alt), VR_HOP_DROP);
  /* two backups fast enough: the more accurate one (cls_b 90 over cls_c
   * 80) wins */
  int c3 = d.off[1] + 2;
  vr_pipe_plan_set(&plan, d.prof, 1, 2, 1, 1); /* cls_c: 1 ms */
  vr_pipe_routes_free(&r);
  assert_int_equal(vr_pipe_route_build(p, &plan, 10, &r), 0);
  h.elapsed_ms = 22; /* chosen cls_a (10 ms), x = 2: 2 and 1 <= 8 */
  assert_int_equal(vr_pipe_hop(p, &plan, &r, 1, a, &h, &alt), VR_HOP_REROUTE);
  assert_int_equal(alt, b);
  h.elapsed_ms = 28.5; /* x = 8.5: only cls_c (1 <= 1.5) */
  assert_int_equal(vr_pipe_hop(p, &plan, &r, 1, a, &h, &alt), VR_HOP_REROUTE);
  assert_int_equal(alt, c3);
  h.elapsed_ms = 22;
  /* no spare capacity: not a backup */
  r.spare[b] = 0;
  assert_int_equal(vr_pipe_hop(p, &plan, &r, 1, a, &h, &alt), VR_HOP_REROUTE);
  assert_int_equal(alt, c3);
  r.spare[c3] = 0;
  assert_int_equal(vr_pipe_hop(p, &plan, &r, 1, a, &h, &alt), VR_HOP_DROP);
  /* the ablation modes */
  h.mode = VR_EDROP_NONE, h.elapsed_ms = 500;
  assert_int_equal(vr_pipe_hop(p, &plan, &r, 1, a, &h, &alt), VR_HOP_FORWARD);
  h.mode = VR_EDROP_PER_TASK, h.spent_ms = 21;
  assert_int_equal(vr_pipe_hop(p, &plan, &r, 1, a, &h, &alt), VR_HOP_DROP);
  h.spent_ms = 19;
  assert_int_equal(vr_pipe_hop(p, &plan, &r, 1, a, &h, &alt), VR_HOP_FORWARD);
  h.mode = VR_EDROP_LAST, h.elapsed_ms = 197; /* 3 ms left < 10 ms */
  assert_int_equal(vr_pipe_hop(p, &plan, &r, 1, a, &h, &alt), VR_HOP_DROP);
  h.child_is_leaf = 0;
  assert_int_equal(vr_pipe_hop(p, &plan, &r, 1, a, &h, &alt), VR_HOP_FORWARD);
  /* where a queue may drop what cannot meet its deadline */
  assert_false(vr_edrop_deadline_drops(VR_EDROP_NONE, 1));
  assert_false(vr_edrop_deadline_drops(VR_EDROP_LAST, 0));
  assert_true(vr_edrop_deadline_drops(VR_EDROP_LAST, 1));
  assert_true(vr_edrop_deadline_drops(VR_EDROP_PER_TASK, 0));
  assert_true(vr_edrop_deadline_drops(VR_EDROP_REROUTE, 0));
  assert_int_equal(vr_edrop_parse("reroute"), VR_EDROP_REROUTE);
  assert_int_equal(vr_edrop_parse("bogus"), -1);
  vr_pipe_routes_free(&r);
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

/* A static plan on the demo pipeline at light load. */
static vr_psim_cfg light_cfg(vr_pipe_data *d, vr_workload *wl,
                             vr_pipe_plan *plan) {
  memset(wl, 0, sizeof *wl);
  wl->kind = VR_WL_CONSTANT;
  wl->rate = 5;
  assert_int_equal(vr_pipe_plan_init(plan, d->pipe), 0);
  vr_pipe_plan_set(plan, d->prof, 0, 1, 1, 1); /* det_l */
  vr_pipe_plan_set(plan, d->prof, 1, 1, 1, 1); /* cls_b (90) */
  vr_pipe_plan_set(plan, d->prof, 2, 0, 1, 1); /* face_a */
  return (vr_psim_cfg){.data = d, .arrivals = wl, .workers = 3,
                       .duration_s = 40, .tick_s = 1, .seed = 7,
                       .max_queue = 64, .drop_mode = VR_EDROP_REROUTE,
                       .plan = plan, .ctl_period_s = 10,
                       .fanout_exact = 1};
}

static void test_sim_light(void **st) {
  (void)st;
  vr_pipe_data d;
  load_demo(&d);
  vr_workload wl;
  vr_pipe_plan plan;
  vr_psim_cfg cfg = light_cfg(&d, &wl, &plan);
  vr_psim_summary s;
  vr_errbuf err = {0};
  assert_int_equal(vr_psim_run(&cfg, NULL, &s, &err), 0);
  assert_true(s.queries >= 199 && s.queries <= 200); /* every 0.2 s */
  assert_int_equal(s.ok, s.queries);
  assert_true(s.violations_pct == 0);
  /* det_l (100) emits 4 outputs: 2 to cls_b (90), 2 to face_a (100) on
   * average; every path ends at a leaf: mean path accuracy 95 */
  assert_true(fabs(s.accuracy_pct - 95) < 3);
  /* exact fan-out: det_l served 200, emitted exactly 4 each */
  assert_true(s.mult_observed[1] == 4.0);
  assert_int_equal(s.task[0].served, s.queries);
  assert_int_equal(s.task[1].requests + s.task[2].requests, 4 * s.queries);
  /* end to end: 10 ms detector + outputs queued on one 2-3 ms instance */
  assert_true(s.p50_ms >= 12 && s.p50_ms < 30);
  /* deterministic */
  vr_psim_summary s2;
  assert_int_equal(vr_psim_run(&cfg, NULL, &s2, &err), 0);
  assert_true(s.ok == s2.ok && s.accuracy_pct == s2.accuracy_pct &&
              s.p99_ms == s2.p99_ms);
  vr_psim_summary_free(&s), vr_psim_summary_free(&s2);
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

/* Overload: every query has exactly one outcome, drops are explicit and
 * attributed; without early dropping the excess is late instead. */
static void test_sim_overload(void **st) {
  (void)st;
  vr_pipe_data d;
  load_demo(&d);
  vr_workload wl;
  vr_pipe_plan plan;
  vr_psim_cfg cfg = light_cfg(&d, &wl, &plan);
  wl.kind = VR_WL_POISSON;
  wl.rate = 400; /* det_l holds 100 qps */
  cfg.duration_s = 10;
  cfg.fanout_exact = 0;
  vr_psim_summary s;
  vr_errbuf err = {0};
  for (int mode = 0; mode <= VR_EDROP_REROUTE; mode++) {
    cfg.drop_mode = mode;
    assert_int_equal(vr_psim_run(&cfg, NULL, &s, &err), 0);
    assert_true(s.queries > 3000);
    assert_int_equal(s.ok + s.late + s.dropped + s.unfinished, s.queries);
    assert_true(s.violations_pct > 50);
    int64_t drops = 0;
    for (int t = 0; t < d.pipe->ntasks; t++)
      for (int k = 0; k < VR_PDROP__COUNT; k++) drops += s.task[t].drops[k];
    assert_true(drops >= s.dropped); /* every dropped request, by reason */
    assert_true(s.paths_bad >= drops && s.paths > s.paths_bad);
    if (mode == VR_EDROP_NONE) {
      assert_int_equal(s.task[0].drops[VR_PDROP_EXPIRED], 0);
      assert_true(s.late > 0);
    } else if (mode == VR_EDROP_LAST) {
      /* nothing is dropped before the last task (Loki §5.2); the
       * detector's queue dropped what could not finish in time, a rule of
       * the per-task modes */
      assert_int_equal(s.task[0].drops[VR_PDROP_EXPIRED], 0);
      assert_int_equal(s.task[0].drops[VR_PDROP_EARLY], 0);
      assert_true(s.dropped > 0);
    } else {
      assert_true(s.dropped > s.late);
    }
    /* observed fan-out follows the branching file's mean */
    assert_true(fabs(s.mult_observed[1] - 4) < 0.3);
    vr_psim_summary_free(&s);
  }
  /* a plan's batch past the profiles' largest (a text plan may say 4096)
   * runs at that largest, under both rule sets; it overran the 64-row
   * in-flight arrays */
  for (int t = 0; t < d.pipe->ntasks; t++) vr_pipe_plan_set(&plan, d.prof, t, 0, 1, 200);
  cfg.max_queue = 4096, cfg.drop_mode = VR_EDROP_NONE;
  for (int live = 0; live <= 1; live++) {
    cfg.live_rules = live;
    assert_int_equal(vr_psim_run(&cfg, NULL, &s, &err), 0);
    assert_int_equal(s.ok + s.late + s.dropped + s.unfinished, s.queries);
    assert_true(s.unfinished_overdue > 0 && s.unfinished_overdue <= s.unfinished);
    assert_true(s.ok + s.late > 0);
    vr_psim_summary_free(&s);
  }
  vr_pipe_plan_free(&plan);
  vr_pipe_data_free(&d);
}

/* The light plan, with a second detector instance from t = 10 s. */
static int add_det_at_10(void *ctx, const vr_psim_view *v, vr_pipe_plan *plan,
                         vr_errbuf *err) {
  (void)err;
  const vr_pipe_data *d = ctx;
  vr_pipe_plan_set(plan, d->prof, 0, 1, v->now_s >= 10 ? 2 : 1, 1);
  vr_pipe_plan_set(plan, d->prof, 1, 1, 1, 1);
  vr_pipe_plan_set(plan, d->prof, 2, 0, 1, 1);
  return 0;
}

/* A replica added during the run serves after load_s; until then requests
 * go to the serving one (det_l at 60 % load: its queue is often longer
 * than the empty queue of the loading one, whose requests would wait out
 * the 5-s load and all be late). */
static void test_sim_loading_replica(void **st) {
  (void)st;
  vr_pipe_data d;
  load_demo(&d);
  vr_workload wl;
  vr_pipe_plan plan;
  vr_psim_cfg cfg = light_cfg(&d, &wl, &plan);
  vr_pipe_plan_free(&plan);
  wl.kind = VR_WL_POISSON;
  wl.rate = 60;
  cfg.plan = NULL;
  cfg.replan = add_det_at_10, cfg.replan_ctx = &d;
  cfg.ctl_period_s = 1, cfg.ctl_change = 0;
  cfg.workers = 4, cfg.load_s = 5, cfg.warm_start = 1;
  cfg.duration_s = 30, cfg.drop_mode = VR_EDROP_NONE;
  vr_psim_summary s;
  vr_errbuf err = {0};
  assert_int_equal(vr_psim_run(&cfg, NULL, &s, &err), 0);
  assert_true(s.queries > 1500);
  assert_true(s.mean_workers > 3.5); /* the second replica was added */
  assert_int_equal(s.dropped, 0);
  assert_int_equal(s.late, 0);
  vr_psim_summary_free(&s);
  vr_pipe_data_free(&d);
}

/* A controller policy: the hardware-only planner scales with demand. */
static void test_sim_policy(void **st) {
  (void)st;
  vr_pipe_data d;
  load_demo(&d);
  vr_workload wl;
  memset(&wl, 0, sizeof wl);
  wl.kind = VR_WL_POISSON;
  wl.rate = 50;
  vr_psim_cfg cfg = {.data = &d, .arrivals = &wl, .workers = 10,
                     .duration_s = 30, .warmup_s = 5, .tick_s = 1, .seed = 3,
                     .max_queue = 256, .drop_mode = -1, .ctl_period_s = 10};
  vr_psim_ctl ctl;
  vr_errbuf err = {0};
  assert_int_equal(vr_psim_policy("nope", &d, &ctl, &cfg, &err), VR_ENOENT);
  assert_int_equal(vr_psim_policy("hw", &d, &ctl, &cfg, &err), 0);
  ctl.slack = 1.5;
  vr_psim_summary s;
  assert_int_equal(vr_psim_run(&cfg, NULL, &s, &err), 0);
  assert_true(s.replans >= 3);
  assert_true(s.mean_workers >= 3 && s.mean_workers <= 10);
  assert_true(s.violations_pct < 5);
  assert_true(s.accuracy_pct > 99); /* most accurate variants only */
  vr_psim_summary_free(&s);
  /* 150 qps on 4 workers: det_l alone would need 3 of them, so Loki
   * scales accuracy and keeps violations low */
  wl.rate = 150;
  const char *pols[] = {"loki", "proteus", "infaas"};
  for (int i = 0; i < 3; i++) {
    cfg.workers = 4, cfg.drop_mode = -1;
    assert_int_equal(vr_psim_policy(pols[i], &d, &ctl, &cfg, &err), 0);
    ctl.slack = 1.5;
    assert_int_equal(vr_psim_run(&cfg, NULL, &s, &err), 0);
    assert_int_equal(s.ok + s.late + s.dropped, s.queries);
    if (i == 0) {
      assert_int_equal(cfg.drop_mode, VR_EDROP_REROUTE);
      assert_true(s.violations_pct < 5);
      assert_true(s.accuracy_pct < 99 && s.accuracy_pct > 50);
    }
    vr_psim_summary_free(&s);
  }
  cfg.workers = 10;
  /* bad configs are refused with a message */
  cfg.workers = 0;
  assert_int_equal(vr_psim_run(&cfg, NULL, &s, &err), VR_EINVAL);
  assert_non_null(strstr(err.msg, "workers"));
  /* a tick under 1 ns made the row index divide by zero */
  cfg.workers = 10, cfg.duration_s = 1e-3, cfg.tick_s = 1e-10;
  assert_int_equal(vr_psim_run(&cfg, NULL, &s, &err), VR_EINVAL);
  vr_pipe_data_free(&d);
}

static int cmp_f(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* The latency sort (radix, by the float's bits) orders as a comparison
 * sort does: zeros, subnormals, negatives, ties, large values. */
static void test_sort_floats(void **st) {
  (void)st;
  enum { N = 5000 };
  float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b),
        *tmp = malloc(N * sizeof *tmp);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(tmp);
  srand(3);
  for (int i = 0; i < N; i++) {
    float x = (float)rand() / (float)RAND_MAX * 500.0f;
    if (i % 7 == 0) x = (float)(i % 13); /* ties */
    if (i % 11 == 0) x = -x;
    if (i % 101 == 0) x = 1e-40f;         /* subnormal */
    if (i % 103 == 0) x = 3e38f;
    a[i] = b[i] = x;
  }
  vr__psim_sort_floats(a, tmp, N);
  qsort(b, N, sizeof *b, cmp_f);
  for (int i = 0; i < N; i++) assert_true(a[i] == b[i]);
  vr__psim_sort_floats(a, tmp, 0); /* empty: nothing to do */
  free(a), free(b), free(tmp);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sort_floats),
      cmocka_unit_test(test_loader),
      cmocka_unit_test(test_loader_errors),
      cmocka_unit_test(test_loader_unlabelled_rest),
      cmocka_unit_test(test_most_accurate_first),
      cmocka_unit_test(test_hop),
      cmocka_unit_test(test_sim_light),
      cmocka_unit_test(test_sim_overload),
      cmocka_unit_test(test_sim_loading_replica),
      cmocka_unit_test(test_sim_policy),
  };
  return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
