/* The pipeline tree: validation, lookups, rates and paths (pipeline.h). */
#include "policy/pipeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vr_pipeline_free(vr_pipeline *p) {
  if (!p) return;
  for (int i = 0; i < p->ntasks; i++) {
    free(p->tasks[i].variants);
    json_decref(p->tasks[i].adapter);
  }
  free(p->tasks);
  free(p);
}

vr_pipeline *vr_pipeline_dup(const vr_pipeline *p) {
  vr_pipeline *q = calloc(1, sizeof *q);
  if (!q) return NULL;
  *q = *p;
  q->ntasks = 0;
  q->tasks = calloc(p->ntasks ? p->ntasks : 1, sizeof *q->tasks);
  if (!q->tasks) return free(q), NULL;
  for (int i = 0; i < p->ntasks; i++) {
    const vr_pipe_task *s = &p->tasks[i];
    vr_pipe_task *d = &q->tasks[i];
    *d = *s;
    d->variants = NULL;
    d->adapter = NULL;
    q->ntasks = i + 1;
    d->variants = calloc(s->nvariants ? s->nvariants : 1, sizeof *d->variants);
    if (!d->variants) return vr_pipeline_free(q), NULL;
    memcpy(d->variants, s->variants, s->nvariants * sizeof *d->variants);
    if (s->adapter && !(d->adapter = json_deep_copy(s->adapter)))
      return vr_pipeline_free(q), NULL;
  }
  return q;
}

int vr_pipeline_task(const vr_pipeline *p, const char *name) {
  for (int i = 0; i < p->ntasks; i++)
    if (!strcmp(p->tasks[i].name, name)) return i;
  return -1;
}

int vr_pipe_task_variant(const vr_pipe_task *t, const char *name) {
  for (int i = 0; i < t->nvariants; i++)
    if (!strcmp(t->variants[i].name, name)) return i;
  return -1;
}

int vr_pipe_task_route_label(const vr_pipeline *p, const vr_pipe_task *t,
                             const char *label) {
  int any = -1;
  for (int c = 0; c < t->nchildren; c++) {
    const char *l = p->tasks[t->children[c]].label;
    if (!l[0]) {
      if (any < 0) any = c;
    } else if (label && !strcmp(l, label)) {
      return c;
    }
  }
  return any;
}

/* Each output goes to one child (vr_pipe_task_route_label), so the
 * unlabelled child (siblings' labels are unique: at most one) gets what its
 * labelled siblings do not: a share of 1 beside theirs would have planners
 * provision it for every output while it receives only the rest. */
void vr_pipe_rest_share(const vr_pipeline *p, int t, double *share) {
  const vr_pipe_task *tk = &p->tasks[t];
  int rest = vr_pipe_task_route_label(p, tk, NULL);
  if (rest < 0) return;
  double taken = 0;
  for (int c = 0; c < tk->nchildren; c++)
    if (c != rest) taken += share[c];
  share[rest] = taken < 1 ? 1 - taken : 0;
}

/* Nothing measured yet: an output is as likely to go to any child. */
void vr_pipe_default_shares(const vr_pipeline *p, int t, double *share) {
  const vr_pipe_task *tk = &p->tasks[t];
  for (int c = 0; c < tk->nchildren; c++) share[c] = 1.0 / tk->nchildren;
}

static int name_ok(const char *s) {
  if (!s[0]) return 0;
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == '/') return 0;
  return 1;
}

/* Why name_ok refused s: the error said "a name is required" or "a bad
 * name" of a name that was given, not which rule it broke. */
static int bad_name(vr_errbuf *err, const char *what, const char *s) {
  if (!s[0]) return vr_errf(err, VR_EINVAL, "%s: a name is required", what);
  return vr_errf(err, VR_EINVAL, "%s: name '%s' holds '/' or a control character (names "
                 "are URL path segments)", what, s);
}

