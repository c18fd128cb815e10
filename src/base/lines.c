#include "base/lines.h"

#include <string.h>
#include <sys/stat.h>

int vr_read_line(FILE *f, char *buf, size_t cap, const char *path, long *ln, size_t *len,
                 vr_errbuf *err) {
  if (!fgets(buf, (int)cap, f)) {
    if (ferror(f)) return vr_errf(err, VR_EIO, "%s:%ld: read error", path, *ln + 1);
    return 0;
  }
  ++*ln;
  size_t n = strlen(buf);
  if (n && buf[n - 1] == '\n') n--;
  else if (!feof(f))
    return vr_errf(err, VR_EFORMAT, "%s:%ld: line longer than %zu bytes", path, *ln,
                   cap - 2);
  if (n && buf[n - 1] == '\r') n--;
  buf[n] = 0;
  if (len) *len = n;
  return 1;
}

FILE *vr_open_regular(const char *path) {
  FILE *f = fopen(path, "r");
  struct stat st;
  if (f && (fstat(fileno(f), &st) || !S_ISREG(st.st_mode))) {
    fclose(f);
    f = NULL;
  }
  return f;
}
