#include "server/multipart.h"

#include <string.h>
#include <strings.h>

static int bchar(int c) { /* RFC 2046 bcharsnospace (space allowed inside) */
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
         (c >= 'A' && c <= 'Z') || (c && strchr("'()+_,-./:=? ", c));
}

int vr_mp_boundary(const char *ct, char *out, size_t cap, vr_errbuf *err) {
  if (!ct || strncasecmp(ct, "multipart/form-data", 19))
    return vr_errf(err, VR_EFORMAT, "Content-Type is not multipart/form-data");
  const char *p = ct + 19;
  for (;;) {
    while (*p == ' ' || *p == '\t') p++;
    if (*p != ';') break;
    p++;
    while (*p == ' ' || *p == '\t') p++;
    if (strncasecmp(p, "boundary=", 9)) {
      p = strchr(p, ';');
      if (!p) break;
      continue;
    }
    p += 9;
    int quoted = *p == '"';
    p += quoted;
    size_t n = 0;
    while (p[n] && (quoted ? p[n] != '"' : p[n] != ';' && p[n] != ' '))
      n++;
    if (quoted && p[n] != '"')
      return vr_errf(err, VR_EFORMAT, "multipart boundary: unterminated quote");
    if (n < 1 || n > 70 || n + 1 > cap || p[n - 1] == ' ')
      return vr_errf(err, VR_EFORMAT, "multipart boundary must be 1..70 characters");
    for (size_t i = 0; i < n; i++)
      if (!bchar((unsigned char)p[i]))
        return vr_errf(err, VR_EFORMAT, "multipart boundary has a bad character");
    memcpy(out, p, n);
    out[n] = 0;
    return 0;
  }
  return vr_errf(err, VR_EFORMAT, "multipart/form-data without a boundary");
}

static const char *find(const char *h, size_t hl, const char *n, size_t nl) {
  if (nl == 0 || hl < nl) return NULL;
  for (const char *p = h, *end = h + hl - nl + 1; p < end;) {
    const char *q = memchr(p, n[0], (size_t)(end - p));
    if (!q) return NULL;
    if (!memcmp(q, n, nl)) return q;
    p = q + 1;
  }
  return NULL;
}

/* name="..." (or filename="...") in a Content-Disposition value of length
 * n; the value goes to out. 1 found, 0 absent, -1 malformed. */
static int disp_param(const char *v, size_t n, const char *key, char *out,
                      size_t cap) {
  size_t kl = strlen(key);
  for (size_t i = 0; i + kl + 2 <= n; i++) {
    if ((i == 0 || v[i - 1] == ' ' || v[i - 1] == ';') &&
        !strncasecmp(v + i, key, kl) && v[i + kl] == '=') {
      size_t j = i + kl + 1, k = 0;
      if (j >= n || v[j] != '"') return -1;
      for (j++; j < n && v[j] != '"'; j++) {
        if (k + 1 >= cap || (unsigned char)v[j] < 0x20) return -1;
        out[k++] = v[j];
      }
      if (j >= n) return -1;
      out[k] = 0;
      return 1;
    }
  }
  return 0;
}

static int valid_name(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') ||
          (*s >= 'A' && *s <= 'Z') || *s == '_'))
      return 0;
  return 1;
}

/* Header lines of one part, [p, end) ending with the blank line. */
static int part_headers(const char *p, size_t n, vr_mp_part *pt,
                        vr_errbuf *err) {
  int lines = 0, disp = 0;
  while (n) {
    const char *eol = find(p, n, "\r\n", 2);
    if (!eol) return vr_errf(err, VR_EFORMAT, "multipart: header line without CRLF");
    size_t l = (size_t)(eol - p);
    if (l == 0) break;
    if (++lines > 8 || l > 1024)
      return vr_errf(err, VR_EFORMAT, "multipart: too many or too long part headers");
    for (size_t i = 0; i < l; i++)
      if ((unsigned char)p[i] < 0x20 && p[i] != '\t')
        return vr_errf(err, VR_EFORMAT, "multipart: control byte in a part header");
    if (l > 20 && !strncasecmp(p, "Content-Disposition:", 20)) {
      const char *v = p + 20;
      size_t vl = l - 20;
      while (vl && *v == ' ') v++, vl--;
      char tmp[256];
      if (disp++ || vl < 9 || strncasecmp(v, "form-data", 9) ||
          disp_param(v, vl, "name", pt->name, sizeof pt->name) != 1 ||
          !valid_name(pt->name))
        return vr_errf(err, VR_EFORMAT, "multipart: each part needs one "
                       "Content-Disposition: form-data; name=\"[A-Za-z0-9_]+\"");
      int f = disp_param(v, vl, "filename", tmp, sizeof tmp);
      if (f < 0) return vr_errf(err, VR_EFORMAT, "multipart: bad filename parameter");
      pt->has_filename = f;
    }
    p = eol + 2;
    n -= l + 2;
  }
  if (!disp) return vr_errf(err, VR_EFORMAT, "multipart: a part has no Content-Disposition");
  return 0;
}

int vr_mp_parse(const char *boundary, const char *body, size_t len,
                vr_mp_part *parts, int *n, vr_errbuf *err) {
  char delim[80];
  size_t bl = strlen(boundary);
  if (bl < 1 || bl > 70) return vr_errf(err, VR_EFORMAT, "bad multipart boundary");
  delim[0] = '\r', delim[1] = '\n', delim[2] = '-', delim[3] = '-';
  memcpy(delim + 4, boundary, bl);
  size_t dl = bl + 4;
  *n = 0;
  /* The body opens with the first delimiter (no preamble). */
  if (len < dl - 2 || memcmp(body, delim + 2, dl - 2))
    return vr_errf(err, VR_EFORMAT, "multipart body does not start with its boundary");
  size_t pos = dl - 2;
  for (;;) {
    if (len - pos >= 2 && !memcmp(body + pos, "--", 2)) break; /* close */
    if (len - pos < 2 || memcmp(body + pos, "\r\n", 2))
      return vr_errf(err, VR_EFORMAT, "multipart: bad delimiter line");
    pos += 2;
    if (*n == VR_MP_MAX_PARTS)
      return vr_errf(err, VR_EFORMAT, "multipart: more than %d parts", VR_MP_MAX_PARTS);
    vr_mp_part *pt = &parts[*n];
    memset(pt, 0, sizeof *pt);
    const char *hend = find(body + pos, len - pos, "\r\n\r\n", 4);
    /* a part with no header lines at all starts with the blank line */
    if (len - pos >= 2 && !memcmp(body + pos, "\r\n", 2)) hend = body + pos - 2;
    if (!hend) return vr_errf(err, VR_EFORMAT, "multipart: part headers do not end");
    int rc = part_headers(body + pos, (size_t)(hend - (body + pos)) + 2, pt, err);
    if (rc) return rc;
    pos = (size_t)(hend - body) + 4;
    const char *end = find(body + pos, len - pos, delim, dl);
    if (!end) return vr_errf(err, VR_EFORMAT, "multipart: no closing boundary");
    pt->data = body + pos;
    pt->len = (size_t)(end - (body + pos));
    for (int i = 0; i < *n; i++)
      if (!strcmp(parts[i].name, pt->name))
        return vr_errf(err, VR_EFORMAT, "multipart: part '%s' twice", pt->name);
    (*n)++;
    pos = (size_t)(end - body) + dl;
  }
  return 0; /* an epilogue after the close delimiter is ignored (RFC 2046) */
}

const vr_mp_part *vr_mp_find(const vr_mp_part *parts, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(parts[i].name, name)) return &parts[i];
  return NULL;
}
