/*
 * Variant selection indices.
 *
 * Variants are grouped (one group per app and one per model; a variant is
 * in two groups) and laid out group after group, each group sorted by
 * accuracy descending, so "accuracy >= a" is a prefix of the group found by
 * binary search. Over that layout a merge-sort tree answers "among
 * positions [lo, hi), minimum value with key <= L" in O(log^2 n): level l
 * holds blocks of 2^l positions sorted by key with running minima of value.
 */
#define _GNU_SOURCE /* qsort_r */
#include "policy/select.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/map.h"
#include "policy/policy.h"

typedef struct dpt {
  double key;  /* latency; +inf = not eligible */
  double pmin; /* min value from the block start through this entry */
  int parg;    /* variant index achieving pmin (-1: none) */
  int id;      /* variant index of this entry */
  double val;
} dpt;

typedef struct dtree {
  dpt *lv; /* nlev * n entries */
  int nlev;
} dtree;

enum { T_ACTIVE, T_INACTIVE, T_BUSY, T_COUNT };

struct vr_select_index {
  size_t n, cap;       /* layout positions (group memberships) */
  int *order;          /* variant index at each position */
  double *acc;         /* accuracy at each position */
  double *tail;        /* per variant: tail latency at batch 1 */
  double *accv;        /* per variant accuracy */
  int *closest;        /* per position: fastest variant in group prefix */
  size_t ngroups;
  size_t *gstart;      /* ngroups + 1 */
  vr_map groups;       /* "a:NAME"/"m:NAME" -> gid + 1 */
  dtree t[T_COUNT];
  size_t nvar, vcap;
  int *inst_start;     /* nvar + 1 */
  int *inst_idx;
  size_t icap;
  dpt *scratch;
};

vr_select_index *vr_select_new(void) {
  vr_select_index *ix = VR_NEW(vr_select_index);
  if (ix) vr_map_init(&ix->groups);
  return ix;
}

void vr_select_free(vr_select_index *ix) {
  if (!ix) return;
  vr_free(ix->order);
  vr_free(ix->acc);
  vr_free(ix->tail);
  vr_free(ix->accv);
  vr_free(ix->closest);
  vr_free(ix->gstart);
  for (int i = 0; i < T_COUNT; i++) vr_free(ix->t[i].lv);
  vr_free(ix->inst_start);
  vr_free(ix->inst_idx);
  vr_free(ix->scratch);
  vr_map_free(&ix->groups);
  vr_free(ix);
}

static int grow(void **p, size_t n, size_t elem) {
  void *q = vr_realloc(*p, n * elem > 0 ? n * elem : 1);
  if (!q) return VR_ENOMEM;
  *p = q;
  return 0;
}

static int nlevels(size_t n) {
  int l = 1;
  while (((size_t)1 << (l - 1)) < n) l++;
  return l;
}

/* Merge-sort tree construction: level 0 is the layout, level l merges
 * pairs of blocks of level l-1 by key; then running minima per block. */
static void tree_build(dtree *t, size_t n, const dpt *base) {
  memcpy(t->lv, base, n * sizeof *base);
  for (int l = 1; l < t->nlev; l++) {
    const dpt *src = t->lv + (size_t)(l - 1) * n;
    dpt *dst = t->lv + (size_t)l * n;
    size_t half = (size_t)1 << (l - 1), bs = half * 2;
    for (size_t s = 0; s < n; s += bs) {
      size_t a = s, ae = s + half < n ? s + half : n;
      size_t b = ae, be = s + bs < n ? s + bs : n, o = s;
      while (a < ae && b < be) dst[o++] = src[a].key <= src[b].key ? src[a++]
                                                                   : src[b++];
      while (a < ae) dst[o++] = src[a++];
      while (b < be) dst[o++] = src[b++];
    }
  }
  for (int l = 0; l < t->nlev; l++) {
    dpt *lv = t->lv + (size_t)l * n;
    size_t bs = (size_t)1 << l;
    for (size_t i = 0; i < n; i++) {
      int eligible = isfinite(lv[i].key);
      double v = eligible ? lv[i].val : INFINITY;
      int arg = eligible ? lv[i].id : -1;
      if (i % bs && lv[i - 1].pmin <= v) v = lv[i - 1].pmin, arg = lv[i - 1].parg;
      lv[i].pmin = v;
      lv[i].parg = arg;
    }
  }
}

