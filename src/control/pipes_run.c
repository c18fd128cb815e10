/* Live pipelines: the request path (see pipes.h). One request is a tree
 * of hops; each hop is routed by the control plane, queued in the runtime
 * with the end-to-end deadline, and fanned out by its task's adapter. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/vec.h"
#include "control/pipes_pol.h"
#include "policy/drop.h"

typedef struct preq preq;

/* A hop with its private routing state; pub first so that the result's
 * vr_pipe_hop_rec pointers are the phop allocations. */
typedef struct phop phop;
struct phop {
  vr_pipe_hop_rec pub;
  preq *q;
  int idx; /* in creation order */
  vr_ctl_route route;
  phop *par;         /* the parent hop (alive until the request ends) */
  int slot;          /* under a pipeline policy: the plan's slot, or -1 */
  int pol_gen;       /* the generation of the view slot indexes (pl_pipe) */
  double budget_sum; /* budgets of the path so far (pipe_plan.h) */
  /* the crop's input name: the runtime reads it after submit() returns
   * (a held request is checked when the batch that made it ends) */
  char in0[VR_NAME_MAX];
};

struct preq {
  vr_pipes *ps;
  pl_pipe *pp;
  vr_pipe_query q; /* tensors borrowed from the caller */
  int64_t arrival_ns, deadline_ns;
  double min_acc; /* per task, percent; 0 = none */
  pthread_mutex_t mu;
  int pending;  /* hops started and not finished */
  int lost;     /* a hop could not even be allocated */
  int bad_input; /* the runtime refused the root's inputs: its status */
  vr_vec hops;  /* phop*, creation order (under mu) */
  vr_pipe_done_fn done;
  void *tag;
};

const char *vr_pipe_outcome_name(vr_pipe_outcome o) {
  static const char *n[VR_POUT_COUNT] = {"ok", "dropped", "infeasible", "rejected", "failed"};
  return (unsigned)o < VR_POUT_COUNT ? n[o] : "?";
}

/* The answer when not even a result can be allocated: shared, read-only,
 * never freed. */
static vr_pipe_result k_oom = {.outcome = VR_POUT_FAILED, .status = VR_ENOMEM,
                               .msg = "out of memory"};

void vr_pipe_result_free(vr_pipe_result *r) {
  if (!r || r == &k_oom) return;
  for (int i = 0; i < r->n_hops; i++) {
    vr_pipe_hop_rec *h = r->hops[i];
    vr_rt_request_clear(&h->rt);
    vr_free(h->crop);
    vr_free(h);
  }
  vr_free(r->hops);
  if (r->pin) vr__pipe_unref(r->pin);
  vr_free(r);
}

/* The last point a request can be dropped (policy/drop.h, the rule a
 * model-less query's answer keeps): every hop was admitted only when its
 * batch fitted before the end-to-end deadline, so an answer later than
 * the deadline plus the batch of the hop that ended last was delayed
 * after that batch. It was answered 200 "ok", later than the SLO. */
static void drop_if_late(vr_pipe_result *r) {
  int64_t last_end = -1, batch_ns = 0;
  for (int i = 0; i < r->n_hops; i++) {
    const vr_pipe_hop_rec *h = r->hops[i];
    int64_t end = h->start_ns + h->queue_ns + h->compute_ns;
    if (h->outcome == VR_POUT_OK && end > last_end) last_end = end, batch_ns = h->batch_ns;
  }
  r->batch_ns = batch_ns; /* a front end's allowance too (server_pipes.c) */
  if (r->outcome != VR_POUT_OK || r->end_ns <= r->deadline_ns) return;
  if (!vr_drop_answer_due(r->end_ns, r->deadline_ns, batch_ns)) return;
  r->outcome = VR_POUT_DROPPED;
  snprintf(r->msg, sizeof r->msg, "dropped: the deadline cannot be met (the answer was ready "
           "%.3f ms after it, more than the last hop's batch's %.3f ms)",
           (r->end_ns - r->deadline_ns) / 1e6, batch_ns / 1e6);
}

