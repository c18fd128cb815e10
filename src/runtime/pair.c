/* Body/shadow pairs (see pair.h). */
#define _GNU_SOURCE /* memfd_create, file seals */
#include "runtime/pair.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "runtime/config.h"
#include "runtime/shm_pair.h"

extern char **environ;

/* How long a paired run waits at most for a shadow process before it
 * re-runs the rows on the body (the caller may give up sooner: its
 * batch's deadlines): far above any block's latency, so it only fires on
 * a stuck process. */
#define SHADOW_PROC_TIMEOUT_NS (2000 * 1000000LL)

typedef struct shadow {
  /* a shadow process: its channel and pid (then slice, s, th are unused) */
  vr_shm_chan *chan;
  pid_t pid;
  vr_model *slice;
  vr_session *s;
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int job, done, quit, rows, rc, own;
  int failed; /* a process shadow that failed a run: released after it */
  vr_tensor in, out;
  vr_errbuf err;
} shadow;

struct vr_pair {
  const vr_model *m;
  int pb, pe, n, max_batch;
  vr_session *pre, *par, *post; /* pre/post NULL when the range starts/ends the graph */
  char *merge;
  size_t merge_cap;
  pthread_mutex_t run_mu; /* held by a run, and by attach/release to swap sh */
  shadow *sh;
  int copy_handoff; /* 1: copy boundary tensors into the next session (to measure) */
  /* a memfd holding the range's slice packed (vr_model_pack), sealed:
   * made at the first process attach, handed to every shadow process
   * after it (-1: none yet) */
  pthread_mutex_t pack_mu;
  int pack_fd;
  int64_t pack_bytes; /* its size: the body holds it (atomic) */
};

static void *shadow_main(void *arg) {
  shadow *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->job && !s->quit) pthread_cond_wait(&s->cv, &s->mu);
    if (s->quit) break;
    s->job = 0;
    vr_tensor in = s->in;
    int rows = s->rows, own = s->own;
    pthread_mutex_unlock(&s->mu);
    vr_errbuf err = {0};
    vr_tensor out;
    int rc = own ? vr_session_run_borrowed(s->s, rows, &in, 1, &out, 1, &err)
                 : vr_session_run(s->s, rows, &in, 1, &out, 1, &err);
    pthread_mutex_lock(&s->mu);
    s->rc = rc;
    s->out = out;
    s->err = err;
    s->done = 1;
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* Ends a shadow process: asks it to stop, then waits up to ~1 s before
 * killing it, so a stuck one cannot hold the caller for ever. */
