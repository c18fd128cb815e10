/*
 * Forwarder: the front end's data path to remote workers (`vario
 * frontend`). KServe v2 requests go to a worker over HTTP/1.1 keep-alive
 * connections, unchanged (JSON or the binary tensor extension: the body
 * is forwarded as bytes, never re-parsed), and the worker's response comes
 * back as bytes.
 *
 * Routing table: keys ("m:<model>", "a:<app>", or "*" for any request)
 * map to the workers that serve them; workers are named by id with a
 * host:port, and key "w:<id>" is that worker alone. A request goes to the lightest worker of its key
 * (vr_route_lighter over outstanding requests, ties round-robin), skipping
 * workers marked down. The table is replaced whole (vr_fwd_set_table);
 * requests under way keep the worker they were sent to.
 *
 * Faults: a connection that fails (refused, reset, closed before a whole
 * response: a worker killed with SIGKILL) marks its worker down for
 * `down_ms` and the request is sent to another worker of its key (up to
 * `max_tries` workers), since inference has no side effects; when none is
 * left it is answered 502/503 with a message naming the worker and the
 * reason. Other writes (a registration, a removal: anything but GET,
 * HEAD and .../infer) go on a fresh connection and are sent again only
 * when no byte of them reached a worker; otherwise they are answered 502. A worker that does not answer within `timeout_ms` gets the
 * request answered 504. No request waits forever.
 *
 * Threads: vr_fwd_send from any thread (it writes on the caller's thread
 * when the socket takes the request at once, and with sync_us may read
 * the answer there too); one I/O thread reads every other response and
 * calls done(); done() must not block.
 *
 * Ownership: vr_fwd owns its connections and the table copy. A call's
 * body and headers are borrowed until done() runs; the response body
 * given to done() is vr_malloc'd and owned by the call from then on.
 */
#ifndef VR_SERVER_FWD_H
#define VR_SERVER_FWD_H

#include <stddef.h>
#include <stdint.h>

#include "vario/status.h"

#define VR_FWD_ID_MAX 64
#define VR_FWD_KEY_MAX 160

typedef struct vr_fwd vr_fwd;

typedef struct vr_fwd_opts {
  int timeout_ms;   /* per try; default 30000 */
  int max_tries;    /* workers tried per request; default 3 */
  int down_ms;      /* a failed worker is skipped this long; default 1000 */
  int max_idle;     /* idle connections kept per worker; default 64 */
  int max_conns;    /* connections per worker, busy or idle; default 256:
                       a worker closes those past its per-client cap
                       (vario serve --max-conns-per-client, 256) at
                       accept, so requests past it wait for one to come
                       free (in the timeout) */
} vr_fwd_opts;

void vr_fwd_opts_init(vr_fwd_opts *o);
int vr_fwd_create(const vr_fwd_opts *o, vr_fwd **out, vr_errbuf *err);
/* Fails every call under way (503) and frees everything. */
void vr_fwd_free(vr_fwd *f);

/* ---- routing table ------------------------------------------------------ */

typedef struct vr_fwd_worker {
  char id[VR_FWD_ID_MAX];
  char host[64]; /* IPv4 address */
  int port;
} vr_fwd_worker;

typedef struct vr_fwd_route {
  char key[VR_FWD_KEY_MAX]; /* "m:<model>", "a:<app>" or "*" */
  int n;                    /* workers, by index into the table's workers */
  int *workers;
} vr_fwd_route;

typedef struct vr_fwd_table {
  int64_t version;
  int n_workers, n_routes;
  vr_fwd_worker *workers;
  vr_fwd_route *routes;
} vr_fwd_table;

/* Replaces the table (copied). Connections to workers that stay (same id,
 * host and port) are kept. 0, VR_EINVAL (a route names no worker, or two
 * workers share an id) or VR_ENOMEM. */
int vr_fwd_set_table(vr_fwd *f, const vr_fwd_table *t, vr_errbuf *err);
int64_t vr_fwd_table_version(vr_fwd *f);
/* Workers the table in use names; whether it names worker id. */
int vr_fwd_table_workers(vr_fwd *f);
int vr_fwd_has_worker(vr_fwd *f, const char *id);
/* Whether the table has a route that may take key (its own, "<kind>:*" or
 * "*"), with or without a worker in it: a controller's table names every
 * model of its repository, so no route at all means a name the cluster
 * does not know, an empty one a model with no worker up. */
