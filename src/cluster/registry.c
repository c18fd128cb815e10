/*
 * Cluster registry in Redis: workers with leases, their instances and
 * versioned routing tables (see registry.h for the keys and the rules).
 * Each operation is one Lua script, so a reader never sees half of a
 * write. The subscription lives in registry_sub.c.
 */
#include "cluster/registry.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "cluster/registry_int.h"

typedef struct own_worker { /* a worker this handle registered */
  vr_worker_info info;
  int lease_ms;
  vr_instance_info *inst; /* its last published instances (re-put after a loss) */
  size_t ninst;
} own_worker;

typedef struct seen_table {
  char name[VR_REG_ID_MAX];
  int64_t version;
} seen_table;

struct vr_registry {
  vr_redis *r;
  char owner[96];     /* this handle's identity in a worker's 'owner' field */
  pthread_mutex_t mu; /* guards own and seen */
  own_worker *own;
  size_t nown;
  seen_table *seen;
  size_t nseen;
};

/* ---- scripts ---------------------------------------------------------------- */

#define NOW_MS "local t=redis.call('TIME') local ms=t[1]*1000+math.floor(t[2]/1000)\n"

/* ARGV: prefix id owner addr cores memory meta lease */
static const char k_register[] =
    "local k=ARGV[1]..'worker:'..ARGV[2] local o=redis.call('HGET',k,'owner')\n"
    "if o and o~=ARGV[3] then return {-1,redis.call('PTTL',k)} end\n" NOW_MS
    "redis.call('HSET',k,'addr',ARGV[4],'cores',ARGV[5],'memory_bytes',ARGV[6],'meta',ARGV[7],"
    "'owner',ARGV[3],'registered_ms',string.format('%d',ms),'heartbeat_ms',string.format('%d',ms),"
    "'lease_ms',ARGV[8])\n"
    "redis.call('PEXPIRE',k,ARGV[8]) local ik=k..':instances'\n"
    "if #ARGV>8 then redis.call('DEL',ik)\n"
    "  for i=9,#ARGV,2 do redis.call('HSET',ik,ARGV[i],ARGV[i+1]) end end\n"
    "redis.call('PEXPIRE',ik,ARGV[8]) redis.call('SADD',ARGV[1]..'workers',ARGV[2])\n"
    "redis.call('ZREM',ARGV[1]..'deregistered',ARGV[2])\n"
    "redis.call('PUBLISH',ARGV[1]..'workers','up '..ARGV[2]) return {0,0}\n";

/* ARGV: prefix id owner lease. 1 = refreshed, 0 = gone, -1 = not ours. */
static const char k_heartbeat[] =
    "local k=ARGV[1]..'worker:'..ARGV[2] local o=redis.call('HGET',k,'owner')\n"
    "if not o then return 0 end if o~=ARGV[3] then return -1 end\n" NOW_MS
    "redis.call('HSET',k,'heartbeat_ms',string.format('%d',ms))\n"
    "redis.call('PEXPIRE',k,ARGV[4]) redis.call('PEXPIRE',k..':instances',ARGV[4]) return 1\n";

/* ARGV: prefix id lease (0: unknown). Leaves a tombstone for a lease: the
 * worker's own, else the caller's (Redis may have lost the worker). The
 * set expires with its last tombstone. */
static const char k_deregister[] =
    "local k=ARGV[1]..'worker:'..ARGV[2] local n=redis.call('EXISTS',k)\n"
    "local ttl=tonumber(redis.call('HGET',k,'lease_ms') or ARGV[3]) or 0\n"
    "redis.call('DEL',k,k..':instances') redis.call('SREM',ARGV[1]..'workers',ARGV[2])\n"
    "if ttl>0 then " NOW_MS "  local g=ARGV[1]..'deregistered'\n"
    "  redis.call('ZADD',g,string.format('%d',ms+ttl),ARGV[2])\n"
    "  redis.call('PEXPIREAT',g,redis.call('ZRANGE',g,-1,-1,'WITHSCORES')[2]) end\n"
    "if n==1 then redis.call('PUBLISH',ARGV[1]..'workers','down '..ARGV[2]) end return n\n";

/* {per live worker: id addr cores memory meta registered heartbeat lease
 * pttl, the ids with a live tombstone (deregistered within a lease)}. */
