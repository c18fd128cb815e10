/* Metadata store: index orderings, persistence across restarts, atomic
 * registration, documents, changes made by another handle — run once per
 * backend (STORE PARITY: `unit_test_store` = SQLite, `unit_test_store
 * redis` = a private redis-server) — plus each backend's own damage
 * checks (corrupted SQLite files; foreign or damaged Redis keys). */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "control/store.h"
#include "cluster/redis.h"
#include "redis_util.h"
#include "vr_test.h"

static int g_redis;         /* the backend under test is Redis */
static vr_test_redis g_srv; /* its server */

static void tmp_db(char *path) {
  strcpy(path, "/tmp/vr_store_XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  unlink(path); /* let SQLite create it */
}

/* An empty store of the backend under test: a new SQLite file name, or
 * the Redis URL after FLUSHALL. */
static void fresh_store(char *where) {
  if (!g_redis) {
    tmp_db(where);
    return;
  }
  assert_int_equal(vr_test_redis_simple(g_srv.port, "FLUSHALL"), 0);
  strcpy(where, g_srv.url);
}

static void drop_store(const char *where) {
  if (!g_redis) unlink(where);
}

static vr_model_rec mk_model(const char *name, const char *app, double acc) {
  vr_model_rec m = {0};
  snprintf(m.name, sizeof m.name, "%s", name);
  snprintf(m.app, sizeof m.app, "%s", app);
  snprintf(m.dir, sizeof m.dir, "/repo/%s", name);
  m.accuracy = acc;
  m.registered_unix = 1700000000;
  return m;
}

static vr_variant_rec mk_var(const vr_model_rec *m, vr_precision p, int t,
                             int b, double acc, double lat) {
  vr_variant_rec v = {0};
  vr_variant_name(v.name, m->name, p, t, b);
  snprintf(v.model, sizeof v.model, "%s", m->name);
  snprintf(v.app, sizeof v.app, "%s", m->app);
  v.precision = p;
  v.threads = t;
  v.max_batch = b;
  v.accuracy = acc;
  v.lat_b1_ms = lat;
  v.load_ms = 10;
  v.memory_bytes = 1 << 20;
  v.profile_json = "{\"k\":1}";
  return v;
}

/* Two models of app "fashion", one of app "other". */
static void populate(vr_store *s) {
  vr_errbuf e = {0};
  vr_model_rec a = mk_model("cnn", "fashion", 0.91);
  vr_variant_rec av[] = {mk_var(&a, VR_PREC_FP32, 1, 1, 0.91, 2.0),
                         mk_var(&a, VR_PREC_INT8, 1, 1, 0.89, 0.8),
                         mk_var(&a, VR_PREC_FP32, 2, 8, 0.91, 1.2)};
  assert_int_equal(vr_store_add_model(s, &a, av, 3, &e), 0);
  vr_model_rec b = mk_model("mlp", "fashion", 0.85);
  vr_variant_rec bv[] = {mk_var(&b, VR_PREC_FP32, 1, 1, 0.85, 0.3)};
  assert_int_equal(vr_store_add_model(s, &b, bv, 1, &e), 0);
  vr_model_rec c = mk_model("other", "digits", 0.99);
  vr_variant_rec cv[] = {mk_var(&c, VR_PREC_FP32, 1, 4, 0.99, 5.0)};
  assert_int_equal(vr_store_add_model(s, &c, cv, 1, &e), 0);
}

static void check_populated(vr_store *s) {
  assert_int_equal(vr_store_num_models(s), 3);
  assert_int_equal(vr_store_num_variants(s), 5);
  assert_int_equal(vr_store_num_apps(s), 2);
  assert_string_equal(vr_store_app_at(s, 0), "digits");
  assert_string_equal(vr_store_model_at(s, 0)->name, "cnn");
  const vr_model_rec *m = vr_store_model(s, "mlp");
  assert_non_null(m);
  assert_string_equal(m->app, "fashion");
  assert_true(m->accuracy == 0.85);
  const vr_variant_rec *v = vr_store_variant(s, "cnn-int8-t1-b1");
  assert_non_null(v);
  assert_int_equal(v->precision, VR_PREC_INT8);
  assert_string_equal(v->profile_json, "{\"k\":1}");

  size_t n;
  const vr_variant_rec *const *acc =
      vr_store_app_variants(s, "fashion", VR_ORDER_ACCURACY, &n);
  assert_int_equal(n, 4);
  /* 0.91 (1.2 ms) before 0.91 (2.0 ms), then 0.89, then 0.85. */
  assert_string_equal(acc[0]->name, "cnn-fp32-t2-b8");
  assert_string_equal(acc[1]->name, "cnn-fp32-t1-b1");
  assert_string_equal(acc[2]->name, "cnn-int8-t1-b1");
  assert_string_equal(acc[3]->name, "mlp-fp32-t1-b1");
  const vr_variant_rec *const *lat =
      vr_store_app_variants(s, "fashion", VR_ORDER_LATENCY, &n);
  assert_string_equal(lat[0]->name, "mlp-fp32-t1-b1");
  assert_string_equal(lat[3]->name, "cnn-fp32-t1-b1");
  assert_int_equal(vr_store_app_count_accurate(s, "fashion", 0.9), 2);
  assert_int_equal(vr_store_app_count_accurate(s, "fashion", 0.5), 4);
  assert_int_equal(vr_store_app_count_accurate(s, "fashion", 0.95), 0);
  assert_int_equal(vr_store_app_count_accurate(s, "nope", 0.1), 0);
  assert_null(vr_store_app_variants(s, "nope", VR_ORDER_ACCURACY, &n));
  vr_store_model_variants(s, "cnn", &n);
  assert_int_equal(n, 3);
}

static void test_index_and_restart(void **st) {
  char path[128];
  fresh_store(path);
  vr_errbuf e = {0};
  vr_store *s;
  int64_t blocks0 = vr_mem_blocks();
  assert_int_equal(vr_store_open_path(path, &s, &e), 0);
  populate(s);
  check_populated(s);
  vr_store_close(s);
  assert_int_equal(vr_mem_blocks(), blocks0);
  /* Restart: everything comes back from the file. */
  assert_int_equal(vr_store_open_path(path, &s, &e), 0);
  check_populated(s);
  vr_store_close(s);
  drop_store(path);
}

static void test_atomic_registration(void **st) {
  char path[128];
  fresh_store(path);
  vr_errbuf e = {0};
  vr_store *s;
  assert_int_equal(vr_store_open_path(path, &s, &e), 0);
  populate(s);
  /* Same model name again. */
  vr_model_rec dup = mk_model("cnn", "fashion", 0.5);
  assert_int_equal(vr_store_add_model(s, &dup, NULL, 0, &e), VR_EEXIST);
  assert_non_null(strstr(e.msg, "cnn"));
  /* Duplicate variant names inside one registration: the backend's second
   * insert fails, and neither the model nor its first variant remains. */
  vr_model_rec m = mk_model("bad", "fashion", 0.7);
  vr_variant_rec v[] = {mk_var(&m, VR_PREC_FP32, 1, 1, 0.7, 1),
                        mk_var(&m, VR_PREC_FP32, 1, 1, 0.7, 1)};
  assert_int_not_equal(vr_store_add_model(s, &m, v, 2, &e), 0);
  assert_null(vr_store_model(s, "bad"));
  assert_null(vr_store_variant(s, "bad-fp32-t1-b1"));
  /* Variant that claims another model. */
  vr_variant_rec w = mk_var(&m, VR_PREC_FP32, 1, 1, 0.7, 1);
  strcpy(w.model, "cnn");
  assert_int_equal(vr_store_add_model(s, &m, &w, 1, &e), VR_EINVAL);
  check_populated(s);
  vr_store_close(s);
  assert_int_equal(vr_store_open_path(path, &s, &e), 0);
  assert_null(vr_store_model(s, "bad"));
  check_populated(s);
  vr_store_close(s);
  drop_store(path);
}

static void test_remove_and_update(void **st) {
  char path[128];
  fresh_store(path);
  vr_errbuf e = {0};
  vr_store *s;
  assert_int_equal(vr_store_open_path(path, &s, &e), 0);
  populate(s);
  vr_variant_rec v = *vr_store_variant(s, "mlp-fp32-t1-b1");
  v.accuracy = 0.95;
  v.lat_b1_ms = 0.2;
  v.profile_json = "{\"k\":2}";
  assert_int_equal(vr_store_update_profile(s, &v, &e), 0);
  size_t n;
  const vr_variant_rec *const *acc =
      vr_store_app_variants(s, "fashion", VR_ORDER_ACCURACY, &n);
  assert_string_equal(acc[0]->name, "mlp-fp32-t1-b1");
  strcpy(v.name, "ghost");
  assert_int_equal(vr_store_update_profile(s, &v, &e), VR_ENOENT);

  assert_int_equal(vr_store_remove_model(s, "other", &e), 0);
  assert_int_equal(vr_store_remove_model(s, "other", &e), VR_ENOENT);
  assert_int_equal(vr_store_num_apps(s), 1);
  vr_store_close(s);

  assert_int_equal(vr_store_open_path(path, &s, &e), 0);
  assert_null(vr_store_model(s, "other"));
  assert_null(vr_store_variant(s, "other-fp32-t1-b1"));
  assert_int_equal(vr_store_num_variants(s), 4);
  const vr_variant_rec *u = vr_store_variant(s, "mlp-fp32-t1-b1");
  assert_true(u->accuracy == 0.95);
  assert_string_equal(u->profile_json, "{\"k\":2}");
  vr_store_close(s);
  drop_store(path);
}

static void write_file(const char *path, const void *data, size_t n,
                       long offset) {
  FILE *f = fopen(path, offset < 0 ? "wb" : "r+b");
  assert_non_null(f);
  if (offset >= 0) fseek(f, offset, SEEK_SET);
  assert_int_equal(fwrite(data, 1, n, f), n);
  fclose(f);
}

static void test_corrupted_file(void **st) {
  char path[64];
  tmp_db(path);
  vr_errbuf e = {0};
  vr_store *s = NULL;
  /* Not a database at all. */
  char junk[4096];
  memset(junk, 'x', sizeof junk);
  write_file(path, junk, sizeof junk, -1);
  assert_int_equal(vr_store_open_path(path, &s, &e), VR_EFORMAT);
  assert_null(s);
  assert_non_null(strstr(e.msg, path));

  /* A real store whose pages were overwritten after the header. */
  unlink(path);
  assert_int_equal(vr_store_open_path(path, &s, &e), 0);
  populate(s);
  vr_store_close(s);
  /* Every page after the first (which holds the schema) is garbage. */
  for (long off = 4096; off < 32768; off += sizeof junk)
    write_file(path, junk, sizeof junk, off);
  e.msg[0] = 0;
  assert_int_not_equal(vr_store_open_path(path, &s, &e), 0);
  assert_null(s);
  assert_non_null(strstr(e.msg, path));
  unlink(path);
}

static void test_foreign_schema(void **st) {
  char path[64];
  tmp_db(path);
  vr_errbuf e = {0};
  vr_store *s = NULL;
  assert_int_equal(vr_store_open_path(path, &s, &e), 0);
  vr_store_close(s);
  /* Bump the stamped schema version with a second connection. */
  void *be;
  assert_int_equal(vr_store_sqlite_open(path, &be, &e), 0);
  vr_store_sqlite_ops.close(be);
  /* Rewriting through the public API is impossible by design, so edit the
   * file's meta row with SQLite's own text: the stamp is stored as '1'. */
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  int patched = 0;
  for (size_t i = 0; i + 7 < n; i++)
    if (!memcmp(buf + i, "schema1", 7)) {
      buf[i + 6] = '9';
      patched = 1;
    }
  assert_true(patched);
  write_file(path, buf, n, -1);
  assert_int_equal(vr_store_open_path(path, &s, &e), VR_EFORMAT);
  assert_non_null(strstr(e.msg, "schema version '9'"));
  unlink(path);
}

/* Pipelines are stored as named documents. */
static int collect(void *ctx, const char *name, const char *body) {
  char *out = ctx;
  strcat(out, name);
  strcat(out, "=");
  strcat(out, body);
  strcat(out, ";");
  return 0;
}

static void test_documents(void **st) {
  char path[128], got[256];
  fresh_store(path);
  vr_errbuf e = {0};
  vr_store *s;
  assert_int_equal(vr_store_open_path(path, &s, &e), 0);
  assert_int_equal(vr_store_put_doc(s, "pipeline", "zeta", "{\"z\":1}", &e), 0);
  assert_int_equal(vr_store_put_doc(s, "pipeline", "alpha", "{\"a\":1}", &e), 0);
  assert_int_equal(vr_store_put_doc(s, "other", "alpha", "x", &e), 0);
  assert_int_equal(vr_store_put_doc(s, "pipeline", "alpha", "{\"a\":2}", &e), VR_EEXIST);
  assert_int_equal(vr_store_put_doc(s, "pipeline", "alpha", "{\"a\":1}", &e), VR_EEXIST);
  vr_store_close(s);
  assert_int_equal(vr_store_open_path(path, &s, &e), 0);
  got[0] = 0;
  assert_int_equal(vr_store_load_docs(s, "pipeline", collect, got, &e), 0);
  assert_string_equal(got, "alpha={\"a\":1};zeta={\"z\":1};"); /* name order */
  assert_int_equal(vr_store_del_doc(s, "pipeline", "alpha", &e), 0);
  assert_int_equal(vr_store_del_doc(s, "pipeline", "alpha", &e), VR_ENOENT);
  got[0] = 0;
  assert_int_equal(vr_store_load_docs(s, "pipeline", collect, got, &e), 0);
  assert_string_equal(got, "zeta={\"z\":1};");
  got[0] = 0;
  assert_int_equal(vr_store_load_docs(s, "none", collect, got, &e), 0);
  assert_string_equal(got, "");
  vr_store_close(s);
  drop_store(path);
}

/* Two handles on one store (two processes, e.g. `vario register` beside a
 * running server): a handle's own writes do not make it reload; the other
 * handle's do, and then it sees them. */
static void test_other_handle(void **st) {
  char path[128];
  fresh_store(path);
  vr_errbuf e = {0};
  vr_store *a, *b;
  assert_int_equal(vr_store_open_path(path, &a, &e), 0);
  assert_int_equal(vr_store_open_path(path, &b, &e), 0);
  populate(a);
  int changed = -1;
  assert_int_equal(vr_store_refresh(a, &changed, &e), 0);
  assert_int_equal(changed, 0);
  assert_int_equal(vr_store_num_models(b), 0);
  assert_int_equal(vr_store_refresh(b, &changed, &e), 0);
  assert_int_equal(changed, 1);
  check_populated(b);
  assert_int_equal(vr_store_refresh(b, &changed, &e), 0);
  assert_int_equal(changed, 0);
  assert_int_equal(vr_store_remove_model(b, "other", &e), 0);
  assert_int_equal(vr_store_refresh(a, &changed, &e), 0);
  assert_int_equal(changed, 1);
  assert_null(vr_store_model(a, "other"));
  /* A registration refused in one handle because the other holds it. */
  vr_model_rec m = mk_model("other", "digits", 0.99);
  vr_variant_rec v = mk_var(&m, VR_PREC_FP32, 1, 4, 0.99, 5.0);
  assert_int_equal(vr_store_add_model(a, &m, &v, 1, &e), 0);
  assert_int_equal(vr_store_add_model(b, &m, &v, 1, &e), VR_EEXIST);
  assert_null(vr_store_model(b, "other"));
  vr_store_close(a);
  vr_store_close(b);
  drop_store(path);
}

/* A fresh store at path opened twice: *a through the backend's ops with
 * load replaced (this process), *b as another process would. The ops
 * outlive the test's stores (a store keeps a pointer to them). */
static void open_pair(char *path,
                      int (*load)(void *, vr_store_model_cb, vr_store_variant_cb, void *,
                                  vr_errbuf *),
                      vr_store **a, vr_store **b) {
  fresh_store(path);
  vr_errbuf e = {0};
  static vr_store_ops ops;
  ops = g_redis ? vr_store_redis_ops : vr_store_sqlite_ops;
  ops.load = load;
  void *be;
  assert_int_equal(g_redis ? vr_store_redis_open(path, &be, &e)
                           : vr_store_sqlite_open(path, &be, &e), 0);
  assert_int_equal(vr_store_open(&ops, be, a, &e), 0);
  assert_int_equal(vr_store_open_path(path, b, &e), 0);
}

/* A refresh whose reload fails (the backend away for a moment) keeps the
 * index it had and tries again at the next refresh; it emptied the index,
 * and a control plane syncing from it unloaded every model. */
static int g_fail_load;
static int flaky_load(void *be, vr_store_model_cb on_model, vr_store_variant_cb on_variant,
                      void *ctx, vr_errbuf *err) {
  if (g_fail_load) return vr_errf(err, VR_EIO, "backend away");
  return (g_redis ? vr_store_redis_ops : vr_store_sqlite_ops).load(be, on_model, on_variant,
                                                                    ctx, err);
}

static void test_refresh_failure_keeps_index(void **st) {
  char path[128];
  vr_errbuf e = {0};
  vr_store *a, *b;
  open_pair(path, flaky_load, &a, &b);
  populate(b);
  int changed = -1;
  assert_int_equal(vr_store_refresh(a, &changed, &e), 0);
  check_populated(a);
  assert_int_equal(vr_store_remove_model(b, "other", &e), 0);
  g_fail_load = 1;
  assert_int_equal(vr_store_refresh(a, &changed, &e), VR_EIO);
  assert_int_equal(changed, 0);
  check_populated(a); /* the old index, "other" included */
  g_fail_load = 0;
  assert_int_equal(vr_store_refresh(a, &changed, &e), 0);
  assert_int_equal(changed, 1);
  assert_null(vr_store_model(a, "other"));
  vr_store_close(a);
  vr_store_close(b);
  drop_store(path);
}

/* A write of this process while a refresh reads the store: the refresh
 * must not swap in an index read before that write (the removed model
 * came back, for good with SQLite, whose data_version does not count a
 * connection's own commits); the next refresh reads again. */
static vr_store *g_racer;
static int racing_load(void *be, vr_store_model_cb on_model, vr_store_variant_cb on_variant,
                       void *ctx, vr_errbuf *err) {
  int rc = (g_redis ? vr_store_redis_ops : vr_store_sqlite_ops).load(be, on_model, on_variant,
                                                                    ctx, err);
  if (g_racer) {
    vr_store *s = g_racer;
    g_racer = NULL;
    vr_errbuf e2 = {0};
    if (vr_store_remove_model(s, "other", &e2)) fprintf(stderr, "remove: %s\n", e2.msg);
  }
  return rc;
}

static void test_refresh_races_own_write(void **st) {
  char path[128];
  vr_errbuf e = {0};
  vr_store *a, *b;
  open_pair(path, racing_load, &a, &b);
  populate(b);
  int changed = -1;
  assert_int_equal(vr_store_refresh(a, &changed, &e), 0);
  assert_non_null(vr_store_model(a, "other"));
  /* another process's write: a's next refresh reloads... */
  vr_model_rec x = mk_model("x", "digits", 0.5);
  vr_variant_rec xv[] = {mk_var(&x, VR_PREC_FP32, 1, 1, 0.5, 1.0)};
  assert_int_equal(vr_store_add_model(b, &x, xv, 1, &e), 0);
  g_racer = a; /* ...and a removes "other" itself while it reads */
  assert_int_equal(vr_store_refresh(a, &changed, &e), 0);
  assert_null(vr_store_model(a, "other"));
  assert_int_equal(vr_store_refresh(a, &changed, &e), 0);
  assert_null(vr_store_model(a, "other"));
  assert_non_null(vr_store_model(a, "x")); /* b's write, read again */
  vr_store_close(a);
  vr_store_close(b);
  drop_store(path);
}

/* ---- Redis only ---------------------------------------------------------- */

static void test_redis_foreign_schema(void **st) {
  char path[128];
  fresh_store(path);
  assert_int_equal(vr_test_redis_simple(g_srv.port, "SET vario:schema 9"), 0);
  vr_errbuf e = {0};
  vr_store *s = NULL;
  assert_int_equal(vr_store_open_path(path, &s, &e), VR_EFORMAT);
  assert_null(s);
  assert_non_null(strstr(e.msg, "schema version '9'"));
  assert_non_null(strstr(e.msg, "redis://127.0.0.1:"));
}

/* Keys edited behind the store's back are reported, not half-loaded. */
static void test_redis_damaged(void **st) {
  static const char *edits[] = {
      "HSET vario:variant:cnn-int8-t1-b1 precision fp64",
      "HSET vario:variant:cnn-int8-t1-b1 threads x",
      "HSET vario:model:mlp accuracy 0.5junk",
      "DEL vario:model:mlp",
      "HSET vario:variant:mlp-fp32-t1-b1 model cnn",
      /* numbers that parse but no registration writes: NaN broke the
       * sorted indexes */
      "HSET vario:variant:cnn-int8-t1-b1 accuracy nan",
      "HSET vario:variant:cnn-int8-t1-b1 lat_b1_ms inf",
      "HSET vario:variant:cnn-int8-t1-b1 accuracy 250",
      "HSET vario:variant:cnn-int8-t1-b1 load_ms -1",
  };
  for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
    char path[128];
    fresh_store(path);
    vr_errbuf e = {0};
    vr_store *s = NULL;
    assert_int_equal(vr_store_open_path(path, &s, &e), 0);
    populate(s);
    vr_store_close(s);
    assert_int_equal(vr_test_redis_simple(g_srv.port, edits[i]), 0);
    s = NULL;
    int rc = vr_store_open_path(path, &s, &e);
    if (rc == 0) fail_msg("edit '%s' was loaded", edits[i]);
    assert_int_equal(rc, VR_EFORMAT);
    assert_null(s);
    assert_non_null(strstr(e.msg, "redis://"));
  }
}

