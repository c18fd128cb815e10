/* The pipeline simulator stage by stage (see psim_stage.h). The rules of
 * one instance (shortest queue, FIFO batches of what is queued, service
 * time from the profile) are psim.c's; the draws are psim.c's helpers
 * (psim_int.h), so the two engines cannot drift apart silently:
 * unit_test_inferline_sim's test_stages_* run both, request for request. */
#include "sim/psim_stage.h"

#include <string.h>

#include "base/alloc.h"
#include "sim/psim_int.h"

#define WAYS 4 /* results kept per task, at most */
/* Kept results hold at least 8 bytes per query and task each (its ends),
 * more for a parent (its children's requests): fewer ways per task when
 * a long trace meets a wide pipeline, down to one (then every candidate
 * re-runs the stages it changes and those under them, nothing more). */
#define KEEP_BYTES ((size_t)1 << 30)

/* Requests one stage sent to one child, in the order they reached it. */
typedef struct list {
  int64_t *t;
  uint64_t *id;
  int32_t *q;
  size_t n, cap;
} list;

typedef struct key {
  int slot, inst, batch;
  uint64_t parent; /* serial of the parent's entry it ran on (0: root) */
} key;

/* One task's results for one plan of the path from the root to it. */
typedef struct entry {
  uint64_t stamp;  /* last run that used it; 0: empty */
  uint64_t serial; /* unique per fill */
  key k;
  int64_t *qend;   /* per query: its latest request end here (0: none) */
  list out[VR_PIPE_MAX_CHILDREN];
} entry;

enum { ST_DONE = 0, ST_STOPPED, ST_DROPPED, ST_NOMEM };

struct vr_psim_stages {
  vr_psim_stages_cfg c;
  const vr_pipeline *p;
  int order[VR_PIPE_MAX_TASKS]; /* preorder */
  int cidx[VR_PIPE_MAX_TASKS];  /* index among its parent's children */
  int ways;                     /* 1..WAYS */
  entry *cache;                 /* ntasks * WAYS, `ways` used per task */
  uint64_t clock, serials;
  uint64_t *root_id;
  int64_t *qlast;   /* this run: per query, its latest request end */
  float *lat;
  /* this run's early stop: a query counts once its latency (ns) reaches
   * bad_ns */
  int64_t stop_bad, nbad, slo_ns, bad_ns;
  /* one stage's instances: queues (rings of max_queue input indexes),
   * batches in flight, completion heap */
  int rcap, bcap;
  int32_t *ring, *inb;
  int *qh, *ql, *nb, *heap;
  int64_t *dt;
  uint64_t *ds;
};

void vr_psim_stages_free(vr_psim_stages *s) {
  if (!s) return;
  for (int i = 0; s->cache && i < s->p->ntasks * WAYS; i++) {
    entry *e = &s->cache[i];
    vr_free(e->qend);
    for (int c = 0; c < VR_PIPE_MAX_CHILDREN; c++)
      vr_free(e->out[c].t), vr_free(e->out[c].id), vr_free(e->out[c].q);
  }
  vr_free(s->cache), vr_free(s->root_id), vr_free(s->qlast);
  vr_free(s->lat);
  vr_free(s->ring), vr_free(s->inb), vr_free(s->qh), vr_free(s->ql);
  vr_free(s->nb), vr_free(s->heap), vr_free(s->dt), vr_free(s->ds);
  vr_free(s);
}

static void preorder(vr_psim_stages *s) {
  int stack[VR_PIPE_MAX_TASKS], sp = 0, n = 0;
  stack[sp++] = 0;
  while (sp && n < s->p->ntasks) {
    int t = stack[--sp];
    s->order[n++] = t;
    const vr_pipe_task *tk = &s->p->tasks[t];
    for (int c = tk->nchildren - 1; c >= 0; c--) {
      s->cidx[tk->children[c]] = c;
      if (sp < VR_PIPE_MAX_TASKS) stack[sp++] = tk->children[c];
    }
  }
}

