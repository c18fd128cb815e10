/*
 * KServe v2 gRPC (see grpc.h). Each call goes NEW -> READ (request message
 * received) -> DONE (reply, status and close sent). Handlers answer on the
 * completion-queue thread, except ModelInfer, which is answered from the
 * runtime's done callback (grpc_call_start_batch is thread-safe).
 * The request check is in grpc_req.c, Triton's extension methods in
 * grpc_triton.c.
 */
#include "server/grpc.h"
#include "server/grpc_int.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "grpc_service.pb-c.h"
#include "server/kserve.h"
#include "server/server_int.h"

/* A call leaves g->reading once its message came (or the call ended). */
static void read_unlink(gcall *c) {
  if (!c->in_reading) return;
  vr_grpc *g = c->g;
  if (c->rprev) c->rprev->rnext = c->rnext;
  else g->reading = c->rnext;
  if (c->rnext) c->rnext->rprev = c->rprev;
  else g->reading_tail = c->rprev;
  c->rprev = c->rnext = NULL;
  c->in_reading = 0;
}

static void call_free(gcall *c) {
  read_unlink(c);
  if (c->call) grpc_call_unref(c->call);
  grpc_call_details_destroy(&c->details);
  grpc_metadata_array_destroy(&c->md);
  if (c->recv) grpc_byte_buffer_destroy(c->recv);
  if (c->send) grpc_byte_buffer_destroy(c->send);
  if (c->has_status_msg) grpc_slice_unref(c->status_msg);
  if (c->has_rt) vr_rt_request_clear(&c->rt);
  vr_ks_request_free(&c->ks);
  if (c->req) inference__model_infer_request__free_unpacked(c->req, NULL);
  vr_free(c);
}

static void request_next(vr_grpc *g) {
  if (__atomic_load_n(&g->stopping, __ATOMIC_SEQ_CST)) return;
  gcall *c = VR_NEW(gcall);
  if (!c) return;
  c->g = g;
  grpc_call_details_init(&c->details);
  grpc_metadata_array_init(&c->md);
  if (grpc_server_request_call(g->srv, &c->call, &c->details, &c->md, g->cq,
                               g->cq, c) != GRPC_CALL_OK)
    call_free(c);
}

/* ---- replies ----------------------------------------------------------------- */

static grpc_status_code code_of(int rc) {
  switch (vr_server_http_status(rc)) {
  case 200: return GRPC_STATUS_OK;
  case 404: return GRPC_STATUS_NOT_FOUND;
  case 409: return GRPC_STATUS_ALREADY_EXISTS;
  case 503: return GRPC_STATUS_UNAVAILABLE;
  case 504: return GRPC_STATUS_DEADLINE_EXCEEDED;
  case 500: return GRPC_STATUS_INTERNAL;
  default: return GRPC_STATUS_INVALID_ARGUMENT;
  }
}

/* Sends payload (may be NULL), the status and waits for the close. */
static void finish(gcall *c, grpc_status_code code, const char *msg,
                   grpc_byte_buffer *payload) {
  grpc_op ops[3];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  c->send = payload;
  if (payload) {
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = payload;
  }
  c->status_msg = grpc_slice_from_copied_string(msg ? msg : "");
  c->has_status_msg = 1;
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = code;
  ops[n++].data.send_status_from_server.status_details = &c->status_msg;
  ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
  c->stage = ST_DONE;
  if (grpc_call_start_batch(c->call, ops, n, c, NULL) != GRPC_CALL_OK) {
    vr_warn("grpc: cannot answer a call");
    c->stage = ST_DONE; /* freed at queue shutdown: nothing else to do */
  }
}

void vr__grpc_fail(gcall *c, int rc, const char *msg) {
  finish(c, code_of(rc), msg, NULL);
}

void vr__grpc_reply(gcall *c, const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  grpc_slice sl = grpc_slice_malloc(n);
  protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(sl));
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&sl, 1);
  grpc_slice_unref(sl);
  finish(c, GRPC_STATUS_OK, "", bb);
}

/* Unpacks the received message with desc; NULL (and the call failed) when
 * it is not one. */
ProtobufCMessage *vr__grpc_unpack(gcall *c, const ProtobufCMessageDescriptor *desc) {
  grpc_byte_buffer_reader rd;
  if (!c->recv || !grpc_byte_buffer_reader_init(&rd, c->recv)) {
    vr__grpc_fail(c, VR_EFORMAT, "no request message");
    return NULL;
  }
  grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
  grpc_byte_buffer_reader_destroy(&rd);
  ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(all),
                                                  GRPC_SLICE_START_PTR(all));
  grpc_slice_unref(all);
  if (!m) vr__grpc_fail(c, VR_EFORMAT, "malformed request message");
  return m;
}

