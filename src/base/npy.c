#include "base/npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAX_BYTES ((size_t)1 << 36) /* 64 GiB: beyond is surely bogus */

static const struct {
  const char *descr;
  vr_dtype dt;
} k_descr[] = {
    {"<f4", VR_DT_F32}, {"<f8", VR_DT_F64},  {"<f2", VR_DT_F16},
    {"<i8", VR_DT_I64}, {"<i4", VR_DT_I32},  {"<i2", VR_DT_I16},
    {"|i1", VR_DT_I8},  {"|u1", VR_DT_U8},   {"<u2", VR_DT_U16},
    {"<u4", VR_DT_U32}, {"<u8", VR_DT_U64},  {"|b1", VR_DT_BOOL},
    {"<i1", VR_DT_I8},  {"<u1", VR_DT_U8},
};

/* Finds 'key': in the header dict and returns a pointer just past the
 * colon and spaces, or NULL. */
static const char *dict_value(const char *hdr, const char *key) {
  char pat[32];
  snprintf(pat, sizeof pat, "'%s'", key);
  const char *p = strstr(hdr, pat);
  if (!p) return NULL;
  p += strlen(pat);
  while (*p == ' ') p++;
  if (*p != ':') return NULL;
  p++;
  while (*p == ' ') p++;
  return p;
}

static int parse_header(const char *hdr, vr_npy *out, vr_errbuf *err) {
  const char *d = dict_value(hdr, "descr");
  if (!d || (*d != '\'' && *d != '"'))
    return vr_errf(err, VR_EFORMAT, "npy: header has no 'descr'");
  char q = *d++;
  const char *e = strchr(d, q);
  if (!e || e - d > 8) return vr_errf(err, VR_EFORMAT, "npy: bad 'descr'");
  char descr[16];
  memcpy(descr, d, e - d);
  descr[e - d] = '\0';
  out->dtype = VR_DT_UNDEFINED;
  for (size_t i = 0; i < sizeof k_descr / sizeof k_descr[0]; i++)
    if (strcmp(descr, k_descr[i].descr) == 0) out->dtype = k_descr[i].dt;
  if (out->dtype == VR_DT_UNDEFINED)
    return vr_errf(err, VR_EUNSUPPORTED,
                   "npy: dtype '%s' not supported (little-endian numeric "
                   "types only)", descr);

  const char *f = dict_value(hdr, "fortran_order");
  if (!f) return vr_errf(err, VR_EFORMAT, "npy: header has no 'fortran_order'");
  if (strncmp(f, "True", 4) == 0)
    return vr_errf(err, VR_EUNSUPPORTED,
                   "npy: Fortran-order arrays are not supported");
  if (strncmp(f, "False", 5) != 0)
    return vr_errf(err, VR_EFORMAT, "npy: bad 'fortran_order'");

  const char *s = dict_value(hdr, "shape");
  if (!s || *s != '(') return vr_errf(err, VR_EFORMAT, "npy: bad 'shape'");
  s++;
  out->ndim = 0;
  for (;;) {
    while (*s == ' ' || *s == ',') s++;
    if (*s == ')') break;
    if (*s < '0' || *s > '9')
      return vr_errf(err, VR_EFORMAT, "npy: bad 'shape'");
    if (out->ndim == VR_NPY_MAX_DIMS)
      return vr_errf(err, VR_ELIMIT, "npy: more than %d dimensions",
                     VR_NPY_MAX_DIMS);
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || v < 0 || v > ((int64_t)1 << 40))
      return vr_errf(err, VR_EFORMAT, "npy: bad dimension in 'shape'");
    out->shape[out->ndim++] = v;
    s = end;
  }
  size_t n = vr_dtype_size(out->dtype);
  for (int i = 0; i < out->ndim; i++) {
    if (out->shape[i] && n > NPY_MAX_BYTES / (size_t)out->shape[i])
      return vr_errf(err, VR_ELIMIT, "npy: array too large");
    n *= (size_t)out->shape[i];
  }
  out->nbytes = n;
  return 0;
}

