#include "server/kjson.h"

#include <stdlib.h>
#include <string.h>

void vr_kj_init(vr_kj *j, const char *text, size_t len, vr_errbuf *err) {
  j->p = j->base = text;
  j->end = text + len;
  j->err = err;
  j->depth = 0;
}

int vr_kj_fail(vr_kj *j, const char *what) {
  return vr_errf(j->err, VR_EFORMAT, "malformed JSON at byte %zu: %s",
                 (size_t)(j->p - j->base), what);
}

int vr_kj_peek(vr_kj *j) {
  while (j->p < j->end &&
         (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
    j->p++;
  return j->p < j->end ? (unsigned char)*j->p : -1;
}

int vr_kj_finish(vr_kj *j) {
  return vr_kj_peek(j) == -1 ? 0 : vr_kj_fail(j, "text after the value");
}

static int expect(vr_kj *j, char c, const char *what) {
  if (vr_kj_peek(j) != (unsigned char)c) return vr_kj_fail(j, what);
  j->p++;
  return 0;
}

int vr_kj_obj_begin(vr_kj *j) {
  if (++j->depth > VR_KJ_MAX_DEPTH) return vr_kj_fail(j, "nested too deep");
  return expect(j, '{', "expected an object");
}

int vr_kj_arr_begin(vr_kj *j) {
  if (++j->depth > VR_KJ_MAX_DEPTH) return vr_kj_fail(j, "nested too deep");
  return expect(j, '[', "expected an array");
}

int vr_kj_obj_next(vr_kj *j, char *key, size_t cap, int *first) {
  int c = vr_kj_peek(j);
  if (c == '}' && *first) {
    j->p++;
    j->depth--;
    return 0;
  }
  if (!*first) {
    if (c == '}') {
      j->p++;
      j->depth--;
      return 0;
    }
    int rc = expect(j, ',', "expected ',' or '}'");
    if (rc) return rc;
  }
  *first = 0;
  int rc = vr_kj_string(j, key, cap);
  if (rc == VR_ELIMIT) return vr_kj_fail(j, "key too long");
  if (rc) return rc;
  rc = expect(j, ':', "expected ':'");
  return rc ? rc : 1;
}

int vr_kj_arr_next(vr_kj *j, int *first) {
  int c = vr_kj_peek(j);
  if (c == ']' && *first) {
    j->p++;
    j->depth--;
    return 0;
  }
  if (!*first) {
    if (c == ']') {
      j->p++;
      j->depth--;
      return 0;
    }
    int rc = expect(j, ',', "expected ',' or ']'");
    if (rc) return rc;
  }
  *first = 0;
  return 1;
}

static int hex4(const char *p, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return -1;
  }
  *out = v;
  return 0;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* \uXXXX (with a surrogate pair when needed) at j->p (after the 'u'). */
static int unicode_escape(vr_kj *j, unsigned *cp) {
  if (j->end - j->p < 4 || hex4(j->p, cp)) return vr_kj_fail(j, "bad \\u escape");
  j->p += 4;
  if (*cp >= 0xDC00 && *cp <= 0xDFFF) return vr_kj_fail(j, "lone surrogate");
  if (*cp >= 0xD800 && *cp <= 0xDBFF) {
    unsigned lo;
    if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' ||
        hex4(j->p + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
      return vr_kj_fail(j, "lone surrogate");
    j->p += 6;
    *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
  }
  return 0;
}

size_t vr_kj_utf8_len(const char *p, const char *end) {
  const unsigned char *s = (const unsigned char *)p;
  size_t n = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 ? 2 : 0;
  if (!n || s[0] > 0xF4 || (size_t)(end - p) < n) return 0;
  for (size_t i = 1; i < n; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  if (n == 3 && s[0] == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
  if (n == 3 && s[0] == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
  if (n == 4 && s[0] == 0xF0 && s[1] < 0x90) return 0;  /* overlong */
  if (n == 4 && s[0] == 0xF4 && s[1] >= 0x90) return 0; /* > U+10FFFF */
  return n;
}

int vr_kj_string(vr_kj *j, char *out, size_t cap) {
  int rc = expect(j, '"', "expected a string");
  if (rc) return rc;
  size_t n = 0;
  int too_long = 0;
  while (j->p < j->end && *j->p != '"') {
    unsigned char c = (unsigned char)*j->p;
    char tmp[4];
    size_t k = 1;
    if (c < 0x20) return vr_kj_fail(j, "control character in a string");
    if (c == '\\') {
      if (++j->p >= j->end) break;
      char e = *j->p++;
      unsigned cp = 0;
      switch (e) {
      case '"': tmp[0] = '"'; break;
      case '\\': tmp[0] = '\\'; break;
      case '/': tmp[0] = '/'; break;
      case 'b': tmp[0] = '\b'; break;
      case 'f': tmp[0] = '\f'; break;
      case 'n': tmp[0] = '\n'; break;
      case 'r': tmp[0] = '\r'; break;
      case 't': tmp[0] = '\t'; break;
      case 'u':
        if ((rc = unicode_escape(j, &cp))) return rc;
        if (cp == 0) return vr_kj_fail(j, "NUL in a string");
        k = put_utf8(tmp, cp);
        break;
      default: j->p--; return vr_kj_fail(j, "bad escape");
      }
    } else if (c < 0x80) {
      tmp[0] = (char)c;
      j->p++;
    } else {
      if (!(k = vr_kj_utf8_len(j->p, j->end)))
        return vr_kj_fail(j, "invalid UTF-8 in a string");
      memcpy(tmp, j->p, k);
      j->p += k;
    }
    if (cap) { /* cap 0: skip without storing */
      if (n + k >= cap) too_long = 1;
      else {
        memcpy(out + n, tmp, k);
        n += k;
      }
    }
  }
  if (j->p >= j->end) return vr_kj_fail(j, "unterminated string");
  j->p++;
  if (cap) out[n < cap ? n : cap - 1] = 0;
  return too_long ? VR_ELIMIT : 0;
}

static const double k_pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,
                                 1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17,
                                 1e18, 1e19, 1e20, 1e21, 1e22};

int vr_kj_number(vr_kj *j, double *d, int64_t *iv, int *is_int) {
  vr_kj_peek(j);
  const char *s = j->p, *p = s, *e = j->end;
  int neg = p < e && *p == '-';
  if (neg) p++;
  if (p >= e || *p < '0' || *p > '9') return vr_kj_fail(j, "expected a number");
  uint64_t mant = 0;
  int digits = 0, dexp = 0, overflow = 0;
  if (*p == '0') {
    p++;
  } else {
    for (; p < e && *p >= '0' && *p <= '9'; p++) {
      if (digits < 19) mant = mant * 10 + (uint64_t)(*p - '0'), digits++;
      else dexp++, overflow = 1;
    }
  }
  int integral = 1;
  if (p < e && *p == '.') {
    integral = 0;
    p++;
    if (p >= e || *p < '0' || *p > '9') return vr_kj_fail(j, "bad number");
    for (; p < e && *p >= '0' && *p <= '9'; p++)
      if (digits < 19) mant = mant * 10 + (uint64_t)(*p - '0'), digits++, dexp--;
      else overflow = 1;
  }
  if (p < e && (*p == 'e' || *p == 'E')) {
    integral = 0;
    p++;
    int eneg = p < e && *p == '-';
    if (p < e && (*p == '-' || *p == '+')) p++;
    if (p >= e || *p < '0' || *p > '9') return vr_kj_fail(j, "bad exponent");
    int x = 0;
    for (; p < e && *p >= '0' && *p <= '9'; p++)
      if (x < 100000) x = x * 10 + (*p - '0');
    dexp += eneg ? -x : x;
  }
  j->p = p;
  *is_int = integral && !overflow && (mant <= (uint64_t)INT64_MAX ||
                                      (neg && mant == (uint64_t)INT64_MAX + 1));
  if (*is_int) *iv = neg ? (int64_t)(0 - mant) : (int64_t)mant;
  /* Clinger's fast path: exact when the mantissa fits 2^53 and 10^|e| is
   * exact in a double; otherwise strtod on the token. */
  if (!overflow && mant <= (1ULL << 53) && dexp >= -22 && dexp <= 22) {
    double v = (double)mant;
    v = dexp < 0 ? v / k_pow10[-dexp] : v * k_pow10[dexp];
    *d = neg ? -v : v;
    return 0;
  }
  char buf[128];
  size_t n = (size_t)(p - s);
  if (n >= sizeof buf) {
    char *h = malloc(n + 1); /* rare: very long literal */
    if (!h) return vr_errf(j->err, VR_ENOMEM, "out of memory");
    memcpy(h, s, n);
    h[n] = 0;
    *d = strtod(h, NULL);
    free(h);
  } else {
    memcpy(buf, s, n);
    buf[n] = 0;
    *d = strtod(buf, NULL);
  }
  return 0;
}

static int literal(vr_kj *j, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n))
    return vr_kj_fail(j, "unknown literal");
  j->p += n;
  return 0;
}

int vr_kj_bool(vr_kj *j, int *out) {
  int c = vr_kj_peek(j);
  if (c == 't') { *out = 1; return literal(j, "true"); }
  if (c == 'f') { *out = 0; return literal(j, "false"); }
  return vr_errf(j->err, VR_EFORMAT, "expected true or false");
}

int vr_kj_skip(vr_kj *j) {
  int c = vr_kj_peek(j), rc, first = 1;
  char key[2];
  switch (c) {
  case '{':
    if ((rc = vr_kj_obj_begin(j))) return rc;
    while ((rc = vr_kj_obj_next(j, key, 0, &first)) == 1)
      if ((rc = vr_kj_skip(j))) return rc;
    return rc;
  case '[':
    if ((rc = vr_kj_arr_begin(j))) return rc;
    while ((rc = vr_kj_arr_next(j, &first)) == 1)
      if ((rc = vr_kj_skip(j))) return rc;
    return rc;
  case '"': return vr_kj_string(j, key, 0);
  case 't': return literal(j, "true");
  case 'f': return literal(j, "false");
  case 'n': return literal(j, "null");
  default: {
    if (c != '-' && (c < '0' || c > '9')) /* not a number either */
      return vr_kj_fail(j, c < 0 ? "the text ends before a value" : "expected a value");
    double d;
    int64_t i;
    int is_int;
    return vr_kj_number(j, &d, &i, &is_int);
  }
  }
}
