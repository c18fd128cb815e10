/* Loki's MILPs (loki.h); the Proteus-like per-task MILP, which shares
 * their columns and rows (loki_int.h), is in proteus_plan.c, and why no
 * plan serves (the errors) in loki_check.c. */
#include "policy/loki.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy/loki_int.h"
#include "policy/milp.h"

/* accuracy modes stop within this of the best bound: objective units
 * (mean end-to-end accuracy in 0..1), i.e. 0.01 accuracy points */
#define LOKI_ACC_GAP 1e-4

void vr_loki_opts_default(vr_loki_opts *o) {
  memset(o, 0, sizeof *o);
  o->slack = 1.0;
  o->time_limit_s = 2;
  o->plan_budget_s = 10;
  o->max_batch = 64;
}

static int build_prefixes(model *md, int hw_only, vr_errbuf *err) {
  const vr_pipeline *p = md->p;
  int n = 0;
  md->pre = malloc(MAX_PREFIXES * sizeof *md->pre);
  if (!md->pre) return vr_errf(err, VR_ENOMEM, "loki: out of memory");
  /* tasks in preorder: the parent's prefixes exist before the child's */
  int first[VR_PIPE_MAX_TASKS], count[VR_PIPE_MAX_TASKS];
  for (int t = 0; t < p->ntasks; t++) {
    const vr_pipe_task *tk = &p->tasks[t];
    first[t] = n, count[t] = 0;
    int par = tk->parent;
    int np = par < 0 ? 1 : count[par];
    for (int q = 0; q < np; q++) {
      const prefix *pq = par < 0 ? NULL : &md->pre[first[par] + q];
      double m = 1, acc = 1;
      if (pq) {
        const vr_pipe_task *pt = &p->tasks[par];
        const vr_pipe_variant *pv = &pt->variants[pq->slot - md->shape->off[par]];
        int c = 0;
        while (pt->children[c] != t) c++;
        m = pq->m * pv->mult * pv->share[c];
        acc = pq->acc;
      }
      for (int v = 0; v < tk->nvariants; v++) {
        if (!vr__loki_allowed(p, t, v, hw_only)) continue;
        if (n >= MAX_PREFIXES)
          return vr_errf(err, VR_ELIMIT, "loki: the augmented graph has more "
                         "than %d paths; too large for the MILP",
                         MAX_PREFIXES);
        md->pre[n] = (prefix){.task = t, .slot = md->shape->off[t] + v,
                              .parent = pq ? first[par] + q : -1, .m = m,
                              .acc = acc * vr__loki_acc01(&tk->variants[v]),
                              .hops = pq ? pq->hops + 1 : 1};
        n++, count[t]++;
      }
    }
  }
  md->npre = n;
  return 0;
}

static double lat_b(const model *md, int slot, int b) {
  return vr_profile_latency_ms(&md->prof[slot], vr_prof_batch(b), 0.5);
}

static int batch_ok(const model *md, const vr_loki_opts *o, double half,
                    int hw_only, int t, int v, int b) {
  int s = md->shape->off[t] + v, bs = vr_prof_batch(b);
  return vr__loki_allowed(md->p, t, v, hw_only) && bs <= o->max_batch &&
         bs <= md->prof[s].max_batch && lat_b(md, s, b) <= half;
}

/* Columns w/z for every allowed (slot, batch); -1 where not allowed. With
 * fixb (the level decomposition) only w at batch fixb[s] (-1: none) and no
 * z. relax: continuous columns (the LP relaxation). */
void vr__loki_add_batch_cols(model *md, vr_milp *m, const vr_loki_opts *o,
                             double half, int workers, int hw_only,
                             double w_obj, const double *maxload,
                             const int *fixb, int relax) {
  const vr_pipeline *p = md->p;
  for (int t = 0; t < p->ntasks; t++)
    for (int v = 0; v < p->tasks[t].nvariants; v++) {
      int s = md->shape->off[t] + v;
      for (int b = 0; b < NB; b++) {
        md->w[s][b] = md->z[s][b] = -1;
        int bs = vr_prof_batch(b);
        if (!batch_ok(md, o, half, hw_only, t, v, b) || (fixb && fixb[s] != b))
          continue;
        /* a tight bound on w (what the slot's largest possible load
         * needs) keeps the LP relaxation close: CBC proves much faster */
        double need = ceil(maxload[s] * lat_b(md, s, b) / (bs * 1000.0) - 1e-9);
        int ub = need < 1 ? 1 : need > workers ? workers : (int)need;
        md->w[s][b] = vr_milp_col(m, 0, ub, w_obj, !relax);
        if (fixb) continue;
        md->z[s][b] = vr_milp_col(m, 0, 1, 0, !relax);
        int idx[2] = {md->w[s][b], md->z[s][b]};
        double k[2] = {1, -ub};
        vr_milp_row(m, 2, idx, k, 'L', 0), md->rows++;
      }
    }
}

