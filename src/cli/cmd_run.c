/* `vario run MODEL.onnx --input NAME=in.npy ... --output out.npy`:
 * runs a model once on .npy inputs and writes its outputs as .npy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/npy.h"
#include "cli/commands.h"
#include "vario/engine.h"

#define MAX_IO 32

static void usage(void) {
  fprintf(stderr,
          "usage: vario run MODEL.onnx --input NAME=in.npy ... --output out.npy\n"
          "                 [--output NAME=out.npy ...] [--threads N]\n"
          "                 [--precision fp32|bf16|int8] [--calibration cal.npy]\n"
          "An input without NAME= goes to the model's first input; a single\n"
          "--output without NAME= receives the first output.\n");
}

typedef struct io_arg {
  const char *name; /* NULL: positional */
  const char *path;
} io_arg;

static void split_arg(const char *s, io_arg *a) {
  const char *eq = strchr(s, '=');
  if (eq) {
    a->name = vr_strndup(s, (size_t)(eq - s));
    a->path = eq + 1;
  } else {
    a->name = NULL;
    a->path = s;
  }
}

static int write_outputs(vr_session *s, vr_tensor *outs, io_arg *oa, int no) {
  vr_errbuf err = {0};
  for (int k = 0; k < no; k++) {
    int idx = -1;
    for (int i = 0; i < vr_session_num_outputs(s); i++)
      if (oa[k].name ? !strcmp(oa[k].name, outs[i].name) : i == k) idx = i;
    if (idx < 0) {
      fprintf(stderr, "vario run: no output named '%s'\n", oa[k].name ? oa[k].name : "?");
      return 1;
    }
    vr_tensor *t = &outs[idx];
    if (vr_npy_write(oa[k].path, t->dtype, t->shape, t->ndim, t->data, &err)) {
      fprintf(stderr, "vario run: %s\n", err.msg);
      return 1;
    }
  }
  return 0;
}

int vr_cmd_run(int argc, char **argv) {
  const char *model = NULL, *cal = NULL, *prec = "fp32";
  io_arg ia[MAX_IO], oa[MAX_IO];
  int ni = 0, no = 0, threads = 1, rc = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "--input") && more && ni < MAX_IO) split_arg(argv[++i], &ia[ni++]);
    else if (!strcmp(a, "--output") && more && no < MAX_IO) split_arg(argv[++i], &oa[no++]);
    else if (!strcmp(a, "--threads") && more) {
      if (vr__cli_int("run", a, argv[++i], 1, 1024, &threads)) return 2;
    }
    else if (!strcmp(a, "--precision") && more) prec = argv[++i];
    else if (!strcmp(a, "--calibration") && more) cal = argv[++i];
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); return 0; }
    else if (a[0] != '-' && !model) model = a;
    else { fprintf(stderr, "vario run: unexpected argument '%s'\n", a); usage(); return 2; }
  }
  if (!model || ni == 0 || no == 0 || threads < 1) { usage(); return 2; }
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.threads = threads;
  if (vr_precision_parse(prec, &o.precision)) {
    fprintf(stderr, "vario run: unknown precision '%s'\n", prec);
    return 2;
  }
  vr_errbuf err = {0};
  vr_model *m = NULL;
  vr_session *s = NULL;
  vr_npy in[MAX_IO], calnp;
  vr_tensor tin[MAX_IO], tout[MAX_IO], tcal;
  memset(in, 0, sizeof in);
  memset(&calnp, 0, sizeof calnp);
  int loaded = 0;
  if (vr_model_load(model, &m, &err)) goto fail;
  int batch = 1;
  for (loaded = 0; loaded < ni; loaded++) {
    if (vr_npy_read(ia[loaded].path, &in[loaded], &err)) goto fail;
    const vr_tensor_info *info = vr_model_input(m, loaded < vr_model_num_inputs(m) ? loaded : 0);
    tin[loaded] = (vr_tensor){ia[loaded].name ? ia[loaded].name : info->name, in[loaded].dtype,
                              in[loaded].ndim, {0}, in[loaded].data, in[loaded].nbytes};
    memcpy(tin[loaded].shape, in[loaded].shape, sizeof(int64_t) * (size_t)in[loaded].ndim);
    if (info->ndim > 0 && info->shape[0] == -1 && in[loaded].ndim > 0) batch = (int)in[loaded].shape[0];
  }
  o.max_batch = batch;
  o.lazy_plans = 1; /* one run: compile only the batch size used */
  if (cal) {
    if (vr_npy_read(cal, &calnp, &err)) goto fail;
    tcal = (vr_tensor){vr_model_input(m, 0)->name, calnp.dtype, calnp.ndim, {0}, calnp.data, calnp.nbytes};
    memcpy(tcal.shape, calnp.shape, sizeof(int64_t) * (size_t)calnp.ndim);
    o.calibration = &tcal;
    o.n_calibration = 1;
  }
  if (vr_session_create(m, &o, &s, &err)) goto fail;
  if (vr_session_run(s, batch, tin, ni, tout, MAX_IO, &err)) goto fail;
  rc = write_outputs(s, tout, oa, no);
  goto out;
fail:
  fprintf(stderr, "vario run: %s\n", err.msg[0] ? err.msg : vr_strerror(err.code));
  rc = 1;
out:
  for (int i = 0; i < loaded && i < MAX_IO; i++) vr_npy_free(&in[i]);
  vr_npy_free(&calnp);
  for (int i = 0; i < ni; i++) vr_free((void *)ia[i].name);
  for (int i = 0; i < no; i++) vr_free((void *)oa[i].name);
  vr_session_free(s);
  vr_model_free(m);
  return rc;
}