static void test_redis_urls(void **st) {
  vr_errbuf e = {0};
  vr_store *s = NULL;
  assert_int_equal(vr_store_open_path("redis://127.0.0.1:0", &s, &e), VR_EINVAL);
  assert_non_null(strstr(e.msg, "port"));
  assert_int_equal(vr_store_open_path("redis://127.0.0.1:6379/x", &s, &e), VR_EINVAL);
  /* Nothing listens there (a port just freed): a clear connection error. */
  char url[160];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", vr_test_free_port());
  assert_int_equal(vr_store_open_path(url, &s, &e), VR_EIO);
  assert_non_null(strstr(e.msg, "cannot connect"));
  /* db numbers keep stores apart on one server. */
  char path[128];
  fresh_store(path);
  snprintf(url, sizeof url, "%s/3", g_srv.url);
  assert_int_equal(vr_store_open_path(url, &s, &e), 0);
  populate(s);
  vr_store_close(s);
  assert_int_equal(vr_store_open_path(path, &s, &e), 0);
  assert_int_equal(vr_store_num_models(s), 0);
  vr_store_close(s);
  assert_int_equal(vr_store_open_path(url, &s, &e), 0);
  check_populated(s);
  vr_store_close(s);
}

static void *respawn_later(void *arg) {
  vr__redis_sleep_ms(300);
  if (vr_test_redis_spawn(arg)) fprintf(stderr, "redis restart failed\n");
  return NULL;
}