/* Closes a capacity row whose load terms are already in rb (load <= sum
 * of w(b) x throughput(b)) and adds the slot's one-batch row. */
void vr__loki_capacity_rows(model *md, vr_milp *m, rowbuf *rb, int s) {
  for (int b = 0; b < NB; b++)
    if (md->w[s][b] >= 0)
      vr__loki_rb_add(rb, md->w[s][b],
                      -vr_prof_batch(b) * 1000.0 / lat_b(md, s, b));
  vr_milp_row(m, rb->n, rb->idx, rb->k, 'L', 0), md->rows++;
  rb->n = 0;
  for (int b = 0; b < NB; b++)
    if (md->z[s][b] >= 0) vr__loki_rb_add(rb, md->z[s][b], 1);
  if (rb->n) vr_milp_row(m, rb->n, rb->idx, rb->k, 'L', 1), md->rows++;
}

static int build_rows(model *md, vr_milp *m, double demand, double half,
                      int workers, const vr_loki_opts *o, rowbuf *rb,
                      int latency) {
  const vr_pipeline *p = md->p;
  int ns = md->shape->off[p->ntasks];
  /* root: sum F(root prefixes) - alpha = 0 ; alpha column is col 0 */
  rb->n = 0;
  for (int i = 0; i < md->npre && md->pre[i].task == 0; i++)
    vr__loki_rb_add(rb, md->pre[i].col, 1);
  vr__loki_rb_add(rb, 0, -1);
  vr_milp_row(m, rb->n, rb->idx, rb->k, 'E', 0), md->rows++;
  /* conservation per prefix and child task */
  for (int q = 0; q < md->npre; q++) {
    const vr_pipe_task *tk = &p->tasks[md->pre[q].task];
    for (int c = 0; c < tk->nchildren; c++) {
      rb->n = 0;
      for (int i = q + 1; i < md->npre; i++)
        if (md->pre[i].parent == q && md->pre[i].task == tk->children[c])
          vr__loki_rb_add(rb, md->pre[i].col, 1);
      vr__loki_rb_add(rb, md->pre[q].col, -1);
      vr_milp_row(m, rb->n, rb->idx, rb->k, 'E', 0), md->rows++;
    }
  }
  /* capacity and one batch per slot */
  for (int s = 0; s < ns; s++) {
    rb->n = 0;
    for (int i = 0; i < md->npre; i++)
      if (md->pre[i].slot == s && md->pre[i].m > 0)
        vr__loki_rb_add(rb, md->pre[i].col, demand * o->slack * md->pre[i].m);
    if (rb->n) vr__loki_capacity_rows(md, m, rb, s);
  }
  /* workers */
  rb->n = 0;
  for (int s = 0; s < ns; s++)
    for (int b = 0; b < NB; b++)
      if (md->w[s][b] >= 0) vr__loki_rb_add(rb, md->w[s][b], 1);
  if (rb->n) vr_milp_row(m, rb->n, rb->idx, rb->k, 'L', workers), md->rows++;
  if (!latency) return 0; /* fixed batches: the levels hold it */
  /* latency of every leaf path whose variants are all hosted (routing may
   * use any of them, not only the paths the flows chose). The augmented
   * paths are the full product of each task's variants, so this is: along
   * every root-to-leaf task path, the sum over tasks of the slowest hosted
   * variant's latency L(t) <= half. L(t) >= sum_b l(b) z(b) per slot.
   * Exact, and without the big-M of a per-path row (which left CBC an LP
   * relaxation that ignored latency and cost it most of its time). */
  int lcol[VR_PIPE_MAX_TASKS];
  for (int t = 0; t < p->ntasks; t++) {
    lcol[t] = vr_milp_col(m, 0, half, 0, 0);
    for (int v = 0; v < p->tasks[t].nvariants; v++) {
      int s = md->shape->off[t] + v;
      rb->n = 0;
      for (int b = 0; b < NB; b++)
        if (md->z[s][b] >= 0) vr__loki_rb_add(rb, md->z[s][b], lat_b(md, s, b));
      if (!rb->n) continue;
      vr__loki_rb_add(rb, lcol[t], -1);
      vr_milp_row(m, rb->n, rb->idx, rb->k, 'L', 0), md->rows++;
    }
  }
  for (int t = 0; t < p->ntasks; t++) {
    if (p->tasks[t].nchildren) continue;
    rb->n = 0;
    for (int a = t; a >= 0; a = p->tasks[a].parent)
      vr__loki_rb_add(rb, lcol[a], 1);
    vr_milp_row(m, rb->n, rb->idx, rb->k, 'L', half), md->rows++;
  }
  return 0;
}

