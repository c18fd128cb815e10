/* AsyFunc bodies in the runtime (vr_rt_pair_shadow / vr_rt_unpair_shadow):
 * a body instance answers bit for bit what a plain instance answers,
 * unpaired and paired (rows split with its shadow); shadows attached and
 * released while requests stream lose none and change no result; a body
 * removed with its shadow attached and requests queued answers them all;
 * bad pairings are refused with clear errors. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/npy.h"
#include "control/fsutil.h"
#include "engine_util.h"
#include "rt_wait.h"
#include "runtime/runtime.h"
#include "vr_test.h"

#define ROWS 8
static vr_npy g_x;
static char g_dir[] = "/tmp/vr_rtpair_XXXXXX";

static int load_model(vr_runtime *rt, vr_errbuf *e) {
  char *dir = g_dir;
  assert_non_null(mkdtemp(dir));
  char p[600];
  snprintf(p, sizeof p, "%s/model.onnx", dir);
  assert_int_equal(vr_copy_file(src_path("models/fmnist/fmnist_cnn_bn/model.onnx"), p, e), 0);
  snprintf(p, sizeof p, "%s/config.json", dir);
  FILE *f = fopen(p, "wb");
  fputs("{\"name\":\"cnn\",\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\","
        "\"shape\":[-1,1,28,28]}],\"outputs\":[{\"name\":\"logits\",\"datatype\":\"FP32\","
        "\"shape\":[-1,10]}],\"max_batch_size\":8,\"instances\":0,\"threads\":1}",
        f);
  fclose(f);
  vr_model_config c;
  int rc = vr_model_config_load(dir, &c, e);
  if (!rc) rc = vr_rt_load(rt, &c, e);
  return rc;
}

/* One request of `rows` rows starting at row r0 to instance id; its
 * logits copied into out (NULL: not kept). Returns the status. */
static int infer(vr_runtime *rt, int id, int r0, int rows, float *out) {
  rt_waiter w = RT_WAITER_INIT;
  vr_rt_request q;
  vr_rt_request_init(&q);
  q.n_in = 1;
  q.in[0] = (vr_tensor){"input", VR_DT_F32, 4, {rows, 1, 28, 28},
                        (float *)g_x.data + (size_t)r0 * 784, (size_t)rows * 784 * 4};
  q.done = rt_wait_cb;
  q.user = &w;
  assert_int_equal(vr_rt_submit_to(rt, id, &q), 0);
  rt_wait(&w);
  int st = q.status;
  if (!st && out) memcpy(out, q.out[0].data, (size_t)rows * 10 * 4);
  vr_rt_request_clear(&q);
  return st;
}

static int stats_of(vr_runtime *rt, int id, vr_rt_instance_stats *s) {
  vr_rt_instance_stats all[8];
  int n = vr_rt_instances(rt, NULL, all, 8);
  for (int i = 0; i < n && i < 8; i++)
    if (all[i].id == id) {
      *s = all[i];
      return 1;
    }
  return 0;
}

typedef struct streamer {
  vr_runtime *rt;
  int id, stop, sent, ok, bad;
  const float *ref;
} streamer;

static void *stream(void *arg) {
  streamer *s = arg;
  float out[ROWS * 10];
  for (int i = 0; !__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE) || i < 40; i++) {
    int rows = 1 + i % ROWS, r0 = (i * 3) % (ROWS - rows + 1);
    s->sent++;
    if (infer(s->rt, s->id, r0, rows, out)) continue;
    s->ok++;
    s->bad += memcmp(out, s->ref + r0 * 10, (size_t)rows * 40) != 0;
  }
  return NULL;
}

