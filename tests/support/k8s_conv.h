/*
 * Recorded HTTP conversations (tests/data/k8s/NAME.json) for the kubernetes
 * provider's test: the requests a client must send, in order, and the
 * answers to give. Format (docs/KUBERNETES.md, "Testing"):
 *
 *   {"description": "...",
 *    "exchanges": [
 *      {"request":  {"method": "PATCH",
 *                    "path": "/apis/...?labelSelector=app%3Dx",
 *                    "headers": {"Authorization": "Bearer t"},
 *                    "body": {...}},             (JSON, compared as JSON)
 *       "response": {"status": 200,
 *                    "headers": {"Content-Type": "application/json"},
 *                    "body": {...}}}]}           (JSON, served compact)
 *
 * Recorded headers must be present with exactly these values (names are
 * case-insensitive); others are allowed. A recorded request without
 * "body" must have none. Query parameters are compared decoded, as a set.
 *
 * Ownership: vr_kc_parse fills a conversation the caller releases with
 * vr_kc_free; all strings and JSON values inside are owned by it.
 */
#ifndef VR_TEST_K8S_CONV_H
#define VR_TEST_K8S_CONV_H

#include <jansson.h>
#include <stddef.h>

typedef struct vr_kc_kv {
  char *name, *value;
} vr_kc_kv;

typedef struct vr_kc_exchange {
  char *method;
  char *path;      /* without the query */
  vr_kc_kv *query; /* decoded */
  size_t nquery;
  vr_kc_kv *headers;
  size_t nheaders;
  json_t *body; /* NULL: no body expected */
  int status;
  vr_kc_kv *rheaders;
  size_t nrheaders;
  char *rbody; /* compact JSON text, or "" */
} vr_kc_exchange;

typedef struct vr_kc_conv {
  char *description;
  vr_kc_exchange *ex;
  size_t n;
} vr_kc_conv;

/* 0 or -1 with a message in err. */
int vr_kc_parse(const char *text, size_t len, vr_kc_conv *out, char *err,
                size_t errcap);
int vr_kc_load(const char *path, vr_kc_conv *out, char *err, size_t errcap);
void vr_kc_free(vr_kc_conv *c);

/* Percent-decodes s[0..n) into a new malloc'd string (NULL on a bad
 * escape or a NUL byte). '+' stays '+' (Kubernetes paths, not forms). */
char *vr_kc_unescape(const char *s, size_t n);

#endif
