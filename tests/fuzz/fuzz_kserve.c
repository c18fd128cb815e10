/* libFuzzer harness for the KServe v2 request parser (JSON and Triton's
 * binary tensor extension) and the response writer.
 * Input layout: a first byte 'B' selects the binary extension, followed by
 * a 4-byte little-endian Inference-Header-Content-Length and the body;
 * any other first byte means the whole input is a JSON body. The body is
 * also read as a raw binary request (no JSON header) to a model that the
 * input's last byte picks. */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "server/kserve.h"

/* The body as Triton's raw binary request (Inference-Header-Content-Length:
 * 0) to a one-input model whose dtype and shape the input's last byte picks
 * (what a loaded model's config may hold: dims up to 2^24, a sample up to
 * 2^28 elements, a batch dim or not, dims the body's size must fill). An
 * accepted body is exactly the input's bytes, its shape all concrete, a
 * batching model's batch 1. */
static void raw_request(const char *body, size_t len, uint8_t pick) {
  static const vr_dtype dts[] = {VR_DT_F32, VR_DT_U8, VR_DT_I64, VR_DT_F16,
                                 VR_DT_BOOL, VR_DT_BF16, VR_DT_F64, VR_DT_I16};
  static const int64_t shapes[8][4] = {
      {-1, 3, -1}, {-1, -1}, {-1, 1 << 14, 1 << 14}, {2, -1},
      {3, 5}, {-1, 7, 1}, {-1, 1 << 24, -1}, {-1, -1, -1}};
  static const int ndims[8] = {3, 2, 3, 2, 2, 3, 3, 3};
  vr_model_config c;
  memset(&c, 0, sizeof c);
  snprintf(c.name, sizeof c.name, "raw");
  c.n_inputs = 1;
  c.max_batch_size = pick & 0x40 ? 0 : 4;
  int k = pick & 7;
  c.inputs[0].dtype = dts[(pick >> 3) & 7];
  c.inputs[0].ndim = ndims[k];
  snprintf(c.inputs[0].name, sizeof c.inputs[0].name, "x");
  memcpy(c.inputs[0].shape, shapes[k], sizeof shapes[k]);
  vr_ks_request r;
  vr_errbuf err = {0};
  if (vr_ks_raw_request(body, len, &c, &r, &err)) {
    if (!err.msg[0]) abort(); /* a refusal says why */
    return;
  }
  int64_t n = 1;
  for (int d = 0; d < r.in[0].ndim; d++) {
    if (r.in[0].shape[d] < 0 || (d == 0 && c.max_batch_size > 0 && r.in[0].shape[0] != 1))
      abort();
    n *= r.in[0].shape[d];
  }
  if (r.n_in != 1 || r.in[0].ndim != ndims[k] || r.in[0].data != body || r.in[0].nbytes != len ||
      (uint64_t)n * vr_dtype_size(c.inputs[0].dtype) != len)
    abort();
  vr_ks_request_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t hlen = (size_t)-1;
  const char *body = (const char *)data;
  size_t len = size;
  if (size >= 5 && data[0] == 'B') {
    uint32_t h;
    memcpy(&h, data + 1, 4);
    hlen = h;
    body += 5;
    len -= 5;
  }
  vr_ks_request r;
  vr_errbuf err;
  raw_request(body, len, size ? data[size - 1] : 0);
  /* the same bytes as a response (outputs parsed like inputs) */
  if (!vr_ks_parse_response(body, len, hlen, &r, &err)) vr_ks_request_free(&r);
  int rc = vr_ks_parse_request(body, len, hlen, &r, &err);
  /* Differential check against jansson: what we accept must be valid
   * JSON (jansson also refuses numbers beyond double / int64 range, which
   * RFC 8259 allows and we accept where they are skipped or read as
   * reals). */
  size_t jl = hlen == (size_t)-1 ? len : hlen;
  if (rc == 0 && jl <= len) {
    json_error_t je;
    json_t *v = json_loadb(body, jl, 0, &je);
    if (!v && !strstr(je.text, "overflow") && !strstr(je.text, "too big"))
      abort();
    json_decref(v);
  }
  if (rc == 0) {
    /* Echo the inputs as outputs: exercises the writer on every dtype and
     * touches every byte the parser claims to own or point at. */
    vr_tensor out[VR_RT_MAX_IO];
    for (int i = 0; i < r.n_in; i++) {
      out[i].name = r.in[i].name;
      out[i].dtype = r.in[i].dtype;
      out[i].ndim = r.in[i].ndim;
      memcpy(out[i].shape, r.in[i].shape, sizeof out[i].shape);
      out[i].data = r.in[i].data;
      out[i].nbytes = r.in[i].nbytes;
    }
    vr_sbuf b;
    vr_sbuf_init(&b);
    size_t json_len;
    vr_ks_resp_info info = {"v", 1, 2, 3};
    if (!vr_ks_write_response(&b, "m", &r, out, r.n_in, &info, &json_len, &err)) {
      /* and read back as a worker's answer is (a remote pipeline hop) */
      vr_ks_request back;
      if (!vr_ks_parse_response(b.p, b.len, json_len < b.len ? json_len : (size_t)-1, &back,
                                &err))
        vr_ks_request_free(&back);
    }
    vr_sbuf_free(&b);
    vr_ks_request_free(&r);
  }
  return 0;
}