static const char k_workers[] =
    "local ids=redis.call('SMEMBERS',ARGV[1]..'workers') table.sort(ids) local o={}\n"
    "for _,id in ipairs(ids) do local k=ARGV[1]..'worker:'..id\n"
    "  local f=redis.call('HMGET',k,'addr','cores','memory_bytes','meta','registered_ms',"
    "'heartbeat_ms','lease_ms')\n"
    "  if not f[1] then redis.call('SREM',ARGV[1]..'workers',id)\n"
    "    redis.call('PUBLISH',ARGV[1]..'workers','down '..id)\n"
    "  else o[#o+1]=id for i=1,7 do o[#o+1]=f[i] or '' end\n"
    "    o[#o+1]=tostring(redis.call('PTTL',k)) end end\n" NOW_MS
    "local g=ARGV[1]..'deregistered'\n"
    "redis.call('ZREMRANGEBYSCORE',g,'-inf',string.format('%d',ms))\n"
    "return {o,redis.call('ZRANGE',g,0,-1)}\n";

/* ARGV: prefix worker (id json)... */
static const char k_put_instances[] =
    "local k=ARGV[1]..'worker:'..ARGV[2]\n"
    "if redis.call('EXISTS',k)==0 then return 0 end\n"
    "local ik=k..':instances' redis.call('DEL',ik)\n"
    "for i=3,#ARGV,2 do redis.call('HSET',ik,ARGV[i],ARGV[i+1]) end\n"
    "local ttl=redis.call('PTTL',k) if ttl>0 and #ARGV>2 then redis.call('PEXPIRE',ik,ttl) end\n"
    "redis.call('PUBLISH',ARGV[1]..'workers','instances '..ARGV[2]) return 1\n";

/* ARGV: prefix worker -> -1 when the worker is not live, else its
 * instances' HGETALL: one script, so that a lease that ended after the
 * listing is not read as a live worker holding nothing. */
static const char k_instances[] =
    "local k=ARGV[1]..'worker:'..ARGV[2]\n"
    "if redis.call('EXISTS',k)==0 then return -1 end\n"
    "return redis.call('HGETALL',k..':instances')\n";

/* ARGV: prefix table body expect floor -> {0,version} or {-1,current} */
static const char k_put_routes[] =
    "local k=ARGV[1]..'routes:'..ARGV[2]\n"
    "local cur=tonumber(redis.call('HGET',k,'version') or '0')\n"
    "local ex=tonumber(ARGV[4])\n"
    "if ex>=0 and cur~=ex then return {-1,string.format('%d',cur)} end\n"
    "local v=string.format('%d',math.max(cur,tonumber(ARGV[5]))+1)\n"
    "redis.call('HSET',k,'version',v,'body',ARGV[3]) redis.call('SADD',ARGV[1]..'routes',ARGV[2])\n"
    "redis.call('PUBLISH',ARGV[1]..'routes',ARGV[2]..' '..v..'\\n'..ARGV[3]) return {0,v}\n";

/* Every table: name version body ... */
static const char k_all_routes[] =
    "local o={} for _,t in ipairs(redis.call('SMEMBERS',ARGV[1]..'routes')) do\n"
    "  local f=redis.call('HMGET',ARGV[1]..'routes:'..t,'version','body')\n"
    "  if f[1] then o[#o+1]=t o[#o+1]=f[1] o[#o+1]=f[2] or '' end end return o\n";

/* ---- helpers ---------------------------------------------------------------- */

int vr_registry_valid_id(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n >= VR_REG_ID_MAX) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '.' || c == '_' || c == '-'))
      return 0;
  }
  return 1;
}

static int bad_id(const char *what, const char *s, vr_errbuf *err) {
  return vr_errf(err, VR_EINVAL, "registry: %s '%.80s' must be 1..%d characters of [A-Za-z0-9._-]",
                 what, s ? s : "", VR_REG_ID_MAX - 1);
}

static int reply_rc(vr_errbuf *err) { return err && err->code ? err->code : VR_EIO; }

static int unexpected(vr_registry *r, vr_errbuf *err) {
  return vr_errf(err, VR_EFORMAT, "registry %s: unexpected reply", vr_redis_name(r->r));
}

