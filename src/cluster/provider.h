/*
 * Worker providers: how the controller gets and gives back workers.
 *
 * Policies (src/policy) decide *that* a worker of some kind is needed
 * (VR_ACT_ADD_WORKER / VR_ACT_REMOVE_WORKER); the controller turns such an
 * action into a vr_worker_spec and calls a provider, which only actuates:
 * it starts and stops workers and reports what became of them. A provider
 * holds no policy (no counts, no thresholds beyond safety caps given in its
 * config).
 *
 * Providers:
 *   local       spawns `vario worker ...` processes on this host, each
 *               pinned to a core set (provider_local.c)
 *   kubernetes  scales a worker Deployment through the Kubernetes API and
 *               lists its pods (provider_k8s.c)
 *
 * A worker started by a provider registers itself with the controller
 * (through the store, issue 18's registry); the provider's id is the name
 * under which it registers (local: passed as --worker-id; kubernetes: the
 * pod name, which the pod passes itself from its downward API env).
 *
 * Ownership: vr_provider_open*() / vr_provider_local() return a provider
 * the caller owns and releases with vr_provider_destroy(), which stops the
 * workers the provider started if its config says so (local: always; a
 * Deployment's pods outlive a controller). Strings in a spec are borrowed
 * for the duration of the call. vr_provider_list() returns an array the
 * caller frees with vr_free(). Calls on one provider are serialised by the
 * provider (a mutex); they may block for network I/O (kubernetes) but never
 * for a worker's shutdown (stop is asynchronous; list() finishes it).
 */
#ifndef VR_CLUSTER_PROVIDER_H
#define VR_CLUSTER_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "vario/status.h"

/* Lifecycle of a provider-managed worker. */
typedef enum vr_pw_state {
  VR_PW_STARTING = 0, /* asked for, not running yet (k8s: Pending / not
                         Ready; local: never, exec is confirmed) */
  VR_PW_RUNNING,      /* process / pod is up */
  VR_PW_STOPPING,     /* stop() called (local: SIGTERM and SIGCONT sent,
                         SIGKILL when the grace period ends); k8s: pod
                         terminating */
  VR_PW_EXITED,       /* gone; exit_code / term_signal say how */
} vr_pw_state;

const char *vr_pw_state_name(int state);

/* What to start. All fields optional except where a provider says so. */
typedef struct vr_worker_spec {
  const char *name;    /* worker id; NULL or "" = provider picks one */
  const char *kind;    /* worker type name (logs, labels); may be NULL */
  int ncpus;           /* cores to give it when cores == NULL (0 = 1) */
  const int *cores;    /* explicit CPU ids, or NULL: provider allocates */
  size_t ncores;
  int64_t mem_bytes;   /* memory the worker may use (0 = not said): passed
                          to the worker, which registers it; the local
                          provider does not enforce it (no cgroup) */
  const char *controller_url; /* where it registers; NULL = none passed */
  const char *const *args;    /* extra arguments, appended last */
  size_t nargs;
} vr_worker_spec;

/* One managed worker, as list() reports it. */
typedef struct vr_worker_info {
  char id[64];
  int state;         /* vr_pw_state */
  int unexpected;    /* exited (or vanished) without stop() */
  int exit_code;     /* EXITED: exit status 0..255, -1 if signalled/unknown */
  int term_signal;   /* EXITED by a signal: its number, else 0 */
  int64_t pid;       /* local: process id; kubernetes: -1 */
  int64_t since_ns;  /* CLOCK_MONOTONIC of the last state change (0 =
                        unknown) */
  char cores[64];    /* local: "0,2"; kubernetes: "" */
  char detail[512];  /* local: log file; kubernetes: phase, node, pod IP */
} vr_worker_info;

typedef struct vr_provider vr_provider;