/* ---- health and metadata ------------------------------------------------------- */

static void server_live(gcall *c) {
  Inference__ServerLiveResponse r = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
  r.live = 1;
  vr__grpc_reply(c, &r.base);
}

static void server_ready(gcall *c) {
  Inference__ServerReadyResponse r = INFERENCE__SERVER_READY_RESPONSE__INIT;
  r.ready = vr__srv_ready(c->g->s);
  vr__grpc_reply(c, &r.base);
}

/* A version a request names must be the served one ("" = any). */
static int version_ok(gcall *c, const char *model, const char *version) {
  char want[16];
  snprintf(want, sizeof want, "%d", vr__srv_version(c->g->s, model));
  return !version || !*version || !strcmp(version, want);
}

static void model_ready(gcall *c) {
  Inference__ModelReadyRequest *q =
      (void *)vr__grpc_unpack(c, &inference__model_ready_request__descriptor);
  if (!q) return;
  Inference__ModelReadyResponse r = INFERENCE__MODEL_READY_RESPONSE__INIT;
  r.ready = vr_rt_model_ready(c->g->s->rt, q->name) && version_ok(c, q->name, q->version);
  inference__model_ready_request__free_unpacked(q, NULL);
  vr__grpc_reply(c, &r.base);
}

static void server_metadata(gcall *c) {
  Inference__ServerMetadataResponse r = INFERENCE__SERVER_METADATA_RESPONSE__INIT;
  r.name = "vario";
  r.version = VR_SRV_VERSION;
  while (vr__srv_extensions[r.n_extensions]) r.n_extensions++;
  r.extensions = (char **)vr__srv_extensions;
  vr__grpc_reply(c, &r.base);
}

/* The loaded model's config; answers NOT_FOUND itself when there is none. */
int vr__grpc_config_of(gcall *c, const char *name, const char *version,
                     vr_model_config *cfg) {
  char msg[256];
  if (vr_rt_model_config(c->g->s->rt, name, cfg) || !version_ok(c, name, version)) {
    if (version && *version) /* no version asked: none to name */
      snprintf(msg, sizeof msg, "model '%.128s' (version '%.16s') is not loaded", name,
               version);
    else
      snprintf(msg, sizeof msg, "model '%.128s' is not loaded", name);
    vr__grpc_fail(c, VR_ENOENT, msg);
    return -1;
  }
  return 0;
}

static void model_metadata(gcall *c) {
  Inference__ModelMetadataRequest *q =
      (void *)vr__grpc_unpack(c, &inference__model_metadata_request__descriptor);
  vr_model_config cfg;
  if (!q) return;
  if (vr__grpc_config_of(c, q->name, q->version, &cfg)) {
    inference__model_metadata_request__free_unpacked(q, NULL);
    return;
  }
  inference__model_metadata_request__free_unpacked(q, NULL);
  Inference__ModelMetadataResponse r = INFERENCE__MODEL_METADATA_RESPONSE__INIT;
  Inference__ModelMetadataResponse__TensorMetadata tm[2 * VR_RT_MAX_IO], *tp[2 * VR_RT_MAX_IO];
  char ver[16], *vers[1] = {ver};
  snprintf(ver, sizeof ver, "%d", cfg.version > 0 ? cfg.version : 1);
  r.name = cfg.name;
  r.versions = vers;
  r.n_versions = 1;
  r.platform = "onnxruntime_onnx";
  int n = cfg.n_inputs + cfg.n_outputs;
  for (int i = 0; i < n; i++) {
    vr_tensor_info *t = i < cfg.n_inputs ? &cfg.inputs[i] : &cfg.outputs[i - cfg.n_inputs];
    inference__model_metadata_response__tensor_metadata__init(&tm[i]);
    tm[i].name = t->name;
    tm[i].datatype = (char *)vr_dtype_kserve(t->dtype);
    tm[i].n_shape = (size_t)t->ndim;
    tm[i].shape = t->shape;
    tp[i] = &tm[i];
  }
  r.inputs = tp;
  r.n_inputs = (size_t)cfg.n_inputs;
  r.outputs = tp + cfg.n_inputs;
  r.n_outputs = (size_t)cfg.n_outputs;
  vr__grpc_reply(c, &r.base);
}

