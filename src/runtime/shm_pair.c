/* Body/shadow across processes through one shared-memory region (see
 * shm_pair.h). */
#define _GNU_SOURCE
#include "runtime/shm_pair.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/proc.h"
#include "base/alloc.h"
#include "base/clock.h"

#define SHM_MAGIC 0x56524d53u /* "VRMS" */
#define SHM_VERSION 1u
#define SHM_POLL_NS (20 * 1000000LL) /* how often a waiter checks its peer */
#define SHM_MAX_CAP ((uint64_t)4 << 30)

enum { ST_LOADING = 0, ST_READY, ST_FAILED, ST_IDLE_JOB, ST_POSTED, ST_DONE, ST_CLOSED };

/* The control block at offset 0 of the region. Both sides map it; only
 * fields under mu change after creation. */
typedef struct shm_hdr {
  uint32_t magic, version;
  uint64_t in_off, in_cap, out_off, out_cap, total;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int32_t body_pid, shadow_pid;
  int32_t ready;   /* 0 loading, 1 ready, -1 failed */
  int32_t closed;
  uint64_t posted, done; /* job sequence numbers */
  int32_t rc;            /* of job `done` */
  double load_ms;
  vr__shm_job in, out;
  char msg[256];
} shm_hdr;

struct vr_shm_chan {
  int fd;
  size_t bytes;
  shm_hdr *h;
  char *base;
  int body; /* 1 on the creator's side */
  /* the layout, checked once and kept here: the header's copy is writable
   * by the other process, and an offset or capacity read from it at use
   * would let a broken peer aim our copies anywhere */
  uint64_t in_off, in_cap, out_off, out_cap;
  pid_t child; /* body: the shadow process, when known (ready fails fast) */
};

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

/* strncpy that always terminates (and that gcc's -Wformat-truncation does
 * not flag: the message is cut on purpose). */
static void copy_str(char *dst, size_t cap, const char *src) {
  size_t n = src ? strnlen(src, cap - 1) : 0;
  if (n) memcpy(dst, src, n);
  dst[n] = 0;
}

static int64_t mono_ns(void) { return vr_now_ns(); }

/* Locks mu; a peer that died holding it leaves it consistent enough for
 * our use (every field is re-checked), so mark it so and go on. */
static void lock(shm_hdr *h) {
  int rc = pthread_mutex_lock(&h->mu);
  if (rc == EOWNERDEAD) pthread_mutex_consistent(&h->mu);
}

/* A dead child that its parent has not reaped yet still answers kill(pid,
 * 0): the body is that parent, so a zombie counts as dead (state 'Z' in
 * /proc/PID/stat). */
static int peer_alive(int32_t pid) {
  if (pid <= 0 || (kill((pid_t)pid, 0) && errno != EPERM)) return 0;
  char st = 0;
  if (vr_proc_stat(pid, &st, NULL)) return 1;
  return st != 'Z' && st != 'X';
}

/* Waits on cv for at most SHM_POLL_NS (the cv uses CLOCK_MONOTONIC). */
static void timed_wait(shm_hdr *h) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t t = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + SHM_POLL_NS;
  ts.tv_sec = (time_t)(t / 1000000000LL);
  ts.tv_nsec = (long)(t % 1000000000LL);
  int rc = pthread_cond_timedwait(&h->cv, &h->mu, &ts);
  if (rc == EOWNERDEAD) pthread_mutex_consistent(&h->mu);
}

