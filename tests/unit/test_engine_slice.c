/* Model slices and partial sessions (AsyFunc's body/shadow split): every
 * split point of a model, split and merged again, gives the whole model's
 * output bit for bit in fp32; a slice holds only its weights; int8 and bf16
 * partial sessions run; a middle segment split by rows between two sessions
 * (body b_B rows, shadow b_S rows) merges back to the whole batch. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "engine_util.h"
#include "vr_test.h"

static vr_session *open_session(const vr_model *m, int b, int e_, int batch, vr_precision p,
                                const vr_tensor *calib) {
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.max_batch = batch;
  o.node_begin = b;
  o.node_end = e_;
  o.precision = p;
  o.calibration = calib;
  o.n_calibration = calib ? 1 : 0;
  vr_session *s;
  vr_errbuf e = {0};
  if (vr_session_create(m, &o, &s, &e)) fail_msg("[%d,%d): %s", b, e_, e.msg);
  return s;
}

/* Inputs of `s` gathered by name from a pool of available tensors. */
static int gather(const vr_session *s, const vr_tensor *pool, int npool, vr_tensor *in) {
  int n = 0;
  for (int i = 0; i < vr_session_num_inputs(s); i++)
    for (int j = npool - 1; j >= 0; j--)
      if (!strcmp(pool[j].name, vr_session_input(s, i)->name)) {
        in[n++] = pool[j];
        break;
      }
  return n;
}

/* Runs sessions one after the other, each reading what earlier ones (or
 * the graph input) produced; returns the last output (copied). */
static float *run_chain(vr_session **ss, int n, int batch, const vr_tensor *input) {
  vr_tensor pool[256], in[64], out[64];
  int np = 0;
  pool[np++] = *input;
  float *res = NULL;
  vr_errbuf e = {0};
  for (int k = 0; k < n; k++) {
    int ni = gather(ss[k], pool, np, in);
    assert_int_equal(ni, vr_session_num_inputs(ss[k]));
    if (vr_session_run(ss[k], batch, in, ni, out, 64, &e)) fail_msg("%s", e.msg);
    for (int j = 0; j < vr_session_num_outputs(ss[k]) && np < 256; j++) {
      /* copy: the next run of the same session would overwrite it */
      void *d = malloc(out[j].nbytes ? out[j].nbytes : 1);
      memcpy(d, out[j].data, out[j].nbytes);
      pool[np] = out[j];
      pool[np++].data = d;
    }
  }
  res = malloc(pool[np - 1].nbytes);
  memcpy(res, pool[np - 1].data, pool[np - 1].nbytes);
  for (int j = 1; j < np; j++) free(pool[j].data);
  return res;
}

/* Slices [0,k) and [k,n) as standalone models, for every k: bit-identical
 * to the whole model; and the slices hold fewer weights than the whole. */
static void slice_chain(const char *name, const char *input) {
  fixture f = {0};
  load_fixture(&f, name);
  int n = vr_model_num_nodes(f.m), batch = (int)f.in.shape[0], tested = 0;
  vr_tensor in = tensor_of(input, &f.in);
  vr_session *whole = open_session(f.m, 0, 0, batch, VR_PREC_FP32, NULL);
  float *ref = run_chain(&whole, 1, batch, &in);
  size_t nb = (size_t)vr_npy_numel(&f.out) * 4;
  vr_errbuf e = {0};
  for (int k = 1; k < n; k++) {
    vr_model *a, *b;
    if (vr_model_slice(f.m, 0, k, &a, &e)) {
      assert_int_equal(e.code, VR_EUNSUPPORTED); /* batch not in dim 0 at this cut */
      continue;
    }
    int rc = vr_model_slice(f.m, k, n, &b, &e);
    if (rc) {
      assert_int_equal(rc, VR_EUNSUPPORTED);
      vr_model_free(a);
      continue;
    }
    assert_int_equal(vr_model_num_nodes(a) + vr_model_num_nodes(b), n);
    assert_int_equal(vr_model_weight_bytes(a) + vr_model_weight_bytes(b),
                     vr_model_weight_bytes(f.m));
    vr_session *ss[2] = {open_session(a, 0, 0, batch, VR_PREC_FP32, NULL),
                         open_session(b, 0, 0, batch, VR_PREC_FP32, NULL)};
    float *got = run_chain(ss, 2, batch, &in);
    if (memcmp(got, ref, nb)) fail_msg("%s sliced at %d: differs from the whole model", name, k);
    free(got);
    vr_session_free(ss[0]);
    vr_session_free(ss[1]);
    vr_model_free(a);
    vr_model_free(b);
    tested++;
  }
  assert_true(tested >= n / 2);
  free(ref);
  vr_session_free(whole);
  free_fixture(&f);
}