/* Redis restarts empty under an open store: a registration made while it
 * is down waits (backoff) and lands once it is back; the store then sees
 * that Redis lost the older records (refresh reloads) instead of serving
 * a stale index forever. */
static void test_redis_restart(void **st) {
  char path[128];
  fresh_store(path);
  vr_errbuf e = {0};
  vr_store *s;
  assert_int_equal(vr_store_open_path(path, &s, &e), 0);
  populate(s);
  vr_test_redis_kill(&g_srv);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, respawn_later, &g_srv), 0);
  vr_model_rec m = mk_model("late", "digits", 0.9);
  vr_variant_rec v = mk_var(&m, VR_PREC_FP32, 1, 1, 0.9, 1.0);
  int rc = vr_store_add_model(s, &m, &v, 1, &e);
  pthread_join(th, NULL);
  if (rc) fail_msg("add across the restart: %s", e.msg);
  assert_non_null(vr_store_model(s, "late"));
  int changed = 0;
  assert_int_equal(vr_store_refresh(s, &changed, &e), 0);
  assert_int_equal(changed, 1);
  assert_int_equal(vr_store_num_models(s), 1); /* what Redis has now */
  assert_non_null(vr_store_model(s, "late"));
  vr_store_close(s);
  /* A fresh open of the restarted server sees the same, and works. */
  assert_int_equal(vr_store_open_path(path, &s, &e), 0);
  assert_int_equal(vr_store_num_models(s), 1);
  populate(s);
  assert_int_equal(vr_store_num_models(s), 4);
  vr_store_close(s);
}

