/* `vario shadow --fd N --model M.onnx --range B:E`: an AsyFunc shadow in
 * its own process. A body (runtime/pair.c, vr_pair_attach_process) starts
 * it with the shared-memory channel's fd inherited; it loads only nodes
 * [B, E) of the model and serves the body's boundary rows until the body
 * closes the channel or exits (runtime/shm_pair.h). Not meant to be typed
 * by hand, but safe to: every argument is checked. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cli/commands.h"
#include "runtime/shm_pair.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: vario shadow --fd N --model MODEL.onnx --range B:E\n"
          "                    [--threads T] [--max-batch B]\n"
          "Serves nodes [B, E) of MODEL's optimised graph as an AsyFunc shadow\n"
          "over the shared-memory channel behind fd N (created by its body).\n");
}

static int num(const char *s, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

int vr_cmd_shadow(int argc, char **argv) {
  int fd = -1, pb = -1, pe = -1, threads = 1, max_batch = 1;
  const char *model = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc, bad = 0;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--fd") && more) {
      bad = num(argv[++i], 0, INT_MAX, &fd);
    } else if (!strcmp(a, "--model") && more) {
      model = argv[++i];
    } else if (!strcmp(a, "--range") && more) {
      const char *r = argv[++i], *colon = strchr(r, ':');
      char b[32];
      bad = !colon || (size_t)(colon - r) >= sizeof b;
      if (!bad) {
        memcpy(b, r, (size_t)(colon - r));
        b[colon - r] = 0;
        bad = num(b, 0, INT_MAX, &pb) || num(colon + 1, 1, INT_MAX, &pe) || pe <= pb;
      }
    } else if (!strcmp(a, "--threads") && more) {
      bad = num(argv[++i], 1, 256, &threads);
    } else if (!strcmp(a, "--max-batch") && more) {
      bad = num(argv[++i], 1, 4096, &max_batch);
    } else {
      bad = 1;
    }
    if (bad) {
      fprintf(stderr, "vario shadow: bad argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (fd < 0 || !model || pb < 0) {
    usage(stderr);
    return 2;
  }
  vr_errbuf err = {0};
  int rc = vr_shm_shadow_main(fd, model, pb, pe, threads, max_batch, &err);
  if (rc) {
    fprintf(stderr, "vario shadow: %s\n", err.msg);
    return 1;
  }
  return 0;
}
