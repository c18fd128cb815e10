/*
 * vario register --store DB --repo DIR --app APP --model FILE.onnx
 *                [--name N] [--input X.npy --labels Y.npy |
 *                 --declared-accuracy PCT] [--calibration C.npy]
 *                [--threads N] [--max-batch N] [--precisions LIST]
 *                [--runs N] [--quiet]
 * vario register --store DB --list | --remove NAME
 *
 * Registers a model for an app: validates it, generates and profiles its
 * variants, copies it into the repository and records it in the store.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "control/fsutil.h"
#include "control/register.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: vario register --store DB --repo DIR --app APP --model FILE.onnx\n"
          "         [--name N] [--input X.npy --labels Y.npy |\n"
          "          --declared-accuracy PCT] [--calibration C.npy]\n"
          "         [--threads N] [--max-batch N] [--precisions fp32,bf16,int8]\n"
          "         [--runs N] [--quiet]\n"
          "       vario register --store DB --list\n"
          "       vario register --store DB --remove NAME\n"
          "  --store DB        metadata store: a SQLite file (created if missing)\n"
          "                    or redis://host[:port][/db] (shared by a cluster)\n"
          "  --repo DIR        model repository the model is copied into\n"
          "  --input, --labels validation set (.npy rows and integer labels);\n"
          "                    --val-inputs/--val-labels are deprecated aliases\n"
          "  --declared-accuracy PCT  top-1 accuracy in percent, (0, 100], when\n"
          "                    there is no validation set\n"
          "  --threads N       variants with 1..N threads (default: all cores)\n"
          "  --max-batch N     variants with max batch 1,2,4..N (default 64)\n"
          "  --precisions L    subset to generate (default: all this CPU runs)\n"
          "  --runs N          timed runs per batch size when profiling (default 20)\n");
}

static int parse_precisions(const char *s, unsigned *mask) {
  char buf[64];
  snprintf(buf, sizeof buf, "%s", s);
  *mask = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    vr_precision p;
    if (vr_store_prec_parse(t, &p) != 0) return -1;
    *mask |= 1u << p;
  }
  return *mask ? 0 : -1;
}

static int list_models(vr_store *s) {
  int wm = 24, wa = 12; /* columns as wide as the longest name */
  for (size_t i = 0; i < vr_store_num_models(s); i++) {
    const vr_model_rec *m = vr_store_model_at(s, i);
    if ((int)strlen(m->name) > wm) wm = (int)strlen(m->name);
    if ((int)strlen(m->app) > wa) wa = (int)strlen(m->app);
  }
  printf("%-*s %-*s %9s %8s  %s\n", wm, "model", wa, "app", "accuracy", "variants", "dir");
  for (size_t i = 0; i < vr_store_num_models(s); i++) {
    const vr_model_rec *m = vr_store_model_at(s, i);
    size_t n;
    vr_store_model_variants(s, m->name, &n);
    printf("%-*s %-*s %8.2f%% %8zu  %s\n", wm, m->name, wa, m->app, m->accuracy, n, m->dir);
  }
  return 0;
}

/* A store file this run creates, with the directories it creates for it:
 * a registration that fails leaves none of them behind, and nothing that
 * another process wrote meanwhile (two registrations into a fresh store
 * at once: the one that fails must not take the other's model along). */
typedef struct new_store {
  int created;             /* this run created the file (O_EXCL) */
  char dirs[8][1024];      /* directories that did not exist, outermost first */
  int ndirs;
} new_store;

static void note_new_store(const char *path, new_store *ns) {
  memset(ns, 0, sizeof *ns);
  if (vr_store_is_url(path) || !access(path, F_OK)) return;
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", path);
  for (char *p = dir + 1; (p = strchr(p, '/')); p++) {
    *p = 0;
    if (access(dir, F_OK) && ns->ndirs < 8) snprintf(ns->dirs[ns->ndirs++], 1024, "%s", dir);
    *p = '/';
  }
  char *slash = strrchr(dir, '/');
  if (slash && slash > dir) {
    *slash = 0;
    if (vr_mkdirs(dir, NULL)) return;
  }
  int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644); /* SQLite takes it empty */
  if (fd >= 0) {
    ns->created = 1;
    close(fd);
  }
}

/* vr_store_load_docs callback: there is a document. */
static int any_doc(void *ctx, const char *name, const char *body) {
  (void)name;
  (void)body;
  *(int *)ctx = 1;
  return 1;
}