/* Moves the hops into a result and hands it to the caller. */
static void finish_request(preq *q) {
  vr_pipe_result *r = vr_calloc(1, sizeof *r);
  size_t n = q->hops.len;
  if (r) r->hops = vr_calloc(n ? n : 1, sizeof *r->hops);
  if (!r || !r->hops) { /* keep the contract: done runs; the hops go */
    for (size_t i = 0; i < n; i++) {
      phop *h = *(phop **)vr_vec_at(&q->hops, i);
      vr_rt_request_clear(&h->pub.rt);
      vr_free(h->pub.crop);
      vr_free(h);
    }
    if (r) vr_free(r);
    q->done(&k_oom, q->tag);
    vr__pipe_unref(q->pp);
    goto out;
  }
  snprintf(r->pipeline, sizeof r->pipeline, "%s", q->pp->spec->name);
  r->arrival_ns = q->arrival_ns;
  r->deadline_ns = q->deadline_ns;
  r->end_ns = vr_clock_now(q->ps->clock);
  r->n_hops = (int)n;
  r->outcome = q->lost ? VR_POUT_FAILED : VR_POUT_OK;
  if (q->lost) snprintf(r->msg, sizeof r->msg, "out of memory for a hop");
  for (size_t i = 0; i < n; i++) {
    vr_pipe_hop_rec *h = &(*(phop **)vr_vec_at(&q->hops, i))->pub;
    r->hops[i] = h;
    if (r->outcome == VR_POUT_OK && h->outcome != VR_POUT_OK) {
      r->outcome = h->outcome;
      snprintf(r->msg, sizeof r->msg, "task '%.64s': %.500s", h->task_name, h->msg);
    }
  }
  if (q->bad_input) /* as pipes.h says of bad inputs: failed, with the status */
    r->outcome = VR_POUT_FAILED, r->status = q->bad_input;
  drop_if_late(r);
  vr__pipe_count_request(q->pp, r);
  r->pin = q->pp; /* the request's reference moves to the result */
  q->done(r, q->tag);
out:
  vr_vec_free(&q->hops);
  pthread_mutex_destroy(&q->mu);
  vr_free(q);
}

static void finish_hop(phop *h, vr_pipe_outcome o, const char *msg) {
  preq *q = h->q;
  h->pub.outcome = o;
  if (o != VR_POUT_OK && msg) snprintf(h->pub.msg, sizeof h->pub.msg, "%.500s", msg);
  vr__pipe_count_hop(q->pp, &h->pub);
  pthread_mutex_lock(&q->mu);
  int last = --q->pending == 0;
  pthread_mutex_unlock(&q->mu);
  if (last) finish_request(q);
}

static void start_hop(phop *h);

/* A new hop of task t under parent (or the root); NULL on allocation
 * failure (the parent then records the failure). Counted as pending. */
static phop *new_hop(preq *q, int t, phop *par, int row) {
  phop *h = vr_calloc(1, sizeof *h);
  if (!h) {
    pthread_mutex_lock(&q->mu);
    q->lost = 1;
    pthread_mutex_unlock(&q->mu);
    return NULL;
  }
  h->q = q;
  h->par = par;
  h->slot = -1;
  h->pub.task = t;
  h->pub.task_name = q->pp->spec->tasks[t].name;
  h->pub.parent = par ? par->idx : -1;
  h->pub.row = row;
  h->pub.region = -1;
  pthread_mutex_lock(&q->mu);
  h->idx = (int)q->hops.len;
  int rc = vr_vec_push(&q->hops, &h);
  if (!rc) q->pending++;
  else q->lost = 1;
  pthread_mutex_unlock(&q->mu);
  if (rc) {
    vr_free(h);
    return NULL;
  }
  return h;
}

static const vr_tensor *find_out(const vr_rt_request *r, const char *name) {
  for (int i = 0; i < r->n_out; i++)
    if (r->out[i].name && !strcmp(r->out[i].name, name)) return &r->out[i];
  return NULL;
}