int vr__shm_check_job(const vr__shm_job *j, uint64_t cap, vr_errbuf *err) {
  if (j->dtype <= VR_DT_UNDEFINED || j->dtype > VR_DT_BF16 || !vr_dtype_size((vr_dtype)j->dtype))
    return vr_errf(err, VR_EFORMAT, "shm job: bad dtype %d", (int)j->dtype);
  if (j->ndim < 1 || j->ndim > VR_MAX_DIMS)
    return vr_errf(err, VR_EFORMAT, "shm job: ndim %d outside 1..%d", (int)j->ndim, VR_MAX_DIMS);
  if (j->rows < 1 || j->shape[0] != j->rows)
    return vr_errf(err, VR_EFORMAT, "shm job: rows %d, shape[0] %lld", (int)j->rows,
                   (long long)j->shape[0]);
  uint64_t n = vr_dtype_size((vr_dtype)j->dtype);
  for (int d = 0; d < j->ndim; d++) {
    if (j->shape[d] < 1 || (uint64_t)j->shape[d] > cap)
      return vr_errf(err, VR_EFORMAT, "shm job: dim %d is %lld", d, (long long)j->shape[d]);
    n *= (uint64_t)j->shape[d];
    if (n > cap) return vr_errf(err, VR_EFORMAT, "shm job: %llu+ bytes exceed the buffer's %llu",
                                (unsigned long long)n, (unsigned long long)cap);
  }
  if (n != j->nbytes)
    return vr_errf(err, VR_EFORMAT, "shm job: nbytes %llu, shape says %llu",
                   (unsigned long long)j->nbytes, (unsigned long long)n);
  if (!memchr(j->name, 0, sizeof j->name))
    return vr_errf(err, VR_EFORMAT, "shm job: name not terminated");
  return 0;
}

static int map_fd(int fd, size_t bytes, int body, vr_shm_chan **out, vr_errbuf *err) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return vr_errf(err, VR_EIO, "mmap of %zu bytes: %s", bytes, strerror(errno));
  }
  vr_shm_chan *c = VR_NEW(vr_shm_chan);
  if (!c) {
    munmap(p, bytes);
    close(fd);
    return vr_errf(err, VR_ENOMEM, "out of memory");
  }
  *c = (vr_shm_chan){fd, bytes, p, p, body, 0, 0, 0, 0, 0};
  *out = c;
  return 0;
}

int vr_shm_chan_create(size_t in_cap, size_t out_cap, vr_shm_chan **out, vr_errbuf *err) {
  *out = NULL;
  if (!in_cap || !out_cap || in_cap > SHM_MAX_CAP || out_cap > SHM_MAX_CAP)
    return vr_errf(err, VR_ERANGE, "shm buffers of %zu/%zu bytes (1 B..4 GiB each)", in_cap,
                   out_cap);
  size_t in_off = align64(sizeof(shm_hdr));
  size_t out_off = in_off + align64(in_cap);
  size_t total = out_off + align64(out_cap);
  /* close-on-exec: only the shadow it is for inherits it (pair.c passes
   * it with a spawn file action), not every later child of the process */
  int fd = memfd_create("vario-shadow", MFD_CLOEXEC);
  if (fd < 0) return vr_errf(err, VR_EIO, "memfd_create: %s", strerror(errno));
  if (ftruncate(fd, (off_t)total)) {
    int e = errno;
    close(fd);
    return vr_errf(err, VR_EIO, "ftruncate to %zu bytes: %s", total, strerror(e));
  }
  int rc = map_fd(fd, total, 1, out, err);
  if (rc) return rc;
  shm_hdr *h = (*out)->h;
  memset(h, 0, sizeof *h);
  h->in_off = in_off, h->in_cap = in_cap, h->out_off = out_off, h->out_cap = out_cap;
  h->total = total;
  vr_shm_chan *c = *out;
  c->in_off = in_off, c->in_cap = in_cap, c->out_off = out_off, c->out_cap = out_cap;
  h->body_pid = (int32_t)getpid();
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&h->mu, &ma);
  pthread_mutexattr_destroy(&ma);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&h->cv, &ca);
  pthread_condattr_destroy(&ca);
  __atomic_store_n(&h->version, SHM_VERSION, __ATOMIC_RELAXED);
  __atomic_store_n(&h->magic, SHM_MAGIC, __ATOMIC_RELEASE);
  return 0;
}

