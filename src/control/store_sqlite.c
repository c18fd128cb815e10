/*
 * SQLite persistence backend of the metadata store (vr_store_ops).
 *
 * One database file, three tables (meta, models, variants). Every write is
 * one transaction, so a registration is stored whole or not at all. At
 * open the file is checked (PRAGMA quick_check and the schema version) so
 * a damaged or foreign file is reported instead of half-loaded.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "control/store.h"

#define SCHEMA_VERSION "1"

/* Writes go through db. Loads read through rd, a second connection that
 * only reads, inside one read transaction, so models and variants come
 * from the same commit: on db itself a BEGIN would collide with a writer's
 * transaction on another thread (one connection has one transaction). */
typedef struct sqlite_be {
  sqlite3 *db;
  sqlite3 *rd;
  pthread_mutex_t rd_mu; /* one load at a time on rd */
  char *path;
} sqlite_be;

static const char k_schema[] =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);"
    "CREATE TABLE IF NOT EXISTS models("
    " name TEXT PRIMARY KEY, app TEXT NOT NULL, dir TEXT NOT NULL,"
    " accuracy REAL NOT NULL, accuracy_declared INTEGER NOT NULL,"
    " registered_unix INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS variants("
    " name TEXT PRIMARY KEY,"
    " model TEXT NOT NULL REFERENCES models(name) ON DELETE CASCADE,"
    " app TEXT NOT NULL, precision TEXT NOT NULL, threads INTEGER NOT NULL,"
    " max_batch INTEGER NOT NULL, accuracy REAL NOT NULL,"
    " lat_b1_ms REAL NOT NULL, load_ms REAL NOT NULL,"
    " memory_bytes INTEGER NOT NULL, profile TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS variants_model ON variants(model);"
    /* Named documents (pipeline specs): added without a version bump,
     * since older files simply have none. */
    "CREATE TABLE IF NOT EXISTS docs("
    " kind TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL,"
    " PRIMARY KEY(kind, name));";

static int conn_err(sqlite_be *b, sqlite3 *c, vr_errbuf *err, const char *what) {
  int code = sqlite3_errcode(c);
  int vr = (code == SQLITE_CONSTRAINT) ? VR_EEXIST
           : (code == SQLITE_NOTADB || code == SQLITE_CORRUPT) ? VR_EFORMAT
           : (code == SQLITE_NOMEM) ? VR_ENOMEM
           : (code == SQLITE_BUSY || code == SQLITE_LOCKED) ? VR_EBUSY
                                                            : VR_EIO;
  return vr_errf(err, vr, "store '%s': %s: %s", b->path, what, sqlite3_errmsg(c));
}

static int db_err(sqlite_be *b, vr_errbuf *err, const char *what) {
  return conn_err(b, b->db, err, what);
}

static int exec(sqlite_be *b, const char *sql, vr_errbuf *err) {
  if (sqlite3_exec(b->db, sql, NULL, NULL, NULL) != SQLITE_OK)
    return db_err(b, err, sql);
  return 0;
}

static void be_close(void *be) {
  sqlite_be *b = be;
  if (!b) return;
  sqlite3_close(b->rd);
  sqlite3_close(b->db);
  pthread_mutex_destroy(&b->rd_mu);
  vr_free(b->path);
  vr_free(b);
}

/* quick_check returns the single row "ok" on a sound file. */
static int check_integrity(sqlite_be *b, vr_errbuf *err) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(b->db, "PRAGMA quick_check", -1, &st, NULL) != SQLITE_OK)
    return db_err(b, err, "opening");
  int rc = sqlite3_step(st);
  int ok = rc == SQLITE_ROW &&
           !strcmp((const char *)sqlite3_column_text(st, 0), "ok");
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    sqlite3_finalize(st);
    return db_err(b, err, "opening");
  }
  sqlite3_finalize(st);
  if (!ok)
    return vr_errf(err, VR_EFORMAT, "store '%s': database file is corrupted",
                   b->path);
  return 0;
}