int vr_psim_stages_new(const vr_psim_stages_cfg *cfg, vr_psim_stages **out,
                       vr_errbuf *err) {
  *out = NULL;
  if (!cfg->data || !cfg->data->pipe || !cfg->data->prof || !cfg->t ||
      cfg->n < 1 || cfg->n > INT32_MAX || !(cfg->duration_s > 0) ||
      cfg->max_queue < 0)
    return vr_errf(err, VR_EINVAL, "psim stages: pipeline data, arrivals "
                   "and a duration needed");
  vr_psim_stages *s = VR_NEW(vr_psim_stages);
  if (!s) return VR_ENOMEM;
  s->c = *cfg;
  if (!s->c.max_queue) s->c.max_queue = 4096;
  s->p = cfg->data->pipe;
  preorder(s);
  s->cache = VR_NEWN(entry, (size_t)s->p->ntasks * WAYS);
  size_t per_way = (size_t)s->p->ntasks * cfg->n * sizeof(int64_t);
  s->ways = per_way * WAYS <= KEEP_BYTES ? WAYS
            : per_way >= KEEP_BYTES / 2 ? 1 : (int)(KEEP_BYTES / per_way);
  if (s->ways > WAYS) s->ways = WAYS;
  s->root_id = VR_NEWN(uint64_t, cfg->n);
  s->qlast = VR_NEWN(int64_t, cfg->n);
  s->lat = VR_NEWN(float, cfg->n);
  if (!s->cache || !s->root_id || !s->qlast || !s->lat) {
    vr_psim_stages_free(s);
    return VR_ENOMEM;
  }
  for (size_t i = 0; i < cfg->n; i++)
    s->root_id[i] = vr__psim_id_root(cfg->seed, (int64_t)i);
  *out = s;
  return 0;
}

/* ---- one run's queries ---- */

/* The latency (ns) from which a query counts against the early stop, by
 * psim's query_done rule: its latency as a float of ms above above_ms
 * (> 0), or past its deadline. That float is monotone in the latency, so
 * the rule is one threshold, found once per run. */
static int64_t bad_from(double above_ms, int64_t slo_ns) {
  if (!(above_ms > 0)) return slo_ns + 1;
  if (!((double)(float)((double)INT64_MAX / 1e6) > above_ms)) return INT64_MAX;
  int64_t lo = 0, hi = INT64_MAX; /* f(lo) <= above < f(hi) */
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    if ((double)(float)(mid / 1e6) > above_ms) hi = mid;
    else lo = mid;
  }
  return hi;
}

/* A request of query q ended at x; 1 when the run may stop. */
static int touch(vr_psim_stages *s, int32_t q, int64_t x) {
  int64_t old = s->qlast[q];
  if (x <= old) return 0;
  s->qlast[q] = x;
  if (s->stop_bad <= 0) return 0;
  int64_t t = s->c.t[q];
  return old - t < s->bad_ns && x - t >= s->bad_ns &&
         ++s->nbad >= s->stop_bad;
}

/* ---- one stage ---- */

static int scratch(vr_psim_stages *s, int r, int b) {
  if (r <= s->rcap && b <= s->bcap) return 0;
  int rc = r > s->rcap ? r : s->rcap, bc = b > s->bcap ? b : s->bcap;
  size_t mq = (size_t)s->c.max_queue;
  vr_free(s->ring), vr_free(s->inb), vr_free(s->qh), vr_free(s->ql);
  vr_free(s->nb), vr_free(s->heap), vr_free(s->dt), vr_free(s->ds);
  s->ring = VR_NEWN(int32_t, (size_t)rc * mq);
  s->inb = VR_NEWN(int32_t, (size_t)rc * bc);
  s->qh = VR_NEWN(int, rc), s->ql = VR_NEWN(int, rc), s->nb = VR_NEWN(int, rc);
  s->heap = VR_NEWN(int, rc);
  s->dt = VR_NEWN(int64_t, rc), s->ds = VR_NEWN(uint64_t, rc);
  s->rcap = s->bcap = 0;
  if (!s->ring || !s->inb || !s->qh || !s->ql || !s->nb || !s->heap ||
      !s->dt || !s->ds)
    return VR_ENOMEM;
  s->rcap = rc, s->bcap = bc;
  return 0;
}

/* Room for cap requests; ids only for a child with children of its own
 * (a leaf draws nothing). */
static int reserve(list *l, size_t cap, int ids) {
  if (cap <= l->cap) return 0;
  int64_t *nt = vr_realloc(l->t, cap * sizeof *nt);
  if (nt) l->t = nt;
  int32_t *nq = vr_realloc(l->q, cap * sizeof *nq);
  if (nq) l->q = nq;
  uint64_t *ni = ids ? vr_realloc(l->id, cap * sizeof *ni) : NULL;
  if (ni) l->id = ni;
  if (!nt || !nq || (ids && !ni)) return -1;
  l->cap = cap;
  return 0;
}

static int push_out(list *l, int ids, int64_t t, uint64_t id, int32_t q) {
  if (l->n == l->cap && reserve(l, l->cap ? l->cap * 2 : 4096, ids))
    return -1;
  l->t[l->n] = t, l->q[l->n] = q;
  if (ids) l->id[l->n] = id;
  l->n++;
  return 0;
}

