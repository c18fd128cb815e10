/* Body/shadow pairs (see pair.h). */
#include "runtime/pair.h"

#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"

typedef struct shadow {
  vr_model *slice;
  vr_session *s;
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int job, done, quit, rows, rc;
  vr_tensor in, out;
  vr_errbuf err;
} shadow;

struct vr_pair {
  const vr_model *m;
  int pb, pe, n, max_batch;
  vr_session *pre, *par, *post; /* pre/post NULL when the range starts/ends the graph */
  char *merge;
  size_t merge_cap;
  pthread_mutex_t run_mu; /* held by a run, and by attach/release to swap sh */
  shadow *sh;
};

static void *shadow_main(void *arg) {
  shadow *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->job && !s->quit) pthread_cond_wait(&s->cv, &s->mu);
    if (s->quit) break;
    s->job = 0;
    vr_tensor in = s->in;
    int rows = s->rows;
    pthread_mutex_unlock(&s->mu);
    vr_errbuf err = {0};
    vr_tensor out;
    int rc = vr_session_run(s->s, rows, &in, 1, &out, 1, &err);
    pthread_mutex_lock(&s->mu);
    s->rc = rc;
    s->out = out;
    s->err = err;
    s->done = 1;
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static void shadow_free(shadow *s) {
  if (!s) return;
  if (s->th) {
    pthread_mutex_lock(&s->mu);
    s->quit = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
  }
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  vr_session_free(s->s);
  vr_model_free(s->slice);
  vr_free(s);
}

static int open_range(const vr_model *m, int b, int e, int threads, int max_batch,
                      vr_session **out, vr_errbuf *err) {
  *out = NULL;
  if (b == e) return 0;
  vr_session_opts o;
  vr_session_opts_init(&o);
  o.threads = threads;
  o.max_batch = max_batch;
  o.node_begin = b;
  o.node_end = e;
  return vr_session_create(m, &o, out, err);
}

int vr_pair_create(const vr_model *m, int pb, int pe, int body_threads, int max_batch,
                   vr_pair **out, vr_errbuf *err) {
  *out = NULL;
  int n = vr_model_num_nodes(m);
  if (pb < 0 || pe > n || pb >= pe)
    return vr_errf(err, VR_ERANGE, "parallel range [%d, %d) outside [0, %d)", pb, pe, n);
  char *cut = vr_calloc((size_t)n + 1, 1);
  if (!cut || vr_model_chain_cuts(m, cut)) {
    vr_free(cut);
    return vr_errf(err, VR_ENOMEM, "out of memory");
  }
  int ok = (pb == 0 || cut[pb]) && (pe == n || cut[pe]);
  vr_free(cut);
  if (!ok)
    return vr_errf(err, VR_EINVAL, "parallel range [%d, %d) must start and end at chain cuts",
                   pb, pe);
  vr_pair *p = VR_NEW(vr_pair);
  if (!p) return vr_errf(err, VR_ENOMEM, "out of memory");
  *p = (vr_pair){m, pb, pe, n, max_batch, NULL, NULL, NULL, NULL, 0, PTHREAD_MUTEX_INITIALIZER,
                 NULL};
  int rc = open_range(m, 0, pb, body_threads, max_batch, &p->pre, err);
  if (!rc) rc = open_range(m, pb, pe, body_threads, max_batch, &p->par, err);
  if (!rc) rc = open_range(m, pe, n, body_threads, max_batch, &p->post, err);
  if (!rc && (vr_session_num_inputs(p->par) != 1 || vr_session_num_outputs(p->par) != 1))
    rc = vr_errf(err, VR_EINVAL, "parallel range must have one input and one output");
  if (rc) {
    vr_pair_free(p);
    return rc;
  }
  *out = p;
  return 0;
}

void vr_pair_free(vr_pair *p) {
  if (!p) return;
  shadow_free(p->sh);
  vr_session_free(p->pre);
  vr_session_free(p->par);
  vr_session_free(p->post);
  vr_free(p->merge);
  pthread_mutex_destroy(&p->run_mu);
  vr_free(p);
}

int vr_pair_attach(vr_pair *p, int threads, double *load_ms, vr_errbuf *err) {
  int64_t t0 = vr_now_ns();
  shadow *s = VR_NEW(shadow);
  if (!s) return vr_errf(err, VR_ENOMEM, "out of memory");
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  int rc = vr_model_slice(p->m, p->pb, p->pe, &s->slice, err);
  if (!rc) rc = open_range(s->slice, 0, vr_model_num_nodes(s->slice), threads, p->max_batch,
                           &s->s, err);
  if (!rc && pthread_create(&s->th, NULL, shadow_main, s))
    rc = vr_errf(err, VR_ENOMEM, "cannot start the shadow's thread");
  if (rc) {
    shadow_free(s);
    return rc;
  }
  if (load_ms) *load_ms = (double)(vr_now_ns() - t0) / 1e6;
  pthread_mutex_lock(&p->run_mu);
  shadow *old = p->sh;
  p->sh = s;
  pthread_mutex_unlock(&p->run_mu);
  shadow_free(old);
  return 0;
}

