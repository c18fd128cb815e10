/* The pipeline seam: one scripted stream of pipeline queries (arrivals with
 * their own SLO and end-to-end accuracy floor) through a pipeline with
 * fan-out — a detector task (two variants) whose grid_crop adapter sends
 * each detected region to one of two child tasks by its label — runs
 * through the live pipeline path (control/pipes_run.c over the control
 * plane and the runtime, with a backend of known timing) and through the
 * pipeline simulator (vr_psim_run with live_rules), and every hop of every
 * query must get the same outcome on both sides: served on the same
 * variant, dropped for its deadline, or infeasible; and the same hops must
 * exist (the same fan-out).
 *
 * Deterministic as tests/unit/test_seam.c: the live side runs on a virtual
 * clock; the backend blocks each batch until the test has moved the clock
 * to its end, and the test moves time only when every instance is
 * quiescent (blocked in a batch, or with nothing queued or being
 * answered). The detector's outputs are a pure function of the query and
 * the detector model, and the simulator's fan-out hook reads the same
 * function through the same adapter rule (vr_fanout_regions). */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "control/control.h"
#include "control/fsutil.h"
#include "seam_gate.h"
#include "control/pipes.h"
#include "policy/fanout.h"
#include "sim/psim.h"
#include "vr_test.h"

#define NREQ 200
#define T0 1000000000LL /* live time of simulated t = 0 */
#define NM 5
#define GRID 4 /* 2 x 2 regions */

/* Latencies linear in the batch size (the profile's interpolation between
 * measured sizes is then exact), in odd nanoseconds so that no two batch
 * ends tie. */
typedef struct model_def {
  const char *name, *app;
  double acc;
  int64_t base_ns, row_ns;
  int max_batch;
  int det; /* 0 child; 1 weak detector; 2 good detector */
} model_def;
static const model_def k_models[NM] = {
    {"det_fast", "pdet", 80, 1013017, 517013, 4, 1},
    {"det_good", "pdet", 95, 2027011, 731009, 4, 2},
    {"ca_fast", "pa", 85, 611003, 203011, 8, 0},
    {"ca_good", "pa", 97, 1409021, 389017, 8, 0},
    {"cb_only", "pb", 90, 807019, 301007, 8, 0},
};

static const char *k_spec =
    "{\"name\":\"pseam\",\"latency_ms\":40,\"root\":\"detect\",\"tasks\":["
    "{\"name\":\"detect\",\"app\":\"pdet\",\"adapter\":{\"kind\":\"grid_crop\","
    "\"scores\":\"scores\",\"labels\":\"labels\",\"threshold\":0.5,\"grid\":[2,2],"
    "\"label_names\":[\"a\",\"b\"]},\"children\":[{\"task\":\"ca\",\"label\":\"a\"},"
    "{\"task\":\"cb\",\"label\":\"b\"}]},"
    "{\"name\":\"ca\",\"app\":\"pa\"},{\"name\":\"cb\",\"app\":\"pb\"}]}";

typedef struct req_def {
  int64_t t_ns; /* simulated arrival */
  double slo_ms, acc;
} req_def;

enum { OUT_NONE = 0, OUT_SERVED, OUT_DROPPED, OUT_INFEASIBLE, OUT_REJECTED };
static const char *const k_out[] = {"none", "served", "dropped", "infeasible", "rejected"};

/* One hop's outcome, keyed by (query, task, region). */
typedef struct hop_out {
  int what;
  char variant[128];
} hop_out;
#define NTASK 3
static hop_out g_sim[NREQ][NTASK][GRID + 1], g_live[NREQ][NTASK][GRID + 1];
static int g_sim_n, g_live_n;

static req_def g_req[NREQ];
static char g_tmp[256];
static char g_vname[NM][128];
static vr_fanout g_fan;

/* What is in query j's canvas: region r holds an object (55%) of label
 * a or b; the weak detector sees 70% of them. */
