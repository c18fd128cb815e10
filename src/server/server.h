/*
 * `vario serve`: the KServe v2 HTTP server over the runtime.
 *
 * A vr_server owns its HTTP front end (http.h) and its runtime. Endpoints
 * and error codes are documented in docs/API.md. Lifecycle: create (binds
 * and, with load_all, loads every model of the repository), then
 * vr_server_shutdown (graceful: stop accepting, drain the runtime so every
 * accepted request is answered, wait for responses to be sent), then
 * vr_server_free.
 */
#ifndef VR_SERVER_SERVER_H
#define VR_SERVER_SERVER_H

#include <stddef.h>

#include "control/control.h"
#include "runtime/runtime.h"
#include "server/sbuf.h"
#include "vario/status.h"

typedef struct vr_server vr_server;

typedef struct vr_server_opts {
  const char *repo;    /* model repository directory; may be NULL */
  const char *host;    /* default 127.0.0.1 */
  int port;            /* 0 = ephemeral */
  size_t max_body;     /* default 64 MiB */
  unsigned max_conns;  /* default 1024 */
  int load_all;        /* load every model of the repository at start */
  int control_later;   /* a control plane is attached after create
                          (vr_server_set_control, _jobs, _pipes): until
                          vr_server_attached, not ready and only the health
                          endpoints answer (503 "starting") */
  int spin_us;         /* idle fast path: the event thread waits up to this
                          long for an answer before parking (default 50;
                          negative = never) */
  int grpc_port;       /* KServe v2 gRPC port; -1 = none (the default
                          here; `vario serve` defaults to 8001), 0 = any */
  vr_runtime_opts rt;  /* runtime options (backend for tests) */
  /* Access (docs/SECURITY.md). Requests that change state (every method
   * but GET/HEAD except inference, and the job endpoints) need
   * "Authorization: Bearer <admin_token>"; with no token they are refused
   * (403) unless insecure_admin. infer_auth: inference needs it too. */
  const char *admin_token; /* borrowed; NULL = none configured */
  int insecure_admin;
  int infer_auth;
  /* Server-side paths a client may name (registration, job inputs): only
   * files under this directory after realpath; NULL = none (uploads only). */
  const char *data_root;
  /* Connections (http.h vr_http_opts; 0 = its defaults). */
  unsigned header_timeout_ms, body_timeout_ms, conn_reserve, max_conns_per_client;
  int cap_loopback;
  const char *tls_key_pem, *tls_cert_pem; /* PEM contents (borrowed) */
  int max_admin_jobs;  /* concurrent load/registration threads (default 4);
                          past it: 429 */
  /* Called by vr_server_load (on a load thread) when <repo>/<name> does
   * not exist: bring it there (a cluster worker fetches it from the
   * controller, model_fetch.h). 0 = it is there now. NULL = no fetching. */
  int (*fetch)(void *user, const char *repo, const char *name, vr_errbuf *err);
  void *fetch_user;
} vr_server_opts;

void vr_server_opts_init(vr_server_opts *o);
int vr_server_create(const vr_server_opts *o, vr_server **out,
                     vr_errbuf *err);
int vr_server_port(const vr_server *s);
/* The gRPC port, or -1 when gRPC is off. */
int vr_server_grpc_port(const vr_server *s);
/* The server's runtime (borrowed): a control plane adds/removes instances
 * and reads monitoring through it. */
vr_runtime *vr_server_runtime(vr_server *s);
/* The --repo directory (borrowed; NULL when none). */
const char *vr_server_repo(const vr_server *s);
/* Loads <repo>/<name> (config.json + model.onnx). */
int vr_server_load(vr_server *s, const char *name, vr_errbuf *err);
/* The same, its instances AsyFunc bodies splittable over nodes
 * [pair_begin, pair_end) (pair_end 0: plain instances). */
int vr_server_load_pair(vr_server *s, const char *name, int pair_begin, int pair_end,
                        vr_errbuf *err);
void vr_server_shutdown(vr_server *s);
void vr_server_free(vr_server *s);

/* Attaches the model-less control plane (borrowed; both must outlive the
 * server's HTTP thread): mounts /v2/apps (server_apps.c, written with the
 * control plane; docs/API.md "Model-less API"). */
void vr_server_set_control(vr_server *s, vr_control *ctl, vr_store *store);
/* With control_later: everything is attached, start-up is finished (the
 * server may report ready and serves every endpoint). */
void vr_server_attached(vr_server *s);
/* Whether a model-less control plane is attached. */
int vr_server_has_control(const vr_server *s);
/* Attaches offline jobs (borrowed): mounts /v2/apps/{app}/jobs, /v2/jobs. */
struct vr_jobs;
void vr_server_set_jobs(vr_server *s, struct vr_jobs *jobs);
/* Attaches live pipelines (borrowed): mounts /v2/pipelines. */
struct vr_pipes;
void vr_server_set_pipes(vr_server *s, struct vr_pipes *pipes);
/* The attached pipelines (NULL: none). */
struct vr_pipes *vr_server_get_pipes(vr_server *s);

/* Appends Prometheus text exposition of every metric. */
void vr_server_metrics(vr_server *s, vr_sbuf *b);

#endif