static void reap(pid_t pid) {
  for (int i = 0; i < 100; i++) {
    pid_t r = waitpid(pid, NULL, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return;
    usleep(10000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

static void shadow_free(shadow *s) {
  if (!s) return;
  /* one that failed (timed out, stuck) is killed, not asked: waiting for
   * it would hold the batch's answer up to a second more; and waited for
   * at once (it cannot survive SIGKILL, stopped or not), where reap's
   * first poll came too soon and its next one 10 ms later */
  int killed = s->failed && s->pid > 0 && kill(s->pid, SIGKILL) == 0;
  if (s->chan) vr_shm_chan_close(s->chan);
  if (killed) {
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {
    }
  } else if (s->pid > 0) {
    reap(s->pid);
  }
  vr_shm_chan_free(s->chan);
  if (s->th) {
    pthread_mutex_lock(&s->mu);
    s->quit = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
  }
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  vr_session_free(s->s);
  vr_model_free(s->slice);
  vr_free(s);
}

static int open_range(const vr_model *m, int b, int e, int threads, int max_batch,
                      vr_session **out, vr_errbuf *err) {
  *out = NULL;
  if (b == e) return 0;
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.threads = threads;
  o.max_batch = max_batch;
  o.node_begin = b;
  o.node_end = e;
  return vr_session_create(m, &o, out, err);
}

int vr_pair_create(const vr_model *m, int pb, int pe, int body_threads, int max_batch,
                   vr_pair **out, vr_errbuf *err) {
  *out = NULL;
  int n = vr_model_num_nodes(m);
  if (pb < 0 || pe > n || pb >= pe)
    return vr_errf(err, VR_ERANGE, "parallel range [%d, %d) outside [0, %d)", pb, pe, n);
  char *cut = vr_calloc((size_t)n + 1, 1);
  if (!cut || vr_model_chain_cuts(m, cut)) {
    vr_free(cut);
    return vr_errf(err, VR_ENOMEM, "out of memory");
  }
  int ok = (pb == 0 || cut[pb]) && (pe == n || cut[pe]);
  vr_free(cut);
  if (!ok)
    return vr_errf(err, VR_EINVAL, "parallel range [%d, %d) must start and end at chain cuts",
                   pb, pe);
  vr_pair *p = VR_NEW(vr_pair);
  if (!p) return vr_errf(err, VR_ENOMEM, "out of memory");
  *p = (vr_pair){m, pb, pe, n, max_batch, NULL, NULL, NULL, NULL, 0, PTHREAD_MUTEX_INITIALIZER,
                 NULL, 0, PTHREAD_MUTEX_INITIALIZER, -1, 0};
  int rc = open_range(m, 0, pb, body_threads, max_batch, &p->pre, err);
  if (!rc) rc = open_range(m, pb, pe, body_threads, max_batch, &p->par, err);
  if (!rc) rc = open_range(m, pe, n, body_threads, max_batch, &p->post, err);
  if (!rc && (vr_session_num_inputs(p->par) != 1 || vr_session_num_outputs(p->par) != 1))
    rc = vr_errf(err, VR_EINVAL, "parallel range must have one input and one output");
  if (rc) {
    vr_pair_free(p);
    return rc;
  }
  *out = p;
  return 0;
}

void vr_pair_free(vr_pair *p) {
  if (!p) return;
  shadow_free(p->sh);
  vr_session_free(p->pre);
  vr_session_free(p->par);
  vr_session_free(p->post);
  vr_aligned_free(p->merge);
  if (p->pack_fd >= 0) close(p->pack_fd);
  pthread_mutex_destroy(&p->run_mu);
  pthread_mutex_destroy(&p->pack_mu);
  vr_free(p);
}

/* A zeroed shadow with its lock and condition ready; NULL when out of
 * memory. */
static shadow *shadow_new(void) {
  shadow *s = VR_NEW(shadow);
  if (!s) return NULL;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  return s;
}

/* Ends an attach begun at t0: on rc != 0 frees s and returns rc; else s
 * replaces the pair's shadow under run_mu (a paired run in flight
 * finishes first) and the old one is freed outside it. */
static int shadow_install(vr_pair *p, shadow *s, int rc, int64_t t0, double *load_ms) {
  if (rc) {
    shadow_free(s);
    return rc;
  }
  if (load_ms) *load_ms = (double)(vr_now_ns() - t0) / 1e6;
  pthread_mutex_lock(&p->run_mu);
  shadow *old = p->sh;
  p->sh = s;
  pthread_mutex_unlock(&p->run_mu);
  shadow_free(old);
  return 0;
}

int vr_pair_attach(vr_pair *p, int threads, double *load_ms, vr_errbuf *err) {
  int64_t t0 = vr_now_ns();
  shadow *s = shadow_new();
  if (!s) return vr_errf(err, VR_ENOMEM, "out of memory");
  int rc = vr_model_slice(p->m, p->pb, p->pe, &s->slice, err);
  if (!rc) rc = open_range(s->slice, 0, vr_model_num_nodes(s->slice), threads, p->max_batch,
                           &s->s, err);
  if (!rc && pthread_create(&s->th, NULL, shadow_main, s))
    rc = vr_errf(err, VR_ENOMEM, "cannot start the shadow's thread");
  return shadow_install(p, s, rc, t0, load_ms);
}

/* Writes all of buf to fd. */
static int write_all(int fd, const char *buf, size_t len) {
  while (len) {
    ssize_t w = write(fd, buf, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    buf += w, len -= (size_t)w;
  }
  return 0;
}

/* The memfd with the range's slice packed, made once (pack_mu). */
static int pack_memfd(vr_pair *p, int *out, vr_errbuf *err) {
  pthread_mutex_lock(&p->pack_mu);
  int rc = 0;
  if (p->pack_fd < 0) {
    vr_model *slice = NULL;
    void *buf = NULL;
    size_t len = 0;
    rc = vr_model_slice(p->m, p->pb, p->pe, &slice, err);
    if (!rc) rc = vr_model_pack(slice, &buf, &len, err);
    vr_model_free(slice);
    int fd = rc ? -1 : memfd_create("vario-shadow-model", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (!rc && fd < 0) rc = vr_errf(err, VR_EIO, "memfd_create: %s", strerror(errno));
    /* sealed: a shadow process cannot change what the next one reads */
    if (!rc && (write_all(fd, buf, len) ||
                fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)))
      rc = vr_errf(err, VR_EIO, "writing the shadow's model: %s", strerror(errno));
    vr_free(buf);
    if (rc && fd >= 0) close(fd);
    if (!rc) {
      p->pack_fd = fd;
      __atomic_store_n(&p->pack_bytes, (int64_t)len, __ATOMIC_RELAXED);
    }
  }
  *out = p->pack_fd;
  pthread_mutex_unlock(&p->pack_mu);
  return rc;
}

int vr_pair_attach_process(vr_pair *p, const char *vario_exe, const char *model_path,
                           int threads, int64_t timeout_ns, double *load_ms, vr_errbuf *err) {
  int64_t t0 = vr_now_ns();
  shadow *s = shadow_new();
  if (!s) return vr_errf(err, VR_ENOMEM, "out of memory");
  size_t in_row = (size_t)vr_tensor_info_row_bytes(vr_session_input(p->par, 0));
  size_t out_row = (size_t)vr_tensor_info_row_bytes(vr_session_output(p->par, 0));
  int mfd = -1;
  int rc = model_path ? 0 : pack_memfd(p, &mfd, err);
  if (!rc)
    rc = vr_shm_chan_create(in_row * (size_t)p->max_batch, out_row * (size_t)p->max_batch,
                            &s->chan, err);
  if (!rc) {
    char fd[16], range[32], th[16], mb[16], mf[16];
    snprintf(fd, sizeof fd, "%d", vr_shm_chan_fd(s->chan));
    snprintf(range, sizeof range, "%d:%d", p->pb, p->pe);
    snprintf(th, sizeof th, "%d", threads);
    snprintf(mb, sizeof mb, "%d", p->max_batch);
    snprintf(mf, sizeof mf, "%d", mfd);
    char *argv[] = {(char *)vario_exe, "shadow", "--fd", fd, "--threads", th, "--max-batch", mb,
                    "--model-fd", mf, NULL, NULL, NULL};
    if (model_path) { /* the file and the range instead of the pack */
      argv[8] = "--model", argv[9] = (char *)model_path;
      argv[10] = "--range", argv[11] = range;
    }
    /* dup2 onto itself clears close-on-exec for this fd alone (POSIX
     * 2024, glibc >= 2.29): the shadow inherits its channel and its
     * pack, no other */
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t sa;
    int e = posix_spawn_file_actions_init(&fa);
    if (!e && (e = posix_spawnattr_init(&sa))) posix_spawn_file_actions_destroy(&fa);
    if (!e) {
      /* not the server's blocked SIGINT/SIGTERM (its signal thread takes
       * them): the shadow must stop on SIGTERM like any process */
      sigset_t none, dfl;
      sigemptyset(&none);
      sigemptyset(&dfl);
      sigaddset(&dfl, SIGINT);
      sigaddset(&dfl, SIGTERM);
      sigaddset(&dfl, SIGPIPE);
      e = posix_spawnattr_setsigmask(&sa, &none);
      if (!e) e = posix_spawnattr_setsigdefault(&sa, &dfl);
      if (!e) e = posix_spawnattr_setflags(&sa, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
      if (!e)
        e = posix_spawn_file_actions_adddup2(&fa, vr_shm_chan_fd(s->chan),
                                             vr_shm_chan_fd(s->chan));
      if (!e && mfd >= 0) e = posix_spawn_file_actions_adddup2(&fa, mfd, mfd);
      if (!e) e = posix_spawn(&s->pid, vario_exe, &fa, &sa, argv, environ);
      posix_spawn_file_actions_destroy(&fa);
      posix_spawnattr_destroy(&sa);
    }
    if (!e) vr_shm_chan_set_child(s->chan, (int)s->pid);
    if (e) {
      s->pid = 0;
      rc = vr_errf(err, VR_EIO, "cannot start %s: %s", vario_exe, strerror(e));
    }
  }
  if (!rc) rc = vr_shm_chan_wait_ready(s->chan, timeout_ns, NULL, err);
  return shadow_install(p, s, rc, t0, load_ms);
}

void vr_pair_set_copy_handoff(vr_pair *p, int copy) {
  pthread_mutex_lock(&p->run_mu);
  p->copy_handoff = copy != 0;
  pthread_mutex_unlock(&p->run_mu);
}

int vr_pair_shadow_pid(vr_pair *p) {
  pthread_mutex_lock(&p->run_mu);
  int pid = p->sh ? (int)p->sh->pid : 0;
  pthread_mutex_unlock(&p->run_mu);
  return pid;
}

void vr_pair_release(vr_pair *p) {
  pthread_mutex_lock(&p->run_mu); /* a paired run in flight finishes first */
  shadow *s = p->sh;
  p->sh = NULL;
  pthread_mutex_unlock(&p->run_mu);
  shadow_free(s);
}

int vr_pair_has_shadow(vr_pair *p) {
  pthread_mutex_lock(&p->run_mu);
  int h = p->sh != NULL;
  pthread_mutex_unlock(&p->run_mu);
  return h;
}

int64_t vr_pair_shadow_bytes(vr_pair *p) {
  pthread_mutex_lock(&p->run_mu);
  shadow *s = p->sh;
  /* a process shadow's own memory is its business; the pair counts the
   * shared region */
  int64_t b = !s ? 0
              : s->chan ? (int64_t)vr_shm_chan_bytes(s->chan)
                        : vr_session_memory_bytes(s->s) + vr_model_weight_bytes(s->slice);
  pthread_mutex_unlock(&p->run_mu);
  return b;
}

int64_t vr_pair_body_bytes(const vr_pair *p) {
  int64_t b = vr_model_weight_bytes(p->m) + vr_session_memory_bytes(p->par);
  if (p->pre) b += vr_session_memory_bytes(p->pre);
  if (p->post) b += vr_session_memory_bytes(p->post);
  /* the packed slice kept for the next process shadow */
  return b + __atomic_load_n(&p->pack_bytes, __ATOMIC_RELAXED);
}

/* Rows [r0, r0 + rows) of a batch-major tensor, by pointer. */
static vr_tensor rows_of(const vr_tensor *t, int batch, int r0, int rows) {
  vr_tensor v = *t;
  size_t row = t->nbytes / (size_t)batch;
  v.shape[0] = rows;
  v.nbytes = row * (size_t)rows;
  v.data = (char *)t->data + row * (size_t)r0;
  return v;
}

/* Room for `need` bytes in the merge buffer (64-byte aligned, so the
 * next session can read it in place). */
static int merge_room(vr_pair *p, size_t need, vr_errbuf *err) {
  if (need <= p->merge_cap) return 0;
  char *m = vr_aligned_alloc(64, need);
  if (!m) return vr_errf(err, VR_ENOMEM, "out of memory");
  vr_aligned_free(p->merge);
  p->merge = m;
  p->merge_cap = need;
  return 0;
}

/* Runs the parallel range on rows of x: in place when the pair owns x
 * (`own`: a previous session's output, not the caller's input). */
static int run_par(vr_session *s, int own, int rows, const vr_tensor *x, vr_tensor *y,
                   vr_errbuf *err) {
  return own ? vr_session_run_borrowed(s, rows, x, 1, y, 1, err)
             : vr_session_run(s, rows, x, 1, y, 1, err);
}

/* A process shadow's reply is what the body's own range would give for
 * bs rows: the dtype, rank and row size of par's output, bs rows. Its
 * header is the other process's to write; a reply that is not (a bug, or
 * a model file replaced since the body loaded it) is a failure, and the
 * body runs those rows itself. */
static int check_reply(vr_pair *p, const vr_tensor *os, int bs, vr_errbuf *err) {
  const vr_tensor_info *want = vr_session_output(p->par, 0);
  size_t row = (size_t)vr_tensor_info_row_bytes(want);
  if (os->dtype != want->dtype || os->ndim != want->ndim || os->shape[0] != bs ||
      os->nbytes != row * (size_t)bs)
    return vr_errf(err, VR_EFORMAT, "reply of %lld rows, %zu bytes, not %d rows of %zu",
                   (long long)os->shape[0], os->nbytes, bs, row);
  /* the other dims too: they become the batch's output shape, which
   * clients read */
  for (int d = 1; d < want->ndim; d++)
    if (want->shape[d] > 0 && os->shape[d] != want->shape[d])
      return vr_errf(err, VR_EFORMAT, "reply's dim %d is %lld, not %lld", d,
                     (long long)os->shape[d], (long long)want->shape[d]);
  return 0;
}

/* How long to wait for a shadow process's reply, from now: until give_up
 * (0: none), at most SHADOW_PROC_TIMEOUT_NS; at least a millisecond, so
 * that a batch that started late still gives its shadow a chance. */
static int64_t shadow_wait_ns(int64_t give_up) {
  if (!give_up) return SHADOW_PROC_TIMEOUT_NS;
  int64_t left = give_up - vr_now_ns();
  return left < 1000000 ? 1000000 : left > SHADOW_PROC_TIMEOUT_NS ? SHADOW_PROC_TIMEOUT_NS : left;
}

/* The parallel range with rows split: body rows [0, bb) here, the rest on
 * the shadow at the same time; merged into p->merge in row order. A
 * shadow process that fails (died, stuck) is dropped and its rows are
 * re-run here, so the batch still completes. */
static int run_split(vr_pair *p, const vr_tensor *x, int own, int batch, int bs,
                     int64_t give_up, vr_tensor *y, vr_errbuf *err) {
  shadow *s = p->sh;
  int bb = batch - bs, rc = 0;
  vr_tensor xs = rows_of(x, batch, bb, bs);
  vr_errbuf perr = {0};
  int prc = 0; /* posting to a shadow process */
  if (s->chan) {
    prc = vr_shm_chan_post(s->chan, &xs, bs, &perr);
  } else {
    pthread_mutex_lock(&s->mu);
    s->in = xs;
    s->own = own;
    s->rows = bs;
    s->done = 0;
    s->job = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
  }
  vr_tensor ob = {0}, os = {0};
  if (bb > 0) {
    vr_tensor xb = rows_of(x, batch, 0, bb);
    rc = run_par(p->par, own, bb, &xb, &ob, err);
  }
  int src = 0;
  vr_errbuf serr = {0};
  if (s->chan) {
    src = prc ? prc : vr_shm_chan_wait(s->chan, &os, shadow_wait_ns(give_up), &serr);
    if (!src) src = check_reply(p, &os, bs, &serr);
  } else {
    pthread_mutex_lock(&s->mu);
    while (!s->done) pthread_cond_wait(&s->cv, &s->mu);
    src = s->rc;
    os = s->out;
    serr = s->err;
    pthread_mutex_unlock(&s->mu);
  }
  if (rc) return rc;
  size_t row_out = bb > 0 ? ob.nbytes / (size_t)bb : 0;
  if (src) { /* the shadow failed (in this process or another): its rows on the body */
    vr_warn("pair: shadow %d failed (%s); its %d rows re-run on the body", (int)s->pid,
            prc ? perr.msg : serr.msg, bs);
    s->failed = 1;
    if (bb > 0) {
      if ((rc = merge_room(p, ob.nbytes * (size_t)batch / (size_t)bb, err))) return rc;
      memcpy(p->merge, ob.data, ob.nbytes); /* the re-run reuses par's arena */
    }
    if ((rc = run_par(p->par, own, bs, &xs, &os, err))) return rc;
    row_out = os.nbytes / (size_t)bs;
    if ((rc = merge_room(p, row_out * (size_t)batch, err))) return rc;
    memcpy(p->merge + row_out * (size_t)bb, os.data, os.nbytes);
  } else {
    if ((rc = merge_room(p, ob.nbytes + os.nbytes, err))) return rc;
    if (bb > 0) memcpy(p->merge, ob.data, ob.nbytes);
    memcpy(p->merge + ob.nbytes, os.data, os.nbytes);
    row_out = os.nbytes / (size_t)bs;
  }
  *y = os;
  /* os.name is the shadow's (its slice, or the shared header), which a
   * release may free before the batch's outputs are read: the body's */
  y->name = vr_session_output(p->par, 0)->name;
  y->shape[0] = batch;
  y->data = p->merge;
  y->nbytes = row_out * (size_t)batch;
  return 0;
}

int vr_pair_run(vr_pair *p, int batch, int bs, int64_t give_up_ns, const vr_tensor *in, int nin,
                vr_tensor *out, int nout, int *shadow_rows, vr_errbuf *err) {
  if (batch < 1 || batch > p->max_batch || bs < 0 || bs > batch)
    return vr_errf(err, VR_ERANGE, "batch %d / shadow rows %d outside 1..%d", batch, bs,
                   p->max_batch);
  pthread_mutex_lock(&p->run_mu);
  if (!p->sh) bs = 0;
  if (shadow_rows) *shadow_rows = bs;
  vr_tensor x, y, mid[1];
  int rc = 0;
  if (p->pre) {
    rc = vr_session_run(p->pre, batch, in, nin, mid, 1, err);
    x = mid[0];
  } else {
    /* the range starts the graph: its input is the caller's */
    x = in[0];
    for (int i = 0; i < nin; i++)
      if (!strcmp(in[i].name, vr_session_input(p->par, 0)->name)) x = in[i];
  }
  /* x is pre's output: the next session may read it in place */
  int own = p->pre != NULL && !p->copy_handoff;
  if (!rc && bs > 0) rc = run_split(p, &x, own, batch, bs, give_up_ns, &y, err);
  else if (!rc) rc = run_par(p->par, own, batch, &x, &y, err);
  if (p->sh && p->sh->failed) { /* no more runs on a broken shadow, whatever the body did */
    shadow_free(p->sh);
    p->sh = NULL;
    if (shadow_rows) *shadow_rows = -1; /* the body ran them; the shadow is gone */
  }
  if (!rc && p->post) {
    /* y is par's output or the merge buffer, both the pair's own */
    rc = p->copy_handoff ? vr_session_run(p->post, batch, &y, 1, out, nout, err)
                         : vr_session_run_borrowed(p->post, batch, &y, 1, out, nout, err);
  } else if (!rc) {
    if (nout < 1) rc = vr_errf(err, VR_EINVAL, "need room for 1 output");
    else out[0] = y;
  }
  pthread_mutex_unlock(&p->run_mu);
  return rc;
}
