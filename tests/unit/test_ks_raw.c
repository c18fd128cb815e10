/* Triton's raw binary request (vr_ks_raw_request): the body alone is the
 * one input's data, its shape deduced from the model's. The bytes come
 * from the network, so the limits of a JSON request apply to it too. */
#include "vr_test.h"
#include <stdio.h>
#include <string.h>

#include "server/kserve.h"

static vr_model_config model(vr_dtype dt, int max_batch, int ndim, const int64_t *shape) {
  vr_model_config c;
  memset(&c, 0, sizeof c);
  snprintf(c.name, sizeof c.name, "m");
  c.n_inputs = 1;
  c.max_batch_size = max_batch;
  c.inputs[0].dtype = dt;
  c.inputs[0].ndim = ndim;
  snprintf(c.inputs[0].name, sizeof c.inputs[0].name, "x");
  memcpy(c.inputs[0].shape, shape, (size_t)ndim * sizeof *shape);
  return c;
}

/* A JSON request past 2^28 elements is refused (VR_KS_MAX_ELEMS, kserve.h:
 * what the runtime is sized for); a raw body of as many UINT8 bytes to a
 * variable dimension was taken, [1, 2^28 + 1]. The body is not read
 * here, only its length. */
static void test_raw_element_limit(void **st) {
  (void)st;
  static const int64_t shape[] = {-1, -1};
  vr_model_config c = model(VR_DT_U8, 8, 2, shape);
  static char body[1];
  vr_ks_request r;
  vr_errbuf err = {0};
  size_t len = (size_t)VR_KS_MAX_ELEMS + 1;
  int rc = vr_ks_raw_request(body, len, &c, &r, &err);
  if (!rc) {
    long long d0 = (long long)r.in[0].shape[0], d1 = (long long)r.in[0].shape[1];
    vr_ks_request_free(&r);
    fail_msg("%zu elements taken as [%lld, %lld]", len, d0, d1);
  }
  assert_int_equal(rc, VR_ELIMIT);
  assert_non_null(strstr(err.msg, "2^28"));
  /* at the limit: served */
  assert_int_equal(vr_ks_raw_request(body, (size_t)VR_KS_MAX_ELEMS, &c, &r, &err), 0);
  assert_int_equal(r.in[0].shape[1], VR_KS_MAX_ELEMS);
  vr_ks_request_free(&r);
}

/* The edges: an empty body to a variable dimension is a 0-length input;
 * a model that does not batch takes its first dimension as it is. */
static void test_raw_edges(void **st) {
  (void)st;
  static const int64_t var[] = {-1, 3, -1}, fixed[] = {2, 3};
  vr_model_config c = model(VR_DT_F32, 4, 3, var);
  vr_ks_request r;
  vr_errbuf err = {0};
  assert_int_equal(vr_ks_raw_request("", 0, &c, &r, &err), 0);
  assert_int_equal(r.in[0].shape[0], 1);
  assert_int_equal(r.in[0].shape[2], 0);
  vr_ks_request_free(&r);
  c = model(VR_DT_F32, 0, 2, fixed);
  float x[6] = {0};
  assert_int_equal(vr_ks_raw_request((const char *)x, sizeof x, &c, &r, &err), 0);
  assert_int_equal(r.in[0].shape[0], 2);
  vr_ks_request_free(&r);
  assert_int_equal(vr_ks_raw_request((const char *)x, 20, &c, &r, &err), VR_ESHAPE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_raw_element_limit),
      cmocka_unit_test(test_raw_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
