/*
 * vario frontend [--port N] [--host ADDR] --worker ID=HOST:PORT ...
 *                [--route KEY=ID,ID...] [--timeout-ms N] [--port-file F]
 *                [--max-conns-per-worker N] [--max-body-mb N]
 *        | --registry URL
 * A cluster front end (issue 18): KServe v2 HTTP in, forwarded to workers
 * over keep-alive connections. With --registry it follows the routing
 * table the controller publishes (subscription; it keeps its last table
 * while Redis or the controller is away). With --worker/--route the table
 * is static: without --route every worker serves every model and app
 * ("*"). Runs until SIGINT/SIGTERM.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "cli/commands.h"
#include "base/log.h"
#include "cluster/registry.h"
#include "server/frontend.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: vario frontend [--port N] [--host ADDR] --registry URL\n"
          "       vario frontend [--port N] [--host ADDR] --worker ID=HOST:PORT...\n"
          "                      [--route KEY=ID[,ID...]]... [--timeout-ms N]\n"
          "                      [--tries N] [--spin-us N] [--port-file F]\n"
          "                      [--max-conns-per-worker N] [--max-body-mb N]\n"
          "  --registry URL   redis://HOST:PORT: follow the controller's routing\n"
          "                   table (table \"main\")\n"
          "  --worker ID=HOST:PORT  a worker (repeatable; static table)\n"
          "  --route KEY=IDS  workers for KEY: m:<model>, a:<app> or * (default:\n"
          "                   * = every worker)\n"
          "  --timeout-ms N   a worker that has not answered in N ms: 504\n"
          "                   (default 30000)\n"
          "  --tries N        workers tried per request when one fails (default 3)\n"
          "  --max-conns-per-worker N  connections to one worker (default 256,\n"
          "                   its --max-conns-per-client); requests past them wait\n"
          "                   for one to come free\n"
          "  --max-body-mb N  largest request body it forwards (default 64; 413\n"
          "                   past it); match the workers' --max-body-mb\n"
          "  --spin-us N      idle fast path (default 500; -1 = never)\n"
          "  --port-file F    write the bound port to F once listening\n");
}

#define MAXW 64
#define MAXR 64

/* Subscription thread: a new routing table replaces the forwarder's. A
 * table that does not parse is refused and the last good one stays. */
static void on_registry(void *ctx, const vr_registry_event *ev) {
  vr_frontend *fe = ctx;
  if (ev->kind != VR_REG_EV_ROUTES || strcmp(ev->table, "main")) return;
  if (!ev->reset && ev->version <= vr_fwd_table_version(vr_frontend_fwd(fe))) return;
  vr_fwd_table t;
  vr_errbuf err = {0};
  if (vr_fwd_table_parse(ev->body, strlen(ev->body), ev->version, &t, &err) ||
      vr_fwd_set_table(vr_frontend_fwd(fe), &t, &err)) {
    vr_warn("frontend: routing table v%lld refused: %s", (long long)ev->version, err.msg);
    if (t.workers) vr_fwd_table_free(&t);
    return;
  }
  vr_info("frontend: routing table v%lld: %d workers, %d routes", (long long)ev->version,
          t.n_workers, t.n_routes);
  vr_fwd_table_free(&t);
}