/* A write whose reply is lost (the connection breaks after Redis ran it)
 * is re-sent by the connection layer; each write must then report what
 * really happened — not "already exists" for its own registration, not
 * "no such model" for its own removal — and apply once. */
static void test_redis_lost_reply(void **st) {
  char path[128];
  fresh_store(path);
  vr_test_proxy px;
  assert_int_equal(vr_test_proxy_start(&px, g_srv.port), 0);
  vr_errbuf e = {0};
  vr_store *s, *direct;
  assert_int_equal(vr_store_open_path(px.url, &s, &e), 0);
  vr_model_rec m = mk_model("lost", "fashion", 0.9);
  vr_variant_rec v[] = {mk_var(&m, VR_PREC_FP32, 1, 1, 0.9, 1.0),
                        mk_var(&m, VR_PREC_INT8, 1, 1, 0.88, 0.5)};
  vr_test_proxy_arm(&px);
  if (vr_store_add_model(s, &m, v, 2, &e)) fail_msg("add with a lost reply: %s", e.msg);
  assert_int_equal(vr_test_proxy_drops(&px), 1);
  assert_int_equal(vr_store_open_path(path, &direct, &e), 0);
  assert_int_equal(vr_store_num_models(direct), 1);
  assert_int_equal(vr_store_num_variants(direct), 2); /* once, not twice */
  vr_store_close(direct);
  vr_test_proxy_arm(&px);
  assert_int_equal(vr_store_put_doc(s, "pipeline", "p", "{}", &e), 0);
  assert_int_equal(vr_store_put_doc(s, "pipeline", "p", "{}", &e), VR_EEXIST); /* a real dup */
  vr_test_proxy_arm(&px);
  assert_int_equal(vr_store_del_doc(s, "pipeline", "p", &e), 0);
  vr_test_proxy_arm(&px);
  assert_int_equal(vr_store_remove_model(s, "lost", &e), 0);
  assert_int_equal(vr_test_proxy_drops(&px), 4);
  assert_int_equal(vr_store_open_path(path, &direct, &e), 0);
  assert_int_equal(vr_store_num_models(direct), 0);
  vr_store_close(direct);
  vr_store_close(s);
  vr_test_proxy_stop(&px);
}