int vr_shm_chan_open(int fd, vr_shm_chan **out, vr_errbuf *err) {
  *out = NULL;
  struct stat st;
  if (fstat(fd, &st)) return vr_errf(err, VR_EIO, "fd %d: %s", fd, strerror(errno));
  if ((size_t)st.st_size < sizeof(shm_hdr))
    return vr_errf(err, VR_EFORMAT, "fd %d: %lld bytes is no shadow channel", fd,
                   (long long)st.st_size);
  int own = dup(fd);
  if (own < 0) return vr_errf(err, VR_EIO, "dup: %s", strerror(errno));
  int rc = map_fd(own, (size_t)st.st_size, 0, out, err);
  if (rc) return rc;
  shm_hdr *h = (*out)->h;
  /* The layout comes from the other process: check it before trusting
   * any offset. */
  vr_shm_chan *c = *out;
  c->in_off = h->in_off, c->in_cap = h->in_cap, c->out_off = h->out_off, c->out_cap = h->out_cap;
  uint64_t total = h->total;
  if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != SHM_MAGIC || h->version != SHM_VERSION ||
      total != (uint64_t)st.st_size || c->in_off < sizeof(shm_hdr) || c->in_cap > total ||
      c->in_off > total - c->in_cap || c->out_off < c->in_off + c->in_cap ||
      c->out_cap > total || c->out_off > total - c->out_cap || (c->in_off | c->out_off) & 63) {
    vr_shm_chan_free(*out);
    *out = NULL;
    return vr_errf(err, VR_EFORMAT, "fd %d is not a vario shadow channel (version %u)", fd,
                   SHM_VERSION);
  }
  lock(h);
  h->shadow_pid = (int32_t)getpid();
  pthread_mutex_unlock(&h->mu);
  return 0;
}

void vr_shm_chan_set_child(vr_shm_chan *c, int pid) { c->child = (pid_t)pid; }

void vr_shm_chan_free(vr_shm_chan *c) {
  if (!c) return;
  munmap(c->base, c->bytes);
  close(c->fd);
  vr_free(c);
}

int vr_shm_chan_fd(const vr_shm_chan *c) { return c->fd; }
size_t vr_shm_chan_bytes(const vr_shm_chan *c) { return c->bytes; }

void *vr_shm_chan_in_buf(vr_shm_chan *c, size_t *cap) {
  if (cap) *cap = c->in_cap;
  return c->base + c->in_off;
}

/* A shadow that never registered is alive as long as we wait for it; one
 * that registered and whose pid is gone is dead. */
static int shadow_gone(shm_hdr *h) { return h->shadow_pid > 0 && !peer_alive(h->shadow_pid); }

int vr_shm_chan_wait_ready(vr_shm_chan *c, int64_t timeout_ns, double *load_ms,
                           vr_errbuf *err) {
  shm_hdr *h = c->h;
  int64_t end = mono_ns() + timeout_ns;
  lock(h);
  /* the child may die before it opens the channel (a bad argument, an
   * fd not inherited): then its pid, known here, says so at once */
  while (!h->ready && !shadow_gone(h) && !(c->child > 0 && !peer_alive(c->child)) &&
         mono_ns() < end)
    timed_wait(h);
  int ready = h->ready;
  double ms = h->load_ms;
  char msg[sizeof h->msg];
  memcpy(msg, h->msg, sizeof msg);
  msg[sizeof msg - 1] = 0;
  pthread_mutex_unlock(&h->mu);
  if (ready == 1) {
    if (load_ms) *load_ms = ms;
    return 0;
  }
  if (ready < 0) return vr_errf(err, VR_ESHUTDOWN, "shadow failed to load: %s", msg);
  if (mono_ns() >= end) return vr_errf(err, VR_ETIMEDOUT, "shadow not ready in time");
  return vr_errf(err, VR_ESHUTDOWN, "shadow process exited before it was ready");
}

