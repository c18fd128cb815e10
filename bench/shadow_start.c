/*
 * How long an AsyFunc shadow takes to be ready (issue 17), per way of
 * starting it: a thread in this process (vr_pair_attach: slices the model
 * the body holds), and per executable given a process
 * (vr_pair_attach_process: spawn, take the slice, build the session, ready
 * on the shared-memory channel) that takes the slice either packed by the
 * body (src=pack, what bodies do; the pack is made at the first attach,
 * in the warm-up round) or by loading the ONNX file and slicing it
 * (src=file). Attach and release alternate over the ways, R rounds;
 * prints the median and spread of the time to ready per way.
 *
 *   bench_shadow_start MODEL.onnx [--range B:E] [--batch B] [--runs R] [EXE ...]
 *
 * EXE: `vario` or `vario-shadow` (both are started as `EXE shadow ...`).
 * The default range is the one between the model's first and last
 * interior chain cut (vr_model_chain_cuts), as bench_pair_handoff uses.
 * Prints: way=<thread|EXE> src=<-|pack|file> median_ms=<x> p10_ms=<x> p90_ms=<x> runs=<n>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "interior_range.h"
#include "runtime/pair.h"
#include "vario/engine.h"

#define MAX_WAYS 9

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int usage(void) {
  fprintf(stderr, "usage: bench_shadow_start MODEL.onnx [--range B:E] [--batch B] [--runs R]"
                  " [EXE ...]\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *path = NULL, *exe[MAX_WAYS];
  int nexe = 0, batch = 8, runs = 20, pb = -1, pe = -1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--range") && i + 1 < argc) {
      if (sscanf(argv[++i], "%d:%d", &pb, &pe) != 2) return usage();
    } else if (argv[i][0] == '-') return usage();
    else if (!path) path = argv[i];
    else if (nexe < (MAX_WAYS - 1) / 2) exe[nexe++] = argv[i];
    else return usage();
  }
  if (!path || batch < 1 || runs < 1 || runs > 10000) return usage();
  vr_errbuf e = {0};
  vr_model *m;
  if (vr_model_load(path, &m, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    return 1;
  }
  int n = vr_model_num_nodes(m);
  if (pb < 0) vr_bench_interior_range(m, &pb, &pe);
  vr_pair *p;
  if (pb < 0 || pe <= pb || vr_pair_create(m, pb, pe, 1, batch, &p, &e)) {
    fprintf(stderr, "no splittable range: %s\n", e.msg);
    return 1;
  }
  printf("# %s: nodes %d, range [%d, %d), batch %d, %d rounds\n", path, n, pb, pe, batch, runs);
  int ways = 1 + 2 * nexe; /* thread, then per EXE: pack, file */
  double *t[MAX_WAYS];
  for (int w = 0; w < ways; w++) t[w] = vr_calloc((size_t)runs, sizeof(double));
  for (int r = -1; r < runs; r++) /* a warm-up round: page cache, first dlopen */
    for (int w = 0; w < ways; w++) {
      double ms = -1;
      const char *x = w ? exe[(w - 1) / 2] : "thread", *file = w % 2 ? NULL : path;
      int rc = w == 0 ? vr_pair_attach(p, 1, &ms, &e)
                      : vr_pair_attach_process(p, x, file, 1, 30000000000LL, &ms, &e);
      if (rc) {
        fprintf(stderr, "%s: %s\n", x, e.msg);
        return 1;
      }
      vr_pair_release(p);
      if (r >= 0) t[w][r] = ms;
    }
  for (int w = 0; w < ways; w++) {
    qsort(t[w], (size_t)runs, sizeof(double), cmp_d);
    printf("way=%s src=%s median_ms=%.2f p10_ms=%.2f p90_ms=%.2f runs=%d\n",
           w ? exe[(w - 1) / 2] : "thread", w == 0 ? "-" : w % 2 ? "pack" : "file", t[w][runs / 2],
           t[w][runs / 10], t[w][runs * 9 / 10], runs);
    vr_free(t[w]);
  }
  vr_pair_free(p);
  vr_model_free(m);
  return 0;
}
