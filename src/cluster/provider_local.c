/*
 * The local provider: `vario worker` processes on this host.
 *
 * Each start() forks; the child pins itself to its core set, points
 * stdout/stderr at its log file, closes every other descriptor and execs.
 * Between fork and exec only async-signal-safe calls are made (the parent
 * has threads), so argv, envp, the CPU mask and the file descriptors are
 * all prepared before fork. Exec failure is reported back through a
 * close-on-exec pipe, so start() fails synchronously for a wrong binary
 * instead of reporting an "unexpected exit" later.
 *
 * Each worker gets its own process group, so that stop() signals anything
 * the worker itself spawned, and a terminal's ^C to the controller does
 * not hit the workers behind the controller's back. Children are reaped
 * with waitpid(pid, WNOHANG) per pid (never waitpid(-1): the embedding
 * process may have children of its own).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/proc.h"
#include "cluster/provider.h"
#include "cluster/provider_int.h"

extern char **environ;

#define VR_LOCAL_MAX_LOGDIR 400 /* + "/" + id (63) + ".log" < detail */

typedef struct lworker {
  vr_worker_info info;
  pid_t pid;
  int adopted;        /* started by an earlier controller: not our child */
  int64_t kill_at_ns; /* STOPPING: SIGKILL after this */
  int cores[VR_PROV_MAX_CPU + 1];
  size_t ncores;
} lworker;

typedef struct vr_local {
  vr_provider base;
  pthread_mutex_t mu;
  char *binary;
  char **prefix;
  size_t nprefix;
  char *log_dir;
  int grace_ms;
  int *pool;
  size_t npool;
  int share_cores, die_with_parent;
  lworker **w;
  size_t nw, capw;
  unsigned seq; /* for generated ids */
  size_t rr;    /* round-robin position when sharing cores */
} vr_local;

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static lworker *find(vr_local *l, const char *id) {
  for (size_t i = 0; i < l->nw; i++)
    if (!strcmp(l->w[i]->info.id, id)) return l->w[i];
  return NULL;
}

static int alive(const lworker *w) { return w->info.state != VR_PW_EXITED; }

static int core_taken(vr_local *l, int c) {
  for (size_t i = 0; i < l->nw; i++) {
    if (!alive(l->w[i])) continue;
    for (size_t j = 0; j < l->w[i]->ncores; j++)
      if (l->w[i]->cores[j] == c) return 1;
  }
  return 0;
}

static int in_pool(vr_local *l, int c) {
  for (size_t i = 0; i < l->npool; i++)
    if (l->pool[i] == c) return 1;
  return 0;
}

/* Chooses the new worker's cores: the spec's, or the lowest free ones of
 * the pool, or (share_cores) the next ones round-robin. */
static int pick_cores(vr_local *l, const vr_worker_spec *s, lworker *w,
                      vr_errbuf *err) {
  if (s->cores && s->ncores) {
    if (s->ncores > VR_PROV_MAX_CPU + 1)
      return vr_errf(err, VR_EINVAL, "local provider: %zu cores", s->ncores);
    for (size_t i = 0; i < s->ncores; i++) {
      if (!in_pool(l, s->cores[i]))
        return vr_errf(err, VR_EINVAL, "local provider: core %d is not in the "
                       "provider's pool", s->cores[i]);
      for (size_t j = 0; j < i; j++)
        if (s->cores[j] == s->cores[i])
          return vr_errf(err, VR_EINVAL, "local provider: core %d twice",
                         s->cores[i]);
      w->cores[i] = s->cores[i];
    }
    w->ncores = s->ncores;
    return 0;
  }
  size_t want = s->ncpus > 0 ? (size_t)s->ncpus : 1;
  if (want > l->npool)
    return vr_errf(err, VR_ELIMIT, "local provider: %zu cores wanted, the "
                   "pool has %zu", want, l->npool);
  size_t k = 0;
  for (size_t i = 0; i < l->npool && k < want; i++)
    if (!core_taken(l, l->pool[i])) w->cores[k++] = l->pool[i];
  if (k == want) {
    w->ncores = k;
    return 0;
  }
  if (!l->share_cores)
    return vr_errf(err, VR_ELIMIT, "local provider: %zu free cores of %zu "
                   "wanted (share-cores=1 to overlap workers)", k, want);
  for (k = 0; k < want; k++) w->cores[k] = l->pool[(l->rr + k) % l->npool];
  l->rr = (l->rr + want) % l->npool;
  w->ncores = want;
  return 0;
}