typedef struct vr_provider_ops {
  const char *kind; /* "local", "kubernetes" */
  /* Starts one worker; writes its id (NUL-terminated, truncated to idcap)
   * to id. 0, VR_EINVAL (bad spec), VR_ELIMIT (no free cores / replica
   * cap), VR_EEXIST (name in use), VR_EIO (spawn / API failure). */
  int (*start)(vr_provider *p, const vr_worker_spec *spec, char *id,
               size_t idcap, vr_errbuf *err);
  /* Asks worker `id` to stop. Returns at once; list() shows STOPPING
   * until it is gone. VR_ENOENT for an unknown id. */
  int (*stop)(vr_provider *p, const char *id, vr_errbuf *err);
  /* Refreshes (local: reaps exited children, escalates overdue stops to
   * SIGKILL) and returns every worker the provider knows of, exited ones
   * included until forget(). *out is vr_malloc'd (NULL when *n == 0). */
  int (*list)(vr_provider *p, vr_worker_info **out, size_t *n,
              vr_errbuf *err);
  /* Drops an EXITED worker from the list (VR_ESTATE if still alive). */
  int (*forget)(vr_provider *p, const char *id, vr_errbuf *err);
  void (*destroy)(vr_provider *p);
  /* Takes over a worker an earlier instance of the caller started (a
   * controller that crashed left it running, registered with its pid and
   * core list): from then on it is listed, stopped and its cores counted
   * as taken, like one this provider started. Optional (NULL: the
   * provider finds its workers itself, as kubernetes lists its pods).
   * local: 0, VR_EEXIST (id known), VR_ENOENT (no such live process, or
   * not the worker with that id: the pid was reused), VR_EINVAL. */
  int (*adopt)(vr_provider *p, const char *id, int64_t pid, const char *cores,
               vr_errbuf *err);
} vr_provider_ops;

struct vr_provider {
  const vr_provider_ops *ops;
};

static inline int vr_provider_start(vr_provider *p, const vr_worker_spec *s,
                                    char *id, size_t idcap, vr_errbuf *err) {
  return p->ops->start(p, s, id, idcap, err);
}
static inline int vr_provider_stop(vr_provider *p, const char *id,
                                   vr_errbuf *err) {
  return p->ops->stop(p, id, err);
}
static inline int vr_provider_list(vr_provider *p, vr_worker_info **out,
                                   size_t *n, vr_errbuf *err) {
  return p->ops->list(p, out, n, err);
}
static inline int vr_provider_forget(vr_provider *p, const char *id,
                                     vr_errbuf *err) {
  return p->ops->forget(p, id, err);
}
static inline const char *vr_provider_kind(const vr_provider *p) {
  return p->ops->kind;
}
/* VR_EUNSUPPORTED when the provider has no adopt. */
int vr_provider_adopt(vr_provider *p, const char *id, int64_t pid, const char *cores,
                      vr_errbuf *err);
/* NULL is a no-op. */
void vr_provider_destroy(vr_provider *p);

/* ---- local ------------------------------------------------------------ */

/* The local provider runs, for each start():
 *
 *   BINARY ARGV_PREFIX... --worker-id ID [--controller URL] --cores LIST
 *          [--mem-bytes N] SPEC.args...
 *
 * with the same values in the environment (VARIO_WORKER_ID,
 * VARIO_CONTROLLER, VARIO_WORKER_CORES, VARIO_WORKER_MEM_BYTES), the
 * child's CPU affinity set to LIST before exec (sched_setaffinity), stdin
 * from /dev/null and stdout+stderr appended to LOG_DIR/ID.log. */
typedef struct vr_local_cfg {
  const char *binary;   /* NULL = this program (/proc/self/exe) */
  const char *const *argv_prefix; /* NULL = {"worker"} */
  size_t nprefix;
  const char *log_dir;  /* NULL = "."; created if missing; at most
                           400 bytes (the log path goes in detail) */
  int grace_ms;         /* SIGTERM -> SIGKILL; 0 = 10000 */
  const int *pool;      /* cores it may hand out; NULL = this process's
                           affinity mask at creation */
  size_t npool;
  int share_cores;      /* 1: allocate cores round-robin even when taken
                           (more workers than cores); 0: VR_ELIMIT */
  int die_with_parent;  /* 1: children get SIGTERM when we exit
                           (PR_SET_PDEATHSIG; tests). Off by default: a
                           controller restart must not take workers down */
} vr_local_cfg;