int vr__reg_get_i64(const redisReply *e, int64_t lo, int64_t hi, int64_t *out) {
  if (!e || e->type != REDIS_REPLY_STRING || !e->len) return -1;
  char *end;
  errno = 0;
  long long v = strtoll(e->str, &end, 10);
  if (*end || errno || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int get_str(const redisReply *e, char *out, size_t cap) {
  if (!e || e->type != REDIS_REPLY_STRING || e->len >= cap) return -1;
  memcpy(out, e->str, e->len + 1);
  return 0;
}

/* ---- open / close ----------------------------------------------------------- */

int vr_registry_open(const char *url, const vr_redis_opts *o, vr_registry **out,
                     vr_errbuf *err) {
  *out = NULL;
  vr_redis_url u;
  int rc = vr_redis_url_parse(url, &u, err);
  if (rc) return rc;
  vr_registry *r = VR_NEW(vr_registry);
  if (!r) return vr_errf(err, VR_ENOMEM, "out of memory");
  rc = vr_redis_open(&u, o, &r->r, err);
  if (rc) {
    vr_free(r);
    return rc;
  }
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  snprintf(r->owner, sizeof r->owner, "%.60s/%d/%" PRId64, host, (int)getpid(), vr_now_ns());
  pthread_mutex_init(&r->mu, NULL);
  *out = r;
  return 0;
}

void vr_registry_close(vr_registry *r) {
  if (!r) return;
  for (size_t i = 0; i < r->nown; i++) vr_free(r->own[i].inst);
  vr_free(r->own);
  vr_free(r->seen);
  vr_redis_close(r->r);
  pthread_mutex_destroy(&r->mu);
  vr_free(r);
}

vr_redis *vr_registry_redis(vr_registry *r) { return r->r; }

/* ---- workers ---------------------------------------------------------------- */

static own_worker *own_find(vr_registry *r, const char *id) {
  for (size_t i = 0; i < r->nown; i++)
    if (!strcmp(r->own[i].info.id, id)) return &r->own[i];
  return NULL;
}

/* Registers w; with instances (n > 0) its instance records too, in the
 * same script: a reader that sees the worker sees them. */
static int run_register(vr_registry *r, const vr_worker_info *w, int lease_ms,
                        const vr_instance_info *inst, size_t n, vr_errbuf *err) {
  char cores[24], mem[24], lease[24];
  snprintf(cores, sizeof cores, "%d", w->cores);
  snprintf(mem, sizeof mem, "%" PRId64, w->memory_bytes);
  snprintf(lease, sizeof lease, "%d", lease_ms);
  size_t argc = 8 + 2 * n;
  const char **a = vr_calloc(argc, sizeof *a);
  char **js = vr_calloc(n ? n : 1, sizeof *js);
  if (!a || !js) {
    vr_free(a);
    vr_free(js);
    return vr_errf(err, VR_ENOMEM, "out of memory");
  }
  const char *head[] = {VR_REG_PREFIX, w->id, r->owner, w->addr, cores, mem, w->meta, lease};
  memcpy(a, head, sizeof head);
  int rc = 0;
  for (size_t i = 0; !rc && i < n; i++) {
    if (!(js[i] = vr__reg_inst_json(&inst[i]))) rc = vr_errf(err, VR_ENOMEM, "out of memory");
    a[8 + 2 * i] = inst[i].id;
    a[9 + 2 * i] = js[i];
  }
  redisReply *rep = rc ? NULL : vr_redis_eval(r->r, k_register, (int)argc, a, NULL, NULL, err);
  for (size_t i = 0; i < n; i++) free(js[i]); /* jansson's malloc */
  vr_free(js);
  vr_free(a);
  if (rc) return rc;
  if (!rep) return reply_rc(err);
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
      rep->element[0]->type != REDIS_REPLY_INTEGER)
    rc = unexpected(r, err);
  else if (rep->element[0]->integer < 0)
    rc = vr_errf(err, VR_EEXIST,
                 "registry %s: worker '%s' is live, registered by another process (lease ends "
                 "in %lld ms)",
                 vr_redis_name(r->r), w->id, rep->element[1]->integer);
  freeReplyObject(rep);
  return rc;
}

int vr_registry_worker_register(vr_registry *r, const vr_worker_info *w, int lease_ms,
                                vr_errbuf *err) {
  if (!vr_registry_valid_id(w->id)) return bad_id("worker id", w->id, err);
  if (lease_ms < 10) return vr_errf(err, VR_EINVAL, "registry: lease must be >= 10 ms");
  if (!memchr(w->addr, 0, sizeof w->addr) || !memchr(w->meta, 0, sizeof w->meta))
    return vr_errf(err, VR_EINVAL, "registry: worker address or meta not terminated");
  int rc = run_register(r, w, lease_ms, NULL, 0, err);
  if (rc) return rc;
  pthread_mutex_lock(&r->mu);
  own_worker *o = own_find(r, w->id);
  if (!o) {
    own_worker *grown = vr_realloc(r->own, (r->nown + 1) * sizeof *grown);
    if (grown) {
      r->own = grown;
      o = &r->own[r->nown++];
      memset(o, 0, sizeof *o);
    }
  }
  if (o) {
    o->info = *w;
    o->lease_ms = lease_ms;
  }
  pthread_mutex_unlock(&r->mu);
  return o ? 0 : vr_errf(err, VR_ENOMEM, "out of memory");
}

int vr_registry_worker_heartbeat(vr_registry *r, const char *id, int *recreated,
                                 vr_errbuf *err) {
  if (recreated) *recreated = 0;
  pthread_mutex_lock(&r->mu);
  own_worker *o = own_find(r, id);
  own_worker copy = {0};
  if (o) copy = *o; /* info and lease only; instances are copied again below */
  pthread_mutex_unlock(&r->mu);
  if (!o)
    return vr_errf(err, VR_ENOENT, "registry: worker '%.80s' was not registered by this process",
                   id ? id : "");
  char lease[24];
  snprintf(lease, sizeof lease, "%d", copy.lease_ms);
  const char *a[] = {VR_REG_PREFIX, id, r->owner, lease};
  redisReply *rep = vr_redis_eval(r->r, k_heartbeat, 4, a, NULL, NULL, err);
  if (!rep) return reply_rc(err);
  long long st = rep->type == REDIS_REPLY_INTEGER ? rep->integer : -2;
  freeReplyObject(rep);
  if (st == -2) return unexpected(r, err);
  if (st == -1)
    return vr_errf(err, VR_EEXIST,
                   "registry %s: worker '%s' is now registered by another process (our lease "
                   "ended)",
                   vr_redis_name(r->r), id);
  if (st == 1) return 0;
  /* Gone: the lease ended between heartbeats, or Redis lost its data.
   * The worker comes back with its instances in one script: registered
   * first and its instances a round trip later, a controller reading in
   * between saw a worker that held nothing, published a table without it
   * serving (the front end answered 503) and placed its models again. */
  pthread_mutex_lock(&r->mu);
  o = own_find(r, id);
  size_t n = o ? o->ninst : 0;
  vr_instance_info *inst = n ? vr_malloc(n * sizeof *inst) : NULL;
  if (inst) memcpy(inst, o->inst, n * sizeof *inst);
  pthread_mutex_unlock(&r->mu);
  if (n && !inst) return vr_errf(err, VR_ENOMEM, "out of memory");
  int rc = run_register(r, &copy.info, copy.lease_ms, inst, n, err);
  vr_free(inst);
  if (!rc && recreated) *recreated = 1;
  return rc;
}

int vr_registry_worker_deregister(vr_registry *r, const char *id, vr_errbuf *err) {
  if (!vr_registry_valid_id(id)) return bad_id("worker id", id, err);
  /* our lease for the tombstone, should Redis have lost the worker */
  pthread_mutex_lock(&r->mu);
  own_worker *o = own_find(r, id);
  char lease[24];
  snprintf(lease, sizeof lease, "%d", o ? o->lease_ms : 0);
  pthread_mutex_unlock(&r->mu);
  const char *a[] = {VR_REG_PREFIX, id, lease};
  redisReply *rep = vr_redis_eval(r->r, k_deregister, 3, a, NULL, NULL, err);
  if (!rep) return reply_rc(err);
  freeReplyObject(rep);
  pthread_mutex_lock(&r->mu);
  o = own_find(r, id);
  if (o) {
    vr_free(o->inst);
    *o = r->own[--r->nown];
  }
  pthread_mutex_unlock(&r->mu);
  return 0;
}

/* The live workers of a listing reply (element 0 of k_workers'). */
static int parse_workers(vr_registry *r, const redisReply *rep, vr_worker_info **out, size_t *n,
                         vr_errbuf *err) {
  int rc = 0;
  size_t cnt = rep->type == REDIS_REPLY_ARRAY ? rep->elements / 9 : 0;
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements % 9) rc = unexpected(r, err);
  vr_worker_info *w = NULL;
  if (!rc && cnt && !(w = VR_NEWN(vr_worker_info, cnt))) rc = vr_errf(err, VR_ENOMEM, "out of memory");
  for (size_t i = 0; !rc && i < cnt; i++) {
    redisReply **e = rep->element + i * 9;
    int64_t cores = 0;
    if (get_str(e[0], w[i].id, sizeof w[i].id) || get_str(e[1], w[i].addr, sizeof w[i].addr) ||
        vr__reg_get_i64(e[2], 0, 1 << 20, &cores) ||
        vr__reg_get_i64(e[3], 0, INT64_MAX, &w[i].memory_bytes) ||
        get_str(e[4], w[i].meta, sizeof w[i].meta) ||
        vr__reg_get_i64(e[5], 0, INT64_MAX, &w[i].registered_ms) ||
        vr__reg_get_i64(e[6], 0, INT64_MAX, &w[i].heartbeat_ms) ||
        vr__reg_get_i64(e[7], 10, INT64_MAX, &w[i].lease_ms) ||
        vr__reg_get_i64(e[8], INT64_MIN, INT64_MAX, &w[i].lease_left_ms))
      rc = vr_errf(err, VR_EFORMAT, "registry %s: damaged worker record '%.64s'",
                   vr_redis_name(r->r), e[0]->type == REDIS_REPLY_STRING ? e[0]->str : "?");
    w[i].cores = (int)cores;
  }
  if (rc) {
    vr_free(w);
    return rc;
  }
  *out = w;
  *n = cnt;
  return 0;
}