static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}
static void detect(int j, int det, float *scores, float *labels) {
  for (int r = 0; r < GRID; r++) {
    uint64_t h = mix((uint64_t)j * 16 + (uint64_t)r + 1);
    int present = h % 100 < 55, lab = (int)((h >> 20) % 2);
    int seen = present && (det == 2 || (h >> 40) % 100 < 70);
    scores[r] = seen ? 0.9f : 0.1f;
    labels[r * 2 + lab] = 0.8f;
    labels[r * 2 + !lab] = 0.2f;
  }
}

/* Three kinds of query at SLO 10-25 ms: anything (the fast variants
 * serve), 80% end to end (89.4% per task: det_good, ca_good; cb's 90%
 * serves), 82% (90.6% per task: cb is infeasible). 1 in 12 asks 5 ms:
 * infeasible at the root (2 x 1.53 ms > 2.5 ms). Bursts overload the
 * instances, so hops are dropped. Arrivals carry j ns. */
static void script(void) {
  uint64_t x = 4242;
  int64_t t = 1000000;
  for (int j = 0; j < NREQ; j++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    int burst = (j / 40) % 2;
    int64_t gap_us = burst ? 20 + (int64_t)((x >> 33) % 100) : 1500 + (int64_t)((x >> 33) % 5000);
    t += gap_us * 1000;
    g_req[j].t_ns = t + j;
    int kind = (int)((x >> 20) % 12);
    g_req[j].slo_ms = kind == 11 ? 5 : kind < 6 ? 10 : 25;
    g_req[j].acc = kind < 6 || kind == 11 ? 0 : kind < 9 ? 80 : 82;
  }
}

static void profile_of(const model_def *m, vr_profile *p, const char *vname) {
  vr_profile_init(p);
  snprintf(p->model, sizeof p->model, "%s", m->name);
  snprintf(p->app, sizeof p->app, "%s", m->app);
  assert_true(snprintf(p->variant, sizeof p->variant, "%s", vname) < (int)sizeof p->variant);
  strcpy(p->precision, "fp32");
  p->threads = 1;
  p->max_batch = m->max_batch;
  p->load_ms = 0;
  p->mem_bytes = 1 << 20;
  for (int k = 0; (1 << k) <= m->max_batch; k++)
    p->lat.p50_ms[k] = (double)(m->base_ns + m->row_ns * (1 << k)) / 1e6;
  p->accuracy = m->acc;
  p->cost_per_s = 0.0425 / 3600;
}

static void record(hop_out (*tab)[NTASK][GRID + 1], int *n, int j, int task, int region,
                   int what, const char *variant) {
  assert_true(j >= 0 && j < NREQ && task >= 0 && task < NTASK && region >= -1 &&
              region < GRID);
  hop_out *o = &tab[j][task][region + 1];
  assert_int_equal(o->what, OUT_NONE); /* one outcome per hop */
  o->what = what;
  snprintf(o->variant, sizeof o->variant, "%s", variant ? variant : "");
  (*n)++;
}

/* ---- the simulator ------------------------------------------------------ */

static vr_pipe_data g_data;

static void sim_outcome(void *ctx, const vr_psim_outcome *o) {
  (void)ctx;
  int what = o->served                                  ? OUT_SERVED
             : o->reason == VR_PDROP_PAST_DEADLINE ||
                     o->reason == VR_PDROP_EXPIRED       ? OUT_DROPPED
             : o->reason == VR_PDROP_INFEASIBLE          ? OUT_INFEASIBLE
                                                         : OUT_REJECTED;
  const char *v = NULL;
  if (o->served) {
    int t = o->task;
    v = g_data.pipe->tasks[t].variants[o->slot - g_data.off[t]].name;
  }
  record(g_sim, &g_sim_n, (int)o->query, o->task, o->region, what, v);
}

/* The detector's outputs for the query through the adapter rule: one
 * output per region that fans out, to the child of its label. */
