/* A pipeline plan as text, by task and variant name: how the controller
 * publishes the plan its pipeline policy made to the workers that route
 * the pipeline's hops (pipe_plan.h, "as text"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "policy/pipe_plan.h"

#define HEAD "vario-pipe-plan 1\n"

char *vr_pipe_plan_text(const vr_pipeline *view, const vr_pipe_plan *plan, double ewma,
                        int drop_mode) {
  size_t cap = 256 + (size_t)plan->off[plan->ntasks] * (2 * VR_PIPE_NAME_MAX + 96);
  char *b = vr_malloc(cap);
  if (!b) return NULL;
  size_t off = 0;
  int w = snprintf(b, cap, HEAD "ewma %.3f drop %d accuracy %.6g scaled %d feasible %d "
                   "demand %.3f fill %.6g\n", ewma, drop_mode, plan->accuracy,
                   plan->accuracy_scaled, plan->feasible, plan->demand_qps, plan->fill);
  /* a header cut short (absurd rates print hundreds of digits) ends the
   * text there: off past cap made the next cap - off wrap, and the lines
   * were written beyond the buffer */
  off = w < 0 ? 0 : (size_t)w < cap ? (size_t)w : cap - 1;
  for (int t = 0; t < view->ntasks && t < plan->ntasks; t++)
    for (int k = 0; k < view->tasks[t].nvariants; k++) {
      const vr_pipe_alloc *a = &plan->a[plan->off[t] + k];
      w = snprintf(b + off, cap - off, "%s %s %d %d %.6g %.6g\n", view->tasks[t].name,
                   view->tasks[t].variants[k].name, a->inst, a->batch, a->lat_ms, a->cap_qps);
      if (w < 0 || (size_t)w >= cap - off) break;
      off += (size_t)w;
    }
  return b;
}

static int num(const char *s, double lo, double hi, double *out) {
  char *end;
  double v = s ? strtod(s, &end) : NAN;
  if (!s || end == s || *end || !(v >= lo && v <= hi)) return -1;
  *out = v;
  return 0;
}

/* "key value key value ..." of the header line. */
static int header(char *line, vr_pipe_plan *plan, double *ewma, int *drop, vr_errbuf *err) {
  static const char *keys[] = {"ewma", "drop", "accuracy", "scaled", "feasible", "demand", "fill"};
  double v[7];
  char *save = NULL, *tok = strtok_r(line, " ", &save);
  for (int i = 0; i < 7; i++, tok = strtok_r(NULL, " ", &save)) {
    if (!tok || strcmp(tok, keys[i]) ||
        num(strtok_r(NULL, " ", &save), i == 1 ? 0 : i == 2 ? -1 : 0, i == 1 ? VR_EDROP_REROUTE : 1e12, &v[i]))
      return vr_errf(err, VR_EFORMAT, "plan: header field '%s' missing or out of range",
                     keys[i]);
  }
  if (tok) return vr_errf(err, VR_EFORMAT, "plan: trailing header field '%.32s'", tok);
  *ewma = v[0];
  *drop = (int)v[1];
  plan->accuracy = v[2];
  plan->accuracy_scaled = v[3] != 0;
  plan->feasible = v[4] != 0;
  plan->demand_qps = v[5];
  plan->fill = v[6];
  return 0;
}

int vr_pipe_plan_parse_text(const vr_pipeline *view, const char *text, size_t len,
                            vr_pipe_plan *plan, double *ewma, int *drop_mode, vr_errbuf *err) {
  if (len < sizeof HEAD - 1 || memcmp(text, HEAD, sizeof HEAD - 1))
    return vr_errf(err, VR_EFORMAT, "plan: not a vario-pipe-plan 1 text");
  char *buf = vr_malloc(len + 1);
  if (!buf) return vr_errf(err, VR_ENOMEM, "out of memory");
  memcpy(buf, text, len);
  buf[len] = 0;
  if (strlen(buf) != len) {
    vr_free(buf);
    return vr_errf(err, VR_EFORMAT, "plan: NUL byte in the text");
  }
  for (int i = 0; i < plan->off[plan->ntasks]; i++) plan->a[i] = (vr_pipe_alloc){0};
  plan->workers = 0;
  int rc = 0, lineno = 0;
  char *save = NULL;
  for (char *line = strtok_r(buf + sizeof HEAD - 1, "\n", &save); line && !rc;
       line = strtok_r(NULL, "\n", &save)) {
    if (lineno++ == 0) {
      rc = header(line, plan, ewma, drop_mode, err);
      continue;
    }
    char *s2 = NULL, *task = strtok_r(line, " ", &s2), *var = strtok_r(NULL, " ", &s2);
    double inst, batch, lat, cap;
    if (!task || !var || num(strtok_r(NULL, " ", &s2), 0, 4096, &inst) ||
        num(strtok_r(NULL, " ", &s2), 0, 4096, &batch) ||
        num(strtok_r(NULL, " ", &s2), 0, 1e9, &lat) ||
        num(strtok_r(NULL, " ", &s2), 0, 1e12, &cap) || strtok_r(NULL, " ", &s2)) {
      rc = vr_errf(err, VR_EFORMAT, "plan: line %d: '<task> <variant> <inst> <batch> "
                   "<lat_ms> <cap_qps>' expected", lineno + 1);
      break;
    }
    int t = vr_pipeline_task(view, task);
    int k = t >= 0 ? vr_pipe_task_variant(&view->tasks[t], var) : -1;
    if (k < 0) continue; /* not in this side's view: nothing to route there */
    vr_pipe_alloc *a = &plan->a[plan->off[t] + k];
    *a = (vr_pipe_alloc){(int)inst, (int)batch, lat, cap};
    plan->workers += a->inst;
  }
  if (!rc && lineno == 0) rc = vr_errf(err, VR_EFORMAT, "plan: header line missing");
  vr_free(buf);
  return rc;
}