/* The tombstoned ids of a listing reply (element 1). */
static int parse_left(vr_registry *r, const redisReply *rep, vr_worker_left **out, size_t *n,
                      vr_errbuf *err) {
  if (rep->type != REDIS_REPLY_ARRAY) return unexpected(r, err);
  vr_worker_left *g = rep->elements ? VR_NEWN(vr_worker_left, rep->elements) : NULL;
  if (rep->elements && !g) return vr_errf(err, VR_ENOMEM, "out of memory");
  for (size_t i = 0; i < rep->elements; i++)
    if (get_str(rep->element[i], g[i].id, sizeof g[i].id)) {
      vr_free(g);
      return vr_errf(err, VR_EFORMAT, "registry %s: damaged deregistration record",
                     vr_redis_name(r->r));
    }
  *out = g;
  *n = rep->elements;
  return 0;
}

int vr_registry_workers_left(vr_registry *r, vr_worker_info **out, size_t *n,
                             vr_worker_left **left, size_t *nleft, vr_errbuf *err) {
  *out = NULL;
  *n = 0;
  if (left) *left = NULL;
  if (nleft) *nleft = 0;
  const char *a[] = {VR_REG_PREFIX};
  redisReply *rep = vr_redis_eval(r->r, k_workers, 1, a, NULL, NULL, err);
  if (!rep) return reply_rc(err);
  int rc = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 ? 0 : unexpected(r, err);
  if (!rc) rc = parse_workers(r, rep->element[0], out, n, err);
  if (!rc && left && (rc = parse_left(r, rep->element[1], left, nleft, err))) {
    vr_free(*out);
    *out = NULL;
    *n = 0;
  }
  freeReplyObject(rep);
  return rc;
}