/* Idle workers become headroom on the variants in use, one at a time to
 * the one with the highest load per instance. */
void vr__loki_spread_idle(vr_pipe_plan *plan, const vr_profile *prof,
                          const double *load, int workers) {
  int ns = plan->off[plan->ntasks];
  while (plan->workers < workers) {
    int best = -1;
    double bu = 0;
    for (int s = 0; s < ns; s++) {
      const vr_pipe_alloc *a = &plan->a[s];
      if (a->inst <= 0 || a->cap_qps <= 0) continue;
      double u = load[s] / (a->inst * a->cap_qps);
      if (best < 0 || u > bu) best = s, bu = u;
    }
    if (best < 0) break;
    int t = 0;
    while (plan->off[t + 1] <= best) t++;
    vr_pipe_plan_set(plan, prof, t, best - plan->off[t],
                     plan->a[best].inst + 1, plan->a[best].batch);
  }
}

/* The smallest batch, up to the solver's bs, whose n instances still
 * carry load within the slot's own latency: the solver leaves the batch
 * free wherever capacity is not tight (one instance of a light variant at
 * batch 1 or 32 costs the same worker), and a larger max batch only
 * lengthens the task's latency budget and the queueing it allows (in the
 * simulator, off-peak violations 2-5% with the solver's arbitrary batch,
 * ~1% settled). */
static int settle_batch(const model *md, int s, int n, int bs, double load) {
  double lmax = vr_profile_latency_ms(&md->prof[s], bs, 0.5);
  for (int b = 0; vr_prof_batch(b) < bs; b++) {
    double l = lat_b(md, s, b);
    if (l <= lmax && n * vr_prof_batch(b) * 1000.0 / l >= load - 1e-6)
      return vr_prof_batch(b);
  }
  return bs;
}

/* Whether some flow reaches slot s: a prefix there that carries requests
 * (m > 0) with a flow above the solver's noise (its primal tolerance is
 * 1e-7). */
static int slot_carries(const model *md, const double *x, int s) {
  for (int q = 0; q < md->npre; q++)
    if (md->pre[q].slot == s && md->pre[q].m > 0 && x[md->pre[q].col] > 1e-6)
      return 1;
  return 0;
}

/* Reads w into the plan; load[slot] = expected qps. settle: lower each
 * batch as far as capacity for load x slack allows (settle_batch). A slot
 * no flow uses gets no instances: the accuracy modes price workers at 0
 * (Loki's (12) only bounds them), so the solver may leave w > 0 on a
 * variant that serves nothing; those workers go to spread_idle, as
 * headroom on the variants in use (the paper's accuracy scaling has every
 * server take part in query processing). Dropping a hosted variant only
 * loosens the latency rows. */
