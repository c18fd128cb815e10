/*
 * vario worker [serve options] [--id ID] [--port-file F]
 * A worker of a cluster (issue 18): the runtime and the KServe v2 HTTP
 * server of `vario serve` (same code, same options), with no gRPC port by
 * default; front ends forward inference to it. --port-file writes the
 * bound port (for --port 0) once it listens.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/serve_role.h"

typedef struct worker_role {
  const char *id;
  const char *port_file;
} worker_role;

static int w_arg(void *self, int argc, char **argv, int i) {
  worker_role *w = self;
  if (!strcmp(argv[i], "--id") || !strcmp(argv[i], "--port-file")) {
    if (i + 1 >= argc || !argv[i + 1][0]) return -1;
    if (argv[i][2] == 'i') w->id = argv[i + 1];
    else w->port_file = argv[i + 1];
    return 2;
  }
  return 0;
}

static void w_usage(FILE *f) {
  fprintf(f, "usage: vario worker [--id ID] [--port-file F] SERVE-OPTIONS\n"
             "  --id ID          this worker's name in the cluster (default\n"
             "                   worker-PORT)\n"
             "  --port-file F    write the bound HTTP port to F once listening\n"
             "  (gRPC is off unless --grpc-port is given)\n\n");
}

static void w_defaults(void *self, vr_server_opts *o, int *grpc_port, int *grpc_set) {
  (void)self;
  *grpc_port = -1;
  *grpc_set = 1;
}

static int w_start(void *self, vr_server *s, vr_errbuf *err) {
  worker_role *w = self;
  if (w->port_file) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", w->port_file);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%d\n", vr_server_port(s)) < 0 || fclose(f) ||
        rename(tmp, w->port_file))
      return vr_errf(err, VR_EIO, "--port-file %s: cannot write it", w->port_file);
  }
  return 0;
}

int vr_cmd_worker(int argc, char **argv) {
  worker_role w = {0};
  vr_cli_role role = {"vario worker", &w, w_arg, w_usage, w_defaults, w_start, NULL};
  return vr_cli_serve(argc, argv, &role);
}