int vr_registry_workers(vr_registry *r, vr_worker_info **out, size_t *n, vr_errbuf *err) {
  return vr_registry_workers_left(r, out, n, NULL, NULL, err);
}

/* ---- instances -------------------------------------------------------------- */

/* The optional "load" member: {"in","out","q","p50":[...],"p99":[...]},
 * and "sd" (slowdown) when measured. */
static json_t *load_json(const vr_instance_info *v) {
  int n = v->nlat < 0 ? 0 : v->nlat > VR_REG_NLAT ? VR_REG_NLAT : v->nlat;
  json_t *o = json_pack("{s:f,s:f,s:i}", "in", v->arrival_qps, "out", v->served_qps, "q",
                        v->queue);
  if (o && v->slowdown > 0 && json_object_set_new(o, "sd", json_real(v->slowdown))) {
    json_decref(o);
    return NULL;
  }
  json_t *a50 = json_array(), *a99 = json_array();
  for (int i = 0; i < n && a50 && a99; i++) {
    json_array_append_new(a50, json_real(v->p50_ms[i]));
    json_array_append_new(a99, json_real(v->p99_ms[i]));
  }
  if (o && a50 && a99) {
    json_object_set_new(o, "p50", a50);
    json_object_set_new(o, "p99", a99);
    return o;
  }
  json_decref(o);
  json_decref(a50);
  json_decref(a99);
  return NULL;
}

char *vr__reg_inst_json(const vr_instance_info *v) {
  json_t *o = json_pack("{s:s,s:s,s:i,s:i}", "variant", v->variant, "state", v->state, "cores",
                        v->cores, "max_batch", v->max_batch);
  if (o && v->body && json_object_set_new(o, "body", json_integer(1))) {
    json_decref(o);
    return NULL;
  }
  if (o && v->shadow_cores > 0 && json_object_set_new(o, "shadow", json_integer(v->shadow_cores))) {
    json_decref(o);
    return NULL;
  }
  if (o && (v->arrival_qps > 0 || v->served_qps > 0 || v->queue > 0 || v->nlat > 0 ||
            v->slowdown > 0)) {
    json_t *l = load_json(v);
    if (!l || json_object_set_new(o, "load", l)) {
      json_decref(o);
      return NULL;
    }
  }
  char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(o);
  return s;
}