static void fill_job(vr__shm_job *j, const vr_tensor *t, int rows) {
  memset(j, 0, sizeof *j);
  j->rows = rows;
  j->dtype = t->dtype;
  j->ndim = t->ndim;
  memcpy(j->shape, t->shape, sizeof j->shape);
  j->nbytes = t->nbytes;
  copy_str(j->name, sizeof j->name, t->name);
}

int vr_shm_chan_post(vr_shm_chan *c, const vr_tensor *in, int rows, vr_errbuf *err) {
  shm_hdr *h = c->h;
  if (in->ndim < 1 || in->ndim > VR_MAX_DIMS || in->shape[0] != rows || rows < 1)
    return vr_errf(err, VR_EINVAL, "shm post: tensor of %d rows, shape[0] %lld", rows,
                   in->ndim >= 1 ? (long long)in->shape[0] : -1LL);
  if (in->nbytes > c->in_cap)
    return vr_errf(err, VR_ERANGE, "shm post: %zu bytes exceed the %llu-byte buffer",
                   in->nbytes, (unsigned long long)c->in_cap);
  lock(h);
  int rc = 0;
  if (h->closed || h->ready != 1 || shadow_gone(h))
    rc = vr_errf(err, VR_ESHUTDOWN, "shadow process is gone");
  else if (h->posted != h->done)
    rc = vr_errf(err, VR_ESTATE, "shm post: a job is in flight");
  pthread_mutex_unlock(&h->mu);
  if (rc) return rc;
  /* The shadow only reads `in` after seeing the new sequence number, and
   * no job is in flight: writing outside the lock is safe. */
  char *buf = c->base + c->in_off;
  if (in->data != buf) memcpy(buf, in->data, in->nbytes);
  lock(h);
  fill_job(&h->in, in, rows);
  h->posted++;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  return 0;
}

int vr_shm_chan_wait(vr_shm_chan *c, vr_tensor *out, int64_t timeout_ns, vr_errbuf *err) {
  shm_hdr *h = c->h;
  int64_t end = mono_ns() + timeout_ns;
  lock(h);
  int gone = 0;
  while (h->done != h->posted && !(gone = shadow_gone(h)) && mono_ns() < end) timed_wait(h);
  int rc;
  if (h->done == h->posted) {
    rc = h->rc;
    if (rc) {
      char msg[sizeof h->msg];
      memcpy(msg, h->msg, sizeof msg);
      msg[sizeof msg - 1] = 0;
      vr_errf(err, rc, "shadow: %s", msg);
    } else {
      vr_errbuf e2 = {0};
      vr__shm_job j = h->out;
      rc = vr__shm_check_job(&j, c->out_cap, &e2);
      if (rc) {
        vr_errf(err, rc, "shadow's reply: %s", e2.msg);
      } else {
        /* names live in the job copy in the header, stable until the next
         * post */
        memset(out, 0, sizeof *out);
        out->name = h->out.name;
        out->dtype = (vr_dtype)j.dtype;
        out->ndim = j.ndim;
        memcpy(out->shape, j.shape, sizeof out->shape);
        out->nbytes = (size_t)j.nbytes;
        out->data = c->base + c->out_off;
      }
    }
  } else {
    /* abandon the job: a late reply bumps `done` and is ignored, and the
     * next post waits for nothing (posted == done again) */
    h->done = h->posted;
    rc = gone ? vr_errf(err, VR_ESHUTDOWN, "shadow process died during a job")
              : vr_errf(err, VR_ETIMEDOUT, "shadow did not answer in time");
  }
  pthread_mutex_unlock(&h->mu);
  return rc;
}

void vr_shm_chan_close(vr_shm_chan *c) {
  lock(c->h);
  c->h->closed = 1;
  pthread_cond_broadcast(&c->h->cv);
  pthread_mutex_unlock(&c->h->mu);
}

