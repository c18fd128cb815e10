/* Subcommands of the `vario` binary. Each takes (argc, argv) with argv[0]
 * the command name and returns the process exit code. New commands are
 * listed in commands.def (one line each) and live in cmd_<name>.c. */
#ifndef VR_CLI_COMMANDS_H
#define VR_CLI_COMMANDS_H

#include <stddef.h>

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

/* An admin token file's token (--admin-token-file; cmd_serve.c): the
 * file's first line with trailing whitespace dropped, into buf (cap
 * bytes). -> its length; 0 when the file cannot be read or holds no
 * token. */
size_t vr__cli_read_token(const char *path, char *buf, size_t cap);

/* --port-file (frontend, controller, worker; cmd_serve.c): "PORT\n"
 * written to path.tmp, then renamed onto path, so a reader never sees a
 * partial file. -> 0, or -1 (nothing left open or behind). */
int vr__cli_write_port_file(const char *path, int port);

/* Option values (args.c): the whole of s a decimal integer / finite
 * number in [lo, hi] into *out, 0; else -1 after printing "vario CMD: OPT
 * wants ..., not 'S'" to stderr. */
int vr__cli_int(const char *cmd, const char *opt, const char *s, long lo, long hi,
                int *out);
int vr__cli_ll(const char *cmd, const char *opt, const char *s, long long lo, long long hi,
               long long *out);
int vr__cli_num(const char *cmd, const char *opt, const char *s, double lo, double hi,
                double *out);
/* The same checks, silent, for parsers that print their own message; s
 * may be NULL (an option given without its value). */
int vr__cli_parse_ll(const char *s, long long lo, long long hi, long long *out);
int vr__cli_parse_int(const char *s, long lo, long hi, int *out);
int vr__cli_parse_num(const char *s, double lo, double hi, double *out);
/* A number in (0, hi]: a period, a rate, a factor. */
int vr__cli_parse_pos(const char *s, double hi, double *out);

/* `vario perf MODEL --blocks` (cmd_perf_blocks.c). */
int vr__cmd_perf_blocks(int argc, char **argv);

#endif