/* ---- ModelInfer ------------------------------------------------------------------ */

/* The runtime's outputs that the request asked for (all when it named
 * none), in the model's order, with their request entry. */
static const vr_ks_output_req *asked(const vr_ks_request *ks, const char *name, int *want) {
  *want = ks->n_out == 0;
  for (int i = 0; i < ks->n_out; i++)
    if (!strcmp(ks->out[i].name, name)) {
      *want = 1;
      return &ks->out[i];
    }
  return NULL;
}

static void infer_reply(gcall *c) {
  vr_rt_request *q = &c->rt;
  Inference__ModelInferResponse r = INFERENCE__MODEL_INFER_RESPONSE__INIT;
  Inference__ModelInferResponse__InferOutputTensor ot[VR_RT_MAX_IO], *op[VR_RT_MAX_IO];
  ProtobufCBinaryData raw[VR_RT_MAX_IO];
  vr_sbuf cls[VR_RT_MAX_IO];
  int64_t shp[VR_RT_MAX_IO][2];
  char ver[16];
  snprintf(ver, sizeof ver, "%d", vr__srv_version(c->g->s, c->model));
  r.model_name = c->model;
  r.model_version = ver;
  r.id = c->ks.id;
  size_t n = 0;
  int rc = 0;
  vr_errbuf err = {0};
  for (int i = 0; i < q->n_out && !rc; i++) {
    int want;
    const vr_ks_output_req *o = asked(&c->ks, q->out[i].name, &want);
    if (!want) continue;
    inference__model_infer_response__infer_output_tensor__init(&ot[n]);
    ot[n].name = (char *)q->out[i].name;
    vr_sbuf_init(&cls[n]);
    if (o && o->classification > 0) {
      vr_sbuf js;
      vr_sbuf_init(&js);
      int k;
      rc = vr_ks_classify(&q->out[i], o->classification, o->labels, &js, &cls[n],
                          &shp[n][0], &k, &err);
      vr_sbuf_free(&js);
      shp[n][1] = k;
      ot[n].datatype = "BYTES";
      ot[n].shape = shp[n];
      ot[n].n_shape = 2;
      raw[n].data = (uint8_t *)cls[n].p;
      raw[n].len = cls[n].len;
    } else {
      ot[n].datatype = (char *)vr_dtype_kserve(q->out[i].dtype);
      ot[n].shape = q->out[i].shape;
      ot[n].n_shape = (size_t)q->out[i].ndim;
      raw[n].data = q->out[i].data;
      raw[n].len = q->out[i].nbytes;
    }
    op[n] = &ot[n];
    n++;
  }
  r.outputs = op;
  r.n_outputs = n;
  r.raw_output_contents = raw;
  r.n_raw_output_contents = n;
  if (rc) vr__grpc_fail(c, rc, err.msg);
  else vr__grpc_reply(c, &r.base);
  for (size_t i = 0; i < n; i++) vr_sbuf_free(&cls[i]);
}

/* Runtime thread: the request is answered. */
static void on_infer_done(vr_rt_request *q, void *user) {
  gcall *c = user;
  vr_grpc *g = c->g;
  if (q->status) vr__grpc_fail(c, q->status, q->err.msg);
  else infer_reply(c);
  __atomic_fetch_sub(&g->inflight, 1, __ATOMIC_SEQ_CST);
}

/* The call's gRPC deadline is the request's too: past it the client has
 * gone (gRPC cancels the call), so serving it would only take capacity
 * from queries that can still be answered. It tightens parameters'
 * timeout and stands in for a missing one; a call already past it is
 * answered DEADLINE_EXCEEDED at once. 1 = answered. */
static int call_deadline(gcall *c) {
  gpr_timespec d = gpr_convert_clock_type(c->details.deadline, GPR_CLOCK_MONOTONIC);
  if (gpr_time_cmp(d, gpr_inf_future(GPR_CLOCK_MONOTONIC)) == 0) return 0;
  gpr_timespec left = gpr_time_sub(d, gpr_now(GPR_CLOCK_MONOTONIC));
  int64_t us = (int64_t)left.tv_sec * 1000000 + left.tv_nsec / 1000;
  if (us <= 0) {
    vr__grpc_fail(c, VR_EDEADLINE, "the call's deadline has passed");
    return 1;
  }
  if (c->ks.timeout_us <= 0 || us < c->ks.timeout_us) c->ks.timeout_us = us;
  return 0;
}

