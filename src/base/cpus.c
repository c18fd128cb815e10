#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "base/cpus.h"

#include <sched.h>
#include <stdio.h>
#include <unistd.h>

/* cpu.max is "max PERIOD" (no limit) or "QUOTA PERIOD" in microseconds. */
static int quota_cpus(const char *dir) {
  char path[512], buf[64];
  snprintf(path, sizeof path, "%s/cpu.max", dir ? dir : "/sys/fs/cgroup");
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  long long quota = 0, period = 0;
  int n = fgets(buf, sizeof buf, f) ? sscanf(buf, "%lld %lld", &quota, &period) : 0;
  fclose(f);
  if (n != 2 || quota <= 0 || period <= 0) return 0; /* "max": no quota */
  return (int)((quota + period - 1) / period);
}

int vr_cpus_usable(const char *cgroup_dir) {
  cpu_set_t set;
  int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (n < 1) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
  int q = quota_cpus(cgroup_dir);
  if (q > 0 && q < n) n = q;
  return n > 0 ? n : 1;
}
