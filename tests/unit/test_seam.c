/* The request-path seam: one scripted scenario (arrivals with SLOs and
 * accuracy floors, two variant profiles, one worker) runs through the live
 * stack — control-plane routing (vr_control_route) and the runtime's
 * instances with a backend of known timing — and through the simulator,
 * and every request must get the same outcome on both sides: served by
 * the same variant, dropped for its deadline, or rejected as infeasible.
 *
 * Deterministic: the live side runs on a virtual clock. The backend
 * blocks each batch until the test has moved the clock to the batch's end
 * (start + its profiled time), and the test moves time forward only when
 * every instance is quiescent (blocked in a batch, or with nothing left to
 * answer), so the executors decide at exactly the simulator's times
 * whatever the machine's load. */
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
#include "sim/sim.h"
#include "vr_test.h"

#define NREQ 240
#define T0 1000000000LL /* live time of simulated t = 0 */

/* Two models of app "syn": fast (80%, 1 ms + 0.5 ms/row, batch 8) and
 * slow (90%, 2 ms + 1 ms/row, batch 4). Linear in the batch size, so the
 * profile's interpolation between measured sizes is exact. */
typedef struct model_def {
  const char *name;
  double acc;
  int64_t base_ns, row_ns;
  int max_batch;
} model_def;
static const model_def k_models[2] = {{"fast", 80, 1000000, 500000, 8},
                                      {"slow", 90, 2000000, 1000000, 4}};

typedef struct req_def {
  int64_t t_ns; /* simulated arrival */
  double slo_ms, acc;
} req_def;

enum { OUT_NONE = 0, OUT_SERVED, OUT_DROPPED, OUT_REJECTED };
typedef struct outcome {
  int what;
  char variant[VR_PROF_NAME_MAX * 2];
} outcome;

static req_def g_req[NREQ];
static outcome g_sim[NREQ], g_live[NREQ];
static char g_tmp[256];
static char g_vname[2][128]; /* store variant names */

/* Three kinds of query: anything within 8 ms (fast serves), 85% within
 * 20 ms (only slow), 85% within 4 ms (infeasible: slow needs 2 x 3 ms).
 * Bursts overload the instances, so some requests are dropped. Arrival
 * times differ from every batch end (ends are starts + multiples of 0.5
 * ms; arrivals carry j ns), so no two events tie. */
static void script(void) {
  uint64_t x = 12345;
  int64_t t = 1000000;
  for (int j = 0; j < NREQ; j++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    int burst = (j / 40) % 2; /* 40 calm, 40 dense */
    int64_t gap_us = burst ? 40 + (int64_t)((x >> 33) % 200)
                           : 300 + (int64_t)((x >> 33) % 2000);
    t += gap_us * 1000;
    g_req[j].t_ns = t + j;
    int kind = (int)((x >> 20) % 10);
    if (kind < 6) g_req[j].slo_ms = 8, g_req[j].acc = 0;
    else if (kind < 9) g_req[j].slo_ms = 20, g_req[j].acc = 85;
    else g_req[j].slo_ms = 4, g_req[j].acc = 85;
  }
}

static int find_req(int64_t t_ns) {
  for (int j = 0; j < NREQ; j++)
    if (g_req[j].t_ns == t_ns) return j;
  return -1;
}

static void profile_of(const model_def *m, vr_profile *p, const char *vname) {
  vr_profile_init(p);
  snprintf(p->model, sizeof p->model, "%s", m->name);
  strcpy(p->app, "syn");
  assert_true(snprintf(p->variant, sizeof p->variant, "%s", vname) <
              (int)sizeof p->variant);
  strcpy(p->precision, "fp32");
  p->threads = 1;
  p->max_batch = m->max_batch;
  p->load_ms = 0; /* the simulator loads on the first query: at once */
  p->mem_bytes = 1 << 20;
  for (int k = 0; (1 << k) <= m->max_batch; k++)
    p->lat.p50_ms[k] = (double)(m->base_ns + m->row_ns * (1 << k)) / 1e6;
  p->accuracy = m->acc;
  p->cost_per_s = 0.0425 / 3600;
}

/* ---- the simulator ------------------------------------------------------ */

static vr_profile g_prof[2];

static void sim_outcome(void *user, const vr_req *r, int what, int variant) {
  (void)user;
  int j = find_req(r->t_ns);
  assert_true(j >= 0);
  assert_int_equal(g_sim[j].what, OUT_NONE);
  g_sim[j].what = what == VR_SIM_SERVED    ? OUT_SERVED
                  : what == VR_SIM_DROPPED ? OUT_DROPPED
                                           : OUT_REJECTED;
  if (variant >= 0)
    snprintf(g_sim[j].variant, sizeof g_sim[j].variant, "%s",
             g_prof[variant].variant);
}