void vr__loki_extract(const model *md, const double *x, double demand,
                      double slack, int settle, vr_pipe_plan *plan,
                      double *load) {
  int ns = md->shape->off[md->p->ntasks];
  for (int s = 0; s < ns; s++) plan->a[s] = (vr_pipe_alloc){0}, load[s] = 0;
  plan->workers = 0;
  for (int q = 0; q < md->npre; q++)
    load[md->pre[q].slot] += demand * x[md->pre[q].col] * md->pre[q].m;
  for (int t = 0; t < md->p->ntasks; t++)
    for (int v = 0; v < md->p->tasks[t].nvariants; v++) {
      int s = md->shape->off[t] + v, n = 0, bs = 1;
      if (!slot_carries(md, x, s)) continue;
      for (int b = 0; b < NB; b++)
        if (md->w[s][b] >= 0 && lround(x[md->w[s][b]]) > 0)
          n += (int)lround(x[md->w[s][b]]), bs = vr_prof_batch(b);
      if (n && settle) bs = settle_batch(md, s, n, bs, load[s] * slack);
      if (n) vr_pipe_plan_set(plan, md->prof, t, v, n, bs);
    }
}

/* What every MILP of one vr_loki_plan step shares. */
typedef struct ctx {
  const vr_pipeline *p;
  const vr_profile *prof;
  const vr_loki_opts *o;
  const vr_pipe_plan *shape;
  double demand, half;
  int workers, mode, hw_only, nleaves;
  prefix *pre;
  int npre;
  double *maxload; /* slot: all of D through it */
  rowbuf rb;
  vr_milp_budget *budget; /* the plan's, shared by its steps */
} ctx;

/* Builds into md/m the MILP of c's mode (1: min workers, alpha = 1; 2: max
 * accuracy, alpha = 1; 3: max accuracy + BIG x alpha, best effort), with
 * the batch per slot free (fixb NULL) or fixed; relax: the LP relaxation.
 * NULL on allocation failure. */
static vr_milp *build(ctx *c, model *md, const int *fixb, int relax) {
  vr_milp *m = vr_milp_new(c->mode >= 2);
  if (!m) return NULL;
  md->p = c->p, md->prof = c->prof, md->shape = c->shape;
  md->pre = c->pre, md->npre = c->npre, md->rows = 0;
  /* col 0: alpha */
  vr_milp_col(m, c->mode == 3 ? 0 : 1, 1, c->mode == 3 ? BIG_SERVED : 0, 0);
  for (int q = 0; q < c->npre; q++) {
    double obj = 0;
    if (c->mode >= 2 && !c->p->tasks[c->pre[q].task].nchildren)
      obj = c->pre[q].acc / c->nleaves;
    c->pre[q].col = vr_milp_col(m, 0, 1, obj, 0);
  }
  /* mode 1 minimises workers; accuracy modes leave idle ones to
   * spread_idle (a tie-break weight would only slow CBC's proof) */
  vr__loki_add_batch_cols(md, m, c->o, c->half, c->workers, c->hw_only,
                 c->mode == 1 ? 1 : 0, c->maxload, fixb, relax);
  /* mode 1: workers are integers, so < 1 proves the optimum */
  vr_milp_set_gap(m, c->mode == 1 ? 0.5 : LOKI_ACC_GAP);
  build_rows(md, m, c->demand, c->half, c->workers, c->o, &c->rb, !fixb);
  return m;
}

/* Accuracy scaling by latency levels. The latency rows bind only through
 * L(t), each task's slowest hosted variant, and L(t) is one of the task's
 * (variant, batch) latencies. Fixing L for the tasks with children (a leaf
 * gets what its path leaves, half - the sum of its ancestors' L) fixes
 * every slot's best batch: the highest throughput within its task's L. The
 * rest is a small MILP without the z binaries and the latency rows, whose
 * LP relaxation CBC closes quickly. The optimum over all level vectors is
 * the optimum of the one-MILP formulation (the same model; only the search
 * is split), so: solve every vector's LP relaxation, then the MILPs in
 * decreasing order of their LP bound until the next bound cannot beat the
 * incumbent by more than LOKI_ACC_GAP. */

#define MAX_LEVEL_VECTORS 512
#define LEVELS_NOMEM -2

/* The batch of slot (t,v) with the highest throughput within budget; -1
 * when none fits. */
static int best_batch(const ctx *c, const model *md, int t, int v,
                      double budget) {
  int s = c->shape->off[t] + v, best = -1;
  double bq = 0;
  for (int b = 0; b < NB; b++) {
    if (!batch_ok(md, c->o, c->half, c->hw_only, t, v, b)) continue;
    double l = lat_b(md, s, b), q = vr_prof_batch(b) * 1000.0 / l;
    if (l <= budget + 1e-9 && q > bq) best = b, bq = q;
  }
  return best;
}