static int sim_fanout(void *ctx, int64_t query, int task, int region, int slot,
                      vr_psim_emit *out, int cap) {
  (void)ctx, (void)region;
  assert_int_equal(task, 0);
  const char *vn = g_data.pipe->tasks[0].variants[slot - g_data.off[0]].name;
  int det = strstr(vn, "det_good") ? 2 : 1;
  float scores[GRID], labels[GRID * 2];
  detect((int)query, det, scores, labels);
  int64_t chw[3] = {1, 4, 4};
  vr_fanout_region reg[GRID];
  int n = vr_fanout_regions(&g_fan, scores, labels, chw, reg, GRID);
  int k = 0;
  for (int i = 0; i < n && k < cap; i++) {
    int c = vr_pipe_task_route_label(g_data.pipe, &g_data.pipe->tasks[0],
                                     g_fan.label_names[reg[i].label]);
    if (c >= 0) out[k++] = (vr_psim_emit){c, reg[i].region};
  }
  return k;
}

static void run_sim(void) {
  vr_errbuf err = {0};
  assert_int_equal(vr_pipeline_parse(k_spec, strlen(k_spec), &g_data.pipe, &err), 0);
  const vr_pipeline *p = g_data.pipe;
  /* each task's variants: the store's variants of its app */
  for (int t = 0; t < p->ntasks; t++) {
    const char *names[NM];
    double acc[NM];
    int n = 0;
    for (int i = 0; i < NM; i++)
      if (!strcmp(k_models[i].app, p->tasks[t].app)) names[n] = g_vname[i], acc[n++] = k_models[i].acc;
    assert_int_equal(vr_pipe_task_set_variants(g_data.pipe, t, names, acc, n, &err), 0);
  }
  vr_pipe_data_index(&g_data);
  int ns = g_data.off[p->ntasks];
  assert_int_equal(ns, NM);
  g_data.prof = vr_calloc((size_t)ns, sizeof *g_data.prof);
  vr_pipe_plan plan;
  assert_int_equal(vr_pipe_plan_init(&plan, p), 0);
  for (int t = 0; t < p->ntasks; t++)
    for (int v = 0; v < p->tasks[t].nvariants; v++)
      for (int i = 0; i < NM; i++)
        if (!strcmp(g_vname[i], p->tasks[t].variants[v].name)) {
          profile_of(&k_models[i], &g_data.prof[g_data.off[t] + v], g_vname[i]);
          /* one instance per variant at its max batch, as live */
          vr_pipe_plan_set(&plan, g_data.prof, t, v, 1, k_models[i].max_batch);
        }
  char trace[300];
  snprintf(trace, sizeof trace, "%s/trace.csv", g_tmp);
  FILE *f = fopen(trace, "w");
  assert_non_null(f);
  for (int j = 0; j < NREQ; j++)
    fprintf(f, "%.6f,0,%g,%g\n", g_req[j].t_ns / 1e6, g_req[j].slo_ms, g_req[j].acc);
  fclose(f);
  vr_workload wl;
  memset(&wl, 0, sizeof wl);
  wl.kind = VR_WL_TRACE;
  wl.path = vr_strdup(trace);
  wl.trace_slo = 1;
  wl.slo_ms = 40;
  vr_psim_cfg cfg = {.data = &g_data, .arrivals = &wl, .workers = NM, .duration_s = 5,
                     .tick_s = 1, .seed = 1, .max_queue = 4096, .drop_mode = VR_EDROP_PER_TASK,
                     .warm_start = 1, .plan = &plan, .ctl_period_s = 10,
                     .live_rules = 1, .fanout = sim_fanout, .on_request = sim_outcome};
  vr_psim_summary sum;
  if (vr_psim_run(&cfg, NULL, &sum, &err)) fail_msg("psim: %s", err.msg);
  assert_int_equal(sum.queries, NREQ);
  vr_psim_summary_free(&sum);
  vr_wl_close(&wl);
  vr_pipe_plan_free(&plan);
}

/* ---- the live side: a gated backend on a virtual clock ------------------ */

typedef struct sess {
  const model_def *m;
  float scores[GRID * 8], labels[GRID * 2 * 8], y[8];
  seam_gate gate;
} sess;
static sess g_sess[NM];
static int g_nsess;

