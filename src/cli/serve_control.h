/*
 * `vario serve --store DB`: attaches the model-less control plane (store +
 * control loop + /v2/apps endpoints) to a running server. Kept apart from
 * cmd_serve.c so the serve command only gains a few lines.
 */
#ifndef VR_CLI_SERVE_CONTROL_H
#define VR_CLI_SERVE_CONTROL_H

#include "server/server.h"

typedef struct vr_cli_control {
  const char *store_path; /* NULL: no control plane */
  const char *csv_path;   /* per-second time series, or NULL */
  int cores;              /* 0 = all online CPUs */
  double default_slo_ms;  /* 0 = 100 */
  /* --policy NAME (infaas, clipper, sm, asyfunc; parsed = kind + 1, 0 =
   * default), --control-period-ms, AsyFunc's --af-gamma/--af-kappa/
   * --af-release-ms/--af-mls-period-s (0 = default; kappa -1 = default)
   * and --shadow-process */
  int policy_kind1;
  double period_ms, af_release_ms, af_mls_period_s;
  int af_gamma, af_kappa1, shadow_process;
  /* --pipeline-policy NAME (policy/pipe_policy.h; NULL = per-hop INFaaS
   * selection), --pipeline-period-ms, --pipeline-slack */
  const char *pipe_policy;
  double pipe_period_ms, pipe_slack, pipe_tick_ms;
  /* InferLine's planner for --pipeline-policy inferline (and the cg_*
   * baselines): --inferline-rate QPS, --inferline-cv CV (the sample
   * trace it plans on; sim/il_sim.h), handed to the policy as its arg */
  struct vr_il_live_opts *il;
  struct vr_il_pipe_arg *il_arg;
  /* offline jobs in <repo>/.jobs/<jobs_dir_name> (serve_role.h), or NULL */
  const char *jobs_dir_name;
  /* owned after open */
  vr_store *store;
  vr_control *ctl;
  struct vr_jobs *jobs;
  struct vr_pipes *pipes;
  FILE *csv;
} vr_cli_control;

/* Parses one of --store/--control-csv/--cores/--default-slo-ms at argv[i];
 * returns the number of argv entries used (0: not ours, -1: bad value). */
int vr_cli_control_arg(vr_cli_control *c, int argc, char **argv, int i);
int vr_cli_control_open(vr_cli_control *c, vr_server *s, vr_errbuf *err);
/* Stops the loop's threads (before the server drains). */
void vr_cli_control_close(vr_cli_control *c);
/* Frees control, store and CSV (after the server has drained). */
void vr_cli_control_free(vr_cli_control *c);

#endif
