/* Model directories over HTTP (model_fetch.h). */
#include "server/model_fetch.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "server/httpc.h"
#include "server/sbuf.h"

#define MAX_FILES 256
#define MAX_DEPTH 4

static int seg_ok(const char *s, size_t n) {
  if (n == 0 || n > 200 || s[0] == '.') return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '-' || c == '.'))
      return 0;
  }
  return 1;
}

int vr_model_path_ok(const char *p) {
  int depth = 0;
  if (!p || !*p || strlen(p) > 1000) return 0;
  for (const char *s = p;;) {
    const char *e = strchr(s, '/');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    if (!seg_ok(s, n) || ++depth > MAX_DEPTH) return 0;
    if (!e) return 1;
    s = e + 1;
  }
}

/* ---- serving (controller) ------------------------------------------------ */

static void list_dir(const char *base, const char *rel, int depth, vr_sbuf *b, int *n) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s%s%s", base, *rel ? "/" : "", rel);
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)) && *n < MAX_FILES) {
    if (!seg_ok(e->d_name, strlen(e->d_name))) continue;
    char r2[2048], full[4096];
    snprintf(r2, sizeof r2, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
    snprintf(full, sizeof full, "%s/%s", base, r2);
    struct stat st;
    if (lstat(full, &st)) continue;
    if (S_ISDIR(st.st_mode) && depth + 1 < MAX_DEPTH) {
      list_dir(base, r2, depth + 1, b, n);
    } else if (S_ISREG(st.st_mode)) {
      vr_sbuf_puts(b, (*n)++ ? ",{\"path\":" : "{\"path\":");
      vr_sbuf_json_str(b, r2);
      vr_sbuf_printf(b, ",\"size\":%lld}", (long long)st.st_size);
    }
  }
  if (d) closedir(d);
}

void vr_model_files_reply(vr_http_req *r, const char *repo, const char *name,
                          const char *path) {
  char dir[4096];
  struct stat st;
  if (!repo || !seg_ok(name, strlen(name)) ||
      (snprintf(dir, sizeof dir, "%s/%s", repo, name), stat(dir, &st)) ||
      !S_ISDIR(st.st_mode)) {
    char msg[300];
    snprintf(msg, sizeof msg, "no model '%.200s' in the controller's repository", name);
    return vr_http_error(r, 404, msg);
  }
  if (!path) {
    vr_sbuf b;
    vr_sbuf_init(&b);
    vr_sbuf_puts(&b, "{\"model\":");
    vr_sbuf_json_str(&b, name);
    vr_sbuf_puts(&b, ",\"files\":[");
    int n = 0;
    list_dir(dir, "", 0, &b, &n);
    vr_sbuf_puts(&b, "]}");
    if (b.oom) {
      vr_sbuf_free(&b);
      return vr_http_error(r, 500, "out of memory");
    }
    size_t len;
    char *body = vr_sbuf_take(&b, &len);
    return vr_http_respond(r, 200, "application/json", body, len, (size_t)-1);
  }
  char full[4096];
  if (!vr_model_path_ok(path) ||
      (size_t)snprintf(full, sizeof full, "%s/%s", dir, path) >= sizeof full ||
      lstat(full, &st) || !S_ISREG(st.st_mode))
    return vr_http_error(r, 404, "no such file in the model directory");
  FILE *f = fopen(full, "rb");
  char *buf = f ? vr_malloc((size_t)st.st_size + 1) : NULL;
  size_t got = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
  if (f) fclose(f);
  if (!buf || got != (size_t)st.st_size) {
    vr_free(buf);
    return vr_http_error(r, 500, "cannot read the file");
  }
  vr_http_respond(r, 200, "application/octet-stream", buf, got, (size_t)-1);
}

/* ---- fetching (worker) --------------------------------------------------- */

static int mkdirs_for(const char *root, const char *rel) {
  char p[4096];
  if ((size_t)snprintf(p, sizeof p, "%s/%s", root, rel) >= sizeof p) return -1;
  for (char *s = p + strlen(root) + 1; (s = strchr(s, '/')); s++) {
    *s = 0;
    if (mkdir(p, 0755) && errno != EEXIST) return -1;
    *s = '/';
  }
  return 0;
}

