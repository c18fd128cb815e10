/*
 * Minimal HTTP/1.1 client over loopback TCP, for `vario bench` setup and
 * the server tests: one blocking keep-alive connection, Content-Length
 * bodies only (what vario serve sends). Also the response-head parser the
 * load generator's non-blocking connections share.
 *
 * Ownership: a vr_httpc owns its socket and buffers; a response's body
 * points into the client's buffer and is valid until the next request.
 */
#ifndef VR_SERVER_HTTPC_H
#define VR_SERVER_HTTPC_H

#include <stddef.h>
#include <stdint.h>

#include "vario/status.h"

typedef struct vr_http_head {
  int status;
  size_t head_len;     /* bytes up to and including the blank line */
  size_t content_len;  /* (size_t)-1 when absent */
  size_t ihcl;         /* Inference-Header-Content-Length or (size_t)-1 */
  int close;           /* "Connection: close" */
} vr_http_head;

/* The largest response body the clients (this one, the front end's
 * forwarder, the load generator) buffer: a peer that announces more is
 * refused, not buffered until memory runs out. A model file fetched from
 * the controller is the largest expected. */
#define VR_HTTP_MAX_RESP_BODY ((size_t)4 << 30)

/* Parses a response head in buf[0..len). 1 = complete (h filled),
 * 0 = need more bytes, VR_EFORMAT = not HTTP (or a Content-Length past
 * VR_HTTP_MAX_RESP_BODY). */
int vr_http_parse_head(const char *buf, size_t len, vr_http_head *h);
/* The value of header `name` (case-insensitive) in a parsed head
 * buf[0..head_len), trimmed, *vlen bytes (not NUL-terminated); or NULL. */
const char *vr__http_head_value(const char *buf, size_t head_len, const char *name,
                                size_t *vlen);
/* The value of header `name` there as a whole decimal number (at most 19
 * digits, nothing else); (size_t)-1 when absent or not one. */
size_t vr__http_head_num(const char *buf, size_t head_len, const char *name);

typedef struct vr_httpc {
  int fd;
  char host[64];
  int port;
  char *buf;
  size_t cap, len;
  int timeout_ms;
} vr_httpc;

int vr_httpc_open(vr_httpc *c, const char *host, int port, vr_errbuf *err);
void vr_httpc_close(vr_httpc *c);

typedef struct vr_httpc_resp {
  vr_http_head head;
  const char *body; /* into the client's buffer */
  size_t body_len;
} vr_httpc_resp;

/* Sends one request (extra_headers: "Name: value\r\n" lines or NULL) and
 * reads the response. Reconnects once if the server closed the idle
 * connection. */
int vr_httpc_request(vr_httpc *c, const char *method, const char *path,
                     const char *extra_headers, const void *body, size_t len,
                     vr_httpc_resp *out, vr_errbuf *err);

#endif
