/*
 * The engine backend: instances run vr_session's of a shared vr_model.
 * Built only when the engine library provides sessions (VR_HAVE_ENGINE);
 * otherwise vr_rt_backend_engine() returns NULL and the runtime needs an
 * injected backend.
 */
#include <string.h>

#include "runtime/runtime.h"

#ifdef VR_HAVE_ENGINE
/* The config is checked against the ONNX graph so that the server's input
 * validation (which uses the config) is the truth. */
static int check_io(const char *what, const vr_tensor_info *c, int nc,
                    const vr_tensor_info *(*get)(const vr_model *, int),
                    int nm, const vr_model *m, vr_errbuf *err) {
  if (nc != nm)
    return vr_errf(err, VR_EINVAL, "config lists %d %s, model has %d", nc,
                   what, nm);
  for (int i = 0; i < nc; i++) {
    const vr_tensor_info *t = NULL;
    for (int j = 0; j < nm && !t; j++)
      if (!strcmp(get(m, j)->name, c[i].name)) t = get(m, j);
    if (!t)
      return vr_errf(err, VR_EINVAL, "config %s '%s' not in the model", what,
                     c[i].name);
    if (t->dtype != c[i].dtype || t->ndim != c[i].ndim)
      return vr_errf(err, VR_EINVAL, "%s '%s': config dtype/rank differ from"
                     " the model", what, c[i].name);
    for (int d = 1; d < t->ndim; d++)
      if (t->shape[d] > 0 && t->shape[d] != c[i].shape[d])
        return vr_errf(err, VR_ESHAPE, "%s '%s': config dim %d = %lld, model"
                       " has %lld", what, c[i].name, d,
                       (long long)c[i].shape[d], (long long)t->shape[d]);
  }
  return 0;
}

static int e_model_open(void *self, const vr_model_config *cfg, void **model,
                        vr_errbuf *err) {
  (void)self;
  vr_model *m = NULL;
  int rc = vr_model_load(cfg->model_path, &m, err);
  if (rc) return rc;
  rc = check_io("inputs", cfg->inputs, cfg->n_inputs, vr_model_input,
                vr_model_num_inputs(m), m, err);
  if (!rc)
    rc = check_io("outputs", cfg->outputs, cfg->n_outputs, vr_model_output,
                  vr_model_num_outputs(m), m, err);
  if (rc) {
    vr_model_free(m);
    return vr_errctx(err, rc, "%s", cfg->model_path);
  }
  *model = m;
  return 0;
}

static void e_model_close(void *self, void *model) {
  (void)self;
  vr_model_free(model);
}

static int e_session_open(void *self, void *model, vr_precision prec,
                          int threads, int max_batch, void **sess,
                          vr_errbuf *err) {
  (void)self;
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.precision = prec;
  o.threads = threads;
  o.max_batch = max_batch;
  return vr_session_create(model, &o, (vr_session **)sess, err);
}

static void e_session_close(void *self, void *sess) {
  (void)self;
  vr_session_free(sess);
}

static int e_run(void *self, void *sess, int batch, const vr_tensor *in,
                 int n_in, vr_tensor *out, int n_out, vr_errbuf *err) {
  (void)self;
  return vr_session_run(sess, batch, in, n_in, out, n_out, err);
}

static const vr_rt_backend k_engine = {e_model_open, e_model_close,
                                       e_session_open, e_session_close,
                                       e_run, NULL};

const vr_rt_backend *vr_rt_backend_engine(void) { return &k_engine; }
#else
const vr_rt_backend *vr_rt_backend_engine(void) { return NULL; }
#endif
