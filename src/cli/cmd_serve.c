/*
 * vario serve --repo DIR [--port N] [--host ADDR] [--max-body-mb N]
 *             [--max-conns N] [--no-load]
 * Serves every model of the repository over KServe v2 HTTP until SIGINT or
 * SIGTERM, then shuts down gracefully: stops accepting, answers every
 * accepted request, exits 0.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "cli/commands.h"
#include "cli/serve_control.h"
#include "cli/serve_role.h"
#include "server/server.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: vario serve --repo DIR [--port N] [--grpc-port N] [--host ADDR]\n"
          "                   [--max-body-mb N] [--max-conns N] [--spin-us N]\n"
          "                   [--no-load]\n"
          "  --repo DIR       model repository (required): DIR/<model>/ with\n"
          "                   config.json + model.onnx (Vario), or config.pbtxt +\n"
          "                   <version>/model.onnx (Triton), or a bare model.onnx\n"
          "  --port N         TCP port (default 8000; 0 = any free port)\n"
          "  --grpc-port N    KServe v2 gRPC port (default 8001, i.e. --port + 1;\n"
          "                   with --port 0 any free port; -1 = no gRPC)\n"
          "  --host ADDR      IPv4 address to bind (default 127.0.0.1)\n"
          "  --max-body-mb N  largest request body (default 64)\n"
          "  --max-conns N    open connections (default 1024)\n"
          "  --spin-us N      when idle, wait up to N us for an answer before\n"
          "                   parking the connection (default 50; -1 = never)\n"
          "  --store DB       model-less mode: registered models (vario register),\n"
          "                   DB = SQLite file or redis://host[:port][/db];\n"
          "                   control loop, /v2/apps API; implies --no-load\n"
          "  --control-csv F  per-second control time series (with --store)\n"
          "  --cores N        cores the control plane may fill (default: all)\n"
          "  --policy P       control policy: infaas (default), clipper, sm, asyfunc\n"
          "  --control-period-ms T  control period (default 1000)\n"
          "  --pipeline-policy P  pipelines' resource manager: loki (hardware then\n"
          "                   accuracy scaling, MostAccurateFirst routing, early\n"
          "                   drop + reroute), loki_no_drop, loki_last_task,\n"
          "                   loki_per_task, hw, proteus, infaas, inferline\n"
          "                   (planner + tuner), inferline_plan, cg_peak,\n"
          "                   cg_mean, cg_peak_static, cg_mean_static; default none\n"
          "                   (each hop by INFaaS selection)\n"
          "  --pipeline-period-ms T  its replan period (default 10000; also when the\n"
          "                   demand EWMA moves by 30 percent)\n"
          "  --pipeline-slack S  its headroom on demand (default 1.25)\n"
          "  --pipeline-tick-ms T  the policy's tick (default 1000; 100 for\n"
          "                   InferLine's tuner as in the paper)\n"
          "  --inferline-rate Q, --inferline-cv CV  with --pipeline-policy\n"
          "                   inferline, inferline_plan or cg_*: the sample\n"
          "                   trace (Gamma, Q root queries/s, CV default 1) the\n"
          "                   planner provisions each pipeline for\n"
          "  --af-gamma G, --af-kappa K, --af-release-ms T, --af-mls-period-s S\n"
          "                   AsyFunc's queue threshold per body (2), shadows at\n"
          "                   most (10; 0 = AsyFunc-), release delay (1000), MLS\n"
          "                   period (60)\n"
          "  --shadow-process AsyFunc shadows in their own processes (shared memory)\n"
          "  --default-slo-ms L  SLO for queries that state none (default 100)\n"
          "  --no-load        start with no model loaded (load via the\n"
          "                   repository API)\n"
          "  --admin-token-file F  bearer token (first line of F) that requests\n"
          "                   changing state must send (\"Authorization: Bearer T\");\n"
          "                   or set VARIO_ADMIN_TOKEN. Without one, those\n"
          "                   endpoints are off (403)\n"
          "  --insecure-admin allow state-changing requests with no token\n"
          "  --auth-infer     inference and metadata need the token too\n"
          "                   (health and /metrics stay open)\n"
          "  --data-root DIR  clients may name server files (registration, job\n"
          "                   inputs) only under DIR; default: none (uploads)\n"
          "  --header-timeout-ms N  a request's headers must arrive within N ms\n"
          "                   of the connection opening or the last response\n"
          "                   (default 10000); --body-timeout-ms N: its body\n"
          "                   within N ms of the headers (default 30000)\n"
          "  --max-conns-per-client N  per IPv4 address, loopback exempt\n"
          "                   (default 256)\n"
          "  --conn-reserve N connections past --max-conns kept for\n"
          "                   /v2/health/* and /metrics (default 32)\n"
          "  --tls-cert F --tls-key F  serve HTTPS (PEM files; GnuTLS)\n"
          "  --max-admin-jobs N  concurrent load/registration jobs (default 4;\n"
          "                   past it: 429)\n");
}

/* A whole (small) file, NUL-terminated; NULL on error. */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t len = 0, cap = 0, n;
  char tmp[4096];
  while ((n = fread(tmp, 1, sizeof tmp, f)) > 0 && len + n < (1u << 20)) {
    if (len + n + 1 > cap) {
      cap = (len + n + 1) * 2;
      char *p = realloc(buf, cap);
      if (!p) break;
      buf = p;
    }
    memcpy(buf + len, tmp, n);
    len += n;
  }
  fclose(f);
  if (buf) buf[len] = 0;
  return buf;
}

