/* Live pipelines on the real engine, runtime and control plane, with the
 * committed example (models/pipelines/fashion_scenes):
 *  - bad specs (cycle, unknown task, missing model, a child whose input is
 *    not the adapter's crop, a label the adapter never emits, children
 *    without an adapter, a Loki definition, a child whose model takes
 *    another type than the FP32 crops) are rejected with a clear
 *    error and nothing registered or stored; a good one persists across a
 *    reopen of the store and goes with DELETE;
 *  - a pipeline response equals running the models by hand (the engine,
 *    no runtime) on the same canvases and on crops cut by this test, and
 *    the fan-out equals the detections (score > threshold) counted here;
 *  - a request whose end-to-end deadline passes while its root runs is
 *    dropped at the next hop with an explicit outcome;
 *  - following a plan made elsewhere (a worker under `vario controller
 *    --pipeline-policy`): the plan's per-slot batch caps the instances
 *    held here, and a new plan re-caps them;
 *  - a task's app left without models: requests reaching it are rejected
 *    (503) naming the app and the pipeline, the policy says so once. */
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/npy.h"
#include "control/control.h"
#include "control/fsutil.h"
#include "control/pipes.h"
#include "control/pipes_int.h"
#include "control/pipes_pol.h"
#include "control/register.h"
#include "onnx.pb-c.h"
#include "vr_test.h"

static char g_tmp[256], g_src[1024];
static vr_store *g_store;
static vr_runtime *g_rt;
static vr_control *g_ctl;
static vr_npy g_x; /* sample canvases [8,1,84,84] */

static int reg(const char *path, const char *name, const char *app, double declared) {
  char x[1200], y[1200], repo[300];
  snprintf(x, sizeof x, "%s/models/fmnist-data/val_inputs.npy", g_src);
  snprintf(y, sizeof y, "%s/models/fmnist-data/val_labels.npy", g_src);
  snprintf(repo, sizeof repo, "%s/repo", g_tmp);
  vr_register_req r;
  vr_register_req_init(&r);
  r.app = app;
  r.name = name;
  r.model_path = path;
  r.repo_dir = repo;
  if (declared > 0) r.declared_accuracy = declared;
  else r.val_inputs = x, r.val_labels = y;
  r.gen.max_threads = 1;
  r.gen.max_batch = 8;
  r.gen.precisions = 1u << VR_PREC_FP32;
  r.prof.runs = 2;
  r.quiet = 1;
  vr_errbuf e = {0};
  int rc = vr_register(g_store, &r, NULL, &e);
  if (rc) fprintf(stderr, "register %s: %s\n", name, e.msg);
  return rc;
}

/* value_info "name": elem_type [N, dims...] (N symbolic). */
static Onnx__ValueInfoProto *u8_vi(const char *name, int elem, int nd, const int64_t *dims,
                                   Onnx__TensorShapeProto__Dimension *d,
                                   Onnx__TensorShapeProto__Dimension **dp,
                                   Onnx__TensorShapeProto *shp, Onnx__TypeProto__Tensor *tt,
                                   Onnx__TypeProto *tp, Onnx__ValueInfoProto *vi) {
  for (int i = 0; i <= nd; i++) {
    onnx__tensor_shape_proto__dimension__init(&d[i]);
    if (i == 0) {
      d[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      d[i].dim_param = "N";
    } else {
      d[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      d[i].dim_value = dims[i - 1];
    }
    dp[i] = &d[i];
  }
  onnx__tensor_shape_proto__init(shp);
  shp->n_dim = (size_t)nd + 1;
  shp->dim = dp;
  onnx__type_proto__tensor__init(tt);
  tt->has_elem_type = 1;
  tt->elem_type = elem;
  tt->shape = shp;
  onnx__type_proto__init(tp);
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  onnx__value_info_proto__init(vi);
  vi->name = (char *)name;
  vi->type = tp;
  return vi;
}

/* A model that takes UINT8 [N,1,28,28] (Cast to float, Flatten: [N,784]),
 * i.e. a child that could take a crop's shape but not its FP32 type. */
static int write_u8_model(const char *path) {
  Onnx__TensorShapeProto__Dimension d[2][4], *dp[2][4];
  Onnx__TensorShapeProto shp[2];
  Onnx__TypeProto__Tensor tt[2];
  Onnx__TypeProto tp[2];
  Onnx__ValueInfoProto vi[2], *in[1], *out[1];
  const int64_t xd[] = {1, 28, 28}, yd[] = {784};
  in[0] = u8_vi("x", ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, 3, xd, d[0], dp[0], &shp[0], &tt[0],
                &tp[0], &vi[0]);
  out[0] = u8_vi("y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, yd, d[1], dp[1], &shp[1], &tt[1],
                 &tp[1], &vi[1]);
  Onnx__AttributeProto to = ONNX__ATTRIBUTE_PROTO__INIT, ax = ONNX__ATTRIBUTE_PROTO__INIT;
  Onnx__AttributeProto *cast_at[] = {&to}, *flat_at[] = {&ax};
  to.name = "to", to.has_type = 1, to.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  to.has_i = 1, to.i = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  ax.name = "axis", ax.has_type = 1, ax.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  ax.has_i = 1, ax.i = 1;
  char *cin[] = {"x"}, *cout[] = {"xf"}, *fout[] = {"y"};
  Onnx__NodeProto cast = ONNX__NODE_PROTO__INIT, flat = ONNX__NODE_PROTO__INIT;
  cast.op_type = "Cast", cast.n_input = 1, cast.input = cin, cast.n_output = 1;
  cast.output = cout, cast.n_attribute = 1, cast.attribute = cast_at;
  flat.op_type = "Flatten", flat.n_input = 1, flat.input = cout, flat.n_output = 1;
  flat.output = fout, flat.n_attribute = 1, flat.attribute = flat_at;
  Onnx__NodeProto *nodes[] = {&cast, &flat};
  Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
  g.name = "u8", g.n_node = 2, g.node = nodes, g.n_input = 1, g.input = in;
  g.n_output = 1, g.output = out;
  Onnx__OperatorSetIdProto ops = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsp[] = {&ops};
  ops.domain = "", ops.has_version = 1, ops.version = 13;
  Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
  m.has_ir_version = 1, m.ir_version = 7, m.n_opset_import = 1, m.opset_import = opsp;
  m.graph = &g;
  size_t n = onnx__model_proto__get_packed_size(&m);
  uint8_t *buf = vr_malloc(n);
  if (!buf) return -1;
  onnx__model_proto__pack(&m, buf);
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(buf, 1, n, f) == n;
  vr_free(buf);
  return (f && fclose(f)) || !ok ? -1 : 0;
}

static int setup(void **st) {
  (void)st;
  const char *src = getenv("VR_SOURCE_DIR");
  snprintf(g_src, sizeof g_src, "%s", src ? src : ".");
  strcpy(g_tmp, "/tmp/vr_pipes_XXXXXX");
  if (!mkdtemp(g_tmp)) return -1;
  char db[300], p[1200];
  snprintf(db, sizeof db, "%s/store.db", g_tmp);
  vr_errbuf e = {0};
  if (vr_store_open_path(db, &g_store, &e)) return -1;
  const char *fm[] = {"fmnist_linear", "fmnist_mlp"};
  for (int i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "%s/models/fmnist/%s/model.onnx", g_src, fm[i]);
    if (reg(p, fm[i], "fashion", 0)) return -1;
  }
  /* App fscenes_mixed: fscenes_det_large, and fscenes_det_tiny with its
   * output "scores" renamed "scoreZ" (same length: the ONNX bytes stay
   * valid): the same input, not the adapter's outputs. */
  snprintf(p, sizeof p, "%s/models/pipelines/fashion_scenes/fscenes_det_large/model.onnx", g_src);
  if (reg(p, "fscenes_det_large2", "fscenes_mixed", 91)) return -1;
  snprintf(p, sizeof p, "%s/models/pipelines/fashion_scenes/fscenes_det_tiny/model.onnx", g_src);
  char *onnx = NULL;
  size_t on = 0;
  if (vr_read_file(p, &onnx, &on, &e)) return -1;
  for (size_t i = 0; i + 6 <= on; i++)
    if (!memcmp(onnx + i, "scores", 6)) onnx[i + 5] = 'Z';
  snprintf(p, sizeof p, "%s/fscenes_det_renamed.onnx", g_tmp);
  FILE *f = fopen(p, "wb");
  int wrote = f && fwrite(onnx, 1, on, f) == on;
  vr_free(onnx);
  if ((f && fclose(f)) || !wrote || reg(p, "fscenes_det_renamed", "fscenes_mixed", 90)) return -1;
  snprintf(p, sizeof p, "%s/fmnist_u8.onnx", g_tmp);
  if (write_u8_model(p) || reg(p, "fmnist_u8", "fashion_u8", 80)) return -1;
  const char *det[] = {"fscenes_det_tiny", "fscenes_det_large"};
  for (int i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "%s/models/pipelines/fashion_scenes/%s/model.onnx", g_src, det[i]);
    if (reg(p, det[i], "fscenes_detect", 90 + i)) return -1;
  }
  vr_runtime_opts ro;
  vr_runtime_opts_init(&ro);
  ro.profile_runs = 1;
  if (vr_runtime_create(&ro, &g_rt, &e)) return -1;
  vr_control_opts o;
  vr_control_opts_init(&o);
  o.store = g_store;
  o.rt = g_rt;
  o.cores = 4; /* room for the instances test_follow_batch_caps loads */
  o.autoscale = 0; /* no unloads under the test */
  if (vr_control_create(&o, &g_ctl, &e) || vr_control_start(g_ctl, &e)) return -1;
  snprintf(p, sizeof p, "%s/models/pipelines/fashion_scenes/sample.npy", g_src);
  return vr_npy_read(p, &g_x, &e);
}

