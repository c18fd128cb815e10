/*
 * KServe Open Inference Protocol v2: inference request parsing and response
 * serialisation, JSON tensors (flat or nested "data") and Triton's binary
 * tensor extension. Pure functions of their inputs (no I/O), so they are
 * fuzzed directly (tests/fuzz/fuzz_kserve.c).
 *
 * Binary extension: the body is a JSON header of `header_len` bytes
 * (HTTP header Inference-Header-Content-Length) followed by the raw bytes
 * of every input whose parameters carry "binary_data_size", in input
 * order. The sizes must add up to the rest of the body exactly.
 *
 * Ownership: vr_ks_request owns the tensors it decoded from JSON; binary
 * inputs point into the caller's body, which must outlive the request.
 * vr_ks_request_free releases what it owns.
 */
#ifndef VR_SERVER_KSERVE_H
#define VR_SERVER_KSERVE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/config.h"
#include "server/sbuf.h"
#include "vario/engine.h"
#include "vario/status.h"

#define VR_KS_MAX_ELEMS ((int64_t)1 << 28)

typedef struct vr_ks_input {
  char name[VR_NAME_MAX];
  vr_dtype dtype;
  int ndim;
  int64_t shape[VR_MAX_DIMS];
  void *data;
  size_t nbytes;
  int owned; /* data allocated by the parser (vr_aligned_free) */
} vr_ks_input;

typedef struct vr_ks_output_req {
  char name[VR_NAME_MAX];
  int binary; /* -1 = not said (use the request default) */
  int classification; /* > 0: top-k classes as BYTES "score:index" (Triton) */
  /* the output's labels when classification asks for them (the server
   * sets it at submit: "score:index:label"); a reference released by
   * vr_ks_request_free. */
  struct vr_labels *labels;
} vr_ks_output_req;

typedef struct vr_ks_request {
  char id[256];
  int n_in;
  vr_ks_input in[VR_RT_MAX_IO];
  int n_out; /* requested outputs; 0 = all, in the model's order */
  vr_ks_output_req out[VR_RT_MAX_IO];
  int binary_output;  /* parameters.binary_data_output */
  int64_t timeout_us; /* parameters.timeout; 0 = none */
  int priority;       /* parameters.priority; 0 = default */
  /* Model-less parameters (Vario extension, read by /v2/apps/{app}/infer;
   * other endpoints ignore them), checked here so the body is parsed once:
   * latency_ms > 0, min_accuracy in [0, 100] (percent), max_cost >= 0;
   * < 0 = not given. model: pins one model of the app ("" = any). */
  double latency_ms, min_accuracy, max_cost;
  char model[VR_NAME_MAX];
} vr_ks_request;

/* Model-less parameters the route does not take (VR_KS_APP_* bits not in
 * `allowed`) refused by name: VR_EINVAL naming the first, "... is for
 * <for_route>" (a parameter is refused, never ignored); 0 if none. */
enum { VR_KS_APP_LATENCY = 1, VR_KS_APP_ACCURACY = 2, VR_KS_APP_COST = 4, VR_KS_APP_MODEL = 8 };
int vr_ks_only_app_params(const vr_ks_request *r, unsigned allowed, const char *for_route,
                          vr_errbuf *err);

/* header_len: the JSON part's length when the binary extension is used,
 * or (size_t)-1 when the whole body is JSON. */
/* The value of Inference-Header-Content-Length (h; NULL when absent) as
 * header_len: (size_t)-1 when absent, VR_EFORMAT unless all digits. */
int vr_ks_header_len(const char *h, size_t *out, vr_errbuf *err);
int vr_ks_parse_request(const char *body, size_t len, size_t header_len,
                        vr_ks_request *out, vr_errbuf *err);
void vr_ks_request_free(vr_ks_request *r);
/* Triton's raw binary request (binary extension, header_len 0): the whole
 * body is the data of model c's one input, with no JSON header; a batch of
 * 1 when c batches, one other variable dimension (at most) deduced from
 * len; every output answered binary. The input points into body. */
int vr_ks_raw_request(const char *body, size_t len, const vr_model_config *c,
                      vr_ks_request *out, vr_errbuf *err);
/* A response (what a worker answered a request forwarded to it: a
 * pipeline hop on another worker): its "outputs" are parsed like inputs
 * into out->in / out->n_in (the same ownership), the rest skipped. */
int vr_ks_parse_response(const char *body, size_t len, size_t header_len,
                         vr_ks_request *out, vr_errbuf *err);

/* What a model-less answer adds (/v2/apps/{app}/infer). */
typedef struct vr_ks_app_info {
  const char *model;     /* the model that served it */
  double accuracy;       /* of the variant, percent */
  double latency_slo_ms; /* the query's SLO (its deadline) */
  double profile_p99_ms; /* the variant's profiled tail at batch 1 */
  double cost_per_1k;
  int loaded_for_query;  /* the query waited for the variant to load */
} vr_ks_app_info;

/* Extra facts echoed in the response "parameters" (Vario extension). */
typedef struct vr_ks_resp_info {
  const char *variant;
  int64_t queue_us, compute_us;
  int batch_size;
  const vr_ks_app_info *app; /* NULL for /v2/models/{m}/infer */
  int version; /* the model version served (Triton layout); 0 = "1" */
} vr_ks_resp_info;

/* Writes a response for outputs (model order) filtered by the request's
 * output list. *json_len receives the JSON part's length: when it is
 * smaller than b->len the response uses the binary extension and the
 * server sets Inference-Header-Content-Length. VR_EINVAL when the request
 * names an output the model does not have. */
int vr_ks_write_response(vr_sbuf *b, const char *model, const vr_ks_request *req,
                         const vr_tensor *outs, int n_out,
                         const vr_ks_resp_info *info, size_t *json_len,
                         vr_errbuf *err);
/* Checks the request's output names against the model's outputs. */
int vr_ks_check_outputs(const vr_ks_request *req, const vr_model_config *c,
                        vr_errbuf *err);

/* A request/input/output parameter Vario does not honour: VR_EUNSUPPORTED
 * with a message naming it and, for Triton's sequence and shared-memory
 * parameters, the extension; `where` reads like " in outputs[0]". */
int vr_ks_refuse_param(const char *key, const char *where, vr_errbuf *err);

/* An input datatype that is not one of vr_dtype's: BYTES (KServe's string
 * tensors; the engine runs numeric tensors only) is refused as such, not
 * as unknown; anything else is unknown. */
int vr_ks_bad_dtype(const char *input, const char *dt, vr_errbuf *err);

/* Triton's classification extension on FP32 scores t: per row (dim 0) the
 * k best as "score:index" strings, best first, "score:index:label" where
 * labels (may be NULL) name the class; JSON strings appended to js
 * (comma separated) or, with bin, BYTES elements (4-byte little-endian
 * length + bytes) appended to bin. *rows / *k_out: the result's shape. */
int vr_ks_classify(const vr_tensor *t, int k, const struct vr_labels *labels,
                   vr_sbuf *js, vr_sbuf *bin, int64_t *rows, int *k_out,
                   vr_errbuf *err);

/* {"error": msg} */
void vr_ks_write_error(vr_sbuf *b, const char *msg);

/* Appends JSON numbers for n elements of dtype (comma separated). */
void vr_ks_write_numbers(vr_sbuf *b, vr_dtype dt, const void *data, size_t n);

#endif