/* The hop's own input image rows: the root's first input or a crop. */
static const float *hop_input(const phop *h, int64_t *rows) {
  if (h->pub.crop) {
    *rows = 1;
    return h->pub.crop;
  }
  *rows = h->q->q.in[0].shape[0];
  return h->q->q.in[0].data;
}

/* The task's adapter over the hop's outputs: one child hop per region
 * that fans out to a child task. Returns 0 or a message in err. */
static int fan_out(phop *h, vr_errbuf *err) {
  preq *q = h->q;
  const pl_task *pt = &q->pp->t[h->pub.task];
  const vr_fanout *a = &pt->fan;
  if (a->kind == VR_FANOUT_NONE) return 0;
  const vr_tensor *sc = find_out(&h->pub.rt, a->scores), *lb = find_out(&h->pub.rt, a->labels);
  int R = a->grid_h * a->grid_w;
  int64_t rows;
  const float *in = hop_input(h, &rows);
  if (!sc || !lb || sc->dtype != VR_DT_F32 || lb->dtype != VR_DT_F32 ||
      sc->nbytes != (size_t)(rows * R) * sizeof(float) ||
      lb->nbytes != (size_t)(rows * R * a->n_labels) * sizeof(float))
    return vr_errf(err, VR_EFORMAT,
                   "adapter: outputs '%s' [%lld,%d] and '%s' [%lld,%d,%d] (FP32) expected",
                   a->scores, (long long)rows, R, a->labels, (long long)rows, R, a->n_labels);
  int64_t crop_chw[3];
  vr_fanout_crop_shape(a, pt->in_chw, crop_chw, err);
  size_t in_row = (size_t)(pt->in_chw[0] * pt->in_chw[1] * pt->in_chw[2]);
  size_t crop_n = (size_t)(crop_chw[0] * crop_chw[1] * crop_chw[2]);
  vr_fanout_region reg[1024];
  for (int64_t row = 0; row < rows; row++) {
    int n = vr_fanout_regions(a, (const float *)sc->data + row * R,
                              (const float *)lb->data + row * R * a->n_labels, pt->in_chw,
                              reg, 1024);
    for (int i = 0; i < n; i++) {
      int child = pt->child_of_label[reg[i].label];
      if (child < 0) continue; /* that label leaves the pipeline */
      phop *c = new_hop(q, child, h, h->pub.crop ? h->pub.row : (int)row);
      float *crop = c ? vr_malloc(crop_n * sizeof *crop) : NULL;
      if (!crop) {
        if (c) finish_hop(c, VR_POUT_FAILED, "out of memory");
        return vr_errf(err, VR_ENOMEM, "out of memory for a crop");
      }
      vr_fanout_crop(a, in + (size_t)(h->pub.crop ? 0 : row) * in_row, pt->in_chw, &reg[i],
                     crop);
      c->pub.region = reg[i].region;
      c->pub.label = a->label_names[reg[i].label];
      c->pub.score = reg[i].score;
      c->pub.crop = crop;
      c->pub.crop_shape[0] = 1;
      memcpy(&c->pub.crop_shape[1], crop_chw, sizeof crop_chw);
      h->pub.fanout++;
      const vr_pipe_task *task = &q->pp->spec->tasks[h->pub.task];
      for (int k = 0; k < task->nchildren; k++)
        if (task->children[k] == child) h->pub.fanout_to[k]++;
      start_hop(c);
    }
  }
  return 0;
}

