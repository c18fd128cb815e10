/* `vario perf MODEL.onnx --blocks`: AsyFunc's Extractor + Profiler. Splits
 * the model into layer blocks, prints their ⟨c, b, l, p, d⟩ tuples,
 * sensitivity, load time and memory, and measures what a shadow that LLS
 * would provision loads, beside the whole model's load. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "control/blocks.h"
#include "control/control.h"
#include "control/store.h"

static void usage(void) {
  fprintf(stderr,
          "usage: vario perf MODEL.onnx --blocks [--name NAME] [--cmax C] [--bmax B]\n"
          "                  [--runs R] [--max-blocks K] [--json] [--output FILE]\n"
          "                  [--store DB]\n"
          "Profiles layer blocks on 1..C cores and batch 1..B (default 2, 4).\n"
          "--output (alias --out) writes the block profile JSON (docs/API.md, \"AsyFunc block\n"
          "profile\") that `vario asyfunc` reads; --store puts it in the metadata\n"
          "store as the block profile of registered model NAME, where a server\n"
          "with --policy asyfunc finds it. The last line is\n"
          "model=NAME shadow_load_ms=X full_load_ms=Y: the load of the blocks LLS\n"
          "picks for one idle 1-core body, against loading the whole model.\n");
}

static void print_table(const vr_af_model *af) {
  printf("model %s: %d blocks, body load %.1f ms, body memory %.1f MiB\n", af->name,
         af->nblocks, af->load_ms, (double)af->mem_bytes / 1048576.0);
  printf("%-5s %-11s %10s %10s %10s %8s %9s %9s  lat ms [c][b=1..%d]\n", "block", "nodes",
         "param KiB", "out B/smp", "mem KiB", "sens", "load ms", "", af->bmax);
  for (int i = 0; i < af->nblocks; i++) {
    const vr_af_block *b = &af->blk[i];
    printf("%-5d [%4d,%4d) %10.1f %10lld %10.1f %8.2f %9.2f %9s ", i, b->node_begin, b->node_end,
           (double)b->param_bytes / 1024.0, (long long)b->out_bytes,
           (double)b->mem_bytes / 1024.0, b->sensitivity, b->load_ms, "");
    for (int c = 0; c < af->cmax; c++) {
      printf(" c%d:", c + 1);
      for (int k = 0; k < af->bmax; k++) printf(" %.3f", b->lat_ms[c][k]);
    }
    printf("\n");
  }
}

int vr__cmd_perf_blocks(int argc, char **argv) {
  const char *model = NULL, *name = NULL, *out = NULL, *store = NULL;
  vr_blocks_opts o = {0};
  int json = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "--blocks")) continue;
    else if (!strcmp(a, "--name") && more) name = argv[++i];
    else if ((!strcmp(a, "--output") || !strcmp(a, "--out")) && more) out = argv[++i];
    else if (!strcmp(a, "--store") && more) store = argv[++i];
    else if (!strcmp(a, "--cmax") && more) {
      if (vr__cli_int("perf", a, argv[++i], 0, VR_AF_MAXC, &o.cmax)) return 2;
    } else if (!strcmp(a, "--bmax") && more) {
      if (vr__cli_int("perf", a, argv[++i], 0, VR_AF_MAXB, &o.bmax)) return 2;
    } else if (!strcmp(a, "--runs") && more) {
      if (vr__cli_int("perf", a, argv[++i], 0, 100000, &o.runs)) return 2;
    } else if (!strcmp(a, "--max-blocks") && more) {
      if (vr__cli_int("perf", a, argv[++i], 0, 100000, &o.max_blocks)) return 2;
    }
    else if (!strcmp(a, "--json")) json = 1;
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); return 0; }
    else if (a[0] != '-' && !model) model = a;
    else { fprintf(stderr, "vario perf: unexpected argument '%s'\n", a); usage(); return 2; }
  }
  if (!model || o.cmax < 0 || o.cmax > VR_AF_MAXC || o.bmax < 0 || o.bmax > VR_AF_MAXB ||
      o.runs < 0 || o.max_blocks < 0) {
    usage();
    return 2;
  }
  if (!name) name = model;
  vr_af_model af;
  vr_errbuf err = {0};
  if (vr_blocks_profile(model, name, &o, &af, &err)) {
    fprintf(stderr, "vario perf: %s\n", err.msg);
    return 1;
  }
  json_t *j = vr_af_model_to_json(&af);
  if (out && (!j || json_dump_file(j, out, JSON_INDENT(1)))) {
    fprintf(stderr, "vario perf: cannot write %s\n", out);
    json_decref(j);
    return 1;
  }
  if (store && j) {
    vr_store *st = NULL;
    char *body = json_dumps(j, JSON_COMPACT);
    int rc = body ? vr_store_open_path(store, &st, &err) : vr_errf(&err, VR_ENOMEM, "out of memory");
    if (!rc) rc = vr_store_put_doc(st, VR_AF_DOC_KIND, name, body, &err);
    vr_store_close(st);
    free(body);
    if (rc) {
      fprintf(stderr, "vario perf: store %s: %s\n", store, err.msg);
      json_decref(j);
      return 1;
    }
  }
  if (json) {
    char *s = json_dumps(j, JSON_COMPACT);
    if (s) printf("%s\n", s);
    free(s);
  } else {
    print_table(&af);
  }
  json_decref(j);
  /* The shadow LLS would provision for one idle, unpaired 1-core body with
   * free cores on its node, at the queue threshold. */
  vr_af_scale_cfg cfg;
  vr_af_scale_cfg_init(&cfg, vr_af_default_slo(&af));
  vr_af_body body = {1, 0, af.cmax, 0};
  vr_af_lls_out lo;
  vr_af_lls(&af, &cfg, cfg.gamma, &body, 1, &lo);
  if (!lo.n) {
    printf("model=%s shadow_load_ms=none full_load_ms=%.2f\n", name, af.load_ms);
    return 0;
  }
  vr_model *m = NULL;
  double sl = -1;
  if (!vr_model_load(model, &m, &err))
    sl = vr_blocks_shadow_load_ms(m, &af, lo.pair[0].mask, af.bmax, 3, &err);
  vr_model_free(m);
  if (sl < 0) {
    fprintf(stderr, "vario perf: shadow load: %s\n", err.msg);
    return 1;
  }
  if (!json) {
    printf("shadow blocks:");
    for (int i = 0; i < af.nblocks; i++)
      if (lo.pair[0].mask >> i & 1u) printf(" %d", i);
    printf("  (%d core, b=%d split %d+%d, %.1f MiB)\n", lo.pair[0].cs, lo.pair[0].b,
           lo.pair[0].bb, lo.pair[0].bs,
           (double)vr_af_mask_mem(&af, lo.pair[0].mask) / 1048576.0);
  }
  printf("model=%s shadow_load_ms=%.2f full_load_ms=%.2f\n", name, sl, af.load_ms);
  return 0;
}
