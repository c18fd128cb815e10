/*
 * `vario` — one binary, one subcommand per file (cmd_*.c). Each command
 * parses its own arguments and returns a process exit code.
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

static const vr_command k_commands[] = {
    {"version", "print the version", vr_cmd_version},
#define VR_CMD(name, fn, help) {name, help, fn},
#include "cli/commands.def"
#undef VR_CMD
};

static void usage(FILE *f) {
  fprintf(f, "usage: vario COMMAND [ARGS]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
    fprintf(f, "  %-10s %s\n", k_commands[i].name, k_commands[i].help);
  fprintf(f, "\n`vario COMMAND --help` for a command's options.\n");
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
    if (!strcmp(argv[1], k_commands[i].name))
      return k_commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "vario: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
