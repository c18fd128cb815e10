/* Helpers for the server integration tests: a temporary model repository,
 * an in-process server on an ephemeral loopback port, a blocking client. */
#ifndef VR_TEST_SRV_UTIL_H
#define VR_TEST_SRV_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/httpc.h"
#include "server/server.h"

/* Writes <repo>/<name>/{config.json,model.onnx (empty)} for the fake
 * backend: input "x" FP32 [-1, in_row], output "y" FP32 [-1, out_row]. */
static inline void srv_write_model(const char *repo, const char *name, int in_row,
                            int out_row, int max_batch, int delay_us) {
  char path[512];
  /* Checked returns: a truncated path would write somewhere else. */
  if (snprintf(path, sizeof path, "%s/%s", repo, name) >= (int)sizeof path)
    return;
  mkdir(path, 0755);
  if (snprintf(path, sizeof path, "%s/%s/model.onnx", repo, name) >=
      (int)sizeof path)
    return;
  FILE *f = fopen(path, "w");
  if (f) fclose(f);
  if (snprintf(path, sizeof path, "%s/%s/config.json", repo, name) >=
      (int)sizeof path)
    return;
  f = fopen(path, "w");
  if (!f) return;
  fprintf(f,
          "{\"name\":\"%s\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\","
          "\"shape\":[-1,%d]}],\"outputs\":[{\"name\":\"y\",\"datatype\":"
          "\"FP32\",\"shape\":[-1,%d]}],\"max_batch_size\":%d,\"instances\":1,"
          "\"threads\":1,\"precision\":\"fp32\",\"max_queue_delay_us\":%d}\n",
          name, in_row, out_row, max_batch, delay_us);
  fclose(f);
}

static inline void srv_write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

/* mkdtemp under the build dir (or /tmp). */
static inline char *srv_tmpdir(char *buf, size_t cap) {
  const char *base = getenv("VR_BINARY_DIR");
  snprintf(buf, cap, "%s/srvtest.XXXXXX", base ? base : "/tmp");
  return mkdtemp(buf);
}

static inline void srv_rmtree(const char *dir) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  int rc = system(cmd);
  (void)rc;
}

#endif
