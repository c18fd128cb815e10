/*
 * An instance: backend session + ordered batch queue + executor thread.
 *
 * The executor loop: answer requests whose deadline can no longer be met
 * (early drop, policy/drop.h), ask the batch rule whether to dispatch
 * (policy/batch.h), and either sleep until it should re-decide or form a
 * batch with the same rule the simulator uses, gather its inputs into one
 * staging buffer per input, run it, and scatter the outputs back into each
 * request.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "runtime/runtime_int.h"

void vr_rt_fail(vr_rt_vstats *vs, vr_runtime *rt, vr_rt_request *r, int code,
                vr_rt_outcome outcome, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->err.msg, sizeof r->err.msg, fmt, ap);
  va_end(ap);
  /* one way to answer a failure, now or after a lock (vr__rt_fail_later) */
  vr__rt_later l = VR__RT_LATER_INIT(l);
  vr__rt_fail_later(&l, vs, rt, r, code, outcome, NULL);
  vr__rt_answer_later(rt, &l);
}

void vr__rt_fail_later(vr__rt_later *l, vr_rt_vstats *vs, vr_runtime *rt, vr_rt_request *r,
                       int code, vr_rt_outcome outcome, const char *fmt, ...) {
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err.msg, sizeof r->err.msg, fmt, ap);
    va_end(ap);
  }
  r->err.code = code;
  r->late_outcome = outcome;
  r->late_vs = vs;
  r->end_ns = vr_rt_now(rt);
  r->next = NULL;
  *l->tail = r;
  l->tail = &r->next;
}

void vr__rt_answer_later(vr_runtime *rt, vr__rt_later *l) {
  vr_rt_request *r = l->head;
  *l = (vr__rt_later)VR__RT_LATER_INIT(*l);
  int64_t now = r ? vr_rt_now(rt) : 0;
  while (r) {
    vr_rt_request *next = r->next; /* done() may reuse r */
    r->next = NULL;
    if (r->late_outcome != VR_OUT_DROPPED ||
        vr_drop_resolve(&rt->opts.reroute, r, now) != VR_DROP_REROUTED) {
      r->status = r->err.code;
      r->outcome = (vr_rt_outcome)r->late_outcome;
      if (r->late_vs) vr_rt_vstats_record(rt, r->late_vs, r);
      r->late_outcome = 0;
      r->late_vs = NULL;
      r->done(r, r->user);
    }
    r = next;
  }
}

int vr_inst_create(vr_runtime *rt, vr_rt_model *m,
                   const vr_rt_instance_opts *o, vr_rt_instance **out,
                   vr_errbuf *err) {
  vr_rt_instance *in = VR_NEW(vr_rt_instance);
  if (!in) return vr_errf(err, VR_ENOMEM, "out of memory");
  in->rt = rt;
  in->model = m;
  in->opts = *o;
  in->batch_cap = o->max_batch;
  vr_rt_variant_name(in->variant, sizeof in->variant, m->cfg.name,
                     o->precision, o->threads, o->max_batch);
  pthread_mutex_init(&in->mu, NULL);
  pthread_mutex_init(&in->attach_mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&in->cv, &ca);
  pthread_condattr_destroy(&ca);
  in->state = VR_INST_LOADING;
  vr_rate_init(&in->served_rate, 10, 100 * VR_NS_PER_MS);
  vr_ewma_init_tau(&in->lat_ewma, VR_NS_PER_S);
  *out = in;
  for (int i = 0; i < m->cfg.n_inputs; i++) {
    size_t bytes = (size_t)vr_tensor_info_row_bytes(&m->cfg.inputs[i]) *
                   (size_t)o->max_batch;
    in->stage[i] = vr_aligned_alloc(64, bytes ? bytes : 64);
    if (!in->stage[i]) return vr_errf(err, VR_ENOMEM, "staging buffers");
    memset(in->stage[i], 0, bytes);
  }
  int rc;
  if (o->pair_end > 0) { /* an AsyFunc body */
    in->split = vr_calloc((size_t)o->max_batch + 1, sizeof(int));
    if (!in->split) return vr_errf(err, VR_ENOMEM, "out of memory");
    rc = rt->be->body_open
             ? rt->be->body_open(rt->be->self, m->handle, o->precision, o->threads,
                                 o->max_batch, o->pair_begin, o->pair_end, &in->sess, err)
             : vr_errf(err, VR_EUNSUPPORTED, "this backend has no body/shadow pairs");
  } else {
    rc = rt->be->session_open(rt->be->self, m->handle, o->precision, o->threads,
                              o->max_batch, &in->sess, err);
  }
  if (rc) return vr_errctx(err, rc, "instance %s", in->variant);
  in->vs = vr_rt_vstats_get(rt, m->cfg.name, in->variant);
  if (!in->vs) return vr_errf(err, VR_ENOMEM, "out of memory");
  return 0;
}

