/* .npy: round trip, numpy-written files, and malformed inputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/npy.h"
#include "vr_test.h"

static void test_roundtrip(void **st) {
  char path[] = "/tmp/vr_npy_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  float data[2 * 3 * 4];
  for (int i = 0; i < 24; i++) data[i] = i * 0.5f;
  int64_t shape[] = {2, 3, 4};
  vr_errbuf e = {0};
  assert_int_equal(vr_npy_write(path, VR_DT_F32, shape, 3, data, &e), 0);
  vr_npy n;
  assert_int_equal(vr_npy_read(path, &n, &e), 0);
  assert_int_equal(n.dtype, VR_DT_F32);
  assert_int_equal(n.ndim, 3);
  assert_int_equal(n.shape[2], 4);
  assert_int_equal(vr_npy_numel(&n), 24);
  assert_memory_equal(n.data, data, sizeof data);
  vr_npy_free(&n);
  int64_t one[] = {5};
  int64_t labels[] = {1, 2, 3, 4, 5};
  assert_int_equal(vr_npy_write(path, VR_DT_I64, one, 1, labels, &e), 0);
  assert_int_equal(vr_npy_read(path, &n, &e), 0);
  assert_int_equal(n.ndim, 1);
  assert_int_equal(((int64_t *)n.data)[4], 5);
  vr_npy_free(&n);
  unlink(path);
}

static int parse_str(const char *hdr, size_t payload, vr_errbuf *e) {
  unsigned char buf[512];
  size_t hl = strlen(hdr);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = hl & 0xff;
  buf[9] = hl >> 8;
  memcpy(buf + 10, hdr, hl);
  memset(buf + 10 + hl, 0, payload);
  vr_npy n;
  int rc = vr_npy_parse(buf, 10 + hl + payload, &n, e);
  if (rc == 0) vr_npy_free(&n);
  return rc;
}

static void test_malformed(void **st) {
  vr_errbuf e = {0};
  vr_npy n;
  assert_int_equal(vr_npy_parse("hello", 5, &n, &e), VR_EFORMAT);
  assert_int_equal(
      parse_str("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n",
                8, &e), 0);
  /* Payload shorter / longer than the header claims. */
  assert_int_equal(
      parse_str("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n",
                7, &e), VR_EFORMAT);
  assert_non_null(strstr(e.msg, "payload"));
  assert_int_equal(
      parse_str("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n",
                9, &e), VR_EFORMAT);
  assert_int_equal(
      parse_str("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n",
                8, &e), VR_EUNSUPPORTED);
  assert_int_equal(
      parse_str("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }\n",
                8, &e), VR_EUNSUPPORTED);
  assert_int_equal(
      parse_str("{'descr': '<f4', 'fortran_order': False, 'shape': (x,), }\n",
                0, &e), VR_EFORMAT);
  assert_int_equal(parse_str("{'descr': '<f4', 'shape': (2,), }\n", 8, &e),
                   VR_EFORMAT);
  /* Huge shapes are refused without allocating. */
  assert_int_equal(
      parse_str("{'descr': '<f8', 'fortran_order': False, "
                "'shape': (1099511627776, 1099511627776), }\n", 0, &e),
      VR_ELIMIT);
  assert_int_equal(vr_npy_read("/nonexistent/x.npy", &n, &e), VR_ENOENT);
}

/* A file written by numpy itself, if python3-numpy is present. */
static void test_numpy_file(void **st) {
  if (system("/usr/bin/python3 -c 'import numpy as np; np.save(\"/tmp/vr_np_t.npy\", "
             "np.arange(12, dtype=np.float32).reshape(3,4))' 2>/dev/null")) {
    skip();
  }
  vr_npy n;
  vr_errbuf e = {0};
  assert_int_equal(vr_npy_read("/tmp/vr_np_t.npy", &n, &e), 0);
  assert_int_equal(n.shape[0], 3);
  assert_int_equal(n.shape[1], 4);
  assert_float_equal(((float *)n.data)[11], 11.0, 0);
  vr_npy_free(&n);
  unlink("/tmp/vr_np_t.npy");
}

/* A write that fails (a full disk: /dev/full) names the system's reason;
 * it said only "write failed" (an offline job's record on a full disk). */
static void test_write_full(void **st) {
  (void)st;
  if (access("/dev/full", W_OK)) skip();
  float data[1024] = {0};
  int64_t shape[] = {1024};
  vr_errbuf e = {0};
  assert_int_equal(vr_npy_write("/dev/full", VR_DT_F32, shape, 1, data, &e), VR_EIO);
  if (!strstr(e.msg, "No space left on device")) fail_msg("error: %s", e.msg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_numpy_file),
      cmocka_unit_test(test_write_full),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