static int teardown(void **st) {
  (void)st;
  vr_control_stop(g_ctl);
  vr_runtime_free(g_rt);
  vr_control_free(g_ctl);
  vr_store_close(g_store);
  vr_npy_free(&g_x);
  vr_rmtree(g_tmp);
  return 0;
}

/* Not inlined: GCC 12 then takes edited()'s `at` for a pointer into this
 * frame (a -Wdangling-pointer false positive). */
__attribute__((noinline)) static char *spec_text(void) {
  char p[1200];
  snprintf(p, sizeof p, "%s/models/pipelines/fashion_scenes/pipeline.json", g_src);
  char *t = NULL;
  size_t n;
  vr_errbuf e = {0};
  assert_int_equal(vr_read_file(p, &t, &n, &e), 0);
  return t;
}

/* The committed spec with one substring replaced. */
static char *edited(const char *from, const char *to) {
  char *t = spec_text();
  const char *at = strstr(t, from);
  assert_non_null(at);
  size_t pre = (size_t)(at - t), n = strlen(t) + strlen(to) + 1;
  char *o = vr_malloc(n);
  snprintf(o, n, "%.*s%s%s", (int)pre, t, to, t + pre + strlen(from));
  vr_free(t);
  return o;
}

static int count_pipelines(vr_pipes *p) {
  char *j = vr_pipes_describe(p, NULL);
  int n = 0;
  for (const char *s = j; (s = strstr(s, "\"tasks_count\"")); s++) n++;
  vr_free(j);
  return n;
}

static int count_docs_cb(void *ctx, const char *name, const char *body) {
  (void)name;
  (void)body;
  ++*(int *)ctx;
  return 0;
}

static int count_docs(void) {
  int n = 0;
  vr_errbuf e = {0};
  assert_int_equal(vr_store_load_docs(g_store, "pipeline", count_docs_cb, &n, &e), 0);
  return n;
}

static void expect_reject(vr_pipes *p, char *spec, int code, const char *msg_part) {
  char name[64];
  vr_errbuf e = {0};
  int rc = vr_pipes_register(p, spec, strlen(spec), name, &e);
  if (rc != code || !strstr(e.msg, msg_part))
    fail_msg("expected %s with '%s', got %s: %s", vr_strerror(code), msg_part, vr_strerror(rc),
             e.msg);
  assert_int_equal(count_pipelines(p), 0);
  assert_int_equal(count_docs(), 0);
  vr_free(spec);
}

static void test_bad_specs(void **st) {
  (void)st;
  vr_pipes *p = NULL;
  vr_errbuf e = {0};
  assert_int_equal(vr_pipes_create(g_ctl, g_rt, g_store, &p, &e), 0);
  expect_reject(p, edited("{\"name\": \"garment\", \"app\": \"fashion\"}",
                          "{\"name\": \"garment\", \"app\": \"fashion\", "
                          "\"children\": [\"detect\"]}"),
                VR_EINVAL, "");
  expect_reject(p, edited("{\"task\": \"garment\", \"label\": \"garment\"}",
                          "{\"task\": \"nosuch\", \"label\": \"garment\"}"),
                VR_EINVAL, "nosuch");
  expect_reject(p, edited("\"app\": \"fashion\"", "\"app\": \"shoes\""), VR_ENOENT,
                "app 'shoes' has no registered model");
  expect_reject(p, edited("{\"name\": \"garment\", \"app\": \"fashion\"}",
                          "{\"name\": \"garment\", \"app\": \"fscenes_detect\"}"),
                VR_ESHAPE, "takes [1,84,84] but the adapter of 'detect' sends crops [1,28,28]");
  expect_reject(p, edited("{\"task\": \"garment\", \"label\": \"garment\"}",
                          "{\"task\": \"garment\", \"label\": \"hat\"}"),
                VR_EINVAL, "label 'hat'");
  expect_reject(p, edited("\"grid\": [3, 3]", "\"grid\": [4, 4]"), VR_ESHAPE, "scores");
  expect_reject(p, edited("\"kind\": \"grid_crop\"", "\"kind\": \"boxes\""), VR_EINVAL,
                "unknown kind");
  /* a child takes the adapter's FP32 crops: one whose model takes UINT8
   * of the crop's shape was registered, and every crop then failed */
  expect_reject(p, edited("{\"name\": \"garment\", \"app\": \"fashion\"}",
                          "{\"name\": \"garment\", \"app\": \"fashion_u8\"}"),
                VR_EINVAL, "model 'fmnist_u8' takes UINT8");
  /* every model of the app has the adapter's outputs, not only the most
   * accurate one (a request routed to another failed at its fan-out) */
  expect_reject(p, edited("\"app\": \"fscenes_detect\"", "\"app\": \"fscenes_mixed\""),
                VR_ESHAPE, "model 'fscenes_det_renamed' has no output 'scores' [N,9]");
  char loki[1200];
  snprintf(loki, sizeof loki, "%s/../shared/data/loki/apps/traffic_analysis.json", g_src);
  char *lt = NULL;
  size_t ln;
  if (vr_read_file(loki, &lt, &ln, &e) == 0) expect_reject(p, lt, VR_EINVAL, "names no app");

  /* A good one: registered, persisted, listed once; a second is EEXIST. */
  char *good = spec_text(), name[64];
  assert_int_equal(vr_pipes_register(p, good, strlen(good), name, &e), 0);
  assert_string_equal(name, "fashion_scenes");
  assert_int_equal(vr_pipes_register(p, good, strlen(good), name, &e), VR_EEXIST);
  assert_int_equal(count_pipelines(p), 1);
  vr_pipes_free(p);
  assert_int_equal(vr_pipes_create(g_ctl, g_rt, g_store, &p, &e), 0); /* as after a restart */
  assert_int_equal(count_pipelines(p), 1);
  char *d = vr_pipes_describe(p, "fashion_scenes");
  assert_non_null(strstr(d, "\"candidate_variants\""));
  assert_non_null(strstr(d, "fscenes_det_large-fp32-t1-b1"));
  vr_free(d);
  /* Another process (q, on the same store) deletes it and registers it
   * again with another SLO between two of p's syncs: p serves the new
   * spec, not the one it had under that name. */
  vr_pipes *q;
  assert_int_equal(vr_pipes_create(g_ctl, g_rt, g_store, &q, &e), 0);
  assert_int_equal(vr_pipes_delete(q, "fashion_scenes", &e), 0);
  char *slow = edited("\"latency_ms\": 100", "\"latency_ms\": 777");
  assert_int_equal(vr_pipes_register(q, slow, strlen(slow), name, &e), 0);
  assert_int_equal(vr_pipes_sync(p, &e), 0);
  d = vr_pipes_describe(p, "fashion_scenes");
  assert_non_null(strstr(d, "777"));
  vr_free(d);
  vr_pipes_free(q);
  vr_free(slow);
  /* at most VR_PIPES_MAX served at once: the next is refused by name, not
   * registered and then never planned */
  for (int i = 1; i <= VR_PIPES_MAX; i++) {
    char nm[64];
    snprintf(nm, sizeof nm, "\"name\": \"fs_%d\"", i);
    char *t = edited("\"name\": \"fashion_scenes\"", nm);
    int rc = vr_pipes_register(p, t, strlen(t), name, &e);
    assert_int_equal(rc, i < VR_PIPES_MAX ? 0 : VR_ELIMIT);
    vr_free(t);
  }
  assert_non_null(strstr(e.msg, "delete one first"));
  for (int i = 1; i < VR_PIPES_MAX; i++) {
    char nm[16];
    snprintf(nm, sizeof nm, "fs_%d", i);
    assert_int_equal(vr_pipes_delete(p, nm, &e), 0);
  }
  assert_int_equal(vr_pipes_delete(p, "fashion_scenes", &e), 0);
  assert_int_equal(vr_pipes_delete(p, "fashion_scenes", &e), VR_ENOENT);
  assert_int_equal(count_pipelines(p), 0);
  assert_int_equal(count_docs(), 0);
  vr_pipes_free(p);
  vr_free(good);
}

/* GET and DELETE name a pipeline of the store, wherever it was
 * registered. One another process stored since this one last read the
 * store is described and deleted (both answered "no registered
 * pipeline", and it stayed stored); one this process serves but another
 * deleted meanwhile stops being served here (DELETE answered the same and
 * it kept serving it). */