/* The worker's CPUs as a list of ranges ("24-47", "46-47,0-1"), the form
 * --cores and VARIO_WORKER_CORES take. -1 when it does not fit in cap: a
 * cut list would tell the worker fewer cores than it is pinned to. */
static int format_cores(const lworker *w, char *buf, size_t cap) {
  size_t off = 0;
  buf[0] = 0;
  for (size_t i = 0; i < w->ncores;) {
    size_t j = i;
    while (j + 1 < w->ncores && w->cores[j + 1] == w->cores[j] + 1) j++;
    int n = j > i ? snprintf(buf + off, cap - off, "%s%d-%d", off ? "," : "", w->cores[i],
                             w->cores[j])
                  : snprintf(buf + off, cap - off, "%s%d", off ? "," : "", w->cores[i]);
    if (n < 0 || (size_t)n >= cap - off) return -1;
    off += (size_t)n;
    i = j + 1;
  }
  return 0;
}

/* argv/envp for exec: an array of owned strings, NULL-terminated. */
typedef struct {
  char **v;
  size_t n, cap;
} strv;

static int strv_push(strv *a, const char *s) {
  if (a->n + 2 > a->cap) {
    size_t nc = a->cap ? 2 * a->cap : 16;
    char **nv = vr_realloc(a->v, nc * sizeof *nv);
    if (!nv) return VR_ENOMEM;
    a->v = nv;
    a->cap = nc;
  }
  if (!(a->v[a->n] = vr_strdup(s))) return VR_ENOMEM;
  a->v[++a->n] = NULL;
  return 0;
}

static int strv_pushf(strv *a, const char *fmt, const char *k, const char *v) {
  size_t len = strlen(k) + strlen(v) + 2;
  char *s = vr_malloc(len);
  if (!s) return VR_ENOMEM;
  snprintf(s, len, fmt, k, v);
  int rc = strv_push(a, s);
  vr_free(s);
  return rc;
}

static void strv_free(strv *a) {
  for (size_t i = 0; i < a->n; i++) vr_free(a->v[i]);
  vr_free(a->v);
}

static int build_exec(vr_local *l, const vr_worker_spec *s, const lworker *w,
                      strv *argv, strv *envp) {
  char cores[sizeof w->info.cores], mem[32];
  if (format_cores(w, cores, sizeof cores)) return VR_ERANGE;
  snprintf(mem, sizeof mem, "%lld", (long long)s->mem_bytes);
  int rc = strv_push(argv, l->binary);
  for (size_t i = 0; rc == 0 && i < l->nprefix; i++)
    rc = strv_push(argv, l->prefix[i]);
  if (!rc) rc = strv_push(argv, "--worker-id");
  if (!rc) rc = strv_push(argv, w->info.id);
  if (!rc && s->controller_url && *s->controller_url) {
    rc = strv_push(argv, "--controller");
    if (!rc) rc = strv_push(argv, s->controller_url);
  }
  if (!rc) rc = strv_push(argv, "--cores");
  if (!rc) rc = strv_push(argv, cores);
  if (!rc && s->mem_bytes > 0) {
    rc = strv_push(argv, "--mem-bytes");
    if (!rc) rc = strv_push(argv, mem);
  }
  for (size_t i = 0; rc == 0 && i < s->nargs; i++)
    rc = strv_push(argv, s->args[i] ? s->args[i] : "");
  static const char *ours[] = {"VARIO_WORKER_ID=", "VARIO_CONTROLLER=",
                               "VARIO_WORKER_CORES=",
                               "VARIO_WORKER_MEM_BYTES="};
  for (char **e = environ; rc == 0 && e && *e; e++) {
    int skip = 0;
    for (size_t i = 0; i < sizeof ours / sizeof *ours; i++)
      if (!strncmp(*e, ours[i], strlen(ours[i]))) skip = 1;
    if (!skip) rc = strv_push(envp, *e);
  }
  if (!rc) rc = strv_pushf(envp, "%s=%s", "VARIO_WORKER_ID", w->info.id);
  if (!rc && s->controller_url && *s->controller_url)
    rc = strv_pushf(envp, "%s=%s", "VARIO_CONTROLLER", s->controller_url);
  if (!rc) rc = strv_pushf(envp, "%s=%s", "VARIO_WORKER_CORES", cores);
  if (!rc && s->mem_bytes > 0)
    rc = strv_pushf(envp, "%s=%s", "VARIO_WORKER_MEM_BYTES", mem);
  return rc;
}

