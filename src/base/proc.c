#include "base/proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* $name into buf when set and not empty: 1, or -1 when it does not fit;
 * 0 when unset. */
static int from_env(const char *name, char *buf, size_t cap) {
  const char *env = getenv(name);
  if (!env || !*env) return 0;
  size_t n = strlen(env);
  if (n >= cap) return -1;
  memcpy(buf, env, n + 1);
  return 1;
}

int vr_proc_self_exe(char *buf, size_t cap) {
  int e = from_env("VARIO_EXE", buf, cap);
  if (e) return e > 0 ? 0 : -1;
  ssize_t n = cap > 1 ? readlink("/proc/self/exe", buf, cap - 1) : -1;
  if (n <= 0 || (size_t)n >= cap - 1) return -1; /* cap - 1 filled: maybe cut */
  buf[n] = 0;
  return 0;
}

int vr_proc_shadow_exe(char *buf, size_t cap) {
  int e = from_env("VARIO_SHADOW_EXE", buf, cap);
  if (e) return e > 0 ? 0 : -1;
  if (vr_proc_self_exe(buf, cap)) return -1;
  char *slash = strrchr(buf, '/');
  size_t dir = slash ? (size_t)(slash - buf) + 1 : 0;
  static const char name[] = "vario-shadow";
  if (dir + sizeof name > cap) return 0; /* no room: vario itself */
  char *alt = malloc(dir + sizeof name);
  if (!alt) return 0;
  memcpy(alt, buf, dir);
  memcpy(alt + dir, name, sizeof name);
  if (!access(alt, X_OK)) memcpy(buf, alt, dir + sizeof name);
  free(alt);
  return 0;
}

int vr_proc_stat(long pid, char *state, unsigned long long *start) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  /* after the command name, which may hold spaces and parentheses */
  const char *p = strrchr(buf, ')');
  char st = 0;
  unsigned long long t = 0;
  if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
                          "%*d %*d %*d %llu", &st, &t) != 2)
    return -1;
  if (state) *state = st;
  if (start) *start = t;
  return 0;
}
