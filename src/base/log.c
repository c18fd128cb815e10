#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Atomic int g_level = -1;
static const char *const k_names[] = {"debug", "info", "warn", "error", "off"};

int vr_log_parse_level(const char *name) {
  for (int i = 0; i <= VR_LOG_OFF; i++)
    if (name && strcmp(name, k_names[i]) == 0) return i;
  return -1;
}

int vr_log_level(void) {
  int l = atomic_load_explicit(&g_level, memory_order_relaxed);
  if (l >= 0) return l;
  l = vr_log_parse_level(getenv("VARIO_LOG"));
  if (l < 0) l = VR_LOG_INFO;
  atomic_store(&g_level, l);
  return l;
}

void vr_log_set_level(int level) { atomic_store(&g_level, level); }

void vr_log_at(int level, const char *file, int line, const char *fmt, ...) {
  char buf[1024];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  const char *base = strrchr(file, '/');
  int n = snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03ld %-5s %s:%d ",
                   tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                   k_names[level < 0 ? 0 : level > 3 ? 3 : level],
                   base ? base + 1 : file, line);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && n < (int)sizeof buf)
    n += vsnprintf(buf + n, sizeof buf - n, fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof buf - 1) n = sizeof buf - 2;
  buf[n++] = '\n';
  /* One write() per line keeps lines whole across threads. */
  ssize_t w = write(STDERR_FILENO, buf, n);
  (void)w;
}