static void model_infer(gcall *c) {
  c->req = (void *)vr__grpc_unpack(c, &inference__model_infer_request__descriptor);
  if (!c->req) return;
  vr_errbuf err = {0};
  snprintf(c->model, sizeof c->model, "%s", c->req->model_name);
  int rc = strlen(c->req->model_name) >= sizeof c->model /* no such model: not cut to one */
               ? vr_errf(&err, VR_ENOENT, "model name longer than %zu bytes", sizeof c->model - 1)
           : version_ok(c, c->model, c->req->model_version)
               ? vr__grpc_to_ks(c->req, &c->ks, &err)
               : vr_errf(&err, VR_ENOENT, "model '%.128s' has no version '%.16s'",
                         c->model, c->req->model_version);
  if (rc) {
    __atomic_fetch_add(&c->g->s->invalid, 1, __ATOMIC_RELAXED);
    vr__grpc_fail(c, rc, err.msg);
    return;
  }
  if (call_deadline(c)) return;
  c->has_rt = 1;
  __atomic_fetch_add(&c->g->inflight, 1, __ATOMIC_SEQ_CST);
  rc = vr__srv_submit(c->g->s, c->model, &c->ks, &c->rt, 0, on_infer_done, c, &err);
  if (rc) {
    c->has_rt = 0;
    __atomic_fetch_sub(&c->g->inflight, 1, __ATOMIC_SEQ_CST);
    vr__grpc_fail(c, rc, err.msg);
  }
}

/* ---- dispatch and the loop --------------------------------------------------------- */

/* The admin token (access.c), as over HTTP: repository load, unload and
 * index need metadata "authorization: Bearer <token>"; with --auth-infer
 * every call but ServerLive/ServerReady does. 1 = refused (answered). */
static int denied(gcall *c, const char *m) {
  vr_server *s = c->g->s;
  int admin = !strncmp(m, "Repository", 10);
  if (!admin && (!s->o.infer_auth || !strcmp(m, "ServerLive") || !strcmp(m, "ServerReady")))
    return 0;
  if (!s->o.admin_token || !*s->o.admin_token) {
    if (s->o.insecure_admin) return 0;
    finish(c, GRPC_STATUS_PERMISSION_DENIED,
           admin ? "repository calls change server state and are off: start vario serve"
                   " with --admin-token-file (or VARIO_ADMIN_TOKEN) or --insecure-admin"
                 : "inference requires a token but none is configured", NULL);
    return 1;
  }
  char auth[1024] = "";
  for (size_t i = 0; i < c->md.count; i++) {
    const grpc_slice *k = &c->md.metadata[i].key, *v = &c->md.metadata[i].value;
    if (GRPC_SLICE_LENGTH(*k) == 13 &&
        !memcmp(GRPC_SLICE_START_PTR(*k), "authorization", 13) &&
        GRPC_SLICE_LENGTH(*v) < sizeof auth) {
      memcpy(auth, GRPC_SLICE_START_PTR(*v), GRPC_SLICE_LENGTH(*v));
      auth[GRPC_SLICE_LENGTH(*v)] = 0;
    }
  }
  if (vr__access_bearer_ok(s, auth)) return 0;
  finish(c, GRPC_STATUS_UNAUTHENTICATED, "missing or wrong bearer token (metadata"
         " \"authorization: Bearer <token>\")", NULL);
  return 1;
}