/* Fills fix[] for task t's slots within budget; how many fit. */
static int fix_task(const ctx *c, const model *md, int t, double budget,
                    int *fix) {
  int n = 0;
  for (int v = 0; v < c->p->tasks[t].nvariants; v++) {
    int b = best_batch(c, md, t, v, budget);
    fix[c->shape->off[t] + v] = b;
    n += b >= 0;
  }
  return n;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Task t's useful levels, ascending: a level is kept only if it changes
 * some slot's batch (a larger L with the same batches only takes budget
 * from the rest of the path). Returns how many (<= nvariants x NB). */
static int task_levels(const ctx *c, const model *md, int t, double *lev,
                       int *fix, int *prev) {
  const vr_pipe_task *tk = &c->p->tasks[t];
  int n = 0, kept = 0, off = c->shape->off[t];
  for (int v = 0; v < tk->nvariants; v++)
    for (int b = 0; b < NB; b++)
      if (batch_ok(md, c->o, c->half, c->hw_only, t, v, b))
        lev[n++] = lat_b(md, off + v, b);
  qsort(lev, n, sizeof *lev, cmp_dbl);
  for (int v = 0; v < tk->nvariants; v++) prev[off + v] = -1;
  for (int k = 0; k < n; k++) {
    fix_task(c, md, t, lev[k], fix);
    if (!memcmp(fix + off, prev + off, tk->nvariants * sizeof *fix)) continue;
    memcpy(prev + off, fix + off, tk->nvariants * sizeof *fix);
    lev[kept++] = lev[k];
  }
  return kept;
}

typedef struct level_vec {
  double bound; /* LP relaxation */
  int *fixb;    /* batch per slot */
} level_vec;

static int cmp_bound_desc(const void *a, const void *b) {
  double x = ((const level_vec *)a)->bound, y = ((const level_vec *)b)->bound;
  return (x < y) - (x > y);
}

/* Every level vector of the tasks with children that leaves every leaf a
 * budget >= 0 (the one MILP's L(leaf) >= 0), as fixb arrays into vecs (at most MAX_LEVEL_VECTORS;
 * more: -1; none: 0, and the caller solves one MILP). */
static int level_vectors(const ctx *c, const model *md, level_vec *vecs,
                         int *store, double (*lev)[VR_PIPE_MAX_VARIANTS * NB],
                         int *nlev) {
  const vr_pipeline *p = c->p;
  int ns = c->shape->off[p->ntasks], inner[VR_PIPE_MAX_TASKS], ni = 0;
  int idx[VR_PIPE_MAX_TASKS] = {0}, n = 0;
  long total = 1;
  for (int t = 0; t < p->ntasks; t++)
    if (p->tasks[t].nchildren) {
      if (!nlev[t]) return 0;
      total *= nlev[t], inner[ni++] = t;
      if (total > MAX_LEVEL_VECTORS) return -1;
    }
  for (long k = 0; k < total; k++) {
    double L[VR_PIPE_MAX_TASKS];
    for (int i = 0; i < ni; i++) L[inner[i]] = lev[inner[i]][idx[i]];
    int *fix = store + (size_t)n * ns, ok = 1;
    for (int t = 0; t < p->ntasks && ok; t++) {
      double budget = c->half;
      if (p->tasks[t].nchildren) budget = L[t];
      else
        for (int a = p->tasks[t].parent; a >= 0; a = p->tasks[a].parent)
          budget -= L[a];
      /* a leaf with no variant that fits can still be right when no
       * flow needs it (a share of 0); the LP decides */
      fix_task(c, md, t, budget, fix);
      ok = budget >= -1e-9;
    }
    if (ok) vecs[n].fixb = fix, n++;
    for (int i = 0; i < ni && ++idx[i] == nlev[inner[i]]; i++) idx[i] = 0;
  }
  return n;
}

/* Solves into *bm (built in best); a vr_milp_status, -1 when the levels
 * are too many (the caller solves one MILP) or LEVELS_NOMEM. */
