/* The simulator's profile CSVs from outside data (../shared/data or a
 * user's own): Proteus's aggregate_profiled.csv (sim/proteus.c), and Loki's
 * simulator_runtimes.csv and branching.csv (sim/loki_data.c) over a fixed
 * two-task app, and Proteus's model_variants/<family> lists. The loaders
 * take paths, so the input is written to a scratch file. The first byte
 * picks the file (mod 4: Proteus CSV, Loki runtimes, Loki branching,
 * family list); the rest is its text. Every input is either loaded into profiles that validate or
 * rejected with a message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "policy/profile.h"
#include "sim/loki_data.h"
#include "sim/sim.h"

static char dir[64], app[128], csv[128], runtimes[128], famdir[128], fam[160],
    proteus[128];

static void put(const char *path, const void *text, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (n && fwrite(text, 1, n, f) != n) abort();
  fclose(f);
}

static void cleanup(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) { /* a leftover scratch directory is harmless */ }
}

static void setup(void) {
  if (dir[0]) return;
  snprintf(dir, sizeof dir, "/tmp/vr_fuzz_profcsv_%d", (int)getpid());
  char cmd[128];
  snprintf(cmd, sizeof cmd, "mkdir -p %s/fam", dir);
  if (system(cmd)) abort();
  atexit(cleanup);
  snprintf(app, sizeof app, "%s/app.json", dir);
  snprintf(csv, sizeof csv, "%s/input.csv", dir);
  snprintf(runtimes, sizeof runtimes, "%s/runtimes.csv", dir);
  snprintf(famdir, sizeof famdir, "%s/fam", dir);
  snprintf(fam, sizeof fam, "%s/resnet", famdir);
  snprintf(proteus, sizeof proteus, "%s/proteus.csv", dir);
  static const char a[] =
      "{\"appName\":\"f\",\"latencySLOInMSec\":200,\"root\":{\"task\":\"det\","
      "\"model_variants\":[\"det_s\",\"det_l\"],\"children\":[{\"task\":\"cls\","
      "\"label\":1,\"model_variants\":[\"cls_a\"],\"children\":[]}]}}";
  static const char r[] = ",Model,Accel,batchsize,avg_runtime,50th_pct,90th_pct\n"
                          "0,det_s,gpu,1,9,5,6\n1,det_l,gpu,1,30,18,20\n"
                          "2,cls_a,gpu,1,9,4,5\n";
  put(app, a, sizeof a - 1);
  static const char pc[] =
      "Model,Accel,Trials,batchsize,50th_pct,90th_pct,avg_latency(ms),Min,Max,Accuracy,"
      "Normalized_Accuracy\nr18,onnxruntime_cpu,100,1,10,12,10,9,20,70,90\n"
      "r50,onnxruntime_gpu_ampere,,1,5,,5,4,9,75,95\n";
  put(runtimes, r, sizeof r - 1);
  put(proteus, pc, sizeof pc - 1);
}

/* an error always says why */
static void check_err(int rc, const vr_errbuf *err) {
  if (rc && !err->msg[0]) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setup();
  if (size < 1) return 0;
  int sel = data[0] % 4;
  put(sel == 3 ? fam : csv, data + 1, size - 1);
  vr_errbuf err = {0};
  int rc;
  switch (sel) {
  case 0:
  case 3: { /* the profile CSV, or a family list (variant,accuracy lines) */
    vr_proteus_opts o = {0};
    o.csv_path = sel == 3 ? proteus : csv;
    o.variants_dir = sel == 3 ? famdir : NULL;
    o.cpu_threads = 4;
    o.cpu_core_price_s = 1e-5;
    o.gpu_price_s = 1e-3;
    o.load_ms_cpu = 1500;
    o.load_ms_gpu = 4000;
    o.mem_bytes = 1 << 20;
    vr_profile *ps = NULL;
    size_t n = 0;
    rc = vr_proteus_load(&o, &ps, &n, &err);
    if (!rc && n == 0) abort();
    for (size_t i = 0; !rc && i < n; i++) {
      vr_errbuf e2 = {0};
      if (vr_profile_validate(&ps[i], &e2)) abort();
    }
    vr_free(ps);
    break;
  }
  default: {
    vr_pipe_data d;
    int branching = sel == 2;
    rc = vr_loki_load_files(app, NULL, branching ? runtimes : csv, branching ? csv : NULL,
                            "gpu", &d, &err);
    if (!rc) vr_pipe_data_free(&d);
    break;
  }
  }
  check_err(rc, &err);
  return 0;
}
