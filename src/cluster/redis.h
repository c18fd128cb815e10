/*
 * Redis connection shared by the Redis store backend
 * (control/store_redis.c) and the cluster registry (cluster/registry.c).
 *
 * Why a layer of its own: every process of a Vario cluster (controller,
 * front ends, workers) talks to one Redis, and each must survive Redis
 * restarting under it. This file owns the one place where a broken
 * connection is noticed and re-established, with exponential backoff, so
 * callers see either a reply or a VR_EIO that names the server — never a
 * crash and never a half-read reply.
 *
 * Addresses are URLs:  redis://[[user]:password@]host[:port][/db]
 * (host: a name, IPv4, or [IPv6]; port default 6379; db default 0).
 *
 * Signals: the first connection sets SIGPIPE to SIG_IGN if the program
 * left it at its default (a write to a dropped connection must fail with
 * EPIPE and reconnect, not kill the process).
 *
 * Ownership: vr_redis_open returns a handle the caller closes with
 * vr_redis_close. Replies returned by vr_redis_call/vr_redis_cmd belong to
 * the caller (freeReplyObject). A handle is thread-safe: one mutex
 * serialises its commands (hold several handles for parallelism).
 */
#ifndef VR_CLUSTER_REDIS_H
#define VR_CLUSTER_REDIS_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "vario/status.h"

#define VR_REDIS_HOST_MAX 256
#define VR_REDIS_SECRET_MAX 256

typedef struct vr_redis_url {
  char host[VR_REDIS_HOST_MAX]; /* without IPv6 brackets */
  int port;                     /* 1..65535 */
  int db;                       /* 0..9999 (SELECT index) */
  char user[VR_REDIS_SECRET_MAX];     /* ACL user; empty = default */
  char password[VR_REDIS_SECRET_MAX]; /* empty = no AUTH */
} vr_redis_url;

/* 1 when s starts with "redis://" (so `--store` can tell a URL from a
 * SQLite path). */
int vr_redis_is_url(const char *s);
/* Parses a redis:// URL; VR_EINVAL with a message saying what is wrong. */
int vr_redis_url_parse(const char *s, vr_redis_url *out, vr_errbuf *err);
/* "redis://host:port/db" (the password is never printed). */
void vr_redis_url_format(const vr_redis_url *u, char *out, size_t cap);

typedef struct vr_redis_opts {
  int connect_timeout_ms; /* one connection attempt; default 1000 */
  int io_timeout_ms;      /* one command's send + reply; default 2000 */
  /* How long one call keeps reconnecting (backoff between attempts)
   * before it gives up with VR_EIO; default 2000; 0 = one attempt. */
  int retry_ms;
  int backoff_min_ms; /* first wait between attempts; default 10 */
  int backoff_max_ms; /* the doubling stops here; default 500 */
} vr_redis_opts;

/* Fills the defaults above. */
void vr_redis_opts_default(vr_redis_opts *o);

typedef struct vr_redis vr_redis;

/* Connects (retrying per o->retry_ms; o may be NULL for defaults). */
int vr_redis_open(const vr_redis_url *u, const vr_redis_opts *o,
                  vr_redis **out, vr_errbuf *err);
void vr_redis_close(vr_redis *r);

/* One command in argv form (binary safe; lens may be NULL for C strings).
 * If the connection is broken it is re-established with backoff and the
 * command sent again; *resent (may be NULL) becomes 1 when an earlier send
 * of this command may have reached Redis (its reply was lost), so a
 * non-idempotent caller can check what happened. A Redis error reply is
 * returned as NULL with VR_EIO and Redis's message. */
redisReply *vr_redis_call(vr_redis *r, int argc, const char **argv,
                          const size_t *lens, int *resent, vr_errbuf *err);
/* printf-style form of vr_redis_call (hiredis format: %s, %b, %d...);
 * retried like vr_redis_call, so use it for idempotent commands. */
redisReply *vr_redis_cmd(vr_redis *r, vr_errbuf *err, const char *fmt, ...);

/* EVAL script 0 argv... through vr_redis_call (Redis caches the compiled
 * script by its hash, so re-sending the text costs bytes on the wire, not
 * a recompile; unlike EVALSHA it survives a Redis restart). */
redisReply *vr_redis_eval(vr_redis *r, const char *script, int argc, const char **argv,
                          const size_t *lens, int *resent, vr_errbuf *err);

/* Connections established after the first (how often Redis went away). */
uint64_t vr_redis_reconnects(vr_redis *r);
/* The longest one call of r waited on Redis (reconnects and retries
 * included, the wait for r's lock not) since the previous take, which
 * this resets: a Redis that stalled (paused, swapping, restarting) shows
 * here though every call succeeded on its first connection. */
int64_t vr_redis_take_wait_ns(vr_redis *r);
/* The URL without password, for messages. */
const char *vr_redis_name(const vr_redis *r);
const vr_redis_opts *vr_redis_options(const vr_redis *r);
const vr_redis_url *vr_redis_address(const vr_redis *r);

/* A fresh, unshared context (AUTH and SELECT done): for a subscriber
 * thread that owns its connection. NULL with err set on failure; one
 * attempt, no retry. Free with redisFree. */
redisContext *vr__redis_connect(const vr_redis_url *u, const vr_redis_opts *o,
                                vr_errbuf *err);

/* Sleeps ms milliseconds (backoff waits; also used by tests). */
void vr__redis_sleep_ms(int ms);

#endif
