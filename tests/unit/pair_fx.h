/* The fixture of the body/shadow pair tests (test_pair.c, test_shm_pair.c;
 * header-only, test code only): tests/data/engine/tiny_cnn.onnx, its input
 * batch, the unpaired model's output on it (the reference a paired run
 * must equal bit for bit), and the widest parallel range the model's chain
 * cuts allow, [pb, pe): from the first to the last interior cut. */
#ifndef VR_TEST_PAIR_FX_H
#define VR_TEST_PAIR_FX_H

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "engine_util.h"

typedef struct pair_fx {
  char path[1024]; /* the model file */
  vr_model *m;
  vr_npy in;
  float *ref; /* output 0 of the unpaired model on `in` (malloc'd) */
  size_t ref_bytes;
  int batch, pb, pe;
} pair_fx;

static inline void pair_fx_setup(pair_fx *f) {
  vr_errbuf e = {0};
  snprintf(f->path, sizeof f->path, "%s", src_path("tests/data/engine/tiny_cnn.onnx"));
  if (vr_model_load(f->path, &f->m, &e)) fail_msg("%s", e.msg);
  assert_int_equal(vr_npy_read(src_path("tests/data/engine/tiny_cnn_in.npy"), &f->in, &e), 0);
  f->batch = (int)f->in.shape[0];
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.max_batch = f->batch;
  vr_session *s;
  if (vr_session_create(f->m, &o, &s, &e)) fail_msg("%s", e.msg);
  vr_tensor in = tensor_of("input", &f->in), out[2];
  assert_int_equal(vr_session_run(s, f->batch, &in, 1, out, 2, &e), 0);
  f->ref = malloc(out[0].nbytes);
  memcpy(f->ref, out[0].data, out[0].nbytes);
  f->ref_bytes = out[0].nbytes;
  vr_session_free(s);
  int n = vr_model_num_nodes(f->m);
  char *cut = vr_calloc((size_t)n + 1, 1);
  assert_int_equal(vr_model_chain_cuts(f->m, cut), 0);
  f->pb = f->pe = -1;
  for (int k = 1; k < n; k++)
    if (cut[k]) {
      if (f->pb < 0) f->pb = k;
      f->pe = k;
    }
  vr_free(cut);
  assert_true(f->pb > 0 && f->pe > f->pb);
}

static inline void pair_fx_teardown(pair_fx *f) {
  free(f->ref);
  vr_npy_free(&f->in);
  vr_model_free(f->m);
}

#endif
