#include <stdio.h>

#include "cli/commands.h"

int vr_cmd_version(int argc, char **argv) {
  (void)argc;
  (void)argv;
  printf("vario 0.1.0\n");
  return 0;
}
