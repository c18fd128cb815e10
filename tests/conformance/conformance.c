/*
 * ONNX conformance runner over Debian's libonnx-testdata.
 *
 *   conformance [DATA_DIR] [-v] [-k SUBSTRING]
 *
 * Walks DATA_DIR/{node,pytorch-converted,pytorch-operator,simple}/<case>/
 * (model.onnx + test_data_set_N/{input,output}_K.pb), runs each case and
 * classifies it:
 *   pass         every output matches (|a-b| <= 1e-4 + 1e-3 |b|; exact for
 *                integers and bools)
 *   fail         the model loaded but a run errored or an output differs
 *   unsupported  loading or session creation reported VR_EUNSUPPORTED (an
 *                op, attribute, dtype or dynamic shape the engine does not
 *                implement) or the model is malformed for the engine
 * Prints a per-op table (single-node cases; multi-node cases are grouped
 * per suite) and totals. Exits 1 if any case of an op in CLAIMED fails or is
 * unsupported, 0 otherwise; 77 (skip) when DATA_DIR is absent.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "engine/graph.h"
#include "engine/ir.h"
#include "engine/onnx.h"
#include "vario/engine.h"

/* Ops the engine claims: every case whose only op is one of these must
 * pass. Kept here (not derived from the registry) because the registry
 * also lists ops used only for folding, whose corner cases are not all
 * implemented. */
static const char *CLAIMED[] = {
    "Conv", "Gemm", "MatMul", "Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh",
    "HardSigmoid", "HardSwish", "Erf", "Add", "Sub", "Mul", "Div", "MaxPool",
    "AveragePool", "GlobalAveragePool", "BatchNormalization",
    "LayerNormalization", "Concat", "Split", "Softmax", "Flatten", "Reshape",
    "Transpose", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Pad",
    "ReduceMean", "LRN", "Gather", "Slice", "Shape", "Cast", "Sqrt", "Pow",
    "Expand", "Where", "Equal", "ConstantOfShape", "Range", "Exp", "Neg",
    "Abs", "Reciprocal", "Floor", "Ceil", "Tile", "GlobalMaxPool", "Elu",
    "And", "Or", "Xor", "ArgMax", "ArgMin", "Cos", "Sin", "Log", "Round", "Sign",
    "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Hardmax", "LogSoftmax",
    "Max", "Min", "Sum", "Mean", "PRelu", "ReduceL1", "ReduceL2", "ReduceMax",
    "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare", "Size", "ConvTranspose",
    NULL};

/* Cases of claimed ops that test things outside the engine's contract:
 * reason printed with -v. Each entry is a case-name substring. */
static const char *EXCUSED[][2] = {
    {"_training_mode", "training-mode BatchNormalization (inference engine)"},
    {"test_training_dropout", "training-mode Dropout (inference engine)"},
    {"FLOAT16", "float16 tensors are not supported"},
    {"BFLOAT16", "bfloat16 tensors at the graph boundary"},
    {"_STRING", "string tensors"},
    {"test_maxpool_2d_uint8", "integer pooling"},
    {"test_maxpool_with_argmax", "the MaxPool Indices output"},
    {NULL, NULL},
};

enum { R_PASS, R_FAIL, R_UNSUP, R_N };

typedef struct row {
  char key[96];
  int n[R_N];
  int claimed;
} row;

static row rows[2048];
static int nrows, verbose;
static const char *filter;

static int is_claimed(const char *op) {
  for (int i = 0; CLAIMED[i]; i++)
    if (!strcmp(CLAIMED[i], op)) return 1;
  return 0;
}

static row *row_for(const char *key, int claimed) {
  for (int i = 0; i < nrows; i++)
    if (!strcmp(rows[i].key, key)) return &rows[i];
  if (nrows == 2048) return &rows[2047];
  row *r = &rows[nrows++];
  snprintf(r->key, sizeof r->key, "%s", key);
  r->claimed = claimed;
  return r;
}

static int read_pb(const char *path, vr_tview *t, vr_errbuf *e) {
  void *buf;
  size_t len;
  int rc = vr_onnx_read_file(path, &buf, &len, e);
  if (rc) return rc;
  rc = vr_onnx_parse_tensor(buf, len, t, NULL, e);
  vr_free(buf);
  return rc;
}

static int compare(const vr_tensor *o, const vr_tview *want, char *why, size_t wn) {
  if (o->dtype != want->dt) {
    snprintf(why, wn, "dtype %s, expected %s", vr_dtype_name(o->dtype), vr_dtype_name(want->dt));
    return 0;
  }
  int ok = o->ndim == want->ndim;
  for (int d = 0; ok && d < o->ndim; d++) ok = o->shape[d] == want->shape[d];
  if (!ok) {
    snprintf(why, wn, "shape differs (rank %d vs %d)", o->ndim, want->ndim);
    return 0;
  }
  int64_t n = vr_tview_numel(want);
  vr_tview got = {o->dtype, o->ndim, {0}, o->data};
  for (int64_t i = 0; i < n; i++) {
    if (want->dt == VR_DT_F32 || want->dt == VR_DT_F64) {
      double a = vr_tview_getf(&got, i), b = vr_tview_getf(want, i);
      if (isnan(b) && isnan(a)) continue;
      if (isinf(b) && a == b) continue;
      if (!(fabs(a - b) <= 1e-4 + 1e-3 * fabs(b))) {
        snprintf(why, wn, "element %lld: %g vs %g", (long long)i, a, b);
        return 0;
      }
    } else if (vr_tview_geti(&got, i) != vr_tview_geti(want, i)) {
      snprintf(why, wn, "element %lld: %lld vs %lld", (long long)i,
               (long long)vr_tview_geti(&got, i), (long long)vr_tview_geti(want, i));
      return 0;
    }
  }
  return 1;
}

