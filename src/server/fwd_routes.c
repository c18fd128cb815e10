/* The forwarder's routing (fwd.h): the table in force, the workers it
 * has named, and the choice of a worker for a call. Connections and the
 * I/O thread are fwd.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "policy/route.h"
#include "server/fwd_int.h"

static fworker *worker_get(vr_fwd *f, const vr_fwd_worker *w) {
  for (fworker *x = f->workers; x; x = x->next)
    if (!strcmp(x->w.id, w->id)) {
      if (strcmp(x->w.host, w->host) || x->w.port != w->port) {
        /* moved: its pooled connections lead to the old address */
        for (int i = 0; i < x->n_idle; i++) vr__fwd_conn_free(x->idle[i]);
        x->open -= x->n_idle;
        x->n_idle = 0;
        x->w = *w;
        x->gen++; /* its connections under way lead there too */
        x->down_until = 0;
      }
      return x;
    }
  fworker *x = VR_NEW(fworker);
  if (!x) return NULL;
  x->idle = vr_calloc((size_t)f->o.max_idle, sizeof *x->idle);
  if (!x->idle) {
    vr_free(x);
    return NULL;
  }
  x->w = *w;
  x->next = f->workers;
  f->workers = x;
  return x;
}

int vr_fwd_set_table(vr_fwd *f, const vr_fwd_table *t, vr_errbuf *err) {
  /* a worker is known by its id: two addresses under one id would be one
   * worker at the last of them, the other never sent a request */
  for (int i = 0; i < t->n_workers; i++)
    for (int k = 0; k < i; k++)
      if (!strcmp(t->workers[i].id, t->workers[k].id))
        return vr_errf(err, VR_EINVAL, "worker '%.64s' listed twice", t->workers[i].id);
  for (int r = 0; r < t->n_routes; r++)
    for (int i = 0; i < t->routes[r].n; i++)
      if (t->routes[r].workers[i] < 0 || t->routes[r].workers[i] >= t->n_workers)
        return vr_errf(err, VR_EINVAL, "route '%.100s' names worker %d of %d",
                       t->routes[r].key, t->routes[r].workers[i], t->n_workers);
  vr_fwd_table c = {t->version, t->n_workers, t->n_routes, NULL, NULL};
  c.workers = vr_calloc((size_t)t->n_workers + 1, sizeof *c.workers);
  c.routes = vr_calloc((size_t)t->n_routes + 1, sizeof *c.routes);
  fworker **tw = vr_calloc((size_t)t->n_workers + 1, sizeof *tw);
  int oom = !c.workers || !c.routes || !tw;
  for (int r = 0; !oom && r < t->n_routes; r++) {
    c.routes[r] = t->routes[r];
    c.routes[r].workers = vr_calloc((size_t)t->routes[r].n + 1, sizeof(int));
    if (!c.routes[r].workers) {
      c.n_routes = r;
      oom = 1;
      break;
    }
    memcpy(c.routes[r].workers, t->routes[r].workers, sizeof(int) * (size_t)t->routes[r].n);
  }
  if (!oom) memcpy(c.workers, t->workers, sizeof *c.workers * (size_t)t->n_workers);
  pthread_mutex_lock(&f->mu);
  for (int i = 0; !oom && i < t->n_workers; i++)
    if (!(tw[i] = worker_get(f, &t->workers[i]))) oom = 1;
  if (oom) {
    pthread_mutex_unlock(&f->mu);
    vr_fwd_table_free(&c);
    vr_free(tw);
    return vr_errf(err, VR_ENOMEM, "out of memory");
  }
  for (fworker *x = f->workers; x; x = x->next) x->in_table = 0;
  for (int i = 0; i < t->n_workers; i++) tw[i]->in_table = 1;
  for (fworker *x = f->workers; x; x = x->next)
    if (!x->in_table) { /* gone: no new requests, no idle connections */
      for (int i = 0; i < x->n_idle; i++) vr__fwd_conn_free(x->idle[i]);
      x->open -= x->n_idle;
      x->n_idle = 0;
    }
  vr_fwd_table_free(&f->t);
  vr_free(f->tw);
  f->t = c;
  f->tw = tw;
  /* calls waiting for a connection pick again in the new table */
  int moved = 0;
  for (fworker *x = f->workers; x; x = x->next) moved += vr__fwd_wq_release(f, x, -1);
  pthread_mutex_unlock(&f->mu);
  if (moved) vr__fwd_wake_io(f);
  return 0;
}

