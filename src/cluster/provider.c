/*
 * Provider-independent parts: state names, destroy, and the "key=value"
 * option / config-file front door that turns command-line flags into a
 * provider config (so `vario controller` only forwards strings).
 */
#include "cluster/provider.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "cluster/provider_int.h"

const char *vr_pw_state_name(int state) {
  switch (state) {
    case VR_PW_STARTING: return "starting";
    case VR_PW_RUNNING: return "running";
    case VR_PW_STOPPING: return "stopping";
    case VR_PW_EXITED: return "exited";
  }
  return "unknown";
}

int vr_provider_adopt(vr_provider *p, const char *id, int64_t pid, const char *cores,
                      vr_errbuf *err) {
  if (!p->ops->adopt)
    return vr_errf(err, VR_EUNSUPPORTED, "%s provider: workers are not adopted",
                   p->ops->kind);
  return p->ops->adopt(p, id, pid, cores, err);
}

void vr_provider_destroy(vr_provider *p) {
  if (p) p->ops->destroy(p);
}

int vr__prov_valid_id(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n >= 64) return 0;
  /* Ids become file names (local logs) and Kubernetes names: keep them to
   * the DNS-label-ish set and never starting with '.' or '-'. */
  if (s[0] == '.' || s[0] == '-') return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!isalnum(c) && c != '-' && c != '_' && c != '.') return 0;
  }
  return 1;
}

int vr__prov_parse_int(const char *key, const char *v, long lo, long hi,
                       long *out, vr_errbuf *err) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi)
    return vr_errf(err, VR_EINVAL, "provider option %s: '%s' is not an "
                   "integer in [%ld, %ld]", key, v, lo, hi);
  *out = x;
  return 0;
}

int vr__prov_parse_bool(const char *key, const char *v, int *out,
                        vr_errbuf *err) {
  if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes")) {
    *out = 1;
    return 0;
  }
  if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no")) {
    *out = 0;
    return 0;
  }
  return vr_errf(err, VR_EINVAL, "provider option %s: '%s' is not a boolean "
                 "(1/0, true/false, yes/no)", key, v);
}

int vr__prov_parse_cpus(const char *v, int *cpus, size_t cap, size_t *n,
                        vr_errbuf *err) {
  /* "0-3,6,8-9": the kernel's cpulist format (as in /sys and taskset). */
  size_t k = 0;
  const char *s = v;
  if (!*s) return vr_errf(err, VR_EINVAL, "empty CPU list");
  for (;;) {
    char *end;
    if (!isdigit((unsigned char)*s)) goto bad;
    errno = 0;
    long a = strtol(s, &end, 10), b = a;
    if (errno || a > VR_PROV_MAX_CPU) goto bad;
    s = end;
    if (*s == '-') {
      s++;
      if (!isdigit((unsigned char)*s)) goto bad;
      b = strtol(s, &end, 10);
      if (errno || b > VR_PROV_MAX_CPU || b < a) goto bad;
      s = end;
    }
    for (long c = a; c <= b; c++) {
      for (size_t j = 0; j < k; j++)
        if (cpus[j] == c)
          return vr_errf(err, VR_EINVAL, "CPU list '%s': CPU %ld twice", v, c);
      if (k == cap)
        return vr_errf(err, VR_EINVAL, "CPU list '%s': more than %zu CPUs", v,
                       cap);
      cpus[k++] = (int)c;
    }
    if (!*s) break;
    if (*s != ',') goto bad;
    s++;
  }
  *n = k;
  return 0;
bad:
  return vr_errf(err, VR_EINVAL, "CPU list '%s': expected e.g. 0-3,6 (CPU ids "
                 "0..%d)", v, VR_PROV_MAX_CPU);
}