/* The completion heap orders instances by (time, start order): psim's
 * heap among one task's events. */
static int h_before(const vr_psim_stages *s, int a, int b) {
  return s->dt[a] < s->dt[b] || (s->dt[a] == s->dt[b] && s->ds[a] < s->ds[b]);
}

static void h_push(vr_psim_stages *s, int *hn, int r) {
  int i = (*hn)++;
  while (i > 0) {
    int up = (i - 1) / 2;
    if (!h_before(s, r, s->heap[up])) break;
    s->heap[i] = s->heap[up];
    i = up;
  }
  s->heap[i] = r;
}

static int h_pop(vr_psim_stages *s, int *hn) {
  int top = s->heap[0], last = s->heap[--*hn], i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= *hn) break;
    if (c + 1 < *hn && h_before(s, s->heap[c + 1], s->heap[c])) c++;
    if (!h_before(s, s->heap[c], last)) break;
    s->heap[i] = s->heap[c];
    i = c;
  }
  if (*hn) s->heap[i] = last;
  return top;
}

/* What one stage runs on: its input, its instances, its stream. */
typedef struct stage {
  int task, root, R, B, mq;
  const vr_profile *prof;
  const vr_pipe_variant *pv;
  const int64_t *in_t;
  const uint64_t *in_id;
  const int32_t *in_q; /* NULL: the root's, query i */
  size_t n_in;
  int ids[VR_PIPE_MAX_CHILDREN]; /* child c has children: keep ids */
  vr_lat_at lat[VR_PROF_MAX_BATCH + 1]; /* the profile at each batch size */
  vr_rng rng;
  uint64_t seq;
  int hn;
} stage;

/* psim's vr__psim_start + vr__psim_run (Loki's rules, no dropping): the
 * queue's head, up to the batch, for its profiled time. */
static void start(vr_psim_stages *s, stage *g, int r, int64_t now) {
  int nb = 0, mq = g->mq;
  int32_t *ring = &s->ring[(size_t)r * mq], *inb = &s->inb[(size_t)r * s->bcap];
  while (s->ql[r] && nb < g->B) {
    inb[nb++] = ring[s->qh[r]];
    s->qh[r] = s->qh[r] + 1 == mq ? 0 : s->qh[r] + 1;
    s->ql[r]--;
  }
  s->nb[r] = nb;
  double ms = vr_lat_at_ms(&g->lat[nb], vr__psim_quantile(&g->rng, s->c.noise));
  s->dt[r] = now + (int64_t)(ms * 1e6);
  s->ds[r] = g->seq++;
  h_push(s, &g->hn, r);
}

/* psim's enqueue: the instance with the shortest queue (the first of
 * equals); a full queue drops the request. */
static int arrive(vr_psim_stages *s, stage *g, int32_t i, int64_t now) {
  if (!g->R) return ST_DROPPED; /* no instance */
  int best = 0, bl = s->ql[0] + s->nb[0];
  for (int r = 1; r < g->R; r++) {
    int l = s->ql[r] + s->nb[r];
    if (l < bl) best = r, bl = l;
  }
  if (s->ql[best] >= g->mq) return ST_DROPPED;
  int at = s->qh[best] + s->ql[best];
  if (at >= g->mq) at -= g->mq;
  s->ring[(size_t)best * g->mq + at] = i;
  s->ql[best]++;
  if (!s->nb[best]) start(s, g, best, now);
  return ST_DONE;
}

/* psim's on_done: each request of the batch ends; its outputs go to the
 * children's lists from its own stream. */
static int finish(vr_psim_stages *s, stage *g, entry *e, int r) {
  int64_t now = s->dt[r];
  const int32_t *inb = &s->inb[(size_t)r * s->bcap];
  int nch = s->p->tasks[g->task].nchildren;
  for (int b = 0; b < s->nb[r]; b++) {
    int32_t i = inb[b], q = g->in_q ? g->in_q[i] : i;
    if (now > e->qend[q]) e->qend[q] = now;
    if (touch(s, q, now)) return ST_STOPPED;
    if (!nch) continue;
    vr_rng own;
    uint64_t id = g->in_id[i];
    vr_rng_seed(&own, id);
    int k = vr__psim_fan_count(&own, g->pv, s->c.fanout_exact);
    for (int j = 0; j < k; j++) {
      int c = vr__psim_fan_child(&own, g->pv, nch);
      if (c >= 0 && push_out(&e->out[c], g->ids[c], now,
                             g->ids[c] ? vr__psim_id_child(id, j) : 0, q))
        return ST_NOMEM;
    }
  }
  s->nb[r] = 0;
  if (s->ql[r]) start(s, g, r, now);
  return ST_DONE;
}

