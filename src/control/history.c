#include "control/history.h"

#include <jansson.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

void vr__hist_add_row(vr_ctl_history *h, const vr_hist_row *r) {
  vr_hist_row *slot = &h->rows[h->nrows++ % VR_HIST_ROWS];
  vr_free(slot->variants);
  vr_free(slot->apps);
  *slot = *r;
}

void vr__hist_free(vr_ctl_history *h) {
  for (int i = 0; i < VR_HIST_ROWS; i++) {
    vr_free(h->rows[i].variants);
    vr_free(h->rows[i].apps);
    h->rows[i].variants = h->rows[i].apps = NULL;
  }
}

void vr__hist_add_act(vr_ctl_history *h, double t_s, const char *kind,
                      const char *variant, const char *why) {
  vr_hist_act *a = &h->acts[h->nacts++ % VR_HIST_ACTS];
  a->t_s = t_s;
  snprintf(a->kind, sizeof a->kind, "%s", kind ? kind : "");
  snprintf(a->variant, sizeof a->variant, "%s", variant ? variant : "");
  snprintf(a->why, sizeof a->why, "%s", why ? why : "");
}

static json_t *row_json(const vr_hist_row *r) {
  json_t *apps = json_loads(r->apps && r->apps[0] ? r->apps : "{}", 0, NULL);
  return json_pack("{s:f, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:i, s:i, s:s, s:o}",
                   "t_s", r->t_s, "arrivals", (json_int_t)r->arrivals, "served",
                   (json_int_t)r->served, "late", (json_int_t)r->late, "failed",
                   (json_int_t)r->failed, "slo_attainment", r->attainment, "p99_ms",
                   r->p99_ms, "accuracy", r->accuracy, "cost_per_s", r->cost_per_s,
                   "instances", r->instances, "cores", r->cores, "variants",
                   r->variants ? r->variants : "", "apps", apps ? apps : json_object());
}

char *vr__hist_json(const vr_ctl_history *h, double since_s) {
  json_t *rows = json_array(), *acts = json_array();
  uint64_t first = h->nrows > VR_HIST_ROWS ? h->nrows - VR_HIST_ROWS : 0;
  for (uint64_t i = first; i < h->nrows; i++)
    if (h->rows[i % VR_HIST_ROWS].t_s > since_s)
      json_array_append_new(rows, row_json(&h->rows[i % VR_HIST_ROWS]));
  first = h->nacts > VR_HIST_ACTS ? h->nacts - VR_HIST_ACTS : 0;
  for (uint64_t i = first; i < h->nacts; i++) {
    const vr_hist_act *a = &h->acts[i % VR_HIST_ACTS];
    if (a->t_s > since_s)
      json_array_append_new(acts, json_pack("{s:f, s:s, s:s, s:s}", "t_s", a->t_s,
                                            "kind", a->kind, "variant", a->variant,
                                            "why", a->why));
  }
  json_t *o = json_pack("{s:o, s:o}", "rows", rows, "actions", acts);
  char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  char *out = s ? vr_strdup(s) : NULL;
  free(s);
  return out;
}
