/* The Proteus-like pipeline-agnostic accuracy scaling (loki.h,
 * vr_proteus_plan): every task planned as an independent model on the
 * columns and rows the Loki MILPs use (loki_int.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy/loki_int.h"

/* Proteus-like: one prefix per (task, variant) with m = the task's demand,
 * flows are the fractions of each task's own demand. */
static int proteus_rows(model *md, vr_milp *m, const double *task_qps,
                        int workers, const vr_loki_opts *o, rowbuf *rb,
                        const int *alpha) {
  const vr_pipeline *p = md->p;
  int ns = md->shape->off[p->ntasks];
  for (int t = 0; t < p->ntasks; t++) {
    rb->n = 0;
    for (int q = 0; q < md->npre; q++)
      if (md->pre[q].task == t) vr__loki_rb_add(rb, md->pre[q].col, 1);
    vr__loki_rb_add(rb, alpha[t], -1);
    vr_milp_row(m, rb->n, rb->idx, rb->k, 'E', 0), md->rows++;
  }
  for (int q = 0; q < md->npre; q++) {
    int s = md->pre[q].slot;
    rb->n = 0;
    vr__loki_rb_add(rb, md->pre[q].col, o->slack * task_qps[md->pre[q].task]);
    vr__loki_capacity_rows(md, m, rb, s);
  }
  rb->n = 0;
  for (int s = 0; s < ns; s++)
    for (int b = 0; b < NB; b++)
      if (md->w[s][b] >= 0) vr__loki_rb_add(rb, md->w[s][b], 1);
  if (rb->n) vr_milp_row(m, rb->n, rb->idx, rb->k, 'L', workers), md->rows++;
  return 0;
}

/* What no solve can change: fewer workers than the tasks a request
 * reaches (an instance of each; the MILP, each task on its own, placed
 * them on some and returned a plan no request could pass), or a task no
 * variant and batch fits its share of the SLO (SLO / depth, halved). The
 * plan would serve nothing end to end: VR_EINFEASIBLE naming the tasks. */
static int static_checks(const vr_pipeline *p, const vr_profile *prof,
                         const vr_pipe_plan *shape, int workers,
                         const vr_loki_opts *o, vr_errbuf *err) {
  int rc = vr__loki_too_few_workers(p, workers, 0, err), depth = 0;
  int reached[VR_PIPE_MAX_TASKS];
  if (rc) return rc;
  for (int t = 0; t < p->ntasks; t++) {
    int d = 1;
    for (int a = p->tasks[t].parent; a >= 0; a = p->tasks[a].parent) d++;
    if (d > depth) depth = d;
  }
  double half = (p->slo_ms / depth - o->comm_ms) / 2;
  vr__loki_reached(p, reached);
  for (int t = 0; t < p->ntasks && !rc; t++)
    if (reached[t])
      rc = vr__loki_task_unservable(p, prof, shape, o, 0, half, t, "proteus",
                                    err);
  return rc;
}