static void dispatch(gcall *c) {
  static const struct { const char *m; void (*fn)(gcall *); } k[] = {
      {"ServerLive", server_live}, {"ServerReady", server_ready},
      {"ModelReady", model_ready}, {"ServerMetadata", server_metadata},
      {"ModelMetadata", model_metadata}, {"ModelInfer", model_infer},
      {"ModelConfig", vr__grpc_model_config}, {"ModelStatistics", vr__grpc_model_statistics},
      {"RepositoryIndex", vr__grpc_repository_index}};
  static const char prefix[] = "/inference.GRPCInferenceService/";
  char method[128];
  size_t n = GRPC_SLICE_LENGTH(c->details.method);
  if (n >= sizeof method) n = sizeof method - 1;
  memcpy(method, GRPC_SLICE_START_PTR(c->details.method), n);
  method[n] = 0;
  const char *m = !strncmp(method, prefix, sizeof prefix - 1) ? method + sizeof prefix - 1 : "";
  if (denied(c, m)) return;
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
    if (!strcmp(m, k[i].m)) return k[i].fn(c);
  if (!strcmp(m, "RepositoryModelLoad")) return vr__grpc_repository_load(c, 1);
  if (!strcmp(m, "RepositoryModelUnload")) return vr__grpc_repository_load(c, 0);
  /* Triton's extensions Vario lacks are named, as over HTTP (400 there;
   * UNIMPLEMENTED is gRPC's code for a method the server does not have). */
  const char *what = !strncmp(m, "SystemSharedMemory", 18) ? "the system shared-memory extension"
                   : !strncmp(m, "CudaSharedMemory", 16)   ? "the CUDA shared-memory extension"
                   : !strcmp(m, "TraceSetting")             ? "the trace extension"
                   : !strcmp(m, "LogSettings")              ? "the logging extension"
                   : !strcmp(m, "ModelStreamInfer")         ? "streaming inference"
                                                            : "this method";
  char msg[256];
  snprintf(msg, sizeof msg, "%s (%.100s) is not supported by Vario", what, *m ? m : method);
  finish(c, GRPC_STATUS_UNIMPLEMENTED, msg, NULL);
}

static void start_read(gcall *c) {
  grpc_op ops[2];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_RECV_MESSAGE;
  ops[1].data.recv_message.recv_message = &c->recv;
  c->stage = ST_READ;
  if (grpc_call_start_batch(c->call, ops, 2, c, NULL) != GRPC_CALL_OK) {
    call_free(c);
    return;
  }
  vr_grpc *g = c->g;
  c->read_since = vr_now_ns();
  c->in_reading = 1;
  c->rprev = g->reading_tail;
  if (g->reading_tail) g->reading_tail->rnext = c;
  else g->reading = c;
  g->reading_tail = c;
}

/* A call whose request message has not come within --body-timeout-ms of
 * its start is cancelled, as HTTP closes a connection whose body has not
 * come within it: gRPC waits for the message for ever, so a client that
 * sent half of one held its call, and its connection (never idle), for
 * good. The calls are oldest first: the scan stops at one still in time. */
static void cut_slow_reads(vr_grpc *g) {
  unsigned ms = g->s->o.body_timeout_ms ? g->s->o.body_timeout_ms : 30000;
  int64_t old = vr_now_ns() - (int64_t)ms * VR_NS_PER_MS;
  char msg[128];
  for (gcall *c = g->reading; c && c->read_since < old; c = c->rnext) {
    if (c->cut) continue;
    c->cut = 1;
    snprintf(msg, sizeof msg, "the request message did not arrive within %u ms", ms);
    grpc_call_cancel_with_status(c->call, GRPC_STATUS_DEADLINE_EXCEEDED, msg, NULL);
  }
}

static void on_event(vr_grpc *g, gcall *c, int ok) {
  /* No batch may start once the queue is shut down (gRPC aborts the
   * process). The server's shutdown tag does not wait for every call's
   * completions, so an accept or a read can still surface after it: that
   * call is dropped (unref cancels it; cancel_all_calls closed its
   * connection anyway). */
  if (g->cq_down) {
    call_free(c);
    return;
  }
  switch (c->stage) {
  case ST_NEW:
    if (!ok) { /* the server is shutting down */
      call_free(c);
      return;
    }
    request_next(g);
    start_read(c);
    return;
  case ST_READ:
    read_unlink(c);
    if (!ok) finish(c, GRPC_STATUS_CANCELLED, "", NULL);
    else dispatch(c);
    return;
  default:
    call_free(c);
  }
}

static void *loop(void *arg) {
  vr_grpc *g = arg;
  for (;;) {
    gpr_timespec t = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                  gpr_time_from_millis(100, GPR_TIMESPAN));
    grpc_event ev = grpc_completion_queue_next(g->cq, t, NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
    if (ev.type == GRPC_OP_COMPLETE) {
      if (ev.tag == &g->shutdown_tag) g->server_down = 1;
      else on_event(g, ev.tag, ev.success);
    }
    if (!g->cq_down) cut_slow_reads(g);
    /* The queue closes once the server is down and no runtime callback
     * may still start a batch on one of its calls. */
    if (g->server_down && !g->cq_down && !__atomic_load_n(&g->inflight, __ATOMIC_SEQ_CST)) {
      grpc_completion_queue_shutdown(g->cq);
      g->cq_down = 1;
    }
  }
  return NULL;
}

