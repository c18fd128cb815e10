/*
 * Per-hop overhead of live pipelines (issue 14; docs/BENCHMARKS.md
 * "Pipeline hop overhead"): the example fashion_scenes pipeline on the real
 * engine, runtime and control plane, in process (no HTTP), one request at a
 * time, against a client that calls the same models itself on the same
 * runtime:
 *   pipeline   vr_pipes_infer: route every hop (control plane), queue it
 *              with the end-to-end deadline, crop on the executor thread,
 *              gather the tree;
 *   client-par the client runs the detector, crops, submits every crop at
 *              once to the child model and waits for all (same parallelism
 *              as the pipeline);
 *   client-seq the client calls the models one after another.
 * Overhead per hop = (pipeline - client-par) mean latency / hops per
 * request. Rounds alternate the three modes so machine noise hits all.
 *
 *   build/bench/bench_pipeline_hop [SRC_DIR] [requests_per_round] [rounds]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/npy.h"
#include "control/control.h"
#include "control/fsutil.h"
#include "control/pipes.h"
#include "control/register.h"
#include "policy/fanout.h"

static char g_tmp[256];

static int reg(const char *src, const char *path, const char *name, const char *app,
               double declared, vr_store *st) {
  char full[1200], x[1200], y[1200], repo[300];
  snprintf(full, sizeof full, "%s/%s", src, path);
  snprintf(x, sizeof x, "%s/models/fmnist-data/val_inputs.npy", src);
  snprintf(y, sizeof y, "%s/models/fmnist-data/val_labels.npy", src);
  snprintf(repo, sizeof repo, "%s/repo", g_tmp);
  vr_register_req r;
  vr_register_req_init(&r);
  r.app = app;
  r.name = name;
  r.model_path = full;
  r.repo_dir = repo;
  if (declared > 0) r.declared_accuracy = declared;
  else r.val_inputs = x, r.val_labels = y;
  r.gen.max_threads = 1;
  r.gen.max_batch = 16;
  r.gen.precisions = 1u << VR_PREC_FP32;
  r.prof.runs = 20;
  r.quiet = 1;
  vr_errbuf e = {0};
  int rc = vr_register(st, &r, NULL, &e);
  if (rc) fprintf(stderr, "register %s: %s\n", name, e.msg);
  return rc;
}

typedef struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int left;
  vr_pipe_result *res;
} waiter;

static void pipe_done(vr_pipe_result *r, void *tag) {
  waiter *w = tag;
  pthread_mutex_lock(&w->mu);
  w->res = r;
  w->left = 0;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static void rt_done(vr_rt_request *q, void *tag) {
  (void)q;
  waiter *w = tag;
  pthread_mutex_lock(&w->mu);
  if (--w->left == 0) pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static void wait_all(waiter *w) {
  pthread_mutex_lock(&w->mu);
  while (w->left > 0) pthread_cond_wait(&w->cv, &w->mu);
  pthread_mutex_unlock(&w->mu);
}

/* Inside the pipeline, per child hop: parent's compute done -> child
 * queued in the runtime (executor hand-off, routing, crop, submit); per
 * request: last hop done -> result handed over (gather). */
static double g_handoff_ns, g_gather_ns;
static long g_children, g_requests;

static void measure(const vr_pipe_result *r) {
  int64_t last = 0;
  for (int i = 0; i < r->n_hops; i++) {
    const vr_pipe_hop_rec *h = r->hops[i];
    if (h->rt.end_ns > last) last = h->rt.end_ns;
    if (h->parent < 0) continue;
    g_handoff_ns += (double)(h->rt.arrival_ns - r->hops[h->parent]->rt.end_ns);
    g_children++;
  }
  g_gather_ns += (double)(r->end_ns - last);
  g_requests++;
}

/* One pipeline request; returns its hop count. */
static int run_pipeline(vr_pipes *p, const float *img) {
  waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, NULL};
  vr_pipe_query q = {.pipeline = "fashion_scenes", .latency_ms = 1000, .n_in = 1};
  q.in[0] = (vr_tensor){"input", VR_DT_F32, 4, {1, 1, 84, 84}, (void *)img,
                        84 * 84 * sizeof(float)};
  vr_pipes_infer(p, &q, pipe_done, &w);
  wait_all(&w);
  int n = w.res->outcome == VR_POUT_OK ? w.res->n_hops : -1;
  if (n < 0) fprintf(stderr, "pipeline: %s\n", w.res->msg);
  else measure(w.res);
  vr_pipe_result_free(w.res);
  return n;
}

