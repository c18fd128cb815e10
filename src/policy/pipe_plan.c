/* Plans, MostAccurateFirst routing and per-hop decisions (pipe_plan.h). */
#include "policy/pipe_plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int vr_pipe_plan_init(vr_pipe_plan *plan, const vr_pipeline *p) {
  memset(plan, 0, sizeof *plan);
  plan->ntasks = p->ntasks;
  for (int t = 0; t < p->ntasks; t++)
    plan->off[t + 1] = plan->off[t] + p->tasks[t].nvariants;
  plan->a = calloc(plan->off[p->ntasks] + 1, sizeof *plan->a);
  return plan->a ? 0 : VR_ENOMEM;
}

void vr_pipe_plan_free(vr_pipe_plan *plan) {
  free(plan->a);
  plan->a = NULL;
}

int vr_pipe_plan_copy(vr_pipe_plan *dst, const vr_pipe_plan *src) {
  size_t n = src->off[src->ntasks] + 1;
  /* realloc's result in a local: gcc 12 at -O0 cannot tell that the old
   * block is only freed when realloc failed (and fails -Werror) */
  vr_pipe_alloc *a = realloc(dst->a, n * sizeof *a);
  if (!a) {
    free(dst->a);
    dst->a = NULL;
    return VR_ENOMEM;
  }
  *dst = *src;
  dst->a = a;
  memcpy(dst->a, src->a, n * sizeof *a);
  return 0;
}

void vr_pipe_plan_set(vr_pipe_plan *plan, const vr_profile *prof, int t,
                      int v, int n, int b) {
  int i = plan->off[t] + v;
  vr_pipe_alloc *a = &plan->a[i];
  plan->workers += n - a->inst;
  a->inst = n;
  a->batch = b < 1 ? 1 : b;
  a->lat_ms = vr_profile_latency_ms(&prof[i], a->batch, 0.5);
  a->cap_qps = a->lat_ms > 0 ? a->batch * 1000.0 / a->lat_ms : 0;
}

void vr_pipe_routes_free(vr_pipe_routes *r) {
  free(r->front), free(r->table), free(r->incoming), free(r->spare);
  free(r->order);
  memset(r, 0, sizeof *r);
}

/* Variants of task t by non-increasing accuracy (stable by index). */
static void sort_by_accuracy(const vr_pipe_task *t, int *ord) {
  for (int k = 0; k < t->nvariants; k++) ord[k] = k;
  for (int i = 1; i < t->nvariants; i++)
    for (int j = i; j > 0; j--) {
      double a = t->variants[ord[j - 1]].accuracy,
             b = t->variants[ord[j]].accuracy;
      if (b <= a) break;
      int x = ord[j];
      ord[j] = ord[j - 1], ord[j - 1] = x;
    }
}

/* Fills the variants of task t with `demand` in accuracy order: probs[v]
 * (fractions summing to 1 when the task has capacity), consuming `left`
 * (remaining capacity per slot). */
static void fill(const vr_pipe_routes *r, const vr_pipe_plan *plan, int t,
                 double demand, double *left, double *probs) {
  int n = r->off[t + 1] - r->off[t];
  const int *ord = &r->order[r->off[t]];
  double rest = demand, cap = 0;
  for (int v = 0; v < n; v++) probs[v] = 0;
  if (demand <= 0) return;
  for (int k = 0; k < n && rest > 0; k++) {
    int i = r->off[t] + ord[k];
    double take = rest < left[i] ? rest : left[i];
    if (take <= 0) continue;
    probs[ord[k]] += take / demand;
    left[i] -= take, rest -= take;
  }
  if (rest <= 0) return;
  /* overflow: in proportion to provisioned capacity */
  for (int v = 0; v < n; v++) {
    const vr_pipe_alloc *a = &plan->a[r->off[t] + v];
    cap += a->inst * a->cap_qps;
  }
  if (cap <= 0) return;
  for (int v = 0; v < n; v++) {
    const vr_pipe_alloc *a = &plan->a[r->off[t] + v];
    probs[v] += rest / demand * (a->inst * a->cap_qps / cap);
  }
}