static int64_t run_ns(const model_def *m, int b) { return m->base_ns + m->row_ns * b; }

static int fb_model_open(void *self, const vr_model_config *cfg, void **model,
                         vr_errbuf *err) {
  (void)self;
  for (int i = 0; i < NM; i++)
    if (!strcmp(cfg->name, k_models[i].name)) {
      *model = (void *)&k_models[i];
      return 0;
    }
  return vr_errf(err, VR_ENOENT, "no model %s", cfg->name);
}
static void fb_model_close(void *self, void *model) { (void)self, (void)model; }
static int fb_session_open(void *self, void *model, vr_precision prec, int threads,
                           int max_batch, void **out, vr_errbuf *err) {
  (void)self, (void)prec, (void)threads, (void)max_batch, (void)err;
  pthread_mutex_lock(&g_mu);
  sess *s = &g_sess[g_nsess++];
  s->m = model;
  seam_gate_add(&s->gate);
  pthread_mutex_unlock(&g_mu);
  *out = s;
  return 0;
}
static void fb_session_close(void *self, void *s) { (void)self, (void)s; }
static int fb_run(void *self, void *sp, int batch, const vr_tensor *in, int n_in,
                  vr_tensor *out, int n_out, vr_errbuf *err) {
  (void)self, (void)n_in, (void)n_out, (void)err;
  sess *s = sp;
  seam_gate_batch(&s->gate, run_ns(s->m, batch));
  if (s->m->det) { /* row b's canvas carries its query index in pixel 0 */
    memset(s->labels, 0, sizeof s->labels);
    const float *x = in[0].data;
    for (int b = 0; b < batch; b++)
      detect((int)x[b * 16], s->m->det, s->scores + b * GRID, s->labels + b * GRID * 2);
    out[0] = (vr_tensor){"scores", VR_DT_F32, 2, {batch, GRID}, s->scores,
                         sizeof(float) * (size_t)(batch * GRID)};
    out[1] = (vr_tensor){"labels", VR_DT_F32, 3, {batch, GRID, 2}, s->labels,
                         sizeof(float) * (size_t)(batch * GRID * 2)};
    return 0;
  }
  memset(s->y, 0, sizeof s->y);
  out[0] = (vr_tensor){"y", VR_DT_F32, 2, {batch, 1}, s->y, sizeof(float) * (size_t)batch};
  return 0;
}

static float g_x[NREQ][16];
static int g_done; /* pipeline results received */

static void on_result(vr_pipe_result *r, void *tag) {
  int j = (int)(intptr_t)tag;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < r->n_hops; i++) {
    const vr_pipe_hop_rec *h = r->hops[i];
    int what = h->outcome == VR_POUT_OK           ? OUT_SERVED
               : h->outcome == VR_POUT_DROPPED    ? OUT_DROPPED
               : h->outcome == VR_POUT_INFEASIBLE ? OUT_INFEASIBLE
                                                  : OUT_REJECTED;
    if (what == OUT_REJECTED) fprintf(stderr, "query %d hop %d: %s\n", j, i, h->msg);
    record(g_live, &g_live_n, j, h->task, h->region, what,
           what == OUT_SERVED ? h->variant : NULL);
  }
  g_done++;
  pthread_mutex_unlock(&g_mu);
  vr_pipe_result_free(r);
}

/* Nothing can happen before the clock moves: every instance is blocked in
 * a batch, or has nothing queued and no batch being answered (mu held). */
static int quiescent(void *rtp) {
  vr_runtime *rt = rtp;
  vr_rt_instance_stats st[NM];
  int n = vr_rt_instances(rt, NULL, st, NM);
  for (int i = 0; i < n; i++) {
    sess *s = NULL;
    for (int k = 0; k < g_nsess; k++)
      if (!strcmp(g_sess[k].m->name, st[i].model)) s = &g_sess[k];
    if (!s->gate.blocked && (st[i].queue_rows > 0 || st[i].busy_rows > 0)) return 0;
  }
  return 1;
}

