/*
 * Who may do what (docs/SECURITY.md): requests that change server state
 * (register, unregister, load/unload, jobs, pipelines: every method but
 * GET/HEAD, except inference) and requests that read clients' job data
 * are "admin" requests; they need the operator's bearer token, and with
 * no token configured they are refused unless --insecure-admin said so.
 * Inference and health stay open unless infer_auth.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/server_int.h"

/* /v2/models/{m}[/versions/{v}]/infer, /v2/apps/{a}/infer and
 * /v2/pipelines/{p}/infer: the routes that serve inference. */
static int is_infer_route(char **seg, int n) {
  if (n < 4 || strcmp(seg[0], "v2") || strcmp(seg[n - 1], "infer")) return 0;
  if (n == 4)
    return !strcmp(seg[1], "models") || !strcmp(seg[1], "apps") ||
           !strcmp(seg[1], "pipelines");
  return n == 6 && !strcmp(seg[1], "models") && !strcmp(seg[3], "versions");
}

int vr__access_is_admin(const char *method, char **seg, int n) {
  if (n >= 2 && !strcmp(seg[0], "v2") && !strcmp(seg[1], "jobs")) return 1;
  if (n >= 4 && !strcmp(seg[0], "v2") && !strcmp(seg[1], "apps") &&
      !strcmp(seg[3], "jobs"))
    return 1;
  /* the repository API, reads included: its index lists the server's
   * entries and why each failed to load */
  if (n >= 2 && !strcmp(seg[0], "v2") && !strcmp(seg[1], "repository")) return 1;
  if (!strcmp(method, "GET") || !strcmp(method, "HEAD")) return 0;
  /* POST to an inference route is inference; everything else that is not
   * a read changes something (the repository index is a POST too: it
   * lists server paths' states, so it is admin as well). The route is
   * matched whole: "infer" is a valid model and pipeline name, so a last
   * segment "infer" alone (DELETE /v2/pipelines/infer) is no proof. */
  return !(!strcmp(method, "POST") && is_infer_route(seg, n));
}

/* Compares without an early exit, so the time taken does not say how
 * many leading bytes of a guess were right. */
int vr__ct_equal(const char *a, size_t alen, const char *b, size_t blen) {
  unsigned char d = (unsigned char)(alen != blen);
  size_t n = alen > blen ? alen : blen;
  for (size_t i = 0; i < n; i++) {
    unsigned char x = i < alen ? (unsigned char)a[i] : 0;
    unsigned char y = i < blen ? (unsigned char)b[i] : 0;
    d |= x ^ y;
  }
  return d == 0;
}

int vr__access_bearer_ok(const vr_server *s, const char *h) {
  if (!h || strncasecmp(h, "Bearer ", 7) || !s->o.admin_token) return 0;
  h += 7;
  while (*h == ' ') h++;
  size_t n = strlen(h);
  while (n && (h[n - 1] == ' ' || h[n - 1] == '\t')) n--;
  const char *t = s->o.admin_token;
  return vr__ct_equal(h, n, t, strlen(t));
}

int vr__access_check(vr_server *s, vr_http_req *r, int admin) {
  if (!admin && !s->o.infer_auth) return 0;
  if (!s->o.admin_token || !*s->o.admin_token) {
    if (s->o.insecure_admin) return 0;
    vr_server_count(s, 403);
    vr_http_error(r, 403,
                  admin ? "this endpoint changes server state and is off: start "
                          "vario serve with --admin-token-file (or "
                          "VARIO_ADMIN_TOKEN) and send \"Authorization: Bearer "
                          "<token>\", or with --insecure-admin"
                        : "inference requires a token but none is configured");
    return 403;
  }
  if (vr__access_bearer_ok(s, vr_http_header(r, "Authorization"))) return 0;
  vr_server_count(s, 401);
  vr_http_error(r, 401, "missing or wrong bearer token (send \"Authorization: "
                        "Bearer <token>\")");
  vr_http_add_header(r, "WWW-Authenticate", "Bearer realm=\"vario\"");
  return 401;
}

int vr__data_path(const vr_server *s, const char *p, char *out, size_t cap,
                  vr_errbuf *err) {
  if (!s->data_root)
    return vr_errf(err, VR_EINVAL, "server paths are not accepted (no --data-root):"
                   " upload the file in the request body");
  char rp[PATH_MAX];
  struct stat st;
  size_t n = strlen(s->data_root);
  /* One answer for every way it can fail: what exists outside the root,
   * and why a file is unreadable, stay the server's business. */
  if (strlen(p) >= PATH_MAX || !realpath(p, rp) || strncmp(rp, s->data_root, n) ||
      (rp[n] != '/' && !(n == 1 && rp[0] == '/')) || stat(rp, &st) ||
      !S_ISREG(st.st_mode) || access(rp, R_OK) || strlen(rp) >= cap)
    return vr_errf(err, VR_EINVAL, "'%.200s': not a readable file under the server's"
                   " data root", p);
  memcpy(out, rp, strlen(rp) + 1);
  return 0;
}