static int routes_alloc(const vr_pipeline *p, const vr_pipe_plan *plan,
                        vr_pipe_routes *r) {
  memset(r, 0, sizeof *r);
  r->ntasks = p->ntasks;
  memcpy(r->off, plan->off, sizeof r->off);
  int ns = plan->off[p->ntasks];
  for (int t = 0; t < p->ntasks; t++) {
    int par = p->tasks[t].parent;
    int np = par < 0 ? 0 : p->tasks[par].nvariants;
    r->toff[t + 1] = r->toff[t] + np * p->tasks[t].nvariants;
  }
  r->front = calloc(plan->off[1] + 1, sizeof *r->front);
  r->table = calloc(r->toff[p->ntasks] + 1, sizeof *r->table);
  r->incoming = calloc(ns + 1, sizeof *r->incoming);
  r->spare = calloc(ns + 1, sizeof *r->spare);
  r->order = calloc(ns + 1, sizeof *r->order);
  if (!r->front || !r->table || !r->incoming || !r->spare || !r->order) {
    vr_pipe_routes_free(r);
    return VR_ENOMEM;
  }
  return 0;
}

int vr_pipe_route_build(const vr_pipeline *p, const vr_pipe_plan *plan,
                        double root_qps, vr_pipe_routes *r) {
  if (routes_alloc(p, plan, r)) return VR_ENOMEM;
  int ns = plan->off[p->ntasks];
  for (int t = 0; t < p->ntasks; t++)
    sort_by_accuracy(&p->tasks[t], &r->order[r->off[t]]);
  double fr = plan->fill > 0 && plan->fill <= 1 ? plan->fill : 1;
  for (int i = 0; i < ns; i++)
    r->spare[i] = plan->a[i].inst * plan->a[i].cap_qps * fr;
  double probs[VR_PIPE_MAX_VARIANTS];
  /* path accuracy mass: acc[slot] = expected product of accuracies of the
   * requests reaching that slot, times their rate */
  double accmass[VR_PIPE_MAX_TASKS * VR_PIPE_MAX_VARIANTS];
  for (int i = 0; i < ns; i++) accmass[i] = 0; /* children sum into theirs */
  fill(r, plan, 0, root_qps > 0 ? root_qps : 1e-9, r->spare, r->front);
  for (int v = 0; v < p->tasks[0].nvariants; v++) {
    r->incoming[v] = root_qps * r->front[v];
    double a = p->tasks[0].variants[v].accuracy;
    accmass[v] = r->incoming[v] * (a >= 0 ? a / 100 : 1);
  }
  double leaf_rate = 0, leaf_acc = 0;
  for (int t = 0; t < p->ntasks; t++) { /* preorder: parents first */
    const vr_pipe_task *tk = &p->tasks[t];
    for (int k = 0; k < tk->nvariants; k++) {
      int v = r->order[r->off[t] + k], i = r->off[t] + v;
      const vr_pipe_variant *pv = &tk->variants[v];
      double in = r->incoming[i], amass = in > 0 ? accmass[i] / in : 0;
      for (int c = 0; c < tk->nchildren; c++) {
        int ct = tk->children[c];
        double out = in * pv->mult * pv->share[c];
        /* a flow the estimate says is empty still gets a row (requests
         * may come anyway): where a trickle would go */
        fill(r, plan, ct, out > 0 ? out : 1e-9, r->spare, probs);
        if (out <= 0) out = 0;
        const vr_pipe_task *ch = &p->tasks[ct];
        for (int w = 0; w < ch->nvariants; w++) {
          r->table[r->toff[ct] + v * ch->nvariants + w] = probs[w];
          int j = r->off[ct] + w;
          double a = ch->variants[w].accuracy;
          r->incoming[j] += out * probs[w];
          accmass[j] += out * probs[w] * amass * (a >= 0 ? a / 100 : 1);
        }
      }
      /* a request with no outputs ends its path here */
      double ends = tk->nchildren ? in * (pv->mult > 0 ? 0 : 1) : in;
      leaf_rate += ends, leaf_acc += ends * amass;
    }
  }
  r->accuracy = leaf_rate > 0 ? 100 * leaf_acc / leaf_rate : 0;
  double path = vr_pipe_plan_path_ms(p, plan);
  r->budget_scale = path > 0 && p->slo_ms / path > 2 ? p->slo_ms / path : 2;
  return 0;
}