static void write_model(const model_def *m, char *dir, size_t cap) {
  snprintf(dir, cap, "%s/%s", g_tmp, m->name);
  assert_int_equal(vr_mkdirs(dir, NULL), 0);
  char path[400];
  assert_true(snprintf(path, sizeof path, "%s/config.json", dir) < (int)sizeof path);
  FILE *f = fopen(path, "w");
  if (m->det)
    fprintf(f, "{\"name\":\"%s\",\"app\":\"%s\",\"inputs\":[{\"name\":\"x\",\"datatype\":"
               "\"FP32\",\"shape\":[-1,1,4,4]}],\"outputs\":[{\"name\":\"scores\","
               "\"datatype\":\"FP32\",\"shape\":[-1,4]},{\"name\":\"labels\",\"datatype\":"
               "\"FP32\",\"shape\":[-1,4,2]}],\"max_batch_size\":%d,\"instances\":0}",
            m->name, m->app, m->max_batch);
  else
    fprintf(f, "{\"name\":\"%s\",\"app\":\"%s\",\"inputs\":[{\"name\":\"x\",\"datatype\":"
               "\"FP32\",\"shape\":[-1,1,2,2]}],\"outputs\":[{\"name\":\"y\",\"datatype\":"
               "\"FP32\",\"shape\":[-1,1]}],\"max_batch_size\":%d,\"instances\":0}",
            m->name, m->app, m->max_batch);
  fclose(f);
  assert_true(snprintf(path, sizeof path, "%s/model.onnx", dir) < (int)sizeof path);
  fclose(fopen(path, "w")); /* the fake ignores it */
}

static void register_models(vr_store *st) {
  for (int i = 0; i < NM; i++) {
    const model_def *m = &k_models[i];
    char dir[VR_STORE_PATH_MAX];
    write_model(m, dir, sizeof dir);
    vr_profile prof;
    profile_of(m, &prof, g_vname[i]);
    seam_store_add(st, m->name, m->app, dir, m->acc, m->max_batch, &prof, g_vname[i]);
  }
}

static void run_live(void) {
  char db[300];
  snprintf(db, sizeof db, "%s/store.db", g_tmp);
  vr_errbuf e = {0};
  vr_store *st;
  assert_int_equal(vr_store_open_path(db, &st, &e), 0);
  register_models(st);

  vr_vclock_init(&g_clock, T0 - VR_NS_PER_S);
  vr_rt_backend be = {fb_model_open, fb_model_close, fb_session_open, fb_session_close,
                      fb_run, NULL};
  vr_runtime_opts ro;
  vr_runtime_opts_init(&ro);
  ro.backend = &be;
  ro.profile_runs = 1;
  ro.clock = &g_clock;
  vr_runtime *rt;
  assert_int_equal(vr_runtime_create(&ro, &rt, &e), 0);
  for (int i = 0; i < NM; i++) { /* one warm instance per variant */
    vr_model_config cfg;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/%s", g_tmp, k_models[i].name);
    assert_int_equal(vr_model_config_load(dir, &cfg, &e), 0);
    assert_int_equal(vr_rt_load(rt, &cfg, &e), 0);
    vr_rt_instance_opts io = {VR_PREC_FP32, 1, k_models[i].max_batch, 0};
    if (vr_rt_add_instance(rt, k_models[i].name, &io, &e) <= 0) fail_msg("%s", e.msg);
  }
  vr_control_opts co;
  vr_control_opts_init(&co);
  co.store = st;
  co.rt = rt;
  co.cores = 8;
  co.autoscale = 0; /* the simulator's plan is static too */
  co.clock = &g_clock;
  vr_control *c;
  assert_int_equal(vr_control_create(&co, &c, &e), 0);
  vr_pipes *ps;
  assert_int_equal(vr_pipes_create(c, rt, st, &ps, &e), 0);
  vr_pipes_set_clock(ps, &g_clock);
  char name[64];
  if (vr_pipes_register(ps, k_spec, strlen(k_spec), name, &e)) fail_msg("register: %s", e.msg);

  vr_vclock_set(&g_clock, T0);
  seam_gate_arm();
  int next = 0;
  for (;;) {
    int step = seam_gate_step(next < NREQ ? T0 + g_req[next].t_ns : INT64_MAX);
    if (step < 0) break;
    if (step == 0) { /* the next arrival */
      int j = next++;
      g_x[j][0] = (float)j;
      vr_pipe_query q = {.pipeline = "pseam", .latency_ms = g_req[j].slo_ms,
                         .min_accuracy = g_req[j].acc, .n_in = 1};
      q.in[0] = (vr_tensor){"x", VR_DT_F32, 4, {1, 1, 4, 4}, g_x[j], sizeof g_x[j]};
      vr_pipes_infer(ps, &q, on_result, (void *)(intptr_t)j);
    }
    seam_gate_settle(quiescent, rt);
  }
  int64_t until = vr_now_ns() + 30 * VR_NS_PER_S;
  pthread_mutex_lock(&g_mu);
  while (g_done < NREQ) { /* the last answers of dropped hops */
    pthread_mutex_unlock(&g_mu);
    usleep(100);
    pthread_mutex_lock(&g_mu);
    if (vr_now_ns() > until) fail_msg("only %d of %d pipeline results", g_done, NREQ);
  }
  pthread_mutex_unlock(&g_mu);
  vr_pipes_free(ps);
  vr_control_free(c);
  vr_runtime_free(rt);
  vr_store_close(st);
}

