/*
 * Internal to the gRPC front end: the server and call records shared by
 * grpc.c (the call lifecycle, replies, dispatch, the completion-queue
 * loop), grpc_req.c (a ModelInferRequest checked into a vr_ks_request)
 * and grpc_triton.c (Triton's extension methods). Not public.
 */
#ifndef VR_SERVER_GRPC_INT_H
#define VR_SERVER_GRPC_INT_H

#include <grpc/grpc.h>
#include <pthread.h>

#include "grpc_service.pb-c.h"
#include "server/kserve.h"
#include "server/grpc.h"
#include "server/server_int.h"

struct vr_grpc {
  vr_server *s;
  grpc_server *srv;
  grpc_completion_queue *cq;
  pthread_t thread;
  int port;
  int stopping;        /* shutdown requested (atomic) */
  int server_down;     /* shutdown tag seen */
  int cq_down;         /* queue shut down: no batch may start (loop thread) */
  int inflight;        /* calls another thread will answer: infers waiting for
                        * the runtime, loads/unloads (atomic) */
  struct gcall *reading, *reading_tail; /* calls waiting for their request
                        * message, oldest first (loop thread) */
  char shutdown_tag;
};

enum { ST_NEW, ST_READ, ST_DONE };

typedef struct gcall {
  vr_grpc *g;
  int stage;
  struct gcall *rprev, *rnext; /* in g->reading while its message is due */
  int in_reading, cut;
  int64_t read_since;          /* its read started (monotonic ns) */
  grpc_call *call;
  grpc_call_details details;
  grpc_metadata_array md;
  grpc_byte_buffer *recv, *send;
  grpc_slice status_msg;
  int has_status_msg, cancelled;
  /* ModelInfer */
  Inference__ModelInferRequest *req;
  vr_ks_request ks;
  vr_rt_request rt;
  int has_rt;
  char model[VR_NAME_MAX];
} gcall;

/* Replies. Each answers the call once; after it the call belongs to the
 * completion queue (freed there), so a handler returns at once. */
void vr__grpc_fail(gcall *c, int rc, const char *msg);
void vr__grpc_reply(gcall *c, const ProtobufCMessage *m);
/* The received message unpacked with desc (caller frees it with
 * protobuf_c_message_free_unpacked); NULL, and the call failed, when it
 * is not one. */
ProtobufCMessage *vr__grpc_unpack(gcall *c, const ProtobufCMessageDescriptor *desc);
/* The loaded model's config into *cfg; -1, and the call answered
 * NOT_FOUND, when the model (at that version) is not loaded. */
int vr__grpc_config_of(gcall *c, const char *name, const char *version,
                       vr_model_config *cfg);

/* The request's inputs, outputs and parameters into *ks (grpc_req.c);
 * raw_input_contents are referenced, not copied, so q must outlive ks.
 * VR_E* with err set when the request is malformed or asks for what
 * Vario does not support; ks then holds what was parsed so far (free it
 * with vr_ks_request_free either way). */
int vr__grpc_to_ks(Inference__ModelInferRequest *q, vr_ks_request *ks, vr_errbuf *err);

/* Triton extensions (grpc_triton.c). */
void vr__grpc_model_config(gcall *c);
void vr__grpc_model_statistics(gcall *c);
void vr__grpc_repository_index(gcall *c);
void vr__grpc_repository_load(gcall *c, int load); /* load = 0: unload */

#endif