/* Splits "key=value" (no spaces around '='); key written to kbuf. */
static int split_opt(const char *opt, char *kbuf, size_t kcap,
                     const char **val, vr_errbuf *err) {
  const char *eq = strchr(opt, '=');
  if (!eq || eq == opt)
    return vr_errf(err, VR_EINVAL, "provider option '%s': expected key=value",
                   opt);
  size_t kl = (size_t)(eq - opt);
  if (kl >= kcap)
    return vr_errf(err, VR_EINVAL, "provider option '%.40s...': key too long",
                   opt);
  memcpy(kbuf, opt, kl);
  kbuf[kl] = 0;
  *val = eq + 1;
  return 0;
}

int vr__prov_local_opts(const char *const *opts, size_t nopts,
                        vr__local_opts *lo, vr_errbuf *err) {
  memset(lo, 0, sizeof *lo);
  int rc = 0;
  char key[64];
  for (size_t i = 0; i < nopts && rc == 0; i++) {
    const char *v = NULL;
    long x;
    if ((rc = split_opt(opts[i], key, sizeof key, &v, err))) break;
    if (!strcmp(key, "binary")) {
      lo->cfg.binary = v;
    } else if (!strcmp(key, "arg")) {
      if (lo->cfg.nprefix == VR_PROV_MAX_ARGS)
        rc = vr_errf(err, VR_EINVAL, "provider option arg: more than %d",
                     VR_PROV_MAX_ARGS);
      else
        lo->prefix[lo->cfg.nprefix++] = v;
    } else if (!strcmp(key, "log-dir")) {
      lo->cfg.log_dir = v;
    } else if (!strcmp(key, "grace-ms")) {
      if (!(rc = vr__prov_parse_int(key, v, 1, 3600000, &x, err)))
        lo->cfg.grace_ms = (int)x;
    } else if (!strcmp(key, "pool")) {
      rc = vr__prov_parse_cpus(v, lo->pool, VR_PROV_MAX_CPU + 1,
                               &lo->cfg.npool, err);
      lo->cfg.pool = lo->pool;
    } else if (!strcmp(key, "share-cores")) {
      rc = vr__prov_parse_bool(key, v, &lo->cfg.share_cores, err);
    } else if (!strcmp(key, "die-with-parent")) {
      rc = vr__prov_parse_bool(key, v, &lo->cfg.die_with_parent, err);
    } else {
      rc = vr_errf(err, VR_EINVAL, "provider local: unknown option '%s' "
                   "(binary, arg, log-dir, grace-ms, pool, share-cores, "
                   "die-with-parent)", key);
    }
  }
  if (rc == 0 && lo->cfg.nprefix) lo->cfg.argv_prefix = lo->prefix;
  return rc;
}

static int open_local(const char *const *opts, size_t nopts,
                      vr_provider **out, vr_errbuf *err) {
  vr__local_opts *lo = VR_NEW(vr__local_opts);
  if (!lo) return VR_ENOMEM;
  int rc = vr__prov_local_opts(opts, nopts, lo, err);
  if (rc == 0) rc = vr_provider_local(&lo->cfg, out, err);
  vr_free(lo);
  return rc;
}

static int open_k8s(const char *const *opts, size_t nopts, vr_provider **out,
                    vr_errbuf *err) {
  vr_k8s_cfg cfg;
  int rc = vr__prov_k8s_opts(opts, nopts, &cfg, err);
  return rc ? rc : vr_provider_kubernetes(&cfg, out, err);
}

int vr_provider_open(const char *kind, const char *const *opts, size_t nopts,
                     vr_provider **out, vr_errbuf *err) {
  *out = NULL;
  if (!kind) return vr_errf(err, VR_EINVAL, "no provider kind");
  if (!strcmp(kind, "local")) return open_local(opts, nopts, out, err);
  if (!strcmp(kind, "kubernetes")) return open_k8s(opts, nopts, out, err);
  return vr_errf(err, VR_EINVAL, "unknown provider '%s' (local, kubernetes)",
                 kind);
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
  return s;
}

