/* Server internals shared by server.c (routing, lifecycle), server_infer.c,
 * server_repo.c and metrics.c. Not for use outside src/server/. */
#ifndef VR_SERVER_INT_H
#define VR_SERVER_INT_H

#include <pthread.h>
#include <stdint.h>

#include "base/hist.h"
#include "base/map.h"
#include "server/http.h"
#include "server/server.h"

#define VR_LATE_BUCKETS 7
/* Bucket bounds of lateness / batch time; the last is +Inf. */
extern const double vr_late_le[VR_LATE_BUCKETS];

struct vr_server {
  vr_server_opts o;
  char *repo; /* owned copy, or NULL */
  vr_http *http;
  vr_runtime *rt;
  int admin_jobs;   /* running load/unload threads (atomic) */
  int pipe_lookups; /* store lookups of unserved pipelines running (atomic) */
  int shutting_down;
  uint64_t http_status[6]; /* responses by class: [2]=2xx ... (atomic) */
  uint64_t invalid;        /* infer requests rejected before routing */
  /* Server-side overhead of served inferences (headers complete ->
   * response queued, minus batch compute), ns. Event thread only: written
   * by infer responses, read by /metrics, both on that thread. */
  vr_hist *overhead;
  vr_control *ctl;         /* model-less control plane, or NULL (borrowed) */
  vr_store *store;         /* its metadata store (borrowed) */
  struct vr_jobs *jobs;    /* offline jobs, or NULL (borrowed) */
  struct vr_pipes *pipes;  /* live pipelines, or NULL (borrowed) */
  char *data_root;         /* realpath of --data-root (owned), or NULL */
  /* Readiness (server_triton.c): the models the repository says to load
   * (every model directory at start, plus explicit loads, minus explicit
   * unloads); ready when all of them are loaded and start-up finished. */
  pthread_mutex_t expect_mu;
  vr_map expected;         /* name -> (void *)1 */
  vr_map load_errors;      /* name -> why its last load failed (owned) */
  int started;             /* start-up finished: loading, and with
                              control_later the attaching (atomic) */
  struct vr_grpc *grpc;    /* KServe v2 gRPC front end, or NULL */
  int64_t t0_ns;           /* created (monotonic) */
  /* Lateness of model-less responses (server_apps.c, /metrics
   * vario_app_lateness_*): how long after the query's deadline each 200 was
   * handed to the HTTP layer, in units of the execution time of the batch
   * that served it. All atomic. */
  struct {
    uint64_t bucket[VR_LATE_BUCKETS]; /* non-cumulative, le vr_late_le[] */
    uint64_t sum_milli;     /* the histogram's _sum, in 1/1000 batch units */
    /* answers later than deadline + batch (vr_drop_answer_due), answered
     * 504 instead: */
    uint64_t beyond_start;  /* the batch started after the deadline (its
                               executor was late to start what it decided) */
    uint64_t beyond_answer; /* the batch started in time: the answer was
                               slow after the batch */
    int64_t max_late_ns;    /* largest lateness beyond the deadline */
    int64_t max_excess_ns;  /* largest lateness beyond deadline + batch */
  } app_late;
};

/* Records one model-less answer dropped by vr_drop_answer_due. */
void vr_server_app_dropped_late(vr_server *s, int64_t deadline_ns, int64_t start_ns);
/* Records one model-less response (server_apps.c). */
void vr_server_app_lateness(vr_server *s, int64_t deadline_ns, int64_t batch_ns,
                            int64_t answered_ns);

/* HTTP status for a runtime / parser status code. */
int vr_server_http_status(int code);
/* Responds with sb's contents as JSON (takes the buffer). */
void vr_server_reply_json(vr_http_req *r, int status, vr_sbuf *b);
/* Adds Vario-Due-Us (http.h) to the 200 just given to r: deadline_ns
 * (VR_NO_DEADLINE: none, nothing added) plus batch_ns, from r's arrival. */
void vr__srv_add_due(vr_http_req *r, int64_t deadline_ns, int64_t batch_ns);
void vr_server_count(vr_server *s, int status);
/* Runs fn(arg) on a detached thread as an admin job of r: counts it in
 * s->admin_jobs (shutdown waits for them) and defers r until the thread
 * wakes it, when `done` responds. Returns 0; 1 when max_admin_jobs are
 * already running (r was answered 429, fn does not run, arg stays the
 * caller's via r's state); or -1 when no thread could start: the count is
 * restored and r is woken, so `done` still runs (on the event thread,
 * after the caller returns) and answers the failure the caller records
 * in arg. */
int vr_server_spawn_admin(vr_server *s, vr_http_req *r, vr_http_handler done,
                          void *(*fn)(void *), void *arg);

/* access.c: is this request an admin one (method, URL segments)? */
int vr__access_is_admin(const char *method, char **seg, int n);
/* An "Authorization" value carrying the admin token (also for the gRPC
 * front end's metadata). */
int vr__access_bearer_ok(const vr_server *s, const char *authorization);
/* 0 = allowed; else r was answered 401/403 and that status is returned. */
int vr__access_check(vr_server *s, vr_http_req *r, int admin);
/* A client-named server path: realpath of p into out when it is a
 * readable regular file under --data-root; otherwise VR_EINVAL with one
 * message for "not allowed / not found / not readable" (no file oracle). */
