/*
 * The in-process index of the metadata store (see store.h). Persistence is
 * delegated to a vr_store_ops backend; this file keeps the look-up
 * structures: hash maps by name and, per app, two sorted arrays of variant
 * pointers.
 */
#include "control/store.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/map.h"
#include "base/vec.h"
#include "cluster/redis.h"
#include "control/fsutil.h"
#include "policy/select.h"
#include "runtime/config.h"

typedef struct app_idx {
  char *name;
  vr_vec by_acc; /* vr_variant_rec*, VR_ORDER_ACCURACY */
  vr_vec by_lat; /* vr_variant_rec*, VR_ORDER_LATENCY */
} app_idx;

typedef struct model_ent {
  vr_model_rec rec;
  vr_vec variants; /* vr_variant_rec* owned here */
} model_ent;

struct vr_store {
  const vr_store_ops *ops;
  void *be;
  int64_t data_version; /* the backend's, when last read */
  uint64_t writes;      /* this process's write attempts, under the write
                         * lock: a refresh read meanwhile is stale */
  pthread_rwlock_t lock;
  vr_map models;   /* name -> model_ent* */
  vr_map variants; /* name -> vr_variant_rec* (owned via model_ent) */
  vr_map apps;     /* name -> app_idx* */
  vr_vec model_order; /* model_ent*, by name */
  vr_vec app_order;   /* app_idx*, by name */
};

const char *vr_store_prec_name(vr_precision p) {
  switch (p) {
    case VR_PREC_FP32: return "fp32";
    case VR_PREC_BF16: return "bf16";
    case VR_PREC_INT8: return "int8";
  }
  return "unknown";
}

int vr_store_prec_parse(const char *s, vr_precision *out) {
  static const vr_precision all[] = {VR_PREC_FP32, VR_PREC_BF16, VR_PREC_INT8};
  for (size_t i = 0; i < 3; i++)
    if (!strcmp(s, vr_store_prec_name(all[i]))) {
      *out = all[i];
      return 0;
    }
  return VR_EINVAL;
}

void vr_variant_name(char *out, const char *model, vr_precision p, int threads,
                     int max_batch) {
  vr_rt_variant_name(out, VR_STORE_VNAME_MAX, model, p, threads, max_batch);
}

/* ---- orderings --------------------------------------------------------- */

static int cmp_acc(const void *pa, const void *pb) {
  const vr_variant_rec *a = pa, *b = pb;
  if (a->accuracy != b->accuracy) return a->accuracy > b->accuracy ? -1 : 1;
  if (a->lat_b1_ms != b->lat_b1_ms) return a->lat_b1_ms < b->lat_b1_ms ? -1 : 1;
  return strcmp(a->name, b->name);
}