/* Min value over positions [lo, hi) with key <= L; -1 when none. */
static int tree_query(const dtree *t, size_t n, size_t lo, size_t hi,
                      double L, double *best) {
  int arg = -1;
  *best = INFINITY;
  while (lo < hi) {
    int l = 0;
    while (l + 1 < t->nlev && (lo & (((size_t)2 << l) - 1)) == 0 &&
           lo + ((size_t)2 << l) <= hi)
      l++;
    size_t bs = (size_t)1 << l;
    const dpt *blk = t->lv + (size_t)l * n + lo;
    /* last entry with key <= L (keys sorted ascending in the block) */
    size_t a = 0, b = bs;
    while (a < b) {
      size_t m = (a + b) / 2;
      if (blk[m].key <= L) a = m + 1;
      else b = m;
    }
    if (a > 0 && blk[a - 1].parg >= 0 && blk[a - 1].pmin < *best)
      *best = blk[a - 1].pmin, arg = blk[a - 1].parg;
    lo += bs;
  }
  return arg;
}

static int group_add(vr_select_index *ix, char kind, const char *name,
                     size_t *count_cap, size_t **counts) {
  char key[VR_VARIANT_MAX + 4];
  key[0] = kind, key[1] = ':';
  size_t len = strlen(name);
  memcpy(key + 2, name, len + 1);
  void *g = vr_map_get(&ix->groups, key);
  if (g) return (int)((intptr_t)g - 1);
  int gid = (int)ix->ngroups++;
  if (ix->ngroups > *count_cap) {
    *count_cap = *count_cap ? *count_cap * 2 : 16;
    if (grow((void **)counts, *count_cap, sizeof **counts)) return VR_ENOMEM;
  }
  (*counts)[gid] = 0;
  if (vr_map_put(&ix->groups, key, (void *)(intptr_t)(gid + 1), NULL))
    return VR_ENOMEM;
  return gid;
}

/* Orders a group's positions by accuracy descending, then latency. */
static int cmp_pos(const void *a, const void *b, void *ctx) {
  int x = *(const int *)a, y = *(const int *)b;
  const vr_select_index *ix = ctx;
  if (ix->accv[x] != ix->accv[y]) return ix->accv[x] > ix->accv[y] ? -1 : 1;
  if (ix->tail[x] != ix->tail[y]) return ix->tail[x] < ix->tail[y] ? -1 : 1;
  return x - y;
}

static int serving(int istate) {
  return istate == VR_IS_ACTIVE || istate == VR_IS_OVERLOADED ||
         istate == VR_IS_INTERFERED;
}

static int build_instances(vr_select_index *ix, const vr_snapshot *s) {
  if (grow((void **)&ix->inst_start, s->nvariants + 1, sizeof(int)) ||
      grow((void **)&ix->inst_idx, s->ninstances + 1, sizeof(int)))
    return VR_ENOMEM;
  memset(ix->inst_start, 0, (s->nvariants + 1) * sizeof(int));
  for (size_t i = 0; i < s->ninstances; i++) {
    int v = s->instances[i].variant;
    if (v >= 0 && (size_t)v < s->nvariants && serving(s->instances[i].state))
      ix->inst_start[v + 1]++;
  }
  for (size_t v = 0; v < s->nvariants; v++)
    ix->inst_start[v + 1] += ix->inst_start[v];
  /* fill using inst_start as cursors, then shift back */
  for (size_t i = 0; i < s->ninstances; i++) {
    int v = s->instances[i].variant;
    if (v >= 0 && (size_t)v < s->nvariants && serving(s->instances[i].state))
      ix->inst_idx[ix->inst_start[v]++] = (int)i;
  }
  for (size_t v = s->nvariants; v > 0; v--)
    ix->inst_start[v] = ix->inst_start[v - 1];
  ix->inst_start[0] = 0;
  return 0;
}