static void on_done(vr_rt_request *r, void *user) {
  phop *h = user;
  preq *q = h->q;
  if (!h->pub.planned) vr_control_completed(q->ps->ctl, &h->route, r);
  /* A request dropped or rejected in the queue never started. */
  int ran = r->start_ns > 0;
  int64_t left = ran ? r->start_ns : r->end_ns;
  h->pub.queue_ns = left > r->arrival_ns ? left - r->arrival_ns : 0;
  h->pub.compute_ns = ran && r->end_ns > r->start_ns ? r->end_ns - r->start_ns : 0;
  h->pub.batch_ns = ran && r->batch_ns > 0 ? r->batch_ns : 0;
  if (r->status) {
    vr_pipe_outcome o = r->outcome == VR_OUT_DROPPED    ? VR_POUT_DROPPED
                        : r->outcome == VR_OUT_REJECTED ? VR_POUT_REJECTED
                                                        : VR_POUT_FAILED;
    /* The runtime refused the hop's inputs, not its queue (name, count,
     * type, shape, rows past the max batch): at the root they are the
     * client's, a bad request (400, as /v2/apps answers it); below it
     * they are the adapter's crops, a failure. Neither is "rejected"
     * (503: try again later, which would fail again). */
    int bad = r->outcome == VR_OUT_REJECTED &&
              (r->status == VR_EINVAL || r->status == VR_ETYPE ||
               r->status == VR_ESHAPE || r->status == VR_ELIMIT);
    if (bad && !h->par) q->bad_input = r->status; /* read once every hop finished */
    else if (bad) o = VR_POUT_FAILED;
    return finish_hop(h, o, r->err.msg);
  }
  vr_errbuf err = {0};
  if (fan_out(h, &err)) return finish_hop(h, VR_POUT_FAILED, err.msg);
  finish_hop(h, VR_POUT_OK, NULL);
}

/* Tells the control plane a routed hop will not run (its instance's
 * in-flight count), then ends the hop. */
static void abandon(phop *h, vr_pipe_outcome o, const char *msg) {
  if (!h->pub.planned) vr_control_not_run(h->q->ps->ctl, &h->route);
  finish_hop(h, o, msg);
}

static void submit(phop *h, const char *model, int instance_id, int deadline_drops);

/* Why a task's app has no registered model (every one unregistered since
 * the pipeline was compiled; it keeps its candidates, pipes_refresh.c):
 * the pipeline cannot be served now, which is no server fault (500) but
 * a state the operator can end (503, as VR_ESTATE). */
static void app_gone_msg(const pl_pipe *pp, int t, char *msg, size_t size) {
  snprintf(msg, size, "app '%.64s' has no registered model: pipeline '%.64s' cannot "
           "be served until one is registered into it",
           pp->spec->tasks[t].app, pp->spec->name);
}

/* The hop's app went after the request started (vr_pipes_infer checks
 * every task's at its start). */
static void app_gone(phop *h) {
  char msg[400];
  app_gone_msg(h->q->pp, h->pub.task, msg, sizeof msg);
  finish_hop(h, VR_POUT_REJECTED, msg);
}

static void on_routed(void *tag, const vr_ctl_route *route) {
  phop *h = tag;
  h->route = *route;
  snprintf(h->pub.model, sizeof h->pub.model, "%s", route->model);
  snprintf(h->pub.variant, sizeof h->pub.variant, "%s", route->variant_name);
  h->pub.accuracy = route->accuracy;
  if (route->status == VR_ENOENT) return app_gone(h); /* no such app: see app_gone */
  if (route->status) {
    vr_pipe_outcome o = route->status == VR_EINFEASIBLE ? VR_POUT_INFEASIBLE
                        : route->status == VR_EBUSY     ? VR_POUT_REJECTED
                                                        : VR_POUT_FAILED;
    return finish_hop(h, o, route->msg);
  }
  submit(h, route->model, route->instance_id, 1);
}

/* Queues the hop on an instance of model; with deadline_drops 0 (a
 * pipeline policy's drop mode keeps the hop: vr_edrop_deadline_drops) it
 * is neither dropped for its deadline here nor by the queue. */
