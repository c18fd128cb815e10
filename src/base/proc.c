#include "base/proc.h"

#include <stdio.h>
#include <string.h>

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