void vr_pair_release(vr_pair *p) {
  pthread_mutex_lock(&p->run_mu); /* a paired run in flight finishes first */
  shadow *s = p->sh;
  p->sh = NULL;
  pthread_mutex_unlock(&p->run_mu);
  shadow_free(s);
}

int vr_pair_has_shadow(vr_pair *p) {
  pthread_mutex_lock(&p->run_mu);
  int h = p->sh != NULL;
  pthread_mutex_unlock(&p->run_mu);
  return h;
}

int64_t vr_pair_shadow_bytes(vr_pair *p) {
  pthread_mutex_lock(&p->run_mu);
  int64_t b = p->sh ? vr_session_memory_bytes(p->sh->s) + vr_model_weight_bytes(p->sh->slice) : 0;
  pthread_mutex_unlock(&p->run_mu);
  return b;
}

int64_t vr_pair_body_bytes(const vr_pair *p) {
  int64_t b = vr_model_weight_bytes(p->m) + vr_session_memory_bytes(p->par);
  if (p->pre) b += vr_session_memory_bytes(p->pre);
  if (p->post) b += vr_session_memory_bytes(p->post);
  return b;
}

/* Rows [r0, r0 + rows) of a batch-major tensor, by pointer. */
static vr_tensor rows_of(const vr_tensor *t, int batch, int r0, int rows) {
  vr_tensor v = *t;
  size_t row = t->nbytes / (size_t)batch;
  v.shape[0] = rows;
  v.nbytes = row * (size_t)rows;
  v.data = (char *)t->data + row * (size_t)r0;
  return v;
}

/* The parallel range with rows split: body rows [0, bb) here, the rest on
 * the shadow at the same time; merged into p->merge in row order. */
static int run_split(vr_pair *p, const vr_tensor *x, int batch, int bs, vr_tensor *y,
                     vr_errbuf *err) {
  shadow *s = p->sh;
  int bb = batch - bs, rc = 0;
  pthread_mutex_lock(&s->mu);
  s->in = rows_of(x, batch, bb, bs);
  s->rows = bs;
  s->done = 0;
  s->job = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  vr_tensor ob = {0};
  if (bb > 0) {
    vr_tensor xb = rows_of(x, batch, 0, bb);
    rc = vr_session_run(p->par, bb, &xb, 1, &ob, 1, err);
  }
  pthread_mutex_lock(&s->mu);
  while (!s->done) pthread_cond_wait(&s->cv, &s->mu);
  int src = s->rc;
  vr_tensor os = s->out;
  if (src && !rc) {
    rc = src;
    if (err) *err = s->err;
  }
  pthread_mutex_unlock(&s->mu);
  if (rc) return rc;
  size_t need = ob.nbytes + os.nbytes;
  if (need > p->merge_cap) {
    char *m = vr_realloc(p->merge, need);
    if (!m) return vr_errf(err, VR_ENOMEM, "out of memory");
    p->merge = m;
    p->merge_cap = need;
  }
  if (bb > 0) memcpy(p->merge, ob.data, ob.nbytes);
  memcpy(p->merge + ob.nbytes, os.data, os.nbytes);
  *y = os;
  y->shape[0] = batch;
  y->data = p->merge;
  y->nbytes = need;
  return 0;
}

int vr_pair_run(vr_pair *p, int batch, int bs, const vr_tensor *in, int nin, vr_tensor *out,
                int nout, int *shadow_rows, vr_errbuf *err) {
  if (batch < 1 || batch > p->max_batch || bs < 0 || bs > batch)
    return vr_errf(err, VR_ERANGE, "batch %d / shadow rows %d outside 1..%d", batch, bs,
                   p->max_batch);
  pthread_mutex_lock(&p->run_mu);
  if (!p->sh) bs = 0;
  if (shadow_rows) *shadow_rows = bs;
  vr_tensor x, y, mid[1];
  int rc = 0;
  if (p->pre) {
    rc = vr_session_run(p->pre, batch, in, nin, mid, 1, err);
    x = mid[0];
  } else {
    /* the range starts the graph: its input is the caller's */
    x = in[0];
    for (int i = 0; i < nin; i++)
      if (!strcmp(in[i].name, vr_session_input(p->par, 0)->name)) x = in[i];
  }
  if (!rc && bs > 0) rc = run_split(p, &x, batch, bs, &y, err);
  else if (!rc) rc = vr_session_run(p->par, batch, &x, 1, &y, 1, err);
  if (!rc && p->post) {
    rc = vr_session_run(p->post, batch, &y, 1, out, nout, err);
  } else if (!rc) {
    if (nout < 1) rc = vr_errf(err, VR_EINVAL, "need room for 1 output");
    else out[0] = y;
  }
  pthread_mutex_unlock(&p->run_mu);
  return rc;
}
