/*
 * Metadata store: registered models, their variants and the variants'
 * profiles.
 *
 * Two halves:
 *  - an in-process index (this header's vr_store_*): models and variants by
 *    name in hash maps (O(1)), and per app the variants ordered by accuracy
 *    (descending) and by batch-1 latency (ascending) in sorted arrays, so
 *    "the variants of app A with accuracy >= x" is a binary search
 *    (O(log n)) followed by a walk;
 *  - a persistence backend behind the narrow vr_store_ops vtable. The
 *    SQLite backend (store_sqlite.c, one file) is the default; the Redis
 *    backend (store_redis.c, as INFaaS keeps its metadata) lets several
 *    processes on several hosts share one store.
 *
 * Writes go to the backend first, atomically (one transaction per
 * registration), and only then into the index, so a failed registration
 * leaves nothing half-registered in either.
 *
 * Ownership: the store owns every record it returns. Returned pointers stay
 * valid until the record's model is removed or the store is closed. The
 * store is thread-safe: writers take an internal write lock; readers that
 * hold pointers across calls bracket their use with vr_store_rdlock /
 * vr_store_unlock (the getters themselves do not lock, so they may be
 * called under the read lock).
 */
#ifndef VR_CONTROL_STORE_H
#define VR_CONTROL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "vario/engine.h"
#include "vario/status.h"

#define VR_STORE_NAME_MAX 128
#define VR_STORE_VNAME_MAX 192
#define VR_STORE_PATH_MAX 512

typedef struct vr_model_rec {
  char name[VR_STORE_NAME_MAX];
  char app[VR_STORE_NAME_MAX];
  char dir[VR_STORE_PATH_MAX]; /* repository dir: model.onnx, profiles/ */
  double accuracy;             /* fp32 accuracy, measured or declared */
  int accuracy_declared;       /* 1 = declared by the user, 0 = measured */
  int64_t registered_unix;     /* seconds since the epoch */
} vr_model_rec;

typedef struct vr_variant_rec {
  char name[VR_STORE_VNAME_MAX]; /* "<model>-<prec>-t<threads>-b<batch>" */
  char model[VR_STORE_NAME_MAX];
  char app[VR_STORE_NAME_MAX];
  vr_precision precision;
  int threads;
  int max_batch;
  /* Indexed copies of profile fields (the profile JSON is the truth). */
  double accuracy;
  double lat_b1_ms; /* p50 latency at batch 1 */
  double load_ms;
  int64_t memory_bytes;
  char *profile_json; /* profile as JSON text; owned by the record holder */
} vr_variant_rec;

/* Precision names as stored ("fp32", "bf16", "int8"). Local to the store
 * so that it does not need the engine library to link. */
const char *vr_store_prec_name(vr_precision p);
int vr_store_prec_parse(const char *s, vr_precision *out); /* 0 / VR_EINVAL */

/* Fills the canonical variant name (vr_rt_variant_name) into out (size
 * VR_STORE_VNAME_MAX). */
void vr_variant_name(char *out, const char *model, vr_precision p, int threads,
                     int max_batch);

/* ---- backend interface ------------------------------------------------- */

typedef int (*vr_store_model_cb)(void *ctx, const vr_model_rec *m);
typedef int (*vr_store_variant_cb)(void *ctx, const vr_variant_rec *v);

/* A stored document (name, body text), valid only during the call. */
typedef int (*vr_store_doc_cb)(void *ctx, const char *name, const char *body);

typedef struct vr_store_ops {
  const char *kind; /* "sqlite", "redis", ... */
  /* Atomically stores a model and its n variants; VR_EEXIST if the model
   * name is taken. On any failure nothing is stored. */
  int (*put_model)(void *be, const vr_model_rec *m, const vr_variant_rec *v,
                   size_t n, vr_errbuf *err);
  /* Atomically removes a model and its variants; VR_ENOENT if absent. */
  int (*del_model)(void *be, const char *name, vr_errbuf *err);
  /* Replaces one stored variant's indexed fields and profile. */
  int (*put_profile)(void *be, const vr_variant_rec *v, vr_errbuf *err);
  /* Streams every stored record (models first, then variants). The
   * records passed to callbacks are only valid during the call. */
  int (*load)(void *be, vr_store_model_cb on_model,
              vr_store_variant_cb on_variant, void *ctx, vr_errbuf *err);
  void (*close)(void *be);
  /* Named documents of a kind ("pipeline"): stored whole; put is
   * VR_EEXIST for a taken name, del VR_ENOENT for an absent one. NULL =
   * the backend keeps none (VR_EUNSUPPORTED). */
  int (*put_doc)(void *be, const char *kind, const char *name, const char *body,
                 vr_errbuf *err);
  int (*del_doc)(void *be, const char *kind, const char *name, vr_errbuf *err);
  int (*load_docs)(void *be, const char *kind, vr_store_doc_cb cb, void *ctx,
                   vr_errbuf *err);
  /* Optional: a number that changes whenever another process (another
   * connection) committed to the backend; NULL when it cannot tell. */
  int (*data_version)(void *be, int64_t *out, vr_errbuf *err);
} vr_store_ops;