static void submit(phop *h, const char *model, int instance_id, int deadline_drops) {
  preq *q = h->q;
  char msg[160];
  int64_t now = vr_clock_now(q->ps->clock);
  if (deadline_drops && vr_fanout_hop_expired(now, q->deadline_ns)) { /* e.g. after a load */
    snprintf(msg, sizeof msg, "end-to-end deadline passed %.3f ms before the hop was queued",
             (now - q->deadline_ns) / 1e6);
    return abandon(h, VR_POUT_DROPPED, msg);
  }
  /* a hop on another worker (following the controller's plan) names the
   * input as the task's first model does: its models share that input */
  int remote = instance_id == PL_REMOTE_ID;
  vr_model_config cfg;
  const char *in0 = q->pp->t[h->pub.task].in0.name;
  if (remote && !q->ps->remote) {
    snprintf(msg, sizeof msg, "model '%s' is on another worker and this one cannot reach it",
             model);
    return abandon(h, VR_POUT_FAILED, msg);
  }
  if (!remote && vr_rt_model_config(q->ps->rt, model, &cfg)) {
    /* unloaded since it was picked (a plan moved it): as a draining queue */
    snprintf(msg, sizeof msg, "model '%s' is not loaded (unloaded meanwhile)", model);
    return abandon(h, VR_POUT_REJECTED, msg);
  }
  if (!remote) in0 = cfg.inputs[0].name;
  vr_rt_request *r = &h->pub.rt;
  vr_rt_request_init(r);
  if (h->pub.crop) {
    r->n_in = 1;
    snprintf(h->in0, sizeof h->in0, "%s", in0); /* cfg is this frame's */
    r->in[0] = (vr_tensor){h->in0, VR_DT_F32, 4, {0}, h->pub.crop, 0};
    memcpy(r->in[0].shape, h->pub.crop_shape, sizeof h->pub.crop_shape);
    r->in[0].nbytes = (size_t)(h->pub.crop_shape[1] * h->pub.crop_shape[2] *
                               h->pub.crop_shape[3]) * sizeof(float);
  } else {
    r->n_in = q->q.n_in;
    memcpy(r->in, q->q.in, sizeof q->q.in);
  }
  /* the queue drops by it and sizes batches to it; none: the answer-time
   * check (vr_drop_answer_due) still keeps a late answer from the client */
  r->timeout_ns = deadline_drops ? q->deadline_ns - now : 0;
  r->done = on_done;
  r->user = h;
  if (remote) q->ps->remote(q->ps->remote_user, model, r, h->pub.worker);
  else vr_rt_submit_to(q->ps->rt, instance_id, r);
}

/* Uniform in [0,1) for the routing tables (xorshift per thread: the
 * request path takes no lock for it). */
static double unif(void) {
  static __thread uint64_t x;
  if (!x) x = (uint64_t)vr_clock_now(vr_clock_monotonic()) ^ (uint64_t)(uintptr_t)&x;
  x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  return (double)(x >> 11) / 9007199254740992.0;
}

/* Ends a hop that starts past the request's deadline (vr_fanout_hop_expired). */
static void end_expired(phop *h, int64_t now) {
  char msg[160];
  snprintf(msg, sizeof msg, "end-to-end deadline passed %.3f ms before this hop",
           (now - h->q->deadline_ns) / 1e6);
  finish_hop(h, VR_POUT_DROPPED, msg);
}

/* Under a pipeline policy with a plan in force: routes the hop by the
 * plan's tables and the per-hop rule, and queues it (or ends it dropped).
 * 0 when there is no plan (route it by INFaaS selection). */
