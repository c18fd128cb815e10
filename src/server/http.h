/*
 * HTTP/1.1 front end on libmicrohttpd (chosen by measurement: see
 * docs/ARCHITECTURE.md, "HTTP front end"). One epoll event thread accepts,
 * reads and writes; handlers run on it and must not block. Work that takes
 * long (inference, model loads) is deferred: the handler calls
 * vr_http_defer() (the connection is suspended, its socket parked), hands
 * the request to another thread, and that thread calls vr_http_wake(); the
 * event thread then calls the resume function, which responds.
 *
 * Ownership: vr_http owns every vr_http_req. A request lives from its
 * headers until MHD reports it finished (sent, or the client went away);
 * then its state is released with the state_free given to
 * vr_http_set_state. A deferred request is never freed before it is woken,
 * so other threads may hold it until they call vr_http_wake.
 */
#ifndef VR_SERVER_HTTP_H
#define VR_SERVER_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "vario/status.h"

typedef struct vr_http vr_http;
typedef struct vr_http_req vr_http_req;

typedef void (*vr_http_handler)(vr_http_req *req, void *user);

typedef struct vr_http_opts {
  const char *host;       /* default 127.0.0.1 */
  int port;               /* 0 = ephemeral (see vr_http_port) */
  size_t max_body;        /* bytes; default 64 MiB; larger -> 413 */
  unsigned max_conns;     /* open connections; default 1024 */
  unsigned idle_timeout_s;/* no byte at all for this long: closed; default 60 */
  vr_http_handler handler;
  void *user;
  /* Connection management (docs/SECURITY.md). A connection must complete
   * a request's headers within header_timeout_ms of opening or of its
   * previous response (default 10 s: slowloris, idle keep-alive), and
   * its body within body_timeout_ms of its headers (default 30 s). While
   * the pool is more than 3/4 full, connections with no request under
   * way for 1 s are closed. `reserve` connections past max_conns
   * (default 32) answer only /v2/health/... and /metrics, others get 503;
   * past that, new connections are closed at accept. max_per_client
   * (default 256) caps one IPv4 address's connections; loopback is
   * exempt (a local proxy is every client) unless cap_loopback. */
  unsigned header_timeout_ms, body_timeout_ms;
  unsigned reserve;
  unsigned max_per_client;
  int cap_loopback;
  /* TLS (GnuTLS through libmicrohttpd): PEM key and certificate chain
   * contents, both or neither. */
  const char *tls_key_pem, *tls_cert_pem;
} vr_http_opts;

int vr_http_start(const vr_http_opts *o, vr_http **out, vr_errbuf *err);
int vr_http_port(const vr_http *h);
/* Graceful shutdown, step 1: stop accepting; new requests on open
 * connections get 503 and "Connection: close", but for the probes
 * (/v2/health/...), which the handler answers (live; ready says not: it
 * reads vr_http_draining). */
void vr_http_drain(vr_http *h);
/* Whether r's server drains (of the request: a handler may run before
 * vr_http_start has handed out the vr_http). */
int vr_http_draining(const vr_http_req *r);
/* Answers the HTTP layer gave itself (413 body limit, 415/400 encoding,
 * 400 bad head, 503 past the connection reserve or draining, 500 no
 * answer), by status class (out[k]: kxx); the server's handlers count
 * their own answers. */
void vr_http_own_counts(vr_http *h, uint64_t out[6]);
/* Requests received and not yet finished. */
int vr_http_inflight(vr_http *h);
/* Stops the event thread, closes every connection. Every deferred request
 * must have been woken first. */
void vr_http_stop(vr_http *h);

/* Request accessors (event thread only). */
const char *vr_http_method(const vr_http_req *r);
const char *vr_http_url(const vr_http_req *r);
const char *vr_http_header(const vr_http_req *r, const char *name);
/* A query-string argument (decoded), or NULL. */
const char *vr_http_query(const vr_http_req *r, const char *name);
/* The first query-string argument whose name is not among known[0..n),
 * or NULL. */
const char *vr_http_query_unknown(const vr_http_req *r, const char *const *known, size_t n);
const char *vr_http_body(const vr_http_req *r, size_t *len);
/* The request target to send on (a proxy's): the decoded path and the
 * query arguments percent-encoded again, "/v2/x%20y?name=a%26b". 0, or -1
 * when it does not fit in cap bytes. */
int vr_http_target(const vr_http_req *r, char *out, size_t cap);
/* Appends s percent-encoded (all but RFC 3986's unreserved characters,
 * and '/' when keep_slash) to b[*n..cap), NUL-terminated; -1 when it does
 * not fit. A name put in a path as one segment: keep_slash 0. */
int vr_http_pct_encode(char *b, size_t cap, size_t *n, const char *s, int keep_slash);

/* Splits a URL's path ("/v2/models/m/infer?x=1" -> "v2" "models" "m"
 * "infer") into seg[0..n), pointing into buf (cap bytes, the URL copied
 * there); the query string is dropped. -> n, or -1 when there are more
 * than max segments or the path does not fit buf (never cut). */
int vr_http_path_segments(const char *url, char *buf, size_t cap, char **seg, int max);
void vr_http_set_state(vr_http_req *r, void *state, void (*state_free)(void *));
/* Monotonic time at which the request's headers were complete. */
int64_t vr_http_started_ns(const vr_http_req *r);
/* When the query arrived, for its deadline: vr_http_started_ns less the
 * time a Vario front end spent on it before forwarding it here, which it
 * sends as `Vario-Upstream-Us: N` (whole microseconds, 0..60 s; anything
 * else is ignored). A client can only shorten its own deadline with it. */
#define VR_HTTP_UPSTREAM_HEADER "Vario-Upstream-Us"
int64_t vr_http_arrived_ns(const vr_http_req *r);
/* A server's 200 answer to a query with a deadline carries `Vario-Due-Us:
 * N`: how long after the query's arrival (vr_http_arrived_ns: at a front
 * end, when one forwarded it) the answer stays due by the server's rule,
 * its deadline plus the batch's execution time (policy/drop.h
 * vr_drop_answer_due), in whole microseconds. A front end, which knows
 * when the query reached it, drops an answer that comes later (fwd.c):
 * the time a query waited in the server's socket, unread (a hung or
 * stopped server), is not on the server's clock. */
#define VR_HTTP_DUE_HEADER "Vario-Due-Us"
void *vr_http_state(const vr_http_req *r);

/* Responds (event thread). Takes ownership of body (vr_malloc'd, may be
 * NULL with len 0). header_len != (size_t)-1 adds
 * Inference-Header-Content-Length. */
void vr_http_respond(vr_http_req *r, int status, const char *content_type,
                     char *body, size_t len, size_t header_len);
/* Adds a header to the response just given (no-op without one). */
void vr_http_add_header(vr_http_req *r, const char *name, const char *value);
/* {"error": msg} with the given status. */
void vr_http_error(vr_http_req *r, int status, const char *msg);

/* Suspends the request (event thread, inside the handler); resume_fn runs
 * on the event thread after vr_http_wake and must respond. */
void vr_http_defer(vr_http_req *r, vr_http_handler resume_fn);
/* Any thread: resume a deferred request. */
void vr_http_wake(vr_http_req *r);

#endif
