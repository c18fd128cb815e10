#include "server/encoding.h"

#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "base/alloc.h"

vr_content_coding vr_content_coding_of(const char *h) {
  if (!h) return VR_CE_IDENTITY;
  while (*h == ' ' || *h == '\t') h++;
  size_t n = strcspn(h, " \t,");
  const char *rest = h + n;
  while (*rest == ' ' || *rest == '\t') rest++;
  if (*rest) return VR_CE_UNKNOWN; /* a list: "gzip, identity" is not taken */
  if (n == 0 || (n == 8 && !strncasecmp(h, "identity", 8))) return VR_CE_IDENTITY;
  if ((n == 4 && !strncasecmp(h, "gzip", 4)) || (n == 6 && !strncasecmp(h, "x-gzip", 6)) ||
      (n == 7 && !strncasecmp(h, "deflate", 7)))
    return VR_CE_INFLATE;
  return VR_CE_UNKNOWN;
}

int vr_inflate_body(const char *in, size_t n, size_t max, char **out, size_t *out_len,
                    vr_errbuf *err) {
  z_stream z;
  memset(&z, 0, sizeof z);
  /* 15 + 32: zlib or gzip, whichever header the data carries */
  if (inflateInit2(&z, 15 + 32) != Z_OK) return vr_errf(err, VR_ENOMEM, "out of memory");
  size_t cap = n * 4 + 1024, len = 0;
  if (cap > max + 1) cap = max + 1;
  char *buf = vr_malloc(cap + 1);
  int rc = buf ? 0 : vr_errf(err, VR_ENOMEM, "out of memory");
  z.next_in = (Bytef *)in;
  int zr = Z_OK;
  while (!rc) {
    /* zlib counts in uInt: feed and drain in pieces below 4 GiB */
    size_t in_left = n - (size_t)((const char *)z.next_in - in);
    z.avail_in = (uInt)(in_left > 1u << 30 ? 1u << 30 : in_left);
    if (len == cap) {
      if (cap > max) {
        rc = vr_errf(err, VR_ERANGE, "request body inflates past %zu bytes", max);
        break;
      }
      size_t nc = cap * 2 > max + 1 ? max + 1 : cap * 2;
      char *p = vr_realloc(buf, nc + 1);
      if (!p) {
        rc = vr_errf(err, VR_ENOMEM, "out of memory");
        break;
      }
      buf = p;
      cap = nc;
    }
    size_t room = cap - len;
    z.next_out = (Bytef *)buf + len;
    z.avail_out = (uInt)(room > 1u << 30 ? 1u << 30 : room);
    uInt before = z.avail_out;
    zr = inflate(&z, Z_NO_FLUSH);
    len += before - z.avail_out;
    if (zr == Z_STREAM_END) break;
    if (zr == Z_BUF_ERROR && z.avail_in == 0 && len < cap)
      rc = vr_errf(err, VR_EFORMAT, "compressed request body ends early");
    else if (zr != Z_OK && zr != Z_BUF_ERROR)
      rc = vr_errf(err, VR_EFORMAT, "compressed request body is not valid gzip/deflate data"
                   " (%s)", z.msg ? z.msg : "zlib error");
  }
  if (!rc && len > max) rc = vr_errf(err, VR_ERANGE, "request body inflates past %zu bytes", max);
  if (!rc && (size_t)((const char *)z.next_in - in) != n)
    rc = vr_errf(err, VR_EFORMAT, "data after the end of the compressed request body");
  inflateEnd(&z);
  if (rc) {
    vr_free(buf);
    return rc;
  }
  buf[len] = 0;
  *out = buf;
  *out_len = len;
  return 0;
}
