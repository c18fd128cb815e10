/*
 * Redis persistence backend of the metadata store (vr_store_ops), for a
 * controller, front ends and workers in several processes or on several
 * hosts that share one metadata store (as INFaaS keeps its metadata in
 * Redis).
 *
 * Keys (prefix "vario:"; the layout is documented in docs/ARCHITECTURE.md):
 *   vario:schema                 "1" (rejects a foreign/newer layout)
 *   vario:version                counter bumped by every write (data_version)
 *   vario:models                 SET of model names
 *   vario:model:<name>           HASH app dir accuracy declared registered token
 *   vario:model:<name>:variants  LIST of variant names, registration order
 *   vario:variant:<vname>        HASH model app precision threads max_batch
 *                                accuracy lat_b1_ms load_ms memory_bytes profile
 *   vario:doc:<kind>             HASH name -> body (pipeline specs, ...)
 *
 * Every write is one Lua script, which Redis runs atomically: the script
 * checks everything that could make it fail before it writes anything, so
 * a refused registration leaves nothing behind. Reads (load) are one
 * script as well, so a snapshot never mixes two registrations halves.
 *
 * A write whose reply was lost to a broken connection is re-sent by the
 * connection layer (cluster/redis.c); each script recognises its own
 * earlier success (a registration token, an identical document body, an
 * already-deleted model) so a re-send neither fails nor applies twice.
 */
#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "cluster/redis.h"
#include "control/store.h"

#define PREFIX "vario:"
#define SCHEMA_VERSION "1"
#define VAR_FIELDS 9 /* name precision threads batch acc lat load mem profile */

typedef struct redis_be {
  vr_redis *r;
  int64_t own_writes; /* writes through this handle (data_version) */
} redis_be;

static const char k_put_model[] =
    "local p=ARGV[1] local mk=p..'model:'..ARGV[3]\n"
    "if redis.call('EXISTS',mk)==1 then\n"
    "  if redis.call('HGET',mk,'token')==ARGV[2] then return {1,''} end\n"
    "  return {-1,ARGV[3]} end\n"
    "local n=tonumber(ARGV[9]) local seen={}\n"
    "for i=0,n-1 do local vn=ARGV[10+i*9]\n"
    "  if seen[vn] or redis.call('EXISTS',p..'variant:'..vn)==1 then return {-2,vn} end\n"
    "  seen[vn]=true end\n"
    "redis.call('HSET',mk,'app',ARGV[4],'dir',ARGV[5],'accuracy',ARGV[6],"
    "'declared',ARGV[7],'registered',ARGV[8],'token',ARGV[2])\n"
    "for i=0,n-1 do local b=10+i*9\n"
    "  redis.call('HSET',p..'variant:'..ARGV[b],'model',ARGV[3],'app',ARGV[4],"
    "'precision',ARGV[b+1],'threads',ARGV[b+2],'max_batch',ARGV[b+3],'accuracy',ARGV[b+4],"
    "'lat_b1_ms',ARGV[b+5],'load_ms',ARGV[b+6],'memory_bytes',ARGV[b+7],'profile',ARGV[b+8])\n"
    "  redis.call('RPUSH',mk..':variants',ARGV[b]) end\n"
    "redis.call('SADD',p..'models',ARGV[3]) redis.call('INCR',p..'version')\n"
    "return {0,''}\n";

static const char k_del_model[] =
    "local p=ARGV[1] local mk=p..'model:'..ARGV[2]\n"
    "if redis.call('EXISTS',mk)==0 then return 0 end\n"
    "for _,v in ipairs(redis.call('LRANGE',mk..':variants',0,-1)) do\n"
    "  redis.call('DEL',p..'variant:'..v) end\n"
    "redis.call('DEL',mk,mk..':variants') redis.call('SREM',p..'models',ARGV[2])\n"
    "redis.call('INCR',p..'version') return 1\n";

