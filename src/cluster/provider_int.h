/*
 * Internals shared by the providers (not for callers outside
 * src/cluster): option parsing helpers and limits.
 */
#ifndef VR_CLUSTER_PROVIDER_INT_H
#define VR_CLUSTER_PROVIDER_INT_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/provider.h"

#define VR_PROV_MAX_CPU 1023       /* CPU ids 0..1023 (CPU_SETSIZE) */
#define VR_PROV_MAX_ARGS 32        /* argv prefix entries */
#define VR_PROV_MAX_CONFIG 65536   /* provider config file bytes */

/* 1 if s may be a worker id: 1..63 chars of [A-Za-z0-9._-], not starting
 * with '.' or '-' (ids become file names and Kubernetes names). */
int vr__prov_valid_id(const char *s);
int vr__prov_parse_int(const char *key, const char *v, long lo, long hi,
                       long *out, vr_errbuf *err);
int vr__prov_parse_bool(const char *key, const char *v, int *out,
                        vr_errbuf *err);
/* Kernel cpulist ("0-3,6") into cpus[0..*n); duplicates and more than cap
 * entries are VR_EINVAL. */
int vr__prov_parse_cpus(const char *v, int *cpus, size_t cap, size_t *n,
                        vr_errbuf *err);
/* Parses a provider config file's text (see vr_provider_open_file) into
 * its kind and "key=value" options. On success the caller frees kind with
 * vr_free and opts with vr__prov_free_opts. */
int vr__prov_parse_config(const char *text, size_t len, char **kind,
                          char ***opts, size_t *nopts, vr_errbuf *err);
void vr__prov_free_opts(char **opts, size_t n);

/* The local provider's options, parsed without side effects (no file
 * system, no processes): cfg points into prefix/pool and borrows the
 * option strings. vr_provider_open("local") = this + vr_provider_local. */
typedef struct vr__local_opts {
  vr_local_cfg cfg;
  const char *prefix[VR_PROV_MAX_ARGS];
  int pool[VR_PROV_MAX_CPU + 1];
} vr__local_opts;
int vr__prov_local_opts(const char *const *opts, size_t nopts,
                        vr__local_opts *lo, vr_errbuf *err);

/* ---- kubernetes (k8s_json.c, provider_k8s.c) ---- */

typedef struct vr__k8s_scale {
  int replicas;        /* spec.replicas (0 when omitted) */
  int status_replicas; /* status.replicas, -1 when absent */
  char resource_version[128];
} vr__k8s_scale;

/* An autoscaling/v1 Scale body. VR_EFORMAT with a message on anything
 * the provider cannot rely on. */
int vr__k8s_parse_scale(const char *body, size_t len, vr__k8s_scale *out,
                        vr_errbuf *err);
/* A core/v1 PodList body into vr_malloc'd infos (NULL when empty).
 * since_ns is CLOCK_REALTIME ns here (Ready's lastTransitionTime, else
 * creationTimestamp; 0 when absent); list() maps it to CLOCK_MONOTONIC. */
int vr__k8s_parse_pods(const char *body, size_t len, vr_worker_info **out,
                       size_t *n, vr_errbuf *err);
/* RFC 3339 UTC ("2026-11-25T04:00:05Z", fraction allowed) to
 * CLOCK_REALTIME ns; 0 when malformed. */
int64_t vr__k8s_parse_time(const char *s);
/* The message of a meta/v1 Status error body (or a printable prefix of
 * the body) into msg. */
void vr__k8s_status_msg(const char *body, size_t len, char *msg, size_t cap);

/* The kubernetes provider's options, parsed without side effects. */
int vr__prov_k8s_opts(const char *const *opts, size_t nopts, vr_k8s_cfg *cfg,
                      vr_errbuf *err);

#endif