static void test_slice_every_split(void **st) {
  slice_chain("tiny_cnn", "input");
  slice_chain("tiny_tf", "tokens");
}

/* Runs sessions ss[0..k) (on model slices parts[0..k)) as a chain and
 * expects the whole model's output ref (bytes of it); frees ss, parts
 * and ref. */
static void expect_chain(vr_session **ss, vr_model **parts, int k, int batch, const vr_tensor *in,
                         float *ref, size_t bytes) {
  float *got = run_chain(ss, k, batch, in);
  assert_memory_equal(got, ref, bytes);
  free(got);
  free(ref);
  for (int i = 0; i < k; i++) {
    vr_session_free(ss[i]);
    vr_model_free(parts[i]);
  }
}

/* tiny_cnn's fixture, its batch, its input and the whole model's
 * output on it (the caller frees ref; whole is left open in *whole). */
static float *tiny_cnn_ref(fixture *f, int *batch, vr_tensor *in, vr_session **whole) {
  load_fixture(f, "tiny_cnn");
  *batch = (int)f->in.shape[0];
  *in = tensor_of("input", &f->in);
  *whole = open_session(f->m, 0, 0, *batch, VR_PREC_FP32, NULL);
  return run_chain(whole, 1, *batch, in);
}

/* A slice outlives its source model and keeps only its weights. */
static void test_slice_standalone(void **st) {
  fixture f = {0};
  int batch;
  vr_tensor in;
  vr_session *whole;
  float *ref = tiny_cnn_ref(&f, &batch, &in, &whole);
  int n = vr_model_num_nodes(f.m);
  vr_model *parts[3];
  vr_errbuf e = {0};
  int cut[4] = {0, n / 3, 2 * n / 3, n};
  for (int i = 0; i < 3; i++)
    if (vr_model_slice(f.m, cut[i], cut[i + 1], &parts[i], &e)) fail_msg("%s", e.msg);
  int64_t whole_mem = vr_session_memory_bytes(whole);
  vr_session_free(whole);
  vr_model_free(f.m);
  f.m = NULL;
  vr_session *ss[3];
  int64_t part_w = 0;
  for (int i = 0; i < 3; i++) {
    ss[i] = open_session(parts[i], 0, 0, batch, VR_PREC_FP32, NULL);
    part_w += vr_model_weight_bytes(parts[i]);
    assert_true(vr_session_memory_bytes(ss[i]) < whole_mem);
  }
  assert_true(vr_model_weight_bytes(parts[0]) < part_w);
  expect_chain(ss, parts, 3, batch, &in, ref, (size_t)vr_npy_numel(&f.out) * 4);
  free_fixture(&f);
}

/* The middle third split by rows: rows [0,bB) on one session (the body),
 * [bB,b) on another (the shadow), outputs concatenated back. Equal to the
 * whole model, bit for bit, for every bB in 1..b-1. */
