/*
 * The live dashboard: GET /dashboard (page), /dashboard/<file> (its script
 * and the Chart.js build npm installed at build time), and
 * /v2/dashboard/data (the numbers it charts: the control plane's recent
 * periods (per app) and actions, the pipelines' counters, and the
 * runtime's per-variant counters). The
 * assets live in a directory (VR_WEB_DIR from the build, or $VARIO_WEB_ROOT);
 * without them the page answers 503 saying so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "control/pipes.h"
#include "server/kserve.h"
#include "server/server_int.h"

#ifndef VR_WEB_DIR
#define VR_WEB_DIR ""
#endif

static void reply_err(vr_server *s, vr_http_req *r, int st, const char *msg) {
  vr_sbuf b;
  vr_sbuf_init(&b);
  vr_ks_write_error(&b, msg);
  vr_server_count(s, st);
  vr_server_reply_json(r, st, &b);
}

static int has_suffix(const char *s, const char *suf) {
  size_t n = strlen(s), k = strlen(suf);
  return n >= k && !strcmp(s + n - k, suf);
}

/* Only plain file names: no directories, no dot files. */
static int asset_name_ok(const char *n) {
  if (!*n || n[0] == '.' || strlen(n) > 64) return 0;
  for (const char *p = n; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' ||
          *p == '_' || *p == '-'))
      return 0;
  return 1;
}

void vr_server_dashboard_file(vr_server *s, vr_http_req *r, const char *name) {
  const char *root = getenv("VARIO_WEB_ROOT");
  if (!root || !*root) root = VR_WEB_DIR;
  if (!asset_name_ok(name)) return reply_err(s, r, 404, "unknown dashboard file");
  char path[4096], chart[4096];
  snprintf(path, sizeof path, "%s/%s", root, name);
  snprintf(chart, sizeof chart, "%s/chart.umd.js", root);
  int page = !strcmp(name, "dashboard.html") || !strcmp(name, "chart.umd.js");
  struct stat st;
  /* the page without its charting library would say nothing and never
   * load: it is unavailable as a whole */
  FILE *f = *root && (!page || !stat(chart, &st)) ? fopen(path, "rb") : NULL;
  if (f && (fstat(fileno(f), &st) || !S_ISREG(st.st_mode))) {
    fclose(f);
    return reply_err(s, r, 404, "unknown dashboard file");
  }
  if (!f)
    return reply_err(s, r, page ? 503 : 404,
                     "dashboard assets not found: the build fetches Chart.js from the npm "
                     "registry (was it reachable?), or set VARIO_WEB_ROOT");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = n >= 0 && n < (16 << 20) ? vr_malloc((size_t)n + 1) : NULL;
  size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
  fclose(f);
  if (!buf || got != (size_t)n) {
    vr_free(buf);
    return reply_err(s, r, 500, "cannot read a dashboard file");
  }
  const char *ct = has_suffix(name, ".js")     ? "text/javascript; charset=utf-8"
                   : has_suffix(name, ".html") ? "text/html; charset=utf-8"
                   : has_suffix(name, ".css")  ? "text/css; charset=utf-8"
                                               : "application/octet-stream";
  vr_server_count(s, 200);
  vr_http_respond(r, 200, ct, buf, (size_t)n, (size_t)-1);
}

typedef struct dash_acc {
  vr_sbuf *b;
  int first;
} dash_acc;

static void variant_one(const vr_rt_variant_stats *v, void *u) {
  dash_acc *a = u;
  vr_sbuf_puts(a->b, a->first ? "{\"model\":" : ",{\"model\":");
  a->first = 0;
  vr_sbuf_json_str(a->b, v->model);
  vr_sbuf_puts(a->b, ",\"variant\":");
  vr_sbuf_json_str(a->b, v->variant);
  uint64_t fail = 0;
  for (int o = 1; o < VR_OUT_COUNT; o++) fail += v->outcomes[o];
  vr_sbuf_printf(a->b, ",\"ok\":%llu,\"failed\":%llu,\"slo_violations\":%llu,"
                 "\"p99_ms\":%.3f,\"lat_counts\":[", (unsigned long long)v->request.count,
                 (unsigned long long)fail, (unsigned long long)v->slo_violations,
                 v->p99_ns / 1e6);
  /* cumulative per bucket of le_ms: the page takes differences between
   * polls for a live p99, as Prometheus' histogram_quantile would */
  for (int i = 0; i < VR_RT_PROM_BUCKETS; i++)
    vr_sbuf_printf(a->b, i ? ",%llu" : "%llu", (unsigned long long)v->request.counts[i]);
  vr_sbuf_puts(a->b, "]}");
}

/* ?since=T: control rows and actions newer than T seconds. */
static double since_of(const vr_http_req *r) {
  const char *q = vr_http_query(r, "since");
  return q ? strtod(q, NULL) : -1;
}

void vr_server_dashboard_data(vr_server *s, vr_http_req *r) {
  vr_sbuf b;
  vr_sbuf_init(&b);
  vr_sbuf_printf(&b, "{\"t_s\":%.3f,\"t0_s\":%.3f,\"le_ms\":[",
                 vr_now_ns() / 1e9, s->t0_ns / 1e9);
  for (int i = 0; i < VR_RT_PROM_BUCKETS - 1; i++) /* the last is +Inf */
    vr_sbuf_printf(&b, i ? ",%g" : "%g", vr_rt_prom_le[i] * 1e3);
  vr_sbuf_puts(&b, "],\"variants\":[");
  dash_acc a = {&b, 1};
  vr_rt_foreach_variant(s->rt, NULL, variant_one, &a);
  vr_sbuf_puts(&b, "],\"instances\":{");
  vr_rt_instance_stats is[VR_RT_MAX_INSTANCES];
  int n = vr_rt_instances(s->rt, NULL, is, VR_RT_MAX_INSTANCES);
  if (n > VR_RT_MAX_INSTANCES) n = VR_RT_MAX_INSTANCES;
  for (int i = 0, first = 1; i < n; i++) {
    int seen = 0, k = 0;
    for (int j = 0; j < n; j++) {
      seen |= j < i && !strcmp(is[j].variant, is[i].variant);
      k += !strcmp(is[j].variant, is[i].variant);
    }
    if (seen) continue;
    if (!first) vr_sbuf_puts(&b, ",");
    first = 0;
    vr_sbuf_json_str(&b, is[i].variant);
    vr_sbuf_printf(&b, ":%d", k);
  }
  vr_sbuf_puts(&b, "},\"pipelines\":");
  char *pj = s->pipes ? vr_pipes_dashboard(s->pipes) : NULL;
  vr_sbuf_puts(&b, pj ? pj : "[]");
  vr_free(pj);
  vr_sbuf_puts(&b, ",\"control\":");
  char *h = s->ctl ? vr_control_history(s->ctl, since_of(r)) : NULL;
  vr_sbuf_puts(&b, h ? h : "null");
  vr_free(h);
  vr_sbuf_puts(&b, "}");
  vr_server_count(s, 200);
  vr_server_reply_json(r, 200, &b);
}