size_t vr__cli_read_token(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char *t = fgets(buf, (int)cap, f);
  fclose(f);
  if (!t) return 0;
  size_t n = strlen(t);
  while (n && (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' ' ||
               t[n - 1] == '\t'))
    t[--n] = 0;
  return n;
}

int vr__cli_write_port_file(const char *path, int port) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return -1;
  FILE *f = fopen(tmp, "w");
  if (!f) return -1;
  /* fclose whatever fprintf did: `!f || fprintf(..) < 0 || fclose(f)`
   * skipped it when fprintf failed (the FILE leaked) */
  int bad = fprintf(f, "%d\n", port) < 0;
  bad |= fclose(f) != 0;
  if (!bad && !rename(tmp, path)) return 0;
  unlink(tmp);
  return -1;
}

static char *read_token(const char *path) {
  char buf[1024];
  return vr__cli_read_token(path, buf, sizeof buf) ? strdup(buf) : NULL;
}

int vr_cmd_serve(int argc, char **argv) { return vr_cli_serve(argc, argv, NULL); }

int vr_cli_serve(int argc, char **argv, const vr_cli_role *role) {
  const char *prog = role ? role->name : "vario serve";
  vr_server_opts o;
  vr_server_opts_init(&o);
  o.port = 8000;
  o.load_all = 1;
  int grpc_port = -1, grpc_set = 0;
  vr_cli_control ctl = {0}; /* model-less control plane (--store) */
  char *token = NULL, *tls_cert = NULL, *tls_key = NULL;
  if (role && role->defaults) role->defaults(role->self, &o, &grpc_port, &grpc_set);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    long long v;
    int has = i + 1 < argc;
    int used = role ? role->arg(role->self, argc, argv, i) : 0;
    if (used == 0) used = vr_cli_control_arg(&ctl, argc, argv, i);
    if (used > 0) {
      i += used - 1;
      continue;
    }
    if (used < 0) {
      fprintf(stderr, "%s: bad or incomplete option '%s'\n", prog, a);
      free(token), free(tls_cert), free(tls_key);
      return 2;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      if (role) role->usage(stdout);
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--repo") && has) {
      o.repo = argv[++i];
    } else if (!strcmp(a, "--host") && has) {
      o.host = argv[++i];
    } else if (!strcmp(a, "--port") && has && !vr__cli_parse_ll(argv[i + 1], 0, 65535, &v)) {
      o.port = (int)v;
      i++;
    } else if (!strcmp(a, "--grpc-port") && has &&
               !vr__cli_parse_ll(argv[i + 1], -1, 65535, &v)) {
      grpc_port = (int)v;
      grpc_set = 1;
      i++;
    } else if (!strcmp(a, "--max-body-mb") && has &&
               !vr__cli_parse_ll(argv[i + 1], 1, 4096, &v)) {
      o.max_body = (size_t)v << 20;
      i++;
    } else if (!strcmp(a, "--max-conns") && has &&
               !vr__cli_parse_ll(argv[i + 1], 1, 100000, &v)) {
      o.max_conns = (unsigned)v;
      i++;
    } else if (!strcmp(a, "--spin-us") && has &&
               !vr__cli_parse_ll(argv[i + 1], -1, 10000, &v)) {
      o.spin_us = (int)v;
      i++;
    } else if (!strcmp(a, "--no-load")) {
      o.load_all = 0;
    } else if (!strcmp(a, "--admin-token-file") && has) {
      free(token);
      if (!(token = read_token(argv[++i]))) {
        fprintf(stderr, "%s: --admin-token-file %s: cannot read a"
                " non-empty first line\n", prog, argv[i]);
        free(tls_cert), free(tls_key);
        return 2;
      }
    } else if ((!strcmp(a, "--tls-cert") || !strcmp(a, "--tls-key")) && has) {
      char **dst = a[6] == 'c' ? &tls_cert : &tls_key;
      free(*dst);
      if (!(*dst = slurp(argv[++i]))) {
        fprintf(stderr, "%s: %s %s: cannot read it\n", prog, a, argv[i]);
        free(token), free(tls_cert), free(tls_key);
        return 2;
      }
    } else if (!strcmp(a, "--header-timeout-ms") && has &&
               !vr__cli_parse_ll(argv[i + 1], 100, 3600000, &v)) {
      o.header_timeout_ms = (unsigned)v;
      i++;
    } else if (!strcmp(a, "--body-timeout-ms") && has &&
               !vr__cli_parse_ll(argv[i + 1], 100, 3600000, &v)) {
      o.body_timeout_ms = (unsigned)v;
      i++;
    } else if (!strcmp(a, "--max-conns-per-client") && has &&
               !vr__cli_parse_ll(argv[i + 1], 1, 100000, &v)) {
      o.max_conns_per_client = (unsigned)v;
      i++;
    } else if (!strcmp(a, "--conn-reserve") && has &&
               !vr__cli_parse_ll(argv[i + 1], 1, 10000, &v)) {
      o.conn_reserve = (unsigned)v;
      i++;
    } else if (!strcmp(a, "--data-root") && has) {
      o.data_root = argv[++i];
    } else if (!strcmp(a, "--insecure-admin")) {
      o.insecure_admin = 1;
    } else if (!strcmp(a, "--auth-infer")) {
      o.infer_auth = 1;
    } else if (!strcmp(a, "--max-admin-jobs") && has &&
               !vr__cli_parse_ll(argv[i + 1], 1, 1000, &v)) {
      o.max_admin_jobs = (int)v;
      i++;
    } else {
      fprintf(stderr, "%s: bad or incomplete option '%s'\n", prog, a);
      usage(stderr);
      free(token), free(tls_cert), free(tls_key);
      return 2;
    }
  }
  /* Signals are taken synchronously by this thread (sigwait), so every
   * thread the server starts inherits the block and none is interrupted. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  /* Past a file size limit (ulimit -f, systemd's LimitFSIZE) a write is
   * an error (EFBIG) for the request that made it; by default the signal
   * killed the server on a client's large upload. */
  signal(SIGXFSZ, SIG_IGN);
  vr_server *s = NULL;
  vr_errbuf err = {0};
  if (ctl.store_path) { /* the control plane loads variants */
    o.load_all = 0;
    o.control_later = 1; /* ready once vr_cli_control_open attached it */
  }
  if (role && role->cores && *role->cores > 0 && ctl.cores == 0) ctl.cores = *role->cores;
  if (role && role->jobs_dir_name) ctl.jobs_dir_name = *role->jobs_dir_name;
  /* Triton's pair of ports: HTTP 8000, gRPC 8001 — next to --port. */
  o.grpc_port = grpc_set ? grpc_port : o.port > 0 ? (o.port < 65535 ? o.port + 1 : -1) : 0;
  /* Checked before anything loads: a server with no repository would
   * start, report ready and serve nothing. */
  struct stat st;
  if (!o.repo) {
    fprintf(stderr, "%s: --repo DIR is required\n", prog);
    usage(stderr);
    free(token), free(tls_cert), free(tls_key);
    return 2;
  }
  if (stat(o.repo, &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "%s: repository '%s' is not a directory\n", prog, o.repo);
    free(token), free(tls_cert), free(tls_key);
    return 1;
  }
  const char *env = getenv("VARIO_ADMIN_TOKEN");
  if (!token && env && *env) token = strdup(env);
  o.admin_token = token;
  o.tls_cert_pem = tls_cert;
  o.tls_key_pem = tls_key;
  if (!token && !o.insecure_admin)
    fprintf(stderr, "%s: no admin token: registration, load/unload"
            " and jobs are off (--admin-token-file or --insecure-admin)\n", prog);
  if (vr_server_create(&o, &s, &err)) {
    fprintf(stderr, "%s: %s\n", prog, err.msg);
    free(token), free(tls_cert), free(tls_key);
    return 1;
  }
  if (vr_cli_control_open(&ctl, s, &err)) {
    fprintf(stderr, "%s: %s\n", prog, err.msg);
    vr_cli_control_close(&ctl);
    vr_server_shutdown(s);
    vr_cli_control_free(&ctl);
    vr_server_free(s);
    free(token), free(tls_cert), free(tls_key);
    return 1;
  }
  if (ctl.store_path) vr_server_attached(s);
  if (role && role->start && role->start(role->self, s, &err)) {
    fprintf(stderr, "%s: %s\n", prog, err.msg);
    vr_cli_control_close(&ctl);
    vr_server_shutdown(s);
    vr_cli_control_free(&ctl);
    vr_server_free(s);
    free(token), free(tls_cert), free(tls_key);
    return 1;
  }
  char grpc[32] = "gRPC off"; /* --grpc-port -1 */
  if (vr_server_grpc_port(s) > 0) snprintf(grpc, sizeof grpc, "gRPC port %d", vr_server_grpc_port(s));
  fprintf(stderr, "%s: listening on %s://%s:%d (KServe v2;"
          " metrics at /metrics; %s)\n", prog, tls_cert ? "https" : "http",
          o.host ? o.host : "127.0.0.1", vr_server_port(s), grpc);
  int sig = 0;
  sigwait(&set, &sig);
  fprintf(stderr, "%s: signal %d, draining\n", prog, sig);
  if (role && role->stop) role->stop(role->self);
  vr_cli_control_close(&ctl);
  vr_server_shutdown(s);
  vr_cli_control_free(&ctl);
  vr_server_free(s);
  free(token), free(tls_cert), free(tls_key);
  fprintf(stderr, "%s: stopped\n", prog);
  return 0;
}
