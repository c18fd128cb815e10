/*
 * The kubernetes provider: one worker Deployment, scaled through its
 * scale subresource; its pods (by label selector) are the workers.
 *
 * HTTP is libcurl (TLS with the cluster's CA, one easy handle reused for
 * keep-alive, serialised by the provider's mutex), JSON is jansson
 * (k8s_json.c). Requests, all in the configured namespace:
 *
 *   GET   /apis/apps/v1/namespaces/NS/deployments/NAME/scale
 *   PATCH /apis/apps/v1/namespaces/NS/deployments/NAME/scale
 *         Content-Type: application/merge-patch+json
 *         {"metadata":{"resourceVersion":"RV"},"spec":{"replicas":N}}
 *   GET   /api/v1/namespaces/NS/pods?labelSelector=SEL
 *   PATCH /api/v1/namespaces/NS/pods/POD   (pick_pod only)
 *         {"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"-1000000"}}}
 *
 * The resourceVersion in the scale patch is a precondition: if the
 * Deployment changed since the GET (someone else scaled it), the server
 * answers 409 Conflict and we read again, instead of overwriting their
 * count with one computed from stale numbers.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/log.h"
#include "cluster/provider.h"
#include "cluster/provider_int.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define MAX_BODY (16 << 20) /* a PodList of thousands of pods fits */
#define CONFLICT_TRIES 4

typedef struct vr_k8s {
  vr_provider base;
  pthread_mutex_t mu;
  CURL *curl;
  char *api, *token_file, *ca_file, *ns, *deployment, *selector;
  char *scale_path, *pods_path;
  int max_rep, min_rep, timeout_ms, pick_pod, plain_http;
  /* the last list's pods (id, state), and exited pods forget() dropped:
   * hidden from later lists until the API stops reporting them (a Failed
   * or Evicted pod stays listed until it is garbage-collected, and would
   * otherwise be reported as a fresh death at every poll) */
  vr_worker_info *last;
  size_t nlast;
  char (*forgot)[64];
  size_t nforgot, capforgot;
  /* replicas asked for whose pods the API does not list yet (the
   * ReplicaSet creates them later, or a quota or admission refuses them)
   * are reported as starting, from when they were first missing or the
   * last scale-up: the controller would otherwise ask again every tick */
  int64_t pending_since;
  /* the response being received */
  char *buf;
  size_t len, cap;
  int too_big;
} vr_k8s;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static size_t on_data(char *p, size_t sz, size_t nm, void *ud) {
  vr_k8s *k = ud;
  size_t n = sz * nm;
  if (k->len + n + 1 > MAX_BODY) {
    k->too_big = 1;
    return 0; /* aborts the transfer */
  }
  if (k->len + n + 1 > k->cap) {
    size_t nc = k->cap ? k->cap : 16384;
    while (nc < k->len + n + 1) nc *= 2;
    char *nb = vr_realloc(k->buf, nc);
    if (!nb) return 0;
    k->buf = nb;
    k->cap = nc;
  }
  memcpy(k->buf + k->len, p, n);
  k->len += n;
  k->buf[k->len] = 0;
  return n;
}

/* Reads a small text file (token, namespace), trimmed of surrounding
 * whitespace; every byte must be printable ASCII without spaces (it goes
 * into a header or a URL path). */
static int read_word(const char *path, const char *what, char *out,
                     size_t cap, vr_errbuf *err) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return vr_errf(err, VR_EINVAL, "kubernetes: %s file %s: %s", what, path,
                   strerror(errno));
  size_t n = fread(out, 1, cap - 1, f);
  int more = fgetc(f) != EOF;
  fclose(f);
  if (more)
    return vr_errf(err, VR_EINVAL, "kubernetes: %s file %s: longer than %zu "
                   "bytes", what, path, cap - 1);
  out[n] = 0;
  while (n && isspace((unsigned char)out[n - 1])) out[--n] = 0;
  size_t s = 0;
  while (out[s] && isspace((unsigned char)out[s])) s++;
  memmove(out, out + s, n - s + 1);
  if (!out[0])
    return vr_errf(err, VR_EINVAL, "kubernetes: %s file %s is empty", what,
                   path);
  for (const char *c = out; *c; c++)
    if (*c < 0x21 || *c > 0x7e)
      return vr_errf(err, VR_EINVAL, "kubernetes: %s file %s: unexpected "
                     "byte 0x%02x", what, path, (unsigned char)*c);
  return 0;
}

