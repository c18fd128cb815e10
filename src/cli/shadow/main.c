/*
 * `vario-shadow`: `vario shadow` (cli/cmd_shadow.c) as its own small
 * executable. A body starts a process shadow at a burst, so its start is
 * part of the burst's provisioning time: `vario` links gRPC, abseil,
 * libmicrohttpd, hiredis and CBC, and the dynamic loader's work for them
 * took ~40 ms of a ~45-ms shadow load on the 2-core box; this binary
 * links only the engine and the shared-memory channel (BENCHMARKS.md, "A
 * process shadow's start"). Same arguments; a leading `shadow` is
 * accepted, so a body may start either binary with the same argv.
 */
#include <string.h>

#include "cli/commands.h"

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "shadow")) argv++, argc--;
  return vr_cmd_shadow(argc, argv);
}
