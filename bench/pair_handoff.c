/*
 * Boundary hand-off cost of an AsyFunc body (issue 17): the body runs as
 * three partial sessions (before / the parallel range / after); between
 * them the boundary tensor is either copied into the next session's arena
 * (the old way) or read in place (vr_session_run_borrowed). Same model,
 * same batch, same range, interleaved runs; prints the median time per
 * body run each way, with and without a 1-core in-process shadow, and the
 * bytes one hand-off moves.
 *
 *   bench_pair_handoff MODEL.onnx [--batch B] [--runs R] [--threads T] [--process VARIO]
 *
 * --process VARIO: also with the shadow in a `VARIO shadow` process
 * (runtime/shm_pair.h), rows through shared memory: the row
 * "shadow=process" adds the cross-process hand-off and wake-ups.
 *
 * The range is the one between the model's first and last interior chain
 * cut (vr_model_chain_cuts), so both hand-offs carry a real activation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "interior_range.h"
#include "runtime/pair.h"
#include "runtime/config.h"
#include "vario/engine.h"

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  const char *path = NULL, *vario = NULL;
  int batch = 8, runs = 30, threads = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--process") && i + 1 < argc) vario = argv[++i];
    else if (argv[i][0] != '-' && !path) path = argv[i];
    else {
      fprintf(stderr, "usage: bench_pair_handoff MODEL.onnx [--batch B] [--runs R] [--threads T]"
                      " [--process VARIO]\n");
      return 2;
    }
  }
  if (!path || batch < 1 || runs < 1 || runs > 10000 || threads < 1) {
    fprintf(stderr, "usage: bench_pair_handoff MODEL.onnx [--batch B] [--runs R] [--threads T]\n");
    return 2;
  }
  vr_errbuf e = {0};
  vr_model *m;
  if (vr_model_load(path, &m, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    return 1;
  }
  int n = vr_model_num_nodes(m), pb, pe;
  vr_bench_interior_range(m, &pb, &pe);
  vr_pair *p;
  if (pb < 0 || pe <= pb || vr_pair_create(m, pb, pe, threads, batch, &p, &e)) {
    fprintf(stderr, "no splittable range: %s\n", e.msg);
    return 1;
  }
  const vr_tensor_info *ti = vr_model_input(m, 0);
  vr_tensor in = {ti->name, ti->dtype, ti->ndim, {0}, NULL, 0};
  size_t row = vr_dtype_size(ti->dtype);
  for (int d = 1; d < ti->ndim; d++) in.shape[d] = ti->shape[d], row *= (size_t)ti->shape[d];
  in.shape[0] = batch;
  in.nbytes = row * (size_t)batch;
  in.data = vr_aligned_alloc(64, in.nbytes);
  for (size_t i = 0; i < in.nbytes / 4; i++) ((float *)in.data)[i] = (float)(i % 97) / 97.0f;
  int64_t hb = 0; /* bytes of the two boundary tensors at this batch */
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.node_begin = pb;
  o.node_end = pe;
  o.max_batch = 1;
  vr_session *probe;
  if (!vr_session_create(m, &o, &probe, &e)) {
    hb = (vr_tensor_info_row_bytes(vr_session_input(probe, 0)) +
          vr_tensor_info_row_bytes(vr_session_output(probe, 0))) * batch;
    vr_session_free(probe);
  }
  printf("# %s: nodes %d, range [%d, %d), batch %d, %d thread(s), %d runs; "
         "hand-offs move %.1f KiB per run\n", path, n, pb, pe, batch, threads, runs,
         (double)hb / 1024.0);
  double *t[3][2];
  vr_tensor out[8];
  static const char *shname[3] = {"no", "yes", "process"};
  for (int sh = 0; sh < (vario ? 3 : 2); sh++) {
    if (sh == 2) vr_pair_release(p);
    if (sh == 1 && vr_pair_attach(p, 1, NULL, &e)) {
      fprintf(stderr, "%s\n", e.msg);
      return 1;
    }
    if (sh == 2 && vr_pair_attach_process(p, vario, path, 1, 30000000000LL, NULL, &e)) {
      fprintf(stderr, "%s\n", e.msg);
      return 1;
    }
    for (int c = 0; c < 2; c++) t[sh][c] = vr_calloc((size_t)runs, sizeof(double));
    for (int r = -3; r < runs; r++) /* 3 warm-up rounds */
      for (int c = 0; c < 2; c++) {
        vr_pair_set_copy_handoff(p, c);
        int64_t t0 = vr_now_ns();
        if (vr_pair_run(p, batch, sh ? batch / 2 : 0, 0, &in, 1, out, 8, NULL, &e)) {
          fprintf(stderr, "%s\n", e.msg);
          return 1;
        }
        if (r >= 0) t[sh][c][r] = (double)(vr_now_ns() - t0) / 1e6;
      }
    for (int c = 0; c < 2; c++) {
      qsort(t[sh][c], (size_t)runs, sizeof(double), cmp_d);
      printf("shadow=%s handoff=%s median_ms=%.4f p10_ms=%.4f p90_ms=%.4f\n", shname[sh],
             c ? "copy" : "zero-copy", t[sh][c][runs / 2], t[sh][c][runs / 10],
             t[sh][c][runs * 9 / 10]);
      vr_free(t[sh][c]);
    }
  }
  vr_pair_free(p);
  vr_aligned_free(in.data);
  vr_model_free(m);
  return 0;
}