void vr_shm_chan_ready(vr_shm_chan *c, int rc, double load_ms, const char *msg) {
  shm_hdr *h = c->h;
  lock(h);
  h->load_ms = load_ms;
  copy_str(h->msg, sizeof h->msg, msg);
  h->ready = rc ? -1 : 1;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

/* Runs one job; the reply goes into the header under mu. */
static void serve_one(vr_shm_chan *c, vr_session *s, const vr__shm_job *j, uint64_t seq) {
  shm_hdr *h = c->h;
  vr_errbuf e = {0};
  int rc = vr__shm_check_job(j, c->in_cap, &e);
  vr_tensor in = {0}, out = {0};
  if (!rc) {
    in.name = j->name;
    in.dtype = (vr_dtype)j->dtype;
    in.ndim = j->ndim;
    memcpy(in.shape, j->shape, sizeof in.shape);
    in.nbytes = (size_t)j->nbytes;
    in.data = c->base + c->in_off;
    /* the session computes on the shared rows in place */
    rc = vr_session_run_borrowed(s, j->rows, &in, 1, &out, 1, &e);
  }
  if (!rc && out.nbytes > c->out_cap)
    rc = vr_errf(&e, VR_ERANGE, "output of %zu bytes exceeds the %llu-byte buffer", out.nbytes,
                 (unsigned long long)c->out_cap);
  if (!rc) memcpy(c->base + c->out_off, out.data, out.nbytes);
  lock(h);
  if (h->posted == seq) { /* not abandoned meanwhile */
    if (!rc) fill_job(&h->out, &out, j->rows);
    h->rc = rc;
    copy_str(h->msg, sizeof h->msg, rc ? e.msg : "");
    h->done = seq;
    pthread_cond_broadcast(&h->cv);
  }
  pthread_mutex_unlock(&h->mu);
}

int vr_shm_chan_serve(vr_shm_chan *c, vr_session *s, vr_errbuf *err) {
  shm_hdr *h = c->h;
  lock(h);
  /* a job posted between ready and here is pending, not seen */
  uint64_t seen = h->done;
  for (;;) {
    while (!h->closed && h->posted == seen && peer_alive(h->body_pid)) timed_wait(h);
    if (h->closed) break;
    if (h->posted == seen) {
      pthread_mutex_unlock(&h->mu);
      return vr_errf(err, VR_ESHUTDOWN, "body process %d is gone", (int)h->body_pid);
    }
    seen = h->posted;
    vr__shm_job j = h->in; /* a copy: the body may not change it, but we do not trust it */
    pthread_mutex_unlock(&h->mu);
    serve_one(c, s, &j, seen);
    lock(h);
  }
  pthread_mutex_unlock(&h->mu);
  return 0;
}

int vr_shm_shadow_main(int fd, const char *model_path, int pb, int pe, int threads,
                       int max_batch, vr_errbuf *err) {
  vr_shm_chan *c;
  int rc = vr_shm_chan_open(fd, &c, err);
  if (rc) return rc;
  int64_t t0 = vr_now_ns();
  vr_model *whole = NULL, *slice = NULL;
  vr_session *s = NULL;
  rc = vr_model_load(model_path, &whole, err);
  if (!rc) rc = vr_model_slice(whole, pb, pe, &slice, err);
  vr_model_free(whole); /* the process keeps only its blocks */
  if (!rc) {
    vr_session_opts o;
    vr_session_opts_init(&o);
    o.threads = threads;
    o.max_batch = max_batch;
    rc = vr_session_create(slice, &o, &s, err);
  }
  if (!rc && (vr_session_num_inputs(s) != 1 || vr_session_num_outputs(s) != 1))
    rc = vr_errf(err, VR_EINVAL, "nodes [%d, %d) do not have one input and one output", pb, pe);
  vr_shm_chan_ready(c, rc, (double)(vr_now_ns() - t0) / 1e6, rc && err ? err->msg : NULL);
  if (!rc) rc = vr_shm_chan_serve(c, s, err);
  vr_session_free(s);
  vr_model_free(slice);
  vr_shm_chan_free(c);
  return rc;
}
