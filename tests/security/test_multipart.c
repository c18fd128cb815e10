/* The upload parser (src/server/multipart.c): what it accepts and the
 * strictness it promises. Robustness is the fuzzer's (fuzz_multipart). */
#include "vr_test.h"

#include <stdio.h>
#include <string.h>

#include "server/multipart.h"

static int parse(const char *ct, const char *body, vr_mp_part *p, int *n) {
  char b[80];
  vr_errbuf err;
  int rc = vr_mp_boundary(ct, b, sizeof b, &err);
  return rc ? rc : vr_mp_parse(b, body, strlen(body), p, n, &err);
}

static void test_good(void **st) {
  (void)st;
  vr_mp_part p[VR_MP_MAX_PARTS];
  int n = 0;
  const char *body = "--XY\r\nContent-Disposition: form-data; name=\"model\"; "
                     "filename=\"m.onnx\"\r\nContent-Type: application/octet-stream"
                     "\r\n\r\nAB\r\nCD\r\n--XY\r\nContent-Disposition: form-data; "
                     "name=\"name\"\r\n\r\nlin\r\n--XY--\r\n";
  assert_int_equal(parse("multipart/form-data; boundary=XY", body, p, &n), 0);
  assert_int_equal(n, 2);
  const vr_mp_part *m = vr_mp_find(p, n, "model");
  assert_non_null(m);
  assert_true(m->has_filename);
  assert_int_equal(m->len, 6);
  assert_memory_equal(m->data, "AB\r\nCD", 6);
  assert_int_equal(vr_mp_find(p, n, "name")->len, 3);
  assert_null(vr_mp_find(p, n, "other"));
  /* quoted boundary, other parameters first */
  n = 0;
  assert_int_equal(parse("multipart/form-data; charset=x; boundary=\"a b\"",
                         "--a b\r\nContent-Disposition: form-data; name=\"x\""
                         "\r\n\r\n\r\n--a b--", p, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(p[0].len, 0);
}

static void test_strict(void **st) {
  (void)st;
  vr_mp_part p[VR_MP_MAX_PARTS];
  int n;
  const char *ct = "multipart/form-data; boundary=B";
  const char *bad[] = {
      "",                                                       /* empty */
      "preamble\r\n--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n--B--",
      "--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx",   /* no close */
      ("--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n--B\r\n"
       "Content-Disposition: form-data; name=\"a\"\r\n\r\ny\r\n--B--"), /* twice */
      "--B\r\nContent-Disposition: form-data; name=\"../a\"\r\n\r\nx\r\n--B--",
      "--B\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n--B--",
      "--B\r\nContent-Disposition: attachment; name=\"a\"\r\n\r\nx\r\n--B--",
      "--B\r\nContent-Type: text/plain\r\n\r\nx\r\n--B--",       /* no name */
      "--B\r\nContent-Disposition: form-data; name=\"a\x01\"\r\n\r\nx\r\n--B--",
      "--Bjunk\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n--B--",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (parse(ct, bad[i], p, &n) != VR_EFORMAT) fail_msg("accepted case %zu", i);
  const char *bad_ct[] = {"application/json", "multipart/form-data",
                          "multipart/form-data; boundary=",
                          "multipart/form-data; boundary=\"unterminated",
                          "multipart/form-data; boundary=a\x01"};
  char b[80];
  vr_errbuf err;
  for (size_t i = 0; i < sizeof bad_ct / sizeof bad_ct[0]; i++)
    assert_int_equal(vr_mp_boundary(bad_ct[i], b, sizeof b, &err), VR_EFORMAT);
  /* More parts than the cap. */
  char big[4096] = "";
  for (int i = 0; i <= VR_MP_MAX_PARTS; i++) {
    char one[128];
    snprintf(one, sizeof one, "--B\r\nContent-Disposition: form-data; name=\"p%d\"\r\n\r\nx\r\n", i);
    strcat(big, one);
  }
  strcat(big, "--B--");
  assert_int_equal(parse(ct, big, p, &n), VR_EFORMAT);
}

int main(void) {
  const struct CMUnitTest t[] = {cmocka_unit_test(test_good), cmocka_unit_test(test_strict)};
  return cmocka_run_group_tests(t, NULL, NULL);
}