static int check_variants(const vr_pipe_task *t, vr_errbuf *err) {
  if (t->nvariants < 0 || t->nvariants > VR_PIPE_MAX_VARIANTS)
    return vr_errf(err, VR_EINVAL, "task '%s': %d variants (max %d)", t->name,
                   t->nvariants, VR_PIPE_MAX_VARIANTS);
  if (!t->app[0] && t->nvariants == 0)
    return vr_errf(err, VR_EINVAL,
                   "task '%s' has no model: give an app or variants", t->name);
  for (int v = 0; v < t->nvariants; v++) {
    const vr_pipe_variant *pv = &t->variants[v];
    if (!name_ok(pv->name)) {
      char what[VR_PIPE_NAME_MAX + 32];
      snprintf(what, sizeof what, "task '%s' variant %d", t->name, v);
      return bad_name(err, what, pv->name);
    }
    for (int w = 0; w < v; w++)
      if (!strcmp(t->variants[w].name, pv->name))
        return vr_errf(err, VR_EINVAL, "task '%s': variant '%s' listed twice",
                       t->name, pv->name);
    if (pv->accuracy != -1 && !(pv->accuracy >= 0 && pv->accuracy <= 100))
      return vr_errf(err, VR_EINVAL, "task '%s' variant '%s': accuracy %g "
                     "not in [0,100]", t->name, pv->name, pv->accuracy);
    if (!(pv->mult >= 0 && pv->mult <= 1e6))
      return vr_errf(err, VR_EINVAL, "task '%s' variant '%s': mult %g not in "
                     "[0,1e6]", t->name, pv->name, pv->mult);
    double sum = 0;
    for (int c = 0; c < t->nchildren; c++) {
      if (!(pv->share[c] >= 0 && pv->share[c] <= 1))
        return vr_errf(err, VR_EINVAL, "task '%s' variant '%s': share %g of "
                       "child %d not in [0,1]", t->name, pv->name,
                       pv->share[c], c);
      sum += pv->share[c];
    }
    if (sum > 1 + 1e-9) /* the planners would provision outputs twice */
      return vr_errf(err, VR_EINVAL, "task '%s' variant '%s': shares sum to "
                     "%g > 1 (each output goes to one child)", t->name,
                     pv->name, sum);
  }
  return 0;
}

static int check_links(const vr_pipeline *p, int i, vr_errbuf *err) {
  const vr_pipe_task *t = &p->tasks[i];
  if ((i == 0) != (t->parent < 0) || t->parent >= i)
    return vr_errf(err, VR_EINVAL, "task '%s': not in preorder below its "
                   "parent (cycle or second root)", t->name);
  if (t->nchildren < 0 || t->nchildren > VR_PIPE_MAX_CHILDREN)
    return vr_errf(err, VR_EINVAL, "task '%s': %d children (max %d)", t->name,
                   t->nchildren, VR_PIPE_MAX_CHILDREN);
  if (i > 0) {
    const vr_pipe_task *par = &p->tasks[t->parent];
    int found = 0;
    for (int c = 0; c < par->nchildren; c++) found += par->children[c] == i;
    if (found != 1)
      return vr_errf(err, VR_EINVAL, "task '%s': parent '%s' does not list it "
                     "once", t->name, par->name);
  }
  for (int c = 0; c < t->nchildren; c++) {
    int k = t->children[c];
    if (k <= i || k >= p->ntasks || p->tasks[k].parent != i)
      return vr_errf(err, VR_EINVAL, "task '%s': child %d is not below it "
                     "(cycle or two parents)", t->name, c);
    for (int d = 0; d < c; d++)
      if (!strcmp(p->tasks[t->children[d]].label, p->tasks[k].label))
        return vr_errf(err, VR_EINVAL, "task '%s': children '%s' and '%s' "
                       "have the same label \"%s\"", t->name,
                       p->tasks[t->children[d]].name, p->tasks[k].name,
                       p->tasks[k].label);
  }
  return 0;
}

int vr_pipeline_validate(const vr_pipeline *p, vr_errbuf *err) {
  if (!name_ok(p->name)) return bad_name(err, "pipeline", p->name);
  if (!(p->slo_ms > 0 && p->slo_ms <= 3.6e6))
    return vr_errf(err, VR_EINVAL, "pipeline '%s': SLO %g ms not in "
                   "(0, 3600000]", p->name, p->slo_ms);
  if (p->ntasks < 1 || p->ntasks > VR_PIPE_MAX_TASKS)
    return vr_errf(err, VR_EINVAL, "pipeline '%s': %d tasks (1..%d)", p->name,
                   p->ntasks, VR_PIPE_MAX_TASKS);
  for (int i = 0; i < p->ntasks; i++) {
    const vr_pipe_task *t = &p->tasks[i];
    if (!name_ok(t->name)) {
      char what[VR_PIPE_NAME_MAX + 32];
      snprintf(what, sizeof what, "pipeline '%s' task %d", p->name, i);
      return bad_name(err, what, t->name);
    }
    for (int j = 0; j < i; j++)
      if (!strcmp(p->tasks[j].name, t->name))
        return vr_errf(err, VR_EINVAL, "pipeline '%s': task '%s' defined "
                       "twice", p->name, t->name);
    int rc;
    if ((rc = check_links(p, i, err)) || (rc = check_variants(t, err)))
      return rc;
    if (t->adapter && !json_is_object(t->adapter))
      return vr_errf(err, VR_EINVAL, "task '%s': adapter must be an object",
                     t->name);
  }
  return 0;
}

