/* Subcommands of the `vario` binary. Each takes (argc, argv) with argv[0]
 * the command name and returns the process exit code. New commands are
 * listed in commands.def (one line each) and live in cmd_<name>.c. */
#ifndef VR_CLI_COMMANDS_H
#define VR_CLI_COMMANDS_H

typedef struct vr_command {
  const char *name;
  const char *help;
  int (*fn)(int argc, char **argv);
} vr_command;

int vr_cmd_version(int argc, char **argv);
int vr_cmd_sim_pipe(int argc, char **argv); /* vario sim on a pipeline */
#define VR_CMD(name, fn, help) int fn(int argc, char **argv);
#include "cli/commands.def"
#undef VR_CMD

/* `vario perf MODEL --blocks` (cmd_perf_blocks.c). */
int vr__cmd_perf_blocks(int argc, char **argv);

#endif