int vr_pipe_route_pick(const vr_pipeline *p, const vr_pipe_routes *r, int c,
                       int pv_slot, double u) {
  const vr_pipe_task *ch = &p->tasks[c];
  const double *row;
  if (c == 0) {
    row = r->front;
  } else {
    int par = ch->parent, pv = pv_slot - r->off[par];
    row = &r->table[r->toff[c] + pv * ch->nvariants];
  }
  double sum = 0;
  for (int w = 0; w < ch->nvariants; w++) sum += row[w];
  if (sum <= 0) return -1; /* the child has no capacity at all */
  double x = u * sum;
  for (int w = 0; w < ch->nvariants; w++) {
    if (x < row[w]) return r->off[c] + w;
    x -= row[w];
  }
  for (int w = ch->nvariants - 1; w >= 0; w--)
    if (row[w] > 0) return r->off[c] + w;
  return -1;
}

static const char *const EDROP_NAMES[] = {"none", "last_task", "per_task",
                                          "reroute"};

const char *vr_edrop_name(int mode) {
  return mode >= 0 && mode < 4 ? EDROP_NAMES[mode] : "?";
}

int vr_edrop_parse(const char *s) {
  for (int i = 0; i < 4; i++)
    if (!strcmp(s, EDROP_NAMES[i])) return i;
  return -1;
}

int vr_edrop_deadline_drops(int mode, int last_task) {
  return mode == VR_EDROP_LAST ? last_task : mode != VR_EDROP_NONE;
}

int vr_pipe_hop(const vr_pipeline *p, const vr_pipe_plan *plan,
                const vr_pipe_routes *r, int c, int to, const vr_hop *h,
                int *alt) {
  double y = plan->a[to].lat_ms;
  switch (h->mode) {
  case VR_EDROP_NONE:
    return VR_HOP_FORWARD;
  case VR_EDROP_LAST:
    return h->child_is_leaf && h->slo_ms - h->elapsed_ms < y ? VR_HOP_DROP
                                                             : VR_HOP_FORWARD;
  case VR_EDROP_PER_TASK:
    return h->spent_ms > h->budget_ms ? VR_HOP_DROP : VR_HOP_FORWARD;
  default:
    break;
  }
  double x = h->elapsed_ms - h->budget_sum_ms;
  if (x <= 0) return VR_HOP_FORWARD;
  const vr_pipe_task *ch = &p->tasks[c];
  int best = -1;
  for (int k = 0; k < ch->nvariants; k++) { /* accuracy order */
    int i = r->off[c] + r->order[r->off[c] + k];
    if (plan->a[i].inst > 0 && r->spare[i] > 0 && plan->a[i].lat_ms <= y - x) {
      best = i;
      break;
    }
  }
  if (best < 0) return VR_HOP_DROP;
  *alt = best;
  return VR_HOP_REROUTE;
}

double vr_pipe_plan_path_ms(const vr_pipeline *p, const vr_pipe_plan *plan) {
  double at[VR_PIPE_MAX_TASKS], worst = 0;
  for (int t = 0; t < p->ntasks; t++) {
    double m = 0;
    for (int v = 0; v < p->tasks[t].nvariants; v++) {
      const vr_pipe_alloc *a = &plan->a[plan->off[t] + v];
      if (a->inst > 0 && a->lat_ms > m) m = a->lat_ms;
    }
    at[t] = m + (p->tasks[t].parent >= 0 ? at[p->tasks[t].parent] : 0);
    if (!p->tasks[t].nchildren && at[t] > worst) worst = at[t];
  }
  return worst;
}

/* Longest path with task t's latency taken from lat[] (one per task). */
static double longest(const vr_pipeline *p, const double *lat) {
  double at[VR_PIPE_MAX_TASKS], worst = 0;
  for (int t = 0; t < p->ntasks; t++) {
    at[t] = lat[t] + (p->tasks[t].parent >= 0 ? at[p->tasks[t].parent] : 0);
    if (!p->tasks[t].nchildren && at[t] > worst) worst = at[t];
  }
  return worst;
}

/* At least one instance per task; when the total exceeds `workers`, the
 * workers are shared in proportion to need. 1 if everything fitted. */