int vr_npy_parse(const void *buf, size_t len, vr_npy *out, vr_errbuf *err) {
  const unsigned char *p = buf;
  memset(out, 0, sizeof *out);
  if (len < 10 || memcmp(p, NPY_MAGIC, 6) != 0)
    return vr_errf(err, VR_EFORMAT, "npy: not a .npy file (bad magic)");
  int major = p[6];
  size_t hlen, off;
  if (major == 1) {
    hlen = p[8] | (size_t)p[9] << 8;
    off = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) return vr_errf(err, VR_EFORMAT, "npy: truncated header");
    hlen = p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 | (size_t)p[11] << 24;
    off = 12;
  } else {
    return vr_errf(err, VR_EUNSUPPORTED, "npy: format version %d", major);
  }
  if (hlen > 65536 || off + hlen > len)
    return vr_errf(err, VR_EFORMAT, "npy: truncated header");
  char *hdr = vr_malloc(hlen + 1);
  if (!hdr) return VR_ENOMEM;
  memcpy(hdr, p + off, hlen);
  hdr[hlen] = '\0';
  int rc = parse_header(hdr, out, err);
  vr_free(hdr);
  if (rc) return rc;
  off += hlen;
  if (len - off != out->nbytes)
    return vr_errf(err, VR_EFORMAT,
                   "npy: payload is %zu bytes but the header implies %zu",
                   len - off, out->nbytes);
  out->data = vr_aligned_alloc(64, out->nbytes ? out->nbytes : 1);
  if (!out->data) return VR_ENOMEM;
  memcpy(out->data, p + off, out->nbytes);
  return 0;
}

int vr_npy_read(const char *path, vr_npy *out, vr_errbuf *err) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f) return vr_errf(err, VR_ENOENT, "%s: %s", path, strerror(errno));
  int rc = 0;
  unsigned char *buf = NULL;
  if (fseek(f, 0, SEEK_END) != 0) {
    rc = vr_errf(err, VR_EIO, "%s: cannot seek", path);
    goto out;
  }
  long size = ftell(f);
  rewind(f);
  if (size < 0) {
    rc = vr_errf(err, VR_EIO, "%s: cannot size", path);
    goto out;
  }
  buf = vr_malloc(size ? size : 1);
  if (!buf) {
    rc = VR_ENOMEM;
    goto out;
  }
  if (fread(buf, 1, size, f) != (size_t)size) {
    rc = vr_errf(err, VR_EIO, "%s: short read", path);
    goto out;
  }
  rc = vr_npy_parse(buf, size, out, err);
  if (rc) vr_errctx(err, rc, "%s", path);
out:
  vr_free(buf);
  fclose(f);
  return rc;
}

int vr_npy_write(const char *path, vr_dtype dt, const int64_t *shape, int ndim,
                 const void *data, vr_errbuf *err) {
  const char *descr = NULL;
  for (size_t i = 0; i < sizeof k_descr / sizeof k_descr[0] && !descr; i++)
    if (k_descr[i].dt == dt) descr = k_descr[i].descr;
  if (!descr || ndim < 0 || ndim > VR_NPY_MAX_DIMS)
    return vr_errf(err, VR_EINVAL, "npy: cannot write dtype %s",
                   vr_dtype_name(dt));
  char hdr[256];
  int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, "
                   "'shape': (", descr);
  size_t count = 1;
  for (int i = 0; i < ndim; i++) {
    n += snprintf(hdr + n, sizeof hdr - n, "%lld%s", (long long)shape[i],
                  ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
    count *= (size_t)shape[i];
  }
  n += snprintf(hdr + n, sizeof hdr - n, "), }");
  /* Pad with spaces so that magic + len + header + '\n' is 64-aligned. */
  int total = 10 + n + 1;
  int pad = (64 - total % 64) % 64;
  FILE *f = fopen(path, "wb");
  if (!f) return vr_errf(err, VR_EIO, "%s: %s", path, strerror(errno));
  unsigned hl = (unsigned)(n + pad + 1);
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                           (unsigned char)(hl & 0xff), (unsigned char)(hl >> 8)};
  int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, n, f) == (size_t)n;
  for (int i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
  ok = ok && fputc('\n', f) != EOF;
  size_t bytes = count * vr_dtype_size(dt);
  ok = ok && fwrite(data, 1, bytes, f) == bytes;
  int e = ok ? 0 : errno; /* the first failure's reason (a full disk, a size limit) */
  if (fclose(f) != 0 && ok) ok = 0, e = errno;
  return ok ? 0 : vr_errf(err, VR_EIO, "%s: write failed: %s", path, strerror(e ? e : EIO));
}

void vr_npy_free(vr_npy *n) {
  vr_aligned_free(n->data);
  n->data = NULL;
}

int64_t vr_npy_numel(const vr_npy *n) {
  int64_t c = 1;
  for (int i = 0; i < n->ndim; i++) c *= n->shape[i];
  return c;
}
