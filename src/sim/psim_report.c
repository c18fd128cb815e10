/* The pipeline simulator's summary as JSON (psim.h). */
#include <jansson.h>

#include "sim/psim.h"

static json_t *task_json(const vr_psim_cfg *cfg, const vr_psim_summary *s,
                         int t) {
  const vr_pipeline *p = cfg->data->pipe;
  const vr_psim_task_stats *ts = &s->task[t];
  json_t *o = json_object(), *drops = json_object(), *mult = json_object();
  json_object_set_new(o, "task", json_string(p->tasks[t].name));
  json_object_set_new(o, "requests", json_integer(ts->requests));
  json_object_set_new(o, "served", json_integer(ts->served));
  json_object_set_new(o, "rerouted", json_integer(ts->rerouted));
  for (int r = 0; r < VR_PDROP__COUNT; r++)
    json_object_set_new(drops, vr_pdrop_name(r), json_integer(ts->drops[r]));
  json_object_set_new(o, "drops", drops);
  for (int v = 0; s->mult_observed && v < p->tasks[t].nvariants; v++) {
    double m = s->mult_observed[cfg->data->off[t] + v];
    if (m >= 0 && p->tasks[t].nchildren)
      json_object_set_new(mult, p->tasks[t].variants[v].name, json_real(m));
  }
  json_object_set_new(o, "mult_observed", mult);
  return o;
}

int vr_psim_summary_write(const vr_psim_cfg *cfg, const char *policy,
                          const vr_psim_summary *s, FILE *f) {
  json_t *o = json_object(), *tasks = json_array();
  json_object_set_new(o, "pipeline", json_string(cfg->data->pipe->name));
  json_object_set_new(o, "policy", json_string(policy));
  json_object_set_new(o, "drop_mode", json_string(vr_edrop_name(cfg->drop_mode)));
  json_object_set_new(o, "workers", json_integer(cfg->workers));
  json_object_set_new(o, "queries", json_integer(s->queries));
  json_object_set_new(o, "ok", json_integer(s->ok));
  json_object_set_new(o, "unfinished", json_integer(s->unfinished));
  json_object_set_new(o, "unfinished_overdue", json_integer(s->unfinished_overdue));
  json_object_set_new(o, "late", json_integer(s->late));
  json_object_set_new(o, "dropped", json_integer(s->dropped));
  json_object_set_new(o, "violations_pct", json_real(s->violations_pct));
  json_object_set_new(o, "query_violations_pct",
                      json_real(s->query_violations_pct));
  json_object_set_new(o, "paths", json_integer(s->paths));
  json_object_set_new(o, "paths_violated", json_integer(s->paths_bad));
  json_object_set_new(o, "capacity_qps", json_real(s->capacity_qps));
  json_object_set_new(o, "offpeak_servers", json_real(s->offpeak_workers));
  json_object_set_new(o, "accuracy_pct", json_real(s->accuracy_pct));
  json_object_set_new(o, "peak_violations_pct",
                      json_real(s->peak_violations_pct));
  json_object_set_new(o, "mean_servers", json_real(s->mean_workers));
  json_object_set_new(o, "p50_ms", json_real(s->p50_ms));
  json_object_set_new(o, "p99_ms", json_real(s->p99_ms));
  json_object_set_new(o, "replans", json_integer(s->replans));
  json_object_set_new(o, "wall_s", json_real(s->wall_s));
  for (int t = 0; t < cfg->data->pipe->ntasks; t++)
    json_array_append_new(tasks, task_json(cfg, s, t));
  json_object_set_new(o, "tasks", tasks);
  int rc = json_dumpf(o, f, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
  fputc('\n', f);
  json_decref(o);
  return rc ? VR_EIO : 0;
}