/* Events in psim's order: by time; at one time the root's arrivals after
 * its completions (psim takes heap events first), a child's arrivals
 * (its parent's completions, a lower rank) before its own. */
static int run_stage(vr_psim_stages *s, stage *g, entry *e) {
  size_t i = 0;
  while (i < g->n_in || g->hn) {
    int arrival = i < g->n_in;
    if (arrival && g->hn) {
      int64_t tn = g->in_t[i], td = s->dt[s->heap[0]];
      arrival = tn != td ? tn < td : !g->root;
    }
    int rc = arrival ? arrive(s, g, (int32_t)i, g->in_t[i])
                     : finish(s, g, e, h_pop(s, &g->hn));
    if (rc) return rc;
    i += arrival;
  }
  return ST_DONE;
}

/* The slot holding task t's instances, or -1 for none; -2 for two. */
static int task_slot(const vr_pipe_plan *plan, int t) {
  int slot = -1;
  for (int v = plan->off[t]; v < plan->off[t + 1]; v++)
    if (plan->a[v].inst > 0) {
      if (slot >= 0) return -2;
      slot = v;
    }
  return slot;
}

static entry *lookup(vr_psim_stages *s, int t, const key *k) {
  entry *w = &s->cache[t * WAYS];
  for (int i = 0; i < s->ways; i++)
    if (w[i].stamp && !memcmp(&w[i].k, k, sizeof *k)) return &w[i];
  return NULL;
}

/* The least recently used entry of task t, emptied for k. */
static entry *fill(vr_psim_stages *s, int t, const key *k) {
  entry *w = &s->cache[t * WAYS], *e = &w[0];
  for (int i = 1; i < s->ways; i++)
    if (w[i].stamp < e->stamp) e = &w[i];
  if (!e->qend && !(e->qend = VR_NEWN(int64_t, s->c.n))) return NULL;
  memset(e->qend, 0, s->c.n * sizeof *e->qend);
  for (int c = 0; c < VR_PIPE_MAX_CHILDREN; c++) e->out[c].n = 0;
  e->k = *k;
  e->serial = ++s->serials;
  e->stamp = 0; /* valid once complete */
  return e;
}

/* A kept stage's ends, merged into this run's queries. */
static int merge(vr_psim_stages *s, const entry *e) {
  for (size_t q = 0; q < s->c.n; q++)
    if (e->qend[q] > s->qlast[q] && touch(s, (int32_t)q, e->qend[q]))
      return ST_STOPPED;
  return ST_DONE;
}

static int simulate(vr_psim_stages *s, const vr_pipe_plan *plan, int t,
                    int slot, const entry *parent, entry *e) {
  const vr_pipe_alloc *a = slot >= 0 ? &plan->a[slot] : NULL;
  stage g = {.task = t, .root = t == 0, .R = a ? a->inst : 0,
             .B = a && a->batch > 0 ? a->batch : 1, .mq = s->c.max_queue};
  const vr_pipe_task *tk = &s->p->tasks[t];
  if (a) {
    g.prof = &s->c.data->prof[slot];
    g.pv = &tk->variants[slot - plan->off[t]];
    if (g.B > VR_PROF_MAX_BATCH) g.B = VR_PROF_MAX_BATCH; /* psim's cap */
    for (int b = 1; b <= g.B; b++) vr_lat_at_init(&g.lat[b], &g.prof->lat, b);
  }
  if (parent) {
    const list *l = &parent->out[s->cidx[t]];
    g.in_t = l->t, g.in_id = l->id, g.in_q = l->q, g.n_in = l->n;
  } else {
    g.in_t = s->c.t, g.in_id = s->root_id, g.n_in = s->c.n;
  }
  /* the children's lists sized for the mean fan-out, once: growing them
   * by doubling copies and faults in tens of MB per run */
  for (int c = 0; a && c < tk->nchildren; c++) {
    g.ids[c] = s->p->tasks[tk->children[c]].nchildren > 0;
    double want = (double)g.n_in * g.pv->mult * g.pv->share[c] * 1.05 + 4096;
    if (want < 1e9 && reserve(&e->out[c], (size_t)want, g.ids[c]))
      return ST_NOMEM;
  }
  if (scratch(s, g.R, g.B)) return ST_NOMEM;
  for (int r = 0; r < g.R; r++) s->qh[r] = s->ql[r] = s->nb[r] = 0;
  vr__psim_task_rng(&g.rng, s->c.seed, t);
  return run_stage(s, &g, e);
}

/* Puts the k-th smallest of a[lo, hi) at a[k], the smaller before it
 * (quickselect, three-way: service times without noise give many equal
 * latencies). The value is the one a sort would put there. */