static const char k_put_profile[] =
    "local vk=ARGV[1]..'variant:'..ARGV[2]\n"
    "if redis.call('EXISTS',vk)==0 then return 0 end\n"
    "redis.call('HSET',vk,'model',ARGV[3],'app',ARGV[4],'precision',ARGV[5],"
    "'threads',ARGV[6],'max_batch',ARGV[7],'accuracy',ARGV[8],'lat_b1_ms',ARGV[9],"
    "'load_ms',ARGV[10],'memory_bytes',ARGV[11],'profile',ARGV[12])\n"
    "redis.call('INCR',ARGV[1]..'version') return 1\n";

/* Reply: version, nmodels, then per model: name app dir accuracy declared
 * registered nvariants, then per variant: name + 10 fields. */
static const char k_load[] =
    "local p=ARGV[1] local names=redis.call('SMEMBERS',p..'models') table.sort(names)\n"
    "local o={redis.call('GET',p..'version') or '0', tostring(#names)}\n"
    "for _,m in ipairs(names) do local mk=p..'model:'..m\n"
    "  local f=redis.call('HMGET',mk,'app','dir','accuracy','declared','registered')\n"
    "  o[#o+1]=m for i=1,5 do o[#o+1]=f[i] or '' end\n"
    "  local vs=redis.call('LRANGE',mk..':variants',0,-1) o[#o+1]=tostring(#vs)\n"
    "  for _,v in ipairs(vs) do\n"
    "    local g=redis.call('HMGET',p..'variant:'..v,'model','app','precision','threads',"
    "'max_batch','accuracy','lat_b1_ms','load_ms','memory_bytes','profile')\n"
    "    o[#o+1]=v for i=1,10 do o[#o+1]=g[i] or '' end end end\n"
    "return o\n";

static const char k_put_doc[] =
    "local k=ARGV[1]..'doc:'..ARGV[2] local cur=redis.call('HGET',k,ARGV[3])\n"
    "if cur then if cur==ARGV[4] then return 1 end return -1 end\n"
    "redis.call('HSET',k,ARGV[3],ARGV[4]) redis.call('INCR',ARGV[1]..'version') return 0\n";

static const char k_del_doc[] =
    "if redis.call('HDEL',ARGV[1]..'doc:'..ARGV[2],ARGV[3])==0 then return 0 end\n"
    "redis.call('INCR',ARGV[1]..'version') return 1\n";

static const char k_load_docs[] =
    "local h=redis.call('HGETALL',ARGV[1]..'doc:'..ARGV[2]) local n={} local m={}\n"
    "for i=1,#h,2 do n[#n+1]=h[i] m[h[i]]=h[i+1] end table.sort(n)\n"
    "local o={} for _,k in ipairs(n) do o[#o+1]=k o[#o+1]=m[k] end return o\n";

static redisReply *eval(redis_be *b, const char *script, int argc, const char **argv,
                        const size_t *lens, int *resent, vr_errbuf *err) {
  return vr_redis_eval(b->r, script, argc, argv, lens, resent, err);
}

static int int_reply(redis_be *b, redisReply *rep, long long *out, vr_errbuf *err) {
  if (!rep) return err && err->code ? err->code : VR_EIO;
  int ok = rep->type == REDIS_REPLY_INTEGER;
  if (ok) *out = rep->integer;
  freeReplyObject(rep);
  return ok ? 0 : vr_errf(err, VR_EFORMAT, "%s: unexpected reply", vr_redis_name(b->r));
}

static void be_close(void *be) {
  redis_be *b = be;
  if (!b) return;
  vr_redis_close(b->r);
  vr_free(b);
}