int vr_fwd_table_routes(vr_fwd *f, const char *key);
/* The table in use as JSON (vr_malloc'd; with "version"), or NULL. */
char *vr_fwd_table_current_json(vr_fwd *f);
/* Parses "ID=HOST:PORT" into w. 0 or VR_EINVAL. */
int vr_fwd_parse_worker(const char *s, vr_fwd_worker *w, vr_errbuf *err);

/* Routing tables as the controller publishes them (docs/API.md, "Cluster"):
 *   {"workers":[{"id":"w1","addr":"127.0.0.1:9001"},...],
 *    "routes":{"m:fmnist_mlp":["w1","w2"],"a:fashion":["w2"],"*":[...]}}
 * Parse: every route names listed workers, ids are unique, addresses are
 * IPv4:port; anything else is VR_EFORMAT with a message. The parsed
 * table owns its arrays (vr_fwd_table_free). */
int vr_fwd_table_parse(const char *json, size_t len, int64_t version,
                       vr_fwd_table *out, vr_errbuf *err);
void vr_fwd_table_free(vr_fwd_table *t);
/* The JSON text of t (vr_malloc'd), or NULL when out of memory. */
char *vr_fwd_table_json(const vr_fwd_table *t);

/* ---- calls -------------------------------------------------------------- */

typedef struct vr_fwd_call vr_fwd_call;
typedef void (*vr_fwd_done)(vr_fwd_call *c, void *user);

struct vr_fwd_call {
  /* in (borrowed until done) */
  const char *method, *path; /* path with query string */
  const char *headers;       /* extra "Name: value\r\n" lines, or NULL */
  const void *body;
  size_t body_len;
  /* > 0: when the request reached the front end (monotonic ns); each try
   * tells the worker how long ago that was (http.h, Vario-Upstream-Us) */
  int64_t origin_ns;
  vr_fwd_done done;
  void *user;
  /* > 0: the caller has nothing else to do, so vr_fwd_send waits up to
   * this long on the worker's socket itself and, when the answer comes in
   * time, calls done() on the caller's thread before returning */
  int sync_us;
  /* out: status is the worker's HTTP status, or the front end's own
   * (502/503/504) with msg when no worker answered */
  int status;
  char msg[512];
  char *resp;          /* body (vr_malloc'd; the call owns it) */
  size_t resp_len;
  size_t resp_ihcl;    /* Inference-Header-Content-Length or (size_t)-1 */
  /* the worker's headers its client needs as they are: Content-Type, Allow (a 405's),
   * WWW-Authenticate (a 401's challenge), Retry-After (429/503), as
   * "Name: value\r\n" lines (vr_malloc'd; the call owns it), or NULL */
  char *resp_headers;
  char worker[VR_FWD_ID_MAX]; /* who answered */
  int tries;
  /* private */
  int64_t deadline_ns;
  int64_t wq_until;       /* waiting for a connection (max_conns) until */
  int once;               /* not replayable: at most one worker may get it */
  int refused;            /* the last try was a worker's refusal (503) */
  vr_fwd_call *wq_next;
  /* the workers tried, by identity (fwd.c's own record of a worker, kept
   * until vr_fwd_free): a table index names another worker once a new
   * table is in force */
  const void *tried[4];
  char key[VR_FWD_KEY_MAX];
};

/* Sends c to a worker of `key`. done(c) runs exactly once, on the I/O
 * thread or (when no worker can take it at all) on the caller's thread
 * before vr_fwd_send returns. */
void vr_fwd_send(vr_fwd *f, const char *key, vr_fwd_call *c);
/* Frees a call's response body. */
void vr_fwd_call_clear(vr_fwd_call *c);

/* Counters (atomic reads). dropped: answers later than their worker's
 * Vario-Due-Us (http.h), given to done() as 504 "dropped: ..." instead. */
typedef struct vr_fwd_stats {
  uint64_t sent, ok, retried, failed, timeouts, dropped;
} vr_fwd_stats;
void vr_fwd_get_stats(vr_fwd *f, vr_fwd_stats *s);

#endif