static int check_version(sqlite_be *b, vr_errbuf *err) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(b->db, "SELECT value FROM meta WHERE key='schema'", -1,
                         &st, NULL) != SQLITE_OK)
    return db_err(b, err, "reading schema version");
  int rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) { /* fresh file: stamp it */
    sqlite3_finalize(st);
    return exec(b, "INSERT INTO meta VALUES('schema','" SCHEMA_VERSION "')", err);
  }
  const char *v = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
  int ok = v && !strcmp(v, SCHEMA_VERSION);
  char seen[32] = "?";
  if (v) strncpy(seen, v, sizeof seen - 1);
  sqlite3_finalize(st);
  if (!ok)
    return vr_errf(err, VR_EFORMAT,
                   "store '%s': schema version '%s', this build reads '%s'",
                   b->path, seen, SCHEMA_VERSION);
  return 0;
}

/* rd only reads, but is opened read-write: a read-only connection cannot
 * roll back the journal of a writer that crashed mid-commit, and every
 * load would fail until the next write. */
static int open_reader(sqlite_be *b, vr_errbuf *err) {
  if (sqlite3_open_v2(b->path, &b->rd, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, NULL) !=
      SQLITE_OK)
    return b->rd ? conn_err(b, b->rd, err, "opening a reader")
                 : vr_errf(err, VR_ENOMEM, "store '%s': out of memory", b->path);
  sqlite3_busy_timeout(b->rd, 2000);
  return 0;
}

int vr_store_sqlite_open(const char *path, void **be_out, vr_errbuf *err) {
  *be_out = NULL;
  sqlite_be *b = VR_NEW(sqlite_be);
  if (!b || !(b->path = vr_strdup(path))) {
    vr_free(b);
    return vr_errf(err, VR_ENOMEM, "out of memory");
  }
  pthread_mutex_init(&b->rd_mu, NULL);
  int rc = sqlite3_open_v2(path, &b->db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                               SQLITE_OPEN_FULLMUTEX,
                           NULL);
  if (rc != SQLITE_OK) {
    rc = b->db ? db_err(b, err, "opening")
               : vr_errf(err, VR_ENOMEM, "store '%s': out of memory", path);
    be_close(b);
    return rc;
  }
  sqlite3_busy_timeout(b->db, 2000);
  /* Foreign keys make variants follow their model on delete. */
  rc = check_integrity(b, err);
  if (rc == 0) rc = exec(b, "PRAGMA foreign_keys=ON", err);
  if (rc == 0) rc = exec(b, k_schema, err);
  if (rc == 0) rc = check_version(b, err);
  if (rc == 0) rc = open_reader(b, err);
  if (rc != 0) {
    be_close(b);
    return rc;
  }
  *be_out = b;
  return 0;
}

/* ---- writes ------------------------------------------------------------ */

static int insert_model(sqlite_be *b, const vr_model_rec *m, vr_errbuf *err) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(b->db, "INSERT INTO models VALUES(?,?,?,?,?,?)", -1,
                         &st, NULL) != SQLITE_OK)
    return db_err(b, err, "preparing model insert");
  sqlite3_bind_text(st, 1, m->name, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, m->app, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, m->dir, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 4, m->accuracy);
  sqlite3_bind_int(st, 5, m->accuracy_declared);
  sqlite3_bind_int64(st, 6, m->registered_unix);
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_err(b, err, "inserting model");
  sqlite3_finalize(st);
  return rc;
}