static int policy_hop(phop *h, int64_t now) {
  preq *q = h->q;
  pl_pipe *pp = q->pp;
  const phop *par = h->par;
  pl_pick_in in = {.task = h->pub.task,
                   .parent_slot = par ? par->slot : -1,
                   .parent_budget_sum = par ? par->budget_sum : 0,
                   .elapsed_ms = (now - q->arrival_ns) / 1e6,
                   .spent_ms = par ? (par->pub.queue_ns + par->pub.compute_ns) / 1e6 : 0,
                   .slo_ms = (q->deadline_ns - q->arrival_ns) / 1e6,
                   .drop_mode = q->ps->pdef ? q->ps->pdef->drop_mode : 0,
                   .expired = vr_fanout_hop_expired(now, q->deadline_ns),
                   .u = unif()};
  pl_pick pk;
  pthread_mutex_lock(&pp->mu);
  /* a parent routed by INFaaS (before the first plan), or by a view
   * dropped since (its slot indexes another view): its child by INFaaS */
  int rc = par && (par->slot < 0 || par->pol_gen != pp->pol_gen)
               ? -1
               : vr__pipe_pol_pick(pp, &in, &pk);
  int gen = pp->pol_gen;
  pthread_mutex_unlock(&pp->mu);
  if (rc < 0) return 0;
  h->pub.planned = 1;
  h->pol_gen = gen;
  h->slot = pk.slot;
  h->budget_sum = pk.budget_sum;
  char msg[200];
  if (pk.expired) {
    end_expired(h, now);
    return 1;
  }
  if (pk.verdict == VR_HOP_DROP) {
    snprintf(msg, sizeof msg, "early drop: %.3f ms behind the path's budget and no backup "
             "variant fits", pk.behind_ms);
    finish_hop(h, VR_POUT_DROPPED, msg);
    return 1;
  }
  if (pk.instance_id == -1) { /* PL_REMOTE_ID: on another worker */
    snprintf(msg, sizeof msg, "no instance serves the task under the plan now");
    finish_hop(h, VR_POUT_DROPPED, msg);
    return 1;
  }
  snprintf(h->pub.model, sizeof h->pub.model, "%s", pk.model);
  snprintf(h->pub.variant, sizeof h->pub.variant, "%s", pk.variant);
  h->pub.accuracy = pk.accuracy;
  submit(h, pk.model, pk.instance_id, pk.deadline_drops);
  return 1;
}

static void start_hop(phop *h) {
  preq *q = h->q;
  const vr_pipeline *sp = q->pp->spec;
  const vr_pipe_task *t = &sp->tasks[h->pub.task];
  int64_t now = vr_clock_now(q->ps->clock);
  h->pub.start_ns = now - q->arrival_ns;
  if (policy_hop(h, now)) return; /* its drop mode says whether it expires */
  if (vr_fanout_hop_expired(now, q->deadline_ns)) return end_expired(h, now);
  const pl_task *pt = &q->pp->t[h->pub.task];
  vr_ctl_query cq = {.app = t->app};
  cq.latency_ms = vr_fanout_hop_slo_ms((q->deadline_ns - now) / 1e6, pt->levels);
  cq.min_accuracy = vr_fanout_task_min_accuracy(q->min_acc, pt->depth_max);
  vr_control_route(q->ps->ctl, &cq, on_routed, h);
}

static void fail_now(const char *pipeline, int status, const char *msg, vr_pipe_done_fn done,
                     void *tag) {
  vr_pipe_result *r = vr_calloc(1, sizeof *r);
  if (!r) return done(&k_oom, tag);
  snprintf(r->pipeline, sizeof r->pipeline, "%s", pipeline ? pipeline : "");
  r->outcome = VR_POUT_FAILED;
  r->status = status;
  snprintf(r->msg, sizeof r->msg, "%s", msg);
  done(r, tag);
}

/* A task whose app has no registered model: the request is rejected
 * before any task runs, as the hop reaching that task would be (app_gone)
 * once the root detector and the tasks before it had spent their work.
 * The result has no hops; it counts as a request of the pipeline. */
static int reject_if_app_gone(vr_pipes *p, pl_pipe *pp, const vr_pipe_query *q,
                              int64_t arrival_ns, vr_pipe_done_fn done, void *tag) {
  const vr_pipeline *sp = pp->spec;
  int t = 0;
  while (t < sp->ntasks && vr_control_has_app(p->ctl, sp->tasks[t].app)) t++;
  if (t == sp->ntasks) return 0;
  vr_pipe_result *r = vr_calloc(1, sizeof *r);
  if (!r) {
    vr__pipe_unref(pp);
    done(&k_oom, tag);
    return 1;
  }
  char msg[400];
  app_gone_msg(pp, t, msg, sizeof msg);
  snprintf(r->pipeline, sizeof r->pipeline, "%s", sp->name);
  snprintf(r->msg, sizeof r->msg, "task '%.64s': %.400s", sp->tasks[t].name, msg);
  r->outcome = VR_POUT_REJECTED;
  r->arrival_ns = arrival_ns;
  r->deadline_ns = arrival_ns + (int64_t)((q->latency_ms > 0 ? q->latency_ms : sp->slo_ms) * 1e6);
  r->end_ns = vr_clock_now(p->clock);
  pl_pipe *cur = vr__pipe_lock_current(pp);
  cur->requests++;
  pthread_mutex_unlock(&cur->mu);
  vr__pipe_count_request(pp, r);
  r->pin = pp; /* our reference moves to the result */
  done(r, tag);
  return 1;
}

