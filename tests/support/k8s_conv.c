/* Reader for recorded HTTP conversations (see k8s_conv.h). Strict: an
 * unknown key, a wrong type or an odd value is an error naming the
 * exchange, so a typo in a recording cannot silently weaken the test. */
#include "k8s_conv.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && cap) vsnprintf(err, cap, fmt, ap);
  va_end(ap);
  return -1;
}

char *vr_kc_unescape(const char *s, size_t n) {
  char *o = malloc(n + 1);
  if (!o) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= n) {
        free(o);
        return NULL;
      }
      if (!isxdigit((unsigned char)s[i + 1]) ||
          !isxdigit((unsigned char)s[i + 2])) {
        free(o);
        return NULL;
      }
      char hex[3] = {s[i + 1], s[i + 2], 0};
      c = (char)strtol(hex, NULL, 16);
      i += 2;
    }
    if (c == 0) {
      free(o);
      return NULL;
    }
    o[k++] = c;
  }
  o[k] = 0;
  return o;
}

/* {"Name": "value", ...} into kv pairs. */
static int kv_object(json_t *o, vr_kc_kv **out, size_t *n, const char *what,
                     size_t idx, char *err, size_t cap) {
  *out = NULL;
  *n = 0;
  if (!o) return 0;
  if (!json_is_object(o))
    return fail(err, cap, "exchange %zu: %s not an object", idx, what);
  size_t m = json_object_size(o);
  if (m > 64) return fail(err, cap, "exchange %zu: too many %s", idx, what);
  *out = calloc(m ? m : 1, sizeof **out);
  if (!*out) return fail(err, cap, "out of memory");
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    if (!json_is_string(v))
      return fail(err, cap, "exchange %zu: %s '%s' not a string", idx, what,
                  k);
    if (!*k || strpbrk(k, ": \r\n") || strpbrk(json_string_value(v), "\r\n"))
      return fail(err, cap, "exchange %zu: bad %s '%s'", idx, what, k);
    (*out)[*n].name = strdup(k);
    (*out)[*n].value = strdup(json_string_value(v));
    (*n)++;
    if (!(*out)[*n - 1].name || !(*out)[*n - 1].value)
      return fail(err, cap, "out of memory");
  }
  return 0;
}

static int only_keys(json_t *o, const char *const *keys, size_t idx,
                     const char *what, char *err, size_t cap) {
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    int ok = 0;
    for (const char *const *p = keys; *p; p++)
      if (!strcmp(*p, k)) ok = 1;
    if (!ok)
      return fail(err, cap, "exchange %zu: unknown key '%s' in %s", idx, k,
                  what);
  }
  return 0;
}

static int parse_query(vr_kc_exchange *e, const char *q, size_t idx,
                       char *err, size_t cap) {
  size_t m = 1;
  for (const char *p = q; *p; p++) m += *p == '&';
  if (m > 32) return fail(err, cap, "exchange %zu: query too long", idx);
  e->query = calloc(m, sizeof *e->query);
  if (!e->query) return fail(err, cap, "out of memory");
  const char *s = q;
  while (*s) {
    const char *amp = strchr(s, '&');
    size_t len = amp ? (size_t)(amp - s) : strlen(s);
    const char *eq = memchr(s, '=', len);
    if (!eq || eq == s)
      return fail(err, cap, "exchange %zu: query part without key=value",
                  idx);
    vr_kc_kv *kv = &e->query[e->nquery++];
    kv->name = vr_kc_unescape(s, (size_t)(eq - s));
    kv->value = vr_kc_unescape(eq + 1, len - (size_t)(eq - s) - 1);
    if (!kv->name || !kv->value)
      return fail(err, cap, "exchange %zu: bad %%-escape in query", idx);
    if (!amp) break;
    s = amp + 1;
  }
  return 0;
}

