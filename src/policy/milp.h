/*
 * A thin MILP builder over COIN-OR CBC (its C interface), shared by the
 * control-plane planners (Loki's MILPs, policy/loki.h) and the simulator's
 * reference ILP (sim/ilp.h). Columns and rows are added one at a time;
 * solve runs CBC silently (log level 0, one thread, no preprocessing and
 * no feasibility pump: milp.c says why) within a time limit.
 *
 * Purity: no I/O (CBC's log is off), no threads, no globals; a solve
 * without a time limit is deterministic for the same model.
 *
 * Ownership: a vr_milp owns its CBC model; vr_milp_free releases it.
 */
#ifndef VR_POLICY_MILP_H
#define VR_POLICY_MILP_H

#include "vario/status.h"

typedef struct vr_milp vr_milp;

/* NULL on allocation failure. maximize: 1 to maximise the objective. */
vr_milp *vr_milp_new(int maximize);
void vr_milp_free(vr_milp *m);

/* Adds a column lb <= x <= ub with objective coefficient obj; returns its
 * index. */
int vr_milp_col(vr_milp *m, double lb, double ub, double obj, int integer);

/* Adds sum coef[i] x[idx[i]] (sense 'L' <=, 'G' >=, 'E' =) rhs. */
void vr_milp_row(vr_milp *m, int n, const int *idx, const double *coef,
                 char sense, double rhs);

typedef enum {
  VR_MILP_OPTIMAL = 0,   /* proven optimal */
  VR_MILP_FEASIBLE = 1,  /* a solution, optimality not proven in time */
  VR_MILP_INFEASIBLE = 2, /* proven (or, with a cutoff, none beats it)
                             before the time limit ran out */
  VR_MILP_NONE = 3,      /* no solution found in time */
} vr_milp_status;

/* Stop once the incumbent is within abs_gap of the best bound (objective
 * units; CBC's allowable gap). */
void vr_milp_set_gap(vr_milp *m, double abs_gap);

/* Only solutions strictly better than obj count (CBC's cutoff, in the
 * model's own sense): a model that cannot beat it ends proven infeasible,
 * usually at its root. */
void vr_milp_set_cutoff(vr_milp *m, double obj);

/* No cutting planes and no primal heuristics (CBC's "cuts off", "heur
 * off"): on a small model whose LP bound is already close, or one that
 * only has to be proven unable to beat a cutoff, the root cut loop and the
 * heuristics cost more than the few nodes they save. */
void vr_milp_lean(vr_milp *m);

/* Solves; time_limit_s <= 0: none. Returns a vr_milp_status. The limit
 * is CBC's, in wall seconds (not its default, the whole process's CPU
 * time, which other threads spend too). CBC stopped by it in its root LP
 * says "proven infeasible" as a proof does; once the wall time since the
 * call reaches the limit, that is VR_MILP_NONE (so a limit also makes the
 * answer depend on the clock). */
int vr_milp_solve(vr_milp *m, double time_limit_s);

/* Wall time shared by the solves of one plan: a Loki plan runs up to a
 * thousand (latency levels), each under its own limit, so the per-solve
 * limit alone did not bound a plan (the live control loop waits for it).
 * vr_milp_solve_budget gives a solve at most what is left, runs none once
 * nothing is (VR_MILP_NONE, as a solve out of time), and takes each
 * solve's wall time from it. Like the limit, a budget that binds makes the
 * answer depend on the clock. */
typedef struct vr_milp_budget {
  double left_s; /* wall seconds left */
  int limited;   /* 0: no budget (vr_milp_solve_budget is vr_milp_solve) */
  int ran_out;   /* a solve was cut or skipped for it */
} vr_milp_budget;

/* total_s <= 0: no budget. */
void vr_milp_budget_init(vr_milp_budget *b, double total_s);

/* Nothing is left (and b->ran_out is set): a caller about to build a
 * model for a solve can skip it. 0 without a budget (b NULL too). */
int vr_milp_budget_spent(vr_milp_budget *b);

/* vr_milp_solve within min(time_limit_s, what b has left); b NULL: no
 * budget. */
int vr_milp_solve_budget(vr_milp *m, double time_limit_s, vr_milp_budget *b);

/* The solution (ncols values) after VR_MILP_OPTIMAL/FEASIBLE, else NULL;
 * valid until the next call on m. */
const double *vr_milp_x(vr_milp *m);
double vr_milp_obj(vr_milp *m);
int vr_milp_ncols(const vr_milp *m);

#endif