static int build_groups(vr_select_index *ix, const vr_snapshot *s) {
  size_t nv = s->nvariants, ccap = 0, *counts = NULL;
  int rc = VR_ENOMEM;
  vr_map_free(&ix->groups);
  vr_map_init(&ix->groups);
  ix->ngroups = 0;
  int *gid = vr_malloc((2 * nv + 1) * sizeof *gid);
  if (!gid) return VR_ENOMEM;
  for (size_t v = 0; v < nv; v++) {
    const vr_profile *p = &s->variants[v].prof;
    int a = p->app[0] ? group_add(ix, 'a', p->app, &ccap, &counts) : -2;
    int m = group_add(ix, 'm', p->model, &ccap, &counts);
    if (a == VR_ENOMEM || m == VR_ENOMEM) goto out;
    gid[2 * v] = a, gid[2 * v + 1] = m;
    if (a >= 0) counts[a]++;
    counts[m]++;
  }
  if (grow((void **)&ix->gstart, ix->ngroups + 1, sizeof(size_t))) goto out;
  ix->gstart[0] = 0;
  for (size_t g = 0; g < ix->ngroups; g++)
    ix->gstart[g + 1] = ix->gstart[g] + counts[g], counts[g] = ix->gstart[g];
  ix->n = ix->gstart[ix->ngroups];
  if (grow((void **)&ix->order, ix->n + 1, sizeof(int)) ||
      grow((void **)&ix->acc, ix->n + 1, sizeof(double)) ||
      grow((void **)&ix->closest, ix->n + 1, sizeof(int)))
    goto out;
  for (size_t k = 0; k < 2 * nv; k++)
    if (gid[k] >= 0) ix->order[counts[gid[k]]++] = (int)(k / 2);
  for (size_t g = 0; g < ix->ngroups; g++) {
    size_t b = ix->gstart[g], e = ix->gstart[g + 1];
    qsort_r(ix->order + b, e - b, sizeof(int), cmp_pos, ix);
    for (size_t i = b; i < e; i++) {
      int v = ix->order[i];
      ix->acc[i] = ix->accv[v];
      ix->closest[i] =
          i > b && ix->tail[ix->closest[i - 1]] <= ix->tail[v]
              ? ix->closest[i - 1] : v;
    }
  }
  rc = 0;
out:
  vr_free(gid);
  vr_free(counts);
  return rc;
}

/* Fills the three trees' leaves: each position is eligible in exactly the
 * tree matching its variant's serving state. */
static int build_trees(vr_select_index *ix, const vr_snapshot *s) {
  size_t n = ix->n;
  int nl = nlevels(n ? n : 1);
  if (grow((void **)&ix->scratch, n + 1, sizeof(dpt))) return VR_ENOMEM;
  for (int t = 0; t < T_COUNT; t++) {
    if (grow((void **)&ix->t[t].lv, (size_t)nl * n + 1, sizeof(dpt)))
      return VR_ENOMEM;
    ix->t[t].nlev = nl;
    for (size_t i = 0; i < n; i++) {
      int v = ix->order[i];
      const vr_snap_variant *sv = &s->variants[v];
      int has = ix->inst_start[v + 1] > ix->inst_start[v];
      /* Overloaded variants keep their traffic (the autoscaler adds
       * capacity): moving all of it to another variant for a control
       * period only overloads that one next, and the load flip-flops. */
      int which = !has ? T_INACTIVE
                       : sv->state == VR_VS_INTERFERED ? T_BUSY : T_ACTIVE;
      double val;
      if (t == T_INACTIVE) {
        val = sv->prof.load_ms + ix->tail[v];
      } else {
        val = vr_policy_query_cost(&sv->prof);
      }
      /* eligible for SLO L iff 2 x tail(1) <= L (profile.h) */
      ix->scratch[i] = (dpt){which == t ? 2 * ix->tail[v] : INFINITY, 0, -1,
                             v, val};
    }
    if (n) tree_build(&ix->t[t], n, ix->scratch);
  }
  return 0;
}