/* Moves fd to a number >= 3 (close-on-exec), so that the child's dup2
 * onto 0..2 cannot clobber it. */
static int high_fd(int fd) {
  if (fd < 0 || fd >= 3) return fd;
  int n = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  close(fd);
  return n;
}

static void close_from(int lo, int hi) {
  /* close_range(2) (Linux 5.9); the loop is for older kernels. */
  if (lo > hi) return;
  if (syscall(SYS_close_range, (unsigned)lo, (unsigned)hi, 0u) == 0) return;
  long max = sysconf(_SC_OPEN_MAX);
  if (max < 0 || max > 65536) max = 65536;
  for (long fd = lo; fd <= hi && fd < max; fd++) close((int)fd);
}

/* The child's side; never returns. Only async-signal-safe calls. */
static void child(vr_local *l, lworker *w, char **argv, char **envp,
                  int logfd, int nullfd, int errfd, pid_t parent,
                  const cpu_set_t *set) {
  struct {
    int stage, err;
  } fail;
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; sig++) sigaction(sig, &dfl, NULL);
  setpgid(0, 0);
  if (l->die_with_parent) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(0); /* parent already gone */
  }
  fail.stage = 1;
  if (sched_setaffinity(0, sizeof *set, set)) goto out;
  fail.stage = 2;
  if (dup2(nullfd, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
    goto out;
  close_from(3, errfd - 1);
  close_from(errfd + 1, INT_MAX);
  fail.stage = 3;
  execve(argv[0], argv, envp);
out:
  fail.err = errno;
  ssize_t wr = write(errfd, &fail, sizeof fail);
  (void)wr;
  _exit(127);
}

static int spawn(vr_local *l, const vr_worker_spec *s, lworker *w,
                 vr_errbuf *err) {
  strv argv = {0}, envp = {0};
  int rc = build_exec(l, s, w, &argv, &envp);
  if (rc) goto done;
  /* log_dir is at most VR_LOCAL_MAX_LOGDIR bytes and ids 63: fits. */
  char *path = w->info.detail;
  snprintf(path, sizeof w->info.detail, "%s/%s.log", l->log_dir, w->info.id);
  cpu_set_t set;
  CPU_ZERO(&set);
  for (size_t i = 0; i < w->ncores; i++) CPU_SET(w->cores[i], &set);
  int logfd = high_fd(
      open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  int nullfd = high_fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  int pfd[2] = {-1, -1};
  if (logfd < 0 || nullfd < 0 || pipe2(pfd, O_CLOEXEC)) {
    rc = vr_errf(err, VR_EIO, "local provider: %s: %s", logfd < 0 ? path :
                 "pipe", strerror(errno));
    goto fds;
  }
  pfd[0] = high_fd(pfd[0]);
  pfd[1] = high_fd(pfd[1]);
  if (pfd[0] < 0 || pfd[1] < 0) {
    rc = vr_errf(err, VR_EIO, "local provider: pipe: %s", strerror(errno));
    goto fds;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    rc = vr_errf(err, VR_EIO, "local provider: fork: %s", strerror(errno));
    goto fds;
  }
  if (pid == 0)
    child(l, w, argv.v, envp.v, logfd, nullfd, pfd[1], parent, &set);
  /* Both sides set the group, so a signal sent right after fork already
   * reaches the group (whichever runs first). */
  setpgid(pid, pid);
  close(pfd[1]);
  pfd[1] = -1;
  struct {
    int stage, err;
  } fail;
  ssize_t got;
  do got = read(pfd[0], &fail, sizeof fail);
  while (got < 0 && errno == EINTR);
  if (got == (ssize_t)sizeof fail) {
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    static const char *what[] = {"?", "set CPU affinity", "redirect output",
                                 "exec"};
    int stage = fail.stage >= 1 && fail.stage <= 3 ? fail.stage : 0;
    rc = vr_errf(err, VR_EIO, "local provider: worker %s: %s %s: %s",
                 w->info.id, what[stage], stage == 3 ? l->binary : "",
                 strerror(fail.err));
    goto fds;
  }
  w->pid = pid;
  w->info.pid = pid;
  w->info.state = VR_PW_RUNNING;
  w->info.since_ns = mono_ns();
  vr_info("local provider: started worker %s pid %d cores %s log %s",
          w->info.id, (int)pid, w->info.cores, path);
fds:
  if (logfd >= 0) close(logfd);
  if (nullfd >= 0) close(nullfd);
  if (pfd[0] >= 0) close(pfd[0]);
  if (pfd[1] >= 0) close(pfd[1]);
done:
  strv_free(&argv);
  strv_free(&envp);
  return rc;
}

static int local_start(vr_provider *p, const vr_worker_spec *s, char *id,
                       size_t idcap, vr_errbuf *err) {
  vr_local *l = (vr_local *)p;
  if (s->mem_bytes < 0)
    return vr_errf(err, VR_EINVAL, "local provider: negative mem_bytes");
  lworker *w = VR_NEW(lworker);
  if (!w) return VR_ENOMEM;
  w->info.pid = -1;
  w->info.exit_code = -1;
  pthread_mutex_lock(&l->mu);
  int rc = 0;
  if (s->name && *s->name) {
    if (!vr__prov_valid_id(s->name))
      rc = vr_errf(err, VR_EINVAL, "local provider: bad worker id '%s' "
                   "(1-63 of A-Z a-z 0-9 . _ -)", s->name);
    else if (find(l, s->name))
      rc = vr_errf(err, VR_EEXIST, "local provider: worker '%s' exists",
                   s->name);
    else
      snprintf(w->info.id, sizeof w->info.id, "%s", s->name);
  } else {
    do snprintf(w->info.id, sizeof w->info.id, "local-%u", ++l->seq);
    while (find(l, w->info.id));
  }
  if (!rc) rc = pick_cores(l, s, w, err);
  if (!rc && format_cores(w, w->info.cores, sizeof w->info.cores))
    rc = vr_errf(err, VR_ERANGE, "local provider: %zu CPUs do not fit in a core list of %zu "
                 "bytes (use fewer, or consecutive, CPUs per worker)", w->ncores,
                 sizeof w->info.cores);
  if (!rc && l->nw == l->capw) {
    size_t nc = l->capw ? 2 * l->capw : 8;
    lworker **nw = vr_realloc(l->w, nc * sizeof *nw);
    if (!nw) rc = VR_ENOMEM;
    else {
      l->w = nw;
      l->capw = nc;
    }
  }
  if (!rc) rc = spawn(l, s, w, err);
  if (!rc) {
    l->w[l->nw++] = w;
    if (id && idcap) snprintf(id, idcap, "%s", w->info.id);
  }
  pthread_mutex_unlock(&l->mu);
  if (rc) vr_free(w);
  return rc;
}

static void signal_worker(lworker *w, int sig) {
  /* The group first (the worker's own children); the pid alone if the
   * group is gone or was never set. */
  if (kill(-w->pid, sig) < 0) kill(w->pid, sig);
}

/* SIGTERM, then SIGCONT as systemd sends it: a stopped worker (SIGSTOP,
 * job control) would hold the TERM pending until the SIGKILL, and the
 * queries in its sockets with it; resumed, it drains and answers them. */
static void terminate_worker(lworker *w) {
  signal_worker(w, SIGTERM);
  signal_worker(w, SIGCONT);
}

static void reap(lworker *w, int block);

static int local_stop(vr_provider *p, const char *id, vr_errbuf *err) {
  vr_local *l = (vr_local *)p;
  pthread_mutex_lock(&l->mu);
  lworker *w = id ? find(l, id) : NULL;
  int rc = 0;
  /* one that died since the last list() is an unexpected exit, not a
   * stop (the controller counts it and deregisters it at once) */
  if (w) reap(w, 0);
  if (!w) {
    rc = vr_errf(err, VR_ENOENT, "local provider: no worker '%s'",
                 id ? id : "(null)");
  } else if (w->info.state == VR_PW_RUNNING ||
             w->info.state == VR_PW_STARTING) {
    terminate_worker(w);
    w->info.state = VR_PW_STOPPING;
    w->info.since_ns = mono_ns();
    w->kill_at_ns = w->info.since_ns + (int64_t)l->grace_ms * 1000000;
    vr_info("local provider: stopping worker %s pid %d (SIGTERM, SIGCONT)",
            w->info.id, (int)w->pid);
  }
  pthread_mutex_unlock(&l->mu);
  return rc;
}

/* Whether process pid runs `... --worker-id ID ...` (the command line
 * spawn() gives a worker): an adopted worker's pid may have been reused
 * by now, and a zombie's command line is empty. */
static int is_worker(pid_t pid, const char *id) {
  char path[64], buf[8192];
  snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n;
  do n = read(fd, buf, sizeof buf - 1);
  while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  for (char *a = buf; a < buf + n; a += strlen(a) + 1) {
    char *next = a + strlen(a) + 1;
    if (!strcmp(a, "--worker-id") && next < buf + n && !strcmp(next, id)) return 1;
  }
  return 0;
}

/* Whether pid's stdout is log (a path): a worker this provider's config
 * started writes to LOG_DIR/ID.log, one started by hand does not, and
 * adopting that one would let the autoscaler stop it. */
static int writes_log(pid_t pid, const char *log) {
  char fd1[64], got[PATH_MAX], want[PATH_MAX];
  snprintf(fd1, sizeof fd1, "/proc/%d/fd/1", (int)pid);
  ssize_t n = readlink(fd1, got, sizeof got - 1);
  if (n <= 0 || !realpath(log, want)) return 0;
  got[n] = 0;
  return !strcmp(got, want);
}

/* Reaps w if it has exited (WNOHANG, or blocking when `block`). An
 * adopted worker is not our child: it is gone when its process is (its
 * parent now, init, reaps it); how it ended is unknown. */
static void reap(lworker *w, int block) {
  if (!alive(w)) return;
  int st;
  pid_t r;
  if (w->adopted) r = is_worker(w->pid, w->info.id) ? 0 : -1;
  else
    do r = waitpid(w->pid, &st, block ? 0 : WNOHANG);
    while (r < 0 && errno == EINTR);
  if (r == 0) return;
  if (r < 0) { /* not our child any more (someone reaped it): unknown */
    w->info.exit_code = -1;
    w->info.term_signal = 0;
  } else if (WIFEXITED(st)) {
    w->info.exit_code = WEXITSTATUS(st);
  } else if (WIFSIGNALED(st)) {
    w->info.exit_code = -1;
    w->info.term_signal = WTERMSIG(st);
  } else {
    return; /* stopped/continued: not an exit */
  }
  w->info.unexpected = w->info.state != VR_PW_STOPPING;
  w->info.state = VR_PW_EXITED;
  w->info.since_ns = mono_ns();
  if (w->info.unexpected)
    vr_warn("local provider: worker %s pid %d exited unexpectedly "
            "(code %d, signal %d); log %s", w->info.id, (int)w->pid,
            w->info.exit_code, w->info.term_signal, w->info.detail);
}

static int local_list(vr_provider *p, vr_worker_info **out, size_t *n,
                      vr_errbuf *err) {
  vr_local *l = (vr_local *)p;
  *out = NULL;
  *n = 0;
  pthread_mutex_lock(&l->mu);
  int64_t now = mono_ns();
  for (size_t i = 0; i < l->nw; i++) {
    lworker *w = l->w[i];
    reap(w, 0);
    if (w->info.state == VR_PW_STOPPING && now >= w->kill_at_ns &&
        w->kill_at_ns) {
      vr_warn("local provider: worker %s pid %d did not stop within %d ms: "
              "SIGKILL", w->info.id, (int)w->pid, l->grace_ms);
      signal_worker(w, SIGKILL);
      w->kill_at_ns = 0; /* once */
    }
  }
  int rc = 0;
  if (l->nw) {
    *out = VR_NEWN(vr_worker_info, l->nw);
    if (!*out) rc = VR_ENOMEM;
    else {
      for (size_t i = 0; i < l->nw; i++) (*out)[i] = l->w[i]->info;
      *n = l->nw;
    }
  }
  pthread_mutex_unlock(&l->mu);
  return rc;
}

static int local_forget(vr_provider *p, const char *id, vr_errbuf *err) {
  vr_local *l = (vr_local *)p;
  pthread_mutex_lock(&l->mu);
  int rc = 0;
  size_t i = 0;
  while (i < l->nw && strcmp(l->w[i]->info.id, id)) i++;
  if (i == l->nw) {
    rc = vr_errf(err, VR_ENOENT, "local provider: no worker '%s'", id);
  } else if (alive(l->w[i])) {
    rc = vr_errf(err, VR_ESTATE, "local provider: worker '%s' is %s", id,
                 vr_pw_state_name(l->w[i]->info.state));
  } else {
    vr_free(l->w[i]);
    memmove(l->w + i, l->w + i + 1, (l->nw - i - 1) * sizeof *l->w);
    l->nw--;
  }
  pthread_mutex_unlock(&l->mu);
  return rc;
}

static void local_destroy(vr_provider *p) {
  vr_local *l = (vr_local *)p;
  /* Stop what still runs: SIGTERM (and SIGCONT) to all, wait out the grace
   * together, SIGKILL the rest, reap everything. */
  int64_t until = mono_ns() + (int64_t)l->grace_ms * 1000000;
  size_t left = 0;
  for (size_t i = 0; i < l->nw; i++) {
    lworker *w = l->w[i];
    reap(w, 0);
    if (!alive(w)) continue;
    if (w->info.state != VR_PW_STOPPING) {
      terminate_worker(w);
      w->info.state = VR_PW_STOPPING;
    }
    left++;
  }
  while (left && mono_ns() < until) {
    struct timespec ts = {0, 5 * 1000000};
    nanosleep(&ts, NULL);
    left = 0;
    for (size_t i = 0; i < l->nw; i++) {
      reap(l->w[i], 0);
      left += alive(l->w[i]);
    }
  }
  for (size_t i = 0; i < l->nw; i++) {
    if (alive(l->w[i])) {
      vr_warn("local provider: worker %s did not stop: SIGKILL",
              l->w[i]->info.id);
      signal_worker(l->w[i], SIGKILL);
      reap(l->w[i], 1);
    }
    vr_free(l->w[i]);
  }
  vr_free(l->w);
  for (size_t i = 0; i < l->nprefix; i++) vr_free(l->prefix[i]);
  vr_free(l->prefix);
  vr_free(l->binary);
  vr_free(l->log_dir);
  vr_free(l->pool);
  pthread_mutex_destroy(&l->mu);
  vr_free(l);
}

static int local_adopt(vr_provider *p, const char *id, int64_t pid, const char *cores,
                       vr_errbuf *err) {
  vr_local *l = (vr_local *)p;
  if (!id || !vr__prov_valid_id(id) || pid <= 1 || pid > INT_MAX)
    return vr_errf(err, VR_EINVAL, "local provider: cannot adopt '%s' pid %lld",
                   id ? id : "(null)", (long long)pid);
  lworker *w = VR_NEW(lworker);
  if (!w) return VR_ENOMEM;
  /* "" (a worker registered without --cores) holds no core of the pool */
  int rc = cores && *cores
               ? vr__prov_parse_cpus(cores, w->cores, VR_PROV_MAX_CPU + 1, &w->ncores, err)
               : 0;
  pthread_mutex_lock(&l->mu);
  if (!rc && find(l, id))
    rc = vr_errf(err, VR_EEXIST, "local provider: worker '%s' exists", id);
  snprintf(w->info.detail, sizeof w->info.detail, "%s/%s.log", l->log_dir, id);
  if (!rc && !is_worker((pid_t)pid, id))
    rc = vr_errf(err, VR_ENOENT, "local provider: pid %lld is not worker '%s'", (long long)pid,
                 id);
  if (!rc && !writes_log((pid_t)pid, w->info.detail))
    rc = vr_errf(err, VR_ENOENT, "local provider: worker '%s' (pid %lld) does not write to %s: "
                 "not started by this provider", id, (long long)pid, w->info.detail);
  if (!rc && l->nw == l->capw) {
    size_t nc = l->capw ? 2 * l->capw : 8;
    lworker **nw = vr_realloc(l->w, nc * sizeof *nw);
    if (!nw) rc = VR_ENOMEM;
    else l->w = nw, l->capw = nc;
  }
  if (!rc && format_cores(w, w->info.cores, sizeof w->info.cores)) w->info.cores[0] = 0;
  if (!rc) {
    snprintf(w->info.id, sizeof w->info.id, "%s", id);
    w->pid = (pid_t)pid;
    w->info.pid = pid;
    w->info.exit_code = -1;
    w->info.state = VR_PW_RUNNING;
    w->info.since_ns = mono_ns();
    w->adopted = 1;
    l->w[l->nw++] = w;
    vr_info("local provider: adopted worker %s pid %lld cores %s", id, (long long)pid,
            w->info.cores);
  }
  pthread_mutex_unlock(&l->mu);
  if (rc) vr_free(w);
  return rc;
}

static const vr_provider_ops local_ops = {"local",       local_start,   local_stop, local_list,
                                          local_forget, local_destroy, local_adopt};

static int mkdir_p(const char *dir) {
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp) {
    errno = ENAMETOOLONG;
    return -1;
  }
  for (char *s = tmp + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
    *s = '/';
  }
  if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
  struct stat st;
  if (stat(tmp, &st)) return -1;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return -1;
  }
  return 0;
}