static void test_delete_shared_store(void **st) {
  (void)st;
  vr_pipes *p, *p0, *q; /* p and p0 read the store before q registers */
  vr_errbuf e = {0};
  char name[64], *good = spec_text();
  assert_int_equal(vr_pipes_create(g_ctl, g_rt, g_store, &p, &e), 0);
  assert_int_equal(vr_pipes_create(g_ctl, g_rt, g_store, &p0, &e), 0);
  assert_int_equal(vr_pipes_create(g_ctl, g_rt, g_store, &q, &e), 0);
  assert_int_equal(vr_pipes_register(q, good, strlen(good), name, &e), 0);
  assert_int_equal(count_docs(), 1);
  /* GET reads the store for a name this process does not serve, as a
   * request does (it answered 404 while requests were served) */
  char *d = vr_pipes_describe(p, "fashion_scenes");
  assert_non_null(d);
  vr_free(d);
  assert_int_equal(count_pipelines(p), 1);
  /* DELETE of one stored, not served here */
  assert_int_equal(count_pipelines(p0), 0);
  if (vr_pipes_delete(p0, "fashion_scenes", &e)) fail_msg("%s", e.msg);
  assert_int_equal(count_docs(), 0);
  /* p and q still serve it: their own DELETE ends that, with success */
  if (vr_pipes_delete(p, "fashion_scenes", &e)) fail_msg("%s", e.msg);
  assert_int_equal(count_pipelines(p), 0);
  if (vr_pipes_delete(q, "fashion_scenes", &e)) fail_msg("%s", e.msg);
  assert_int_equal(count_pipelines(q), 0);
  assert_int_equal(vr_pipes_delete(q, "fashion_scenes", &e), VR_ENOENT);
  assert_non_null(strstr(e.msg, "no registered pipeline named 'fashion_scenes'"));
  vr_pipes_free(p);
  vr_pipes_free(p0);
  vr_pipes_free(q);
  vr_free(good);
}

/* ---- requests ------------------------------------------------------------ */

typedef struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  vr_pipe_result *res;
} waiter;

static void on_done(vr_pipe_result *r, void *tag) {
  waiter *w = tag;
  pthread_mutex_lock(&w->mu);
  w->res = r;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static vr_pipe_result *infer(vr_pipes *p, int row0, int rows, double latency_ms,
                             double min_acc) {
  waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL};
  vr_pipe_query q = {.pipeline = "fashion_scenes", .latency_ms = latency_ms,
                     .min_accuracy = min_acc, .n_in = 1};
  q.in[0] = (vr_tensor){"input", VR_DT_F32, 4, {rows, 1, 84, 84},
                        (float *)g_x.data + (size_t)row0 * 84 * 84,
                        (size_t)rows * 84 * 84 * sizeof(float)};
  vr_pipes_infer(p, &q, on_done, &w);
  pthread_mutex_lock(&w.mu);
  while (!w.res) pthread_cond_wait(&w.cv, &w.mu);
  pthread_mutex_unlock(&w.mu);
  return w.res;
}

/* Runs a model of the repository by hand on the engine (fp32, batch rows). */
static void run_by_hand(const char *model, const float *x, int rows, int c, int h, int w,
                        float *out, size_t out_n, int out_idx) {
  char path[1200];
  snprintf(path, sizeof path, "%s/repo/%s/model.onnx", g_tmp, model);
  vr_model *m = NULL;
  vr_session *s = NULL;
  vr_errbuf e = {0};
  assert_int_equal(vr_model_load(path, &m, &e), 0);
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.max_batch = rows;
  assert_int_equal(vr_session_create(m, &o, &s, &e), 0);
  vr_tensor in = {vr_session_input(s, 0)->name, VR_DT_F32, 4, {rows, c, h, w}, (void *)x,
                  (size_t)rows * c * h * w * sizeof(float)};
  vr_tensor outs[4];
  assert_int_equal(vr_session_run(s, rows, &in, 1, outs, 4, &e), 0);
  assert_int_equal(outs[out_idx].nbytes, out_n * sizeof(float));
  memcpy(out, outs[out_idx].data, out_n * sizeof(float));
  vr_session_free(s);
  vr_model_free(m);
}

static const vr_tensor *hop_out(const vr_pipe_hop_rec *h, const char *name) {
  for (int i = 0; i < h->rt.n_out; i++)
    if (!strcmp(h->rt.out[i].name, name)) return &h->rt.out[i];
  fail_msg("hop %s has no output %s", h->task_name, name);
  return NULL;
}

static void assert_close(const float *a, const float *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (fabsf(a[i] - b[i]) > 1e-4f * (1 + fabsf(b[i])))
      fail_msg("element %zu: pipeline %g, by hand %g", i, a[i], b[i]);
}

static void drop_all(vr_pipes *p) {
  vr_errbuf e = {0};
  assert_int_equal(vr_pipes_delete(p, "fashion_scenes", &e), 0);
  vr_pipes_free(p);
}

static vr_pipes *registered(void) {
  vr_pipes *p = NULL;
  vr_errbuf e = {0};
  char name[64], *good = spec_text();
  assert_int_equal(vr_pipes_create(g_ctl, g_rt, g_store, &p, &e), 0);
  assert_int_equal(vr_pipes_register(p, good, strlen(good), name, &e), 0);
  vr_free(good);
  return p;
}

static void test_matches_by_hand(void **st) {
  (void)st;
  vr_pipes *p = registered();
  for (int row = 0; row < 8; row++) {
    vr_pipe_result *r = infer(p, row, 1, 10000, 0);
    if (r->outcome != VR_POUT_OK) fail_msg("row %d: %s", row, r->msg);
    const vr_pipe_hop_rec *root = r->hops[0];
    assert_string_equal(root->task_name, "detect");
    const float *img = (const float *)g_x.data + (size_t)row * 84 * 84;
    float sc[9], lb[18];
    run_by_hand(root->model, img, 1, 1, 84, 84, sc, 9, 0);
    run_by_hand(root->model, img, 1, 1, 84, 84, lb, 18, 1);
    assert_close(hop_out(root, "scores")->data, sc, 9);
    assert_close(hop_out(root, "labels")->data, lb, 18);
    /* Detections counted here: score > 0.5, label = arg-max. */
    int det = 0;
    for (int g = 0; g < 9; g++) det += sc[g] > 0.5f;
    assert_int_equal(root->fanout, det);
    assert_int_equal(r->n_hops, 1 + det);
    int k = 1;
    for (int g = 0; g < 9; g++) {
      if (!(sc[g] > 0.5f)) continue;
      const vr_pipe_hop_rec *h = r->hops[k++]; /* children in region order */
      assert_int_equal(h->region, g);
      assert_int_equal(h->parent, 0);
      const char *want = lb[2 * g + 1] > lb[2 * g] ? "footwear_bag" : "garment";
      assert_string_equal(h->label, want);
      assert_string_equal(h->task_name, want);
      float crop[784], logits[10];
      for (int y = 0; y < 28; y++)
        memcpy(crop + y * 28, img + ((g / 3) * 28 + y) * 84 + (g % 3) * 28, 28 * sizeof(float));
      run_by_hand(h->model, crop, 1, 1, 28, 28, logits, 10, 0);
      assert_close(hop_out(h, "logits")->data, logits, 10);
      assert_true(h->queue_ns >= 0 && h->compute_ns > 0);
    }
    vr_pipe_result_free(r);
  }
  /* Live multiplicative factor = child requests per detector request. */
  char *d = vr_pipes_describe(p, "fashion_scenes");
  assert_non_null(strstr(d, "\"multiplicative_factor\""));
  vr_free(d);
  char *m = vr_pipes_prometheus(p);
  assert_non_null(strstr(m, "vario_pipeline_requests_total{pipeline=\"fashion_scenes\","
                            "outcome=\"ok\"} 8"));
  vr_free(m);
  drop_all(p);
}

/* A clock that moves 100 ms at every read: the request arrives at t, its
 * root hop starts at t+100 ms and is queued at t+200 ms, so with a 250 ms
 * deadline the root runs (with 50 ms of real time left in the runtime's
 * queue) and every child starts past the deadline. */
static int64_t stepping_now(vr_clock *c) {
  return __atomic_add_fetch(&c->virtual_ns, 100 * VR_NS_PER_MS, __ATOMIC_SEQ_CST);
}

static void test_drop_at_next_hop(void **st) {
  (void)st;
  vr_pipes *p = registered();
  vr_pipe_result *warm = infer(p, 0, 1, 10000, 0); /* variants loaded first */
  assert_int_equal(warm->outcome, VR_POUT_OK);
  vr_pipe_result_free(warm);
  vr_clock clk = {stepping_now, 0};
  vr_pipes_set_clock(p, &clk);
  vr_pipe_result *r = infer(p, 0, 1, 250, 0);
  assert_int_equal(r->outcome, VR_POUT_DROPPED);
  assert_int_equal(r->hops[0]->outcome, VR_POUT_OK);
  assert_true(r->hops[0]->fanout > 0);
  assert_int_equal(r->n_hops, 1 + r->hops[0]->fanout);
  for (int i = 1; i < r->n_hops; i++) {
    assert_int_equal(r->hops[i]->outcome, VR_POUT_DROPPED);
    assert_non_null(strstr(r->hops[i]->msg, "deadline passed"));
    assert_int_equal(r->hops[i]->variant[0], 0); /* never routed */
  }
  assert_non_null(strstr(r->msg, "deadline passed"));
  vr_pipe_result_free(r);
  vr_pipes_set_clock(p, NULL);
  char *m = vr_pipes_prometheus(p);
  assert_non_null(strstr(m, "outcome=\"dropped\"} 1"));
  vr_free(m);
  drop_all(p);
}