/* Runs one test_data_set directory. With freeze > 0 the model is loaded
 * from buf with inputs frozen into constants (1: all but the first, 2:
 * all) using this set's values. 1 = pass, 0 = fail, -1 = unsupported. */
static int run_set(const vr_model *m0, const void *buf, size_t len, int freeze,
                   const char *dir, char *why, size_t wn) {
  const vr_model *m = m0;
  vr_model *own = NULL;
  vr_tview in[32] = {{0}}, out[32] = {{0}};
  vr_tensor tin[32], tout[32];
  char p[2400];
  int nin = 0, nout = 0, res = 0;
  vr_errbuf e = {0};
  vr_session *s = NULL;
  struct stat sb;
  for (; nin < 32; nin++) {
    snprintf(p, sizeof p, "%s/input_%d.pb", dir, nin);
    if (stat(p, &sb)) break;
    if (read_pb(p, &in[nin], &e)) { snprintf(why, wn, "input: %s", e.msg); res = -1; goto out; }
  }
  for (; nout < 32; nout++) {
    snprintf(p, sizeof p, "%s/output_%d.pb", dir, nout);
    if (stat(p, &sb)) break;
    if (read_pb(p, &out[nout], &e)) { snprintf(why, wn, "output: %s", e.msg); res = -1; goto out; }
  }
  if (freeze) {
    vr_tview fr[32];
    for (int i = 0; i < nin; i++) {
      fr[i] = in[i];
      if (i == 0 && freeze == 1) fr[i].dt = VR_DT_UNDEFINED;
    }
    int rc = vr_model_load_frozen(buf, len, NULL, fr, nin, &own, &e);
    if (rc) {
      snprintf(why, wn, "load (inputs frozen): %s", e.msg);
      res = rc == VR_EUNSUPPORTED ? -1 : 0;
      goto out;
    }
    m = own;
    int k = 0;
    for (int i = 0; i < nin; i++)
      if (i == 0 && freeze == 1) in[k++] = in[i];
      else vr_aligned_free(in[i].data);
    for (int i = k; i < 32; i++) memset(&in[i], 0, sizeof in[i]);
    nin = k;
  }
  if (nin != vr_model_num_inputs(m)) {
    snprintf(why, wn, "%d input files for %d model inputs", nin, vr_model_num_inputs(m));
    res = -1;
    goto out;
  }
  vr_session_opts o;
  vr_session_opts_init(&o);
  int batch = 1;
  for (int i = 0; i < nin; i++) {
    const vr_tensor_info *ti = vr_model_input(m, i);
    if (ti->ndim > 0 && ti->shape[0] == -1 && in[i].ndim > 0) batch = (int)in[i].shape[0];
    tin[i] = (vr_tensor){ti->name, in[i].dt, in[i].ndim, {0}, in[i].data,
                         (size_t)vr_tview_numel(&in[i]) * vr_dtype_size(in[i].dt)};
    memcpy(tin[i].shape, in[i].shape, sizeof in[i].shape);
  }
  o.max_batch = batch > 0 ? batch : 1;
  int rc = vr_session_create(m, &o, &s, &e);
  if (rc) {
    snprintf(why, wn, "session: %s", e.msg);
    res = rc == VR_EUNSUPPORTED ? -1 : 0;
    goto out;
  }
  if ((rc = vr_session_run(s, o.max_batch, tin, nin, tout, 32, &e))) {
    snprintf(why, wn, "run: %s", e.msg);
    goto out;
  }
  if (vr_session_num_outputs(s) != nout) {
    snprintf(why, wn, "%d outputs, expected %d", vr_session_num_outputs(s), nout);
    goto out;
  }
  res = 1;
  for (int i = 0; i < nout && res == 1; i++) res = compare(&tout[i], &out[i], why, wn);
out:
  vr_session_free(s);
  vr_model_free(own);
  for (int i = 0; i < 32; i++) {
    vr_aligned_free(in[i].data);
    vr_aligned_free(out[i].data);
  }
  return res;
}

