/*
 * `vario` — one binary, one subcommand per file (cmd_*.c). Each command
 * parses its own arguments and returns a process exit code. Global options
 * (`--log-level`, `--version`, `help CMD`) are handled here, once, so every
 * subcommand behaves the same way.
 */
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "cli/commands.h"

static const vr_command k_commands[] = {
    {"version", "print the version", vr_cmd_version},
#define VR_CMD(name, fn, help) {name, help, fn},
#include "cli/commands.def"
#undef VR_CMD
};
#define N_COMMANDS (sizeof k_commands / sizeof k_commands[0])

static void usage(FILE *f) {
  fprintf(f, "usage: vario [--log-level LEVEL] COMMAND [ARGS]\n\ncommands:\n");
  for (size_t i = 0; i < N_COMMANDS; i++)
    fprintf(f, "  %-10s %s\n", k_commands[i].name, k_commands[i].help);
  fprintf(f, "  %-10s %s\n", "help", "help CMD prints a command's options");
  fprintf(f,
          "\n`vario help CMD` or `vario CMD --help` for a command's options.\n"
          "--log-level debug|info|warn|error|off (any position; default: $VARIO_LOG,\n"
          "else info) sets the level of the log lines written to stderr.\n"
          "--version prints the version.\n");
}

static const vr_command *find(const char *name) {
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (!strcmp(name, k_commands[i].name)) return &k_commands[i];
  return NULL;
}

/* Removes `--log-level L` / `--log-level=L` from argv (anywhere) and applies
 * it; returns the new argc, or -1 on a bad level. */
static int take_log_level(int argc, char **argv) {
  int o = 0;
  for (int i = 0; i < argc; i++) {
    const char *v = NULL;
    if (!strcmp(argv[i], "--log-level") && i + 1 < argc) v = argv[++i];
    else if (!strncmp(argv[i], "--log-level=", 12)) v = argv[i] + 12;
    else if (!strcmp(argv[i], "--log-level")) v = "";
    if (!v) {
      argv[o++] = argv[i];
      continue;
    }
    int l = vr_log_parse_level(v);
    if (l < 0) {
      fprintf(stderr, "vario: --log-level wants debug|info|warn|error|off, not '%s'\n", v);
      return -1;
    }
    vr_log_set_level(l);
  }
  argv[o] = NULL;
  return o;
}

int main(int argc, char **argv) {
  if ((argc = take_log_level(argc, argv)) < 0) return 2;
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *a = argv[1];
  if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(a, "--version") || !strcmp(a, "-V")) return vr_cmd_version(argc - 1, argv + 1);
  if (!strcmp(a, "help")) {
    if (argc < 3) {
      usage(stdout);
      return 0;
    }
    const vr_command *c = find(argv[2]);
    if (!c) {
      fprintf(stderr, "vario: unknown command '%s'\n", argv[2]);
      return 2;
    }
    char *h[] = {(char *)c->name, "--help", NULL};
    return c->fn(2, h);
  }
  const vr_command *c = find(a);
  if (c) return c->fn(argc - 1, argv + 1);
  fprintf(stderr, "vario: unknown command '%s'\n", a);
  usage(stderr);
  return 2;
}