/* Under a pipeline policy the drop mode says where a hop may be dropped
 * for its deadline (vr_edrop_deadline_drops), as psim applies it: with
 * Loki's "none" nothing is, so the children that start past the deadline
 * (the stepping clock above) still run (the request still answers
 * dropped, late). They ended "deadline passed", a rule the mode excludes.
 * Every child is served: the plan holds every instance of its apps, those
 * earlier tests loaded included (a planned load without room was skipped
 * and footwear_bag's children ended "no instance serves the task under
 * the plan now"). */
static int children_served(const vr_pipe_result *r) {
  int n = 0;
  for (int i = 1; i < r->n_hops; i++) n += r->hops[i]->outcome == VR_POUT_OK;
  return n;
}

static void test_policy_mode_keeps_late_hops(void **st) {
  (void)st;
  vr_pipes *p = registered();
  vr_errbuf e = {0};
  vr_pipes_policy_opts po = {.policy = "loki_no_drop", .period_s = 3600, .tick_s = 3600};
  assert_int_equal(vr_pipes_set_policy(p, &po, &e), 0);
  vr_pipes_policy_tick(p); /* the first plan, its instances loading */
  for (int i = 0;; i++) { /* until the plan's instances serve */
    vr_pipes_policy_tick(p);
    vr_pipe_result *warm = infer(p, 0, 1, 10000, 0);
    int ok = children_served(warm) == warm->n_hops - 1;
    if (!ok && i == 200) fail_msg("warm-up: %s", warm->msg);
    vr_pipe_result_free(warm);
    if (ok) break;
    nanosleep(&(struct timespec){0, 20 * VR_NS_PER_MS}, NULL);
  }
  vr_clock clk = {stepping_now, 0};
  vr_pipes_set_clock(p, &clk);
  vr_pipe_result *r = infer(p, 0, 1, 250, 0);
  assert_int_equal(r->outcome, VR_POUT_DROPPED);
  assert_int_equal(r->hops[0]->outcome, VR_POUT_OK);
  assert_int_equal(r->n_hops, 1 + r->hops[0]->fanout);
  for (int i = 1; i < r->n_hops; i++) {
    assert_true(r->hops[i]->start_ns > 250 * VR_NS_PER_MS);
    if (strstr(r->hops[i]->msg, "deadline")) fail_msg("hop %d: %s", i, r->hops[i]->msg);
  }
  assert_int_equal(children_served(r), r->n_hops - 1);
  vr_pipe_result_free(r);
  vr_pipes_set_clock(p, NULL);
  drop_all(p);
}

/* An answer later than the deadline plus the batch of the hop that ended
 * last is dropped, as a model-less query's (policy/drop.h): with the
 * stepping clock a one-task pipeline's request arrives at t, its hop
 * starts at t+100 ms and is queued at t+200 ms with 50 ms left, and the
 * answer is ready at t+300 ms: 50 ms past the deadline after a batch of
 * microseconds. It was answered "ok" (200), 50 ms late. */
static void test_late_answer_dropped(void **st) {
  (void)st;
  vr_pipes *p = NULL;
  vr_errbuf e = {0};
  char name[64];
  const char *solo = "{\"name\": \"solo\", \"latency_ms\": 250, "
                     "\"tasks\": [{\"name\": \"garment\", \"app\": \"fashion\"}]}";
  assert_int_equal(vr_pipes_create(g_ctl, g_rt, g_store, &p, &e), 0);
  if (vr_pipes_register(p, solo, strlen(solo), name, &e)) fail_msg("%s", e.msg);
  static float x[784];
  for (int k = 0; k < 2; k++) {
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL};
    vr_pipe_query q = {.pipeline = "solo", .latency_ms = k ? 250 : 10000, .n_in = 1};
    q.in[0] = (vr_tensor){"input", VR_DT_F32, 4, {1, 1, 28, 28}, x, sizeof x};
    vr_clock clk = {stepping_now, 0};
    if (k) vr_pipes_set_clock(p, &clk); /* after a warm-up: the variant loaded */
    vr_pipes_infer(p, &q, on_done, &w);
    pthread_mutex_lock(&w.mu);
    while (!w.res) pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    vr_pipes_set_clock(p, NULL);
    vr_pipe_result *r = w.res;
    if (!k) {
      if (r->outcome != VR_POUT_OK) fail_msg("warm-up: %s", r->msg);
    } else {
      assert_int_equal(r->n_hops, 1);
      assert_int_equal(r->hops[0]->outcome, VR_POUT_OK); /* served in its batch */
      assert_true(r->end_ns > r->deadline_ns);
      if (r->outcome != VR_POUT_DROPPED || !strstr(r->msg, "deadline cannot be met"))
        fail_msg("late answer: outcome %d, %s", (int)r->outcome, r->msg);
    }
    vr_pipe_result_free(r);
  }
  char *m = vr_pipes_prometheus(p);
  assert_non_null(strstr(m, "vario_pipeline_requests_total{pipeline=\"solo\",outcome=\"dropped\"} 1"));
  vr_free(m);
  assert_int_equal(vr_pipes_delete(p, "solo", &e), 0);
  vr_pipes_free(p);
}

/* A clock whose first read (the request's arrival, inside vr_pipes_infer)
 * deletes the pipeline: the request is then in flight on a pipeline no
 * longer registered. */
static vr_pipes *g_del_p;
static int64_t deleting_now(vr_clock *c) {
  (void)c;
  if (g_del_p) {
    vr_errbuf e = {0};
    assert_int_equal(vr_pipes_delete(g_del_p, "fashion_scenes", &e), 0);
    g_del_p = NULL;
  }
  return vr_clock_now(vr_clock_monotonic());
}

/* A pipeline deleted while a request is in flight: the request ends as
 * usual and its result (task names, labels) stays readable until freed,
 * after the pipeline itself is gone. */
static void test_delete_in_flight(void **st) {
  (void)st;
  vr_pipes *p = registered();
  vr_pipe_result *warm = infer(p, 0, 1, 10000, 0);
  assert_int_equal(warm->outcome, VR_POUT_OK);
  assert_true(warm->hops[0]->fanout > 0);
  vr_pipe_result_free(warm);
  vr_clock clk = {deleting_now, 0};
  g_del_p = p;
  vr_pipes_set_clock(p, &clk);
  vr_pipe_result *r = infer(p, 0, 1, 10000, 0);
  assert_null(g_del_p);
  assert_int_equal(count_pipelines(p), 0);
  if (r->outcome != VR_POUT_OK) fail_msg("%s", r->msg);
  assert_string_equal(r->hops[0]->task_name, "detect");
  assert_true(r->n_hops > 1);
  for (int i = 1; i < r->n_hops; i++) {
    assert_string_equal(r->hops[i]->task_name, r->hops[i]->label);
    assert_int_equal(r->hops[i]->outcome, VR_POUT_OK);
  }
  vr_pipe_result_free(r);
  vr_pipes_set_clock(p, NULL);
  vr_pipes_free(p);
}

/* Inputs the root's model refuses (here: under another name) are the
 * client's error: the request ends with status VR_EINVAL (the server
 * answers 400 with the runtime's reason), not "rejected" (503, which says
 * try again later). */
static void test_bad_root_input(void **st) {
  (void)st;
  vr_pipes *p = registered();
  waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL};
  vr_pipe_query q = {.pipeline = "fashion_scenes", .latency_ms = 10000, .n_in = 1};
  q.in[0] = (vr_tensor){"image", VR_DT_F32, 4, {1, 1, 84, 84}, g_x.data,
                        84 * 84 * sizeof(float)};
  vr_pipes_infer(p, &q, on_done, &w);
  pthread_mutex_lock(&w.mu);
  while (!w.res) pthread_cond_wait(&w.cv, &w.mu);
  pthread_mutex_unlock(&w.mu);
  vr_pipe_result *r = w.res;
  assert_int_equal(r->status, VR_EINVAL);
  assert_int_equal(r->outcome, VR_POUT_FAILED);
  if (!strstr(r->msg, "missing input 'input'")) fail_msg("%s", r->msg);
  vr_pipe_result_free(r);
  drop_all(p);
}

/* The plan text (pipe_plan.h "as text") giving every variant of every
 * task two instances (every instance held here has a slot) at batch b. */