int vr_store_redis_open(const char *url, void **be_out, vr_errbuf *err) {
  *be_out = NULL;
  vr_redis_url u;
  int rc = vr_redis_url_parse(url, &u, err);
  if (rc) return rc;
  redis_be *b = VR_NEW(redis_be);
  if (!b) return vr_errf(err, VR_ENOMEM, "out of memory");
  rc = vr_redis_open(&u, NULL, &b->r, err);
  if (rc) {
    vr_free(b);
    return rc;
  }
  /* Stamp a fresh database; refuse one written by another layout. */
  redisReply *rep = vr_redis_cmd(b->r, err, "SET " PREFIX "schema %s NX GET", SCHEMA_VERSION);
  if (!rep) {
    rc = err && err->code ? err->code : VR_EIO;
  } else {
    if (rep->type == REDIS_REPLY_STRING && strcmp(rep->str, SCHEMA_VERSION))
      rc = vr_errf(err, VR_EFORMAT, "store '%s': schema version '%.32s', this build reads '%s'",
                   vr_redis_name(b->r), rep->str, SCHEMA_VERSION);
    else if (rep->type != REDIS_REPLY_STRING && rep->type != REDIS_REPLY_NIL)
      rc = vr_errf(err, VR_EFORMAT, "store '%s': key " PREFIX "schema is not a string",
                   vr_redis_name(b->r));
    freeReplyObject(rep);
  }
  if (rc) {
    be_close(b);
    return rc;
  }
  *be_out = b;
  return 0;
}

/* ---- writes ---------------------------------------------------------------- */

static void fmt_d(char *out, double v) { snprintf(out, 32, "%.17g", v); }
static void fmt_i(char *out, int64_t v) { snprintf(out, 32, "%" PRId64, v); }

static void new_token(char *out, size_t cap) {
  static int64_t counter;
  int64_t c = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
  snprintf(out, cap, "%d-%" PRId64 "-%" PRId64, (int)getpid(), vr_now_ns(), c);
}

static int be_put_model(void *be, const vr_model_rec *m, const vr_variant_rec *v, size_t n,
                        vr_errbuf *err) {
  redis_be *b = be;
  if (n > 64)
    return vr_errf(err, VR_ELIMIT, "store '%s': model '%s' has %zu variants (at most 64)",
                   vr_redis_name(b->r), m->name, n);
  size_t argc = 9 + n * VAR_FIELDS;
  const char **a = vr_calloc(argc, sizeof *a);
  char(*num)[32] = vr_calloc(4 + n * 6, sizeof *num);
  if (!a || !num) {
    vr_free(a);
    vr_free(num);
    return vr_errf(err, VR_ENOMEM, "out of memory");
  }
  char token[96];
  new_token(token, sizeof token);
  fmt_d(num[0], m->accuracy);
  fmt_i(num[1], m->accuracy_declared);
  fmt_i(num[2], m->registered_unix);
  fmt_i(num[3], (int64_t)n);
  a[0] = PREFIX;
  a[1] = token;
  a[2] = m->name;
  a[3] = m->app;
  a[4] = m->dir;
  a[5] = num[0];
  a[6] = num[1];
  a[7] = num[2];
  a[8] = num[3];
  for (size_t i = 0; i < n; i++) {
    const char **f = a + 9 + i * VAR_FIELDS;
    char(*d)[32] = num + 4 + i * 6;
    fmt_i(d[0], v[i].threads);
    fmt_i(d[1], v[i].max_batch);
    fmt_d(d[2], v[i].accuracy);
    fmt_d(d[3], v[i].lat_b1_ms);
    fmt_d(d[4], v[i].load_ms);
    fmt_i(d[5], v[i].memory_bytes);
    f[0] = v[i].name;
    f[1] = vr_store_prec_name(v[i].precision);
    for (int k = 0; k < 6; k++) f[2 + k] = d[k];
    f[8] = v[i].profile_json ? v[i].profile_json : "{}";
  }
  redisReply *rep = eval(b, k_put_model, (int)argc, a, NULL, NULL, err);
  int rc = 0;
  if (!rep) {
    rc = err && err->code ? err->code : VR_EIO;
  } else if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
             rep->element[0]->type != REDIS_REPLY_INTEGER) {
    rc = vr_errf(err, VR_EFORMAT, "store '%s': unexpected reply", vr_redis_name(b->r));
  } else {
    long long code = rep->element[0]->integer;
    const char *what = rep->element[1]->type == REDIS_REPLY_STRING ? rep->element[1]->str : "";
    if (code == -1)
      rc = vr_errf(err, VR_EEXIST, "store '%s': model '%s' is already registered",
                   vr_redis_name(b->r), what);
    else if (code == -2)
      rc = vr_errf(err, VR_EEXIST, "store '%s': variant '%s' already exists",
                   vr_redis_name(b->r), what);
    else
      __atomic_add_fetch(&b->own_writes, 1, __ATOMIC_RELAXED);
  }
  if (rep) freeReplyObject(rep);
  vr_free(a);
  vr_free(num);
  return rc;
}

