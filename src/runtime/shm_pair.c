/* Body/shadow across processes through one shared-memory region (see
 * shm_pair.h). */
#define _GNU_SOURCE
#include "runtime/shm_pair.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/proc.h"
#include "base/alloc.h"
#include "base/clock.h"

#define SHM_MAGIC 0x56524d53u /* "VRMS" */
#define SHM_VERSION 2u
#define SHM_POLL_NS (20 * 1000000LL) /* how often a waiter checks its peer */
#define SHM_MAX_CAP ((uint64_t)4 << 30)

/* The control block at offset 0 of the region. Both sides map it, and
 * either can write any of it, so neither ever blocks on something the
 * other holds: there is no lock. The state is in single words, written
 * with release and read with acquire, each published after the fields it
 * covers (ready, closed, posted, done). A waiter sleeps on the word it
 * waits for with a raw futex wait, which returns at once when the word has
 * changed and never sleeps past SHM_POLL_NS, and re-reads the state after
 * every return; the writer wakes it. A process-shared mutex let a peer
 * stopped while holding it, or one that wrote over it, block the body's
 * executor for ever; glibc's semaphores abort the process when their
 * futex word is nonsense ("The futex facility returned an unexpected
 * error code"). A raw futex call only returns an error, which is ignored:
 * the caller re-reads the state. */
typedef struct shm_hdr {
  uint32_t magic, version;
  uint64_t in_off, in_cap, out_off, out_cap, total;
  int32_t body_pid, shadow_pid;
  uint32_t ready;  /* 0 loading, 1 ready, else failed (after load_ms, msg) */
  uint32_t closed;
  uint32_t posted; /* the body's last job (after `in`) */
  uint32_t done;   /* the shadow's last reply (after rc, msg, `out`) */
  int32_t rc;      /* of job `done` */
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
  /* body: its own count of jobs, and whether the last one awaits its
   * reply (the header's copies are the peer's to overwrite); the reply's
   * job description as checked, whose name an answer points to */
  uint32_t seq;
  int inflight;
  vr__shm_job reply;
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

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

/* A dead child that its parent has not reaped yet still answers kill(pid,
 * 0): the body is that parent, so a zombie counts as dead (state 'Z' in
 * /proc/PID/stat). */
static int peer_alive(int32_t pid) {
  if (pid <= 0 || (kill((pid_t)pid, 0) && errno != EPERM)) return 0;
  char st = 0;
  if (vr_proc_stat(pid, &st, NULL)) return 1;
  return st != 'Z' && st != 'X';
}

/* Sleeps while *w is still `seen`, for at most SHM_POLL_NS and never past
 * `end` (monotonic ns). Whatever the futex call returns (woken, the word
 * changed, a signal, the timeout, a peer's nonsense) the caller re-reads
 * its state. Shared, not private: the peer is another process. */
static void nap(uint32_t *w, uint32_t seen, int64_t end) {
  int64_t now = mono_ns(), t = end - now < SHM_POLL_NS ? end - now : SHM_POLL_NS;
  if (t <= 0) return;
  struct timespec ts = {(time_t)(t / 1000000000LL), (long)(t % 1000000000LL)};
  syscall(SYS_futex, w, FUTEX_WAIT, seen, &ts, NULL, 0);
}

/* Wakes whoever sleeps on *w (after the word was stored). */
static void wake(uint32_t *w) { syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0); }

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
  *c = (vr_shm_chan){.fd = fd, .bytes = bytes, .h = p, .base = p, .body = body};
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
  STORE(&h->shadow_pid, (int32_t)getpid());
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
static int shadow_gone(shm_hdr *h) {
  int32_t pid = LOAD(&h->shadow_pid);
  return pid > 0 && !peer_alive(pid);
}