static char *plan_at_batch(int b) {
  static const char *task[] = {"detect", "garment", "footwear_bag"};
  static const char *app[] = {"fscenes_detect", "fashion", "fashion"};
  size_t cap = 8192, off = 0;
  char *t = vr_malloc(cap);
  assert_non_null(t);
  off += (size_t)snprintf(t, cap, "vario-pipe-plan 1\newma 1.000 drop 0 accuracy 90 scaled 0 "
                          "feasible 1 demand 1.000 fill 0.5\n");
  vr_store_rdlock(g_store);
  for (int k = 0; k < 3; k++) {
    size_t n = 0;
    const vr_variant_rec *const *v = vr_store_app_variants(g_store, app[k], VR_ORDER_ACCURACY, &n);
    for (size_t i = 0; i < n && off < cap; i++)
      off += (size_t)snprintf(t + off, cap - off, "%s %s 2 %d 5 %d\n", task[k], v[i]->name, b,
                              b * 100);
  }
  vr_store_unlock(g_store);
  assert_true(off < cap);
  return t;
}

/* Batch caps of the instances at max batch 8 (of the variants the
 * planning view keeps: the largest batch of each model) with an id above
 * `after` (an earlier test's instances may still be loaded); how many. */
static int caps(int *out, int cap, int after) {
  vr_rt_instance_stats st[64];
  int n = vr_rt_instances(g_rt, NULL, st, 64), k = 0;
  for (int i = 0; i < n && i < 64 && k < cap; i++)
    if (st[i].max_batch == 8 && st[i].id > after) out[k++] = st[i].batch_cap;
  return k;
}

/* The highest instance id loaded now (0: none). */
static int last_id(void) {
  vr_rt_instance_stats st[64];
  int n = vr_rt_instances(g_rt, NULL, st, 64), id = 0;
  for (int i = 0; i < n && i < 64; i++)
    if (st[i].id > id) id = st[i].id;
  return id;
}

/* An instance of variant `name`, as the controller loads one on a worker. */
static void load(const char *name) {
  int v = vr_control_variant(g_ctl, name, NULL);
  if (v < 0) fail_msg("no variant %s", name);
  vr_actions a;
  vr_actions_init(&a);
  assert_int_equal(vr_actions_push(&a, VR_ACT_LOAD, v, -1, 0, -1, 8, "test"), 0);
  assert_int_equal(vr_control_apply(g_ctl, vr_actions_at(&a, 0), NULL), 0);
  vr_actions_free(&a);
}

static void test_follow_batch_caps(void **st) {
  (void)st;
  vr_pipes *p = registered();
  int before = last_id();
  load("fscenes_det_tiny-fp32-t1-b8");
  load("fmnist_linear-fp32-t1-b8");
  int c[16], n = caps(c, 16, before);
  assert_int_equal(n, 2);
  for (int i = 0; i < n; i++) assert_int_not_equal(c[i], 2); /* not yet the plan's */
  vr_errbuf e = {0};
  for (int b = 2; b <= 4; b += 2) {
    char *plan = plan_at_batch(b);
    if (vr_pipes_follow(p, "fashion_scenes", plan, strlen(plan), &e)) fail_msg("%s", e.msg);
    vr_free(plan);
    assert_int_equal(caps(c, 16, before), n);
    for (int i = 0; i < n; i++) assert_int_equal(c[i], b);
  }
  char *d = vr_pipes_describe(p, "fashion_scenes");
  assert_non_null(strstr(d, "\"batch_cap\":4"));
  assert_null(strstr(d, "\"batch_caps_set\":0"));
  vr_free(d);
  /* a request still runs on the capped instances, by the plan's routing */
  vr_pipe_result *r = infer(p, 1, 1, 10000, 0);
  assert_int_equal(r->outcome, VR_POUT_OK);
  vr_pipe_result_free(r);
  assert_int_equal(vr_pipes_delete(p, "fashion_scenes", &e), 0);
  vr_pipes_follow_manage(p); /* its apps back to the control loop */
  vr_pipes_free(p);
}

/* A model that the plan in force uses is unregistered: hops are routed
 * by what is served (the plan's tables kept sending them to it, every one
 * rejected, and the policy never planned again), the policy plans afresh
 * without it, and a worker following the controller follows its plans
 * again (each was refused: "a variant is no longer served"). */
static void test_model_unregistered(void **st) {
  (void)st;
  /* fmnist_mlp2 in app fashion, declared 99%: Loki's plan takes it */
  char path[1200];
  snprintf(path, sizeof path, "%s/models/fmnist/fmnist_mlp/model.onnx", g_src);
  assert_int_equal(reg(path, "fmnist_mlp2", "fashion", 99), 0);
  vr_errbuf e = {0};
  assert_int_equal(vr_control_reload_store(g_ctl, &e), 0);
  vr_pipes *p = registered(), *f = NULL;
  vr_pipes_policy_opts po = {.policy = "loki", .period_s = 3600, .tick_s = 3600};
  assert_int_equal(vr_pipes_set_policy(p, &po, &e), 0);
  vr_pipes_policy_tick(p); /* the first plan, its instances loaded */
  vr_pipes_policy_tick(p); /* ... and routed to */
  char *d = vr_pipes_describe(p, "fashion_scenes");
  if (!strstr(d, "\"state\":\"planned\"") || !strstr(d, "\"variant\":\"fmnist_mlp2"))
    fail_msg("no plan with fmnist_mlp2: %.3000s", d);
  vr_free(d);
  int on_it = 0; /* hops served by it (the plan may not fit every instance here) */
  for (int row = 0; row < 8; row++) {
    vr_pipe_result *r = infer(p, row, 1, 10000, 0);
    for (int i = 1; i < r->n_hops; i++)
      on_it += !strcmp(r->hops[i]->model, "fmnist_mlp2") && r->hops[i]->outcome == VR_POUT_OK;
    vr_pipe_result_free(r);
  }
  assert_true(on_it > 0);
  /* a worker following a plan (another vr_pipes on the store) */
  assert_int_equal(vr_pipes_create(g_ctl, g_rt, g_store, &f, &e), 0);
  char *plan = plan_at_batch(2);
  if (vr_pipes_follow(f, "fashion_scenes", plan, strlen(plan), &e)) fail_msg("%s", e.msg);
  vr_free(plan);
  assert_int_equal(vr_control_unregister(g_ctl, "fmnist_mlp2", &e), 0);
  vr_model_config cfg; /* its instances drained and gone */
  for (int i = 0; i < 1000 && !vr_rt_model_config(g_rt, "fmnist_mlp2", &cfg); i++)
    nanosleep(&(struct timespec){0, 10 * VR_NS_PER_MS}, NULL);
  assert_int_not_equal(vr_rt_model_config(g_rt, "fmnist_mlp2", &cfg), 0);
  vr_pipes_policy_tick(p);
  for (int row = 0; row < 8; row++) {
    vr_pipe_result *r = infer(p, row, 1, 10000, 0);
    if (r->outcome != VR_POUT_OK) fail_msg("row %d: %s", row, r->msg);
    vr_pipe_result_free(r);
  }
  vr_pipes_policy_tick(p); /* plans afresh, without it */
  d = vr_pipes_describe(p, "fashion_scenes");
  const char *pol = strstr(d, "\"policy\""); /* (the tasks' stats name it: it served) */
  if (!pol || !strstr(pol, "\"state\":\"planned\"") || strstr(pol, "fmnist_mlp2"))
    fail_msg("no plan without fmnist_mlp2: %.3000s", pol ? pol : d);
  vr_free(d);
  plan = plan_at_batch(4);
  if (vr_pipes_follow(f, "fashion_scenes", plan, strlen(plan), &e)) fail_msg("%s", e.msg);
  vr_free(plan);
  assert_int_equal(vr_pipes_delete(f, "fashion_scenes", &e), 0);
  vr_pipes_follow_manage(f);
  vr_pipes_free(f);
  vr_pipes_free(p);
}

/* Whether a task of the description lists a variant of model m among its
 * candidates (arrays of {"name","accuracy"}: up to the first ']'). */
static int is_candidate(const char *d, const char *m) {
  char want[160];
  snprintf(want, sizeof want, "\"%s-", m);
  for (const char *c = strstr(d, "\"candidate_variants\""); c;
       c = strstr(c + 1, "\"candidate_variants\"")) {
    const char *end = strchr(c, ']'), *hit = strstr(c, want);
    if (hit && end && hit < end) return 1;
  }
  return 0;
}

/* A model registered into an app after its pipeline: a candidate from then
 * on (the pipeline kept the variants of its first compile until the
 * server restarted: neither the policy nor a worker following a plan
 * ever used it), with the pipeline's statistics carried over. */