int vr__prov_parse_config(const char *text, size_t len, char **kind_out,
                          char ***opts_out, size_t *nopts_out,
                          vr_errbuf *err) {
  /* Each accepted line becomes one "key=value" option string; the whole
   * result is freed with vr__prov_free_opts. */
  *kind_out = NULL;
  *opts_out = NULL;
  *nopts_out = 0;
  char *buf = vr_strndup(text, len);
  if (!buf) return VR_ENOMEM;
  if (strlen(buf) != len) {
    vr_free(buf);
    return vr_errf(err, VR_EFORMAT, "provider config: NUL byte");
  }
  char **opts = NULL;
  size_t n = 0, cap = 0;
  char *kind = NULL;
  int rc = 0, lineno = 0;
  char *save = NULL;
  for (char *line = buf; line && rc == 0; line = save) {
    char *nl = strchr(line, '\n');
    save = nl ? nl + 1 : NULL;
    if (nl) *nl = 0;
    lineno++;
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char *s = trim(line);
    if (!*s) continue;
    char *eq = strchr(s, '=');
    if (!eq) {
      rc = vr_errf(err, VR_EFORMAT, "provider config line %d: expected "
                   "'key = value'", lineno);
      break;
    }
    *eq = 0;
    char *k = trim(s), *v = trim(eq + 1);
    if (!*k) {
      rc = vr_errf(err, VR_EFORMAT, "provider config line %d: empty key",
                   lineno);
      break;
    }
    if (!strcmp(k, "kind")) {
      if (kind) {
        rc = vr_errf(err, VR_EFORMAT, "provider config line %d: kind given "
                     "twice", lineno);
        break;
      }
      if (!(kind = vr_strdup(v))) rc = VR_ENOMEM;
      continue;
    }
    if (n == cap) {
      size_t nc = cap ? 2 * cap : 8;
      char **no = vr_realloc(opts, nc * sizeof *no);
      if (!no) {
        rc = VR_ENOMEM;
        break;
      }
      opts = no;
      cap = nc;
    }
    size_t kl = strlen(k), vl = strlen(v);
    char *o = vr_malloc(kl + vl + 2);
    if (!o) {
      rc = VR_ENOMEM;
      break;
    }
    memcpy(o, k, kl);
    o[kl] = '=';
    memcpy(o + kl + 1, v, vl + 1);
    opts[n++] = o;
  }
  vr_free(buf);
  if (rc == 0 && !kind)
    rc = vr_errf(err, VR_EFORMAT, "provider config: no 'kind = local|"
                 "kubernetes' line");
  if (rc) {
    vr__prov_free_opts(opts, n);
    vr_free(kind);
    return rc;
  }
  *kind_out = kind;
  *opts_out = opts;
  *nopts_out = n;
  return 0;
}

void vr__prov_free_opts(char **opts, size_t n) {
  for (size_t i = 0; i < n; i++) vr_free(opts[i]);
  vr_free(opts);
}

int vr_provider_open_file(const char *path, vr_provider **out,
                          vr_errbuf *err) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f)
    return vr_errf(err, VR_ENOENT, "provider config %s: %s", path,
                   strerror(errno));
  char *text = NULL;
  size_t len = 0, cap = 0;
  int rc = 0;
  for (;;) {
    if (len + 4096 > cap) {
      if (cap >= VR_PROV_MAX_CONFIG) {
        rc = vr_errf(err, VR_ELIMIT, "provider config %s: larger than %d "
                     "bytes", path, VR_PROV_MAX_CONFIG);
        break;
      }
      size_t nc = cap ? 2 * cap : 8192;
      char *nt = vr_realloc(text, nc);
      if (!nt) {
        rc = VR_ENOMEM;
        break;
      }
      text = nt;
      cap = nc;
    }
    size_t got = fread(text + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f))
        rc = vr_errf(err, VR_EIO, "provider config %s: read error", path);
      break;
    }
  }
  fclose(f);
  char *kind = NULL, **opts = NULL;
  size_t n = 0;
  if (rc == 0)
    rc = vr__prov_parse_config(text ? text : "", len, &kind, &opts, &n, err);
  vr_free(text);
  if (rc) return rc;
  rc = vr_provider_open(kind, (const char *const *)opts, n, out, err);
  vr__prov_free_opts(opts, n);
  vr_free(kind);
  return rc;
}
