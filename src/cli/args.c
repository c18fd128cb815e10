/* Option values of the subcommands (commands.h): strict, so that a typo
 * ("--duration 3s", "--threads two") is refused with the option named
 * instead of read as 0 or a default by atoi/atof. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"

int vr__cli_int(const char *cmd, const char *opt, const char *s, long lo, long hi,
                int *out) {
  long long v;
  if (vr__cli_ll(cmd, opt, s, lo, hi, &v)) return -1;
  *out = (int)v;
  return 0;
}

int vr__cli_parse_ll(const char *s, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long v = s ? strtoll(s, &end, 10) : 0;
  if (!s || !*s || *end || errno || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int vr__cli_parse_int(const char *s, long lo, long hi, int *out) {
  long long v;
  if (lo < INT_MIN || hi > INT_MAX || vr__cli_parse_ll(s, lo, hi, &v)) return -1;
  *out = (int)v;
  return 0;
}

int vr__cli_parse_num(const char *s, double lo, double hi, double *out) {
  char *end;
  double v = s ? strtod(s, &end) : 0;
  if (!s || !*s || *end || !isfinite(v) || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int vr__cli_parse_pos(const char *s, double hi, double *out) {
  double v;
  if (vr__cli_parse_num(s, 0, hi, &v) || !(v > 0)) return -1;
  *out = v;
  return 0;
}

int vr__cli_ll(const char *cmd, const char *opt, const char *s, long long lo, long long hi,
               long long *out) {
  if (!vr__cli_parse_ll(s, lo, hi, out)) return 0;
  fprintf(stderr, "vario %s: %s wants a whole number in [%lld, %lld], not '%s'\n", cmd, opt, lo,
          hi, s ? s : "");
  return -1;
}

int vr__cli_num(const char *cmd, const char *opt, const char *s, double lo, double hi,
                double *out) {
  if (!vr__cli_parse_num(s, lo, hi, out)) return 0;
  fprintf(stderr, "vario %s: %s wants a number in [%g, %g], not '%s'\n", cmd, opt, lo, hi,
          s ? s : "");
  return -1;
}