static void test_model_registered(void **st) {
  (void)st;
  vr_errbuf e = {0};
  vr_pipes *p = registered(), *f = NULL;
  assert_int_equal(vr_pipes_create(g_ctl, g_rt, g_store, &f, &e), 0); /* a worker's */
  for (int row = 0; row < 3; row++) {
    vr_pipe_result *r = infer(p, row, 1, 10000, 0);
    if (r->outcome != VR_POUT_OK) fail_msg("row %d: %s", row, r->msg);
    vr_pipe_result_free(r);
  }
  char *d = vr_pipes_describe(p, "fashion_scenes");
  assert_true(is_candidate(d, "fmnist_mlp"));
  assert_false(is_candidate(d, "fmnist_mlp3"));
  vr_free(d);
  vr_pipes_refresh(p); /* nothing changed: the same pipeline */
  char path[1200];
  snprintf(path, sizeof path, "%s/models/fmnist/fmnist_mlp/model.onnx", g_src);
  assert_int_equal(reg(path, "fmnist_mlp3", "fashion", 99), 0);
  assert_int_equal(vr_control_reload_store(g_ctl, &e), 0);
  vr_pipes_refresh(p);
  d = vr_pipes_describe(p, "fashion_scenes");
  if (!is_candidate(d, "fmnist_mlp3")) fail_msg("not a candidate: %.3000s", d);
  vr_free(d);
  for (int row = 0; row < 2; row++) { /* on the new pipeline */
    vr_pipe_result *r = infer(p, row, 1, 10000, 0);
    if (r->outcome != VR_POUT_OK) fail_msg("row %d: %s", row, r->msg);
    vr_pipe_result_free(r);
  }
  char *m = vr_pipes_prometheus(p); /* the 3 counted before the refresh are kept */
  if (!strstr(m, "vario_pipeline_requests_total{pipeline=\"fashion_scenes\",outcome=\"ok\"} 5"))
    fail_msg("%.2000s", m);
  vr_free(m);
  /* the policy plans with it: declared 99%, the most accurate */
  vr_pipes_policy_opts po = {.policy = "loki", .period_s = 3600, .tick_s = 3600};
  assert_int_equal(vr_pipes_set_policy(p, &po, &e), 0);
  vr_pipes_policy_tick(p); /* INFaaS routes this tick, as after a dropped view */
  vr_pipes_policy_tick(p); /* the plan */
  d = vr_pipes_describe(p, "fashion_scenes");
  const char *pol = strstr(d, "\"policy\"");
  if (!pol || !strstr(pol, "\"variant\":\"fmnist_mlp3")) fail_msg("not planned: %.3000s", d);
  vr_free(d);
  /* a worker takes it at its next sync with the store */
  assert_int_equal(vr_pipes_sync(f, &e), 0);
  d = vr_pipes_describe(f, "fashion_scenes");
  if (!is_candidate(d, "fmnist_mlp3")) fail_msg("worker: not a candidate: %.3000s", d);
  vr_free(d);
  /* unregistered: no longer one */
  assert_int_equal(vr_control_unregister(g_ctl, "fmnist_mlp3", &e), 0);
  vr_pipes_refresh(p);
  d = vr_pipes_describe(p, "fashion_scenes");
  assert_true(is_candidate(d, "fmnist_mlp"));
  if (is_candidate(d, "fmnist_mlp3")) fail_msg("still a candidate: %.3000s", d);
  vr_free(d);
  vr_pipes_free(f);
  drop_all(p);
}

/* A worker following the controller's plan keeps following it after its
 * pipeline is compiled again (a model registered into one of its apps):
 * the worker hands the plan's text over only when its version changes,
 * and a controller whose view the model does not change (more threads, a
 * dominated batch size) publishes none, so the replacement started with
 * no plan and the worker routed by INFaaS selection from then on. */
static void test_follow_kept_across_refresh(void **st) {
  (void)st;
  vr_errbuf e = {0};
  vr_pipes *f = registered();
  char *plan = plan_at_batch(2);
  if (vr_pipes_follow(f, "fashion_scenes", plan, strlen(plan), &e)) fail_msg("%s", e.msg);
  vr_free(plan);
  char path[1200];
  snprintf(path, sizeof path, "%s/models/fmnist/fmnist_mlp/model.onnx", g_src);
  assert_int_equal(reg(path, "fmnist_mlp6", "fashion", 98), 0);
  assert_int_equal(vr_control_reload_store(g_ctl, &e), 0);
  assert_int_equal(vr_pipes_sync(f, &e), 0); /* the worker's sync: compiled again */
  char *d = vr_pipes_describe(f, "fashion_scenes");
  if (!is_candidate(d, "fmnist_mlp6")) fail_msg("not refreshed: %.3000s", d);
  vr_free(d);
  /* the plan's version is the one seen: no text */
  if (vr_pipes_follow(f, "fashion_scenes", NULL, 0, &e)) fail_msg("%s", e.msg);
  d = vr_pipes_describe(f, "fashion_scenes");
  const char *pol = strstr(d, "\"policy\"");
  if (!pol || !strstr(pol, "\"state\":\"planned\"")) fail_msg("plan lost: %.3000s", pol ? pol : d);
  vr_free(d);
  assert_int_equal(vr_control_unregister(g_ctl, "fmnist_mlp6", &e), 0);
  assert_int_equal(vr_pipes_delete(f, "fashion_scenes", &e), 0);
  vr_pipes_follow_manage(f);
  vr_pipes_free(f);
}

/* The control plane reloads the store (a model registered into one of
 * the pipeline's apps) while the policy plans: the tick looked its slots'
 * variant indexes up before the solve and loaded and published by them
 * after it, when they named other variants (fmnist_mlp7's, ahead of
 * every other, push the rest along): it loaded a variant it never chose,
 * and listed instances on the slots of other models (a detection hop
 * went to a classifier, a classification hop to a detector). */
static void *reload_main(void *arg) {
  (void)arg;
  nanosleep(&(struct timespec){0, 50 * VR_NS_PER_MS}, NULL); /* into the solve */
  vr_errbuf e = {0};
  assert_int_equal(vr_control_reload_store(g_ctl, &e), 0);
  return NULL;
}

static void test_reload_during_tick(void **st) {
  (void)st;
  vr_errbuf e = {0};
  vr_pipes *p = registered();
  char path[1200];
  snprintf(path, sizeof path, "%s/models/fmnist/fmnist_mlp/model.onnx", g_src);
  assert_int_equal(reg(path, "fmnist_mlp7", "fashion", 99.5), 0); /* the store only */
  vr_pipes_policy_opts po = {.policy = "loki", .period_s = 3600, .tick_s = 3600};
  assert_int_equal(vr_pipes_set_policy(p, &po, &e), 0);
  vr_pipes_policy_tick(p); /* compiled again (a new candidate): INFaaS this tick */
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, reload_main, NULL), 0);
  vr_pipes_policy_tick(p); /* the plan, solved while the store reloads */
  pthread_join(th, NULL);
  /* loaded only if planned (the control thread's own store sync may have
   * reloaded before the view was built: then it is a candidate) */
  vr_rt_instance_stats st7[8];
  char *d = vr_pipes_describe(p, "fashion_scenes");
  const char *pol = strstr(d, "\"policy\"");
  if (vr_rt_instances(g_rt, "fmnist_mlp7", st7, 8) > 0 &&
      (!pol || !strstr(pol, "\"variant\":\"fmnist_mlp7")))
    fail_msg("fmnist_mlp7 loaded, not in the plan: %.3000s", pol ? pol : d);
  vr_free(d);
  for (int row = 0; row < 8; row++) {
    vr_pipe_result *r = infer(p, row, 1, 10000, 0);
    for (int i = 0; i < r->n_hops; i++) {
      const vr_pipe_hop_rec *h = r->hops[i];
      if (h->outcome == VR_POUT_FAILED) fail_msg("task '%s': %s", h->task_name, h->msg);
      if (!h->rt.variant[0]) continue; /* never ran */
      size_t n = strlen(h->model); /* the instance that ran it is of the model picked */
      if (strncmp(h->rt.variant, h->model, n) || h->rt.variant[n] != '-' ||
          strncmp(h->model, h->task == 0 ? "fscenes_det" : "fmnist", h->task == 0 ? 11 : 6))
        fail_msg("task '%s' picked model '%s', ran on '%s'", h->task_name, h->model,
                 h->rt.variant);
    }
    vr_pipe_result_free(r);
  }
  assert_int_equal(vr_control_unregister(g_ctl, "fmnist_mlp7", &e), 0);
  drop_all(p);
}

/* Runs fn(p) with stderr (the log) in a file; how many lines name `what`. */
static int logged(void (*fn)(vr_pipes *), vr_pipes *p, const char *what) {
  char path[300];
  snprintf(path, sizeof path, "%s/stderr.log", g_tmp);
  int level = vr_log_level(), saved = dup(2), fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
  assert_true(saved >= 0 && fd >= 0);
  vr_log_set_level(VR_LOG_WARN);
  dup2(fd, 2);
  close(fd);
  fn(p);
  dup2(saved, 2);
  close(saved);
  vr_log_set_level(level);
  char *text = NULL;
  size_t n = 0;
  vr_errbuf e = {0};
  assert_int_equal(vr_read_file(path, &text, &n, &e), 0);
  int k = 0;
  for (const char *s = text; (s = strstr(s, what)); s++) k++;
  vr_free(text);
  return k;
}

/* Every model of a task's app unregistered: the pipeline keeps its
 * candidates (by design), but each request that reaches the task got a
 * 500 ("failed: no registered app named ...", as a server fault) and the
 * policy warned "no policy" at every tick. The hop is now "rejected"
 * (503) naming the app and the pipeline (the result names the task), and
 * the policy says why it has no view once. The request is so at its
 * start: the root detector ran first, for nothing. */