/* One request; *status is the HTTP status, the body is in k->buf/len. */
static int call(vr_k8s *k, const char *method, const char *path,
                const char *body, const char *ctype, long *status,
                vr_errbuf *err) {
  char *tok = NULL;
  struct curl_slist *h = NULL;
  int rc = 0;
  k->len = 0;
  k->too_big = 0;
  if (k->buf) k->buf[0] = 0;
  if (!k->plain_http) {
    tok = vr_malloc(16384);
    if (!tok) return VR_ENOMEM;
    /* Read per request: the kubelet rotates projected tokens. */
    if ((rc = read_word(k->token_file, "token", tok, 16384, err))) goto out;
    size_t hl = strlen(tok) + 32;
    char *auth = vr_malloc(hl);
    if (!auth) {
      rc = VR_ENOMEM;
      goto out;
    }
    snprintf(auth, hl, "Authorization: Bearer %s", tok);
    h = curl_slist_append(h, auth);
    vr_free(auth);
  }
  h = curl_slist_append(h, "Accept: application/json");
  h = curl_slist_append(h, "Expect:");
  char ct[96];
  if (body) {
    snprintf(ct, sizeof ct, "Content-Type: %s", ctype);
    h = curl_slist_append(h, ct);
  }
  if (!h) {
    rc = VR_ENOMEM;
    goto out;
  }
  size_t ul = strlen(k->api) + strlen(path) + 1;
  char *url = vr_malloc(ul);
  if (!url) {
    rc = VR_ENOMEM;
    goto out;
  }
  snprintf(url, ul, "%s%s", k->api, path);
  CURL *c = k->curl;
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  if (body) {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
  } else {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, NULL);
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  }
  char cerr[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
  CURLcode cc = curl_easy_perform(c);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL); /* cerr goes with this frame */
  vr_free(url);
  if (cc != CURLE_OK) {
    rc = k->too_big ? vr_errf(err, VR_ELIMIT, "kubernetes: %s %s: answer "
                              "larger than %d bytes", method, path, MAX_BODY)
                    : vr_errf(err, VR_EIO, "kubernetes: %s %s%s: %s", method,
                              k->api, path, *cerr ? cerr :
                              curl_easy_strerror(cc));
    goto out;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
  vr_debug("kubernetes: %s %s -> %ld (%zu bytes)", method, path, *status,
           k->len);
out:
  curl_slist_free_all(h);
  vr_free(tok);
  return rc;
}

/* An error for a non-2xx answer, with the API's own message. */
static int api_error(vr_k8s *k, const char *what, long status,
                     vr_errbuf *err) {
  char msg[400];
  vr__k8s_status_msg(k->buf ? k->buf : "", k->len, msg, sizeof msg);
  int code = status == 404 ? VR_ENOENT : status == 409 ? VR_EBUSY : VR_EIO;
  return vr_errf(err, code, "kubernetes: %s: HTTP %ld: %s", what, status,
                 msg);
}

static int get_scale(vr_k8s *k, vr__k8s_scale *s, vr_errbuf *err) {
  long st = 0;
  int rc = call(k, "GET", k->scale_path, NULL, NULL, &st, err);
  if (rc) return rc;
  if (st != 200) return api_error(k, "get scale", st, err);
  return vr__k8s_parse_scale(k->buf, k->len, s, err);
}

/* Sets the replica count from `s` + delta with s's resourceVersion as the
 * precondition. 1 = conflict (re-read and retry), 0 = done. */