static void test_body_and_shadow(void **st) {
  (void)st;
  if (!vr_rt_backend_engine()) skip();
  vr_errbuf e = {0};
  assert_int_equal(vr_npy_read(src_path("models/fmnist-data/calib_inputs.npy"), &g_x, &e), 0);
  assert_true(g_x.shape[0] >= ROWS);
  vr_runtime_opts o;
  vr_runtime_opts_init(&o);
  o.profile_runs = 1;
  vr_runtime *rt;
  assert_int_equal(vr_runtime_create(&o, &rt, &e), 0);
  if (load_model(rt, &e)) fail_msg("%s", e.msg);
  vr_rt_instance_opts plain = {VR_PREC_FP32, 1, ROWS, 0};
  int pid = vr_rt_add_instance(rt, "cnn", &plain, &e);
  assert_true(pid > 0);
  float ref[ROWS * 10], got[ROWS * 10];
  assert_int_equal(infer(rt, pid, 0, ROWS, ref), 0);
  /* the body's range: between its first and last interior chain cut */
  vr_model *m;
  assert_int_equal(vr_model_load(src_path("models/fmnist/fmnist_cnn_bn/model.onnx"), &m, &e), 0);
  int n = vr_model_num_nodes(m), pb = -1, pe = -1;
  char *cut = vr_calloc((size_t)n + 1, 1);
  assert_int_equal(vr_model_chain_cuts(m, cut), 0);
  for (int k = 1; k < n; k++)
    if (cut[k]) {
      if (pb < 0) pb = k;
      pe = k;
    }
  vr_free(cut);
  vr_model_free(m);
  assert_true(pb > 0 && pe > pb);
  vr_rt_instance_opts body = {VR_PREC_FP32, 1, ROWS, 0, pb, pe};
  int bid = vr_rt_add_instance(rt, "cnn", &body, &e);
  if (bid < 0) fail_msg("%s", e.msg);
  /* a plain instance cannot pair; a body unpaired answers the same */
  vr_rt_shadow_opts so = {1, 0, NULL};
  assert_int_equal(vr_rt_pair_shadow(rt, pid, &so, NULL, &e), VR_EINVAL);
  assert_int_equal(vr_rt_unpair_shadow(rt, bid, &e), VR_ENOENT);
  assert_int_equal(vr_rt_pair_shadow(rt, 999, &so, NULL, &e), VR_ENOENT);
  assert_int_equal(infer(rt, bid, 0, ROWS, got), 0);
  assert_memory_equal(got, ref, sizeof ref);
  /* paired: half the rows on the shadow (cores in proportion) */
  double ms = -1;
  if (vr_rt_pair_shadow(rt, bid, &so, &ms, &e)) fail_msg("%s", e.msg);
  assert_true(ms >= 0);
  assert_int_equal(vr_rt_pair_shadow(rt, bid, &so, NULL, &e), VR_EEXIST);
  vr_rt_instance_stats s = {0};
  assert_true(stats_of(rt, bid, &s));
  assert_true(s.body && s.shadow_threads == 1 && s.pair_begin == pb && s.pair_end == pe);
  for (int rows = 1; rows <= ROWS; rows++) {
    assert_int_equal(infer(rt, bid, 0, rows, got), 0);
    if (memcmp(got, ref, (size_t)rows * 40)) fail_msg("paired, %d rows: differs", rows);
  }
  assert_true(stats_of(rt, bid, &s));
  assert_true(s.paired_batches >= ROWS - 1 && s.shadow_rows > 0);
  /* a split table: all rows but one on the shadow */
  int split[ROWS + 1];
  for (int b = 0; b <= ROWS; b++) split[b] = b > 0 ? b - 1 : 0;
  assert_int_equal(vr_rt_unpair_shadow(rt, bid, &e), 0);
  split[3] = 4; /* more rows than the batch: refused */
  vr_rt_shadow_opts bad = {1, 0, split};
  assert_int_equal(vr_rt_pair_shadow(rt, bid, &bad, NULL, &e), VR_ERANGE);
  split[3] = 2;
  if (vr_rt_pair_shadow(rt, bid, &bad, NULL, &e)) fail_msg("%s", e.msg);
  assert_int_equal(infer(rt, bid, 0, ROWS, got), 0);
  assert_memory_equal(got, ref, sizeof ref);
  assert_int_equal(vr_rt_unpair_shadow(rt, bid, &e), 0);
  /* shadows come and go while requests stream: none lost, none differs */
  streamer sm = {rt, bid, 0, 0, 0, 0, ref};
  pthread_t th;
  pthread_create(&th, NULL, stream, &sm);
  for (int k = 0; k < 6; k++) {
    if (vr_rt_pair_shadow(rt, bid, &so, NULL, &e)) fail_msg("%s", e.msg);
    usleep(20000);
    assert_int_equal(vr_rt_unpair_shadow(rt, bid, &e), 0);
  }
  __atomic_store_n(&sm.stop, 1, __ATOMIC_RELEASE);
  pthread_join(th, NULL);
  assert_int_equal(sm.ok, sm.sent);
  assert_int_equal(sm.bad, 0);
  assert_true(stats_of(rt, bid, &s));
  assert_int_equal(s.shadows_attached, s.shadows_released);
  assert_int_equal(s.shadow_threads, 0);
  /* the body goes away with its shadow attached and requests in flight:
   * every one is answered */
  if (vr_rt_pair_shadow(rt, bid, &so, NULL, &e)) fail_msg("%s", e.msg);
  streamer s2 = {rt, bid, 1, 0, 0, 0, ref};
  pthread_create(&th, NULL, stream, &s2);
  usleep(30000);
  assert_int_equal(vr_rt_remove_instance(rt, bid, &e), 0);
  pthread_join(th, NULL);
  assert_int_equal(s2.bad, 0);
  assert_true(s2.ok > 0);
  /* what was not served was refused (the instance is gone), never lost:
   * infer() returned for every request */
  vr_runtime_free(rt);
  vr_npy_free(&g_x);
  vr_rmtree(g_dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_body_and_shadow)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
