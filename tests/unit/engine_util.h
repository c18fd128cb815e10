/* Helpers shared by the engine unit tests (header-only, static). */
#ifndef VR_TEST_ENGINE_UTIL_H
#define VR_TEST_ENGINE_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/npy.h"
#include "vario/engine.h"
#include "vr_test.h"

/* Path of a file under the source tree (VR_SOURCE_DIR set by ctest). */
static inline const char *src_path(const char *rel) {
  static char buf[8][1024];
  static int k;
  const char *root = getenv("VR_SOURCE_DIR");
  char *b = buf[k++ % 8];
  snprintf(b, sizeof buf[0], "%s/%s", root ? root : ".", rel);
  return b;
}

static inline vr_tensor tensor_of(const char *name, const vr_npy *n) {
  vr_tensor t = {name, n->dtype, n->ndim, {0}, n->data, n->nbytes};
  memcpy(t.shape, n->shape, sizeof(int64_t) * (size_t)n->ndim);
  return t;
}

/* max |a-b| / max |b| */
static inline double rel_err(const float *a, const float *b, int64_t n) {
  double md = 0, mb = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]);
    if (d > md || isnan(d)) md = isnan(d) ? INFINITY : d;
    if (fabs(b[i]) > mb) mb = fabs(b[i]);
  }
  return mb > 0 ? md / mb : md;
}

/* A model of tests/data/engine with its reference input and output. */
typedef struct fixture {
  vr_model *m;
  vr_npy in, out;
} fixture;

static inline void load_fixture(fixture *f, const char *name) {
  char p[256];
  vr_errbuf e = {0};
  snprintf(p, sizeof p, "tests/data/engine/%s.onnx", name);
  int rc = vr_model_load(src_path(p), &f->m, &e);
  if (rc) fail_msg("%s", e.msg);
  snprintf(p, sizeof p, "tests/data/engine/%s_in.npy", name);
  assert_int_equal(vr_npy_read(src_path(p), &f->in, &e), 0);
  snprintf(p, sizeof p, "tests/data/engine/%s_out.npy", name);
  assert_int_equal(vr_npy_read(src_path(p), &f->out, &e), 0);
}

static inline void free_fixture(fixture *f) {
  vr_model_free(f->m);
  vr_npy_free(&f->in);
  vr_npy_free(&f->out);
}

#endif
