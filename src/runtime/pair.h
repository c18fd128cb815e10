/*
 * A body instance paired with a shadow instance (AsyFunc), in one process.
 *
 * The body holds the whole model as three partial sessions on its cores:
 * the part before the parallel range [pb, pe), the range itself, and the
 * part after (chained, they compute bit for bit what one whole session
 * computes). A shadow holds only the range: a slice of the model
 * (vr_model_slice, its blocks' weights) with its own session, thread and
 * cores. A paired run executes the part before for the whole batch, hands
 * rows [b_B, b) of the boundary tensor to the shadow (a pointer into the
 * body's output; the shadow's session reads it in place when aligned),
 * runs rows [0, b_B) of the range on the body at the same time, merges
 * the two outputs in row order and runs the rest. Between the body's own
 * sessions the boundary tensor is not copied either: each reads the
 * previous one's output buffer in place (vr_session_run_borrowed).
 *
 * Threads and ownership: vr_pair_run may be called by one thread at a time
 * (the body's executor). vr_pair_attach / vr_pair_release may be called
 * from any thread (the scaler): release waits for a paired run in flight
 * to finish, after which runs go body-only — no request is lost. The pair
 * borrows the model (must outlive it); it owns its sessions, the shadow's
 * slice and thread (or the shadow process and its channel).
 */
#ifndef VR_RUNTIME_PAIR_H
#define VR_RUNTIME_PAIR_H

#include "vario/engine.h"

typedef struct vr_pair vr_pair;

/* A body for model m whose parallel range is nodes [pb, pe) (a chain cut at
 * both ends: one batch-major tensor in, one out). */
int vr_pair_create(const vr_model *m, int pb, int pe, int body_threads, int max_batch,
                   vr_pair **out, vr_errbuf *err);
void vr_pair_free(vr_pair *p);

/* Loads a shadow holding only [pb, pe) on its own thread with `threads`
 * cores. *load_ms (may be NULL) gets the time the load took. */
int vr_pair_attach(vr_pair *p, int threads, double *load_ms, vr_errbuf *err);
/* Same, with the shadow in another process of this host: it runs
 * `vario_exe shadow` (cli/cmd_shadow.c; vario_exe is `vario` or
 * `vario-shadow`), which takes the slice of [pb, pe) packed in a sealed
 * memfd (vr_model_pack; made at the first such attach and kept for the
 * next) — or, when model_path is given, loads that file (the one the
 * body's model came from) and keeps only [pb, pe) — and serves over a
 * shared-memory channel (runtime/shm_pair.h): the boundary rows are handed
 * over by one memcpy into shared memory and read there in place, no
 * socket. *load_ms gets the time from spawn to ready; timeout_ns bounds
 * it. A shadow process that dies or stops answering during a run is
 * detected, its rows are re-run on the body (no request lost) and it is
 * released. */
int vr_pair_attach_process(vr_pair *p, const char *vario_exe, const char *model_path,
                           int threads, int64_t timeout_ns, double *load_ms, vr_errbuf *err);
/* Boundary hand-off between the body's sessions (pre -> range -> post):
 * by default the next session reads the previous one's output buffer in
 * place (vr_session_run_borrowed); copy = 1 copies it into the next
 * session's arena instead (the old way, kept to measure the difference). */
void vr_pair_set_copy_handoff(vr_pair *p, int copy);
/* The shadow process's pid (0: none, or an in-process shadow). */
int vr_pair_shadow_pid(vr_pair *p);
/* Releases the shadow (after a paired run in flight finishes). */
void vr_pair_release(vr_pair *p);
int vr_pair_has_shadow(vr_pair *p);
/* Resident bytes of the shadow (0 without one) and of the body (with the
 * packed slice it keeps for process shadows, once it has made one). */
int64_t vr_pair_shadow_bytes(vr_pair *p);
int64_t vr_pair_body_bytes(const vr_pair *p);

/* Runs `batch` rows; bs of them go through the shadow on the parallel range
 * (bs = 0, or no shadow: the body alone). Outputs as vr_session_run's,
 * valid until the next run. *shadow_rows (may be NULL) gets the rows the
 * shadow actually ran, or -1 when its process failed: the body ran them
 * and the shadow is gone (the pair has none from now on). A shadow process
 * is waited for until give_up_ns (vr_now_ns; 0: 2 s), at most 2 s: one
 * that has not answered by then failed. */
int vr_pair_run(vr_pair *p, int batch, int bs, int64_t give_up_ns, const vr_tensor *in, int nin,
                vr_tensor *out, int nout, int *shadow_rows, vr_errbuf *err);

#endif