static void rm_tree(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat st;
    if (!lstat(p, &st) && S_ISDIR(st.st_mode)) rm_tree(p);
    else unlink(p);
  }
  if (d) closedir(d);
  rmdir(dir);
}

int vr_model_fetch(const char *host, int port, const char *token, const char *repo,
                   const char *name, vr_errbuf *err) {
  if (!seg_ok(name, strlen(name)))
    return vr_errf(err, VR_EINVAL, "model name '%.100s' is not fetchable", name);
  char final[4096], tmp[4096], auth[600] = "";
  struct stat st;
  snprintf(final, sizeof final, "%s/%s", repo, name);
  if (!stat(final, &st)) return VR_EEXIST;
  snprintf(tmp, sizeof tmp, "%s/.fetch-%s-%ld", repo, name, (long)getpid());
  if (token) snprintf(auth, sizeof auth, "Authorization: Bearer %.500s\r\n", token);
  vr_httpc c;
  int rc = vr_httpc_open(&c, host, port, err);
  if (rc) return rc;
  vr_httpc_resp resp;
  char path[1400];
  snprintf(path, sizeof path, "/v2/cluster/models/%s/files", name);
  rc = vr_httpc_request(&c, "GET", path, auth, NULL, 0, &resp, err);
  if (!rc && resp.head.status != 200)
    rc = vr_errf(err, resp.head.status == 404 ? VR_ENOENT : VR_EIO,
                 "controller %s:%d: %d %.*s", host, port, resp.head.status,
                 /* the body is not NUL-terminated */
                 (int)(resp.body_len < 200 ? resp.body_len : 200),
                 resp.body_len ? resp.body : "");
  json_t *root = NULL;
  if (!rc) {
    json_error_t je;
    root = json_loadb(resp.body, resp.body_len, 0, &je);
    if (!json_is_array(json_object_get(root, "files")))
      rc = vr_errf(err, VR_EFORMAT, "controller %s:%d: bad file list for '%s'",
                   host, port, name);
  }
  rm_tree(tmp);
  if (!rc && mkdir(tmp, 0755))
    rc = vr_errf(err, VR_EIO, "%s: %s", tmp, strerror(errno));
  size_t i;
  json_t *f;
  if (!rc) json_array_foreach(json_object_get(root, "files"), i, f) {
    const char *rel = json_string_value(json_object_get(f, "path"));
    if (!vr_model_path_ok(rel)) {
      rc = vr_errf(err, VR_EFORMAT, "controller sent a bad path for '%s'", name);
      break;
    }
    snprintf(path, sizeof path, "/v2/cluster/models/%s/files/%s", name, rel);
    if ((rc = vr_httpc_request(&c, "GET", path, auth, NULL, 0, &resp, err))) break;
    if (resp.head.status != 200) {
      rc = vr_errf(err, VR_EIO, "controller %s:%d: %s/%s: HTTP %d", host, port, name,
                   rel, resp.head.status);
      break;
    }
    char out[8192];
    if ((size_t)snprintf(out, sizeof out, "%s/%s", tmp, rel) >= sizeof out) {
      rc = vr_errf(err, VR_EINVAL, "path too long");
      break;
    }
    FILE *o = mkdirs_for(tmp, rel) ? NULL : fopen(out, "wb");
    int ok = o && fwrite(resp.body, 1, resp.body_len, o) == resp.body_len;
    if (o && fclose(o)) ok = 0;
    if (!ok) {
      rc = vr_errf(err, VR_EIO, "%s: cannot write it", out);
      break;
    }
  }
  json_decref(root);
  vr_httpc_close(&c);
  if (!rc && rename(tmp, final)) {
    /* another load fetched it meanwhile: theirs is as good */
    rc = !stat(final, &st) ? 0 : vr_errf(err, VR_EIO, "%s: %s", final, strerror(errno));
  }
  rm_tree(tmp);
  return rc;
}