static int patch_scale(vr_k8s *k, const vr__k8s_scale *s, int want,
                       vr_errbuf *err) {
  char body[256];
  /* The resourceVersion is an opaque string from the server: escape it
   * as a JSON string would need (it is digits in practice). */
  for (const char *c = s->resource_version; *c; c++)
    if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
      return vr_errf(err, VR_EFORMAT, "kubernetes: odd resourceVersion");
  snprintf(body, sizeof body,
           "{\"metadata\":{\"resourceVersion\":\"%s\"},\"spec\":"
           "{\"replicas\":%d}}", s->resource_version, want);
  long st = 0;
  int rc = call(k, "PATCH", k->scale_path, body,
                "application/merge-patch+json", &st, err);
  if (rc) return rc;
  if (st == 409) return 1;
  if (st != 200) return api_error(k, "patch scale", st, err);
  vr__k8s_scale got;
  if ((rc = vr__k8s_parse_scale(k->buf, k->len, &got, err))) return rc;
  if (got.replicas != want)
    return vr_errf(err, VR_EIO, "kubernetes: patched replicas to %d, the "
                   "server answered %d", want, got.replicas);
  return 0;
}

static int64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Moves the replica count by delta (+1 / -1) within the configured
 * bounds, re-reading on conflicts. *now = the count set. */
static int scale_by(vr_k8s *k, int delta, int *now, vr_errbuf *err) {
  for (int t = 0; t < CONFLICT_TRIES; t++) {
    vr__k8s_scale s;
    int rc = get_scale(k, &s, err);
    if (rc) return rc;
    int want = s.replicas + delta;
    if (want > k->max_rep)
      return vr_errf(err, VR_ELIMIT, "kubernetes: %s has %d replicas, "
                     "max-replicas is %d", k->deployment, s.replicas,
                     k->max_rep);
    if (want < k->min_rep)
      return vr_errf(err, VR_ELIMIT, "kubernetes: %s has %d replicas, "
                     "min-replicas is %d", k->deployment, s.replicas,
                     k->min_rep);
    rc = patch_scale(k, &s, want, err);
    if (rc < 0) return rc;
    if (rc == 0) {
      *now = want;
      if (delta > 0) k->pending_since = clock_ns(CLOCK_MONOTONIC);
      vr_info("kubernetes: %s/%s scaled %d -> %d", k->ns, k->deployment,
              s.replicas, want);
      return 0;
    }
    vr_info("kubernetes: %s changed meanwhile (409), reading again",
            k->deployment);
  }
  return vr_errf(err, VR_EBUSY, "kubernetes: %s: %d conflicting updates in "
                 "a row", k->deployment, CONFLICT_TRIES);
}


static int forgotten(vr_k8s *k, const char *id) {
  for (size_t i = 0; i < k->nforgot; i++)
    if (!strcmp(k->forgot[i], id)) return 1;
  return 0;
}

/* The pods as the API reports them, less forgotten ones, with since_ns
 * on CLOCK_MONOTONIC; remembered as k->last. */
static int list_pods(vr_k8s *k, vr_worker_info **out, size_t *n,
                     vr_errbuf *err) {
  *out = NULL;
  *n = 0;
  long st = 0;
  int rc = call(k, "GET", k->pods_path, NULL, NULL, &st, err);
  if (rc) return rc;
  if (st != 200) return api_error(k, "list pods", st, err);
  vr_worker_info *ws = NULL;
  size_t m = 0;
  if ((rc = vr__k8s_parse_pods(k->buf, k->len, &ws, &m, err))) return rc;
  /* A forgotten pod the API no longer lists is gone for good. */
  for (size_t i = 0; i < k->nforgot;) {
    int seen = 0;
    for (size_t j = 0; j < m && !seen; j++) seen = !strcmp(ws[j].id, k->forgot[i]);
    if (seen) i++;
    else memmove(k->forgot[i], k->forgot[i + 1],
                 (--k->nforgot - i) * sizeof *k->forgot);
  }
  int64_t mono = clock_ns(CLOCK_MONOTONIC), real = clock_ns(CLOCK_REALTIME);
  size_t keep = 0;
  for (size_t j = 0; j < m; j++) {
    if (forgotten(k, ws[j].id)) continue;
    if (ws[j].since_ns > 0) {
      int64_t age = real - ws[j].since_ns;
      ws[j].since_ns = mono - (age > 0 ? age : 0);
    }
    ws[keep++] = ws[j];
  }
  vr_free(k->last);
  k->last = NULL;
  k->nlast = 0;
  if (keep) {
    k->last = VR_NEWN(vr_worker_info, keep);
    if (!k->last) {
      vr_free(ws);
      return VR_ENOMEM;
    }
    memcpy(k->last, ws, keep * sizeof *ws);
    k->nlast = keep;
  } else {
    vr_free(ws);
    ws = NULL;
  }
  *out = ws;
  *n = keep;
  return 0;
}

