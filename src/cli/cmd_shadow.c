/* `vario shadow --fd N --model-fd M` (or `--model M.onnx --range B:E`):
 * an AsyFunc shadow in its own process. A body (runtime/pair.c,
 * vr_pair_attach_process) starts it with the shared-memory channel's fd
 * inherited, and the slice it is to run packed in memfd M (vr_model_pack)
 * or, without a pack, the model file and the node range to keep; it
 * serves the body's boundary rows until the body closes the channel or
 * exits (runtime/shm_pair.h). `--pack-out FILE` writes the pack of
 * `--model`'s range instead (fuzz seeds, debugging). Not meant to be typed
 * by hand, but safe to: every argument is checked. Also the whole of
 * `vario-shadow` (cli/shadow/main.c). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "cli/commands.h"
#include "runtime/shm_pair.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: vario shadow --fd N (--model-fd M | --model MODEL.onnx --range B:E)\n"
          "                    [--threads T] [--max-batch B]\n"
          "       vario shadow --model MODEL.onnx --range B:E --pack-out FILE\n"
          "Serves a model slice as an AsyFunc shadow over the shared-memory channel\n"
          "behind fd N (created by its body): the slice packed in memfd M by the\n"
          "body, or nodes [B, E) of MODEL's optimised graph. --pack-out writes\n"
          "the pack of those nodes to FILE and exits. vario-shadow takes the same.\n");
}

static int num(const char *s, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

/* --pack-out: the pack a body would send for nodes [pb, pe) of path. */
static int write_pack(const char *path, int pb, int pe, const char *out, vr_errbuf *err) {
  vr_model *m = NULL, *slice = NULL;
  void *buf = NULL;
  size_t len = 0;
  int rc = vr_model_load(path, &m, err);
  if (!rc) rc = vr_model_slice(m, pb, pe, &slice, err);
  if (!rc) rc = vr_model_pack(slice, &buf, &len, err);
  if (!rc) {
    FILE *f = fopen(out, "wb");
    int ok = f && fwrite(buf, 1, len, f) == len;
    if (f && fclose(f)) ok = 0;
    if (!ok) rc = vr_errf(err, VR_EIO, "cannot write %s", out);
  }
  vr_free(buf);
  vr_model_free(slice);
  vr_model_free(m);
  return rc;
}

int vr_cmd_shadow(int argc, char **argv) {
  int fd = -1, model_fd = -1, pb = -1, pe = -1, threads = 1, max_batch = 1;
  const char *model = NULL, *pack_out = NULL;
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
    } else if (!strcmp(a, "--model-fd") && more) {
      bad = num(argv[++i], 0, INT_MAX, &model_fd);
    } else if (!strcmp(a, "--pack-out") && more) {
      pack_out = argv[++i];
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
  vr_errbuf err = {0};
  if (pack_out) {
    if (!model || pb < 0 || fd >= 0 || model_fd >= 0) {
      usage(stderr);
      return 2;
    }
    int rc = write_pack(model, pb, pe, pack_out, &err);
    if (rc) fprintf(stderr, "vario shadow: %s\n", err.msg);
    return rc ? 1 : 0;
  }
  if (fd < 0 || (model_fd < 0) == (!model || pb < 0) || (model_fd >= 0 && (model || pb >= 0))) {
    usage(stderr);
    return 2;
  }
  int rc = vr_shm_shadow_main(fd, model, model_fd, pb, pe, threads, max_batch, &err);
  if (rc) {
    fprintf(stderr, "vario shadow: %s\n", err.msg);
    return 1;
  }
  return 0;
}