int vr_shm_chan_wait_ready(vr_shm_chan *c, int64_t timeout_ns, double *load_ms,
                           vr_errbuf *err) {
  shm_hdr *h = c->h;
  int64_t end = mono_ns() + timeout_ns;
  uint32_t ready;
  /* the child may die before it opens the channel (a bad argument, an
   * fd not inherited): then its pid, known here, says so at once */
  while (!(ready = LOAD(&h->ready)) && !shadow_gone(h) &&
         !(c->child > 0 && !peer_alive(c->child)) && mono_ns() < end)
    nap(&h->ready, 0, end);
  double ms = h->load_ms;
  char msg[sizeof h->msg];
  memcpy(msg, h->msg, sizeof msg);
  msg[sizeof msg - 1] = 0;
  if (ready == 1) {
    if (load_ms) *load_ms = ms;
    return 0;
  }
  if (ready) return vr_errf(err, VR_ESHUTDOWN, "shadow failed to load: %s", msg);
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
  if (LOAD(&h->closed) || LOAD(&h->ready) != 1 || shadow_gone(h))
    return vr_errf(err, VR_ESHUTDOWN, "shadow process is gone");
  if (c->inflight) return vr_errf(err, VR_ESTATE, "shm post: a job is in flight");
  /* The shadow reads `in` and the job after it sees the new number. (One
   * still computing an abandoned job may read the new rows: its reply is
   * for the old number and ignored.) */
  char *buf = c->base + c->in_off;
  if (in->data != buf) memcpy(buf, in->data, in->nbytes);
  fill_job(&h->in, in, rows);
  STORE(&h->posted, ++c->seq);
  c->inflight = 1;
  wake(&h->posted);
  return 0;
}

int vr_shm_chan_wait(vr_shm_chan *c, vr_tensor *out, int64_t timeout_ns, vr_errbuf *err) {
  shm_hdr *h = c->h;
  if (!c->inflight) return vr_errf(err, VR_ESTATE, "shm wait: no job posted");
  int64_t end = mono_ns() + timeout_ns;
  int gone = 0;
  uint32_t d;
  while ((d = LOAD(&h->done)) != c->seq && !(gone = shadow_gone(h)) && mono_ns() < end)
    nap(&h->done, d, end);
  /* answered, or abandoned: a late reply carries the old number and is
   * ignored, and the next post need not wait for it */
  c->inflight = 0;
  if (d != c->seq)
    return gone ? vr_errf(err, VR_ESHUTDOWN, "shadow process died during a job")
                : vr_errf(err, VR_ETIMEDOUT, "shadow did not answer in time");
  int rc = h->rc;
  if (rc) {
    char msg[sizeof h->msg];
    memcpy(msg, h->msg, sizeof msg);
    msg[sizeof msg - 1] = 0;
    /* a code from the peer: keep it one of ours */
    return vr_errf(err, rc < 0 && rc >= VR_EINTERNAL ? rc : VR_EBACKEND, "shadow: %s", msg);
  }
  vr_errbuf e2 = {0};
  c->reply = h->out; /* checked and used as copied: the peer may change h->out */
  if ((rc = vr__shm_check_job(&c->reply, c->out_cap, &e2)))
    return vr_errf(err, rc, "shadow's reply: %s", e2.msg);
  const vr__shm_job *j = &c->reply;
  memset(out, 0, sizeof *out);
  out->name = j->name; /* this channel's copy: valid until the next wait */
  out->dtype = (vr_dtype)j->dtype;
  out->ndim = j->ndim;
  memcpy(out->shape, j->shape, sizeof out->shape);
  out->nbytes = (size_t)j->nbytes;
  out->data = c->base + c->out_off;
  return 0;
}

void vr_shm_chan_close(vr_shm_chan *c) {
  /* the shadow sleeps on `posted`: woken, it reads `closed` */
  STORE(&c->h->closed, 1);
  wake(&c->h->posted);
}

