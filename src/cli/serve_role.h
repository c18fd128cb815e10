/*
 * The roles that share `vario serve`'s code (issue 18): `vario worker` is
 * a serve process plus cluster membership. A role adds options, changes
 * defaults, and starts/stops its own part around the server's life.
 * Ownership: the role's `self` is the caller's.
 */
#ifndef VR_CLI_SERVE_ROLE_H
#define VR_CLI_SERVE_ROLE_H

#include <stdio.h>

#include "server/server.h"

typedef struct vr_cli_role {
  const char *name; /* "vario worker" (messages) */
  void *self;
  /* Parses argv[i] if it is the role's option: argv entries used, 0 = not
   * the role's, -1 = bad value. */
  int (*arg)(void *self, int argc, char **argv, int i);
  void (*usage)(FILE *f);
  /* Before options are parsed: the role's defaults. */
  void (*defaults)(void *self, vr_server_opts *o, int *grpc_port, int *grpc_set);
  /* After the server (and control plane, if any) started. */
  int (*start)(void *self, vr_server *s, vr_errbuf *err);
  /* On SIGINT/SIGTERM, before the server drains. */
  void (*stop)(void *self);
  /* After parsing: cores the control plane may fill when --cores N was
   * not given (0 = all online CPUs); may be NULL. */
  int *cores;
  /* After parsing: the name of the server's own offline-jobs directory,
   * <repo>/.jobs/<name> (a worker's id: workers over one repository keep
   * their jobs apart); NULL or "" = <repo>/.jobs. May be NULL. */
  const char *const *jobs_dir_name;
} vr_cli_role;

/* `vario serve` with an optional role (NULL = plain serve). */
int vr_cli_serve(int argc, char **argv, const vr_cli_role *role);

#endif