int vr_provider_local(const vr_local_cfg *cfg, vr_provider **out,
                      vr_errbuf *err) {
  *out = NULL;
  vr_local *l = VR_NEW(vr_local);
  if (!l) return VR_ENOMEM;
  l->base.ops = &local_ops;
  pthread_mutex_init(&l->mu, NULL);
  int rc = 0;
  char exe[PATH_MAX];
  const char *bin = cfg->binary;
  if (!bin || !*bin) {
    /* Resolved now: /proc/self/exe of a later call would still be us, but
     * a path survives an upgrade of the binary on disk. */
    if (vr_proc_self_exe(exe, sizeof exe)) {
      rc = vr_errf(err, VR_EINVAL, "local provider: /proc/self/exe: %s",
                   strerror(errno));
      goto fail;
    }
    bin = exe;
  }
  if (access(bin, X_OK)) {
    rc = vr_errf(err, VR_EINVAL, "local provider: binary %s: %s", bin,
                 strerror(errno));
    goto fail;
  }
  if (!(l->binary = vr_strdup(bin))) goto nomem;
  static const char *def_prefix[] = {"worker"};
  const char *const *pre = cfg->argv_prefix ? cfg->argv_prefix : def_prefix;
  size_t npre = cfg->argv_prefix ? cfg->nprefix : 1;
  if (npre > VR_PROV_MAX_ARGS) {
    rc = vr_errf(err, VR_EINVAL, "local provider: argv prefix of %zu", npre);
    goto fail;
  }
  if (npre && !(l->prefix = VR_NEWN(char *, npre))) goto nomem;
  for (; l->nprefix < npre; l->nprefix++)
    if (!(l->prefix[l->nprefix] = vr_strdup(pre[l->nprefix]))) goto nomem;
  const char *dir = cfg->log_dir && *cfg->log_dir ? cfg->log_dir : ".";
  if (strlen(dir) > VR_LOCAL_MAX_LOGDIR) {
    rc = vr_errf(err, VR_EINVAL, "local provider: log dir longer than %d "
                 "bytes", VR_LOCAL_MAX_LOGDIR);
    goto fail;
  }
  if (mkdir_p(dir)) {
    rc = vr_errf(err, VR_EINVAL, "local provider: log dir %s: %s", dir,
                 strerror(errno));
    goto fail;
  }
  if (!(l->log_dir = vr_strdup(dir))) goto nomem;
  l->grace_ms = cfg->grace_ms > 0 ? cfg->grace_ms : 10000;
  l->share_cores = cfg->share_cores;
  l->die_with_parent = cfg->die_with_parent;
  if (cfg->pool && cfg->npool) {
    if (cfg->npool > VR_PROV_MAX_CPU + 1) {
      rc = vr_errf(err, VR_EINVAL, "local provider: pool of %zu", cfg->npool);
      goto fail;
    }
    if (!(l->pool = VR_NEWN(int, cfg->npool))) goto nomem;
    for (size_t i = 0; i < cfg->npool; i++) {
      int c = cfg->pool[i];
      if (c < 0 || c > VR_PROV_MAX_CPU) {
        rc = vr_errf(err, VR_EINVAL, "local provider: pool core %d", c);
        goto fail;
      }
      for (size_t j = 0; j < l->npool; j++)
        if (l->pool[j] == c) {
          rc = vr_errf(err, VR_EINVAL, "local provider: pool core %d twice",
                       c);
          goto fail;
        }
      l->pool[l->npool++] = c;
    }
  } else {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set)) {
      rc = vr_errf(err, VR_EINVAL, "local provider: sched_getaffinity: %s",
                   strerror(errno));
      goto fail;
    }
    if (!(l->pool = VR_NEWN(int, CPU_COUNT(&set)))) goto nomem;
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &set)) l->pool[l->npool++] = c;
  }
  *out = &l->base;
  return 0;
nomem:
  rc = VR_ENOMEM;
fail:
  local_destroy(&l->base);
  return rc;
}