static int solve_levels(ctx *c, model *cur, model *best, vr_milp **bm,
                        vr_loki_stats *st) {
  const vr_pipeline *p = c->p;
  int ns = c->shape->off[p->ntasks], rc = VR_MILP_INFEASIBLE, n;
  double (*lev)[VR_PIPE_MAX_VARIANTS * NB] = malloc(p->ntasks * sizeof *lev);
  int *nlev = calloc(p->ntasks, sizeof *nlev);
  int *fix = malloc(2 * (ns + 1) * sizeof *fix);
  level_vec *vecs = malloc(MAX_LEVEL_VECTORS * sizeof *vecs);
  int *store = malloc((size_t)MAX_LEVEL_VECTORS * (ns + 1) * sizeof *store);
  if (!lev || !nlev || !fix || !vecs || !store) {
    rc = LEVELS_NOMEM;
    goto out;
  }
  cur->p = p, cur->prof = c->prof, cur->shape = c->shape;
  for (int t = 0; t < p->ntasks; t++)
    if (p->tasks[t].nchildren)
      nlev[t] = task_levels(c, cur, t, lev[t], fix, fix + ns + 1);
  if ((n = level_vectors(c, cur, vecs, store, lev, nlev)) <= 0) {
    rc = -1;
    goto out;
  }
  int k = 0, proven = 1;
  for (int i = 0; i < n; i++) { /* LP bounds; drop the infeasible */
    if (vr_milp_budget_spent(c->budget)) { /* building it is wasted */
      proven = 0;
      break;
    }
    vr_milp *m = build(c, cur, vecs[i].fixb, 1);
    if (!m) {
      rc = LEVELS_NOMEM;
      goto out;
    }
    int s = vr_milp_solve_budget(m, c->o->time_limit_s, c->budget);
    st->subsolves++;
    if (s == VR_MILP_OPTIMAL)
      vecs[k].fixb = vecs[i].fixb, vecs[k++].bound = vr_milp_obj(m);
    else if (s != VR_MILP_INFEASIBLE) /* out of time: dropped, unproven */
      proven = 0;
    vr_milp_free(m);
  }
  qsort(vecs, k, sizeof *vecs, cmp_bound_desc);
  double inc = 0;
  for (int i = 0; i < k; i++) {
    if (*bm && vecs[i].bound <= inc + LOKI_ACC_GAP) break;
    if (vr_milp_budget_spent(c->budget)) { /* building it is wasted */
      proven = 0;
      break;
    }
    vr_milp *m = build(c, cur, vecs[i].fixb, 0);
    if (!m) {
      rc = LEVELS_NOMEM;
      goto out;
    }
    vr_milp_lean(m);
    if (*bm) vr_milp_set_cutoff(m, inc + LOKI_ACC_GAP);
    int s = vr_milp_solve_budget(m, c->o->time_limit_s, c->budget);
    st->subsolves++;
    if (s == VR_MILP_FEASIBLE || s == VR_MILP_NONE) proven = 0;
    if ((s == VR_MILP_OPTIMAL || s == VR_MILP_FEASIBLE) &&
        (!*bm || vr_milp_obj(m) > inc)) {
      memcpy(best, cur, sizeof *best); /* its w columns */
      vr_milp_free(*bm);
      *bm = m, inc = vr_milp_obj(m);
    } else {
      vr_milp_free(m);
    }
  }
  if (*bm) rc = proven ? VR_MILP_OPTIMAL : VR_MILP_FEASIBLE;
  else if (!proven) rc = VR_MILP_NONE;
out:
  free(lev), free(nlev), free(fix), free(vecs), free(store);
  return rc;
}