int vr_proteus_plan(const vr_pipeline *p, const vr_profile *prof,
                    const double *task_qps, int workers,
                    const vr_loki_opts *o, vr_pipe_plan *plan,
                    vr_loki_stats *st, vr_errbuf *err) {
  vr_loki_opts def;
  if (!o) vr_loki_opts_default(&def), o = &def;
  vr_loki_stats tmp;
  if (!st) st = &tmp;
  memset(st, 0, sizeof *st);
  st->step = 2;
  int rc = static_checks(p, prof, plan, workers, o, err);
  if (rc) return rc;
  model *md = calloc(1, sizeof *md);
  vr_milp *m = vr_milp_new(1);
  rowbuf rb = {0};
  double *load = NULL, total = 0, q[VR_PIPE_MAX_TASKS];
  int depth = 0, alpha[VR_PIPE_MAX_TASKS];
  if (!md || !m || !(md->pre = malloc((plan->off[p->ntasks] + 1) *
                                      sizeof *md->pre))) {
    rc = vr_errf(err, VR_ENOMEM, "proteus: out of memory");
    goto out;
  }
  md->p = p, md->prof = prof, md->shape = plan;
  for (int t = 0; t < p->ntasks; t++) {
    int d = 1;
    for (int a = p->tasks[t].parent; a >= 0; a = p->tasks[a].parent) d++;
    if (d > depth) depth = d;
    q[t] = task_qps[t] > 0.01 ? task_qps[t] : 0.01;
    total += q[t];
  }
  for (int t = 0; t < p->ntasks; t++) {
    alpha[t] = vr_milp_col(m, 0, 1, BIG_SERVED * q[t] / total, 0);
    for (int v = 0; v < p->tasks[t].nvariants; v++) {
      prefix *pr = &md->pre[md->npre++];
      *pr = (prefix){.task = t, .slot = plan->off[t] + v, .parent = -1,
                     .m = q[t], .acc = vr__loki_acc01(&p->tasks[t].variants[v]),
                     .hops = 1};
      pr->col = vr_milp_col(m, 0, 1, q[t] / total * pr->acc, 0);
    }
  }
  double half = (p->slo_ms / depth - o->comm_ms) / 2;
  double *maxload = calloc(plan->off[p->ntasks] + 1, sizeof *maxload);
  if (!maxload) {
    rc = vr_errf(err, VR_ENOMEM, "proteus: out of memory");
    goto out;
  }
  for (int k = 0; k < md->npre; k++)
    maxload[md->pre[k].slot] = o->slack * md->pre[k].m;
  vr__loki_add_batch_cols(md, m, o, half, workers, 0, 0, maxload, NULL, 0);
  free(maxload);
  int maxrow = md->npre + 2 * VR_PIPE_MAX_TASKS * VR_PIPE_MAX_VARIANTS * NB + 8;
  rb.idx = malloc(maxrow * sizeof *rb.idx);
  rb.k = malloc(maxrow * sizeof *rb.k);
  load = calloc(plan->off[p->ntasks] + 1, sizeof *load);
  if (!rb.idx || !rb.k || !load) {
    rc = vr_errf(err, VR_ENOMEM, "proteus: out of memory");
    goto out;
  }
  proteus_rows(md, m, q, workers, o, &rb, alpha);
  int status = vr_milp_solve(m, o->time_limit_s);
  st->status = status, st->cols = vr_milp_ncols(m), st->rows = md->rows;
  st->prefixes = md->npre;
  if (status == VR_MILP_INFEASIBLE) { /* alpha = 0 is always feasible */
    rc = vr_errf(err, VR_EINFEASIBLE, "proteus: CBC found the MILP "
                 "infeasible");
    goto out;
  }
  const double *x = vr_milp_x(m);
  double served = 0, acc = 0;
  for (int t = 0; status != VR_MILP_NONE && t < p->ntasks; t++)
    served += x[alpha[t]] * q[t] / total;
  if (!(served > 1e-9)) { /* the checks above passed: not the tasks */
    rc = status == VR_MILP_OPTIMAL
             ? vr_errf(err, VR_EINFEASIBLE, "proteus: no plan for pipeline "
                       "'%s' serves any request", p->name)
             : vr_errf(err, VR_EBACKEND, "proteus: CBC stopped at its time "
                       "limit (%g s) %s; not a proof that none exists",
                       o->time_limit_s, status == VR_MILP_NONE
                           ? "with no plan" : "and its best plan serves nothing");
    goto out;
  }
  vr__loki_extract(md, x, 1, o->slack, 0, plan, load);
  for (int k = 0; k < md->npre; k++)
    acc += x[md->pre[k].col] * md->pre[k].m / total * md->pre[k].acc;
  st->served = served;
  st->accuracy = served > 0 ? 100 * acc / served : 0;
  plan->accuracy = st->accuracy;
  plan->feasible = served >= 0.999;
  plan->accuracy_scaled = 1;
  plan->fill = 1 / o->slack;
  vr__loki_spread_idle(plan, prof, load, workers);
out:
  free(rb.idx), free(rb.k), free(load);
  if (md) free(md->pre);
  free(md);
  vr_milp_free(m);
  return rc;
}
