/*
 * The engine backend: instances run vr_session's of a shared vr_model.
 * Tests may inject another backend (vr_rt_backend) instead.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/npy.h"
#include "base/proc.h"
#include "runtime/pair.h"
#include "runtime/runtime.h"

/* The model handle: the parsed model plus, when the config names one, the
 * calibration rows int8 sessions quantise with (the engine does not keep
 * them, and sessions are opened whenever an instance is added). */
typedef struct e_model {
  vr_model *m;
  int have_cal;
  vr_npy cal;
  vr_tensor cal_t;
} e_model;

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

/* Loads cfg->calibration_path into em and checks it against the model's
 * single input: FP32, same non-batch dims, at least one row. */
static int load_calibration(e_model *em, const vr_model_config *cfg,
                            vr_errbuf *err) {
  const char *p = cfg->calibration_path;
  if (vr_model_num_inputs(em->m) != 1)
    return vr_errf(err, VR_EINVAL, "calibration '%s': the model has %d inputs,"
                   " calibration needs exactly one", p,
                   vr_model_num_inputs(em->m));
  int rc = vr_npy_read(p, &em->cal, err);
  if (rc) return vr_errctx(err, rc, "calibration '%s'", p);
  em->have_cal = 1;
  const vr_tensor_info *ti = vr_model_input(em->m, 0);
  const vr_npy *c = &em->cal;
  if (c->dtype != VR_DT_F32 || ti->dtype != VR_DT_F32)
    return vr_errf(err, VR_EINVAL, "calibration '%s': int8 calibration needs"
                   " FP32 rows and an FP32 input", p);
  int ok = c->ndim == ti->ndim && c->ndim <= VR_MAX_DIMS && c->shape[0] >= 1;
  for (int d = 1; ok && d < c->ndim; d++)
    ok = ti->shape[d] <= 0 || c->shape[d] == ti->shape[d];
  if (!ok)
    return vr_errf(err, VR_ESHAPE, "calibration '%s': shape does not match"
                   " input '%s' (rank %d, need >= 1 row of the same non-batch"
                   " dims)", p, ti->name, ti->ndim);
  vr_tensor *t = &em->cal_t;
  memset(t, 0, sizeof *t);
  t->name = ti->name;
  t->dtype = VR_DT_F32;
  t->ndim = c->ndim;
  for (int d = 0; d < c->ndim; d++) t->shape[d] = c->shape[d];
  t->data = c->data;
  t->nbytes = c->nbytes;
  return 0;
}

static void e_model_close(void *self, void *model) {
  (void)self;
  e_model *em = model;
  if (!em) return;
  if (em->have_cal) vr_npy_free(&em->cal);
  if (em->m) vr_model_free(em->m);
  vr_free(em);
}

static int e_model_open(void *self, const vr_model_config *cfg, void **model,
                        vr_errbuf *err) {
  e_model *em = VR_NEW(e_model);
  if (!em) return vr_errf(err, VR_ENOMEM, "out of memory");
  int rc = vr_model_load(cfg->model_path, &em->m, err);
  if (rc) {
    vr_free(em);
    return rc;
  }
  rc = check_io("inputs", cfg->inputs, cfg->n_inputs, vr_model_input,
                vr_model_num_inputs(em->m), em->m, err);
  if (!rc)
    rc = check_io("outputs", cfg->outputs, cfg->n_outputs, vr_model_output,
                  vr_model_num_outputs(em->m), em->m, err);
  if (!rc && cfg->calibration_path[0]) rc = load_calibration(em, cfg, err);
  if (rc) {
    e_model_close(self, em);
    return vr_errctx(err, rc, "%s", cfg->model_path);
  }
  *model = em;
  return 0;
}

/* A session: a whole-model session, or an AsyFunc body (a vr_pair). */
typedef struct e_sess {
  vr_session *s;
  vr_pair *p;
  const e_model *em;
} e_sess;