static void test_app_lost_its_models(void **st) {
  (void)st;
  char path[1200];
  snprintf(path, sizeof path, "%s/models/fmnist/fmnist_mlp/model.onnx", g_src);
  assert_int_equal(reg(path, "fmnist_solo", "fashion_solo", 90), 0);
  vr_errbuf e = {0};
  assert_int_equal(vr_control_reload_store(g_ctl, &e), 0);
  vr_pipes *p = NULL;
  char name[64], *spec = edited("{\"name\": \"garment\", \"app\": \"fashion\"}",
                                "{\"name\": \"garment\", \"app\": \"fashion_solo\"}");
  assert_int_equal(vr_pipes_create(g_ctl, g_rt, g_store, &p, &e), 0);
  if (vr_pipes_register(p, spec, strlen(spec), name, &e)) fail_msg("%s", e.msg);
  vr_free(spec);
  int served = 0;
  for (int row = 0; row < 8; row++) {
    vr_pipe_result *r = infer(p, row, 1, 10000, 0);
    if (r->outcome != VR_POUT_OK) fail_msg("row %d: %s", row, r->msg);
    for (int i = 0; i < r->n_hops; i++) served += !strcmp(r->hops[i]->task_name, "garment");
    vr_pipe_result_free(r);
  }
  assert_true(served > 0);
  assert_int_equal(vr_control_unregister(g_ctl, "fmnist_solo", &e), 0);
  vr_pipes_refresh(p); /* it keeps its candidates, with a warning */
  /* every request, at once: the detector no longer runs first (nor a
   * request whose canvas has no garment passes) */
  for (int row = 0; row < 8; row++) {
    vr_pipe_result *r = infer(p, row, 1, 10000, 0);
    if (r->outcome != VR_POUT_REJECTED || r->status || r->n_hops ||
        !strstr(r->msg, "task 'garment'") ||
        !strstr(r->msg, "app 'fashion_solo' has no registered model") ||
        !strstr(r->msg, "pipeline 'fashion_scenes'"))
      fail_msg("row %d: %s (%d hops): %s", row, vr_pipe_outcome_name(r->outcome), r->n_hops,
               r->msg);
    vr_pipe_result_free(r);
  }
  char *d = vr_pipes_describe(p, "fashion_scenes");
  if (!strstr(d, "\"rejected\": 8") && !strstr(d, "\"rejected\":8")) fail_msg("%.3000s", d);
  vr_free(d);
  vr_pipes_policy_opts po = {.policy = "loki", .period_s = 3600, .tick_s = 3600};
  assert_int_equal(vr_pipes_set_policy(p, &po, &e), 0);
  int said = logged(vr_pipes_policy_tick, p, "no policy");
  said += logged(vr_pipes_policy_tick, p, "no policy");
  assert_int_equal(said, 1);
  assert_int_equal(vr_pipes_delete(p, "fashion_scenes", &e), 0);
  vr_pipes_free(p);
}

/* Cores held by the runtime's instances now. */
static int cores_held(void) {
  vr_rt_instance_stats st[64];
  int n = vr_rt_instances(g_rt, NULL, st, 64), k = 0;
  for (int i = 0; i < n && i < 64; i++) k += st[i].threads + st[i].shadow_threads;
  return k;
}

/* Instances of a policy's apps outside its planning view (max batch under
 * 8: the view keeps the largest batch of each model), here loaded by
 * INFaaS selection before the first plan and by hand, fill the fixture's
 * cores: the plan replaces or unloads them and every task of it serves.
 * They were invisible to the plan (never unloaded) while counted as its
 * free cores, so its loads were refused for want of room and every hop
 * of a task left without an instance ended "no instance serves the task
 * under the plan now". */
/* Unloads every instance (a clean worker: earlier tests' instances go). */
static void unload_all(void) {
  vr_ctl_inst_info in[64];
  int n = vr_control_instances(g_ctl, in, 64);
  for (int i = 0; i < n && i < 64; i++) {
    vr_action a = {.kind = VR_ACT_UNLOAD, .variant = in[i].var, .instance = in[i].id};
    assert_int_equal(vr_control_apply(g_ctl, &a, NULL), 0);
  }
  assert_int_equal(cores_held(), 0);
}

static void test_policy_frees_off_view_cores(void **st) {
  (void)st;
  unload_all();
  vr_pipes *p = registered();
  for (int row = 0; row < 2; row++) {
    vr_pipe_result *r = infer(p, row, 1, 10000, 0);
    if (r->outcome != VR_POUT_OK) fail_msg("row %d before the plan: %s", row, r->msg);
    vr_pipe_result_free(r);
  }
  static const char *off[] = {"fmnist_mlp-fp32-t1-b4", "fscenes_det_large-fp32-t1-b4",
                              "fmnist_linear-fp32-t1-b4", "fscenes_det_tiny-fp32-t1-b4"};
  for (int i = 0; i < 4 && cores_held() < 4; i++) load(off[i]);
  assert_int_equal(cores_held(), 4);
  vr_errbuf e = {0};
  vr_pipes_policy_opts po = {.policy = "loki", .period_s = 3600, .tick_s = 3600};
  assert_int_equal(vr_pipes_set_policy(p, &po, &e), 0);
  vr_pipes_policy_tick(p); /* the plan: its instances in the others' room */
  vr_pipes_policy_tick(p);
  int seen[3] = {0};
  for (int row = 0; row < 8; row++) {
    vr_pipe_result *r = infer(p, row, 1, 10000, 0);
    for (int i = 0; i < r->n_hops; i++) {
      const vr_pipe_hop_rec *h = r->hops[i];
      if (h->outcome != VR_POUT_OK) fail_msg("row %d, task '%s': %s", row, h->task_name, h->msg);
      seen[h->task]++;
    }
    vr_pipe_result_free(r);
  }
  for (int t = 0; t < 3; t++) assert_true(seen[t] > 0);
  char *d = vr_pipes_describe(p, "fashion_scenes");
  const char *pol = strstr(d, "\"policy\"");
  if (!pol || strstr(pol, "\"serving\":0")) fail_msg("a planned variant serves not: %.3000s", d);
  vr_free(d);
  drop_all(p);
}

/* The policy plan of each pipeline under a policy: its "workers" in
 * the description (-1 without a plan in force). */
static int plan_workers(vr_pipes *p, const char *name) {
  char *d = vr_pipes_describe(p, name);
  const char *pl = strstr(d, "\"plan\": {"), *w = pl ? strstr(pl, "\"workers\": ") : NULL;
  if (!w) pl = strstr(d, "\"plan\":{"), w = pl ? strstr(pl, "\"workers\":") : NULL;
  int n = w ? atoi(strchr(w, ':') + 1) : -1;
  if (strstr(d, "\"last_load_error\"")) fail_msg("a load was refused: %.3000s", d);
  vr_free(d);
  return n;
}

/* The example pipeline and a one-task pipeline `name` on `app` under
 * Loki, after its first tick. */
static vr_pipes *with_one_task(const char *name, const char *app) {
  vr_pipes *p = registered();
  vr_errbuf e = {0};
  char spec[256], got[64];
  snprintf(spec, sizeof spec, "{\"name\": \"%s\", \"latency_ms\": 100, \"tasks\": "
           "[{\"name\": \"t0\", \"app\": \"%s\"}]}", name, app);
  if (vr_pipes_register(p, spec, strlen(spec), got, &e)) fail_msg("%s", e.msg);
  vr_pipes_policy_opts po = {.policy = "loki", .period_s = 3600, .tick_s = 3600};
  assert_int_equal(vr_pipes_set_policy(p, &po, &e), 0);
  vr_pipes_policy_tick(p);
  return p;
}

/* Two pipelines on disjoint apps share the cores other apps leave (here
 * 3: an instance of an app no pipeline uses holds one): the one planned
 * second plans with what the first's instances leave. Each planned with
 * all 3 (3 + 1 instances), and the last load found no core free. Here
 * mixed takes 1 and fashion_scenes is left 2, too few for its 3 tasks: it
 * has no plan and says why (its plan on 2 had instances on no more than 2
 * tasks, at times none on the root, and served nothing). A load the
 * worker has no room for is said, never skipped silently: VR_EBUSY with
 * the cores it needs and those free, and a "load refused" event of the
 * control plane. */