static int share_workers(int nt, int *need, int workers) {
  int total = 0;
  for (int t = 0; t < nt; t++) {
    if (need[t] < 1) need[t] = 1;
    total += need[t];
  }
  if (total <= workers) return 1;
  int left = workers - nt, given = 0;
  for (int t = 0; t < nt; t++) {
    int extra = left > 0 ? (int)((double)(need[t] - 1) * left / (total - nt))
                         : 0;
    need[t] = 1 + extra, given += need[t];
  }
  for (int t = 0; given < workers; t = (t + 1) % nt) need[t]++, given++;
  return 0;
}

void vr_pipe_plan_scale(const vr_pipeline *p, const vr_profile *prof,
                        const int *choice, double demand_qps, int workers,
                        double slack, vr_pipe_plan *plan) {
  int nt = p->ntasks, b[VR_PIPE_MAX_TASKS];
  double rate[VR_PIPE_MAX_TASKS], lat[VR_PIPE_MAX_TASKS];
  vr_pipeline_rates(p, choice, NULL, demand_qps, rate);
  for (int i = 0; i < plan->off[nt]; i++) plan->a[i] = (vr_pipe_alloc){0};
  plan->workers = 0;
  for (int t = 0; t < nt; t++) {
    b[t] = 1;
    lat[t] = vr_profile_latency_ms(&prof[plan->off[t] + choice[t]], 1, 0.5);
  }
  double half = p->slo_ms / 2;
  for (;;) { /* double the batch that saves the most workers */
    int best = -1;
    double gain = 1e-9;
    for (int t = 0; t < nt; t++) {
      const vr_profile *pr = &prof[plan->off[t] + choice[t]];
      if (2 * b[t] > pr->max_batch) continue;
      double old = lat[t], nl = vr_profile_latency_ms(pr, 2 * b[t], 0.5);
      lat[t] = nl;
      int ok = longest(p, lat) <= half;
      lat[t] = old;
      double g = rate[t] * (old / b[t] - nl / (2 * b[t])) / 1000;
      if (ok && g > gain) gain = g, best = t;
    }
    if (best < 0) break;
    b[best] *= 2;
    lat[best] = vr_profile_latency_ms(&prof[plan->off[best] + choice[best]],
                                      b[best], 0.5);
  }
  int need[VR_PIPE_MAX_TASKS];
  for (int t = 0; t < nt; t++)
    need[t] = (int)ceil(slack * rate[t] * lat[t] / (b[t] * 1000.0) - 1e-9);
  plan->feasible = share_workers(nt, need, workers) &&
                   longest(p, lat) <= half;
  for (int t = 0; t < nt; t++)
    vr_pipe_plan_set(plan, prof, t, choice[t], need[t], b[t]);
  plan->demand_qps = demand_qps;
  plan->accuracy_scaled = 0;
  plan->fill = 1 / slack;
}

void vr_pipe_plan_cheapest(const vr_pipeline *p, const vr_profile *prof,
                           const double *task_qps, int workers, double slack,
                           vr_pipe_plan *plan) {
  int nt = p->ntasks, depth = 0, choice[VR_PIPE_MAX_TASKS], b[VR_PIPE_MAX_TASKS];
  int need[VR_PIPE_MAX_TASKS];
  for (int t = 0; t < nt; t++) {
    int d = 1;
    for (int a = p->tasks[t].parent; a >= 0; a = p->tasks[a].parent) d++;
    if (d > depth) depth = d;
  }
  double half = p->slo_ms / depth / 2;
  for (int i = 0; i < plan->off[nt]; i++) plan->a[i] = (vr_pipe_alloc){0};
  plan->workers = 0;
  for (int t = 0; t < nt; t++) {
    double best = -1;
    choice[t] = 0, b[t] = 1;
    for (int v = 0; v < p->tasks[t].nvariants; v++) {
      const vr_profile *pr = &prof[plan->off[t] + v];
      for (int bs = 1; bs <= pr->max_batch; bs *= 2) {
        double l = vr_profile_latency_ms(pr, bs, 0.5), cost = l / bs;
        if (bs > 1 && l > half) break;
        if (best < 0 || cost < best) best = cost, choice[t] = v, b[t] = bs;
      }
    }
    need[t] = (int)ceil(slack * task_qps[t] * best / 1000.0 - 1e-9);
  }
  plan->feasible = share_workers(nt, need, workers);
  for (int t = 0; t < nt; t++)
    vr_pipe_plan_set(plan, prof, t, choice[t], need[t], b[t]);
  plan->accuracy_scaled = 0;
  plan->fill = 1 / slack;
}