static int open_plain(const e_model *em, vr_precision prec, int threads, int max_batch,
                      vr_session **out, vr_errbuf *err) {
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.precision = prec;
  o.threads = threads;
  o.max_batch = max_batch;
  /* Without a calibration set an int8 session fails with the engine's own
   * error ("int8 needs a calibration set"). */
  if (prec == VR_PREC_INT8 && em->have_cal) {
    o.calibration = &em->cal_t;
    o.n_calibration = 1;
  }
  return vr_session_create(em->m, &o, out, err);
}

static int e_session_open(void *self, void *model, vr_precision prec,
                          int threads, int max_batch, void **sess,
                          vr_errbuf *err) {
  (void)self;
  e_sess *es = VR_NEW(e_sess);
  if (!es) return vr_errf(err, VR_ENOMEM, "out of memory");
  es->em = model;
  int rc = open_plain(model, prec, threads, max_batch, &es->s, err);
  if (rc) {
    vr_free(es);
    return rc;
  }
  *sess = es;
  return 0;
}

/* Bodies run fp32: a pair's sessions are fp32 partial sessions (the
 * shadow's must compute bit for bit what the body's range does). */
static int e_body_open(void *self, void *model, vr_precision prec, int threads,
                       int max_batch, int pb, int pe, void **sess, vr_errbuf *err) {
  (void)self;
  if (prec != VR_PREC_FP32)
    return vr_errf(err, VR_EUNSUPPORTED, "AsyFunc bodies run fp32 (asked %s)",
                   vr_precision_name(prec));
  e_sess *es = VR_NEW(e_sess);
  if (!es) return vr_errf(err, VR_ENOMEM, "out of memory");
  es->em = model;
  int rc = vr_pair_create(es->em->m, pb, pe, threads, max_batch, &es->p, err);
  if (rc) {
    vr_free(es);
    return rc;
  }
  *sess = es;
  return 0;
}

static void e_session_close(void *self, void *sess) {
  (void)self;
  e_sess *es = sess;
  if (!es) return;
  vr_session_free(es->s);
  vr_pair_free(es->p);
  vr_free(es);
}

static int e_run(void *self, void *sess, int batch, const vr_tensor *in,
                 int n_in, vr_tensor *out, int n_out, vr_errbuf *err) {
  (void)self;
  e_sess *es = sess;
  if (es->p) return vr_pair_run(es->p, batch, 0, 0, in, n_in, out, n_out, NULL, err);
  return vr_session_run(es->s, batch, in, n_in, out, n_out, err);
}

static int e_shadow_attach(void *self, void *sess, int threads, int process,
                           double *load_ms, vr_errbuf *err) {
  (void)self;
  e_sess *es = sess;
  if (!es->p) return vr_errf(err, VR_EINVAL, "not a body");
  if (!process) return vr_pair_attach(es->p, threads, load_ms, err);
  /* the shadow process is `vario-shadow` beside this binary, or this
   * binary's `vario shadow` */
  char exe[4096];
  if (vr_proc_shadow_exe(exe, sizeof exe))
    return vr_errf(err, VR_EIO, "cannot find the shadow executable");
  /* the slice goes packed: the shadow neither parses the file nor
   * optimises the whole model again */
  return vr_pair_attach_process(es->p, exe, NULL, threads, 30 * VR_NS_PER_S, load_ms, err);
}

static void e_shadow_release(void *self, void *sess) {
  (void)self;
  e_sess *es = sess;
  if (es->p) vr_pair_release(es->p);
}

static int e_run_paired(void *self, void *sess, int batch, int bs, int64_t give_up_ns,
                        const vr_tensor *in, int n_in, vr_tensor *out, int n_out,
                        int *shadow_rows, vr_errbuf *err) {
  (void)self;
  e_sess *es = sess;
  if (!es->p) {
    if (shadow_rows) *shadow_rows = 0;
    return vr_session_run(es->s, batch, in, n_in, out, n_out, err);
  }
  return vr_pair_run(es->p, batch, bs, give_up_ns, in, n_in, out, n_out, shadow_rows, err);
}

static const vr_rt_backend k_engine = {e_model_open,    e_model_close,    e_session_open,
                                       e_session_close, e_run,            NULL,
                                       e_body_open,     e_shadow_attach,  e_shadow_release,
                                       e_run_paired};

const vr_rt_backend *vr_rt_backend_engine(void) { return &k_engine; }
