/*
 * `vario frontend`: a KServe v2 HTTP front end with no runtime of its
 * own. Inference (`/v2/models/{m}/infer`, `/v2/apps/{app}/infer`) and
 * model/app metadata are forwarded, as bytes, to the workers the routing
 * table names for that model or app (fwd.h: keep-alive connection pools,
 * retry on another worker, explicit errors, no hangs). Its own endpoints:
 * /v2, /v2/health/live, /v2/health/ready (ready while the table names a
 * worker), /metrics, GET /v2/cluster/routes (the table it routes by).
 *
 * Ownership: a vr_frontend owns its HTTP server and its forwarder. The
 * routing table is set by the caller (static from the command line, or
 * from the cluster registry) through vr_frontend_fwd().
 */
#ifndef VR_SERVER_FRONTEND_H
#define VR_SERVER_FRONTEND_H

#include "server/fwd.h"
#include "vario/status.h"

typedef struct vr_frontend vr_frontend;

typedef struct vr_frontend_opts {
  const char *host;   /* default 127.0.0.1 */
  int port;           /* 0 = ephemeral */
  size_t max_body;    /* default 64 MiB */
  unsigned max_conns; /* default 1024 */
  int spin_us;        /* idle fast path: alone, wait up to this long for
                         the worker's answer on the event thread (asleep
                         on its socket); default 500, negative = never */
  vr_fwd_opts fwd;
} vr_frontend_opts;

void vr_frontend_opts_init(vr_frontend_opts *o);
int vr_frontend_create(const vr_frontend_opts *o, vr_frontend **out,
                       vr_errbuf *err);
int vr_frontend_port(const vr_frontend *f);
vr_fwd *vr_frontend_fwd(vr_frontend *f);
/* Stops accepting, waits (<= 5 s) for forwarded requests to be answered. */
void vr_frontend_shutdown(vr_frontend *f);
void vr_frontend_free(vr_frontend *f);

#endif