static int k8s_start(vr_provider *p, const vr_worker_spec *spec, char *id,
                     size_t idcap, vr_errbuf *err) {
  vr_k8s *k = (vr_k8s *)p;
  pthread_mutex_lock(&k->mu);
  int now = 0;
  int rc = scale_by(k, +1, &now, err);
  pthread_mutex_unlock(&k->mu);
  if (rc == 0 && id && idcap) snprintf(id, idcap, "%s#%d", k->deployment, now);
  return rc;
}

static int k8s_stop(vr_provider *p, const char *id, vr_errbuf *err) {
  vr_k8s *k = (vr_k8s *)p;
  if (!id || !*id) return vr_errf(err, VR_EINVAL, "kubernetes: no worker id");
  pthread_mutex_lock(&k->mu);
  vr_worker_info *ws = NULL;
  size_t n = 0;
  int rc = 0, now = 0;
  /* A start() handle ("DEPLOYMENT#N") stands for "one of the pods". */
  size_t dl = strlen(k->deployment);
  int handle = !strncmp(id, k->deployment, dl) && id[dl] == '#' &&
               id[dl + 1] && strspn(id + dl + 1, "0123456789") ==
                                 strlen(id + dl + 1);
  const vr_worker_info *pod = NULL;
  if (!handle) {
    if ((rc = list_pods(k, &ws, &n, err))) goto out;
    for (size_t i = 0; i < n; i++)
      if (!strcmp(ws[i].id, id)) pod = &ws[i];
    if (!pod) {
      rc = vr_errf(err, VR_ENOENT, "kubernetes: no pod '%s' matches %s", id,
                   k->selector);
      goto out;
    }
    /* already going, or gone: a Failed/Evicted pod no longer counts among
     * the replicas, and scaling down for it would take a healthy one */
    if (pod->state == VR_PW_STOPPING || pod->state == VR_PW_EXITED) goto out;
  }
  if (pod && k->pick_pod) {
    /* Lowest deletion cost: the ReplicaSet removes this pod first among
     * pods of the same readiness. */
    char path[512];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", k->ns,
             pod->id);
    long st = 0;
    if ((rc = call(k, "PATCH", path,
                   "{\"metadata\":{\"annotations\":{\"controller.kubernetes."
                   "io/pod-deletion-cost\":\"-1000000\"}}}",
                   "application/merge-patch+json", &st, err)))
      goto out;
    if (st != 200) {
      rc = api_error(k, "annotate pod", st, err);
      goto out;
    }
  }
  rc = scale_by(k, -1, &now, err);
  if (rc && pod && k->pick_pod) {
    /* not scaled down: the pod must not stay first in line for the next
     * scale-down, which another stop() may mean for another pod */
    char path[512];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", k->ns, pod->id);
    long st = 0;
    vr_errbuf e2 = {0};
    if (call(k, "PATCH", path,
             "{\"metadata\":{\"annotations\":{\"controller.kubernetes."
             "io/pod-deletion-cost\":null}}}",
             "application/merge-patch+json", &st, &e2) || st != 200)
      vr_warn("kubernetes: pod %s keeps its deletion cost (%s)", pod->id,
              e2.msg[0] ? e2.msg : "the API refused the patch");
  }
out:
  pthread_mutex_unlock(&k->mu);
  vr_free(ws);
  return rc;
}

/* Appends a STARTING entry "DEPLOYMENT#N" for each replica the scale asks
 * for beyond the pods that run or start (a handle stop() takes as "one of
 * the pods": scaling it away cancels the replica). */
