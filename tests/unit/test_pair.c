/* Body/shadow pairs (runtime/pair.h): a paired run equals the unpaired
 * model bit for bit for every b_B/b_S; a shadow released while its body
 * keeps running loses no request (runs in flight finish, later ones go
 * body-only). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "pair_fx.h"
#include "runtime/pair.h"
#include "vr_test.h"

static void check_split(pair_fx *f, int pb, int pe) {
  vr_pair *p;
  vr_errbuf e = {0};
  if (vr_pair_create(f->m, pb, pe, 1, f->batch, &p, &e)) fail_msg("%s", e.msg);
  vr_tensor in = tensor_of("input", &f->in), out[2];
  int rows;
  /* no shadow yet: the body alone, whatever bs asks */
  assert_int_equal(vr_pair_run(p, f->batch, 1, 0, &in, 1, out, 2, &rows, &e), 0);
  assert_int_equal(rows, 0);
  assert_memory_equal(out[0].data, f->ref, f->ref_bytes);
  double ms = -1;
  if (vr_pair_attach(p, 1, &ms, &e)) fail_msg("%s", e.msg);
  assert_true(ms >= 0 && vr_pair_has_shadow(p));
  assert_true(vr_pair_shadow_bytes(p) > 0 && vr_pair_shadow_bytes(p) < vr_pair_body_bytes(p));
  for (int bs = 0; bs <= f->batch; bs++) {
    if (vr_pair_run(p, f->batch, bs, 0, &in, 1, out, 2, &rows, &e)) fail_msg("bs=%d: %s", bs, e.msg);
    assert_int_equal(rows, bs);
    if (memcmp(out[0].data, f->ref, f->ref_bytes))
      fail_msg("[%d,%d) b_B=%d b_S=%d: differs from the unpaired model", pb, pe, f->batch - bs, bs);
  }
  /* the old hand-off (a copy into each next session) computes the same */
  vr_pair_set_copy_handoff(p, 1);
  for (int bs = 0; bs <= f->batch; bs++) {
    assert_int_equal(vr_pair_run(p, f->batch, bs, 0, &in, 1, out, 2, &rows, &e), 0);
    assert_memory_equal(out[0].data, f->ref, f->ref_bytes);
  }
  vr_pair_set_copy_handoff(p, 0);
  vr_pair_release(p);
  assert_false(vr_pair_has_shadow(p));
  assert_int_equal(vr_pair_run(p, f->batch, 2, 0, &in, 1, out, 2, &rows, &e), 0);
  assert_int_equal(rows, 0);
  assert_memory_equal(out[0].data, f->ref, f->ref_bytes);
  vr_pair_free(p);
}

static void test_pair_every_split(void **st) {
  pair_fx f = {0};
  pair_fx_setup(&f);
  int n = vr_model_num_nodes(f.m);
  check_split(&f, f.pb, f.pe);
  check_split(&f, 0, f.pe); /* range starts the graph */
  check_split(&f, f.pb, n); /* range ends it */
  vr_errbuf e = {0};
  vr_pair *p = NULL;
  /* a range that does not end at a chain cut is refused */
  char *cut = vr_calloc((size_t)n + 1, 1);
  assert_int_equal(vr_model_chain_cuts(f.m, cut), 0);
  for (int k = 1; k < n; k++)
    if (!cut[k]) {
      assert_int_equal(vr_pair_create(f.m, 0, k, 1, f.batch, &p, &e), VR_EINVAL);
      break;
    }
  vr_free(cut);
  assert_int_equal(vr_pair_create(f.m, 2, 1, 1, f.batch, &p, &e), VR_ERANGE);
  pair_fx_teardown(&f);
}

typedef struct runner {
  pair_fx *f;
  vr_pair *p;
  int runs, ok, paired, bad, done;
  int stop; /* set by the scaler once it is through */
} runner;

static void *run_loop(void *arg) {
  runner *r = arg;
  vr_tensor in = tensor_of("input", &r->f->in), out[2];
  vr_errbuf e = {0};
  for (int i = 0; i < r->runs || !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE); i++) {
    r->done++;
    int rows;
    if (vr_pair_run(r->p, r->f->batch, 1 + i % (r->f->batch), 0, &in, 1, out, 2, &rows, &e)) continue;
    r->ok++;
    __atomic_add_fetch(&r->paired, rows > 0, __ATOMIC_RELEASE);
    r->bad += memcmp(out[0].data, r->f->ref, r->f->ref_bytes) != 0;
  }
  return NULL;
}

/* The scaler attaches and releases the shadow while the body serves. */
static void test_release_under_load(void **st) {
  pair_fx f = {0};
  pair_fx_setup(&f);
  vr_pair *p;
  vr_errbuf e = {0};
  if (vr_pair_create(f.m, f.pb, f.pe, 1, f.batch, &p, &e)) fail_msg("%s", e.msg);
  runner r = {&f, p, 100, 0, 0, 0, 0, 0};
  pthread_t th;
  pthread_create(&th, NULL, run_loop, &r);
  for (int k = 0; k < 15; k++) {
    if (vr_pair_attach(p, 1, NULL, &e)) fail_msg("%s", e.msg);
    vr_pair_release(p);
  }
  if (vr_pair_attach(p, 1, NULL, &e)) fail_msg("%s", e.msg);
  /* the body keeps serving and now pairs (bounded wait) */
  for (int k = 0; k < 10000 && !__atomic_load_n(&r.paired, __ATOMIC_ACQUIRE); k++) usleep(1000);
  __atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
  pthread_join(th, NULL);
  assert_int_equal(r.ok, r.done); /* every request served */
  assert_true(r.paired > 0);
  assert_int_equal(r.bad, 0);
  vr_pair_free(p); /* with a shadow attached */
  pair_fx_teardown(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pair_every_split),
      cmocka_unit_test(test_release_under_load),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
