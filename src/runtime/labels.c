#include "runtime/labels.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

#define MAX_BYTES ((size_t)64 << 20)

struct vr_labels {
  int refs;      /* atomic */
  int64_t n;
  char **line;   /* n pointers into text */
  char *text;    /* owned: the file with each line end replaced by NUL */
};

int vr_labels_parse(const char *text, size_t len, const char *what,
                    int64_t classes, vr_labels **out, vr_errbuf *err) {
  *out = NULL;
  if (len == 0)
    return vr_errf(err, VR_EFORMAT, "label file %s is empty", what);
  if (len > MAX_BYTES)
    return vr_errf(err, VR_ELIMIT, "label file %s is over 64 MiB", what);
  if (memchr(text, 0, len))
    return vr_errf(err, VR_EFORMAT, "label file %s holds a NUL byte (not"
                   " text: one label per line)", what);
  int64_t n = 0;
  for (size_t i = 0; i < len; i++) n += text[i] == '\n';
  if (text[len - 1] != '\n') n++; /* a last line without its end */
  if (classes > 0 && n != classes)
    return vr_errf(err, VR_ESHAPE, "label file %s has %lld labels; the output"
                   " has %lld classes", what, (long long)n, (long long)classes);
  vr_labels *l = VR_NEW(vr_labels);
  char *t = l ? vr_malloc(len + 1) : NULL;
  char **line = t ? vr_calloc((size_t)n, sizeof *line) : NULL;
  if (!line) {
    vr_free(t);
    vr_free(l);
    return vr_errf(err, VR_ENOMEM, "out of memory reading labels %s", what);
  }
  memcpy(t, text, len);
  t[len] = 0;
  int64_t k = 0;
  for (char *p = t; k < n; k++) {
    line[k] = p;
    char *e = strchr(p, '\n');
    if (!e) break;
    *e = 0;
    if (e > p && e[-1] == '\r') e[-1] = 0;
    p = e + 1;
  }
  l->refs = 1;
  l->n = n;
  l->line = line;
  l->text = t;
  *out = l;
  return 0;
}

int vr_labels_load(const char *path, int64_t classes, vr_labels **out,
                   vr_errbuf *err) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return vr_errf(err, VR_ENOENT, "label file %s cannot be read", path);
  long size = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
  if (size < 0 || fseek(f, 0, SEEK_SET)) {
    fclose(f);
    return vr_errf(err, VR_EIO, "label file %s: not a regular file", path);
  }
  if ((size_t)size > MAX_BYTES) {
    fclose(f);
    return vr_errf(err, VR_ELIMIT, "label file %s is over 64 MiB", path);
  }
  char *buf = vr_malloc((size_t)size + 1);
  size_t len = buf ? fread(buf, 1, (size_t)size, f) : 0;
  int bad = ferror(f) || len != (size_t)size;
  fclose(f);
  int rc;
  if (!buf)
    rc = vr_errf(err, VR_ENOMEM, "out of memory reading labels %s", path);
  else if (bad)
    rc = vr_errf(err, VR_EIO, "label file %s: read error", path);
  else
    rc = vr_labels_parse(buf, len, path, classes, out, err);
  vr_free(buf);
  return rc;
}

void vr_labels_retain(vr_labels *l) {
  if (l) __atomic_fetch_add(&l->refs, 1, __ATOMIC_RELAXED);
}

void vr_labels_release(vr_labels *l) {
  if (!l || __atomic_sub_fetch(&l->refs, 1, __ATOMIC_ACQ_REL)) return;
  vr_free(l->line);
  vr_free(l->text);
  vr_free(l);
}

int64_t vr_labels_count(const vr_labels *l) { return l ? l->n : 0; }

const char *vr_labels_get(const vr_labels *l, int64_t i) {
  return l && i >= 0 && i < l->n ? l->line[i] : NULL;
}