static int num_ok(const json_t *x, double *out) {
  if (!json_is_number(x)) return 0;
  double d = json_number_value(x);
  if (!(d >= 0 && d < 1e12)) return 0; /* also NaN */
  *out = d;
  return 1;
}

/* Another process wrote it: anything malformed is refused, not guessed. */
static int load_parse(const json_t *l, vr_instance_info *v) {
  double q = 0;
  if (!json_is_object(l) || !num_ok(json_object_get(l, "in"), &v->arrival_qps) ||
      !num_ok(json_object_get(l, "out"), &v->served_qps) ||
      !num_ok(json_object_get(l, "q"), &q) || q > 1 << 30)
    return -1;
  v->queue = (int)q;
  const json_t *sd = json_object_get(l, "sd");
  if (sd && !num_ok(sd, &v->slowdown)) return -1;
  const json_t *a50 = json_object_get(l, "p50"), *a99 = json_object_get(l, "p99");
  if (!a50 && !a99) return 0;
  if (!json_is_array(a50) || !json_is_array(a99) || json_array_size(a50) != json_array_size(a99) ||
      json_array_size(a50) > VR_REG_NLAT)
    return -1;
  v->nlat = (int)json_array_size(a50);
  for (int i = 0; i < v->nlat; i++)
    if (!num_ok(json_array_get(a50, (size_t)i), &v->p50_ms[i]) ||
        !num_ok(json_array_get(a99, (size_t)i), &v->p99_ms[i]))
      return -1;
  return 0;
}

int vr__reg_inst_parse(const char *id, const char *text, size_t len, vr_instance_info *v) {
  memset(v, 0, sizeof *v);
  json_error_t je;
  json_t *o = json_loadb(text, len, 0, &je);
  const char *variant = NULL, *state = NULL;
  json_int_t cores = 0, mb = 0;
  int rc = o && !json_unpack(o, "{s:s,s:s,s:I,s:I}", "variant", &variant, "state", &state,
                             "cores", &cores, "max_batch", &mb)
               ? 0
               : -1;
  if (!rc && (strlen(variant) >= sizeof v->variant || strlen(state) >= sizeof v->state ||
              strlen(id) >= sizeof v->id || cores < 0 || cores > 1 << 20 || mb < 0 ||
              mb > 1 << 20))
    rc = -1;
  const json_t *l = o ? json_object_get(o, "load") : NULL;
  if (!rc && l && load_parse(l, v)) rc = -1;
  /* AsyFunc (optional): "body": 0|1, "shadow": its shadow's cores */
  const json_t *jb = o ? json_object_get(o, "body") : NULL;
  const json_t *js = o ? json_object_get(o, "shadow") : NULL;
  json_int_t body = jb ? (json_is_integer(jb) ? json_integer_value(jb) : -1) : 0;
  json_int_t shadow = js ? (json_is_integer(js) ? json_integer_value(js) : -1) : 0;
  if (!rc && (body < 0 || body > 1 || shadow < 0 || shadow > 1 << 20)) rc = -1;
  if (!rc) {
    snprintf(v->id, sizeof v->id, "%s", id);
    snprintf(v->variant, sizeof v->variant, "%s", variant);
    snprintf(v->state, sizeof v->state, "%s", state);
    v->cores = (int)cores;
    v->max_batch = (int)mb;
    v->body = (int)body;
    v->shadow_cores = (int)shadow;
  } else {
    memset(v, 0, sizeof *v);
  }
  json_decref(o);
  return rc;
}

static int run_put_instances(vr_registry *r, const char *worker, const vr_instance_info *v,
                             size_t n, vr_errbuf *err) {
  size_t argc = 2 + 2 * n;
  const char **a = vr_calloc(argc, sizeof *a);
  char **js = vr_calloc(n ? n : 1, sizeof *js);
  int rc = a && js ? 0 : vr_errf(err, VR_ENOMEM, "out of memory");
  if (!rc) {
    a[0] = VR_REG_PREFIX;
    a[1] = worker;
  }
  for (size_t i = 0; !rc && i < n; i++) {
    if (!(js[i] = vr__reg_inst_json(&v[i]))) rc = vr_errf(err, VR_ENOMEM, "out of memory");
    a[2 + 2 * i] = v[i].id;
    a[3 + 2 * i] = js[i];
  }
  redisReply *rep = rc ? NULL : vr_redis_eval(r->r, k_put_instances, (int)argc, a, NULL, NULL, err);
  if (!rc && !rep) rc = reply_rc(err);
  if (rep) {
    if (rep->type != REDIS_REPLY_INTEGER)
      rc = unexpected(r, err);
    else if (rep->integer == 0)
      rc = vr_errf(err, VR_ENOENT, "registry %s: worker '%s' is not live", vr_redis_name(r->r),
                   worker);
    freeReplyObject(rep);
  }
  for (size_t i = 0; js && i < n; i++) free(js[i]); /* jansson's malloc */
  vr_free(js);
  vr_free(a);
  return rc;
}

