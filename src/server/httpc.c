#include "server/httpc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/alloc.h"

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static const char *find_blank(const char *buf, size_t len) {
  for (size_t i = 3; i < len; i++)
    if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' &&
        buf[i - 3] == '\r')
      return buf + i + 1;
  return NULL;
}

/* Value of header `name` in the head, or NULL. */
static const char *header(const char *buf, const char *end, const char *name,
                          size_t *vlen) {
  size_t n = strlen(name);
  for (const char *p = buf; p < end;) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) break;
    if ((size_t)(eol - p) > n + 1 && !strncasecmp(p, name, n) && p[n] == ':') {
      const char *v = p + n + 1;
      while (v < eol && (*v == ' ' || *v == '\t')) v++;
      const char *ve = eol;
      while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ')) ve--;
      *vlen = (size_t)(ve - v);
      return v;
    }
    p = eol + 1;
  }
  return NULL;
}

const char *vr__http_head_value(const char *buf, size_t head_len, const char *name,
                                size_t *vlen) {
  return header(buf, buf + head_len, name, vlen);
}

static size_t num_header(const char *buf, const char *end, const char *name) {
  size_t vlen;
  const char *v = header(buf, end, name, &vlen);
  if (!v || vlen == 0 || vlen > 19) return (size_t)-1;
  size_t x = 0;
  for (size_t i = 0; i < vlen; i++) {
    if (v[i] < '0' || v[i] > '9') return (size_t)-1;
    x = x * 10 + (size_t)(v[i] - '0');
  }
  return x;
}

size_t vr__http_head_num(const char *buf, size_t head_len, const char *name) {
  return num_header(buf, buf + head_len, name);
}

int vr_http_parse_head(const char *buf, size_t len, vr_http_head *h) {
  if (len >= 5 && memcmp(buf, "HTTP/", 5)) return VR_EFORMAT;
  const char *end = find_blank(buf, len);
  if (!end) return len > 65536 ? VR_EFORMAT : 0;
  /* the status: three digits after the first space of the status line
   * (atoi here once read past the buffer: it skips the CR LF that ends
   * the head as white space) */
  const char *eol = memchr(buf, '\n', (size_t)(end - buf));
  const char *sp = memchr(buf, ' ', (size_t)(eol - buf));
  if (!sp || eol - sp < 5 || !is_digit(sp[1]) || !is_digit(sp[2]) || !is_digit(sp[3]) ||
      (sp[4] != ' ' && sp[4] != '\r'))
    return VR_EFORMAT;
  h->status = (sp[1] - '0') * 100 + (sp[2] - '0') * 10 + (sp[3] - '0');
  h->head_len = (size_t)(end - buf);
  h->content_len = num_header(buf, end, "Content-Length");
  if (h->content_len != (size_t)-1 && h->content_len > VR_HTTP_MAX_RESP_BODY) return VR_EFORMAT;
  h->ihcl = num_header(buf, end, "Inference-Header-Content-Length");
  size_t vlen;
  const char *c = header(buf, end, "Connection", &vlen);
  h->close = c && vlen == 5 && !strncasecmp(c, "close", 5);
  return 1;
}

static int do_connect(vr_httpc *c, vr_errbuf *err) {
  int port = c->port;
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, c->host, &sa.sin_addr) != 1)
    return vr_errf(err, VR_EINVAL, "'%s' is not an IPv4 address", c->host);
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd < 0) return vr_errf(err, VR_EIO, "socket: %s", strerror(errno));
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa)) {
    int e = errno;
    close(c->fd);
    c->fd = -1;
    return vr_errf(err, VR_EIO, "connect %s:%d: %s", c->host, port,
                   strerror(e));
  }
  return 0;
}

int vr_httpc_open(vr_httpc *c, const char *host, int port, vr_errbuf *err) {
  memset(c, 0, sizeof *c);
  c->fd = -1;
  snprintf(c->host, sizeof c->host, "%s", host ? host : "127.0.0.1");
  c->port = port;
  c->timeout_ms = 30000;
  return do_connect(c, err);
}

void vr_httpc_close(vr_httpc *c) {
  if (c->fd >= 0) close(c->fd);
  vr_free(c->buf);
  c->fd = -1;
  c->buf = NULL;
  c->cap = c->len = 0;
}

static int send_all(int fd, const void *p, size_t n) {
  const char *s = p;
  while (n) {
    ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Reads until a full response is buffered. 1 ok, 0 peer closed before any
 * byte (stale keep-alive), <0 error. */
static int read_resp(vr_httpc *c, vr_httpc_resp *out, vr_errbuf *err) {
  c->len = 0;
  for (;;) {
    if (c->len + 65536 > c->cap) {
      size_t cap = c->cap ? c->cap * 2 : 131072;
      char *p = vr_realloc(c->buf, cap);
      if (!p) return vr_errf(err, VR_ENOMEM, "out of memory");
      c->buf = p;
      c->cap = cap;
    }
    int rc = vr_http_parse_head(c->buf, c->len, &out->head);
    if (rc < 0) return vr_errf(err, VR_EFORMAT, "malformed HTTP response");
    if (rc == 1) {
      size_t cl = out->head.content_len == (size_t)-1 ? 0 : out->head.content_len;
      if (c->len >= out->head.head_len + cl) {
        out->body = c->buf + out->head.head_len;
        out->body_len = cl;
        return 1;
      }
    }
    struct pollfd pfd = {c->fd, POLLIN, 0};
    int pr = poll(&pfd, 1, c->timeout_ms);
    if (pr == 0) return vr_errf(err, VR_ETIMEDOUT, "no response in %d ms",
                                c->timeout_ms);
    ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 && c->len == 0) return 0;
    if (n <= 0) return vr_errf(err, VR_EIO, "connection closed mid-response");
    c->len += (size_t)n;
  }
}

int vr_httpc_request(vr_httpc *c, const char *method, const char *path,
                     const char *extra_headers, const void *body, size_t len,
                     vr_httpc_resp *out, vr_errbuf *err) {
  char head[2048];
  /* `vario bench` against a server that wants a token (--auth-infer). */
  const char *tok = getenv("VARIO_ADMIN_TOKEN");
  int n = snprintf(head, sizeof head,
                   "%s %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Length: %zu\r\n"
                   "%s%s%s%s\r\n", method, path, c->host, c->port, len,
                   tok && *tok ? "Authorization: Bearer " : "",
                   tok && *tok ? tok : "", tok && *tok ? "\r\n" : "",
                   extra_headers ? extra_headers : "");
  if (n < 0 || (size_t)n >= sizeof head)
    return vr_errf(err, VR_ELIMIT, "request head too long");
  for (int attempt = 0; attempt < 2; attempt++) {
    if (c->fd < 0) {
      int rc = do_connect(c, err);
      if (rc) return rc;
    }
    if (send_all(c->fd, head, (size_t)n) == 0 &&
        (len == 0 || send_all(c->fd, body, len) == 0)) {
      int rc = read_resp(c, out, err);
      if (rc == 1) {
        if (out->head.close) { /* keep the buffer, drop the socket */
          close(c->fd);
          c->fd = -1;
        }
        return 0;
      }
      if (rc < 0) return rc;
    }
    close(c->fd); /* stale keep-alive: reconnect once */
    c->fd = -1;
  }
  return vr_errf(err, VR_EIO, "server closed the connection");
}