/* INSERT (replace = 0) or UPDATE-by-name (replace = 1) of a variant. */
static int write_variant(sqlite_be *b, const vr_variant_rec *v, int replace,
                         vr_errbuf *err) {
  static const char ins[] =
      "INSERT INTO variants(model,app,precision,threads,max_batch,accuracy,"
      "lat_b1_ms,load_ms,memory_bytes,profile,name) VALUES(?,?,?,?,?,?,?,?,?,?,?)";
  static const char upd[] =
      "UPDATE variants SET model=?,app=?,precision=?,threads=?,max_batch=?,"
      "accuracy=?,lat_b1_ms=?,load_ms=?,memory_bytes=?,profile=? WHERE name=?";
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(b->db, replace ? upd : ins, -1, &st, NULL) != SQLITE_OK)
    return db_err(b, err, "preparing variant write");
  sqlite3_bind_text(st, 1, v->model, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, v->app, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, vr_store_prec_name(v->precision), -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 4, v->threads);
  sqlite3_bind_int(st, 5, v->max_batch);
  sqlite3_bind_double(st, 6, v->accuracy);
  sqlite3_bind_double(st, 7, v->lat_b1_ms);
  sqlite3_bind_double(st, 8, v->load_ms);
  sqlite3_bind_int64(st, 9, v->memory_bytes);
  sqlite3_bind_text(st, 10, v->profile_json ? v->profile_json : "{}", -1,
                    SQLITE_STATIC);
  sqlite3_bind_text(st, 11, v->name, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_err(b, err, "writing variant");
  if (rc == 0 && replace && sqlite3_changes(b->db) != 1)
    rc = vr_errf(err, VR_ENOENT, "store '%s': no variant '%s'", b->path, v->name);
  sqlite3_finalize(st);
  return rc;
}

static int db_put_model(void *be, const vr_model_rec *m,
                        const vr_variant_rec *v, size_t n, vr_errbuf *err) {
  sqlite_be *b = be;
  int rc = exec(b, "BEGIN IMMEDIATE", err);
  if (rc != 0) return rc;
  rc = insert_model(b, m, err);
  for (size_t i = 0; rc == 0 && i < n; i++) rc = write_variant(b, &v[i], 0, err);
  if (rc == 0) rc = exec(b, "COMMIT", err);
  if (rc != 0) sqlite3_exec(b->db, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

static int db_del_model(void *be, const char *name, vr_errbuf *err) {
  sqlite_be *b = be;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(b->db, "DELETE FROM models WHERE name=?", -1, &st,
                         NULL) != SQLITE_OK)
    return db_err(b, err, "preparing delete");
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_err(b, err, "deleting model");
  if (rc == 0 && sqlite3_changes(b->db) != 1)
    rc = vr_errf(err, VR_ENOENT, "store '%s': no model '%s'", b->path, name);
  sqlite3_finalize(st);
  return rc;
}

static int db_put_profile(void *be, const vr_variant_rec *v, vr_errbuf *err) {
  return write_variant(be, v, 1, err);
}

/* ---- load -------------------------------------------------------------- */

static void col_copy(char *dst, size_t cap, sqlite3_stmt *st, int col) {
  const unsigned char *t = sqlite3_column_text(st, col);
  snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

static int load_models(sqlite_be *b, vr_store_model_cb cb, void *ctx,
                       vr_errbuf *err) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(b->rd,
                         "SELECT name,app,dir,accuracy,accuracy_declared,"
                         "registered_unix FROM models ORDER BY name",
                         -1, &st, NULL) != SQLITE_OK)
    return conn_err(b, b->rd, err, "reading models");
  int rc = 0, step;
  while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
    vr_model_rec m = {0};
    col_copy(m.name, sizeof m.name, st, 0);
    col_copy(m.app, sizeof m.app, st, 1);
    col_copy(m.dir, sizeof m.dir, st, 2);
    m.accuracy = sqlite3_column_double(st, 3);
    m.accuracy_declared = sqlite3_column_int(st, 4);
    m.registered_unix = sqlite3_column_int64(st, 5);
    rc = cb(ctx, &m);
    if (rc != 0) vr_errf(err, rc, "store '%s': cannot load model '%s'", b->path, m.name);
  }
  if (rc == 0 && step != SQLITE_DONE) rc = conn_err(b, b->rd, err, "reading models");
  sqlite3_finalize(st);
  return rc;
}

