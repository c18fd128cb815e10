/* Offline jobs' records (control/jobs_disk.c): job-<id>.json in the
 * server's jobs directory, read back when the server starts. Parsed into
 * bounded fields — an id and a batch in range, a known state (running and
 * paused read as queued), fp32 or bf16, an output named as a file out-*.npy
 * of the jobs directory (joined to it) — or refused. What parses must
 * survive a write and a re-read unchanged. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control/jobs_int.h"

static const char k_dir[] = "/srv/repo/.jobs";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *m = malloc(size ? size : 1); /* exact size: ASan sees overreads */
  if (!m) return 0;
  memcpy(m, data, size);
  vr__job a, b;
  vr_errbuf err = {0};
  if (vr__job_rec_parse(m, size, k_dir, &a, &err) == 0) {
    const char *f = a.info.output + sizeof k_dir;
    if (a.info.id < 1 || a.info.id > VR__JOB_MAX_ID || a.max_batch < 1 ||
        a.max_batch > VR__JOB_MAX_BATCH || a.info.rows < 1 ||
        (a.info.state != VR_JOB_QUEUED && a.info.state != VR_JOB_DONE &&
         a.info.state != VR_JOB_FAILED) ||
        (a.prec != VR_PREC_FP32 && a.prec != VR_PREC_BF16) ||
        strncmp(a.info.output, k_dir, sizeof k_dir - 1) || a.info.output[sizeof k_dir - 1] != '/' ||
        strchr(f, '/') || !(a.info.run_s >= 0) || !(a.info.paused_s >= 0))
      __builtin_trap();
    char *t = vr__job_rec_json(&a, k_dir);
    if (!t || vr__job_rec_parse(t, strlen(t), k_dir, &b, &err) || a.info.id != b.info.id ||
        a.info.state != b.info.state || a.info.rows != b.info.rows ||
        a.max_batch != b.max_batch || a.prec != b.prec || strcmp(a.input, b.input) ||
        strcmp(a.info.output, b.info.output) || strcmp(a.info.variant, b.info.variant) ||
        strcmp(a.dir, b.dir) || strcmp(a.info.error, b.info.error))
      __builtin_trap();
    free(t);
  }
  free(m);
  return 0;
}