static int add_pending(vr_k8s *k, vr_worker_info **out, size_t *n, vr_errbuf *err) {
  vr__k8s_scale sc;
  int rc = get_scale(k, &sc, err);
  if (rc) return rc;
  int active = 0;
  for (size_t i = 0; i < *n; i++)
    active += (*out)[i].state == VR_PW_STARTING || (*out)[i].state == VR_PW_RUNNING;
  /* a Deployment scaled by hand (or a bad answer) may ask for more than
   * max-replicas: list those only (up to 10^6 entries were allocated) */
  int pending = (sc.replicas < k->max_rep ? sc.replicas : k->max_rep) - active;
  int64_t now = clock_ns(CLOCK_MONOTONIC);
  if (pending <= 0) {
    k->pending_since = 0;
    return 0;
  }
  if (!k->pending_since) k->pending_since = now;
  vr_worker_info *w = vr_realloc(*out, (*n + (size_t)pending) * sizeof *w);
  if (!w) return vr_errf(err, VR_ENOMEM, "out of memory");
  for (int i = 0; i < pending; i++) {
    vr_worker_info *x = &w[(*n)++];
    memset(x, 0, sizeof *x);
    snprintf(x->id, sizeof x->id, "%s#%d", k->deployment, active + i + 1);
    x->state = VR_PW_STARTING;
    x->since_ns = k->pending_since;
    snprintf(x->detail, sizeof x->detail, "replica %d of %d: no pod listed yet",
             active + i + 1, sc.replicas);
  }
  *out = w;
  return 0;
}

static int k8s_list(vr_provider *p, vr_worker_info **out, size_t *n,
                    vr_errbuf *err) {
  vr_k8s *k = (vr_k8s *)p;
  pthread_mutex_lock(&k->mu);
  int rc = list_pods(k, out, n, err);
  if (!rc && (rc = add_pending(k, out, n, err))) {
    vr_free(*out);
    *out = NULL;
    *n = 0;
  }
  pthread_mutex_unlock(&k->mu);
  return rc;
}

static int k8s_forget(vr_provider *p, const char *id, vr_errbuf *err) {
  /* Judged on the last list() (no request): the caller forgets what it
   * has just been shown. */
  vr_k8s *k = (vr_k8s *)p;
  pthread_mutex_lock(&k->mu);
  const vr_worker_info *w = NULL;
  for (size_t i = 0; i < k->nlast; i++)
    if (!strcmp(k->last[i].id, id)) w = &k->last[i];
  int rc = 0;
  if (!w) {
    rc = vr_errf(err, VR_ENOENT, "kubernetes: pod '%s' was not in the last "
                 "list", id);
  } else if (w->state != VR_PW_EXITED) {
    rc = vr_errf(err, VR_ESTATE, "kubernetes: pod '%s' is %s", id,
                 vr_pw_state_name(w->state));
  } else if (!forgotten(k, id)) {
    if (k->nforgot == k->capforgot) {
      size_t nc = k->capforgot ? 2 * k->capforgot : 8;
      char (*nf)[64] = vr_realloc(k->forgot, nc * sizeof *nf);
      if (!nf) rc = VR_ENOMEM;
      else {
        k->forgot = nf;
        k->capforgot = nc;
      }
    }
    if (!rc) snprintf(k->forgot[k->nforgot++], 64, "%s", id);
  }
  pthread_mutex_unlock(&k->mu);
  return rc;
}

static void k8s_destroy(vr_provider *p) {
  vr_k8s *k = (vr_k8s *)p;
  if (k->curl) curl_easy_cleanup(k->curl);
  vr_free(k->api);
  vr_free(k->token_file);
  vr_free(k->ca_file);
  vr_free(k->ns);
  vr_free(k->deployment);
  vr_free(k->selector);
  vr_free(k->scale_path);
  vr_free(k->pods_path);
  vr_free(k->buf);
  vr_free(k->last);
  vr_free(k->forgot);
  pthread_mutex_destroy(&k->mu);
  vr_free(k);
}

static const vr_provider_ops k8s_ops = {"kubernetes", k8s_start,   k8s_stop, k8s_list,
                                        k8s_forget,   k8s_destroy, NULL};

/* RFC 1123 label (namespace) or subdomain (deployment) name. */
static int dns_name(const char *s, size_t max, int dots) {
  size_t n = strlen(s);
  if (!n || n > max) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    int edge = i == 0 || i == n - 1 || (dots && (s[i - 1] == '.' ||
                                                 s[i + 1] == '.'));
    if (alnum) continue;
    if (c == '-' && !edge) continue;
    if (c == '.' && dots && !edge) continue;
    return 0;
  }
  return 1;
}

static char *dup_or(const char *v, const char *dflt) {
  return vr_strdup(v && *v ? v : dflt);
}