/* The root input must be a float image batch the adapter can crop. */
static int check_root_input(const pl_pipe *pp, const vr_pipe_query *q, vr_errbuf *err) {
  const pl_task *rt = &pp->t[0];
  if (q->n_in < 1) return vr_errf(err, VR_EINVAL, "the request has no inputs");
  if (rt->fan.kind == VR_FANOUT_NONE) return 0; /* the runtime checks the rest */
  const vr_tensor *x = &q->in[0];
  if (x->dtype != VR_DT_F32 || x->ndim != 4 || x->shape[1] != rt->in_chw[0] ||
      x->shape[2] != rt->in_chw[1] || x->shape[3] != rt->in_chw[2] || x->shape[0] < 1)
    return vr_errf(err, VR_EINVAL,
                   "input '%s' must be FP32 [N,%lld,%lld,%lld] (the root task's images)",
                   x->name ? x->name : "", (long long)rt->in_chw[0],
                   (long long)rt->in_chw[1], (long long)rt->in_chw[2]);
  return 0;
}

void vr_pipes_infer(vr_pipes *p, const vr_pipe_query *q, vr_pipe_done_fn done, void *tag) {
  char msg[256];
  pl_pipe *pp = vr__pipes_get_synced(p, q->pipeline);
  if (!pp) {
    snprintf(msg, sizeof msg, "no registered pipeline named '%.100s'", q->pipeline);
    return fail_now(q->pipeline, VR_ENOENT, msg, done, tag);
  }
  vr_errbuf err = {0};
  preq *r = NULL;
  int64_t at = vr_clock_now(p->clock);
  int64_t arrival = q->arrived_ns > 0 && q->arrived_ns < at ? q->arrived_ns : at;
  if (!check_root_input(pp, q, &err) && reject_if_app_gone(p, pp, q, arrival, done, tag))
    return;
  if (err.code || !(r = vr_calloc(1, sizeof *r))) {
    vr__pipe_unref(pp);
    return fail_now(q->pipeline, err.code ? err.code : VR_ENOMEM,
                    err.msg[0] ? err.msg : "out of memory", done, tag);
  }
  r->ps = p;
  r->pp = pp;
  r->q = *q;
  r->arrival_ns = arrival;
  double slo = q->latency_ms > 0 ? q->latency_ms : pp->spec->slo_ms;
  r->deadline_ns = r->arrival_ns + (int64_t)(slo * 1e6);
  r->min_acc = q->min_accuracy;
  pthread_mutex_init(&r->mu, NULL);
  vr_vec_init(&r->hops, sizeof(phop *));
  r->done = done;
  r->tag = tag;
  /* Hold one pending count across the root's start so that a root that
   * finishes inline cannot end the request under us. */
  r->pending = 1;
  pl_pipe *cur = vr__pipe_lock_current(pp); /* replaced since we took it: counts there */
  cur->arrivals += (uint64_t)(q->in[0].shape[0] > 0 ? q->in[0].shape[0] : 1);
  cur->requests++;
  vr__pipe_note_arrival(cur, r->arrival_ns);
  pthread_mutex_unlock(&cur->mu);
  phop *root = new_hop(r, 0, NULL, -1);
  if (root) start_hop(root);
  pthread_mutex_lock(&r->mu);
  int last = --r->pending == 0;
  pthread_mutex_unlock(&r->mu);
  if (last) finish_request(r);
}