static void test_policies_share_cores(void **st) {
  (void)st;
  unload_all();
  char path[1200];
  snprintf(path, sizeof path, "%s/models/fmnist/fmnist_linear/model.onnx", g_src);
  assert_int_equal(reg(path, "fmnist_spare", "spare", 80), 0);
  vr_errbuf e = {0};
  assert_int_equal(vr_control_reload_store(g_ctl, &e), 0);
  load("fmnist_spare-fp32-t1-b8");
  assert_int_equal(cores_held(), 1);
  vr_pipes *p = with_one_task("mixed", "fscenes_mixed");
  int a = plan_workers(p, "fashion_scenes"), b = plan_workers(p, "mixed");
  if (a != -1 || b != 1) fail_msg("plans on %d and %d of 3 cores", a, b);
  char *d = vr_pipes_describe(p, "fashion_scenes");
  if (!strstr(d, "2 worker(s) cannot host pipeline 'fashion_scenes'")) fail_msg("%.3000s", d);
  vr_free(d);
  /* the worker full: a load is refused, with its reason */
  load("fmnist_mlp-fp32-t1-b8");
  load("fmnist_linear-fp32-t1-b8");
  assert_int_equal(cores_held(), 4);
  vr_action ld = {.kind = VR_ACT_LOAD, .variant = vr_control_variant(g_ctl,
                  "fmnist_spare-fp32-t1-b8", NULL), .instance = -1, .why = "test"};
  assert_int_equal(vr_control_apply(g_ctl, &ld, &e), VR_EBUSY);
  if (!strstr(e.msg, "refused: it needs 1 core(s)") || !strstr(e.msg, "has 0 core(s)"))
    fail_msg("%s", e.msg);
  char *h = vr_control_history(g_ctl, 0);
  if (!strstr(h, "\"load refused\"")) fail_msg("no event: %.3000s", h);
  vr_free(h);
  assert_int_equal(vr_pipes_delete(p, "mixed", &e), 0);
  drop_all(p);
  assert_int_equal(vr_control_unregister(g_ctl, "fmnist_spare", &e), 0);
  unload_all(); /* the next test's pipeline has the cores */
}

/* Two pipelines sharing an app: the plan of the one planned first holds
 * its instances, the other is not planned and says why (each plan held
 * every instance of the app, so each unloaded what the other loaded);
 * once the first is deleted, the other is planned. */
static const char *pol_state(vr_pipes *p, const char *name, char *buf, size_t cap) {
  char *d = vr_pipes_describe(p, name);
  const char *pol = d ? strstr(d, "\"policy\"") : NULL;
  const char *st = pol ? strstr(pol, "\"state\"") : NULL;
  snprintf(buf, cap, "%s", st ? st : "(no state)");
  vr_free(d);
  return buf;
}

static void test_shared_app_planned_once(void **st) {
  (void)st;
  unload_all();
  vr_pipes *p = with_one_task("cls", "fashion");
  vr_errbuf e = {0};
  char a[4096], b[4096];
  vr_pipes_policy_tick(p);
  pol_state(p, "fashion_scenes", a, sizeof a);
  pol_state(p, "cls", b, sizeof b);
  int a_out = strstr(a, "not planned") != NULL, b_out = strstr(b, "not planned") != NULL;
  if (a_out == b_out) fail_msg("one of them planned:\n%.2000s\n%.2000s", a, b);
  const char *out = a_out ? a : b, *other = a_out ? "cls" : "fashion_scenes";
  char want[128];
  snprintf(want, sizeof want, "app 'fashion' (task '%s') is planned by pipeline '%s'",
           a_out ? "garment" : "t0", other);
  if (!strstr(out, want)) fail_msg("no reason '%s': %.2000s", want, out);
  assert_int_equal(vr_pipes_delete(p, other, &e), 0);
  /* What the next tick does first, before it plans the one left: that
   * one's apps are managed from this tick on. They were handed to the
   * control loop for a tick (the flag said 'not planned' until its plan),
   * so its first plan counted its own app's instance as taken. */
  unload_all();
  load("fmnist_mlp-fp32-t1-b8"); /* app fashion, in both */
  pl_pipe *pipes[VR_PIPES_MAX];
  int n = vr__pipes_ref_all(p, pipes, VR_PIPES_MAX, 0);
  vr__pipes_manage_apps(p, pipes, n);
  for (int i = 0; i < n; i++) vr__pipe_unref(pipes[i]);
  assert_int_equal(vr_control_managed_cores(g_ctl), 4);
  vr_pipes_policy_tick(p);
  const char *left = a_out ? "fashion_scenes" : "cls";
  if (strstr(pol_state(p, left, a, sizeof a), "not planned"))
    fail_msg("'%s' still not planned: %.2000s", left, a);
  assert_int_equal(vr_pipes_delete(p, left, &e), 0);
  vr_pipes_free(p);
  unload_all();
}

/* The room an unload gives back counts at once: on a full worker, a load
 * right after an unload fits. The control plane counted the worker's room
 * before the instance left, so until its next tick a load into that room
 * was refused (a pipeline plan's, or a tuner's a tick after it shrank the
 * plan). */
static void test_unload_frees_room_at_once(void **st) {
  (void)st;
  static const char *v[] = {"fmnist_mlp-fp32-t1-b8", "fmnist_linear-fp32-t1-b8",
                            "fmnist_mlp-fp32-t1-b4", "fmnist_linear-fp32-t1-b4",
                            "fmnist_mlp-fp32-t1-b2"};
  unload_all();
  for (int i = 0; i < 5; i++) {
    if (i == 4) { /* full: one goes */
      vr_ctl_inst_info in[8];
      assert_int_equal(vr_control_instances(g_ctl, in, 8), 4);
      vr_action un = {.kind = VR_ACT_UNLOAD, .variant = in[0].var, .instance = in[0].id};
      assert_int_equal(vr_control_apply(g_ctl, &un, NULL), 0);
    }
    vr_errbuf e = {0};
    vr_action a = {.kind = VR_ACT_LOAD, .variant = vr_control_variant(g_ctl, v[i], NULL),
                   .instance = -1, .why = "test"};
    if (vr_control_apply(g_ctl, &a, &e)) fail_msg("%s: %s", v[i], e.msg);
  }
  assert_int_equal(cores_held(), 4);
  unload_all(); /* the next test's pipeline has the cores */
}

/* Freeing a vr_pipes hands its apps back to the control loop. A policy
 * tick marks them managed (the control loop leaves their instances to the
 * pipeline policy), and after vr_pipes_free they stayed so with no policy
 * left: the control loop never managed them again. Seen here through the
 * cores the managed apps may fill, which leave out instances of unmanaged
 * apps only. */
static void test_free_releases_apps(void **st) {
  (void)st;
  unload_all();
  load("fmnist_mlp-fp32-t1-b8"); /* app fashion: fashion_scenes' children */
  vr_pipes *p = registered();
  pl_pipe *pipes[VR_PIPES_MAX];
  int n = vr__pipes_ref_all(p, pipes, VR_PIPES_MAX, 0);
  vr__pipes_manage_apps(p, pipes, n); /* what a policy tick does */
  for (int i = 0; i < n; i++) vr__pipe_unref(pipes[i]);
  assert_int_equal(vr_control_managed_cores(g_ctl), 4);
  drop_all(p);
  assert_int_equal(vr_control_managed_cores(g_ctl), 3);
  unload_all(); /* the next test's pipeline has the cores */
}

/* Root arrival times stay non-decreasing across the policy's takes: a
 * request that read its clock before a tick took the ring and recorded
 * after it made the tuner refuse the next tick's arrivals ("out of
 * order"). */
static void test_arrivals_ordered_across_takes(void **st) {
  (void)st;
  pl_pipe *pp = vr_calloc(1, sizeof *pp);
  assert_non_null(pp);
  vr__pipe_note_arrival(pp, 100);
  vr__pipe_note_arrival(pp, 90); /* within one take: clamped */
  assert_int_equal(pp->arr_n, 2);
  assert_true(pp->arr_t[1] == 100);
  pp->arr_head = (pp->arr_head + pp->arr_n) % PL_ARR_RING, pp->arr_n = 0; /* a tick took them */
  vr__pipe_note_arrival(pp, 50); /* read before that tick */
  assert_int_equal(pp->arr_n, 1);
  assert_true(pp->arr_t[pp->arr_head] == 100);
  vr__pipe_note_arrival(pp, 120);
  assert_true(pp->arr_t[(pp->arr_head + 1) % PL_ARR_RING] == 120);
  vr_free(pp);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_specs),
      cmocka_unit_test(test_delete_shared_store),
      cmocka_unit_test(test_matches_by_hand),
      cmocka_unit_test(test_drop_at_next_hop),
      cmocka_unit_test(test_late_answer_dropped),
      cmocka_unit_test(test_bad_root_input),
      cmocka_unit_test(test_delete_in_flight),
      cmocka_unit_test(test_follow_batch_caps),
      cmocka_unit_test(test_model_unregistered),
      cmocka_unit_test(test_model_registered),
      cmocka_unit_test(test_follow_kept_across_refresh),
      cmocka_unit_test(test_reload_during_tick),
      cmocka_unit_test(test_app_lost_its_models),
      cmocka_unit_test(test_arrivals_ordered_across_takes),
      cmocka_unit_test(test_policy_frees_off_view_cores),
      cmocka_unit_test(test_policies_share_cores),
      cmocka_unit_test(test_shared_app_planned_once),
      cmocka_unit_test(test_unload_frees_room_at_once),
      cmocka_unit_test(test_free_releases_apps),
      /* last: the plan's instances stay loaded, on cores later tests need */
      cmocka_unit_test(test_policy_mode_keeps_late_hops),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