int vr_select_build(vr_select_index *ix, const vr_snapshot *s) {
  size_t nv = s->nvariants;
  if (grow((void **)&ix->tail, nv + 1, sizeof(double)) ||
      grow((void **)&ix->accv, nv + 1, sizeof(double)))
    return VR_ENOMEM;
  ix->nvar = nv;
  for (size_t v = 0; v < nv; v++) {
    ix->tail[v] = vr_profile_tail_ms(&s->variants[v].prof, 1);
    ix->accv[v] = s->variants[v].prof.accuracy;
  }
  int rc;
  if ((rc = build_instances(ix, s)) || (rc = build_groups(ix, s)) ||
      (rc = build_trees(ix, s)))
    return rc;
  return 0;
}

int vr_select_group(const vr_select_index *ix, char kind, const char *name) {
  char key[VR_VARIANT_MAX + 4];
  size_t len = name ? strlen(name) : 0;
  if (!name || len >= VR_VARIANT_MAX) return -1;
  key[0] = kind, key[1] = ':';
  memcpy(key + 2, name, len + 1);
  void *g = vr_map_get(&ix->groups, key);
  return g ? (int)((intptr_t)g - 1) : -1;
}

int vr_select(const vr_select_index *ix, const vr_query_req *q,
              vr_selection *out) {
  if (q->group < 0 || (size_t)q->group >= ix->ngroups)
    return VR_EINVAL;
  size_t b = ix->gstart[q->group], e = ix->gstart[q->group + 1];
  /* k = first position whose accuracy is below the minimum */
  size_t lo = b, hi = e;
  while (lo < hi) {
    size_t m = (lo + hi) / 2;
    if (vr_acc_meets(ix->acc[m], q->min_accuracy)) lo = m + 1;
    else hi = m;
  }
  size_t k = lo;
  double L = q->latency_ms > DBL_MAX ? DBL_MAX : q->latency_ms, best;
  int v = -1;
  if (k > b) {
    static const int order[3][2] = {{T_ACTIVE, VR_SEL_ACTIVE},
                                    {T_INACTIVE, VR_SEL_LOAD},
                                    {T_BUSY, VR_SEL_ACTIVE}};
    for (int i = 0; i < 3 && v < 0; i++) {
      if (q->loaded_only && order[i][0] == T_INACTIVE) continue;
      v = tree_query(&ix->t[order[i][0]], ix->n, b, k, L, &best);
      out->outcome = order[i][1];
    }
  }
  if (v < 0) {
    out->outcome = VR_SEL_INFEASIBLE;
    /* fastest variant meeting the accuracy, else the most accurate */
    v = k > b ? ix->closest[k - 1] : ix->order[b];
  }
  out->variant = v;
  out->latency_ms = ix->tail[v];
  out->accuracy = ix->accv[v];
  return 0;
}

const int *vr_select_instances(const vr_select_index *ix, int variant,
                               int *n) {
  if (variant < 0 || (size_t)variant >= ix->nvar) {
    *n = 0;
    return NULL;
  }
  *n = ix->inst_start[variant + 1] - ix->inst_start[variant];
  return ix->inst_idx + ix->inst_start[variant];
}

int vr_select_instance(const vr_select_index *ix, int variant,
                       const double *load) {
  int n;
  const int *is = vr_select_instances(ix, variant, &n);
  int best = -1;
  for (int i = 0; i < n; i++)
    if (best < 0 || load[is[i]] < load[best]) best = is[i];
  return best;
}
