/*
 * Parsers for the Kubernetes API's answers the kubernetes provider reads:
 * autoscaling/v1 Scale, core/v1 PodList and meta/v1 Status (errors). Kept
 * apart from the HTTP code so that they can be fuzzed on their own. They
 * read only the fields the provider relies on and ignore the rest (the API
 * adds fields over time); a field present with the wrong type is an error.
 */
#define _GNU_SOURCE /* timegm */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "cluster/provider_int.h"

static json_t *load(const char *body, size_t len, const char *what,
                    vr_errbuf *err) {
  json_error_t je;
  json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
  if (!j) {
    vr_errf(err, VR_EFORMAT, "kubernetes: %s: bad JSON at line %d: %s", what,
            je.line, je.text);
    return NULL;
  }
  if (!json_is_object(j)) {
    json_decref(j);
    vr_errf(err, VR_EFORMAT, "kubernetes: %s: not a JSON object", what);
    return NULL;
  }
  return j;
}

/* obj.key as a string, "" when absent; NULL (error) when not a string. */
static const char *str_or_empty(json_t *obj, const char *key) {
  json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
  if (!v || json_is_null(v)) return "";
  return json_is_string(v) ? json_string_value(v) : NULL;
}

int vr__k8s_parse_scale(const char *body, size_t len, vr__k8s_scale *out,
                        vr_errbuf *err) {
  memset(out, 0, sizeof *out);
  json_t *j = load(body, len, "Scale", err);
  if (!j) return VR_EFORMAT;
  int rc = 0;
  const char *kind = str_or_empty(j, "kind");
  json_t *spec = json_object_get(j, "spec");
  json_t *meta = json_object_get(j, "metadata");
  json_t *status = json_object_get(j, "status");
  json_t *rep = json_is_object(spec) ? json_object_get(spec, "replicas")
                                     : NULL;
  const char *rv = str_or_empty(meta, "resourceVersion");
  if (!kind || strcmp(kind, "Scale")) {
    rc = vr_errf(err, VR_EFORMAT, "kubernetes: expected kind Scale, got "
                 "'%s'", kind ? kind : "(not a string)");
  } else if (!json_is_object(meta) || !rv || !*rv) {
    rc = vr_errf(err, VR_EFORMAT, "kubernetes: Scale without "
                 "metadata.resourceVersion");
  } else if (strlen(rv) >= sizeof out->resource_version) {
    rc = vr_errf(err, VR_EFORMAT, "kubernetes: Scale resourceVersion too "
                 "long");
  } else if (spec && !json_is_object(spec)) {
    rc = vr_errf(err, VR_EFORMAT, "kubernetes: Scale spec not an object");
  } else if (rep && (!json_is_integer(rep) || json_integer_value(rep) < 0 ||
                     json_integer_value(rep) > 1000000)) {
    rc = vr_errf(err, VR_EFORMAT, "kubernetes: Scale spec.replicas not a "
                 "count");
  } else {
    /* spec.replicas is omitted when 0 (omitempty in the Go type). */
    out->replicas = rep ? (int)json_integer_value(rep) : 0;
    snprintf(out->resource_version, sizeof out->resource_version, "%s", rv);
    json_t *sr = json_is_object(status) ? json_object_get(status, "replicas")
                                        : NULL;
    out->status_replicas =
        json_is_integer(sr) ? (int)json_integer_value(sr) : -1;
    if (sr && !json_is_integer(sr))
      rc = vr_errf(err, VR_EFORMAT, "kubernetes: Scale status.replicas not "
                   "an integer");
  }
  json_decref(j);
  return rc;
}

int64_t vr__k8s_parse_time(const char *s) {
  /* RFC 3339 as the API server writes it: "2026-11-25T04:00:05Z" (UTC,
   * optionally with fractional seconds). */
  struct tm tm;
  memset(&tm, 0, sizeof tm);
  const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
  if (!end) return 0;
  if (*end == '.') {
    end++;
    while (*end >= '0' && *end <= '9') end++;
  }
  if (strcmp(end, "Z")) return 0;
  time_t t = timegm(&tm);
  /* (found by fuzz_k8sresp: a year far out overflowed the ns count) */
  if (t <= 0 || (int64_t)t > INT64_MAX / 1000000000) return 0;
  return (int64_t)t * 1000000000;
}