static int be_del_model(void *be, const char *name, vr_errbuf *err) {
  redis_be *b = be;
  const char *a[] = {PREFIX, name};
  int resent = 0;
  long long n = 0;
  int rc = int_reply(b, eval(b, k_del_model, 2, a, NULL, &resent, err), &n, err);
  if (rc) return rc;
  /* A re-sent delete that finds nothing: the first send did it. */
  if (n == 0 && !resent)
    return vr_errf(err, VR_ENOENT, "store '%s': no model '%s'", vr_redis_name(b->r), name);
  __atomic_add_fetch(&b->own_writes, 1, __ATOMIC_RELAXED);
  return 0;
}

static int be_put_profile(void *be, const vr_variant_rec *v, vr_errbuf *err) {
  redis_be *b = be;
  char d[6][32];
  fmt_i(d[0], v->threads);
  fmt_i(d[1], v->max_batch);
  fmt_d(d[2], v->accuracy);
  fmt_d(d[3], v->lat_b1_ms);
  fmt_d(d[4], v->load_ms);
  fmt_i(d[5], v->memory_bytes);
  const char *a[] = {PREFIX, v->name, v->model, v->app, vr_store_prec_name(v->precision),
                     d[0], d[1], d[2], d[3], d[4], d[5],
                     v->profile_json ? v->profile_json : "{}"};
  long long n = 0;
  int rc = int_reply(b, eval(b, k_put_profile, 12, a, NULL, NULL, err), &n, err);
  if (rc) return rc;
  if (n == 0)
    return vr_errf(err, VR_ENOENT, "store '%s': no variant '%s'", vr_redis_name(b->r), v->name);
  __atomic_add_fetch(&b->own_writes, 1, __ATOMIC_RELAXED);
  return 0;
}

/* ---- load ------------------------------------------------------------------ */

static int get_d(const redisReply *r, double *out) {
  if (r->type != REDIS_REPLY_STRING || !r->len) return -1;
  char *end;
  errno = 0;
  *out = strtod(r->str, &end);
  return *end || errno || !isfinite(*out) ? -1 : 0; /* "nan" and "inf" parse */
}

