#include "cli/serve_control.h"

#include <stdlib.h>

#include "control/jobs.h"
#include "control/pipes.h"
#include <string.h>

int vr_cli_control_arg(vr_cli_control *c, int argc, char **argv, int i) {
  const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
  char *end;
  if (!strcmp(a, "--store")) return v ? (c->store_path = v, 2) : -1;
  if (!strcmp(a, "--control-csv")) return v ? (c->csv_path = v, 2) : -1;
  if (!strcmp(a, "--cores")) {
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || n < 1 || n > 4096) return -1;
    c->cores = (int)n;
    return 2;
  }
  if (!strcmp(a, "--default-slo-ms")) {
    double d = v ? strtod(v, &end) : 0;
    if (!v || *end || d <= 0) return -1;
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
  rc = vr_control_create(&o, &c->ctl, err);
  if (!rc) rc = vr_control_start(c->ctl, err);
  if (rc) return rc;
  vr_server_set_control(s, c->ctl, c->store);
  vr_jobs_opts jo = {c->ctl, c->store, 0, 0};
  rc = vr_jobs_create(&jo, &c->jobs, err);
  if (rc) return rc;
  vr_server_set_jobs(s, c->jobs);
  rc = vr_pipes_create(c->ctl, o.rt, c->store, &c->pipes, err);
  if (rc) return rc;
  vr_server_set_pipes(s, c->pipes);
  return 0;
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
  vr_store_close(c->store);
  if (c->csv) fclose(c->csv);
  c->ctl = NULL;
  c->store = NULL;
  c->csv = NULL;
}