int vr_provider_kubernetes(const vr_k8s_cfg *cfg, vr_provider **out,
                           vr_errbuf *err) {
  *out = NULL;
  pthread_once(&curl_once, curl_init);
  if (curl_init_rc != CURLE_OK)
    return vr_errf(err, VR_EBACKEND, "kubernetes: curl_global_init: %s",
                   curl_easy_strerror(curl_init_rc));
  vr_k8s *k = VR_NEW(vr_k8s);
  if (!k) return VR_ENOMEM;
  k->base.ops = &k8s_ops;
  pthread_mutex_init(&k->mu, NULL);
  int rc = 0;
  char word[256];
  if (cfg->api_url && *cfg->api_url) {
    k->api = vr_strdup(cfg->api_url);
  } else {
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host) {
      rc = vr_errf(err, VR_EINVAL, "kubernetes: no api URL and not in a "
                   "cluster (KUBERNETES_SERVICE_HOST unset)");
      goto fail;
    }
    size_t ul = strlen(host) + (port ? strlen(port) : 3) + 16;
    if ((k->api = vr_malloc(ul)))
      snprintf(k->api, ul, strchr(host, ':') ? "https://[%s]:%s"
                                              : "https://%s:%s",
               host, port && *port ? port : "443");
  }
  if (!k->api) goto nomem;
  size_t al = strlen(k->api);
  while (al && k->api[al - 1] == '/') k->api[--al] = 0;
  if (!strncmp(k->api, "http://", 7)) {
    /* kubectl proxy on loopback: no token, no TLS. Never send a token in
     * the clear. */
    k->plain_http = 1;
    vr_warn("kubernetes: plain HTTP to %s: no token is sent (kubectl proxy "
            "use only)", k->api);
  } else if (strncmp(k->api, "https://", 8) || al <= 8) {
    rc = vr_errf(err, VR_EINVAL, "kubernetes: api '%s' is not an https:// "
                 "URL", k->api);
    goto fail;
  }
  if (!(k->token_file = dup_or(cfg->token_file, SA_DIR "/token")) ||
      !(k->ca_file = dup_or(cfg->ca_file, SA_DIR "/ca.crt")))
    goto nomem;
  if (cfg->ns && *cfg->ns) {
    k->ns = vr_strdup(cfg->ns);
  } else {
    if ((rc = read_word(SA_DIR "/namespace", "namespace", word, sizeof word,
                        err)))
      goto fail;
    k->ns = vr_strdup(word);
  }
  if (!k->ns) goto nomem;
  if (!dns_name(k->ns, 63, 0)) {
    rc = vr_errf(err, VR_EINVAL, "kubernetes: namespace '%s' is not a DNS "
                 "label", k->ns);
    goto fail;
  }
  if (!(k->deployment = dup_or(cfg->deployment, "vario-worker"))) goto nomem;
  if (!dns_name(k->deployment, 253, 1)) {
    rc = vr_errf(err, VR_EINVAL, "kubernetes: deployment '%s' is not a DNS "
                 "subdomain name", k->deployment);
    goto fail;
  }
  if (cfg->selector && *cfg->selector) {
    k->selector = vr_strdup(cfg->selector);
  } else if ((k->selector = vr_malloc(strlen(k->deployment) + 5))) {
    sprintf(k->selector, "app=%s", k->deployment);
  }
  if (!k->selector) goto nomem;
  if (strlen(k->selector) > 1024) {
    rc = vr_errf(err, VR_EINVAL, "kubernetes: selector longer than 1024");
    goto fail;
  }
  for (const char *c = k->selector; *c; c++)
    if (*c < 0x20 || *c > 0x7e) {
      rc = vr_errf(err, VR_EINVAL, "kubernetes: selector has a control or "
                   "non-ASCII byte");
      goto fail;
    }
  k->max_rep = cfg->max_replicas > 0 ? cfg->max_replicas : 64;
  k->min_rep = cfg->min_replicas > 0 ? cfg->min_replicas : 0;
  if (k->min_rep > k->max_rep) {
    rc = vr_errf(err, VR_EINVAL, "kubernetes: min-replicas %d > "
                 "max-replicas %d", k->min_rep, k->max_rep);
    goto fail;
  }
  k->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 10000;
  k->pick_pod = cfg->pick_pod;
  if (!k->plain_http) {
    /* Fail at start-up, not at the first scale-up: both files must be
     * readable now (the token is re-read per request). */
    char *tok = vr_malloc(16384);
    if (!tok) goto nomem;
    rc = read_word(k->token_file, "token", tok, 16384, err);
    vr_free(tok);
    if (rc) goto fail;
    FILE *f = fopen(k->ca_file, "rb");
    if (!f) {
      rc = vr_errf(err, VR_EINVAL, "kubernetes: CA file %s: %s", k->ca_file,
                   strerror(errno));
      goto fail;
    }
    fclose(f);
  }
  if (!(k->curl = curl_easy_init())) {
    rc = vr_errf(err, VR_EBACKEND, "kubernetes: curl_easy_init failed");
    goto fail;
  }
  char *esc = curl_easy_escape(k->curl, k->selector, 0);
  if (!esc) goto nomem;
  size_t pl = strlen(k->ns) + strlen(k->deployment) + strlen(esc) + 96;
  k->scale_path = vr_malloc(pl);
  k->pods_path = vr_malloc(pl);
  if (k->scale_path && k->pods_path) {
    snprintf(k->scale_path, pl,
             "/apis/apps/v1/namespaces/%s/deployments/%s/scale", k->ns,
             k->deployment);
    snprintf(k->pods_path, pl, "/api/v1/namespaces/%s/pods?labelSelector=%s",
             k->ns, esc);
  }
  curl_free(esc);
  if (!k->scale_path || !k->pods_path) goto nomem;
  CURL *c = k->curl;
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)k->timeout_ms);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)k->timeout_ms);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, k->plain_http ? "http" : "https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, k);
  if (!k->plain_http) {
    curl_easy_setopt(c, CURLOPT_CAINFO, k->ca_file);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
  }
  *out = &k->base;
  return 0;
