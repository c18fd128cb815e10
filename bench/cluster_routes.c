/* Routing-table propagation (issue 18): the controller's write of a new
 * table (vr_registry_put_routes) until a front end's forwarder routes by
 * it (subscription -> vr_fwd_table_parse -> vr_fwd_set_table: the same
 * path `vario frontend --registry` takes). N tables of W workers, each
 * published once the previous one arrived; prints p50/p90/p99/max.
 * Usage: bench_cluster_routes redis://127.0.0.1:PORT [N] [W] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/hist.h"
#include "cluster/registry.h"
#include "server/fwd.h"

typedef struct sub_ctx {
  vr_fwd *fwd;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int64_t applied_version, applied_ns;
} sub_ctx;

static void on_ev(void *p, const vr_registry_event *ev) {
  sub_ctx *s = p;
  if (ev->kind != VR_REG_EV_ROUTES || strcmp(ev->table, "bench")) return;
  vr_fwd_table t;
  vr_errbuf err = {0};
  if (vr_fwd_table_parse(ev->body, strlen(ev->body), ev->version, &t, &err) ||
      vr_fwd_set_table(s->fwd, &t, &err)) {
    fprintf(stderr, "refused: %s\n", err.msg);
    return;
  }
  vr_fwd_table_free(&t);
  pthread_mutex_lock(&s->mu);
  s->applied_version = ev->version;
  s->applied_ns = vr_now_ns();
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s redis://HOST:PORT [N] [WORKERS]\n", argv[0]);
    return 2;
  }
  int n = argc > 2 ? atoi(argv[2]) : 200, nw = argc > 3 ? atoi(argv[3]) : 8;
  vr_errbuf err = {0};
  vr_registry *reg;
  vr_fwd *fwd;
  sub_ctx s = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  vr_registry_sub *sub;
  if (vr_registry_open(argv[1], NULL, &reg, &err) || vr_fwd_create(NULL, &fwd, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  s.fwd = fwd;
  if (vr_registry_subscribe(argv[1], NULL, on_ev, &s, &sub, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  vr_hist h;
  vr_hist_init(&h);
  char *body = vr_malloc(65536);
  for (int i = 0; i < n; i++) {
    /* a table of nw workers, one model per worker plus the app route */
    int off = snprintf(body, 65536, "{\"workers\":[");
    for (int w = 0; w < nw; w++)
      off += snprintf(body + off, 65536 - off, "%s{\"id\":\"w%d\",\"addr\":\"127.0.0.1:%d\"}",
                      w ? "," : "", w, 9000 + (w + i) % 1000);
    off += snprintf(body + off, 65536 - off, "],\"routes\":{\"a:*\":[");
    for (int w = 0; w < nw; w++) off += snprintf(body + off, 65536 - off, "%s\"w%d\"", w ? "," : "", w);
    off += snprintf(body + off, 65536 - off, "]");
    for (int w = 0; w < nw; w++)
      off += snprintf(body + off, 65536 - off, ",\"m:model%d\":[\"w%d\"]", w, w);
    snprintf(body + off, 65536 - off, "}}");
    int64_t t0 = vr_now_ns(), ver = 0;
    if (vr_registry_put_routes(reg, "bench", body, -1, &ver, &err)) {
      fprintf(stderr, "%s\n", err.msg);
      return 1;
    }
    pthread_mutex_lock(&s.mu);
    while (s.applied_version < ver) pthread_cond_wait(&s.cv, &s.mu);
    int64_t dt = s.applied_ns - t0;
    pthread_mutex_unlock(&s.mu);
    vr_hist_record(&h, (uint64_t)dt);
  }
  printf("routing-table propagation (put_routes -> front end routes by it), %d tables of"
         " %d workers: p50 %.1f us  p90 %.1f us  p99 %.1f us  max %.1f us\n", n, nw,
         vr_hist_quantile(&h, 0.5) / 1e3, vr_hist_quantile(&h, 0.9) / 1e3,
         vr_hist_quantile(&h, 0.99) / 1e3, (double)h.max / 1e3);
  vr_free(body);
  vr_registry_unsubscribe(sub);
  vr_fwd_free(fwd);
  vr_registry_close(reg);
  return 0;
}