/* Reads the solution of m (built into md) into the plan and stats. */
static int finish(ctx *c, const model *md, vr_milp *m, vr_pipe_plan *plan,
                  vr_loki_stats *st, vr_errbuf *err) {
  const vr_pipeline *p = c->p;
  const double *x = vr_milp_x(m);
  double *load = calloc(plan->off[p->ntasks] + 1, sizeof *load);
  if (!load) return vr_errf(err, VR_ENOMEM, "loki: out of memory");
  /* hardware scaling leaves the batch free where capacity is slack; on a
   * full cluster (accuracy scaling) the largest batch's throughput is
   * headroom for bursts, so it stays */
  vr__loki_extract(md, x, c->demand, c->o->slack, c->mode == 1, plan, load);
  double acc = 0;
  for (int q = 0; q < c->npre; q++)
    if (!p->tasks[c->pre[q].task].nchildren)
      acc += x[c->pre[q].col] * c->pre[q].acc / c->nleaves;
  st->served = x[0];
  st->accuracy = x[0] > 0 ? 100 * acc / x[0] : 0;
  st->cols = vr_milp_ncols(m), st->rows = md->rows;
  plan->accuracy = st->accuracy;
  plan->feasible = x[0] >= 0.999;
  plan->demand_qps = c->demand;
  plan->fill = 1 / c->o->slack;
  if (c->mode >= 2) vr__loki_spread_idle(plan, c->prof, load, c->workers);
  free(load);
  return 0;
}

/* Builds and solves one step: hardware scaling (mode 1) as one MILP;
 * accuracy scaling (modes 2, 3) by latency levels (loki_levels.inc) unless
 * o->single_milp or the levels are too many. */
static int solve(const vr_pipeline *p, const vr_profile *prof,
                 double demand, int workers, const vr_loki_opts *o, int mode,
                 int hw_only, vr_milp_budget *budget, vr_pipe_plan *plan,
                 vr_loki_stats *st, vr_errbuf *err) {
  ctx c = {.p = p, .prof = prof, .o = o, .shape = plan, .demand = demand,
           .budget = budget,
           .workers = workers, .mode = mode, .hw_only = hw_only};
  model *md = calloc(1, sizeof *md), *best = calloc(1, sizeof *best);
  vr_milp *m = NULL;
  int rc = 0, ns = plan->off[p->ntasks];
  for (int t = 0; t < p->ntasks; t++) c.nleaves += !p->tasks[t].nchildren;
  int maxrow = 2 * MAX_PREFIXES + 2 * VR_PIPE_MAX_TASKS * VR_PIPE_MAX_VARIANTS * NB + 8;
  c.rb.idx = malloc(maxrow * sizeof *c.rb.idx);
  c.rb.k = malloc(maxrow * sizeof *c.rb.k);
  c.maxload = calloc(ns + 1, sizeof *c.maxload);
  if (!md || !best || !c.rb.idx || !c.rb.k || !c.maxload) {
    rc = vr_errf(err, VR_ENOMEM, "loki: out of memory");
    goto out;
  }
  md->p = p, md->prof = prof, md->shape = plan;
  if ((rc = build_prefixes(md, hw_only, err))) goto out;
  c.pre = md->pre, c.npre = md->npre, md->pre = NULL;
  int depth = 0;
  for (int q = 0; q < c.npre; q++) {
    if (c.pre[q].hops > depth) depth = c.pre[q].hops;
    c.maxload[c.pre[q].slot] += demand * o->slack * c.pre[q].m;
  }
  c.half = p->slo_ms / 2 - o->comm_ms * depth;
  st->prefixes = c.npre, st->subsolves = 0;
  int status = -1;
  if (mode >= 2 && !o->single_milp)
    status = solve_levels(&c, md, best, &m, st);
  if (status == LEVELS_NOMEM) {
    rc = vr_errf(err, VR_ENOMEM, "loki: out of memory");
    goto out;
  }
  if (status < 0) { /* one MILP with the batch choice inside */
    if (!(m = build(&c, best, NULL, 0))) {
      rc = vr_errf(err, VR_ENOMEM, "loki: out of memory");
      goto out;
    }
    status = vr_milp_solve_budget(m, o->time_limit_s, budget);
    st->cols = vr_milp_ncols(m), st->rows = best->rows;
  }
  st->status = status;
  st->budget_out = budget->ran_out;
  if (status == VR_MILP_INFEASIBLE) {
    rc = VR_EINFEASIBLE; /* modes 1, 2; mode 3 always has alpha = 0 */
    goto out;
  }
  if (status == VR_MILP_NONE) {
    rc = vr__loki_no_plan_in_time(o, st, "found no plan", err);
    goto out;
  }
  rc = finish(&c, best, m, plan, st, err);
out:
  free(c.rb.idx), free(c.rb.k), free(c.maxload), free(c.pre);
  free(md), free(best);
  vr_milp_free(m);
  return rc;
}