int vr_cmd_frontend(int argc, char **argv) {
  vr_frontend_opts o;
  vr_frontend_opts_init(&o);
  o.port = 8000;
  vr_fwd_worker ws[MAXW];
  int nw = 0, nr = 0;
  const char *routes[MAXR];
  const char *port_file = NULL, *registry = NULL;
  vr_errbuf err = {0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc;
    long long v;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--worker") && has && nw < MAXW) {
      if (vr_fwd_parse_worker(argv[++i], &ws[nw++], &err)) {
        fprintf(stderr, "vario frontend: %s\n", err.msg);
        return 2;
      }
    } else if (!strcmp(a, "--registry") && has) {
      registry = argv[++i];
    } else if (!strcmp(a, "--route") && has && nr < MAXR) {
      routes[nr++] = argv[++i];
    } else if (!strcmp(a, "--port") && has && !vr__cli_parse_ll(argv[i + 1], 0, 65535, &v)) {
      o.port = (int)v;
      i++;
    } else if (!strcmp(a, "--host") && has) {
      o.host = argv[++i];
    } else if (!strcmp(a, "--timeout-ms") && has &&
               !vr__cli_parse_ll(argv[i + 1], 1, 3600000, &v)) {
      o.fwd.timeout_ms = (int)v;
      i++;
    } else if (!strcmp(a, "--tries") && has && !vr__cli_parse_ll(argv[i + 1], 1, 4, &v)) {
      o.fwd.max_tries = (int)v;
      i++;
    } else if (!strcmp(a, "--max-conns-per-worker") && has &&
               !vr__cli_parse_ll(argv[i + 1], 1, 65535, &v)) {
      o.fwd.max_conns = (int)v;
      i++;
    } else if (!strcmp(a, "--max-body-mb") && has &&
               !vr__cli_parse_ll(argv[i + 1], 1, 4096, &v)) {
      o.max_body = (size_t)v << 20;
      i++;
    } else if (!strcmp(a, "--spin-us") && has &&
               !vr__cli_parse_ll(argv[i + 1], -1, 10000, &v)) {
      o.spin_us = (int)v;
      i++;
    } else if (!strcmp(a, "--port-file") && has) {
      port_file = argv[++i];
    } else {
      fprintf(stderr, "vario frontend: bad or incomplete option '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if ((nw == 0) == (registry == NULL)) {
    fprintf(stderr, "vario frontend: give --registry URL, or --worker ID=HOST:PORT"
            " (not both)\n");
    return 2;
  }
  /* The table: --route entries, or "*" -> every worker. */
  vr_fwd_route rt[MAXR];
  int idx[MAXR][MAXW];
  int n_routes = nr ? nr : 1;
  for (int r = 0; r < n_routes; r++) {
    rt[r] = (vr_fwd_route){.workers = idx[r]};
    if (!nr) {
      snprintf(rt[r].key, sizeof rt[r].key, "*");
      for (int k = 0; k < nw; k++) idx[r][rt[r].n++] = k;
      continue;
    }
    const char *eq = strchr(routes[r], '=');
    if (!eq || eq == routes[r] || (size_t)(eq - routes[r]) >= sizeof rt[r].key) {
      fprintf(stderr, "vario frontend: --route '%s': expected KEY=ID[,ID...]\n", routes[r]);
      return 2;
    }
    memcpy(rt[r].key, routes[r], (size_t)(eq - routes[r]));
    char ids[1024];
    snprintf(ids, sizeof ids, "%s", eq + 1);
    for (char *save = NULL, *t = strtok_r(ids, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
      int k = 0;
      while (k < nw && strcmp(ws[k].id, t)) k++;
      if (k == nw || rt[r].n == MAXW) {
        fprintf(stderr, "vario frontend: --route '%s': no --worker named '%s'\n", routes[r], t);
        return 2;
      }
      idx[r][rt[r].n++] = k;
    }
  }
  vr_fwd_table t = {1, nw, n_routes, ws, rt};
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  vr_frontend *fe = NULL;
  vr_registry_sub *sub = NULL;
  if (vr_frontend_create(&o, &fe, &err) ||
      (registry ? vr_registry_subscribe(registry, NULL, on_registry, fe, &sub, &err)
                : vr_fwd_set_table(vr_frontend_fwd(fe), &t, &err))) {
    fprintf(stderr, "vario frontend: %s\n", err.msg);
    if (fe) vr_frontend_free(fe);
    return 1;
  }
  if (port_file && vr__cli_write_port_file(port_file, vr_frontend_port(fe)))
    fprintf(stderr, "vario frontend: --port-file %s: cannot write it\n", port_file);
  fprintf(stderr, "vario frontend: listening on http://%s:%d, %s\n",
          o.host ? o.host : "127.0.0.1", vr_frontend_port(fe),
          registry ? "routing table from the registry" : "static routing table");
  int sig = 0;
  sigwait(&set, &sig);
  fprintf(stderr, "vario frontend: signal %d, draining\n", sig);
  if (sub) vr_registry_unsubscribe(sub);
  vr_frontend_shutdown(fe);
  vr_frontend_free(fe);
  fprintf(stderr, "vario frontend: stopped\n");
  return 0;
}
