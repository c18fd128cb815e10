#include "cli/serve_control.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "cli/commands.h"
#include "control/jobs.h"
#include "control/pipes.h"
#include "policy/pipe_policy.h"
#include "sim/il_sim.h"

int vr_cli_control_arg(vr_cli_control *c, int argc, char **argv, int i) {
  const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
  double d;
  if (!strcmp(a, "--store")) return v ? (c->store_path = v, 2) : -1;
  if (!strcmp(a, "--control-csv")) return v ? (c->csv_path = v, 2) : -1;
  if (!strcmp(a, "--cores")) {
    return vr__cli_parse_int(v, 1, 4096, &c->cores) ? -1 : 2;
  }
  if (!strcmp(a, "--policy")) {
    int k = v ? vr_policy_parse(v) : -1;
    if (k < 0) return -1;
    c->policy_kind1 = k + 1;
    return 2;
  }
  if (!strcmp(a, "--shadow-process")) {
    c->shadow_process = 1;
    return 1;
  }
  if (!strcmp(a, "--af-gamma") || !strcmp(a, "--af-kappa")) {
    int n;
    if (vr__cli_parse_int(v, a[5] == 'g' ? 1 : 0, 1000000, &n)) return -1;
    if (a[5] == 'g') c->af_gamma = n;
    else c->af_kappa1 = n + 1;
    return 2;
  }
  if (!strcmp(a, "--control-period-ms") || !strcmp(a, "--af-release-ms") ||
      !strcmp(a, "--af-mls-period-s")) {
    if (vr__cli_parse_pos(v, 1e7, &d)) return -1;
    if (a[2] == 'c') c->period_ms = d;
    else if (a[5] == 'r') c->af_release_ms = d;
    else c->af_mls_period_s = d;
    return 2;
  }
  if (!strcmp(a, "--pipeline-policy")) {
    vr_errbuf e = {0};
    if (v && !vr_pipe_policy_find(v, &e)) fprintf(stderr, "%s\n", e.msg);
    if (!v || e.code) return -1;
    c->pipe_policy = v;
    return 2;
  }
  if (!strcmp(a, "--pipeline-period-ms") || !strcmp(a, "--pipeline-slack")) {
    if (vr__cli_parse_pos(v, 1e7, &d)) return -1;
    if (a[11] == 'p') c->pipe_period_ms = d;
    else c->pipe_slack = d;
    return 2;
  }
  if (!strcmp(a, "--pipeline-tick-ms") || !strcmp(a, "--inferline-rate") ||
      !strcmp(a, "--inferline-cv")) {
    if (vr__cli_parse_pos(v, 1e7, &d)) return -1;
    if (a[2] == 'p') {
      if (d < 10) return -1; /* a tick under 10 ms only burns the cores */
      c->pipe_tick_ms = d;
      return 2;
    }
    if (!c->il && !(c->il = vr_calloc(1, sizeof *c->il))) return -1;
    if (a[12] == 'r') c->il->rate_qps = d;
    else c->il->cv = d;
    return 2;
  }
  if (!strcmp(a, "--default-slo-ms")) {
    if (vr__cli_parse_pos(v, 1e7, &d)) return -1;
    c->default_slo_ms = d;
    return 2;
  }
  return 0;
}

int vr_cli_control_open(vr_cli_control *c, vr_server *s, vr_errbuf *err) {
  if (!c->store_path) return 0;
  int rc = vr_store_open_path(c->store_path, &c->store, err);
  if (rc) return rc;
  if (c->csv_path && !(c->csv = fopen(c->csv_path, "w")))
    return vr_errf(err, VR_EIO, "cannot write '%s'", c->csv_path);
  if (c->csv)
    fprintf(c->csv, "t_s,arrivals,served,late,failed,slo_attainment,p99_ms,"
                    "accuracy,cost_per_s,instances,cores_used,variants\n");
  vr_control_opts o;
  vr_control_opts_init(&o);
  o.store = c->store;
  o.rt = vr_server_runtime(s);
  o.cores = c->cores;
  o.default_slo_ms = c->default_slo_ms;
  o.csv = c->csv;
  o.period_ns = (int64_t)(c->period_ms * 1e6);
  o.shadow_process = c->shadow_process;
  if (c->policy_kind1) {
    vr_policy_cfg_default(&o.policy, c->policy_kind1 - 1);
    /* live, profiles run optimistic (as control.c's default) */
    if (o.policy.kind == VR_POL_INFAAS) o.policy.backlog_step = 1.25;
    if (c->af_gamma) o.policy.af_gamma = c->af_gamma;
    if (c->af_kappa1) o.policy.af_kappa = c->af_kappa1 - 1;
    if (c->af_release_ms > 0) o.policy.af_release_idle_ms = c->af_release_ms;
    if (c->af_mls_period_s > 0) o.policy.af_mls_period_ns = (int64_t)(c->af_mls_period_s * 1e9);
    o.policy_set = 1;
  }
  rc = vr_control_create(&o, &c->ctl, err);
  if (!rc) rc = vr_control_start(c->ctl, err);
  if (rc) return rc;
  vr_server_set_control(s, c->ctl, c->store);
  /* journaled beside the outputs the server names (server_admin.c asks
   * vr_jobs_dir); a worker's in a directory of its own */
  char jdir[4200];
  const char *repo = vr_server_repo(s), *sub = c->jobs_dir_name;
  if (!sub || sub[0] == '.') sub = ""; /* an id may hold dots: never "..", nor hidden */
  int jok = repo && (size_t)snprintf(jdir, sizeof jdir, "%s/.jobs%s%s", repo, *sub ? "/" : "",
                                     sub) < sizeof jdir;
  vr_jobs_opts jo = {c->ctl, c->store, 0, 0, jok ? jdir : NULL};
  rc = vr_jobs_create(&jo, &c->jobs, err);
  if (rc) return rc;
  vr_server_set_jobs(s, c->jobs);
  rc = vr_pipes_create(c->ctl, o.rt, c->store, &c->pipes, err);
  if (rc) return rc;
  vr_server_set_pipes(s, c->pipes);
  if (c->pipe_policy) {
    vr_pipes_policy_opts po = {c->pipe_policy, c->pipe_period_ms / 1e3, c->pipe_tick_ms / 1e3,
                               0, c->pipe_slack, NULL};
    if (c->il) { /* InferLine's planner, run by the policy per pipeline */
      if (!(c->il_arg = vr_calloc(1, sizeof *c->il_arg))) return VR_ENOMEM;
      c->il_arg->configure = vr_il_sim_configure;
      c->il_arg->self = c->il;
      po.arg = c->il_arg;
    }
    rc = vr_pipes_set_policy(c->pipes, &po, err);
  }
  return rc;
}

void vr_cli_control_close(vr_cli_control *c) {
  vr_control_stop(c->ctl);
}

void vr_cli_control_free(vr_cli_control *c) {
  vr_jobs_free(c->jobs); /* a running job stops between chunks */
  c->jobs = NULL;
  vr_pipes_free(c->pipes); /* the server has drained: no request in flight */
  c->pipes = NULL;
  vr_control_free(c->ctl);
  vr_free(c->il_arg), vr_free(c->il); /* the policy thread has stopped */
  c->il_arg = NULL, c->il = NULL;
  vr_store_close(c->store);
  if (c->csv) fclose(c->csv);
  c->ctl = NULL;
  c->store = NULL;
  c->csv = NULL;
}