/* A load reads models and variants from one commit. Another process
 * writes while the models are read: its commit waits (the load's read
 * lock), and holds SQLite's pending lock meanwhile, which lets no new read
 * start. Read in two transactions, the variants waited out the busy
 * timeout and the load failed (or, with the commit between the two
 * reads, saw variants of a model it had not read: a damaged store). */
typedef struct snap_ctx {
  const char *path;
  sqlite3 *w; /* the other process's connection, commit pending */
  int models, variants, w_busy;
} snap_ctx;

static int snap_model(void *ctx, const vr_model_rec *m) {
  snap_ctx *c = ctx;
  (void)m;
  if (c->models++ == 0) {
    assert_int_equal(sqlite3_open(c->path, &c->w), SQLITE_OK);
    assert_int_equal(sqlite3_exec(c->w,
                                  "BEGIN IMMEDIATE;"
                                  "INSERT INTO models VALUES('late','x','/r/late',0.5,1,1);"
                                  "INSERT INTO variants VALUES('late-fp32-t1-b1','late','x',"
                                  "'fp32',1,1,0.5,1,1,1,'{}');",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    c->w_busy = sqlite3_exec(c->w, "COMMIT", NULL, NULL, NULL) == SQLITE_BUSY;
  }
  return 0;
}

static int snap_variant(void *ctx, const vr_variant_rec *v) {
  snap_ctx *c = ctx;
  assert_string_not_equal(v->model, "late");
  c->variants++;
  return 0;
}

static void test_load_one_snapshot(void **st) {
  (void)st;
  char path[64];
  tmp_db(path);
  vr_errbuf e = {0};
  vr_store *s = NULL;
  assert_int_equal(vr_store_open_path(path, &s, &e), 0);
  populate(s);
  vr_store_close(s);
  void *be;
  assert_int_equal(vr_store_sqlite_open(path, &be, &e), 0);
  snap_ctx c = {.path = path};
  int rc = vr_store_sqlite_ops.load(be, snap_model, snap_variant, &c, &e);
  if (rc) fail_msg("load: %s", e.msg);
  assert_true(c.w_busy); /* the write really overlapped the load */
  assert_int_equal(c.models, 3);
  assert_int_equal(c.variants, 5);
  /* the load is over: the write commits, and the next load sees it */
  assert_int_equal(sqlite3_exec(c.w, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(c.w);
  vr_store_sqlite_ops.close(be);
  assert_int_equal(vr_store_open_path(path, &s, &e), 0);
  assert_non_null(vr_store_model(s, "late"));
  vr_store_close(s);
  unlink(path);
}

/* One backend's connection is shared by a server's threads (an HTTP
 * worker's deletion, the control thread's data_version). An operation's
 * outcome must be its own: sqlite3_changes() and the error code describe
 * the connection's last call, whichever thread made it, so a deletion of
 * a missing document beside another thread's writes was taken for done,
 * and one that found the store locked answered 500 (it read the other
 * call's OK) instead of 503. */
typedef struct {
  void *be;
  int stop;
  int errors;
} churn_ctx;

static void *doc_churn(void *arg) {
  churn_ctx *c = arg;
  vr_errbuf e = {0};
  while (!__atomic_load_n(&c->stop, __ATOMIC_RELAXED)) {
    c->errors += vr_store_sqlite_ops.put_doc(c->be, "pipeline", "churn", "{}", &e) != 0;
    c->errors += vr_store_sqlite_ops.del_doc(c->be, "pipeline", "churn", &e) != 0;
  }
  return NULL;
}

static void test_shared_connection(void **st) {
  (void)st;
  char path[64];
  tmp_db(path);
  vr_errbuf e = {0};
  churn_ctx c = {0};
  assert_int_equal(vr_store_sqlite_open(path, &c.be, &e), 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, doc_churn, &c), 0);
  int wrong = 0, runs = 0;
  for (int64_t t0 = vr_now_ns(); vr_now_ns() - t0 < 3000000000LL && runs < 20000; runs++) {
    int rc = vr_store_sqlite_ops.del_doc(c.be, "pipeline", "absent", &e);
    wrong += rc != VR_ENOENT;
  }
  __atomic_store_n(&c.stop, 1, __ATOMIC_RELAXED);
  pthread_join(th, NULL);
  vr_store_sqlite_ops.close(c.be);
  unlink(path);
  if (wrong || c.errors)
    fail_msg("%d of %d deletions of a missing document not VR_ENOENT; %d churn errors",
             wrong, runs, c.errors);
}

/* A URL of another scheme is refused with the reason, not taken for a
 * SQLite path: rediss:// made ./rediss:/HOST:PORT, a store nobody shared. */
static void test_other_url_schemes(void **st) {
  (void)st;
  vr_errbuf e = {0};
  vr_store *s = NULL;
  assert_int_equal(vr_store_open_path("rediss://127.0.0.1:1", &s, &e), VR_EUNSUPPORTED);
  assert_non_null(strstr(e.msg, "TLS (rediss://) is not supported"));
  assert_int_not_equal(access("rediss:", F_OK), 0);
  assert_int_equal(vr_store_open_path("mysql://127.0.0.1:1/x", &s, &e), VR_EINVAL);
  assert_non_null(strstr(e.msg, "must start with redis://"));
  assert_int_not_equal(access("mysql:", F_OK), 0);
  assert_null(s);
  assert_true(vr_store_is_url("redis://h"));
  assert_false(vr_store_is_url("/tmp/x://y.db"));
  assert_false(vr_store_is_url("store.db"));
}

int main(int argc, char **argv) {
  const struct CMUnitTest common[] = {
      cmocka_unit_test(test_index_and_restart),
      cmocka_unit_test(test_atomic_registration),
      cmocka_unit_test(test_remove_and_update),
      cmocka_unit_test(test_documents),
      cmocka_unit_test(test_other_handle),
      cmocka_unit_test(test_refresh_failure_keeps_index),
      cmocka_unit_test(test_refresh_races_own_write),
  };
  const struct CMUnitTest sqlite_only[] = {
      cmocka_unit_test(test_corrupted_file),
      cmocka_unit_test(test_foreign_schema),
      cmocka_unit_test(test_load_one_snapshot),
      cmocka_unit_test(test_shared_connection),
      cmocka_unit_test(test_other_url_schemes),
  };
  const struct CMUnitTest redis_only[] = {
      cmocka_unit_test(test_redis_foreign_schema),
      cmocka_unit_test(test_redis_damaged),
      cmocka_unit_test(test_redis_urls),
      cmocka_unit_test(test_redis_restart),
      cmocka_unit_test(test_redis_lost_reply),
  };
  if (argc < 2 || strcmp(argv[1], "redis")) {
    int rc = cmocka_run_group_tests_name("store/sqlite", common, NULL, NULL);
    return rc + cmocka_run_group_tests_name("store/sqlite-only", sqlite_only, NULL, NULL);
  }
  g_redis = 1;
  int rc = vr_test_redis_start_main(&g_srv);
  if (rc) return rc;
  rc = cmocka_run_group_tests_name("store/redis", common, NULL, NULL);
  rc += cmocka_run_group_tests_name("store/redis-only", redis_only, NULL, NULL);
  vr_test_redis_stop(&g_srv);
  return rc;
}
