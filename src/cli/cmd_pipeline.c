/*
 * vario pipeline register FILE | list | show NAME | delete NAME
 *                [--host H] [--port P]
 *
 * Talks to a running `vario serve --store ...` over its /v2/pipelines API
 * (docs/API.md "Pipelines") and prints the server's JSON answer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "cli/commands.h"
#include "control/fsutil.h"
#include "server/http.h"
#include "server/httpc.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: vario pipeline register FILE.json [--host H] [--port P]\n"
          "       vario pipeline list [--host H] [--port P]\n"
          "       vario pipeline show NAME [--host H] [--port P]\n"
          "       vario pipeline delete NAME [--host H] [--port P]\n"
          "  FILE.json  a Vario pipeline spec or a Loki app definition\n"
          "  --port P   the server's port (default 8000); --host default 127.0.0.1\n"
          "  register/delete send $VARIO_ADMIN_TOKEN (the server's admin token)\n");
}

static int call(const char *host, int port, const char *method, const char *path,
                const char *body, size_t len) {
  vr_httpc c;
  vr_errbuf err = {0};
  vr_httpc_resp r;
  int rc = vr_httpc_open(&c, host, port, &err);
  if (!rc) {
    const char *hdr = body ? "Content-Type: application/json\r\n" : NULL;
    rc = vr_httpc_request(&c, method, path, hdr, body, len, &r, &err);
    if (rc) vr_httpc_close(&c);
  }
  if (rc) {
    fprintf(stderr, "vario pipeline: %s %s: %s\n", method, path, err.msg);
    return 1;
  }
  FILE *out = r.head.status / 100 == 2 ? stdout : stderr;
  fwrite(r.body, 1, r.body_len, out);
  fputc('\n', out);
  int ok = r.head.status / 100 == 2;
  vr_httpc_close(&c);
  return ok ? 0 : 1;
}

int vr_cmd_pipeline(int argc, char **argv) {
  const char *host = "127.0.0.1", *verb = NULL, *arg = NULL;
  int port = 8000;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--host") && i + 1 < argc) {
      host = argv[++i];
    } else if (!strcmp(a, "--port") && i + 1 < argc) {
      char *end;
      long p = strtol(argv[++i], &end, 10);
      if (*end || p < 1 || p > 65535) {
        fprintf(stderr, "vario pipeline: bad --port '%s'\n", argv[i]);
        return 2;
      }
      port = (int)p;
    } else if (!verb) {
      verb = a;
    } else if (!arg) {
      arg = a;
    } else {
      usage(stderr);
      return 2;
    }
  }
  int need_arg = verb && strcmp(verb, "list");
  if (!verb || (need_arg && !arg) || (!need_arg && arg)) {
    usage(stderr);
    return 2;
  }
  char path[512];
  if (!strcmp(verb, "list")) return call(host, port, "GET", "/v2/pipelines", NULL, 0);
  snprintf(path, sizeof path, "/v2/pipelines/");
  /* one path segment: the server decodes the path, so a name holding '%',
   * a space, '?' or '#' sent raw named another pipeline (or none) */
  size_t pl = strlen(path);
  if (strcmp(verb, "register") && vr_http_pct_encode(path, sizeof path, &pl, arg, 0)) {
    fprintf(stderr, "vario pipeline: name too long\n");
    return 2;
  }
  if (!strcmp(verb, "show")) return call(host, port, "GET", path, NULL, 0);
  if (!strcmp(verb, "delete")) return call(host, port, "DELETE", path, NULL, 0);
  if (strcmp(verb, "register")) {
    usage(stderr);
    return 2;
  }
  size_t len;
  vr_errbuf err = {0};
  char *body = NULL;
  if (vr_read_file(arg, &body, &len, &err)) {
    fprintf(stderr, "vario pipeline: %s\n", err.msg);
    return 1;
  }
  int rc = call(host, port, "POST", "/v2/pipelines", body, len);
  vr_free(body);
  return rc;
}