/* The op key of a case: its single op, or "<suite>: multi-op". */
static void case_key(const char *suite, const void *buf, size_t len, char *key, size_t kn,
                     int *claimed) {
  vr_graph g;
  vr_graph_init(&g);
  vr_errbuf e = {0};
  int rc = vr_onnx_parse_model(buf, len, NULL, &g, &e);
  *claimed = 0;
  if (rc && rc != VR_EINVAL && rc != VR_ENOENT) {
    snprintf(key, kn, "(%s: not parsed)", suite);
  } else if (g.nnodes == 1) {
    snprintf(key, kn, "%s", g.nodes[0].op);
    *claimed = is_claimed(g.nodes[0].op);
  } else {
    snprintf(key, kn, "(%s: multi-op models)", suite);
  }
  vr_graph_free(&g);
}

static int run_case(const char *suite, const char *dir, const char *name) {
  char p[1400], why[600] = "", key[96];
  snprintf(p, sizeof p, "%s/model.onnx", dir);
  void *buf;
  size_t len;
  vr_errbuf e = {0};
  if (vr_onnx_read_file(p, &buf, &len, &e)) return 0;
  int claimed;
  case_key(suite, buf, len, key, sizeof key, &claimed);
  for (int i = 0; EXCUSED[i][0]; i++)
    if (strstr(name, EXCUSED[i][0])) claimed = 0;
  vr_model *m = NULL;
  int rc = vr_model_load_buffer(buf, len, dir, &m, &e), res, freeze = 0;
  /* Shape-like tensors passed as inputs: retry with them frozen. */
  if (rc == VR_EUNSUPPORTED && strstr(e.msg, "must be a constant")) {
    freeze = 1;
    rc = 0;
  }
  if (rc) {
    snprintf(why, sizeof why, "load: %s", e.msg);
    res = -1;
  } else {
    res = 1;
    DIR *d = opendir(dir);
    struct dirent *de;
    int sets = 0;
    while (d && (de = readdir(d)) && res == 1) {
      if (strncmp(de->d_name, "test_data_set_", 14)) continue;
      char sd[1700];
      snprintf(sd, sizeof sd, "%s/%s", dir, de->d_name);
      res = run_set(m, buf, len, freeze, sd, why, sizeof why);
      while (res == -1 && freeze < 2 &&
             (strstr(why, "must be a constant") || strstr(why, "no kernel"))) {
        freeze++;
        res = run_set(m, buf, len, freeze, sd, why, sizeof why);
      }
      sets++;
    }
    if (d) closedir(d);
    if (!sets) {
      res = -1;
      snprintf(why, sizeof why, "no test data");
    }
    vr_model_free(m);
  }
  vr_free(buf);
  int kind = res == 1 ? R_PASS : res == 0 ? R_FAIL : R_UNSUP;
  if (kind == R_PASS) why[0] = 0; /* drop messages of retried attempts */
  row *r = row_for(key, claimed);
  r->n[kind]++;
  if (verbose || (claimed && kind != R_PASS))
    printf("%-6s %-12s %-50s %s\n", kind == R_PASS ? "pass" : kind == R_FAIL ? "FAIL" : "unsup",
           suite, name, why);
  return claimed && kind != R_PASS;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_suite(const char *root, const char *suite, int *bad) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/%s", root, suite);
  DIR *d = opendir(dir);
  if (!d) return 0;
  char *names[4096];
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) && n < 4096)
    if (de->d_name[0] != '.') names[n++] = strdup(de->d_name);
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, cmp_name);
  for (int i = 0; i < n; i++) {
    if (!filter || strstr(names[i], filter)) {
      char cd[1300];
      snprintf(cd, sizeof cd, "%s/%s", dir, names[i]);
      *bad += run_case(suite, cd, names[i]);
    }
    free(names[i]);
  }
  return n;
}

static int cmp_row(const void *a, const void *b) {
  const row *x = a, *y = b;
  return strcmp(x->key, y->key);
}

int main(int argc, char **argv) {
  const char *root = "/usr/share/libonnx-testdata/data";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-v")) verbose = 1;
    else if (!strcmp(argv[i], "-k") && i + 1 < argc) filter = argv[++i];
    else root = argv[i];
  }
  struct stat sb;
  if (stat(root, &sb) || !S_ISDIR(sb.st_mode)) {
    printf("SKIP: ONNX test data not found at %s (apt-get install libonnx-testdata)\n", root);
    return 77;
  }
  static const char *suites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
  int bad = 0;
  for (int i = 0; i < 4; i++) run_suite(root, suites[i], &bad);
  qsort(rows, (size_t)nrows, sizeof *rows, cmp_row);
  int tot[R_N] = {0};
  printf("\n%-40s %7s %6s %6s %6s\n", "op", "claimed", "pass", "fail", "unsup");
  for (int i = 0; i < nrows; i++) {
    row *r = &rows[i];
    printf("%-40s %7s %6d %6d %6d\n", r->key, r->claimed ? "yes" : "", r->n[R_PASS],
           r->n[R_FAIL], r->n[R_UNSUP]);
    for (int k = 0; k < R_N; k++) tot[k] += r->n[k];
  }
  printf("%-40s %7s %6d %6d %6d\n", "TOTAL", "", tot[R_PASS], tot[R_FAIL], tot[R_UNSUP]);
  printf("claimed-op cases not passing: %d\n", bad);
  return bad ? 1 : 0;
}