/* Opens (creating if needed) a SQLite database file. A file that is not a
 * Vario store, is corrupted or has an unknown schema version is rejected
 * with a message naming the file. be_out receives the backend handle. */
int vr_store_sqlite_open(const char *path, void **be_out, vr_errbuf *err);
extern const vr_store_ops vr_store_sqlite_ops;

/* Connects to Redis at a redis://host[:port][/db] URL (cluster/redis.h)
 * and checks the schema stamp (a database written by another layout is
 * VR_EFORMAT). Writes are Lua scripts, so each is atomic. */
int vr_store_redis_open(const char *url, void **be_out, vr_errbuf *err);
extern const vr_store_ops vr_store_redis_ops;

/* ---- the store --------------------------------------------------------- */

typedef struct vr_store vr_store;

/* Takes ownership of backend `be` (closed by vr_store_close, and on
 * failure here) and loads every record into the index. */
int vr_store_open(const vr_store_ops *ops, void *be, vr_store **out,
                  vr_errbuf *err);
/* Convenience: the backend `where` names + vr_store_open. A redis:// URL
 * opens the Redis backend; another URL (SCHEME://..., e.g. rediss://) is
 * refused with the reason; anything else is a SQLite file path (its
 * directory is created when missing). */
int vr_store_open_path(const char *path, vr_store **out, vr_errbuf *err);
/* 1 when path names a store by URL (SCHEME://...), not a SQLite file. */
int vr_store_is_url(const char *path);
void vr_store_close(vr_store *s);

/* Registers a model with its variants (copied, profile text included). */
int vr_store_add_model(vr_store *s, const vr_model_rec *m,
                       const vr_variant_rec *v, size_t n, vr_errbuf *err);
int vr_store_remove_model(vr_store *s, const char *name, vr_errbuf *err);
/* Replaces a variant's profile and indexed fields (after re-profiling). */
int vr_store_update_profile(vr_store *s, const vr_variant_rec *v,
                            vr_errbuf *err);

/* Re-reads every record when another process changed the backend since
 * it was opened or last refreshed (`vario register` or `--remove` on the
 * store of a running server); *changed says whether it did. Records and
 * pointers read before are invalid afterwards (readers hold the lock). */
int vr_store_refresh(vr_store *s, int *changed, vr_errbuf *err);
void vr_store_rdlock(vr_store *s);
void vr_store_unlock(vr_store *s);

const vr_model_rec *vr_store_model(const vr_store *s, const char *name);
const vr_variant_rec *vr_store_variant(const vr_store *s, const char *name);
size_t vr_store_num_models(const vr_store *s);
size_t vr_store_num_variants(const vr_store *s);
/* i-th model in name order (0 <= i < num_models). */
const vr_model_rec *vr_store_model_at(const vr_store *s, size_t i);

typedef enum vr_store_order {
  VR_ORDER_ACCURACY = 0, /* accuracy descending, then latency ascending */
  VR_ORDER_LATENCY = 1,  /* batch-1 latency ascending, then accuracy desc */
} vr_store_order;

/* An app's variants in the given order; *n receives the count. Returns
 * NULL (and *n = 0) for an unknown app. */
const vr_variant_rec *const *vr_store_app_variants(const vr_store *s,
                                                   const char *app,
                                                   vr_store_order order,
                                                   size_t *n);
/* Number of an app's variants with accuracy >= min_acc: they are the first
 * that many in VR_ORDER_ACCURACY order (binary search). */
size_t vr_store_app_count_accurate(const vr_store *s, const char *app,
                                   double min_acc);
/* Variants of one model (in name order of registration). */
const vr_variant_rec *const *vr_store_model_variants(const vr_store *s,
                                                     const char *model,
                                                     size_t *n);
size_t vr_store_num_apps(const vr_store *s);

/* Named documents, straight to the backend (not indexed; the caller keeps
 * its own copy). Serialised by the store's write lock. */
int vr_store_put_doc(vr_store *s, const char *kind, const char *name, const char *body,
                     vr_errbuf *err);
int vr_store_del_doc(vr_store *s, const char *kind, const char *name, vr_errbuf *err);
int vr_store_load_docs(vr_store *s, const char *kind, vr_store_doc_cb cb, void *ctx,
                       vr_errbuf *err);
const char *vr_store_app_at(const vr_store *s, size_t i);

#endif
