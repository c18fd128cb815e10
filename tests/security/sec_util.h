/* Helpers for the security tests: in-process servers on ephemeral loopback
 * ports with the fake backend, and raw-socket requests (so a test can send
 * exactly the bytes a hostile client would). */
#ifndef VR_TEST_SEC_UTIL_H
#define VR_TEST_SEC_UTIL_H

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

#include "../integration/srv_util.h"
#include "../unit/rt_fake.h"

/* Starts a server on an ephemeral port over repo with the fake backend;
 * o carries the test's own options (vr_server_opts_init'ed by the caller). */
static inline vr_server *sec_server(vr_server_opts *o, const char *repo, rt_fake *f) {
  o->repo = repo;
  o->rt.backend = &f->be;
  o->rt.profile_runs = 1;
  vr_server *s = NULL;
  vr_errbuf err = {0};
  if (vr_server_create(o, &s, &err)) fail_msg("%s", err.msg);
  return s;
}

static inline int sec_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Reads one response on fd (up to 10 s): status, body into out
 * (NUL-terminated), or -1 when the connection closed first. */
static inline int sec_read(int fd, char *out, size_t cap) {
  char buf[65536];
  size_t len = 0;
  vr_http_head h;
  int have = 0;
  for (;;) {
    if (!have && vr_http_parse_head(buf, len, &h) == 1) have = 1;
    if (have && (h.content_len == (size_t)-1 || len >= h.head_len + h.content_len))
      break;
    struct pollfd p = {fd, POLLIN, 0};
    if (len == sizeof buf || poll(&p, 1, 10000) != 1) return -1;
    ssize_t n = recv(fd, buf + len, sizeof buf - len, 0);
    if (n <= 0) {
      if (have) break;
      return -1;
    }
    len += (size_t)n;
  }
  if (out) {
    size_t b = len - h.head_len, n = b < cap - 1 ? b : cap - 1;
    memcpy(out, buf + h.head_len, n);
    out[n] = 0;
  }
  return h.status;
}

/* Sends raw bytes on a new connection and reads one response. */
static inline int sec_raw(int port, const char *bytes, size_t n, char *out,
                          size_t cap) {
  int fd = sec_connect(port);
  if (fd < 0) return -1;
  if (send(fd, bytes, n, MSG_NOSIGNAL) != (ssize_t)n) {
    close(fd);
    return -1;
  }
  int st = sec_read(fd, out, cap);
  close(fd);
  return st;
}

/* METHOD PATH with optional extra header lines and a body. */
static inline int sec_req(int port, const char *method, const char *path,
                          const char *hdrs, const char *body, char *out,
                          size_t cap) {
  char buf[16384];
  size_t bl = body ? strlen(body) : 0;
  int n = snprintf(buf, sizeof buf, "%s %s HTTP/1.1\r\nHost: x\r\n"
                   "Connection: close\r\nContent-Length: %zu\r\n%s\r\n%s",
                   method, path, bl, hdrs ? hdrs : "", body ? body : "");
  return sec_raw(port, buf, (size_t)n, out, cap);
}

#endif