static void undo_new_store(const char *path, const new_store *ns) {
  if (ns->created) {
    /* read afresh: another process may have written since this one opened */
    vr_store *s;
    int kept = 1, docs = 0;
    if (!vr_store_open_path(path, &s, NULL)) {
      vr_store_load_docs(s, "pipeline", any_doc, &docs, NULL);
      kept = vr_store_num_models(s) > 0 || docs;
      vr_store_close(s);
    }
    if (kept) return;
    static const char *const side[] = {"", "-journal", "-wal", "-shm"};
    char f[1100];
    for (int i = 0; i < 4; i++) {
      snprintf(f, sizeof f, "%s%s", path, side[i]);
      unlink(f);
    }
  }
  for (int i = ns->ndirs - 1; i >= 0; i--) rmdir(ns->dirs[i]); /* only if empty */
}

int vr_cmd_register(int argc, char **argv) {
  vr_register_req r;
  vr_register_req_init(&r);
  const char *store_path = NULL, *remove = NULL;
  int list = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int used = 1;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--list")) list = 1, used = 0;
    else if (!strcmp(a, "--quiet")) r.quiet = 1, used = 0;
    else if (!v) used = -1;
    else if (!strcmp(a, "--store")) store_path = v;
    else if (!strcmp(a, "--remove")) remove = v;
    else if (!strcmp(a, "--repo")) r.repo_dir = v;
    else if (!strcmp(a, "--app")) r.app = v;
    else if (!strcmp(a, "--model")) r.model_path = v;
    else if (!strcmp(a, "--name")) r.name = v;
    else if (!strcmp(a, "--input") || !strcmp(a, "--val-inputs")) r.val_inputs = v;
    else if (!strcmp(a, "--labels") || !strcmp(a, "--val-labels")) r.val_labels = v;
    else if (!strcmp(a, "--calibration")) r.calibration = v;
    else if (!strcmp(a, "--declared-accuracy")) {
      if (vr__cli_parse_num(v, 0, 100, &r.declared_accuracy)) used = -1;
    } else if (!strcmp(a, "--threads")) { if (vr__cli_parse_int(v, 1, 256, &r.gen.max_threads)) used = -1; }
    else if (!strcmp(a, "--max-batch")) { if (vr__cli_parse_int(v, 1, 64, &r.gen.max_batch)) used = -1; }
    else if (!strcmp(a, "--runs")) { if (vr__cli_parse_int(v, 1, 1000, &r.prof.runs)) used = -1; }
    else if (!strcmp(a, "--precisions")) { if (parse_precisions(v, &r.gen.precisions)) used = -1; }
    else used = -1;
    if (used < 0) {
      fprintf(stderr, "vario register: bad or incomplete option '%s'\n", a);
      usage(stderr);
      return 2;
    }
    i += used;
  }
  if (!store_path) {
    fprintf(stderr, "vario register: --store is required\n");
    usage(stderr);
    return 2;
  }
  vr_errbuf err = {0};
  vr_store *s;
  /* Reading or removing never creates a store (or its directories). */
  if ((list || remove) && !vr_store_is_url(store_path) && access(store_path, F_OK)) {
    fprintf(stderr, "vario register: no store at '%s'\n", store_path);
    return 1;
  }
  new_store ns;
  note_new_store(store_path, &ns);
  if (vr_store_open_path(store_path, &s, &err)) {
    fprintf(stderr, "vario register: %s\n", err.msg);
    undo_new_store(store_path, &ns);
    return 1;
  }
  int rc = 0;
  vr_register_result res;
  if (list) rc = list_models(s);
  else if (remove) rc = vr_unregister(s, remove, &err);
  else rc = vr_register(s, &r, &res, &err);
  if (rc) fprintf(stderr, "vario register: %s\n", err.msg);
  else if (!list && !remove) {
    printf("registered %s for app %s: %d variants in %.1f s; accuracy", res.name,
           r.app, res.n_variants, res.seconds);
    for (int p = 0; p < 3; p++)
      if (res.accuracy_pct[p] >= 0)
        printf(" %s %.2f%%", vr_store_prec_name((vr_precision)p), res.accuracy_pct[p]);
    printf("\n");
  }
  vr_store_close(s);
  if (rc) undo_new_store(store_path, &ns);
  return rc ? 1 : 0;
}