int vr__data_path(const vr_server *s, const char *p, char *out, size_t cap,
                  vr_errbuf *err);
/* Constant-time equality of two byte strings. */
int vr__ct_equal(const char *a, size_t alen, const char *b, size_t blen);

/* Endpoint handlers; `model` is the name from the URL. */
void vr_server_infer(vr_server *s, vr_http_req *r, const char *model);
void vr_server_repo_index(vr_server *s, vr_http_req *r);
void vr_server_repo_load(vr_server *s, vr_http_req *r, const char *model,
                         int load);
/* server_shadow.c: POST .../shadow (pair = 1) and .../unshadow. */
void vr_server_repo_shadow(vr_server *s, vr_http_req *r, const char *model, int pair);
/* A model name a URL may carry: [A-Za-z0-9_.-], not starting with '.'. */
int vr__srv_valid_name(const char *m);
/* The "pair_range" load parameter "B:E" -> [*pb, *pe); VR_EINVAL. */
int vr__srv_pair_range(const char *s, int *pb, int *pe, vr_errbuf *err);
/* A shadow request's body (fuzzed: tests/fuzz/fuzz_shadowreq.c). */
typedef struct vr__srv_shadow_req {
  int cores, process, nsplit;
  int split[VR_RT_MAX_BATCH + 1];
} vr__srv_shadow_req;
int vr__srv_shadow_parse(const char *body, size_t len, vr__srv_shadow_req *q, vr_errbuf *err);
void vr_server_model_stats(vr_server *s, vr_http_req *r, const char *model);
/* /v2/apps[...]: the model-less API (server_apps.c). */
void vr_server_apps(vr_server *s, vr_http_req *r, const char *method, char **seg, int n);
/* /v2/pipelines[...] (server_pipes.c). */
void vr_server_pipes(vr_server *s, vr_http_req *r, const char *method, char **seg, int n);
/* server_admin.c: registration upload, offline jobs. */
void vr__server_app_register(vr_server *s, vr_http_req *r, const char *app);
void vr__server_app_unregister(vr_server *s, vr_http_req *r, const char *app,
                               const char *model);
void vr__server_job_submit(vr_server *s, vr_http_req *r, const char *app);
void vr__server_job_get(vr_server *s, vr_http_req *r, const char *id);
void vr__server_job_output(vr_server *s, vr_http_req *r, const char *id);
void vr_server_model_instances(vr_server *s, vr_http_req *r,
                               const char *model);
/* Triton's view (server_triton.c): readiness, versions, /config, and the
 * protocol extensions both front ends announce (NULL-terminated). */
#define VR_SRV_VERSION "0.1.0"
extern const char *const vr__srv_extensions[];
void vr__srv_expect(vr_server *s, const char *name, int on);
/* A repository unload (HTTP and gRPC): the model leaves what readiness
 * waits for; one that is not loaded is unloaded already (0, as Triton). */
int vr__srv_unload(vr_server *s, const char *name, vr_errbuf *err);
/* 405 for a path of other methods, with allow (what it takes, "GET, HEAD"
 * for GET) in the Allow header HTTP requires of a 405 (RFC 9110 15.5.6). */
void vr__srv_reply_405(vr_server *s, vr_http_req *r, const char *allow);
/* Why model name's last load failed (msg NULL: it loaded); an unload
 * (vr__srv_expect off) forgets it. The repository index shows it: only a
 * config's own errors are found again by reading the directory, not what
 * the engine refused (a config the graph does not match). */
void vr__srv_load_error(vr_server *s, const char *name, const char *msg);
/* Copies that reason into buf; 0 when there is none. */
int vr__srv_load_error_get(vr_server *s, const char *name, char *buf, size_t cap);
int vr__srv_ready(vr_server *s);
int vr__srv_version(vr_server *s, const char *model);
/* A repository load/unload parameter (Triton's model-control API): 0 for
 * what Vario honours (unload_dependents, a boolean), else an error naming
 * it (config, file:*, unknown ones). */
int vr__srv_repo_param(int load, const char *key, int is_bool, vr_errbuf *err);
void vr__srv_config_json(const vr_model_config *c, vr_sbuf *b);
void vr_server_model_config(vr_server *s, vr_http_req *r, const char *model);
/* The live dashboard (server_dash.c). */
void vr_server_dashboard_file(vr_server *s, vr_http_req *r, const char *name);
void vr_server_dashboard_data(vr_server *s, vr_http_req *r);
/* Each model directory of the repository with its served version, whether
 * it is loaded, and why not (server_repo.c; HTTP and gRPC index). */
typedef void (*vr__srv_repo_fn)(void *u, const char *name, int version,
                                int ready, const char *reason);
void vr__srv_repo_list(vr_server *s, vr__srv_repo_fn fn, void *u);
/* The inference request path HTTP and gRPC share (server_infer.c): named
 * outputs checked against the model, q filled from ks (q points into ks,
 * which must outlive it) and submitted; done(q, user) answers. Nothing is
 * submitted when it returns an error. */
struct vr_ks_request;
int vr__srv_submit(vr_server *s, const char *model, struct vr_ks_request *ks,
                   vr_rt_request *q, int64_t arrived_ns,
                   void (*done)(vr_rt_request *, void *), void *user, vr_errbuf *err);

#endif