static void select_k(float *a, size_t lo, size_t hi, size_t k) {
  while (hi - lo > 1) {
    float x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi - 1];
    float piv = x < y ? (y < z ? y : x < z ? z : x)
                      : (x < z ? x : y < z ? z : y);
    size_t lt = lo, i = lo, gt = hi;
    while (i < gt) {
      float v = a[i];
      if (v < piv) a[i++] = a[lt], a[lt++] = v;
      else if (v > piv) a[i] = a[--gt], a[gt] = v;
      else i++;
    }
    if (k < lt) hi = lt;
    else if (k >= gt) lo = gt;
    else return;
  }
}

static void summarise(vr_psim_stages *s, vr_psim_stages_result *res) {
  int64_t end = (int64_t)(s->c.duration_s * 1e9) + (int64_t)(600 * 1e9);
  size_t n = s->c.n;
  for (size_t q = 0; q < n; q++) {
    int64_t t = s->c.t[q], x = s->qlast[q];
    s->lat[q] = (float)((x - t) / 1e6);
    res->late += x > t + s->slo_ns;
    if (x > end) res->unfinished = 1;
  }
  /* the two ranks psim reads from its sorted latencies */
  size_t k99 = (size_t)(n * 0.99), k50 = n / 2;
  select_k(s->lat, 0, n, k99);
  if (k50 < k99) select_k(s->lat, 0, k99, k50);
  res->p50_ms = s->lat[k50];
  res->p99_ms = s->lat[k99];
}

int vr_psim_stages_run(vr_psim_stages *s, const vr_pipe_plan *plan,
                       int64_t stop_bad, double above_ms,
                       vr_psim_stages_result *res, vr_errbuf *err) {
  memset(res, 0, sizeof *res);
  const vr_pipeline *p = s->p;
  if (plan->ntasks != p->ntasks || plan->off[p->ntasks] != s->c.data->off[p->ntasks])
    return vr_errf(err, VR_EINVAL, "psim stages: the plan does not fit the "
                   "pipeline");
  int slot[VR_PIPE_MAX_TASKS];
  for (int t = 0; t < p->ntasks; t++)
    if ((slot[t] = task_slot(plan, t)) == -2)
      return vr_errf(err, VR_EINVAL, "psim stages: task '%s' has instances "
                     "of two variants", p->tasks[t].name);
  s->clock++;
  s->stop_bad = stop_bad, s->nbad = 0;
  s->slo_ns = (int64_t)(p->slo_ms * 1e6);
  s->bad_ns = bad_from(above_ms, s->slo_ns);
  memcpy(s->qlast, s->c.t, s->c.n * sizeof *s->qlast);
  /* The kept stages first (a task is kept when its parent is and its own
   * plan is the same): their queries may already stop the run, before
   * anything is simulated. Then the others from the root down. */
  entry *at[VR_PIPE_MAX_TASKS] = {0};
  key k[VR_PIPE_MAX_TASKS];
  for (int i = 0; i < p->ntasks; i++) {
    int t = s->order[i], par = p->tasks[t].parent;
    const vr_pipe_alloc *a = slot[t] >= 0 ? &plan->a[slot[t]] : NULL;
    k[t] = (key){slot[t], a ? a->inst : 0, a ? a->batch : 0, 0};
    if (par >= 0 && !at[par]) continue;
    k[t].parent = par >= 0 ? at[par]->serial : 0;
    if ((at[t] = lookup(s, t, &k[t]))) at[t]->stamp = s->clock;
  }
  int rc = ST_DONE;
  for (int t = 0; rc == ST_DONE && t < p->ntasks; t++)
    if (at[t]) {
      res->stages_reused++;
      rc = merge(s, at[t]);
    }
  for (int i = 0; rc == ST_DONE && i < p->ntasks; i++) {
    int t = s->order[i], par = p->tasks[t].parent;
    if (at[t]) continue;
    k[t].parent = par >= 0 ? at[par]->serial : 0;
    entry *e = fill(s, t, &k[t]);
    if (!e) return VR_ENOMEM;
    res->stages_run++;
    rc = simulate(s, plan, t, slot[t], par >= 0 ? at[par] : NULL, e);
    if (rc != ST_DONE) break; /* e stays empty: its stamp is 0 */
    e->stamp = s->clock;
    at[t] = e;
  }
  if (rc == ST_NOMEM) return VR_ENOMEM;
  res->stopped = rc == ST_STOPPED;
  res->dropped = rc == ST_DROPPED;
  if (rc == ST_DONE) summarise(s, res);
  return 0;
}