static int load_variants(sqlite_be *b, vr_store_variant_cb cb, void *ctx,
                         vr_errbuf *err) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(b->rd,
                         "SELECT name,model,app,precision,threads,max_batch,"
                         "accuracy,lat_b1_ms,load_ms,memory_bytes,profile "
                         "FROM variants ORDER BY model, rowid",
                         -1, &st, NULL) != SQLITE_OK)
    return conn_err(b, b->rd, err, "reading variants");
  int rc = 0, step;
  while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
    vr_variant_rec v = {0};
    col_copy(v.name, sizeof v.name, st, 0);
    col_copy(v.model, sizeof v.model, st, 1);
    col_copy(v.app, sizeof v.app, st, 2);
    const unsigned char *p = sqlite3_column_text(st, 3);
    if (!p || vr_store_prec_parse((const char *)p, &v.precision) != 0) {
      rc = vr_errf(err, VR_EFORMAT, "store '%s': variant '%s' has precision '%s'",
                   b->path, v.name, p ? (const char *)p : "");
      break;
    }
    v.threads = sqlite3_column_int(st, 4);
    v.max_batch = sqlite3_column_int(st, 5);
    v.accuracy = sqlite3_column_double(st, 6);
    v.lat_b1_ms = sqlite3_column_double(st, 7);
    v.load_ms = sqlite3_column_double(st, 8);
    v.memory_bytes = sqlite3_column_int64(st, 9);
    v.profile_json = (char *)sqlite3_column_text(st, 10);
    rc = cb(ctx, &v);
    if (rc != 0)
      vr_errf(err, rc, "store '%s': cannot load variant '%s'", b->path, v.name);
  }
  if (rc == 0 && step != SQLITE_DONE) rc = conn_err(b, b->rd, err, "reading variants");
  sqlite3_finalize(st);
  return rc;
}

/* One read transaction: a registration or removal committed between the
 * two reads gave variants of a model not read (a "damaged store", which
 * failed a server's start) or a model without its variants. */
static int be_load(void *be, vr_store_model_cb on_model,
                   vr_store_variant_cb on_variant, void *ctx, vr_errbuf *err) {
  sqlite_be *b = be;
  pthread_mutex_lock(&b->rd_mu);
  int rc = sqlite3_exec(b->rd, "BEGIN", NULL, NULL, NULL) == SQLITE_OK
               ? 0
               : conn_err(b, b->rd, err, "starting a read");
  if (rc == 0) rc = load_models(b, on_model, ctx, err);
  if (rc == 0) rc = load_variants(b, on_variant, ctx, err);
  /* a read transaction: ending it cannot lose anything */
  sqlite3_exec(b->rd, "ROLLBACK", NULL, NULL, NULL);
  pthread_mutex_unlock(&b->rd_mu);
  return rc;
}

/* ---- documents ------------------------------------------------------------ */

static int db_put_doc(void *be, const char *kind, const char *name, const char *body,
                      vr_errbuf *err) {
  sqlite_be *b = be;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(b->db, "INSERT INTO docs VALUES(?,?,?)", -1, &st, NULL) != SQLITE_OK)
    return db_err(b, err, "preparing document insert");
  sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, body, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_err(b, err, "storing document");
  sqlite3_finalize(st);
  return rc;
}

static int db_del_doc(void *be, const char *kind, const char *name, vr_errbuf *err) {
  sqlite_be *b = be;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(b->db, "DELETE FROM docs WHERE kind=? AND name=?", -1, &st, NULL) !=
      SQLITE_OK)
    return db_err(b, err, "preparing document delete");
  sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_err(b, err, "deleting document");
  if (rc == 0 && sqlite3_changes(b->db) != 1)
    rc = vr_errf(err, VR_ENOENT, "store '%s': no %s '%s'", b->path, kind, name);
  sqlite3_finalize(st);
  return rc;
}