void vr_shm_chan_ready(vr_shm_chan *c, int rc, double load_ms, const char *msg) {
  shm_hdr *h = c->h;
  h->load_ms = load_ms;
  copy_str(h->msg, sizeof h->msg, msg);
  STORE(&h->ready, rc ? 2u : 1u);
  wake(&h->ready);
}

/* Runs one job; its reply goes into the header, then `done` says so. */
static void serve_one(vr_shm_chan *c, vr_session *s, const vr__shm_job *j, uint32_t seq) {
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
  if (LOAD(&h->posted) != seq) return; /* abandoned, and another job posted */
  if (!rc) memcpy(c->base + c->out_off, out.data, out.nbytes);
  if (!rc) fill_job(&h->out, &out, j->rows);
  h->rc = rc;
  copy_str(h->msg, sizeof h->msg, rc ? e.msg : "");
  STORE(&h->done, seq);
  wake(&h->done);
}

int vr_shm_chan_serve(vr_shm_chan *c, vr_session *s, vr_errbuf *err) {
  shm_hdr *h = c->h;
  /* a job posted between ready and here is pending, not seen */
  uint32_t seen = LOAD(&h->done);
  while (!LOAD(&h->closed)) {
    uint32_t p = LOAD(&h->posted);
    if (p == seen) {
      int32_t body = LOAD(&h->body_pid);
      if (!peer_alive(body))
        return vr_errf(err, VR_ESHUTDOWN, "body process %d is gone", (int)body);
      nap(&h->posted, seen, INT64_MAX);
      continue;
    }
    seen = p;
    vr__shm_job j = h->in; /* a copy: the body may not change it, but we do not trust it */
    serve_one(c, s, &j, seen);
  }
  return 0;
}

/* The model packed in memfd model_fd (vr_model_pack; closed here). */
static int read_pack(int model_fd, vr_model **out, vr_errbuf *err) {
  struct stat st;
  int rc = 0;
  if (fstat(model_fd, &st) || st.st_size <= 0) {
    rc = vr_errf(err, VR_EIO, "model fd %d: %s", model_fd, strerror(errno));
  } else {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, model_fd, 0);
    if (p == MAP_FAILED) {
      rc = vr_errf(err, VR_EIO, "model fd %d: mmap: %s", model_fd, strerror(errno));
    } else {
      rc = vr_model_unpack(p, (size_t)st.st_size, out, err);
      munmap(p, (size_t)st.st_size);
    }
  }
  close(model_fd);
  return rc;
}

int vr_shm_shadow_main(int fd, const char *model_path, int model_fd, int pb, int pe,
                       int threads, int max_batch, vr_errbuf *err) {
  vr_shm_chan *c;
  int rc = vr_shm_chan_open(fd, &c, err);
  if (rc) return rc;
  int64_t t0 = vr_now_ns();
  vr_model *whole = NULL, *slice = NULL;
  vr_session *s = NULL;
  if (model_fd >= 0) {
    rc = read_pack(model_fd, &slice, err);
  } else {
    rc = vr_model_load(model_path, &whole, err);
    if (!rc) rc = vr_model_slice(whole, pb, pe, &slice, err);
    vr_model_free(whole); /* the process keeps only its blocks */
  }
  if (!rc) {
    vr_session_opts o;
    vr_session_opts_init(&o);
    o.threads = threads;
    o.max_batch = max_batch;
    rc = vr_session_create(slice, &o, &s, err);
  }
  if (!rc && (vr_session_num_inputs(s) != 1 || vr_session_num_outputs(s) != 1))
    rc = vr_errf(err, VR_EINVAL, "the shadow's nodes do not have one input and one output");
  vr_shm_chan_ready(c, rc, (double)(vr_now_ns() - t0) / 1e6, rc && err ? err->msg : NULL);
  if (!rc) rc = vr_shm_chan_serve(c, s, err);
  vr_session_free(s);
  vr_model_free(slice);
  vr_shm_chan_free(c);
  return rc;
}