static int get_i(const redisReply *r, int64_t lo, int64_t hi, int64_t *out) {
  if (r->type != REDIS_REPLY_STRING || !r->len) return -1;
  char *end;
  errno = 0;
  long long v = strtoll(r->str, &end, 10);
  if (*end || errno || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int get_s(const redisReply *r, char *out, size_t cap) {
  if (r->type != REDIS_REPLY_STRING || r->len >= cap || memchr(r->str, 0, r->len)) return -1;
  memcpy(out, r->str, r->len + 1);
  return 0;
}

/* Parses the load script's reply; -1 on a malformed element (damaged
 * keys), with *at naming the record. */
static int parse_load(redisReply *rep, vr_store_model_cb on_model, vr_store_variant_cb on_variant,
                      void *ctx, int *cb_rc, char *at, size_t atcap) {
  size_t i = 2, ne = rep->elements;
  int64_t nm;
  redisReply **e = rep->element;
  if (ne < 2 || get_i(e[1], 0, INT32_MAX, &nm)) return -1;
  /* Models first (the store indexes variants under their model). */
  for (int pass = 0; pass < 2; pass++) {
    i = 2;
    for (int64_t k = 0; k < nm; k++) {
      vr_model_rec m = {0};
      int64_t decl, reg, nv;
      if (i + 7 > ne) return -1;
      snprintf(at, atcap, "model #%" PRId64, k);
      if (get_s(e[i], m.name, sizeof m.name)) return -1;
      snprintf(at, atcap, "model '%s'", m.name);
      if (get_s(e[i + 1], m.app, sizeof m.app) || !m.app[0] ||
          get_s(e[i + 2], m.dir, sizeof m.dir) || get_d(e[i + 3], &m.accuracy) ||
          get_i(e[i + 4], 0, 1, &decl) || get_i(e[i + 5], INT64_MIN, INT64_MAX, &reg) ||
          get_i(e[i + 6], 0, 4096, &nv))
        return -1;
      m.accuracy_declared = (int)decl;
      m.registered_unix = reg;
      i += 7;
      if (pass == 0 && (*cb_rc = on_model(ctx, &m)) != 0) return 0;
      for (int64_t j = 0; j < nv; j++, i += 11) {
        if (i + 11 > ne) return -1;
        if (pass == 0) continue;
        vr_variant_rec v = {0};
        int64_t th, mb, mem;
        if (get_s(e[i], v.name, sizeof v.name)) return -1;
        snprintf(at, atcap, "variant '%s'", v.name);
        /* A variant filed under one model but naming another is damage. */
        if (get_s(e[i + 1], v.model, sizeof v.model) || strcmp(v.model, m.name) ||
            get_s(e[i + 2], v.app, sizeof v.app) || strcmp(v.app, m.app) ||
            e[i + 3]->type != REDIS_REPLY_STRING ||
            vr_store_prec_parse(e[i + 3]->str, &v.precision) ||
            get_i(e[i + 4], 1, 4096, &th) || get_i(e[i + 5], 1, 1 << 20, &mb) ||
            get_d(e[i + 6], &v.accuracy) || get_d(e[i + 7], &v.lat_b1_ms) ||
            get_d(e[i + 8], &v.load_ms) || get_i(e[i + 9], INT64_MIN, INT64_MAX, &mem) ||
            e[i + 10]->type != REDIS_REPLY_STRING)
          return -1;
        v.threads = (int)th;
        v.max_batch = (int)mb;
        v.memory_bytes = mem;
        v.profile_json = e[i + 10]->str;
        if ((*cb_rc = on_variant(ctx, &v)) != 0) return 0;
      }
    }
  }
  return i == ne ? 0 : -1;
}

static int be_load(void *be, vr_store_model_cb on_model, vr_store_variant_cb on_variant,
                   void *ctx, vr_errbuf *err) {
  redis_be *b = be;
  const char *a[] = {PREFIX};
  redisReply *rep = eval(b, k_load, 1, a, NULL, NULL, err);
  if (!rep) return err && err->code ? err->code : VR_EIO;
  int cb_rc = 0, rc = 0;
  char at[VR_STORE_VNAME_MAX + 32] = "the reply";
  if (rep->type != REDIS_REPLY_ARRAY ||
      parse_load(rep, on_model, on_variant, ctx, &cb_rc, at, sizeof at))
    rc = vr_errf(err, VR_EFORMAT, "store '%s': damaged record: %s", vr_redis_name(b->r), at);
  else if (cb_rc)
    rc = vr_errf(err, cb_rc, "store '%s': cannot load %s", vr_redis_name(b->r), at);
  freeReplyObject(rep);
  return rc;
}

/* ---- documents ------------------------------------------------------------- */

static int be_put_doc(void *be, const char *kind, const char *name, const char *body,
                      vr_errbuf *err) {
  redis_be *b = be;
  const char *a[] = {PREFIX, kind, name, body};
  int resent = 0;
  long long n = 0;
  int rc = int_reply(b, eval(b, k_put_doc, 4, a, NULL, &resent, err), &n, err);
  if (rc) return rc;
  /* 1 = the same body is already there: our own re-sent write, or else a
   * genuine duplicate registration. */
  if (n < 0 || (n == 1 && !resent))
    return vr_errf(err, VR_EEXIST, "store '%s': %s '%s' already exists", vr_redis_name(b->r),
                   kind, name);
  __atomic_add_fetch(&b->own_writes, 1, __ATOMIC_RELAXED);
  return 0;
}

static int be_del_doc(void *be, const char *kind, const char *name, vr_errbuf *err) {
  redis_be *b = be;
  const char *a[] = {PREFIX, kind, name};
  int resent = 0;
  long long n = 0;
  int rc = int_reply(b, eval(b, k_del_doc, 3, a, NULL, &resent, err), &n, err);
  if (rc) return rc;
  if (n == 0 && !resent)
    return vr_errf(err, VR_ENOENT, "store '%s': no %s '%s'", vr_redis_name(b->r), kind, name);
  __atomic_add_fetch(&b->own_writes, 1, __ATOMIC_RELAXED);
  return 0;
}

static int be_load_docs(void *be, const char *kind, vr_store_doc_cb cb, void *ctx,
                        vr_errbuf *err) {
  redis_be *b = be;
  const char *a[] = {PREFIX, kind};
  redisReply *rep = eval(b, k_load_docs, 2, a, NULL, NULL, err);
  if (!rep) return err && err->code ? err->code : VR_EIO;
  int rc = 0;
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements % 2)
    rc = vr_errf(err, VR_EFORMAT, "store '%s': unexpected reply", vr_redis_name(b->r));
  for (size_t i = 0; rc == 0 && i < rep->elements; i += 2) {
    redisReply *k = rep->element[i], *v = rep->element[i + 1];
    if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
      rc = vr_errf(err, VR_EFORMAT, "store '%s': unexpected reply", vr_redis_name(b->r));
    else
      rc = cb(ctx, k->str, v->str);
  }
  freeReplyObject(rep);
  return rc;
}

/* The shared write counter minus this handle's own writes: it changes only
 * when another process wrote (or Redis lost its data), like SQLite's
 * PRAGMA data_version. */
static int be_data_version(void *be, int64_t *out, vr_errbuf *err) {
  redis_be *b = be;
  redisReply *rep = vr_redis_cmd(b->r, err, "GET " PREFIX "version");
  if (!rep) return err && err->code ? err->code : VR_EIO;
  int64_t v = 0;
  int rc = 0;
  if (rep->type == REDIS_REPLY_STRING) {
    if (get_i(rep, 0, INT64_MAX, &v))
      rc = vr_errf(err, VR_EFORMAT, "store '%s': bad " PREFIX "version", vr_redis_name(b->r));
  } else if (rep->type != REDIS_REPLY_NIL) {
    rc = vr_errf(err, VR_EFORMAT, "store '%s': bad " PREFIX "version", vr_redis_name(b->r));
  }
  freeReplyObject(rep);
  if (!rc) *out = v - __atomic_load_n(&b->own_writes, __ATOMIC_RELAXED);
  return rc;
}

const vr_store_ops vr_store_redis_ops = {
    .kind = "redis",
    .put_model = be_put_model,
    .del_model = be_del_model,
    .put_profile = be_put_profile,
    .load = be_load,
    .close = be_close,
    .put_doc = be_put_doc,
    .del_doc = be_del_doc,
    .load_docs = be_load_docs,
    .data_version = be_data_version,
};