int vr_grpc_start(vr_server *s, const char *host, int port, vr_grpc **out,
                  vr_errbuf *err) {
  vr_grpc *g = VR_NEW(vr_grpc);
  if (!g) return vr_errf(err, VR_ENOMEM, "out of memory");
  g->s = s;
  grpc_init();
  grpc_arg args[5];
  for (int i = 0; i < 5; i++) args[i].type = GRPC_ARG_INTEGER;
  args[0].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
  size_t max = s->o.max_body ? s->o.max_body : (size_t)64 << 20; /* as HTTP */
  args[0].value.integer = max > (size_t)INT32_MAX ? INT32_MAX : (int)max;
  args[1].key = GRPC_ARG_ALLOW_REUSEPORT; /* a taken port is an error */
  args[1].value.integer = 0;
  /* the connection limits HTTP has: a connection with no call for 30 s
   * is closed (one that only said hello held its descriptor for good,
   * and both ports share the process's descriptors), and one connection
   * runs at most 256 calls at once */
  args[2].key = GRPC_ARG_MAX_CONNECTION_IDLE_MS;
  args[2].value.integer = 30000;
  args[3].key = GRPC_ARG_MAX_CONCURRENT_STREAMS;
  args[3].value.integer = 256;
  /* and one that never completes its handshake goes when HTTP's would for
   * its headers (--header-timeout-ms), not after gRPC's 120 s: a flood of
   * silent connections held descriptors both ports share 12x longer */
  args[4].key = GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS;
  args[4].value.integer = s->o.header_timeout_ms ? (int)s->o.header_timeout_ms : 10000;
  grpc_channel_args ca = {5, args};
  g->cq = grpc_completion_queue_create_for_next(NULL);
  g->srv = grpc_server_create(&ca, NULL);
  grpc_server_register_completion_queue(g->srv, g->cq, NULL);
  char addr[300];
  snprintf(addr, sizeof addr, "%s:%d", host ? host : "127.0.0.1", port);
  /* With --tls-cert/--tls-key gRPC speaks TLS too, with the same pair:
   * a plaintext port beside HTTPS carried the bearer token in clear. */
  grpc_ssl_pem_key_cert_pair kc = {s->o.tls_key_pem, s->o.tls_cert_pem};
  int tls = s->o.tls_key_pem && s->o.tls_cert_pem;
  grpc_server_credentials *cr = tls ? grpc_ssl_server_credentials_create(NULL, &kc, 1, 0, NULL)
                                    : grpc_insecure_server_credentials_create();
  g->port = cr ? grpc_server_add_http2_port(g->srv, addr, cr) : 0;
  if (cr) grpc_server_credentials_release(cr);
  grpc_server_start(g->srv);
  if (g->port <= 0) {
    g->server_down = 1; /* no thread: tear down here */
    vr_grpc_stop(g);
    return vr_errf(err, VR_EBUSY, "gRPC: cannot listen on %s (port taken?)", addr);
  }
  request_next(g);
  if (pthread_create(&g->thread, NULL, loop, g)) {
    g->server_down = 1;
    vr_grpc_stop(g);
    return vr_errf(err, VR_EINTERNAL, "gRPC: cannot start a thread");
  }
  *out = g;
  return 0;
}

int vr_grpc_port(const vr_grpc *g) { return g ? g->port : -1; }

void vr_grpc_stop(vr_grpc *g) {
  if (!g) return;
  __atomic_store_n(&g->stopping, 1, __ATOMIC_SEQ_CST);
  if (!g->server_down) {
    grpc_server_shutdown_and_notify(g->srv, g->cq, &g->shutdown_tag);
    grpc_server_cancel_all_calls(g->srv);
    pthread_join(g->thread, NULL);
  } else {
    grpc_server_shutdown_and_notify(g->srv, g->cq, &g->shutdown_tag);
    grpc_server_cancel_all_calls(g->srv);
    grpc_completion_queue_shutdown(g->cq);
    grpc_event ev;
    while ((ev = grpc_completion_queue_next(g->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL))
               .type != GRPC_QUEUE_SHUTDOWN)
      if (ev.type == GRPC_OP_COMPLETE && ev.tag != &g->shutdown_tag) call_free(ev.tag);
  }
  grpc_server_destroy(g->srv);
  grpc_completion_queue_destroy(g->cq);
  grpc_shutdown();
  vr_free(g);
}