static void test_row_split_merge(void **st) {
  fixture f = {0};
  load_fixture(&f, "tiny_cnn");
  int n = vr_model_num_nodes(f.m), batch = (int)f.in.shape[0];
  vr_tensor in = tensor_of("input", &f.in), out[8], mid[8], tail_in[8];
  vr_session *whole = open_session(f.m, 0, 0, batch, VR_PREC_FP32, NULL);
  float *ref = run_chain(&whole, 1, batch, &in);
  int c1 = n / 3, c2 = 2 * n / 3;
  vr_session *pre = open_session(f.m, 0, c1, batch, VR_PREC_FP32, NULL);
  vr_session *body = open_session(f.m, c1, c2, batch, VR_PREC_FP32, NULL);
  vr_session *shadow = open_session(f.m, c1, c2, batch, VR_PREC_FP32, NULL);
  vr_session *post = open_session(f.m, c2, n, batch, VR_PREC_FP32, NULL);
  vr_errbuf e = {0};
  assert_int_equal(vr_session_num_inputs(body), 1); /* a chain cut */
  assert_int_equal(vr_session_num_outputs(body), 1);
  for (int bB = 1; bB < batch; bB++) {
    int bS = batch - bB;
    if (vr_session_run(pre, batch, &in, 1, mid, 8, &e)) fail_msg("%s", e.msg);
    size_t row = mid[0].nbytes / (size_t)batch;
    vr_tensor ib = mid[0], is = mid[0];
    ib.shape[0] = bB;
    ib.nbytes = row * (size_t)bB;
    is.shape[0] = bS;
    is.nbytes = row * (size_t)bS;
    is.data = (char *)mid[0].data + row * (size_t)bB;
    vr_tensor ob, os;
    if (vr_session_run(body, bB, &ib, 1, &ob, 1, &e)) fail_msg("%s", e.msg);
    if (vr_session_run(shadow, bS, &is, 1, &os, 1, &e)) fail_msg("%s", e.msg);
    char *merged = malloc(ob.nbytes + os.nbytes);
    memcpy(merged, ob.data, ob.nbytes);
    memcpy(merged + ob.nbytes, os.data, os.nbytes);
    tail_in[0] = ob;
    tail_in[0].shape[0] = batch;
    tail_in[0].data = merged;
    tail_in[0].nbytes = ob.nbytes + os.nbytes;
    if (vr_session_run(post, batch, tail_in, 1, out, 8, &e)) fail_msg("%s", e.msg);
    if (memcmp(out[0].data, ref, out[0].nbytes))
      fail_msg("bB=%d bS=%d: differs from the whole model (relative error %g)", bB, bS,
               rel_err(out[0].data, ref, vr_npy_numel(&f.out)));
    free(merged);
  }
  free(ref);
  vr_session_free(whole);
  vr_session_free(pre);
  vr_session_free(body);
  vr_session_free(shadow);
  vr_session_free(post);
  free_fixture(&f);
}

/* int8 and bf16 partial sessions: the chain of two equals the whole
 * session of the same precision (int8 scales come from the whole graph). */
static void prec_chain(vr_precision p, double tol) {
  fixture f = {0};
  load_fixture(&f, "tiny_cnn");
  int n = vr_model_num_nodes(f.m), batch = (int)f.in.shape[0];
  vr_tensor in = tensor_of("input", &f.in);
  const vr_tensor *cal = p == VR_PREC_INT8 ? &in : NULL;
  vr_session *whole = open_session(f.m, 0, 0, batch, p, cal);
  float *ref = run_chain(&whole, 1, batch, &in);
  for (int k = 1; k < n; k++) {
    vr_session *ss[2] = {open_session(f.m, 0, k, batch, p, cal),
                         open_session(f.m, k, n, batch, p, cal)};
    float *got = run_chain(ss, 2, batch, &in);
    double r = rel_err(got, ref, vr_npy_numel(&f.out));
    if (r > tol) fail_msg("%s split at %d: relative error %g", vr_precision_name(p), k, r);
    free(got);
    vr_session_free(ss[0]);
    vr_session_free(ss[1]);
  }
  free(ref);
  vr_session_free(whole);
  free_fixture(&f);
}

