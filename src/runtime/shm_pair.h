/*
 * A body and a shadow in two processes of one host (AsyFunc), joined by
 * one shared-memory region instead of a socket.
 *
 * The region is a memfd the body creates: a control block (the state
 * words both sides wait on with futexes, the job's tensor description,
 * the peers' pids; no lock) followed by two row buffers, `in` (the
 * boundary rows the body hands over) and `out` (the rows the shadow
 * returns). A hand-off is a memcpy of the body's rows into `in` — or
 * nothing, when the body produced them there (vr_shm_chan_in_buf) — and
 * the shadow's session reads `in` in place (vr_session_run_borrowed): no
 * socket, no kernel copy. The shadow's output is copied once into `out`,
 * where the body reads it in place.
 *
 * Protocol (one job in flight at a time):
 *   body   create → pass fd (fork/exec inheritance or SCM_RIGHTS)
 *   shadow open(fd) → load its blocks → vr_shm_chan_ready(load_ms)
 *   body   vr_shm_chan_wait_ready → post(rows) … wait(out) … post … wait
 *   body   vr_shm_chan_close: the shadow's serve loop returns 0
 * A peer that dies is noticed by its pid (kill(pid, 0)) within the poll
 * interval of a wait: the waiting side gets VR_ESHUTDOWN. One that is
 * stopped or stuck makes the body's wait end at its timeout
 * (VR_ETIMEDOUT). Neither side ever holds anything the other waits for,
 * so no peer, whatever it does or writes, can block the other past its
 * timeout. The body then runs the rows itself (vr_pair does), so no
 * request is lost.
 *
 * Each side treats the control block as untrusted input (the other
 * process can write all of it): every job field is checked
 * (vr__shm_check_job) before use, on a copy; the body keeps its own
 * layout, job count and checked reply.
 *
 * Ownership and threads: a vr_shm_chan is one process's mapping; the
 * creator's and the opener's are freed independently (the region goes
 * when both are unmapped and the fds closed). On the body side post/wait
 * are called by one thread at a time (the body's executor); close and free
 * by its owner after that thread stopped using it. On the shadow side
 * serve runs on one thread.
 */
#ifndef VR_RUNTIME_SHM_PAIR_H
#define VR_RUNTIME_SHM_PAIR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vario/engine.h"

typedef struct vr_shm_chan vr_shm_chan;

/* Body side: a new region with room for in_cap bytes of boundary rows and
 * out_cap bytes of shadow output (each > 0, at most 4 GiB). The fd is
 * inheritable (no FD_CLOEXEC) so a fork/exec'ed shadow can open it. */
int vr_shm_chan_create(size_t in_cap, size_t out_cap, vr_shm_chan **out, vr_errbuf *err);
/* Shadow side: maps the region behind fd (dup'ed; the caller keeps fd).
 * VR_EFORMAT when it is not a channel of this version. */
int vr_shm_chan_open(int fd, vr_shm_chan **out, vr_errbuf *err);
/* Unmaps and closes this process's side. NULL is fine. */
void vr_shm_chan_free(vr_shm_chan *c);
int vr_shm_chan_fd(const vr_shm_chan *c);
/* Size of the whole mapping (the resident shared memory of the pair). */
size_t vr_shm_chan_bytes(const vr_shm_chan *c);

/* ---- body side ---------------------------------------------------------- */

/* The `in` buffer (64-byte aligned) and its capacity: a body that writes
 * the boundary rows here posts them with no copy at all. */
void *vr_shm_chan_in_buf(vr_shm_chan *c, size_t *cap);
/* Body: the shadow's process id, so that vr_shm_chan_wait_ready fails at
 * once when it exits before it opened the channel. */
void vr_shm_chan_set_child(vr_shm_chan *c, int pid);
/* Waits up to timeout_ns for the shadow's vr_shm_chan_ready; *load_ms (may
 * be NULL) gets the load time it reported. VR_ETIMEDOUT, or VR_ESHUTDOWN
 * when the shadow exited or failed to load (err says why). */
int vr_shm_chan_wait_ready(vr_shm_chan *c, int64_t timeout_ns, double *load_ms,
                           vr_errbuf *err);
/* Posts one job: `rows` rows of the tensor in (copied into `in` unless
 * in->data already points there). VR_ESTATE if a job is in flight,
 * VR_ERANGE if it does not fit, VR_ESHUTDOWN if the shadow is gone. */
int vr_shm_chan_post(vr_shm_chan *c, const vr_tensor *in, int rows, vr_errbuf *err);
/* Waits for the posted job's result: *out points into the `out` buffer,
 * valid until the next post. The shadow's own error is returned with its
 * message; VR_ETIMEDOUT after timeout_ns (the job is then abandoned: its
 * late result is discarded; the shadow may still be reading `in`, so a
 * body should give up on a shadow that timed out rather than post again),
 * VR_ESHUTDOWN if the shadow died. */
int vr_shm_chan_wait(vr_shm_chan *c, vr_tensor *out, int64_t timeout_ns, vr_errbuf *err);
/* Tells the shadow to stop (its serve loop returns 0). */
void vr_shm_chan_close(vr_shm_chan *c);

/* ---- shadow side -------------------------------------------------------- */

/* Reports a finished load (rc 0) or a failed one (rc < 0, msg says why). */
void vr_shm_chan_ready(vr_shm_chan *c, int rc, double load_ms, const char *msg);
/* Serves jobs with session s (one input, one output: a shadow's blocks)
 * until the body closes the channel (returns 0) or dies (VR_ESHUTDOWN).
 * The session reads `in` in place. */
int vr_shm_chan_serve(vr_shm_chan *c, vr_session *s, vr_errbuf *err);

/* The shadow process's whole life, as `vario shadow` runs it: open fd;
 * take its blocks, either unpacked from memfd model_fd (>= 0: the slice
 * its body packed, vr_model_pack; the fd is closed) or by loading the
 * model at path and keeping only nodes [pb, pe) (vr_model_slice; the
 * whole model is freed before serving, so the process holds just the
 * blocks either way); open a session with `threads` cores and plans up to
 * max_batch, report ready, serve. */
int vr_shm_shadow_main(int fd, const char *model_path, int model_fd, int pb, int pe,
                       int threads, int max_batch, vr_errbuf *err);

/* ---- internal, exposed for tests ----------------------------------------- */

/* A job description as the shadow reads it from shared memory. */
typedef struct vr__shm_job {
  int32_t rows, dtype, ndim;
  int64_t shape[VR_MAX_DIMS];
  uint64_t nbytes;
  char name[VR_NAME_MAX];
} vr__shm_job;
/* 0 when the job fits a buffer of cap bytes and is self-consistent
 * (dtype known, 1 <= ndim <= VR_MAX_DIMS, shape[0] == rows >= 1, every dim
 * >= 1, nbytes == product x dtype size, a NUL-terminated name); else
 * VR_EFORMAT with the field named. */
int vr__shm_check_job(const vr__shm_job *j, uint64_t cap, vr_errbuf *err);

#endif