int vr_fwd_has_worker(vr_fwd *f, const char *id) {
  pthread_mutex_lock(&f->mu);
  int found = 0;
  for (int i = 0; i < f->t.n_workers && !found; i++) found = !strcmp(f->t.workers[i].id, id);
  pthread_mutex_unlock(&f->mu);
  return found;
}

int vr_fwd_table_workers(vr_fwd *f) {
  pthread_mutex_lock(&f->mu);
  int n = f->t.n_workers;
  pthread_mutex_unlock(&f->mu);
  return n;
}

int64_t vr_fwd_table_version(vr_fwd *f) {
  pthread_mutex_lock(&f->mu);
  int64_t v = f->t.version;
  pthread_mutex_unlock(&f->mu);
  return v;
}

char *vr_fwd_table_current_json(vr_fwd *f) {
  pthread_mutex_lock(&f->mu);
  char *j = vr_fwd_table_json(&f->t);
  int64_t v = f->t.version;
  pthread_mutex_unlock(&f->mu);
  if (!j) return NULL;
  /* {"version":N, + the rest of the object */
  size_t n = strlen(j) + 40;
  char *out = vr_malloc(n);
  if (out) snprintf(out, n, "{\"version\":%lld,%s", (long long)v, j + 1);
  vr_free(j);
  return out;
}

/* ---- the worker for a call ------------------------------------------------ */

static int tried(const vr_fwd_call *c, const fworker *x) {
  for (int i = 0; i < c->tries && i < 4; i++)
    if (c->tried[i] == x) return 1;
  return 0;
}

/* The routes that may take key (under mu): the exact key, "<kind>:*"
 * (e.g. every app) and "*"; NULL where the table has none. */
static void routes_of(const vr_fwd *f, const char *key, const vr_fwd_route **exact,
                      const vr_fwd_route **kind, const vr_fwd_route **star) {
  *exact = *kind = *star = NULL;
  for (int i = 0; i < f->t.n_routes; i++) {
    const char *k = f->t.routes[i].key;
    if (!strcmp(k, key)) *exact = &f->t.routes[i];
    else if (k[0] == key[0] && k[1] == ':' && k[2] == '*' && !k[3]) *kind = &f->t.routes[i];
    else if (!strcmp(k, "*")) *star = &f->t.routes[i];
  }
}

int vr_fwd_table_routes(vr_fwd *f, const char *key) {
  pthread_mutex_lock(&f->mu);
  const vr_fwd_route *r, *kind, *star;
  routes_of(f, key, &r, &kind, &star);
  pthread_mutex_unlock(&f->mu);
  return r || kind || star;
}

/* The lightest usable worker of key (under mu); -1 when none. */
int vr__fwd_pick(vr_fwd *f, const char *key, const vr_fwd_call *c, int64_t now,
                 int *any_in_route) {
  /* "w:<id>": that worker alone (what lives on one worker: a job) */
  if (key[0] == 'w' && key[1] == ':') {
    *any_in_route = 0;
    for (int i = 0; i < f->t.n_workers; i++)
      if (!strcmp(f->t.workers[i].id, key + 2)) {
        *any_in_route = 1;
        return tried(c, f->tw[i]) || f->tw[i]->down_until > now ? -1 : i;
      }
    return -1;
  }
  const vr_fwd_route *r, *kind, *star;
  routes_of(f, key, &r, &kind, &star);
  if (!r || r->n == 0) r = kind && kind->n ? kind : star;
  *any_in_route = r && r->n > 0;
  if (!r) return -1;
  int best = -1, n = r->n;
  unsigned start = f->rr++;
  for (int k = 0; k < n; k++) {
    int wi = r->workers[(start + (unsigned)k) % (unsigned)n];
    fworker *x = f->tw[wi];
    if (tried(c, x) || x->down_until > now) continue;
    if (best < 0 || vr_route_lighter(0, x->outstanding, 1, 0,
                                     f->tw[best]->outstanding, 1))
      best = wi;
  }
  return best;
}
