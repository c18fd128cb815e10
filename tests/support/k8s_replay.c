/*
 * A loopback HTTPS server (libmicrohttpd + GnuTLS) that replays a recorded
 * conversation (k8s_conv.h): the i-th request must match the i-th
 * recorded request (method, path, query, recorded headers, JSON body),
 * and gets the recorded answer. The first mismatch is kept (the test
 * asserts there is none) and answered 500 with a Status naming it, so the
 * client fails too. Requests beyond the recording are mismatches.
 */
#include "k8s_replay.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct vr_kr_server {
  struct MHD_Daemon *d;
  const vr_kc_conv *conv;
  pthread_mutex_t mu;
  size_t next;
  char error[1024];
};

typedef struct {
  char *body;
  size_t len, cap;
} req_state;

static void mismatch(vr_kr_server *s, const char *fmt, ...) {
  if (s->error[0]) return; /* keep the first */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->error, sizeof s->error, fmt, ap);
  va_end(ap);
}

typedef struct {
  const vr_kc_exchange *e;
  size_t seen;
  int bad;
  char what[256];
} qcheck;

static enum MHD_Result count_arg(void *cls, enum MHD_ValueKind kind,
                                 const char *key, const char *value) {
  qcheck *q = cls;
  q->seen++;
  for (size_t i = 0; i < q->e->nquery; i++)
    if (!strcmp(q->e->query[i].name, key)) {
      if (!value || strcmp(q->e->query[i].value, value)) {
        q->bad = 1;
        snprintf(q->what, sizeof q->what, "query %s='%s', recorded '%s'", key,
                 value ? value : "(none)", q->e->query[i].value);
      }
      return MHD_YES;
    }
  q->bad = 1;
  snprintf(q->what, sizeof q->what, "unexpected query parameter %s", key);
  return MHD_YES;
}

/* "" when the request matches exchange e, else what differs. */
static void check(struct MHD_Connection *c, const vr_kc_exchange *e,
                  const char *method, const char *url, const req_state *r,
                  char *why, size_t cap) {
  why[0] = 0;
  if (strcmp(method, e->method)) {
    snprintf(why, cap, "method %s, recorded %s", method, e->method);
    return;
  }
  if (strcmp(url, e->path)) {
    snprintf(why, cap, "path %s, recorded %s", url, e->path);
    return;
  }
  qcheck q = {e, 0, 0, {0}};
  MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, count_arg, &q);
  if (q.bad) {
    snprintf(why, cap, "%s", q.what);
    return;
  }
  if (q.seen != e->nquery) {
    snprintf(why, cap, "%zu query parameters, recorded %zu", q.seen,
             e->nquery);
    return;
  }
  for (size_t i = 0; i < e->nheaders; i++) {
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                e->headers[i].name);
    if (!v || strcmp(v, e->headers[i].value)) {
      snprintf(why, cap, "header %s: '%s', recorded '%s'", e->headers[i].name,
               v ? v : "(absent)", e->headers[i].value);
      return;
    }
  }
  if (!e->body) {
    if (r->len) snprintf(why, cap, "a body of %zu bytes, none recorded", r->len);
    return;
  }
  json_error_t je;
  json_t *got = json_loadb(r->body ? r->body : "", r->len, 0, &je);
  if (!got) {
    snprintf(why, cap, "body is not JSON (%s): %.200s", je.text,
             r->body ? r->body : "");
    return;
  }
  if (!json_equal(got, e->body)) {
    char *want = json_dumps(e->body, JSON_COMPACT | JSON_SORT_KEYS);
    char *have = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
    snprintf(why, cap, "body %.300s, recorded %.300s", have ? have : "?",
             want ? want : "?");
    free(want);
    free(have);
  }
  json_decref(got);
}

static enum MHD_Result answer(struct MHD_Connection *c, int status,
                              const char *body, const vr_kc_kv *h, size_t nh) {
  struct MHD_Response *r = MHD_create_response_from_buffer(
      strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  for (size_t i = 0; i < nh; i++)
    MHD_add_response_header(r, h[i].name, h[i].value);
  enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
  MHD_destroy_response(r);
  return ok;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c,
                               const char *url, const char *method,
                               const char *version, const char *upload,
                               size_t *upload_size, void **con_cls) {
  vr_kr_server *s = cls;
  req_state *r = *con_cls;
  if (!r) {
    r = calloc(1, sizeof *r);
    if (!r) return MHD_NO;
    *con_cls = r;
    return MHD_YES;
  }
  if (*upload_size) {
    if (r->len + *upload_size + 1 > r->cap) {
      size_t nc = (r->len + *upload_size + 1) * 2;
      char *nb = realloc(r->body, nc);
      if (!nb) return MHD_NO;
      r->body = nb;
      r->cap = nc;
    }
    memcpy(r->body + r->len, upload, *upload_size);
    r->len += *upload_size;
    r->body[r->len] = 0;
    *upload_size = 0;
    return MHD_YES;
  }
  pthread_mutex_lock(&s->mu);
  char why[768];
  size_t i = s->next;
  const vr_kc_exchange *e = i < s->conv->n ? &s->conv->ex[i] : NULL;
  if (!e) snprintf(why, sizeof why, "request beyond the recording");
  else check(c, e, method, url, r, why, sizeof why);
  if (why[0]) mismatch(s, "exchange %zu: %s %s: %s", i, method, url, why);
  else s->next++;
  pthread_mutex_unlock(&s->mu);
  if (why[0]) {
    char body[1200];
    snprintf(body, sizeof body, "{\"kind\":\"Status\",\"apiVersion\":\"v1\","
             "\"status\":\"Failure\",\"reason\":\"ReplayMismatch\","
             "\"message\":\"replay mismatch\",\"code\":500}");
    static const vr_kc_kv ct = {"Content-Type", "application/json"};
    return answer(c, 500, body, &ct, 1);
  }
  return answer(c, e->status, e->rbody, e->rheaders, e->nrheaders);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe) {
  req_state *r = *con_cls;
  if (r) {
    free(r->body);
    free(r);
  }
  *con_cls = NULL;
}

vr_kr_server *vr_kr_start(const vr_kc_conv *conv, const char *cert_pem,
                          const char *key_pem, int *port) {
  if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) return NULL;
  vr_kr_server *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->conv = conv;
  pthread_mutex_init(&s->mu, NULL);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  s->d = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_TLS, 0, NULL, NULL, handler,
      s, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_HTTPS_MEM_KEY, key_pem,
      MHD_OPTION_HTTPS_MEM_CERT, cert_pem, MHD_OPTION_NOTIFY_COMPLETED,
      completed, s, MHD_OPTION_END);
  if (!s->d) {
    pthread_mutex_destroy(&s->mu);
    free(s);
    return NULL;
  }
  const union MHD_DaemonInfo *di =
      MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  *port = di ? di->port : 0;
  return s;
}

size_t vr_kr_consumed(vr_kr_server *s) {
  pthread_mutex_lock(&s->mu);
  size_t n = s->next;
  pthread_mutex_unlock(&s->mu);
  return n;
}

const char *vr_kr_error(vr_kr_server *s) {
  pthread_mutex_lock(&s->mu);
  const char *e = s->error[0] ? s->error : NULL;
  pthread_mutex_unlock(&s->mu);
  return e;
}

void vr_kr_stop(vr_kr_server *s) {
  if (!s) return;
  MHD_stop_daemon(s->d);
  pthread_mutex_destroy(&s->mu);
  free(s);
}