/* Fills tensors describing `rows` rows of the staging buffers. */
static void stage_tensors(vr_rt_instance *in, int rows, vr_tensor *t) {
  const vr_model_config *c = &in->model->cfg;
  for (int i = 0; i < c->n_inputs; i++) {
    const vr_tensor_info *ti = &c->inputs[i];
    t[i].name = ti->name;
    t[i].dtype = ti->dtype;
    t[i].ndim = ti->ndim;
    memcpy(t[i].shape, ti->shape, sizeof t[i].shape);
    t[i].shape[0] = rows;
    t[i].data = in->stage[i];
    t[i].nbytes = (size_t)vr_tensor_info_row_bytes(ti) * (size_t)rows;
  }
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

int vr_rt_check_batch_major(const vr_tensor *out, int n_out, int batch, vr_errbuf *err) {
  for (int o = 0; o < n_out; o++) {
    const vr_tensor *t = &out[o];
    if (t->ndim >= 1 && t->shape[0] == batch) continue;
    char sh[160];
    int k = snprintf(sh, sizeof sh, "[");
    for (int d = 0; d < t->ndim && k > 0 && (size_t)k < sizeof sh; d++)
      k += snprintf(sh + k, sizeof sh - (size_t)k, "%s%lld", d ? "," : "",
                    (long long)t->shape[d]);
    if (k > 0 && (size_t)k < sizeof sh) snprintf(sh + k, sizeof sh - (size_t)k, "]");
    return vr_errf(err, VR_EUNSUPPORTED,
                   "output '%s' has shape %s at batch %d: its dim 0 is not the batch, as"
                   " every output of a model served in batches must be",
                   t->name ? t->name : "", sh, batch);
  }
  return 0;
}

/* A profile run: its outputs must carry the batch in dim 0 (run_batch
 * splits a result into requests by it), so a model whose output does not
 * (a Reshape folding the batch into rows, one row whatever the batch) is
 * refused at load naming the output, not loaded to fail every request. */
static int profile_run(vr_rt_instance *in, int b, vr_tensor *tin, vr_tensor *tout,
                       vr_errbuf *err) {
  const vr_rt_backend *be = in->rt->be;
  const vr_model_config *c = &in->model->cfg;
  int rc = be->run(be->self, in->sess, b, tin, c->n_inputs, tout, VR_RT_MAX_IO, err);
  if (rc) return vr_errctx(err, rc, "profiling batch %d", b);
  rc = vr_rt_check_batch_major(tout, c->n_outputs, b, err);
  return rc ? vr_errctx(err, rc, "model '%s'", c->name) : 0;
}

/* Median latency of a few runs per power-of-two batch size up to the max
 * batch (and 64, the profile's largest slot; larger batches are
 * extrapolated per row), so the batch rule knows what a batch costs. */
static int profile(vr_rt_instance *in, vr_errbuf *err) {
  int runs = in->rt->opts.profile_runs;
  int limit = in->rt->opts.profile_max_batch;
  if (limit <= 0 || limit > in->opts.max_batch) limit = in->opts.max_batch;
  vr_tensor tin[VR_RT_MAX_IO], tout[VR_RT_MAX_IO];
  int64_t t[16];
  if (runs > 16) runs = 16;
  vr_latency_init(&in->prof);
  for (int k = 0; k < VR_PROF_NB && (1 << k) <= limit; k++) {
    int b = 1 << k;
    stage_tensors(in, b, tin);
    for (int r = 0; r <= runs; r++) { /* run 0 warms up */
      int64_t t0 = vr_rt_now(in->rt);
      int rc = profile_run(in, b, tin, tout, err);
      if (rc) return rc;
      if (r) t[r - 1] = vr_rt_now(in->rt) - t0;
    }
    qsort(t, (size_t)runs, sizeof t[0], cmp_i64);
    in->prof.p50_ms[k] = (t[runs / 2] > 0 ? t[runs / 2] : 1) / 1e6;
  }
  if (limit >= 2 || in->opts.max_batch < 2) return 0;
  /* batch 1 cannot show an output of one row whatever the batch */
  stage_tensors(in, 2, tin);
  return profile_run(in, 2, tin, tout, err);
}

static void *executor(void *arg);

int vr_inst_start(vr_rt_instance *in, vr_errbuf *err) {
  int rc = profile(in, err);
  if (rc) return rc;
  pthread_mutex_lock(&in->mu);
  in->state = VR_INST_ACTIVE;
  pthread_mutex_unlock(&in->mu);
  if (pthread_create(&in->thread, NULL, executor, in) != 0)
    return vr_errf(err, VR_EINTERNAL, "cannot start executor thread");
  in->started = 1;
  return 0;
}

int vr_inst_load(vr_rt_instance *in) {
  return __atomic_load_n(&in->queue_rows, __ATOMIC_RELAXED) +
         __atomic_load_n(&in->busy_rows, __ATOMIC_RELAXED);
}

/* The answer of a request dropped for its deadline, here and at
 * admission (vr_inst_enqueue_many); `need` is the batch time that made it
 * infeasible. */
#define DROP_FMT                                                                     \
  "dropped: the deadline cannot be met (%lld us left, a batch of %d rows takes %lld us " \
  "on %s)"
#define DROP_ARGS(in, r, now, need)                                                   \
  (long long)(((r)->deadline_ns - (now)) / 1000), (r)->rows, (long long)((need) / 1000), \
      (in)->variant

/* Answers a request due for dropping (policy/drop.h): the runtime's
 * reroute hook may take it (vr_rt_fail offers it); otherwise VR_EDEADLINE,
 * outcome dropped (HTTP 504). Without mu. */
static void drop(vr_rt_instance *in, vr_rt_request *r, int64_t now,
                 int64_t need) {
  vr_rt_fail(in->vs, in->rt, r, VR_EDEADLINE, VR_OUT_DROPPED, DROP_FMT,
             DROP_ARGS(in, r, now, need));
}

/* Admission checks of one request on the instance (mu held): 0 to queue
 * it, or the failure to answer it with once mu is released. */
typedef struct enq_fail {
  int status, outcome;
  int64_t need; /* dropped: the batch time that condemned it */
  char msg[VR_NAME_MAX + 96];
} enq_fail;

static int admit_check(vr_rt_instance *in, vr_rt_request *r, int64_t now, enq_fail *f) {
  if (in->stopping || in->state == VR_INST_DRAINING) {
    snprintf(f->msg, sizeof f->msg, "instance %s is draining", in->variant);
    return f->status = VR_ESHUTDOWN, f->outcome = VR_OUT_REJECTED;
  }
  if (in->queue_rows + r->rows > in->rt->opts.max_queue_rows) {
    snprintf(f->msg, sizeof f->msg, "queue of %s is full (%d rows)", in->variant,
             in->rt->opts.max_queue_rows);
    return f->status = VR_EBUSY, f->outcome = VR_OUT_REJECTED;
  }
  int64_t maxq = in->model->cfg.queue.max_queue_size;
  if (maxq > 0 && in->queue_len >= maxq) { /* Triton's max_queue_size */
    snprintf(f->msg, sizeof f->msg, "queue of %s is full (max_queue_size %lld)", in->variant,
             (long long)maxq);
    return f->status = VR_EBUSY, f->outcome = VR_OUT_REJECTED;
  }
  snprintf(r->variant, sizeof r->variant, "%s", in->variant);
  r->instance_id = in->id;
  if (vr_drop_due(now, r->deadline_ns, &in->prof, r->rows)) {
    f->need = vr_batch_est_ns(&in->prof, r->rows);
    in->dropped++;
    in->dropped_rows += (uint64_t)r->rows;
    return f->status = VR_EDEADLINE, f->outcome = VR_OUT_DROPPED;
  }
  return 0;
}

void vr_inst_enqueue_many(vr_rt_instance *in, vr_rt_request **reqs, int n, vr__rt_later *later) {
  enq_fail fails[16];
  int64_t now = vr_rt_now(in->rt);
  for (int k = 0; k < n;) {
    /* failures are settled outside mu, a few at a time */
    int nf = 0, queued = 0;
    vr_rt_request *failed[16];
    pthread_mutex_lock(&in->mu);
    for (; k < n && nf < 16; k++) {
      vr_rt_request *r = reqs[k];
      if (admit_check(in, r, now, &fails[nf])) {
        failed[nf++] = r;
        continue;
      }
      /* Insert after every request of the same or a higher priority: FIFO
       * within a level. Same-level appends are the common case. */
      vr_rt_request **pp = &in->head;
      while (*pp && (*pp)->prio_key <= r->prio_key) pp = &(*pp)->next;
      r->next = *pp;
      *pp = r;
      in->queue_len++;
      __atomic_store_n(&in->queue_rows, in->queue_rows + r->rows, __ATOMIC_RELAXED);
      queued++;
    }
    if (queued) pthread_cond_signal(&in->cv);
    pthread_mutex_unlock(&in->mu);
    for (int i = 0; i < nf; i++) {
      vr_rt_request *r = failed[i];
      if (fails[i].outcome == VR_OUT_DROPPED)
        vr__rt_fail_later(later, in->vs, in->rt, r, VR_EDEADLINE, VR_OUT_DROPPED, DROP_FMT,
                          DROP_ARGS(in, r, now, fails[i].need));
      else
        vr__rt_fail_later(later, in->vs, in->rt, r, fails[i].status, fails[i].outcome, "%s",
                          fails[i].msg);
    }
  }
}

/* Unlinks requests due for dropping (policy/drop.h) anywhere in the
 * queue (priorities can put a later deadline first); returns them as a
 * list with the batch time that condemned each in r->start_ns. Called
 * with mu held. */
static vr_rt_request *take_infeasible(vr_rt_instance *in, int64_t now) {
  vr_rt_request *list = NULL, **tail = &list;
  for (vr_rt_request **pp = &in->head; *pp;) {
    vr_rt_request *r = *pp;
    if (vr_drop_due(now, r->deadline_ns, &in->prof, r->rows)) {
      *pp = r->next;
      __atomic_store_n(&in->queue_rows, in->queue_rows - r->rows, __ATOMIC_RELAXED);
      in->queue_len--;
      in->dropped++;
      in->dropped_rows += (uint64_t)r->rows;
      r->start_ns = vr_batch_est_ns(&in->prof, r->rows);
      r->next = NULL;
      *tail = r;
      tail = &r->next;
    } else {
      pp = &r->next;
    }
  }
  return list;
}

static void fail_list(vr_rt_instance *in, vr_rt_request *list, int64_t now) {
  while (list) {
    vr_rt_request *r = list;
    list = r->next;
    r->next = NULL;
    int64_t need = r->start_ns;
    r->start_ns = 0;
    drop(in, r, now, need);
  }
}

void vr__inst_reap(vr_rt_instance *in, vr__rt_later *later) {
  pthread_mutex_lock(&in->mu);
  /* An idle executor drops them itself; a running one after its batch,
   * which normally ends within its profiled time (the simulator's
   * timing), but not when it waits on a stuck shadow process (pair.c) */
  int64_t now = vr_rt_now(in->rt);
  vr_rt_request *list = NULL;
  if (in->run_rows > 0 &&
      vr_drop_batch_stuck(now, in->run_since, vr_batch_est_ns(&in->prof, in->run_rows)))
    list = take_infeasible(in, now);
  pthread_mutex_unlock(&in->mu);
  /* settled (the message written) here, under the caller's rt->lock: in
   * may be freed once it is released */
  while (list) {
    vr_rt_request *r = list;
    list = r->next;
    int64_t need = r->start_ns;
    r->start_ns = 0;
    vr__rt_fail_later(later, in->vs, in->rt, r, VR_EDEADLINE, VR_OUT_DROPPED, DROP_FMT,
                      DROP_ARGS(in, r, now, need));
  }
}

static void wait_until(vr_rt_instance *in, int64_t t) {
  if (t == INT64_MAX) {
    pthread_cond_wait(&in->cv, &in->mu);
    return;
  }
  struct timespec ts = {(time_t)(t / VR_NS_PER_S), (long)(t % VR_NS_PER_S)};
  pthread_cond_timedwait(&in->cv, &in->mu, &ts);
}

/* The queue as policy/batch.h reads it: a cursor over the list. */
typedef struct list_view {
  vr_rt_request *head, *cur;
  size_t i;
} list_view;

static vr_qitem list_at(void *q, size_t i) {
  list_view *v = q;
  if (!v->cur || i < v->i) v->cur = v->head, v->i = 0;
  while (v->i < i) v->cur = v->cur->next, v->i++;
  return (vr_qitem){v->cur->rows, v->cur->deadline_ns};
}

/* The model's preferred batch sizes (config.pbtxt's dynamic_batching). */
static vr_batch_pref pref_of(const vr_rt_instance *in) {
  const vr_model_config *c = &in->model->cfg;
  return (vr_batch_pref){c->preferred_batch, c->n_preferred_batch};
}

/* Called with mu held: the batcher's view of the queue. */
static vr_batch_state queue_state(vr_rt_instance *in, int64_t now) {
  vr_batch_pref pref = pref_of(in);
  vr_batch_state s = {now, in->queue_rows, vr_batch_pref_cap(&pref, in->batch_cap),
                      INT64_MAX, VR_NO_DEADLINE, in->opts.max_queue_delay_us * 1000, 0};
  for (vr_rt_request *r = in->head; r; r = r->next) {
    if (r->arrival_ns < s.oldest_arrival) s.oldest_arrival = r->arrival_ns;
    if (r->deadline_ns < s.earliest_deadline)
      s.earliest_deadline = r->deadline_ns;
  }
  if (pref.n) {
    list_view lv = {in->head, NULL, 0};
    vr_qview q = {&lv, (size_t)in->queue_len, list_at};
    s.preferred_rows = vr_batch_pref_prefix(&pref, in->batch_cap, &q, NULL);
  }
  return s;
}

/* Unlinks the first n requests of the queue (mu held). */
static vr_rt_request *unlink_head(vr_rt_instance *in, size_t n, int *rows) {
  vr_rt_request *list = in->head, *last = NULL;
  *rows = 0;
  for (size_t k = 0; k < n; k++) {
    last = last ? last->next : in->head;
    *rows += last->rows;
  }
  if (!last) return NULL;
  in->head = last->next;
  last->next = NULL;
  __atomic_store_n(&in->queue_rows, in->queue_rows - *rows, __ATOMIC_RELAXED);
  in->queue_len -= (int)n;
  return list;
}

/* Pops the batch the batch rule forms (policy/batch.h, the deadline
 * mode: the simulator's "runtime" batching), mu held. Requests the rule
 * drops from the head come back in *dropped (take_infeasible already
 * answered those, so this is normally empty). */
static vr_rt_request *pop_batch(vr_rt_instance *in, const vr_batch_state *s,
                                int *rows_out, vr_rt_request **dropped) {
  list_view lv = {in->head, NULL, 0};
  vr_qview q = {&lv, (size_t)in->queue_len, list_at};
  vr_batch_pref pref = pref_of(in);
  vr_batch_pick p = vr_batch_form_pref(VR_BATCH_DEADLINE, &in->prof, in->batch_cap,
                                       s->now, &q, &pref, vr_batch_pref_trim(s));
  int rows;
  *dropped = unlink_head(in, p.drop, &rows);
  for (vr_rt_request *r = *dropped; r; r = r->next) {
    in->dropped++;
    in->dropped_rows += (uint64_t)r->rows;
    r->start_ns = vr_batch_est_ns(&in->prof, r->rows);
  }
  vr_rt_request *list = unlink_head(in, p.take, rows_out);
  __atomic_store_n(&in->busy_rows, *rows_out, __ATOMIC_RELAXED);
  return list;
}

static void run_batch(vr_rt_instance *in, vr_rt_request *list, int rows);

static void *executor(void *arg) {
  vr_rt_instance *in = arg;
  pthread_mutex_lock(&in->mu);
  for (;;) {
    if (in->stopping && !in->head) break;
    int64_t now = vr_rt_now(in->rt);
    vr_rt_request *drop = take_infeasible(in, now);
    if (drop) {
      pthread_mutex_unlock(&in->mu);
      fail_list(in, drop, now);
      pthread_mutex_lock(&in->mu);
      continue;
    }
    vr_batch_state s = queue_state(in, now);
    vr_batch_decision d = vr_batch_decide(&s, &in->prof);
    if (!d.dispatch && !(in->stopping && in->head)) {
      wait_until(in, d.wake_at);
      continue;
    }
    int rows;
    vr_rt_request *dropped;
    vr_rt_request *batch = pop_batch(in, &s, &rows, &dropped);
    if (in->state != VR_INST_DRAINING)
      in->state = in->queue_rows >= 2 * in->batch_cap
                      ? VR_INST_OVERLOADED : VR_INST_ACTIVE;
    in->run_since = now; /* the reaper's cue (vr__inst_reap) */
    in->run_rows = batch ? rows : 0;
    pthread_mutex_unlock(&in->mu);
    fail_list(in, dropped, now);
    if (batch) run_batch(in, batch, rows);
    pthread_mutex_lock(&in->mu);
    in->run_rows = 0;
    __atomic_store_n(&in->busy_rows, 0, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&in->mu);
  return NULL;
}

/* Copies each request's slice of every output into one block it owns. */
static int scatter(vr_rt_instance *in, vr_rt_request *r, int row0, int rows,
                   const vr_tensor *out, int n_out) {
  size_t total = 0;
  for (int o = 0; o < n_out; o++)
    total += out[o].nbytes / (size_t)rows * (size_t)r->rows + VR_NAME_MAX + 64;
  char *blk = vr_aligned_alloc(64, total);
  if (!blk) return VR_ENOMEM;
  r->out_block = blk;
  r->n_out = n_out;
  for (int o = 0; o < n_out; o++) {
    size_t row_bytes = out[o].nbytes / (size_t)rows;
    vr_tensor *t = &r->out[o];
    *t = out[o];
    t->shape[0] = r->rows;
    t->nbytes = row_bytes * (size_t)r->rows;
    /* Names are copied too: the model may be unloaded before the caller
     * reads the result. */
    snprintf(blk, VR_NAME_MAX, "%s", out[o].name ? out[o].name : "");
    t->name = blk;
    blk += VR_NAME_MAX;
    blk += (64 - ((uintptr_t)blk & 63)) & 63;
    memcpy(blk, (const char *)out[o].data + row_bytes * (size_t)row0,
           t->nbytes);
    t->data = blk;
    blk += t->nbytes;
  }
  (void)in;
  return 0;
}

static int check_outputs(const vr_tensor *out, int n_out, int rows,
                         vr_errbuf *err) {
  /* refused at load; a server fault, not the client's, if seen here */
  if (vr_rt_check_batch_major(out, n_out, rows, err))
    return vr_errctx(err, VR_EINTERNAL, "backend");
  for (int o = 0; o < n_out; o++)
    if (!out[o].data || out[o].nbytes % (size_t)rows)
      return vr_errf(err, VR_EINTERNAL, "backend output %d has bad shape", o);
  return 0;
}

/* When a paired run stops waiting for its shadow and runs the shadow's
 * rows itself (run_paired's give_up_ns): the rule of policy/drop.h over
 * the batch's earliest deadline (requests without one have nothing to
 * lose by it: the body re-runs their rows). 0 (the backend's bound, 2 s)
 * when no request has a deadline, or on a virtual clock (the backend
 * waits on the real one). Under mu. */
static int64_t shadow_give_up(vr_rt_instance *in, const vr_rt_request *list, int rows,
                              int64_t t0) {
  if (in->rt->opts.clock != vr_clock_monotonic()) return 0;
  int64_t first = VR_NO_DEADLINE;
  for (const vr_rt_request *r = list; r; r = r->next)
    if (r->deadline_ns < first) first = r->deadline_ns;
  return vr_drop_give_up_at(t0, vr_batch_est_ns(&in->prof, rows), first);
}

static void run_batch(vr_rt_instance *in, vr_rt_request *list, int rows) {
  const vr_model_config *c = &in->model->cfg;
  const vr_rt_backend *be = in->rt->be;
  vr_tensor tin[VR_RT_MAX_IO], tout[VR_RT_MAX_IO];
  const vr_tensor *inputs = list->in;
  int64_t tg = vr_rt_now(in->rt);
  int aligned = 1; /* binary HTTP payloads sit at any offset of the body */
  for (int i = 0; i < c->n_inputs; i++)
    aligned &= ((uintptr_t)list->in[i].data & 63) == 0;
  if (list->next || !aligned) { /* gather into the staging buffers */
    stage_tensors(in, rows, tin);
    for (int i = 0; i < c->n_inputs; i++) {
      char *dst = in->stage[i];
      for (vr_rt_request *r = list; r; r = r->next) {
        memcpy(dst, r->in[i].data, r->in[i].nbytes);
        dst += r->in[i].nbytes;
      }
    }
    inputs = tin;
  }
  vr_errbuf err = {0};
  int64_t t0 = vr_rt_now(in->rt);
  pthread_mutex_lock(&in->mu);
  int bs = in->shadow_threads > 0 ? in->split[rows] : 0;
  int64_t give_up = bs > 0 ? shadow_give_up(in, list, rows, t0) : 0;
  pthread_mutex_unlock(&in->mu);
  int rc, srows = 0;
  if (bs > 0) /* a paired run: the shadow takes bs rows of the range */
    rc = be->run_paired(be->self, in->sess, rows, bs, give_up, inputs, c->n_inputs, tout,
                        VR_RT_MAX_IO, &srows, &err);
  else
    rc = be->run(be->self, in->sess, rows, inputs, c->n_inputs, tout, VR_RT_MAX_IO, &err);
  int n_out = c->n_outputs;
  if (!rc) rc = check_outputs(tout, n_out, rows, &err);
  int64_t t1 = vr_rt_now(in->rt);
  pthread_mutex_lock(&in->mu);
  /* A batch whose shadow failed waited for it (pair.c's timeout on a stuck
   * process): that wait is not the batch's execution, and an answer late
   * by it is not the batch's own overrun (runtime.h, batch_ns). */
  int64_t stall = 0;
  if (srows < 0) {
    int64_t est = vr_batch_est_ns(&in->prof, rows);
    stall = t1 - t0 > est ? t1 - t0 - est : 0;
  }
  /* not a run whose shadow failed: its time is the shadow's timeout, and
   * one such sample in the profile made the instance drop every request
   * whose deadline is below it, so that no batch of that size ever ran
   * again to correct it */
  if (!rc && srows >= 0) vr_latency_observe(&in->prof, rows, (double)(t1 - t0) / 1e6);
  in->batches++;
  if (!rc && srows > 0) {
    in->paired_batches++;
    in->shadow_rows += (uint64_t)srows;
  }
  if (srows < 0 && in->shadow_threads > 0) { /* the shadow died: released */
    in->shadow_threads = 0;
    in->shadows_released++;
  }
  in->served += rc ? 0 : (uint64_t)rows;
  if (!rc) vr_rate_add(&in->served_rate, rows, t1);
  for (vr_rt_request *r = list; r; r = r->next)
    vr_ewma_add(&in->lat_ewma, (double)(t1 - r->arrival_ns), t1);
  pthread_mutex_unlock(&in->mu);
  /* Outputs are copied out for every request first, then the batch is
   * counted, then requests are answered: a caller that reads the stats
   * after its answer sees its batch (Triton's compute_output split). */
  int row0 = 0, nreq = 0;
  int64_t out_ns = 0;
  for (vr_rt_request *r = list; r && !rc; r = r->next) {
    int64_t ts = vr_rt_now(in->rt);
    r->status = scatter(in, r, row0, rows, tout, n_out) ? VR_ENOMEM : 0;
    r->end_ns = vr_rt_now(in->rt);
    out_ns += r->end_ns - ts;
    nreq += r->status == 0;
    row0 += r->rows;
  }
  vr_rt_vstats_batch(in->rt, in->vs, rows, nreq, t0 - tg, t1 - t0, out_ns);
  /* What the answers submit (a pipeline hop's fan-out) enters its queues
   * when every request of the batch is answered: the batch's outputs exist
   * together, so their children can be batched together (runtime.h). */
  vr__rt_plug(in->rt);
  while (list) {
    vr_rt_request *r = list;
    list = r->next;
    r->next = NULL;
    r->start_ns = t0;
    r->batch_ns = r->end_ns - t0 - stall;
    r->batch_size = rows;
    if (rc) {
      vr_rt_fail(in->vs, in->rt, r, rc, VR_OUT_FAILED, "%s: %s", in->variant,
                 err.msg);
    } else if (r->status) {
      vr_rt_fail(in->vs, in->rt, r, VR_ENOMEM, VR_OUT_FAILED,
                 "out of memory copying outputs");
    } else {
      r->outcome = VR_OUT_OK;
      if (r->settle_stats) r->owed = in->vs; /* the caller counts it */
      else vr_rt_vstats_record(in->rt, in->vs, r);
      r->done(r, r->user);
    }
  }
  vr__rt_unplug(in->rt);
}

void vr_inst_destroy(vr_rt_instance *in) {
  if (!in) return;
  pthread_mutex_lock(&in->mu);
  in->stopping = 1;
  in->state = VR_INST_DRAINING;
  pthread_cond_signal(&in->cv);
  vr_rt_request *orphans = in->started ? NULL : in->head;
  if (!in->started) in->head = NULL, in->queue_len = 0;
  pthread_mutex_unlock(&in->mu);
  if (in->started) pthread_join(in->thread, NULL);
  vr__rt_reaper_fence(in->rt); /* what it took from here is answered */
  while (orphans) { /* never started: nobody else will answer these */
    vr_rt_request *r = orphans;
    orphans = r->next;
    vr_rt_fail(in->vs, in->rt, r, VR_ESHUTDOWN, VR_OUT_REJECTED,
               "instance %s stopped", in->variant);
  }
  /* a body's shadow goes with it, after the queue above was served */
  if (in->sess) in->rt->be->session_close(in->rt->be->self, in->sess);
  for (int i = 0; i < VR_RT_MAX_IO; i++) vr_aligned_free(in->stage[i]);
  vr_free(in->split);
  pthread_cond_destroy(&in->cv);
  pthread_mutex_destroy(&in->mu);
  pthread_mutex_destroy(&in->attach_mu);
  vr_free(in);
}

void vr_inst_stats(vr_rt_instance *in, vr_rt_instance_stats *s) {
  memset(s, 0, sizeof *s);
  s->id = in->id;
  snprintf(s->model, sizeof s->model, "%s", in->model->cfg.name);
  snprintf(s->variant, sizeof s->variant, "%s", in->variant);
  s->precision = in->opts.precision;
  s->threads = in->opts.threads;
  s->max_batch = in->opts.max_batch;
  s->max_queue_delay_us = in->opts.max_queue_delay_us;
  pthread_mutex_lock(&in->mu);
  s->profile = in->prof;
  s->state = in->state;
  s->queue_rows = in->queue_rows;
  s->busy_rows = in->busy_rows;
  s->batch_cap = in->batch_cap;
  s->served_qps = vr_rate_per_sec(&in->served_rate, vr_rt_now(in->rt));
  s->latency_ewma_ns = vr_ewma_get(&in->lat_ewma);
  s->served = in->served;
  s->dropped = in->dropped;
  s->dropped_rows = in->dropped_rows;
  s->batches = in->batches;
  s->body = in->opts.pair_end > 0;
  s->pair_begin = in->opts.pair_begin;
  s->pair_end = in->opts.pair_end;
  s->shadow_threads = in->shadow_threads;
  s->shadow_load_ms = in->shadow_load_ms;
  s->paired_batches = in->paired_batches;
  s->shadow_rows = in->shadow_rows;
  s->shadows_attached = in->shadows_attached;
  s->shadows_released = in->shadows_released;
  pthread_mutex_unlock(&in->mu);
}

int vr_inst_pair(vr_rt_instance *in, const vr_rt_shadow_opts *o, double *load_ms,
                 vr_errbuf *err) {
  const vr_rt_backend *be = in->rt->be;
  int mb = in->opts.max_batch;
  if (in->opts.pair_end <= 0 || !be->shadow_attach)
    return vr_errf(err, VR_EINVAL, "instance %d (%s) is no body", in->id, in->variant);
  if (!o || o->threads < 1 || o->threads > VR_RT_MAX_THREADS)
    return vr_errf(err, VR_EINVAL, "a shadow needs 1..%d threads", VR_RT_MAX_THREADS);
  for (int b = 1; o->split && b <= mb; b++)
    if (o->split[b] < 0 || o->split[b] > b)
      return vr_errf(err, VR_ERANGE, "split[%d] = %d outside 0..%d", b, o->split[b], b);
  pthread_mutex_lock(&in->attach_mu);
  pthread_mutex_lock(&in->mu);
  int has = in->shadow_threads > 0;
  pthread_mutex_unlock(&in->mu);
  if (has) {
    pthread_mutex_unlock(&in->attach_mu);
    return vr_errf(err, VR_EEXIST, "instance %d already has a shadow", in->id);
  }
  double ms = 0;
  int rc = be->shadow_attach(be->self, in->sess, o->threads, o->process, &ms, err);
  if (!rc) {
    pthread_mutex_lock(&in->mu);
    for (int b = 0; b <= mb; b++) /* default: rows in proportion to the cores */
      in->split[b] = o->split ? (b ? o->split[b] : 0)
                              : (b * o->threads + (in->opts.threads + o->threads) / 2) /
                                    (in->opts.threads + o->threads);
    in->shadow_threads = o->threads;
    in->shadow_load_ms = ms;
    in->shadows_attached++;
    pthread_mutex_unlock(&in->mu);
    if (load_ms) *load_ms = ms;
  }
  pthread_mutex_unlock(&in->attach_mu);
  return rc;
}

int vr_inst_unpair(vr_rt_instance *in, vr_errbuf *err) {
  pthread_mutex_lock(&in->attach_mu);
  pthread_mutex_lock(&in->mu);
  int has = in->shadow_threads > 0;
  in->shadow_threads = 0; /* batches formed from now on run on the body */
  if (has) in->shadows_released++;
  pthread_mutex_unlock(&in->mu);
  /* waits for a paired batch in flight, which completes normally */
  if (has) in->rt->be->shadow_release(in->rt->be->self, in->sess);
  pthread_mutex_unlock(&in->attach_mu);
  return has ? 0 : vr_errf(err, VR_ENOENT, "instance %d has no shadow", in->id);
}

void vr_inst_set_batch_cap(vr_rt_instance *in, int cap) {
  if (cap < 1) cap = 1;
  if (cap > in->opts.max_batch) cap = in->opts.max_batch;
  pthread_mutex_lock(&in->mu);
  in->batch_cap = cap;
  pthread_cond_signal(&in->cv); /* a full batch may be ready now */
  pthread_mutex_unlock(&in->mu);
}