static void test_int8_partial(void **st) {
  if (!vr_precision_supported(VR_PREC_INT8)) skip();
  prec_chain(VR_PREC_INT8, 0.05);
}

static void test_bf16_partial(void **st) {
  if (!vr_precision_supported(VR_PREC_BF16)) skip();
  prec_chain(VR_PREC_BF16, 3e-2);
}

/* One model through vr_model_pack / vr_model_unpack: a session on the
 * copy computes the source's output bit for bit. */
static void pack_round_trip(const char *name) {
  fixture f = {0};
  load_fixture(&f, name);
  if (vr_model_num_inputs(f.m) != 1) {
    free_fixture(&f);
    return;
  }
  vr_errbuf e = {0};
  void *buf;
  size_t len;
  if (vr_model_pack(f.m, &buf, &len, &e)) fail_msg("%s: %s", name, e.msg);
  vr_model *c;
  if (vr_model_unpack(buf, len, &c, &e)) fail_msg("%s: %s", name, e.msg);
  vr_free(buf);
  assert_int_equal(vr_model_num_nodes(c), vr_model_num_nodes(f.m));
  assert_int_equal(vr_model_weight_bytes(c), vr_model_weight_bytes(f.m));
  int batch = f.in.ndim > 0 && vr_model_input(f.m, 0)->shape[0] < 0 ? (int)f.in.shape[0] : 1;
  vr_tensor in = tensor_of(vr_model_input(f.m, 0)->name, &f.in);
  vr_session *a = open_session(f.m, 0, 0, batch, VR_PREC_FP32, NULL);
  vr_session *b = open_session(c, 0, 0, batch, VR_PREC_FP32, NULL);
  vr_tensor oa[8], ob[8];
  int na = vr_session_num_outputs(a);
  if (vr_session_run(a, batch, &in, 1, oa, 8, &e) || vr_session_run(b, batch, &in, 1, ob, 8, &e))
    fail_msg("%s: %s", name, e.msg);
  for (int k = 0; k < na; k++) {
    assert_int_equal(oa[k].nbytes, ob[k].nbytes);
    if (memcmp(oa[k].data, ob[k].data, oa[k].nbytes))
      fail_msg("%s: output %d of the unpacked model differs", name, k);
  }
  vr_session_free(a);
  vr_session_free(b);
  vr_model_free(c);
  free_fixture(&f);
}

/* Packs: every fixture model round-trips; slices too (what a body sends
 * its shadow process); every truncation and a foreign version are
 * refused with an error, and byte flips never crash the reader. */