static int cmp_lat(const void *pa, const void *pb) {
  const vr_variant_rec *a = pa, *b = pb;
  if (a->lat_b1_ms != b->lat_b1_ms) return a->lat_b1_ms < b->lat_b1_ms ? -1 : 1;
  if (a->accuracy != b->accuracy) return a->accuracy > b->accuracy ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* Inserts p into a pointer vector sorted by cmp (binary search +
 * memmove). */
static int sorted_insert(vr_vec *v, void *p,
                         int (*cmp)(const void *, const void *)) {
  size_t lo = 0, hi = v->len;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (cmp(VR_VEC_AT(v, void *, mid), p) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (vr_vec_grow(v, 1) == NULL) return VR_ENOMEM;
  void **a = (void **)v->data;
  memmove(a + lo + 1, a + lo, (v->len - 1 - lo) * sizeof *a);
  a[lo] = p;
  return 0;
}

static void ptr_remove(vr_vec *v, const void *p) {
  for (size_t i = 0; i < v->len; i++)
    if (VR_VEC_AT(v, void *, i) == p) {
      vr_vec_remove(v, i);
      return;
    }
}

/* Name orders of the model and app lists. */
static int cmp_model_name(const void *a, const void *b) {
  return strcmp(((const model_ent *)a)->rec.name, ((const model_ent *)b)->rec.name);
}
static int cmp_app_name(const void *a, const void *b) {
  return strcmp(((const app_idx *)a)->name, ((const app_idx *)b)->name);
}

/* ---- index maintenance ------------------------------------------------- */

static app_idx *app_get_or_add(vr_store *s, const char *name) {
  app_idx *a = vr_map_get(&s->apps, name);
  if (a) return a;
  a = VR_NEW(app_idx);
  if (!a) return NULL;
  a->name = vr_strdup(name);
  vr_vec_init(&a->by_acc, sizeof(void *));
  vr_vec_init(&a->by_lat, sizeof(void *));
  if (!a->name || vr_map_put(&s->apps, name, a, NULL) != 0) goto fail;
  if (sorted_insert(&s->app_order, a, cmp_app_name) != 0) {
    vr_map_del(&s->apps, name);
    goto fail;
  }
  return a;
fail:
  vr_free(a->name);
  vr_free(a);
  return NULL;
}

static void app_free(app_idx *a) {
  vr_vec_free(&a->by_acc);
  vr_vec_free(&a->by_lat);
  vr_free(a->name);
  vr_free(a);
}

static void variant_free(vr_variant_rec *v) {
  if (!v) return;
  vr_free(v->profile_json);
  vr_free(v);
}

/* Unlinks a model (and whatever of its variants got indexed) and frees it.
 * Safe on a partially indexed model, which is how add failures unwind. */
static void index_remove(vr_store *s, model_ent *e) {
  app_idx *a = vr_map_get(&s->apps, e->rec.app);
  for (size_t i = 0; i < e->variants.len; i++) {
    vr_variant_rec *v = VR_VEC_AT(&e->variants, vr_variant_rec *, i);
    if (vr_map_get(&s->variants, v->name) == v) vr_map_del(&s->variants, v->name);
    if (a) {
      ptr_remove(&a->by_acc, v);
      ptr_remove(&a->by_lat, v);
    }
    variant_free(v);
  }
  vr_vec_free(&e->variants);
  if (vr_map_get(&s->models, e->rec.name) == e) vr_map_del(&s->models, e->rec.name);
  ptr_remove(&s->model_order, e);
  if (a && a->by_acc.len == 0) {
    /* Keep no empty apps: an app exists while it has a variant. */
    int still_used = 0;
    for (size_t i = 0; i < s->model_order.len; i++)
      if (!strcmp(VR_VEC_AT(&s->model_order, model_ent *, i)->rec.app, a->name))
        still_used = 1;
    if (!still_used) {
      vr_map_del(&s->apps, a->name);
      ptr_remove(&s->app_order, a);
      app_free(a);
    }
  }
  vr_free(e);
}

static vr_variant_rec *variant_copy(const vr_variant_rec *src) {
  vr_variant_rec *v = VR_NEW(vr_variant_rec);
  if (!v) return NULL;
  *v = *src;
  v->profile_json = vr_strdup(src->profile_json ? src->profile_json : "{}");
  if (!v->profile_json) {
    vr_free(v);
    return NULL;
  }
  return v;
}

static int index_add_variant(vr_store *s, model_ent *e, app_idx *a,
                             const vr_variant_rec *src) {
  vr_variant_rec *v = variant_copy(src);
  if (!v) return VR_ENOMEM;
  if (vr_vec_push(&e->variants, &v) != 0) {
    variant_free(v);
    return VR_ENOMEM;
  }
  if (vr_map_put(&s->variants, v->name, v, NULL) != 0) return VR_ENOMEM;
  if (sorted_insert(&a->by_acc, v, cmp_acc) != 0) return VR_ENOMEM;
  if (sorted_insert(&a->by_lat, v, cmp_lat) != 0) return VR_ENOMEM;
  return 0;
}

static int index_add(vr_store *s, const vr_model_rec *m,
                     const vr_variant_rec *v, size_t n) {
  model_ent *e = VR_NEW(model_ent);
  if (!e) return VR_ENOMEM;
  e->rec = *m;
  vr_vec_init(&e->variants, sizeof(vr_variant_rec *));
  if (vr_map_put(&s->models, m->name, e, NULL) != 0 ||
      sorted_insert(&s->model_order, e, cmp_model_name) != 0) {
    index_remove(s, e);
    return VR_ENOMEM;
  }
  app_idx *a = app_get_or_add(s, m->app);
  if (!a) {
    index_remove(s, e);
    return VR_ENOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    if (index_add_variant(s, e, a, &v[i]) != 0) {
      index_remove(s, e);
      return VR_ENOMEM;
    }
  }
  return 0;
}

/* ---- validation -------------------------------------------------------- */

static int check_records(const vr_store *s, const vr_model_rec *m,
                         const vr_variant_rec *v, size_t n, vr_errbuf *err) {
  if (!m->name[0] || !m->app[0])
    return vr_errf(err, VR_EINVAL, "model and app names must be non-empty");
  if (vr_map_has(&s->models, m->name))
    return vr_errf(err, VR_EEXIST, "model '%s' is already registered", m->name);
  for (size_t i = 0; i < n; i++) {
    if (strcmp(v[i].model, m->name) || strcmp(v[i].app, m->app))
      return vr_errf(err, VR_EINVAL, "variant '%s' does not belong to model '%s'",
                     v[i].name, m->name);
    if (vr_map_has(&s->variants, v[i].name))
      return vr_errf(err, VR_EEXIST, "variant '%s' already exists", v[i].name);
    if (v[i].threads < 1 || v[i].max_batch < 1)
      return vr_errf(err, VR_EINVAL, "variant '%s': threads and max batch must be >= 1",
                     v[i].name);
  }
  return 0;
}

/* ---- public API -------------------------------------------------------- */

static int load_model_cb(void *ctx, const vr_model_rec *m) {
  return index_add((vr_store *)ctx, m, NULL, 0);
}

/* The indexed fields of a stored variant, as registration writes them: a
 * NaN would break the sorted indexes (accuracy, latency), a thread or
 * batch count out of range the placement arithmetic. */
static int variant_fields_ok(const vr_variant_rec *v) {
  return v->accuracy >= 0 && v->accuracy <= 100 && v->lat_b1_ms >= 0 && isfinite(v->lat_b1_ms) &&
         v->load_ms >= 0 && isfinite(v->load_ms) && v->threads >= 1 && v->threads <= 4096 &&
         v->max_batch >= 1 && v->max_batch <= 1 << 20 && v->memory_bytes >= 0;
}

static int load_variant_cb(void *ctx, const vr_variant_rec *v) {
  vr_store *s = ctx;
  if (!variant_fields_ok(v)) return VR_EFORMAT; /* damaged store */
  model_ent *e = vr_map_get(&s->models, v->model);
  if (!e) return VR_EFORMAT; /* variant of no model: damaged store */
  app_idx *a = vr_map_get(&s->apps, e->rec.app);
  if (!a || vr_map_has(&s->variants, v->name)) return VR_EFORMAT;
  return index_add_variant(s, e, a, v);
}

/* The in-memory index (models, variants, apps) of s: initialised empty,
 * freed. The backend and the lock are not the index's. */
static void index_init(vr_store *s) {
  vr_map_init(&s->models);
  vr_map_init(&s->variants);
  vr_map_init(&s->apps);
  vr_vec_init(&s->model_order, sizeof(void *));
  vr_vec_init(&s->app_order, sizeof(void *));
}

static void index_free(vr_store *s) {
  while (s->model_order.len > 0)
    index_remove(s, VR_VEC_AT(&s->model_order, model_ent *, 0));
  /* Apps without models cannot exist, but free defensively. */
  for (size_t i = 0; i < s->app_order.len; i++)
    app_free(VR_VEC_AT(&s->app_order, app_idx *, i));
  vr_vec_free(&s->app_order);
  vr_vec_free(&s->model_order);
  vr_map_free(&s->models);
  vr_map_free(&s->variants);
  vr_map_free(&s->apps);
}

int vr_store_open(const vr_store_ops *ops, void *be, vr_store **out,
                  vr_errbuf *err) {
  *out = NULL;
  vr_store *s = VR_NEW(vr_store);
  if (!s) {
    ops->close(be);
    return vr_errf(err, VR_ENOMEM, "out of memory opening store");
  }
  s->ops = ops;
  s->be = be;
  pthread_rwlock_init(&s->lock, NULL);
  index_init(s);
  int rc = ops->load(be, load_model_cb, load_variant_cb, s, err);
  if (rc == 0 && ops->data_version) rc = ops->data_version(be, &s->data_version, err);
  if (rc != 0) {
    vr_store_close(s);
    return rc;
  }
  *out = s;
  return 0;
}

/* The new index is read aside and swapped in only when whole: a reload
 * that fails (Redis away past its retries, SQLite busy) keeps the index
 * it had and its version, so the next refresh tries again. Emptying it
 * first made a control plane that synced from it unload every model. */
int vr_store_refresh(vr_store *s, int *changed, vr_errbuf *err) {
  *changed = 0;
  int64_t v;
  if (!s->ops->data_version) return 0;
  pthread_rwlock_rdlock(&s->lock);
  uint64_t w0 = s->writes;
  pthread_rwlock_unlock(&s->lock);
  int rc = s->ops->data_version(s->be, &v, err);
  if (rc || v == s->data_version) return rc;
  vr_store fresh;
  memset(&fresh, 0, sizeof fresh);
  fresh.ops = s->ops;
  fresh.be = s->be;
  index_init(&fresh);
  rc = s->ops->load(s->be, load_model_cb, load_variant_cb, &fresh, err);
  if (rc) {
    index_free(&fresh);
    return rc;
  }
  pthread_rwlock_wrlock(&s->lock);
  if (s->writes != w0) {
    /* This process wrote while the index was read: the fresh one may
     * miss that write (SQLite's data_version does not count a
     * connection's own commits, so nothing would bring it back) or hold
     * one that was rolled back. Keep the live index; the version stays,
     * so the next refresh reads again. */
    pthread_rwlock_unlock(&s->lock);
    index_free(&fresh);
    return 0;
  }
  vr_store old = *s;
  s->models = fresh.models;
  s->variants = fresh.variants;
  s->apps = fresh.apps;
  s->model_order = fresh.model_order;
  s->app_order = fresh.app_order;
  s->data_version = v;
  pthread_rwlock_unlock(&s->lock);
  index_free(&old); /* the old index only: old.be and old.lock are s's */
  *changed = 1;
  return 0;
}

int vr_store_is_url(const char *path) {
  const char *p = path;
  while (isalpha((unsigned char)*p)) p++;
  return p > path && !strncmp(p, "://", 3);
}

int vr_store_open_path(const char *path, vr_store **out, vr_errbuf *err) {
  void *be = NULL;
  *out = NULL;
  /* Any URL goes to the Redis backend, whose parser refuses the schemes
   * it lacks by name (rediss://): one must not become a SQLite file in
   * a directory named after its scheme. */
  if (vr_store_is_url(path)) {
    int rc = vr_store_redis_open(path, &be, err);
    return rc ? rc : vr_store_open(&vr_store_redis_ops, be, out, err);
  }
  /* Like the file itself, its directory is created when missing. */
  char dir[VR_STORE_PATH_MAX];
  const char *slash = strrchr(path, '/');
  if (slash && slash > path && (size_t)(slash - path) < sizeof dir) {
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int rc = vr_mkdirs(dir, err);
    if (rc) return rc;
  }
  int rc = vr_store_sqlite_open(path, &be, err);
  if (rc != 0) return rc;
  return vr_store_open(&vr_store_sqlite_ops, be, out, err);
}

void vr_store_close(vr_store *s) {
  if (!s) return;
  index_free(s);
  if (s->be) s->ops->close(s->be);
  pthread_rwlock_destroy(&s->lock);
  vr_free(s);
}

int vr_store_add_model(vr_store *s, const vr_model_rec *m,
                       const vr_variant_rec *v, size_t n, vr_errbuf *err) {
  pthread_rwlock_wrlock(&s->lock);
  s->writes++;
  int rc = check_records(s, m, v, n, err);
  if (rc == 0) rc = s->ops->put_model(s->be, m, v, n, err);
  if (rc == 0) {
    rc = index_add(s, m, v, n);
    if (rc != 0) {
      /* Keep backend and index in agreement: undo the stored copy. */
      s->ops->del_model(s->be, m->name, NULL);
      vr_errf(err, rc, "out of memory indexing model '%s'", m->name);
    }
  }
  pthread_rwlock_unlock(&s->lock);
  return rc;
}

int vr_store_remove_model(vr_store *s, const char *name, vr_errbuf *err) {
  pthread_rwlock_wrlock(&s->lock);
  s->writes++;
  model_ent *e = vr_map_get(&s->models, name);
  int rc = e ? s->ops->del_model(s->be, name, err)
             : vr_errf(err, VR_ENOENT, "no model named '%s'", name);
  if (rc == 0) index_remove(s, e);
  pthread_rwlock_unlock(&s->lock);
  return rc;
}

int vr_store_update_profile(vr_store *s, const vr_variant_rec *v,
                            vr_errbuf *err) {
  pthread_rwlock_wrlock(&s->lock);
  s->writes++;
  vr_variant_rec *cur = vr_map_get(&s->variants, v->name);
  int rc = 0;
  char *text = NULL;
  if (!cur)
    rc = vr_errf(err, VR_ENOENT, "no variant named '%s'", v->name);
  else if (!(text = vr_strdup(v->profile_json ? v->profile_json : "{}")))
    rc = vr_errf(err, VR_ENOMEM, "out of memory");
  if (rc == 0) rc = s->ops->put_profile(s->be, v, err);
  if (rc == 0) {
    app_idx *a = vr_map_get(&s->apps, cur->app);
    ptr_remove(&a->by_acc, cur);
    ptr_remove(&a->by_lat, cur);
    vr_free(cur->profile_json);
    cur->accuracy = v->accuracy;
    cur->lat_b1_ms = v->lat_b1_ms;
    cur->load_ms = v->load_ms;
    cur->memory_bytes = v->memory_bytes;
    cur->profile_json = text;
    text = NULL;
    /* The vectors just shrank by one, so re-inserting cannot need memory. */
    sorted_insert(&a->by_acc, cur, cmp_acc);
    sorted_insert(&a->by_lat, cur, cmp_lat);
  }
  vr_free(text);
  pthread_rwlock_unlock(&s->lock);
  return rc;
}

void vr_store_rdlock(vr_store *s) { pthread_rwlock_rdlock(&s->lock); }
void vr_store_unlock(vr_store *s) { pthread_rwlock_unlock(&s->lock); }

const vr_model_rec *vr_store_model(const vr_store *s, const char *name) {
  model_ent *e = vr_map_get(&s->models, name);
  return e ? &e->rec : NULL;
}

const vr_variant_rec *vr_store_variant(const vr_store *s, const char *name) {
  return vr_map_get(&s->variants, name);
}

size_t vr_store_num_models(const vr_store *s) { return s->model_order.len; }
size_t vr_store_num_variants(const vr_store *s) { return s->variants.len; }

const vr_model_rec *vr_store_model_at(const vr_store *s, size_t i) {
  if (i >= s->model_order.len) return NULL;
  return &VR_VEC_AT(&s->model_order, model_ent *, i)->rec;
}

const vr_variant_rec *const *vr_store_app_variants(const vr_store *s,
                                                   const char *app,
                                                   vr_store_order order,
                                                   size_t *n) {
  app_idx *a = vr_map_get(&s->apps, app);
  if (!a) {
    *n = 0;
    return NULL;
  }
  const vr_vec *v = order == VR_ORDER_LATENCY ? &a->by_lat : &a->by_acc;
  *n = v->len;
  return (const vr_variant_rec *const *)v->data;
}

size_t vr_store_app_count_accurate(const vr_store *s, const char *app,
                                   double min_acc) {
  size_t n;
  const vr_variant_rec *const *v =
      vr_store_app_variants(s, app, VR_ORDER_ACCURACY, &n);
  size_t lo = 0, hi = n;
  while (lo < hi) { /* first index with accuracy < min_acc */
    size_t mid = (lo + hi) / 2;
    if (vr_acc_meets(v[mid]->accuracy, min_acc))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

const vr_variant_rec *const *vr_store_model_variants(const vr_store *s,
                                                     const char *model,
                                                     size_t *n) {
  model_ent *e = vr_map_get(&s->models, model);
  *n = e ? e->variants.len : 0;
  return e ? (const vr_variant_rec *const *)e->variants.data : NULL;
}

size_t vr_store_num_apps(const vr_store *s) { return s->app_order.len; }

const char *vr_store_app_at(const vr_store *s, size_t i) {
  if (i >= s->app_order.len) return NULL;
  return VR_VEC_AT(&s->app_order, app_idx *, i)->name;
}

/* ---- documents ---------------------------------------------------------- */

int vr_store_put_doc(vr_store *s, const char *kind, const char *name, const char *body,
                     vr_errbuf *err) {
  if (!s->ops->put_doc)
    return vr_errf(err, VR_EUNSUPPORTED, "the %s store keeps no documents", s->ops->kind);
  pthread_rwlock_wrlock(&s->lock);
  int rc = s->ops->put_doc(s->be, kind, name, body, err);
  pthread_rwlock_unlock(&s->lock);
  return rc;
}

int vr_store_del_doc(vr_store *s, const char *kind, const char *name, vr_errbuf *err) {
  if (!s->ops->del_doc)
    return vr_errf(err, VR_EUNSUPPORTED, "the %s store keeps no documents", s->ops->kind);
  pthread_rwlock_wrlock(&s->lock);
  int rc = s->ops->del_doc(s->be, kind, name, err);
  pthread_rwlock_unlock(&s->lock);
  return rc;
}

int vr_store_load_docs(vr_store *s, const char *kind, vr_store_doc_cb cb, void *ctx,
                       vr_errbuf *err) {
  if (!s->ops->load_docs) return 0;
  pthread_rwlock_rdlock(&s->lock);
  int rc = s->ops->load_docs(s->be, kind, cb, ctx, err);
  pthread_rwlock_unlock(&s->lock);
  return rc;
}
