#define _XOPEN_SOURCE 700
#include "control/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"

int vr_mkdirs(const char *path, vr_errbuf *err) {
  char buf[1024];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
    return vr_errf(err, VR_ERANGE, "path too long: %s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
      return vr_errf(err, VR_EIO, "mkdir '%s': %s", buf, strerror(errno));
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST)
    return vr_errf(err, VR_EIO, "mkdir '%s': %s", buf, strerror(errno));
  return 0;
}

int vr_copy_file(const char *src, const char *dst, vr_errbuf *err) {
  int in = open(src, O_RDONLY | O_CLOEXEC);
  if (in < 0) return vr_errf(err, VR_EIO, "open '%s': %s", src, strerror(errno));
  int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    close(in);
    return vr_errf(err, VR_EIO, "create '%s': %s", dst, strerror(errno));
  }
  char buf[1 << 16];
  int rc = 0;
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0) {
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(out, buf + off, (size_t)(n - off));
      if (w < 0) {
        rc = vr_errf(err, VR_EIO, "write '%s': %s", dst, strerror(errno));
        goto done;
      }
      off += w;
    }
  }
  if (n < 0) rc = vr_errf(err, VR_EIO, "read '%s': %s", src, strerror(errno));
done:
  close(in);
  if (close(out) != 0 && rc == 0)
    rc = vr_errf(err, VR_EIO, "close '%s': %s", dst, strerror(errno));
  return rc;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
  (void)st; (void)flag; (void)f;
  remove(p);
  return 0;
}

int vr_rmtree(const char *path) {
  if (!vr_path_exists(path)) return 0;
  return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : VR_EIO;
}

int vr_path_exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

int vr_read_file(const char *path, char **out, size_t *len, vr_errbuf *err) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return vr_errf(err, VR_EIO, "open '%s': %s", path, strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = vr_malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n - 1, f);
    if (n < cap - 1) break;
    char *nb = vr_realloc(buf, cap * 2);
    if (!nb) vr_free(buf);
    buf = nb;
    cap *= 2;
  }
  int bad = ferror(f);
  fclose(f);
  if (!buf) return vr_errf(err, VR_ENOMEM, "out of memory reading '%s'", path);
  if (bad) {
    vr_free(buf);
    return vr_errf(err, VR_EIO, "read '%s' failed", path);
  }
  buf[n] = '\0';
  *out = buf;
  if (len) *len = n;
  return 0;
}

int vr_path_join(char *out, size_t cap, const char *dir, const char *name) {
  int n = snprintf(out, cap, "%s/%s", dir, name);
  return n < 0 || (size_t)n >= cap ? VR_ERANGE : 0;
}