/* Fills w from one PodList item. */
static int pod_info(json_t *pod, vr_worker_info *w, vr_errbuf *err) {
  memset(w, 0, sizeof *w);
  w->pid = -1;
  w->exit_code = -1;
  json_t *meta = json_object_get(pod, "metadata");
  json_t *spec = json_object_get(pod, "spec");
  json_t *st = json_object_get(pod, "status");
  const char *name = str_or_empty(meta, "name");
  const char *del = str_or_empty(meta, "deletionTimestamp");
  const char *phase = str_or_empty(st, "phase");
  const char *ip = str_or_empty(st, "podIP");
  const char *node = str_or_empty(spec, "nodeName");
  if (!json_is_object(pod) || !json_is_object(meta) || !name || !*name)
    return vr_errf(err, VR_EFORMAT, "kubernetes: pod without metadata.name");
  if (!del || !phase || !ip || !node)
    return vr_errf(err, VR_EFORMAT, "kubernetes: pod %.63s: a string field "
                   "of another type", name);
  if (strlen(name) >= sizeof w->id)
    return vr_errf(err, VR_EFORMAT, "kubernetes: pod name longer than %zu",
                   sizeof w->id - 1);
  snprintf(w->id, sizeof w->id, "%s", name);
  int ready = 0;
  const char *ready_at = NULL;
  json_t *conds = json_is_object(st) ? json_object_get(st, "conditions")
                                     : NULL;
  if (conds && !json_is_array(conds))
    return vr_errf(err, VR_EFORMAT, "kubernetes: pod %s: status.conditions "
                   "not an array", name);
  size_t i;
  json_t *c;
  json_array_foreach(conds, i, c) {
    const char *t = str_or_empty(c, "type"), *s = str_or_empty(c, "status");
    if (t && s && !strcmp(t, "Ready")) {
      ready = !strcmp(s, "True");
      ready_at = str_or_empty(c, "lastTransitionTime");
    }
  }
  /* The worker container: the first one (the manifest has one). A
   * termination in state or lastState gives the exit; restarts mean the
   * worker died without being asked to (Deployments restart containers). */
  json_t *css = json_is_object(st) ? json_object_get(st, "containerStatuses")
                                   : NULL;
  if (css && !json_is_array(css))
    return vr_errf(err, VR_EFORMAT, "kubernetes: pod %s: containerStatuses "
                   "not an array", name);
  json_t *cs = json_array_get(css, 0);
  long long restarts = 0;
  const char *waiting = "";
  if (json_is_object(cs)) {
    json_t *rc = json_object_get(cs, "restartCount");
    if (rc && !json_is_integer(rc))
      return vr_errf(err, VR_EFORMAT, "kubernetes: pod %s: restartCount not "
                     "an integer", name);
    restarts = rc ? json_integer_value(rc) : 0;
    json_t *state = json_object_get(cs, "state");
    json_t *term = json_is_object(state) ? json_object_get(state, "terminated")
                                         : NULL;
    if (!json_is_object(term)) {
      json_t *last = json_object_get(cs, "lastState");
      term = json_is_object(last) ? json_object_get(last, "terminated") : NULL;
    }
    if (json_is_object(term)) {
      json_t *ec = json_object_get(term, "exitCode");
      json_t *sg = json_object_get(term, "signal");
      if (json_is_integer(ec)) w->exit_code = (int)json_integer_value(ec);
      if (json_is_integer(sg)) w->term_signal = (int)json_integer_value(sg);
    }
    json_t *wt = json_is_object(state) ? json_object_get(state, "waiting")
                                       : NULL;
    const char *reason = str_or_empty(wt, "reason");
    if (reason) waiting = reason;
  }
  if (*del) w->state = VR_PW_STOPPING;
  else if (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))
    w->state = VR_PW_EXITED;
  else if (!strcmp(phase, "Running") && ready)
    w->state = VR_PW_RUNNING;
  else
    w->state = VR_PW_STARTING; /* Pending, Unknown, or running unready */
  w->unexpected = restarts > 0 || !strcmp(phase, "Failed");
  /* When the state last changed, as wall-clock ns (the provider maps it to
   * CLOCK_MONOTONIC): readiness flipping, else the pod's creation. */
  w->since_ns = vr__k8s_parse_time(ready_at && *ready_at ? ready_at :
                                   str_or_empty(meta, "creationTimestamp"));
  snprintf(w->detail, sizeof w->detail, "phase=%.32s ready=%d node=%.100s "
           "ip=%.64s restarts=%lld%s%.64s", *phase ? phase : "?", ready,
           *node ? node : "-", *ip ? ip : "-", restarts,
           *waiting ? " waiting=" : "", waiting);
  return 0;
}

int vr__k8s_parse_pods(const char *body, size_t len, vr_worker_info **out,
                       size_t *n, vr_errbuf *err) {
  *out = NULL;
  *n = 0;
  json_t *j = load(body, len, "PodList", err);
  if (!j) return VR_EFORMAT;
  int rc = 0;
  const char *kind = str_or_empty(j, "kind");
  json_t *items = json_object_get(j, "items");
  if (!kind || strcmp(kind, "PodList")) {
    rc = vr_errf(err, VR_EFORMAT, "kubernetes: expected kind PodList, got "
                 "'%s'", kind ? kind : "(not a string)");
  } else if (items && !json_is_null(items) && !json_is_array(items)) {
    rc = vr_errf(err, VR_EFORMAT, "kubernetes: PodList items not an array");
  } else if (json_array_size(items) > 100000) {
    rc = vr_errf(err, VR_ELIMIT, "kubernetes: more than 100000 pods");
  } else if (json_array_size(items)) {
    size_t m = json_array_size(items);
    vr_worker_info *ws = VR_NEWN(vr_worker_info, m);
    if (!ws) rc = VR_ENOMEM;
    for (size_t i = 0; rc == 0 && i < m; i++)
      rc = pod_info(json_array_get(items, i), &ws[i], err);
    if (rc) vr_free(ws);
    else {
      *out = ws;
      *n = m;
    }
  }
  json_decref(j);
  return rc;
}

void vr__k8s_status_msg(const char *body, size_t len, char *msg, size_t cap) {
  /* A meta/v1 Status: {"kind":"Status","reason":"Forbidden","message":...}.
   * Anything else: the first bytes of the body, printable only. */
  json_error_t je;
  json_t *j = json_loadb(body, len, 0, &je);
  const char *m = j ? str_or_empty(j, "message") : NULL;
  const char *r = j ? str_or_empty(j, "reason") : NULL;
  if (j && json_is_object(j) && m && *m) {
    snprintf(msg, cap, "%s%s%.300s", r && *r ? r : "", r && *r ? ": " : "",
             m);
  } else {
    size_t k = 0;
    for (size_t i = 0; i < len && k + 1 < cap && k < 200; i++)
      msg[k++] = body[i] >= 32 && body[i] < 127 ? body[i] : '.';
    msg[k] = 0;
  }
  json_decref(j);
}