/* 0, VR_EINVAL (bad binary / pool / log dir, message says), VR_ENOMEM.
 * The config is copied. */
int vr_provider_local(const vr_local_cfg *cfg, vr_provider **out,
                      vr_errbuf *err);

/* ---- kubernetes --------------------------------------------------------- */

/* The kubernetes provider scales one worker Deployment through its scale
 * subresource (GET, then a JSON merge PATCH of spec.replicas that carries
 * the resourceVersion it read, so a concurrent change is a 409 and is
 * retried on fresh numbers) and reports the Deployment's pods (list by
 * label selector) as workers. The Role it needs: deployments/scale get,
 * patch; pods list (deploy/kubernetes/rbac.yaml).
 *
 * start() ignores spec.name/cores/mem/args: pods are shaped by the
 * Deployment's template and named by its ReplicaSet; it returns the
 * handle "DEPLOYMENT#N" (N = the replica count it set), not a pod name.
 * stop(id) takes a pod name from list() (or such a handle) and scales the
 * Deployment down by one; with pick_pod the named pod is first given the
 * lowest controller.kubernetes.io/pod-deletion-cost so the ReplicaSet
 * removes that pod (needs pods patch in the Role too). Without pick_pod
 * the ReplicaSet chooses (not-ready pods first, then the newest).
 * forget(pod) hides an exited pod (Failed, Evicted) from later lists
 * until the API stops listing it, so that one death is reported once.
 * since_ns comes from the Ready condition's lastTransitionTime, else the
 * pod's creationTimestamp, mapped onto CLOCK_MONOTONIC. destroy() leaves
 * the Deployment as it is.
 *
 * Every request re-reads the token file (bound service-account tokens
 * are rotated by the kubelet) and verifies the server against ca_file. */
typedef struct vr_k8s_cfg {
  const char *api_url;    /* "https://host:port"; NULL = in-cluster, from
                             KUBERNETES_SERVICE_HOST / _PORT */
  const char *token_file; /* NULL = the service-account token */
  const char *ca_file;    /* NULL = the service-account ca.crt */
  const char *ns;         /* NULL = the service-account namespace file */
  const char *deployment; /* NULL = "vario-worker" */
  const char *selector;   /* pods' label selector; NULL = "app=" +
                             deployment */
  int max_replicas;       /* start() refuses beyond this; 0 = 64 */
  int min_replicas;       /* stop() refuses below this; default 0 */
  int timeout_ms;         /* per request; 0 = 10000 */
  int pick_pod;           /* see above */
} vr_k8s_cfg;

/* 0, VR_EINVAL (bad name, unreadable token/CA/namespace file, message
 * says), VR_EBACKEND (libcurl init). Talks to no server yet. */
int vr_provider_kubernetes(const vr_k8s_cfg *cfg, vr_provider **out,
                           vr_errbuf *err);

/* ---- options (command line / config file) ----------------------------- */

/* Opens a provider of `kind` from "key=value" options (`--provider-opt`,
 * docs/API.md lists the keys per kind). Unknown keys and bad values are
 * VR_EINVAL naming the key. opts may be NULL when nopts == 0. */
int vr_provider_open(const char *kind, const char *const *opts, size_t nopts,
                     vr_provider **out, vr_errbuf *err);

/* Parses a provider config file: lines "key = value", '#' comments, blank
 * lines; "kind = local|kubernetes" is required. Then as vr_provider_open. */
int vr_provider_open_file(const char *path, vr_provider **out,
                          vr_errbuf *err);

#endif