static void run_sim(void) {
  char trace[300];
  snprintf(trace, sizeof trace, "%s/trace.csv", g_tmp);
  FILE *f = fopen(trace, "w");
  assert_non_null(f);
  for (int j = 0; j < NREQ; j++)
    fprintf(f, "%.6f,0,%g,%g\n", g_req[j].t_ns / 1e6, g_req[j].slo_ms, g_req[j].acc);
  fclose(f);
  json_t *profs = json_array();
  for (int i = 0; i < 2; i++) json_array_append_new(profs, vr_profile_to_json(&g_prof[i]));
  json_t *cfg = json_pack(
      "{s:s, s:f, s:f, s:b, s:b, s:s, s:o, s:[{s:i, s:f, s:f, s:i}],"
      " s:[{s:s, s:s, s:s}], s:{s:s}}",
      "name", "seam", "duration_s", 2.0, "tick_s", 3600.0, "noise", 0,
      /* as the live side: instances at their max batch, routing only (no
       * policy tick provisions or resizes them) */
      "warm_start", 0,
      "batching", "runtime", "profiles", profs, "workers", "cores", 4,
      "mem_gb", 1.0, "price_per_s", 0.01, "initial", 1, "workloads", "kind",
      "trace", "app", "syn", "file", trace, "policy", "name", "infaas");
  assert_non_null(cfg);
  char *text = json_dumps(cfg, 0);
  json_decref(cfg);
  vr_sim_cfg sc;
  vr_errbuf err = {0};
  int rc = vr_sim_cfg_parse(text, strlen(text), "seam.json", g_tmp, NULL, NULL,
                            &sc, &err);
  free(text);
  if (rc) fail_msg("sim config: %s", err.msg);
  vr_sim_out out = {NULL, NULL, sim_outcome, NULL};
  vr_sim_summary sum;
  rc = vr_sim_run(&sc, &out, &sum, &err);
  if (rc) fail_msg("sim: %s", err.msg);
  vr_sim_cfg_free(&sc);
  assert_int_equal(sum.late, 0); /* the deadline rule never serves late */
}

/* ---- the live side: a gated backend on a virtual clock ------------------ */

typedef struct sess {
  const model_def *m;
  float out[64];
  seam_gate gate;
  int outstanding; /* routed here, not answered */
} sess;
static sess g_sess[2];
static int g_nsess;

static int64_t run_ns(const model_def *m, int b) { return m->base_ns + m->row_ns * b; }

static int fb_model_open(void *self, const vr_model_config *cfg, void **model,
                         vr_errbuf *err) {
  (void)self;
  for (int i = 0; i < 2; i++)
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
  (void)self, (void)in, (void)n_in, (void)n_out, (void)err;
  sess *s = sp;
  seam_gate_batch(&s->gate, run_ns(s->m, batch));
  memset(s->out, 0, sizeof s->out);
  out[0] = (vr_tensor){"y", VR_DT_F32, 2, {batch, 1}, s->out, sizeof(float) * (size_t)batch};
  return 0;
}

typedef struct live_req {
  int j;
  vr_control *c;
  vr_runtime *rt;
  vr_ctl_route r;
  vr_rt_request q;
  float x[2];
  sess *s;
} live_req;
static live_req g_lr[NREQ];

static void on_done(vr_rt_request *q, void *user) {
  live_req *x = user;
  vr_control_completed(x->c, &x->r, q);
  pthread_mutex_lock(&g_mu);
  outcome *o = &g_live[x->j];
  o->what = q->status == 0             ? OUT_SERVED
            : q->status == VR_EDEADLINE ? OUT_DROPPED
                                        : OUT_REJECTED;
  if (!q->status) snprintf(o->variant, sizeof o->variant, "%s", x->r.variant_name);
  x->s->outstanding--;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
}

/* As the server's apps path: the deadline is arrival + latency_ms. */
static void on_routed(void *tag, const vr_ctl_route *r) {
  live_req *x = tag;
  x->r = *r;
  if (r->status) {
    pthread_mutex_lock(&g_mu);
    g_live[x->j].what = OUT_REJECTED;
    pthread_mutex_unlock(&g_mu);
    return;
  }
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < g_nsess; i++)
    if (!strcmp(g_sess[i].m->name, r->model)) x->s = &g_sess[i];
  x->s->outstanding++;
  pthread_mutex_unlock(&g_mu);
  vr_rt_request_init(&x->q);
  x->q.n_in = 1;
  x->q.in[0] = (vr_tensor){"x", VR_DT_F32, 2, {1, 2}, x->x, sizeof x->x};
  x->q.arrived_ns = T0 + g_req[x->j].t_ns;
  x->q.timeout_ns = llround(r->slo_ms * 1e6);
  x->q.done = on_done;
  x->q.user = x;
  vr_rt_submit_to(x->rt, r->instance_id, &x->q);
}

/* Every instance blocked in a batch or with nothing left to answer (mu
 * held): nothing can happen before the clock moves. */
static int quiescent(void *ctx) {
  (void)ctx;
  for (int i = 0; i < g_nsess; i++)
    if (!g_sess[i].gate.blocked && g_sess[i].outstanding > 0) return 0;
  return 1;
}

