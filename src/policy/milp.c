/* MILP builder over CBC (milp.h). */
#include "policy/milp.h"

#include <coin/Cbc_C_Interface.h>
#include <stdlib.h>
#include <time.h>

struct vr_milp {
  Cbc_Model *cbc;
  int ncols;
  int status; /* of the last solve; -1 before */
};

vr_milp *vr_milp_new(int maximize) {
  vr_milp *m = calloc(1, sizeof *m);
  if (!m || !(m->cbc = Cbc_newModel())) {
    free(m);
    return NULL;
  }
  m->status = -1;
  Cbc_setLogLevel(m->cbc, 0);
  /* the limit in wall time: CBC's default counts the process's CPU time,
   * which a live server's serving threads spend too (a 2-s limit ran out
   * after 0.36 of 0.6 s of wall time with one other busy thread) */
  Cbc_setParameter(m->cbc, "timeMode", "elapsed");
  /* no preprocessing: CglPreProcess (Cgl 0.60.3) ends its passes when the
   * time limit runs out but keeps their count, and post-processing a
   * solution then calls into the passes that never ran (NULL): a segfault
   * (test_milp's test_limit_during_preprocessing), and every live solve
   * has a limit */
  Cbc_setParameter(m->cbc, "preprocess", "off");
  /* no feasibility pump: Clp 1.17 (Debian's CBC 2.10.8) can fail an
   * assertion in the dual simplex of the pump's mini branch and bound
   * (ClpSimplexDual.cpp:3626: a superbasic column where Clp has noted
   * none) and abort() the process (test_loki's {340, 6}). Without both,
   * the plans measured are the same and no slower (EXPERIMENTS, "CBC's
   * preprocessing and feasibility pump") */
  Cbc_setParameter(m->cbc, "feasibilityPump", "off");
  Cbc_setObjSense(m->cbc, maximize ? -1 : 1);
  return m;
}

void vr_milp_free(vr_milp *m) {
  if (!m) return;
  Cbc_deleteModel(m->cbc);
  free(m);
}

int vr_milp_col(vr_milp *m, double lb, double ub, double obj, int integer) {
  Cbc_addCol(m->cbc, "", lb, ub, obj, integer ? 1 : 0, 0, NULL, NULL);
  return m->ncols++;
}

void vr_milp_row(vr_milp *m, int n, const int *idx, const double *coef,
                 char sense, double rhs) {
  Cbc_addRow(m->cbc, "", n, idx, coef, sense, rhs);
}

void vr_milp_set_gap(vr_milp *m, double abs_gap) {
  Cbc_setAllowableGap(m->cbc, abs_gap);
}

void vr_milp_set_cutoff(vr_milp *m, double obj) {
  Cbc_setCutoff(m->cbc, obj);
}

void vr_milp_lean(vr_milp *m) {
  Cbc_setParameter(m->cbc, "cuts", "off");
  Cbc_setParameter(m->cbc, "heur", "off");
}

/* Wall seconds since `start`: CBC's time limit counts elapsed time
 * (timeMode, vr_milp_new), and this span holds CBC's, so a stop on the
 * limit implies this is at least the limit. */
static double wall_since(const struct timespec *start) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - start->tv_sec) + (t.tv_nsec - start->tv_nsec) / 1e9;
}

/* The vr_milp_status of the solve that began at `start`. */
static int classify(vr_milp *m, double time_limit_s, const struct timespec *start) {
  /* CBC stopped by its time limit in the root LP reports the LP
   * relaxation infeasible (status 0, secondary 1: proven infeasible), as
   * a real proof does, even for a model whose zero vector is feasible:
   * once the limit has run out, "infeasible" is no proof */
  int out_of_time = time_limit_s > 0 &&
                    (Cbc_isSecondsLimitReached(m->cbc) ||
                     wall_since(start) >= 0.99 * time_limit_s);
  if (Cbc_isProvenInfeasible(m->cbc) && !out_of_time)
    return VR_MILP_INFEASIBLE;
  if (Cbc_isProvenOptimal(m->cbc)) return VR_MILP_OPTIMAL;
  return Cbc_numberSavedSolutions(m->cbc) > 0 ? VR_MILP_FEASIBLE
                                                : VR_MILP_NONE;
}

/* vr_milp_solve, and the wall seconds it took into *wall (the budget's
 * accounting, from the same clock reads the status is judged by). */
static int solve_timed(vr_milp *m, double time_limit_s, double *wall) {
  if (time_limit_s > 0) Cbc_setMaximumSeconds(m->cbc, time_limit_s);
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  Cbc_solve(m->cbc);
  m->status = classify(m, time_limit_s, &start);
  if (wall) *wall = wall_since(&start);
  return m->status;
}

int vr_milp_solve(vr_milp *m, double time_limit_s) {
  return solve_timed(m, time_limit_s, NULL);
}

void vr_milp_budget_init(vr_milp_budget *b, double total_s) {
  *b = (vr_milp_budget){total_s > 0 ? total_s : 0, total_s > 0, 0};
}

int vr_milp_budget_spent(vr_milp_budget *b) {
  if (!b || !b->limited || b->left_s > 0) return 0;
  b->ran_out = 1;
  return 1;
}

int vr_milp_solve_budget(vr_milp *m, double time_limit_s, vr_milp_budget *b) {
  if (!b || !b->limited) return vr_milp_solve(m, time_limit_s);
  if (vr_milp_budget_spent(b)) return m->status = VR_MILP_NONE;
  int cut = !(time_limit_s > 0) || b->left_s < time_limit_s;
  double wall = 0;
  int s = solve_timed(m, cut ? b->left_s : time_limit_s, &wall);
  b->left_s -= wall;
  if (cut && (s == VR_MILP_FEASIBLE || s == VR_MILP_NONE)) b->ran_out = 1;
  return s;
}

/* CBC hands out its LP's last point whatever the status: only a solution
 * is one */
const double *vr_milp_x(vr_milp *m) {
  return m->status == VR_MILP_OPTIMAL || m->status == VR_MILP_FEASIBLE
             ? Cbc_getColSolution(m->cbc)
             : NULL;
}
double vr_milp_obj(vr_milp *m) { return Cbc_getObjValue(m->cbc); }
int vr_milp_ncols(const vr_milp *m) { return m->ncols; }