static void test_pack(void **st) {
  /* every model of tests/data/engine with a reference input */
  DIR *dir = opendir(src_path("tests/data/engine"));
  assert_non_null(dir);
  int tried = 0;
  for (struct dirent *de; (de = readdir(dir));) {
    size_t l = strlen(de->d_name);
    if (l < 8 || l > 120 || strcmp(de->d_name + l - 7, "_in.npy")) continue;
    char name[128];
    memcpy(name, de->d_name, l - 7);
    name[l - 7] = 0;
    pack_round_trip(name);
    tried++;
  }
  closedir(dir);
  assert_true(tried >= 10);
  /* the fuzzer's seeds are packs this build reads (regenerated after a
   * format change: tests/fuzz/fuzz_modelpack.c) */
  dir = opendir(src_path("tests/fuzz/seeds/modelpack"));
  assert_non_null(dir);
  tried = 0;
  for (struct dirent *de; (de = readdir(dir));) {
    if (de->d_name[0] == '.') continue;
    char rel[300];
    snprintf(rel, sizeof rel, "tests/fuzz/seeds/modelpack/%s", de->d_name);
    FILE *fp = fopen(src_path(rel), "rb");
    assert_non_null(fp);
    char *b = malloc(1 << 20);
    size_t n = fread(b, 1, 1 << 20, fp);
    fclose(fp);
    vr_model *sm;
    vr_errbuf se = {0};
    if (vr_model_unpack(b, n, &sm, &se)) fail_msg("seed %s: %s", de->d_name, se.msg);
    vr_model_free(sm);
    free(b);
    tried++;
  }
  closedir(dir);
  assert_true(tried >= 5);
  fixture f = {0};
  int batch;
  vr_tensor in;
  vr_session *whole;
  float *ref = tiny_cnn_ref(&f, &batch, &in, &whole);
  int n = vr_model_num_nodes(f.m);
  vr_session_free(whole);
  vr_errbuf e = {0};
  int cut[3] = {0, n / 2, n};
  vr_session *ss[2];
  vr_model *parts[2];
  void *buf = NULL;
  size_t len = 0;
  for (int i = 0; i < 2; i++) {
    vr_model *sl;
    if (vr_model_slice(f.m, cut[i], cut[i + 1], &sl, &e)) fail_msg("%s", e.msg);
    vr_free(buf);
    if (vr_model_pack(sl, &buf, &len, &e)) fail_msg("%s", e.msg);
    vr_model_free(sl);
    if (vr_model_unpack(buf, len, &parts[i], &e)) fail_msg("%s", e.msg);
    ss[i] = open_session(parts[i], 0, 0, batch, VR_PREC_FP32, NULL);
  }
  expect_chain(ss, parts, 2, batch, &in, ref, (size_t)vr_npy_numel(&f.out) * 4);
  /* buf: the second half's pack */
  vr_model *c;
  for (size_t k = 0; k < len; k++) {
    memset(&e, 0, sizeof e);
    assert_int_equal(vr_model_unpack(buf, k, &c, &e), VR_EFORMAT);
    assert_true(strlen(e.msg) > 0);
  }
  char *bad = malloc(len + 1);
  memcpy(bad, buf, len);
  bad[len] = 0; /* a byte past the end */
  assert_int_equal(vr_model_unpack(bad, len + 1, &c, &e), VR_EFORMAT);
  ((uint32_t *)(void *)bad)[1] += 1; /* the version word */
  assert_int_equal(vr_model_unpack(bad, len, &c, &e), VR_EFORMAT);
  assert_non_null(strstr(e.msg, "version"));
  unsigned seed = 7;
  for (int round = 0; round < 2000; round++) {
    memcpy(bad, buf, len);
    for (int j = 0; j < 1 + round % 4; j++) {
      seed = seed * 1103515245u + 12345u;
      bad[(seed >> 8) % len] ^= (char)(1u << ((seed >> 3) % 8));
    }
    if (vr_model_unpack(bad, len, &c, &e) == 0) vr_model_free(c);
  }
  free(bad);
  vr_free(buf);
  free_fixture(&f);
}

static void test_slice_bad_range(void **st) {
  fixture f = {0};
  load_fixture(&f, "tiny_cnn");
  vr_model *s = NULL;
  vr_errbuf e = {0};
  int n = vr_model_num_nodes(f.m);
  assert_int_equal(vr_model_slice(f.m, 2, 2, &s, &e), VR_ERANGE);
  assert_int_equal(vr_model_slice(f.m, -1, 2, &s, &e), VR_ERANGE);
  assert_int_equal(vr_model_slice(f.m, 0, n + 1, &s, &e), VR_ERANGE);
  assert_null(s);
  assert_int_equal(vr_model_slice(NULL, 0, 1, &s, &e), VR_EINVAL);
  free_fixture(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slice_every_split), cmocka_unit_test(test_slice_standalone),
      cmocka_unit_test(test_row_split_merge),   cmocka_unit_test(test_int8_partial),
      cmocka_unit_test(test_bf16_partial),      cmocka_unit_test(test_slice_bad_range),
      cmocka_unit_test(test_pack),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
