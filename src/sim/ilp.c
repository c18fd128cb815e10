/* The provisioning ILP with COIN-OR CBC (see ilp.h). */
#include "sim/ilp.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "policy/milp.h"
#include "policy/place.h"

void vr_cap_solution_free(vr_cap_solution *s) {
  vr_free(s->inst);
  s->inst = NULL;
}

static double sat_of(const vr_cap_problem *p, size_t v) {
  return vr_profile_sat_qps(&p->variants[v], p->slo_ms[p->model_of[v]]);
}

/* Same rule as the policy's placement: CPU variants stay off GPU workers. */
static int type_ok(const vr_snap_wtype *t, const vr_profile *v) {
  return vr_place_type_fits(t, v) && (v->device == VR_DEV_GPU || t->gpus == 0);
}

/* Instances cost nothing in the objective (workers do), so an optimum may
 * hold more of them than the demand needs wherever a paid worker has room
 * (with CBC's preprocessing off, 8 instances where 1 does). Removes them,
 * lowest capacity first, while each model's demand stays covered: the
 * reference provisions what it needs, whatever optimum CBC stopped at. */
static void trim(const vr_cap_problem *p, size_t nw, long *n) {
  size_t nv = p->nvariants;
  for (size_t md = 0; md < p->nmodels; md++) {
    double have = 0, need = p->slack * p->demand[md];
    for (size_t v = 0; v < nv; v++)
      if ((size_t)p->model_of[v] == md)
        for (size_t w = 0; w < nw; w++) have += sat_of(p, v) * n[v * nw + w];
    for (;;) { /* the variant with the least capacity that can go */
      size_t best = nv;
      for (size_t v = 0; v < nv; v++) {
        if ((size_t)p->model_of[v] != md) continue;
        double s = sat_of(p, v);
        int any = 0;
        for (size_t w = 0; w < nw && !any; w++) any = n[v * nw + w] > 0;
        if (any && have - s >= need * (1 - 1e-9) &&
            (best == nv || s < sat_of(p, best)))
          best = v;
      }
      if (best == nv) break;
      for (size_t w = nw; w-- > 0;) /* from the last worker of the order */
        if (n[best * nw + w] > 0) {
          n[best * nw + w]--;
          break;
        }
      have -= sat_of(p, best);
    }
  }
}

int vr_ilp_solve(const vr_cap_problem *p, double time_limit_s,
                 vr_cap_solution *out, vr_errbuf *err) {
  memset(out, 0, sizeof *out);
  size_t nw = 0;
  for (size_t t = 0; t < p->nwtypes; t++) {
    if (p->wtypes[t].max_count <= 0 || p->wtypes[t].max_count > 1000)
      return vr_errf(err, VR_EINVAL, "ilp: worker type %zu needs max_count "
                     "in 1..1000", t);
    nw += (size_t)p->wtypes[t].max_count;
  }
  size_t nv = p->nvariants, nx = nv * nw;
  int *wtype = vr_malloc((nw + 1) * sizeof *wtype);
  int *cols = vr_malloc((nx + nw + 1) * sizeof *cols);
  double *coef = vr_malloc((nx + nw + 1) * sizeof *coef);
  out->inst = VR_NEWN(int, nv ? nv : 1);
  vr_milp *m = vr_milp_new(0);
  if (!wtype || !cols || !coef || !out->inst || !m) {
    vr_free(wtype), vr_free(cols), vr_free(coef);
    vr_cap_solution_free(out);
    vr_milp_free(m);
    return vr_errf(err, VR_ENOMEM, "ilp: out of memory");
  }
  for (size_t t = 0, w = 0; t < p->nwtypes; t++)
    for (int k = 0; k < p->wtypes[t].max_count; k++) wtype[w++] = (int)t;
  /* columns: x[v,w] (index v*nw + w), then y[w] */
  for (size_t v = 0; v < nv; v++)
    for (size_t w = 0; w < nw; w++) {
      int ok = type_ok(&p->wtypes[wtype[w]], &p->variants[v]) &&
               sat_of(p, v) > 0;
      vr_milp_col(m, 0, ok ? 1e6 : 0, 0, 1);
    }
  for (size_t w = 0; w < nw; w++)
    vr_milp_col(m, 0, 1, p->wtypes[wtype[w]].price_per_s, 1);
  /* demand per model */
  for (size_t md = 0; md < p->nmodels; md++) {
    int n = 0;
    for (size_t v = 0; v < nv; v++)
      if ((size_t)p->model_of[v] == md)
        for (size_t w = 0; w < nw; w++)
          cols[n] = (int)(v * nw + w), coef[n++] = sat_of(p, v);
    vr_milp_row(m, n, cols, coef, 'G', p->slack * p->demand[md]);
  }
  /* capacity per worker: cores, GPUs, memory (GiB) */
  for (size_t w = 0; w < nw; w++) {
    const vr_snap_wtype *t = &p->wtypes[wtype[w]];
    for (int r = 0; r < 3; r++) {
      int n = 0;
      for (size_t v = 0; v < nv; v++) {
        const vr_profile *pr = &p->variants[v];
        double need = r == 0 ? pr->threads
                    : r == 1 ? (pr->device == VR_DEV_GPU)
                             : (double)pr->mem_bytes / (1 << 30);
        if (need > 0) cols[n] = (int)(v * nw + w), coef[n++] = need;
      }
      double cap = r == 0 ? t->cores : r == 1 ? t->gpus
                                               : (double)t->mem_bytes / (1 << 30);
      cols[n] = (int)(nx + w), coef[n++] = -cap;
      vr_milp_row(m, n, cols, coef, 'L', 0);
    }
  }
  /* symmetry: workers of a type are used in order */
  for (size_t w = 1; w < nw; w++)
    if (wtype[w] == wtype[w - 1]) {
      int c2[2] = {(int)(nx + w - 1), (int)(nx + w)};
      double k2[2] = {1, -1};
      vr_milp_row(m, 2, c2, k2, 'G', 0);
    }
  int st = vr_milp_solve(m, time_limit_s);
  int rc = 0;
  if (st == VR_MILP_INFEASIBLE) {
    rc = vr_errf(err, VR_EINFEASIBLE, "ilp: no provisioning meets demand");
  } else if (st == VR_MILP_NONE) {
    rc = vr_errf(err, VR_ETIMEDOUT, "ilp: no solution in time");
  } else {
    long *n = VR_NEWN(long, nx + 1);
    if (!n) {
      rc = vr_errf(err, VR_ENOMEM, "ilp: out of memory");
    } else {
      const double *x = vr_milp_x(m);
      for (size_t i = 0; i < nx; i++) n[i] = lround(x[i]);
      out->optimal = st == VR_MILP_OPTIMAL;
      out->feasible = 1;
      trim(p, nw, n);
      for (size_t v = 0; v < nv; v++)
        for (size_t w = 0; w < nw; w++) out->inst[v] += (int)n[v * nw + w];
      for (size_t w = 0; w < nw; w++) {
        int used = 0;
        for (size_t v = 0; v < nv; v++) used |= n[v * nw + w] > 0;
        if (used) {
          out->workers++;
          out->cost += p->wtypes[wtype[w]].price_per_s;
        }
      }
      vr_free(n);
    }
  }
  vr_milp_free(m);
  vr_free(wtype), vr_free(cols), vr_free(coef);
  if (rc) vr_cap_solution_free(out);
  return rc;
}
