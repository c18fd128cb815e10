/*
 * A deterministic backend for runtime and server tests (header-only, test
 * code only): y = 2*x + 1 element-wise on FP32 from input 0 into output 0
 * (output row = first `out_row` elements of the input row), and each run
 * sleeps base_us + per_row_us * batch so batching and deadlines can be
 * checked with known timings. Counts runs and the largest batch seen, and
 * how long its sleeps really took against what they asked for: on a loaded
 * machine a sleep overruns, the fake is then slower than its profile, and a
 * test can tell a policy's lateness from the scheduler's (rt_fake_overrun).
 */
#ifndef VR_TEST_RT_FAKE_H
#define VR_TEST_RT_FAKE_H

#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "runtime/runtime.h"

typedef struct rt_fake {
  int base_us, per_row_us;
  int out_row; /* floats per output row */
  int runs, max_batch_seen, fail_next;
  long long asked_ns, slept_ns; /* sums over all runs */
  vr_rt_backend be;
} rt_fake;

typedef struct rt_fake_sess {
  float *out;
  int max_batch;
  rt_fake *f;
} rt_fake_sess;

static inline int rt_fake_model_open(void *self, const vr_model_config *cfg,
                              void **model, vr_errbuf *err) {
  (void)self;
  if (cfg->inputs[0].dtype != VR_DT_F32)
    return vr_errf(err, VR_EUNSUPPORTED, "fake backend: FP32 only");
  *model = (void *)cfg;
  return 0;
}
static inline void rt_fake_model_close(void *self, void *model) {
  (void)self;
  (void)model;
}
static inline int rt_fake_session_open(void *self, void *model, vr_precision prec,
                                int threads, int max_batch, void **sess,
                                vr_errbuf *err) {
  (void)model; (void)prec; (void)threads; (void)err;
  rt_fake *f = self;
  rt_fake_sess *s = VR_NEW(rt_fake_sess);
  s->out = vr_malloc(sizeof(float) * (size_t)(f->out_row * max_batch));
  s->max_batch = max_batch;
  s->f = f;
  *sess = s;
  return 0;
}
static inline void rt_fake_session_close(void *self, void *sess) {
  (void)self;
  rt_fake_sess *s = sess;
  vr_free(s->out);
  vr_free(s);
}
static inline int rt_fake_run(void *self, void *sess, int batch, const vr_tensor *in,
                       int n_in, vr_tensor *out, int n_out, vr_errbuf *err) {
  (void)n_in; (void)n_out;
  rt_fake *f = self;
  rt_fake_sess *s = sess;
  if (__atomic_exchange_n(&f->fail_next, 0, __ATOMIC_SEQ_CST))
    return vr_errf(err, VR_EBACKEND, "fake backend failure");
  long us = f->base_us + (long)f->per_row_us * batch;
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000}, t0, t1;
  if (us) {
    clock_gettime(CLOCK_MONOTONIC, &t0);
    nanosleep(&ts, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long long took = (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
    __atomic_fetch_add(&f->asked_ns, us * 1000LL, __ATOMIC_RELAXED);
    __atomic_fetch_add(&f->slept_ns, took, __ATOMIC_RELAXED);
  }
  const float *x = in[0].data;
  size_t in_row = in[0].nbytes / sizeof(float) / (size_t)batch;
  for (int b = 0; b < batch; b++)
    for (int j = 0; j < f->out_row; j++)
      s->out[b * f->out_row + j] = 2 * x[b * in_row + (size_t)j] + 1;
  out[0].name = "y";
  out[0].dtype = VR_DT_F32;
  out[0].ndim = 2;
  out[0].shape[0] = batch;
  out[0].shape[1] = f->out_row;
  out[0].data = s->out;
  out[0].nbytes = sizeof(float) * (size_t)(batch * f->out_row);
  __atomic_fetch_add(&f->runs, 1, __ATOMIC_SEQ_CST);
  /* a test resets it while a batch runs (test_runtime.c block_instance) */
  int seen = __atomic_load_n(&f->max_batch_seen, __ATOMIC_RELAXED);
  while (batch > seen && !__atomic_compare_exchange_n(&f->max_batch_seen, &seen, batch, 0,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return 0;
}

static inline void rt_fake_init(rt_fake *f, int base_us, int per_row_us,
                         int out_row) {
  memset(f, 0, sizeof *f);
  f->base_us = base_us;
  f->per_row_us = per_row_us;
  f->out_row = out_row;
  vr_rt_backend b = {rt_fake_model_open, rt_fake_model_close,
                     rt_fake_session_open, rt_fake_session_close,
                     rt_fake_run, f};
  f->be = b;
}

/* Mean slowdown of the fake's sleeps so far (1.0 = exactly as profiled):
 * the part of any lateness that the machine, not the code under test, caused. */
static inline double rt_fake_overrun(rt_fake *f) {
  long long a = __atomic_load_n(&f->asked_ns, __ATOMIC_RELAXED);
  long long s = __atomic_load_n(&f->slept_ns, __ATOMIC_RELAXED);
  return a > 0 ? (double)s / (double)a : 1.0;
}

/* A config for the fake: input "x" FP32 [-1, in_row], output "y" FP32
 * [-1, out_row]. */
static inline void rt_fake_config(vr_model_config *c, const char *name, int in_row,
                           int out_row, int max_batch, int delay_us) {
  memset(c, 0, sizeof *c);
  strcpy(c->name, name);
  c->accuracy = -1;
  c->n_inputs = c->n_outputs = 1;
  strcpy(c->inputs[0].name, "x");
  c->inputs[0].dtype = VR_DT_F32;
  c->inputs[0].ndim = 2;
  c->inputs[0].shape[0] = -1;
  c->inputs[0].shape[1] = in_row;
  strcpy(c->outputs[0].name, "y");
  c->outputs[0].dtype = VR_DT_F32;
  c->outputs[0].ndim = 2;
  c->outputs[0].shape[0] = -1;
  c->outputs[0].shape[1] = out_row;
  c->max_batch_size = max_batch;
  c->instances = 1;
  c->threads = 1;
  c->max_queue_delay_us = delay_us;
}

#endif