static void test_live_matches_psim(void **state) {
  (void)state;
  strcpy(g_tmp, "/tmp/vr_pseam_XXXXXX");
  assert_non_null(mkdtemp(g_tmp));
  script();
  const char *adapter = strstr(k_spec, "{\"kind\"");
  const char *end = strchr(adapter, '}');
  vr_errbuf err = {0};
  assert_int_equal(vr_fanout_parse(adapter, (size_t)(end - adapter + 1), &g_fan, &err), 0);
  for (int i = 0; i < NM; i++)
    vr_variant_name(g_vname[i], k_models[i].name, VR_PREC_FP32, 1, k_models[i].max_batch);
  run_sim();
  run_live();
  int count[NTASK][5] = {{0}}, diff = 0, hops = 0;
  for (int j = 0; j < NREQ; j++)
    for (int t = 0; t < NTASK; t++)
      for (int r = 0; r <= GRID; r++) {
        const hop_out *a = &g_sim[j][t][r], *b = &g_live[j][t][r];
        if (a->what != b->what || strcmp(a->variant, b->variant)) {
          if (diff++ < 12)
            fprintf(stderr, "query %d (t=%.3f ms, slo %g, acc %g) task %d region %d: "
                    "sim %s %s, live %s %s\n", j, g_req[j].t_ns / 1e6, g_req[j].slo_ms,
                    g_req[j].acc, t, r - 1, k_out[a->what], a->variant, k_out[b->what],
                    b->variant);
        }
        count[t][a->what]++;
        hops += a->what != OUT_NONE;
      }
  printf("pipe seam: %d queries, %d hops (sim %d, live %d); %d differ\n", NREQ, hops,
         g_sim_n, g_live_n, diff);
  for (int t = 0; t < NTASK; t++)
    printf("  task %s: served %d, dropped %d, infeasible %d, rejected %d\n",
           g_data.pipe->tasks[t].name, count[t][OUT_SERVED], count[t][OUT_DROPPED],
           count[t][OUT_INFEASIBLE], count[t][OUT_REJECTED]);
  assert_int_equal(diff, 0);
  assert_int_equal(g_sim_n, g_live_n);
  /* the scenario exercises fan-out to both children and every outcome */
  assert_true(count[1][OUT_SERVED] > 0 && count[2][OUT_SERVED] > 0);
  assert_true(count[0][OUT_INFEASIBLE] > 0 && count[2][OUT_INFEASIBLE] > 0);
  assert_true(count[1][OUT_DROPPED] + count[2][OUT_DROPPED] > 0);
  vr_pipe_data_free(&g_data);
  vr_rmtree(g_tmp);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_live_matches_psim)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