int vr_registry_put_instances(vr_registry *r, const char *worker, const vr_instance_info *v,
                              size_t n, vr_errbuf *err) {
  if (!vr_registry_valid_id(worker)) return bad_id("worker id", worker, err);
  for (size_t i = 0; i < n; i++) {
    if (!vr_registry_valid_id(v[i].id)) return bad_id("instance id", v[i].id, err);
    if (!memchr(v[i].variant, 0, sizeof v[i].variant) || !memchr(v[i].state, 0, sizeof v[i].state))
      return vr_errf(err, VR_EINVAL, "registry: instance '%s': unterminated text", v[i].id);
    for (size_t j = 0; j < i; j++)
      if (!strcmp(v[i].id, v[j].id))
        return vr_errf(err, VR_EINVAL, "registry: instance id '%s' given twice", v[i].id);
  }
  int rc = run_put_instances(r, worker, v, n, err);
  if (rc) return rc;
  /* Remember them for a worker of ours, to re-put after a loss. */
  pthread_mutex_lock(&r->mu);
  own_worker *o = own_find(r, worker);
  if (o) {
    vr_instance_info *copy = n ? vr_malloc(n * sizeof *copy) : NULL;
    if (copy || !n) {
      if (n) memcpy(copy, v, n * sizeof *copy);
      vr_free(o->inst);
      o->inst = copy;
      o->ninst = n;
    } else {
      rc = vr_errf(err, VR_ENOMEM, "out of memory");
    }
  }
  pthread_mutex_unlock(&r->mu);
  return rc;
}

static int cmp_inst(const void *a, const void *b) {
  return strcmp(((const vr_instance_info *)a)->id, ((const vr_instance_info *)b)->id);
}

int vr_registry_instances(vr_registry *r, const char *worker, vr_instance_info **out, size_t *n,
                          vr_errbuf *err) {
  *out = NULL;
  *n = 0;
  if (!vr_registry_valid_id(worker)) return bad_id("worker id", worker, err);
  const char *a[] = {VR_REG_PREFIX, worker};
  redisReply *rep = vr_redis_eval(r->r, k_instances, 2, a, NULL, NULL, err);
  if (!rep) return reply_rc(err);
  if (rep->type == REDIS_REPLY_INTEGER && rep->integer == -1) {
    freeReplyObject(rep);
    return vr_errf(err, VR_ENOENT, "registry %s: worker '%s' is not live (its lease ended)",
                   vr_redis_name(r->r), worker);
  }
  int rc = rep->type == REDIS_REPLY_ARRAY && rep->elements % 2 == 0 ? 0 : unexpected(r, err);
  size_t cnt = rc ? 0 : rep->elements / 2;
  vr_instance_info *v = NULL;
  if (cnt && !(v = VR_NEWN(vr_instance_info, cnt))) rc = vr_errf(err, VR_ENOMEM, "out of memory");
  for (size_t i = 0; !rc && i < cnt; i++) {
    redisReply *k = rep->element[2 * i], *j = rep->element[2 * i + 1];
    if (k->type != REDIS_REPLY_STRING || j->type != REDIS_REPLY_STRING ||
        vr__reg_inst_parse(k->str, j->str, j->len, &v[i]))
      rc = vr_errf(err, VR_EFORMAT, "registry %s: damaged instance record on worker '%s'",
                   vr_redis_name(r->r), worker);
  }
  freeReplyObject(rep);
  if (rc) {
    vr_free(v);
    return rc;
  }
  if (cnt) qsort(v, cnt, sizeof *v, cmp_inst);
  *out = v;
  *n = cnt;
  return 0;
}

/* ---- routing tables --------------------------------------------------------- */

/* Highest version of table this handle has seen; raises it to v. */
static int64_t seen_version(vr_registry *r, const char *table, int64_t v) {
  pthread_mutex_lock(&r->mu);
  seen_table *t = NULL;
  for (size_t i = 0; i < r->nseen && !t; i++)
    if (!strcmp(r->seen[i].name, table)) t = &r->seen[i];
  if (!t) {
    seen_table *g = vr_realloc(r->seen, (r->nseen + 1) * sizeof *g);
    if (g) {
      r->seen = g;
      t = &g[r->nseen++];
      snprintf(t->name, sizeof t->name, "%s", table);
      t->version = 0;
    }
  }
  int64_t out = v;
  if (t) {
    if (v > t->version) t->version = v;
    out = t->version;
  }
  pthread_mutex_unlock(&r->mu);
  return out;
}