/* A quick lower bound: the most accurate variants at their best batch
 * within half the SLO already need more workers than the cluster has.
 * Every variant tied at the top accuracy counts (Vario's variants of one
 * model at other thread counts or precisions tie): the fastest of them per
 * task, and below it the fewest requests any of them sends on; one
 * variant alone made a bound above the MILP's optimum and skipped
 * hardware scaling. */
static int hw_hopeless(const vr_pipeline *p, const vr_profile *prof,
                       double demand, int workers, const vr_loki_opts *o) {
  int off = 0;
  double rate[VR_PIPE_MAX_TASKS], need = 0;
  for (int t = 0; t < p->ntasks; t++) {
    const vr_pipe_task *tk = &p->tasks[t];
    int par = tk->parent;
    rate[t] = demand * o->slack;
    if (par >= 0) {
      const vr_pipe_task *pt = &p->tasks[par];
      int c = 0;
      while (pt->children[c] != t) c++;
      double m = INFINITY;
      for (int v = 0; v < pt->nvariants; v++)
        if (vr__loki_allowed(p, par, v, 1) && pt->variants[v].mult * pt->variants[v].share[c] < m)
          m = pt->variants[v].mult * pt->variants[v].share[c];
      rate[t] = m > 0 ? rate[par] * m : 0; /* no 0 x inf */
    }
    double best = 0;
    for (int v = 0; v < tk->nvariants; v++) {
      const vr_profile *pr = &prof[off + v];
      for (int b = 1; vr__loki_allowed(p, t, v, 1) && b <= pr->max_batch && b <= o->max_batch; b *= 2) {
        double l = vr_profile_latency_ms(pr, b, 0.5);
        if (l <= p->slo_ms / 2 && b * 1000.0 / l > best) best = b * 1000.0 / l;
      }
    }
    need += best > 0 ? ceil(rate[t] / best - 1e-9) : 1e9;
    off += tk->nvariants;
  }
  return need > workers;
}

int vr_loki_plan(const vr_pipeline *p, const vr_profile *prof,
                 double demand_qps, int workers, const vr_loki_opts *o,
                 vr_pipe_plan *plan, vr_loki_stats *st, vr_errbuf *err) {
  vr_loki_opts def;
  if (!o) vr_loki_opts_default(&def), o = &def;
  vr_loki_stats tmp;
  if (!st) st = &tmp;
  memset(st, 0, sizeof *st);
  if (demand_qps < 0.01) demand_qps = 0.01; /* keep one path alive */
  int rc = vr__loki_too_few_workers(p, workers, o->hw_only, err);
  if (rc) return rc;
  rc = VR_EINFEASIBLE;
  vr_milp_budget budget;
  vr_milp_budget_init(&budget, o->plan_budget_s);
  if (!o->no_hw_scaling && !hw_hopeless(p, prof, demand_qps, workers, o)) {
    st->step = 1;
    vr_errbuf hw_err = {0};
    rc = solve(p, prof, demand_qps, workers, o, 1, 1, &budget, plan, st,
               &hw_err);
    /* no plan in time is no plan found: Loki then scales accuracy, as
     * after a proof; it used to end the whole plan with VR_EBACKEND, so
     * the time one solve ran out decided the answer */
    int none = rc == VR_EINFEASIBLE ||
               (rc == VR_EBACKEND && st->status == VR_MILP_NONE);
    if (!none) {
      if (rc && err) *err = hw_err;
      plan->accuracy_scaled = 0;
      return rc;
    }
  }
  st->step = 2;
  rc = solve(p, prof, demand_qps, workers, o, 2, o->hw_only, &budget, plan,
             st, err);
  if (rc == VR_EINFEASIBLE) /* not even the fastest paths: best effort */
    rc = solve(p, prof, demand_qps, workers, o, 3, o->hw_only, &budget,
               plan, st, err);
  /* an empty plan would unload every instance of the pipeline: when no
   * load could be served within the SLO, that is an error to report */
  if (!rc && !(st->served > 1e-9))
    rc = vr__loki_serves_nothing(p, prof, plan, o, st, err);
  if (!rc) plan->accuracy_scaled = !o->hw_only;
  return rc;
}