static void submit(vr_runtime *rt, const char *model, vr_rt_request *r, const float *x,
                   int64_t c, int64_t h, int64_t wd, waiter *w) {
  vr_rt_request_init(r);
  r->n_in = 1;
  r->in[0] = (vr_tensor){"input", VR_DT_F32, 4, {1, c, h, wd}, (void *)x,
                         (size_t)(c * h * wd) * sizeof(float)};
  r->done = rt_done;
  r->user = w;
  vr_rt_submit(rt, model, r);
}

/* The client's own fan-out: detector, regions, crops, children. */
static int run_client(vr_runtime *rt, const vr_fanout *a, const float *img, int parallel) {
  static float crops[9][784];
  vr_rt_request det, kids[9];
  waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, NULL};
  submit(rt, "fscenes_det_small", &det, img, 1, 84, 84, &w);
  wait_all(&w);
  if (det.status) {
    fprintf(stderr, "client: %s\n", det.err.msg);
    return -1;
  }
  int64_t chw[3] = {1, 84, 84};
  vr_fanout_region g[9];
  int n = vr_fanout_regions(a, det.out[0].data, det.out[1].data, chw, g, 9);
  for (int i = 0; i < n; i++) vr_fanout_crop(a, img, chw, &g[i], crops[i]);
  vr_rt_request_clear(&det);
  waiter wk = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, parallel ? n : 1, NULL};
  for (int i = 0; i < n; i++) {
    submit(rt, "fmnist_mlp", &kids[i], crops[i], 1, 28, 28, &wk);
    if (!parallel) {
      wait_all(&wk);
      wk.left = 1;
    }
  }
  if (parallel && n) wait_all(&wk);
  for (int i = 0; i < n; i++) vr_rt_request_clear(&kids[i]);
  return 1 + n;
}