nomem:
  rc = VR_ENOMEM;
fail:
  k8s_destroy(&k->base);
  return rc;
}

int vr__prov_k8s_opts(const char *const *opts, size_t nopts, vr_k8s_cfg *cfg,
                      vr_errbuf *err) {
  memset(cfg, 0, sizeof *cfg);
  for (size_t i = 0; i < nopts; i++) {
    const char *eq = strchr(opts[i], '=');
    if (!eq || eq == opts[i])
      return vr_errf(err, VR_EINVAL, "provider option '%s': expected "
                     "key=value", opts[i]);
    size_t kl = (size_t)(eq - opts[i]);
    const char *v = eq + 1;
    long x;
    int rc = 0;
#define KEY(s) (kl == strlen(s) && !strncmp(opts[i], s, kl))
    if (KEY("api")) cfg->api_url = v;
    else if (KEY("token-file")) cfg->token_file = v;
    else if (KEY("ca-file")) cfg->ca_file = v;
    else if (KEY("namespace")) cfg->ns = v;
    else if (KEY("deployment")) cfg->deployment = v;
    else if (KEY("selector")) cfg->selector = v;
    else if (KEY("max-replicas")) {
      if (!(rc = vr__prov_parse_int("max-replicas", v, 1, 100000, &x, err)))
        cfg->max_replicas = (int)x;
    } else if (KEY("min-replicas")) {
      if (!(rc = vr__prov_parse_int("min-replicas", v, 0, 100000, &x, err)))
        cfg->min_replicas = (int)x;
    } else if (KEY("timeout-ms")) {
      if (!(rc = vr__prov_parse_int("timeout-ms", v, 1, 600000, &x, err)))
        cfg->timeout_ms = (int)x;
    } else if (KEY("pick-pod")) {
      rc = vr__prov_parse_bool("pick-pod", v, &cfg->pick_pod, err);
    } else {
      return vr_errf(err, VR_EINVAL, "provider kubernetes: unknown option "
                     "'%.*s' (api, token-file, ca-file, namespace, "
                     "deployment, selector, max-replicas, min-replicas, "
                     "timeout-ms, pick-pod)", (int)(kl > 64 ? 64 : kl),
                     opts[i]);
    }
#undef KEY
    if (rc) return rc;
  }
  return 0;
}
