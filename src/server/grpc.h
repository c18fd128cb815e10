/*
 * KServe v2 gRPC front end (inference.GRPCInferenceService), on gRPC's C
 * core API with protobuf-c messages generated at build time from
 * proto/grpc_service.proto. One thread drives the completion queue;
 * ModelInfer goes through the same request path as HTTP (vr__srv_submit)
 * and is answered from the runtime's done callback. Ownership: a vr_grpc
 * belongs to its vr_server (server.c starts and stops it).
 */
#ifndef VR_SERVER_GRPC_H
#define VR_SERVER_GRPC_H

#include "server/server.h"
#include "vario/status.h"

typedef struct vr_grpc vr_grpc;

/* Binds host:port (0 = any free port) and starts serving. */
int vr_grpc_start(vr_server *s, const char *host, int port, vr_grpc **out,
                  vr_errbuf *err);
int vr_grpc_port(const vr_grpc *g);
/* Stops accepting, cancels what is still open, joins the thread, frees.
 * Call after the runtime has answered every request (its answers are
 * sent first). NULL is a no-op. */
void vr_grpc_stop(vr_grpc *g);

#endif
