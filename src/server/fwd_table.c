/* Routing tables as JSON (fwd.h): what the controller publishes through
 * the registry and front ends read. Parsed strictly: the text comes from
 * Redis, i.e. from outside this process. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "server/fwd.h"
#include "server/sbuf.h"

#define MAX_WORKERS 4096
#define MAX_ROUTES 65536

void vr_fwd_table_free(vr_fwd_table *t) {
  if (!t) return;
  for (int i = 0; i < t->n_routes; i++) vr_free(t->routes[i].workers);
  vr_free(t->routes);
  vr_free(t->workers);
  memset(t, 0, sizeof *t);
}

int vr_fwd_table_parse(const char *json, size_t len, int64_t version,
                       vr_fwd_table *out, vr_errbuf *err) {
  memset(out, 0, sizeof *out);
  json_error_t je;
  json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
  if (!root)
    return vr_errf(err, VR_EFORMAT, "routing table: not JSON (line %d: %.100s)",
                   je.line, je.text);
  int rc = 0;
  json_t *ws = json_object_get(root, "workers");
  json_t *rs = json_object_get(root, "routes");
  if (!json_is_object(root) || !json_is_array(ws) || !json_is_object(rs) ||
      json_array_size(ws) > MAX_WORKERS || json_object_size(rs) > MAX_ROUTES) {
    rc = vr_errf(err, VR_EFORMAT, "routing table: expected {\"workers\":[...],"
                 "\"routes\":{...}} (at most %d workers)", MAX_WORKERS);
    goto done;
  }
  out->version = version;
  out->workers = vr_calloc(json_array_size(ws) + 1, sizeof *out->workers);
  out->routes = vr_calloc(json_object_size(rs) + 1, sizeof *out->routes);
  if (!out->workers || !out->routes) {
    rc = vr_errf(err, VR_ENOMEM, "out of memory");
    goto done;
  }
  size_t i;
  json_t *w;
  json_array_foreach(ws, i, w) {
    const char *id = json_string_value(json_object_get(w, "id"));
    const char *addr = json_string_value(json_object_get(w, "addr"));
    char spec[VR_FWD_ID_MAX + 80];
    if (!id || !addr || !*id || strlen(id) >= VR_FWD_ID_MAX || strchr(id, '=') ||
        strlen(addr) >= 70) {
      rc = vr_errf(err, VR_EFORMAT, "routing table: worker %zu needs an \"id\""
                   " (< %d bytes) and an \"addr\" HOST:PORT", i, VR_FWD_ID_MAX);
      goto done;
    }
    snprintf(spec, sizeof spec, "%s=%s", id, addr);
    if ((rc = vr_fwd_parse_worker(spec, &out->workers[i], err))) {
      rc = VR_EFORMAT;
      goto done;
    }
    for (int k = 0; k < out->n_workers; k++)
      if (!strcmp(out->workers[k].id, id)) {
        rc = vr_errf(err, VR_EFORMAT, "routing table: worker '%s' listed twice", id);
        goto done;
      }
    out->n_workers++;
  }
  const char *key;
  json_t *list;
  json_object_foreach(rs, key, list) {
    vr_fwd_route *r = &out->routes[out->n_routes];
    if (strlen(key) >= VR_FWD_KEY_MAX || !*key || !json_is_array(list) ||
        json_array_size(list) > MAX_WORKERS) {
      rc = vr_errf(err, VR_EFORMAT, "routing table: route '%.100s' needs a key"
                   " < %d bytes and an array of worker ids", key, VR_FWD_KEY_MAX);
      goto done;
    }
    snprintf(r->key, sizeof r->key, "%s", key);
    r->workers = vr_calloc(json_array_size(list) + 1, sizeof(int));
    if (!r->workers) {
      rc = vr_errf(err, VR_ENOMEM, "out of memory");
      goto done;
    }
    out->n_routes++;
    json_array_foreach(list, i, w) {
      const char *id = json_string_value(w);
      int k = 0;
      while (id && k < out->n_workers && strcmp(out->workers[k].id, id)) k++;
      if (!id || k == out->n_workers) {
        rc = vr_errf(err, VR_EFORMAT, "routing table: route '%.100s' names"
                     " unknown worker '%.64s'", key, id ? id : "(not a string)");
        goto done;
      }
      r->workers[r->n++] = k;
    }
  }
done:
  json_decref(root);
  if (rc) vr_fwd_table_free(out);
  return rc;
}

char *vr_fwd_table_json(const vr_fwd_table *t) {
  vr_sbuf b;
  vr_sbuf_init(&b);
  vr_sbuf_puts(&b, "{\"workers\":[");
  for (int i = 0; i < t->n_workers; i++) {
    char addr[80];
    snprintf(addr, sizeof addr, "%s:%d", t->workers[i].host, t->workers[i].port);
    vr_sbuf_puts(&b, i ? ",{\"id\":" : "{\"id\":");
    vr_sbuf_json_str(&b, t->workers[i].id);
    vr_sbuf_puts(&b, ",\"addr\":");
    vr_sbuf_json_str(&b, addr);
    vr_sbuf_puts(&b, "}");
  }
  vr_sbuf_puts(&b, "],\"routes\":{");
  for (int r = 0; r < t->n_routes; r++) {
    if (r) vr_sbuf_puts(&b, ",");
    vr_sbuf_json_str(&b, t->routes[r].key);
    vr_sbuf_puts(&b, ":[");
    for (int k = 0; k < t->routes[r].n; k++) {
      if (k) vr_sbuf_puts(&b, ",");
      vr_sbuf_json_str(&b, t->workers[t->routes[r].workers[k]].id);
    }
    vr_sbuf_puts(&b, "]");
  }
  vr_sbuf_puts(&b, "}}");
  if (b.oom) {
    vr_sbuf_free(&b);
    return NULL;
  }
  size_t len;
  return vr_sbuf_take(&b, &len);
}
