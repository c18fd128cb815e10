/*
 * Levelled logging to stderr. Thread-safe (one write per line).
 * The level comes from VARIO_LOG=debug|info|warn|error|off at first use,
 * or vr_log_set_level().
 */
#ifndef VR_BASE_LOG_H
#define VR_BASE_LOG_H

enum { VR_LOG_DEBUG = 0, VR_LOG_INFO, VR_LOG_WARN, VR_LOG_ERROR, VR_LOG_OFF };

void vr_log_set_level(int level);
int vr_log_level(void);
/* Parses "debug", "info", ...; returns -1 for an unknown name. */
int vr_log_parse_level(const char *name);
void vr_log_at(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define vr_log(level, ...)                                   \
  do {                                                       \
    if ((level) >= vr_log_level())                           \
      vr_log_at((level), __FILE__, __LINE__, __VA_ARGS__);   \
  } while (0)
#define vr_debug(...) vr_log(VR_LOG_DEBUG, __VA_ARGS__)
#define vr_info(...) vr_log(VR_LOG_INFO, __VA_ARGS__)
#define vr_warn(...) vr_log(VR_LOG_WARN, __VA_ARGS__)
#define vr_error(...) vr_log(VR_LOG_ERROR, __VA_ARGS__)

#endif