static int parse_exchange(json_t *x, vr_kc_exchange *e, size_t idx,
                          char *err, size_t cap) {
  static const char *const xk[] = {"request", "response", "note", NULL};
  static const char *const rqk[] = {"method", "path", "headers", "body",
                                    NULL};
  static const char *const rsk[] = {"status", "headers", "body", NULL};
  if (!json_is_object(x))
    return fail(err, cap, "exchange %zu: not an object", idx);
  if (only_keys(x, xk, idx, "exchange", err, cap)) return -1;
  json_t *rq = json_object_get(x, "request");
  json_t *rs = json_object_get(x, "response");
  if (!json_is_object(rq) || !json_is_object(rs))
    return fail(err, cap, "exchange %zu: needs request and response objects",
                idx);
  if (only_keys(rq, rqk, idx, "request", err, cap) ||
      only_keys(rs, rsk, idx, "response", err, cap))
    return -1;
  json_t *m = json_object_get(rq, "method"), *p = json_object_get(rq, "path");
  if (!json_is_string(m) || !json_is_string(p))
    return fail(err, cap, "exchange %zu: request needs method and path "
                "strings", idx);
  const char *ms = json_string_value(m), *ps = json_string_value(p);
  static const char *const methods[] = {"GET", "PATCH", "PUT", "POST",
                                        "DELETE", NULL};
  int okm = 0;
  for (const char *const *q = methods; *q; q++) okm |= !strcmp(*q, ms);
  if (!okm) return fail(err, cap, "exchange %zu: method '%s'", idx, ms);
  if (ps[0] != '/' || strpbrk(ps, " \r\n#"))
    return fail(err, cap, "exchange %zu: path must start with '/' and have "
                "no spaces", idx);
  e->method = strdup(ms);
  const char *qm = strchr(ps, '?');
  e->path = qm ? vr_kc_unescape(ps, (size_t)(qm - ps))
               : vr_kc_unescape(ps, strlen(ps));
  if (!e->method || !e->path)
    return fail(err, cap, "exchange %zu: bad path", idx);
  if (qm && parse_query(e, qm + 1, idx, err, cap)) return -1;
  if (kv_object(json_object_get(rq, "headers"), &e->headers, &e->nheaders,
                "request header", idx, err, cap))
    return -1;
  json_t *b = json_object_get(rq, "body");
  if (b) e->body = json_incref(b);
  json_t *st = json_object_get(rs, "status");
  if (!json_is_integer(st) || json_integer_value(st) < 100 ||
      json_integer_value(st) > 599)
    return fail(err, cap, "exchange %zu: response status not 100..599", idx);
  e->status = (int)json_integer_value(st);
  if (kv_object(json_object_get(rs, "headers"), &e->rheaders, &e->nrheaders,
                "response header", idx, err, cap))
    return -1;
  json_t *rb = json_object_get(rs, "body");
  e->rbody = rb ? json_dumps(rb, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("");
  if (!e->rbody) return fail(err, cap, "exchange %zu: response body", idx);
  return 0;
}

int vr_kc_parse(const char *text, size_t len, vr_kc_conv *out, char *err,
                size_t cap) {
  memset(out, 0, sizeof *out);
  json_error_t je;
  json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
  if (!j) return fail(err, cap, "line %d: %s", je.line, je.text);
  int rc = -1;
  static const char *const top[] = {"description", "exchanges", NULL};
  json_t *d = json_object_get(j, "description");
  json_t *xs = json_object_get(j, "exchanges");
  if (!json_is_object(j)) {
    fail(err, cap, "not a JSON object");
  } else if (only_keys(j, top, 0, "conversation", err, cap)) {
  } else if (!json_is_string(d)) {
    fail(err, cap, "no description string");
  } else if (!json_is_array(xs) || json_array_size(xs) == 0 ||
             json_array_size(xs) > 256) {
    fail(err, cap, "exchanges: 1..256 expected");
  } else {
    out->description = strdup(json_string_value(d));
    out->ex = calloc(json_array_size(xs), sizeof *out->ex);
    if (!out->description || !out->ex) {
      fail(err, cap, "out of memory");
    } else {
      rc = 0;
      for (size_t i = 0; rc == 0 && i < json_array_size(xs); i++) {
        out->n = i + 1;
        rc = parse_exchange(json_array_get(xs, i), &out->ex[i], i, err, cap);
      }
    }
  }
  json_decref(j);
  if (rc) vr_kc_free(out);
  return rc;
}

int vr_kc_load(const char *path, vr_kc_conv *out, char *err, size_t cap) {
  FILE *f = fopen(path, "rb");
  if (!f) return fail(err, cap, "%s: cannot open", path);
  char *buf = malloc(1 << 20);
  size_t n = buf ? fread(buf, 1, 1 << 20, f) : 0;
  fclose(f);
  if (!buf) return fail(err, cap, "out of memory");
  int rc = vr_kc_parse(buf, n, out, err, cap);
  free(buf);
  return rc;
}

static void kv_free(vr_kc_kv *kv, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(kv[i].name);
    free(kv[i].value);
  }
  free(kv);
}

void vr_kc_free(vr_kc_conv *c) {
  for (size_t i = 0; i < c->n; i++) {
    vr_kc_exchange *e = &c->ex[i];
    free(e->method);
    free(e->path);
    kv_free(e->query, e->nquery);
    kv_free(e->headers, e->nheaders);
    json_decref(e->body);
    kv_free(e->rheaders, e->nrheaders);
    free(e->rbody);
  }
  free(c->ex);
  free(c->description);
  memset(c, 0, sizeof *c);
}