static int db_load_docs(void *be, const char *kind, vr_store_doc_cb cb, void *ctx,
                        vr_errbuf *err) {
  sqlite_be *b = be;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(b->db, "SELECT name, body FROM docs WHERE kind=? ORDER BY name", -1,
                         &st, NULL) != SQLITE_OK)
    return db_err(b, err, "preparing document load");
  sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
  int rc = 0, step;
  while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW)
    rc = cb(ctx, (const char *)sqlite3_column_text(st, 0),
            (const char *)sqlite3_column_text(st, 1));
  if (rc == 0 && step != SQLITE_DONE) rc = db_err(b, err, "loading documents");
  sqlite3_finalize(st);
  return rc;
}

/* PRAGMA data_version: changes when another connection commits. */
static int db_data_version(void *be, int64_t *out, vr_errbuf *err) {
  sqlite_be *b = be;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(b->db, "PRAGMA data_version", -1, &st, NULL) != SQLITE_OK)
    return db_err(b, err, "data_version");
  int rc = sqlite3_step(st) == SQLITE_ROW ? 0 : db_err(b, err, "data_version");
  if (!rc) *out = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return rc;
}

/* ---- one operation at a time on db ------------------------------------------ */

/* db is shared by a server's threads (a deletion on an HTTP worker, the
 * control thread's data_version every period): each operation holds the
 * connection's own mutex (recursive) across its calls, because
 * sqlite3_errcode(), sqlite3_errmsg() and sqlite3_changes() describe the
 * connection's last call, whichever thread made it, and a transaction
 * spans calls. A deletion that found the store locked read the OK of the
 * other thread's next call and answered 500 instead of 503. */
static sqlite3_mutex *db_enter(void *be) {
  sqlite3_mutex *mu = sqlite3_db_mutex(((sqlite_be *)be)->db);
  sqlite3_mutex_enter(mu);
  return mu;
}

static int db_leave(sqlite3_mutex *mu, int rc) {
  sqlite3_mutex_leave(mu);
  return rc;
}

static int be_put_doc(void *be, const char *kind, const char *name, const char *body,
                      vr_errbuf *err) {
  sqlite3_mutex *mu = db_enter(be);
  return db_leave(mu, db_put_doc(be, kind, name, body, err));
}

static int be_del_doc(void *be, const char *kind, const char *name, vr_errbuf *err) {
  sqlite3_mutex *mu = db_enter(be);
  return db_leave(mu, db_del_doc(be, kind, name, err));
}

static int be_load_docs(void *be, const char *kind, vr_store_doc_cb cb, void *ctx,
                        vr_errbuf *err) {
  sqlite3_mutex *mu = db_enter(be);
  return db_leave(mu, db_load_docs(be, kind, cb, ctx, err));
}

static int be_put_model(void *be, const vr_model_rec *m, const vr_variant_rec *v, size_t n,
                        vr_errbuf *err) {
  sqlite3_mutex *mu = db_enter(be);
  return db_leave(mu, db_put_model(be, m, v, n, err));
}

static int be_del_model(void *be, const char *name, vr_errbuf *err) {
  sqlite3_mutex *mu = db_enter(be);
  return db_leave(mu, db_del_model(be, name, err));
}

static int be_put_profile(void *be, const vr_variant_rec *v, vr_errbuf *err) {
  sqlite3_mutex *mu = db_enter(be);
  return db_leave(mu, db_put_profile(be, v, err));
}

static int be_data_version(void *be, int64_t *out, vr_errbuf *err) {
  sqlite3_mutex *mu = db_enter(be);
  return db_leave(mu, db_data_version(be, out, err));
}

const vr_store_ops vr_store_sqlite_ops = {
    .put_doc = be_put_doc,
    .del_doc = be_del_doc,
    .load_docs = be_load_docs,
    .kind = "sqlite",
    .put_model = be_put_model,
    .del_model = be_del_model,
    .put_profile = be_put_profile,
    .load = be_load,
    .close = be_close,
    .data_version = be_data_version,
};