int main(int argc, char **argv) {
  const char *src = argc > 1 ? argv[1] : ".";
  int per_round = argc > 2 ? atoi(argv[2]) : 400, rounds = argc > 3 ? atoi(argv[3]) : 5;
  strcpy(g_tmp, "/tmp/vr_hopbench_XXXXXX");
  if (!mkdtemp(g_tmp)) return 1;
  char db[300], path[1200];
  snprintf(db, sizeof db, "%s/store.db", g_tmp);
  vr_errbuf e = {0};
  vr_store *st = NULL;
  vr_runtime *rt = NULL;
  vr_control *ctl = NULL;
  vr_pipes *p = NULL;
  vr_npy x = {0};
  int rc = vr_store_open_path(db, &st, &e);
  /* One model per task, so every mode runs the same models. */
  if (!rc) rc = reg(src, "models/fmnist/fmnist_mlp/model.onnx", "fmnist_mlp", "fashion", 0, st);
  if (!rc)
    rc = reg(src, "models/pipelines/fashion_scenes/fscenes_det_small/model.onnx",
             "fscenes_det_small", "fscenes_detect", 90, st);
  vr_runtime_opts ro;
  vr_runtime_opts_init(&ro);
  if (!rc) rc = vr_runtime_create(&ro, &rt, &e);
  vr_control_opts co;
  vr_control_opts_init(&co);
  co.store = st;
  co.rt = rt;
  co.autoscale = 0;
  if (!rc) rc = vr_control_create(&co, &ctl, &e);
  if (!rc) rc = vr_control_start(ctl, &e);
  if (!rc) rc = vr_pipes_create(ctl, rt, st, &p, &e);
  char *spec = NULL, name[64];
  size_t len;
  snprintf(path, sizeof path, "%s/models/pipelines/fashion_scenes/pipeline.json", src);
  if (!rc) rc = vr_read_file(path, &spec, &len, &e);
  if (!rc) rc = vr_pipes_register(p, spec, len, name, &e);
  snprintf(path, sizeof path, "%s/models/pipelines/fashion_scenes/sample.npy", src);
  if (!rc) rc = vr_npy_read(path, &x, &e);
  vr_fanout a;
  const char *ad = "{\"kind\":\"grid_crop\",\"scores\":\"scores\",\"labels\":\"labels\","
                   "\"threshold\":0.5,\"grid\":[3,3],\"label_names\":[\"garment\",\"footwear_bag\"]}";
  if (!rc) rc = vr_fanout_parse(ad, strlen(ad), &a, &e);
  if (rc) {
    fprintf(stderr, "setup: %s\n", e.msg);
    return 1;
  }
  const float *img = x.data;
  for (int i = 0; i < 100; i++) /* loads the variants the pipeline picks */
    if (run_pipeline(p, img + (i % 8) * 84 * 84) < 0) return 1;
  g_handoff_ns = g_gather_ns = 0;
  g_children = g_requests = 0;
  double sum[3] = {0}, hops[3] = {0};
  const char *mode[3] = {"pipeline", "client-par", "client-seq"};
  for (int r = 0; r < rounds; r++)
    for (int m = 0; m < 3; m++) {
      int64_t t0 = vr_now_ns();
      for (int i = 0; i < per_round; i++) {
        const float *im = img + (i % 8) * 84 * 84;
        int h = m == 0 ? run_pipeline(p, im) : run_client(rt, &a, im, m == 1);
        if (h < 0) return 1;
        hops[m] += h;
      }
      sum[m] += (double)(vr_now_ns() - t0);
    }
  int n = per_round * rounds;
  double mean[3];
  for (int m = 0; m < 3; m++) {
    mean[m] = sum[m] / n / 1e3;
    printf("%-11s mean %8.1f us per request, %.2f hops per request\n", mode[m], mean[m],
           hops[m] / n);
  }
  double per_hop = (mean[0] - mean[1]) / (hops[0] / n);
  /* The adapter alone: regions + crops of one canvas's detector output. */
  float sc[9], lb[18], out[784];
  for (int i = 0; i < 9; i++) sc[i] = 0.9f, lb[2 * i] = 0.7f, lb[2 * i + 1] = 0.3f;
  int64_t chw[3] = {1, 84, 84}, t0 = vr_now_ns();
  vr_fanout_region g[9];
  int reps = 100000, cnt = 0;
  for (int i = 0; i < reps; i++) {
    int k = vr_fanout_regions(&a, sc, lb, chw, g, 9);
    for (int j = 0; j < k; j++) vr_fanout_crop(&a, img, chw, &g[j], out);
    cnt += k + (int)out[5];
  }
  double crop_us = (double)(vr_now_ns() - t0) / reps / 9 / 1e3;
  double handoff = g_handoff_ns / (g_children ? g_children : 1) / 1e3;
  double gather = g_gather_ns / (g_requests ? g_requests : 1) / 1e3;
  double hop_in = handoff + gather * g_requests / (double)(g_children ? g_children : 1);
  printf("inside the pipeline: hand-off %.1f us per child hop (route + crop + submit), gather "
         "%.1f us per request -> %.1f us per hop\n", handoff, gather, hop_in);
  printf("end to end: (pipeline - client-par) / hops = %.1f us per hop; adapter alone "
         "(region + crop) %.3f us per crop (%d)\n", per_hop, crop_us, cnt > 0);
  printf("{\"pipeline_us\":%.1f,\"client_par_us\":%.1f,\"client_seq_us\":%.1f,"
         "\"hops_per_request\":%.3f,\"handoff_us\":%.1f,\"gather_us\":%.1f,"
         "\"overhead_per_hop_us\":%.1f,\"e2e_diff_per_hop_us\":%.1f,\"crop_us\":%.3f,"
         "\"requests\":%d}\n", mean[0], mean[1], mean[2], hops[0] / n, handoff, gather, hop_in,
         per_hop, crop_us, n);
  vr_free(spec);
  vr_npy_free(&x);
  vr_control_stop(ctl);
  vr_pipes_free(p);
  vr_runtime_free(rt);
  vr_control_free(ctl);
  vr_store_close(st);
  vr_rmtree(g_tmp);
  return 0;
}