int vr_pipe_task_set_variants(vr_pipeline *p, int t, const char *const *names,
                              const double *accuracy, int n, vr_errbuf *err) {
  if (t < 0 || t >= p->ntasks || n < 1 || n > VR_PIPE_MAX_VARIANTS)
    return vr_errf(err, VR_EINVAL, "set variants: bad task or count %d", n);
  vr_pipe_variant *v = calloc(n, sizeof *v);
  if (!v) return vr_errf(err, VR_ENOMEM, "set variants: out of memory");
  for (int i = 0; i < n; i++) {
    size_t len = strlen(names[i]);
    if (len >= sizeof v[i].name) {
      free(v);
      return vr_errf(err, VR_EINVAL, "variant name '%.40s...' too long",
                     names[i]);
    }
    memcpy(v[i].name, names[i], len + 1);
    v[i].accuracy = accuracy && accuracy[i] >= 0 ? accuracy[i] : -1;
    v[i].mult = 1;
    vr_pipe_default_shares(p, t, v[i].share);
  }
  vr_pipe_task *tk = &p->tasks[t];
  vr_pipe_variant *old = tk->variants;
  int oldn = tk->nvariants;
  tk->variants = v, tk->nvariants = n;
  int rc = check_variants(tk, err);
  if (rc) {
    tk->variants = old, tk->nvariants = oldn;
    free(v);
    return rc;
  }
  free(old);
  return 0;
}

void vr_pipeline_rates(const vr_pipeline *p, const int *choice,
                       const double *const *mix, double root_qps,
                       double *rate) {
  for (int i = 0; i < p->ntasks; i++) rate[i] = 0;
  rate[0] = root_qps;
  for (int i = 0; i < p->ntasks; i++) {
    const vr_pipe_task *t = &p->tasks[i];
    if (t->nvariants == 0) { /* variants not known yet: the defaults */
      double share[VR_PIPE_MAX_CHILDREN];
      vr_pipe_default_shares(p, i, share);
      for (int c = 0; c < t->nchildren; c++)
        rate[t->children[c]] += rate[i] * share[c];
      continue;
    }
    for (int v = 0; v < t->nvariants; v++) {
      double w = choice[i] >= 0 ? (v == choice[i]) : mix[i][v];
      if (w <= 0) continue;
      const vr_pipe_variant *pv = &t->variants[v];
      for (int c = 0; c < t->nchildren; c++)
        if (pv->mult * pv->share[c] > 0) /* no 0 x inf = NaN */
          rate[t->children[c]] += rate[i] * w * pv->mult * pv->share[c];
    }
  }
}

void vr_pipeline_levels(const vr_pipeline *p, int *levels) {
  for (int t = p->ntasks - 1; t >= 0; t--) { /* preorder: children later */
    int lv = 0;
    for (int c = 0; c < p->tasks[t].nchildren; c++)
      if (levels[p->tasks[t].children[c]] > lv) lv = levels[p->tasks[t].children[c]];
    levels[t] = lv + 1;
  }
}

int vr_pipeline_leaves(const vr_pipeline *p, int *out) {
  int n = 0;
  for (int i = 0; i < p->ntasks; i++)
    if (p->tasks[i].nchildren == 0) out[n++] = i;
  return n;
}

int vr_pipeline_path(const vr_pipeline *p, int leaf, int *path) {
  int n = 0;
  for (int t = leaf; t >= 0; t = p->tasks[t].parent) n++;
  int k = n;
  for (int t = leaf; t >= 0; t = p->tasks[t].parent) path[--k] = t;
  return n;
}