static void write_model(const model_def *m, char *dir, size_t cap) {
  snprintf(dir, cap, "%s/%s", g_tmp, m->name);
  assert_int_equal(vr_mkdirs(dir, NULL), 0);
  char path[400];
  assert_true(snprintf(path, sizeof path, "%s/config.json", dir) < (int)sizeof path);
  FILE *f = fopen(path, "w");
  fprintf(f, "{\"name\":\"%s\",\"app\":\"syn\",\"inputs\":[{\"name\":\"x\",\"datatype\":"
             "\"FP32\",\"shape\":[-1,2]}],\"outputs\":[{\"name\":\"y\",\"datatype\":"
             "\"FP32\",\"shape\":[-1,1]}],\"max_batch_size\":%d,\"instances\":0}",
          m->name, m->max_batch);
  fclose(f);
  /* the fake ignores it */
  assert_true(snprintf(path, sizeof path, "%s/model.onnx", dir) < (int)sizeof path);
  fclose(fopen(path, "w"));
}

static void register_models(vr_store *st) {
  for (int i = 0; i < 2; i++) {
    char dir[VR_STORE_PATH_MAX];
    write_model(&k_models[i], dir, sizeof dir);
    seam_store_add(st, k_models[i].name, "syn", dir, k_models[i].acc, k_models[i].max_batch,
                   &g_prof[i], g_vname[i]);
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
  vr_rt_backend be = {fb_model_open, fb_model_close, fb_session_open,
                      fb_session_close, fb_run, NULL};
  vr_runtime_opts ro;
  vr_runtime_opts_init(&ro);
  ro.backend = &be;
  ro.profile_runs = 1;
  ro.clock = &g_clock;
  vr_runtime *rt;
  assert_int_equal(vr_runtime_create(&ro, &rt, &e), 0);
  /* one warm instance per variant (the simulator loads them on the first
   * query in no time: load_ms 0) */
  for (int i = 0; i < 2; i++) {
    vr_model_config cfg;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/%s", g_tmp, k_models[i].name);
    assert_int_equal(vr_model_config_load(dir, &cfg, &e), 0);
    assert_int_equal(vr_rt_load(rt, &cfg, &e), 0);
    vr_rt_instance_opts io = {VR_PREC_FP32, 1, k_models[i].max_batch, 0};
    assert_true(vr_rt_add_instance(rt, k_models[i].name, &io, &e) > 0);
  }
  vr_control_opts co;
  vr_control_opts_init(&co);
  co.store = st;
  co.rt = rt;
  co.cores = 4;
  co.autoscale = 0; /* the simulator's policy never ticks either */
  co.clock = &g_clock;
  vr_control *c;
  assert_int_equal(vr_control_create(&co, &c, &e), 0);

  vr_vclock_set(&g_clock, T0);
  seam_gate_arm();
  int next = 0;
  for (;;) {
    int step = seam_gate_step(next < NREQ ? T0 + g_req[next].t_ns : INT64_MAX);
    if (step < 0) break;
    if (step == 0) { /* the next arrival */
      live_req *x = &g_lr[next];
      x->j = next;
      x->c = c;
      x->rt = rt;
      vr_ctl_query q = {.app = "syn", .latency_ms = g_req[next].slo_ms,
                        .min_accuracy = g_req[next].acc};
      next++;
      vr_control_route(c, &q, on_routed, x);
    }
    seam_gate_settle(quiescent, NULL);
  }
  vr_control_free(c);
  vr_runtime_free(rt);
  for (int j = 0; j < NREQ; j++) vr_rt_request_clear(&g_lr[j].q);
  vr_store_close(st);
}

static void test_live_matches_sim(void **state) {
  (void)state;
  strcpy(g_tmp, "/tmp/vr_seam_XXXXXX");
  assert_non_null(mkdtemp(g_tmp));
  script();
  for (int i = 0; i < 2; i++) {
    vr_variant_name(g_vname[i], k_models[i].name, VR_PREC_FP32, 1,
                    k_models[i].max_batch);
    profile_of(&k_models[i], &g_prof[i], g_vname[i]);
  }
  run_sim();
  run_live();
  int served[2] = {0, 0}, dropped = 0, rejected = 0, diff = 0;
  for (int j = 0; j < NREQ; j++) {
    const outcome *a = &g_sim[j], *b = &g_live[j];
    if (a->what != b->what || strcmp(a->variant, b->variant)) {
      if (diff++ < 10)
        fprintf(stderr, "request %d (t=%.3f ms, slo %g, acc %g): sim %d %s, live %d %s\n",
                j, g_req[j].t_ns / 1e6, g_req[j].slo_ms, g_req[j].acc, a->what,
                a->variant, b->what, b->variant);
    }
    if (a->what == OUT_SERVED) served[!strcmp(a->variant, g_vname[1])]++;
    dropped += a->what == OUT_DROPPED;
    rejected += a->what == OUT_REJECTED;
  }
  printf("seam: %d requests; served fast %d, slow %d; dropped %d; rejected %d; "
         "%d differ\n", NREQ, served[0], served[1], dropped, rejected, diff);
  assert_int_equal(diff, 0);
  /* the scenario exercises every outcome */
  assert_true(served[0] > 0 && served[1] > 0 && dropped > 0 && rejected > 0);
  vr_rmtree(g_tmp);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_live_matches_sim)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