int vr_registry_put_routes(vr_registry *r, const char *table, const char *body,
                           int64_t expect_version, int64_t *version_out, vr_errbuf *err) {
  if (!vr_registry_valid_id(table)) return bad_id("routing table", table, err);
  if (!body) return vr_errf(err, VR_EINVAL, "registry: routing table '%s' without a body", table);
  char ex[24], fl[24];
  snprintf(ex, sizeof ex, "%" PRId64, expect_version < 0 ? (int64_t)-1 : expect_version);
  snprintf(fl, sizeof fl, "%" PRId64, seen_version(r, table, 0));
  const char *a[] = {VR_REG_PREFIX, table, body, ex, fl};
  int resent = 0;
  redisReply *rep = vr_redis_eval(r->r, k_put_routes, 5, a, NULL, &resent, err);
  if (!rep) return reply_rc(err);
  int rc = 0;
  int64_t v = 0;
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
      rep->element[0]->type != REDIS_REPLY_INTEGER ||
      vr__reg_get_i64(rep->element[1], 0, INT64_MAX, &v))
    rc = unexpected(r, err);
  else if (rep->element[0]->integer < 0)
    rc = VR_ESTATE;
  freeReplyObject(rep);
  if (rc == VR_ESTATE && resent && v == expect_version + 1) {
    /* Our own first send may have landed: it did if the body is ours. */
    char *cur = NULL;
    int64_t cv = 0;
    if (vr_registry_get_routes(r, table, &cv, &cur, NULL) == 0 && cv == v && !strcmp(cur, body))
      rc = 0;
    vr_free(cur);
  }
  if (rc == VR_ESTATE)
    vr_errf(err, VR_ESTATE, "registry %s: routing table '%s' is at version %" PRId64
            ", not %" PRId64, vr_redis_name(r->r), table, v, expect_version);
  if (!rc || rc == VR_ESTATE) {
    seen_version(r, table, v);
    if (version_out) *version_out = v;
  }
  return rc;
}

int vr_registry_get_routes(vr_registry *r, const char *table, int64_t *version, char **body,
                           vr_errbuf *err) {
  *body = NULL;
  *version = 0;
  if (!vr_registry_valid_id(table)) return bad_id("routing table", table, err);
  redisReply *rep =
      vr_redis_cmd(r->r, err, "HMGET " VR_REG_PREFIX "routes:%s version body", table);
  if (!rep) return reply_rc(err);
  int rc = 0;
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2)
    rc = unexpected(r, err);
  else if (rep->element[0]->type == REDIS_REPLY_NIL)
    rc = vr_errf(err, VR_ENOENT, "registry %s: no routing table '%s'", vr_redis_name(r->r), table);
  else if (vr__reg_get_i64(rep->element[0], 1, INT64_MAX, version) ||
           rep->element[1]->type != REDIS_REPLY_STRING)
    rc = vr_errf(err, VR_EFORMAT, "registry %s: damaged routing table '%s'", vr_redis_name(r->r),
                 table);
  else if (!(*body = vr_strndup(rep->element[1]->str, rep->element[1]->len)))
    rc = vr_errf(err, VR_ENOMEM, "out of memory");
  freeReplyObject(rep);
  if (!rc) seen_version(r, table, *version);
  return rc;
}

redisReply *vr__reg_all_routes(vr_redis *r, vr_errbuf *err) {
  const char *a[] = {VR_REG_PREFIX};
  return vr_redis_eval(r, k_all_routes, 1, a, NULL, NULL, err);
}

int vr_registry_parse_route_msg(const char *msg, size_t len, char *table, int64_t *version,
                                const char **body) {
  const char *sp = memchr(msg, ' ', len);
  if (!sp || sp == msg || (size_t)(sp - msg) >= VR_REG_ID_MAX) return VR_EFORMAT;
  memcpy(table, msg, (size_t)(sp - msg));
  table[sp - msg] = 0;
  if (!vr_registry_valid_id(table)) return VR_EFORMAT;
  const char *d = sp + 1, *end = msg + len;
  int64_t v = 0;
  if (d >= end || *d < '1' || *d > '9') return VR_EFORMAT; /* no sign, no leading zero */
  while (d < end && *d >= '0' && *d <= '9') {
    if (v > (INT64_MAX - (*d - '0')) / 10) return VR_EFORMAT;
    v = v * 10 + (*d++ - '0');
  }
  if (d >= end || *d != '\n') return VR_EFORMAT;
  *version = v;
  *body = d + 1;
  return 0;
}
