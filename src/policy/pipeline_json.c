/* Pipeline specs in and out: Vario's spec and Loki's app definition
 * (formats in pipeline.h). Both parsers build the tree in preorder and end
 * with vr_pipeline_validate, so every pipeline they return is well formed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/pipeline.h"

static int copy_name(char *dst, size_t cap, const json_t *v, const char *what,
                     vr_errbuf *err) {
  if (!json_is_string(v))
    return vr_errf(err, VR_EINVAL, "%s: expected a string", what);
  const char *s = json_string_value(v);
  size_t n = json_string_length(v);
  if (n == 0 || n >= cap || strlen(s) != n)
    return vr_errf(err, VR_EINVAL, "%s: empty, too long (max %zu) or holds "
                   "NUL", what, cap - 1);
  memcpy(dst, s, n + 1);
  return 0;
}

/* A label is a string or an integer (Loki's class ids). */
static int copy_label(char *dst, const json_t *v, const char *task,
                      vr_errbuf *err) {
  dst[0] = 0;
  if (!v || json_is_null(v)) return 0;
  if (json_is_integer(v)) {
    snprintf(dst, VR_PIPE_LABEL_MAX, "%lld", (long long)json_integer_value(v));
    return 0;
  }
  char what[VR_PIPE_NAME_MAX + 32];
  snprintf(what, sizeof what, "task '%s' label", task);
  return copy_name(dst, VR_PIPE_LABEL_MAX, v, what, err);
}

static int get_number(const json_t *o, const char *key, double *out,
                      const char *ctx, vr_errbuf *err) {
  json_t *v = json_object_get(o, key);
  if (!v) return 0;
  if (!json_is_number(v))
    return vr_errf(err, VR_EINVAL, "%s: \"%s\" must be a number", ctx, key);
  *out = json_number_value(v);
  return 0;
}

static vr_pipeline *pipeline_new(void) {
  vr_pipeline *p = calloc(1, sizeof *p);
  if (p && !(p->tasks = calloc(VR_PIPE_MAX_TASKS, sizeof *p->tasks)))
    free(p), p = NULL;
  return p;
}

/* Appends a task below `parent` (preorder: the caller appends a task before
 * any of its descendants). */
static int add_task(vr_pipeline *p, int parent, vr_errbuf *err) {
  if (p->ntasks >= VR_PIPE_MAX_TASKS)
    return vr_errf(err, VR_ELIMIT, "pipeline: more than %d tasks",
                   VR_PIPE_MAX_TASKS);
  if (parent >= 0) {
    vr_pipe_task *par = &p->tasks[parent];
    if (par->nchildren >= VR_PIPE_MAX_CHILDREN)
      return vr_errf(err, VR_ELIMIT, "task '%s': more than %d children",
                     par->name, VR_PIPE_MAX_CHILDREN);
    par->children[par->nchildren++] = p->ntasks;
  }
  vr_pipe_task *t = &p->tasks[p->ntasks++];
  memset(t, 0, sizeof *t);
  t->parent = parent;
  return 0;
}

/* ---- Vario spec --------------------------------------------------- */

typedef struct spec_ctx {
  const json_t *tasks; /* the spec's task array */
  int n;
  int state[VR_PIPE_MAX_TASKS]; /* 0 unseen, 1 on the DFS stack, 2 done */
  int stack[VR_PIPE_MAX_TASKS], depth;
  int placed[VR_PIPE_MAX_TASKS]; /* spec index -> tree index */
} spec_ctx;

static int spec_find(const spec_ctx *c, const char *name) {
  for (int i = 0; i < c->n; i++) {
    json_t *nm = json_object_get(json_array_get(c->tasks, i), "name");
    if (json_is_string(nm) && !strcmp(json_string_value(nm), name)) return i;
  }
  return -1;
}

static int cycle_error(const spec_ctx *c, int to, vr_errbuf *err) {
  char buf[400] = "";
  size_t len = 0;
  int from = 0;
  while (c->stack[from] != to) from++;
  for (int k = from; k <= c->depth; k++) {
    int i = k < c->depth ? c->stack[k] : to;
    const char *nm =
        json_string_value(json_object_get(json_array_get(c->tasks, i), "name"));
    len += snprintf(buf + len, len < sizeof buf ? sizeof buf - len : 0,
                    "%s%s", k > from ? " -> " : "", nm);
    if (len >= sizeof buf) break;
  }
  return vr_errf(err, VR_EINVAL, "pipeline: cycle: %s", buf);
}

static int spec_visit(vr_pipeline *p, spec_ctx *c, int si, int parent,
                      const json_t *label, vr_errbuf *err) {
  const json_t *o = json_array_get(c->tasks, si);
  int rc, ti = p->ntasks;
  if ((rc = add_task(p, parent, err))) return rc;
  vr_pipe_task *t = &p->tasks[ti];
  c->state[si] = 1, c->placed[si] = ti;
  c->stack[c->depth++] = si;
  if ((rc = copy_name(t->name, sizeof t->name, json_object_get(o, "name"),
                      "task name", err)) ||
      (rc = copy_label(t->label, label, t->name, err)))
    return rc;
  json_t *app = json_object_get(o, "app");
  if (app && (rc = copy_name(t->app, sizeof t->app, app, "task app", err)))
    return rc;
  json_t *kids = json_object_get(o, "children");
  if (kids && !json_is_array(kids))
    return vr_errf(err, VR_EINVAL, "task '%s': \"children\" must be an array",
                   t->name);
  for (size_t k = 0; k < json_array_size(kids); k++) {
    json_t *e = json_array_get(kids, k), *nm = e, *lab = NULL;
    if (json_is_object(e))
      nm = json_object_get(e, "task"), lab = json_object_get(e, "label");
    if (!json_is_string(nm))
      return vr_errf(err, VR_EINVAL, "task '%s': child %zu needs a \"task\" "
                     "name", p->tasks[ti].name, k);
    int ci = spec_find(c, json_string_value(nm));
    if (ci < 0)
      return vr_errf(err, VR_ENOENT, "task '%s': child '%s' is an unknown "
                     "task", p->tasks[ti].name, json_string_value(nm));
    if (c->state[ci] == 1) return cycle_error(c, ci, err);
    if (c->state[ci] == 2)
      return vr_errf(err, VR_EINVAL, "task '%s' is reached twice (two "
                     "parents, or listed twice; a pipeline is a tree)",
                     json_string_value(nm));
    if ((rc = spec_visit(p, c, ci, ti, lab, err))) return rc;
  }
  c->state[si] = 2;
  c->depth--;
  return 0;
}

static int parse_variant(vr_pipeline *p, int ti, const json_t *e,
                         vr_pipe_variant *v, vr_errbuf *err) {
  vr_pipe_task *t = &p->tasks[ti];
  v->accuracy = -1;
  v->mult = 1;
  vr_pipe_default_shares(p, ti, v->share);
  char ctx[VR_PIPE_NAME_MAX + 16];
  snprintf(ctx, sizeof ctx, "task '%s' variant", t->name);
  if (json_is_string(e)) return copy_name(v->name, sizeof v->name, e, ctx, err);
  if (!json_is_object(e))
    return vr_errf(err, VR_EINVAL, "%s: expected a name or an object", ctx);
  int rc;
  if ((rc = copy_name(v->name, sizeof v->name, json_object_get(e, "name"),
                      ctx, err)) ||
      (rc = get_number(e, "accuracy", &v->accuracy, ctx, err)) ||
      (rc = get_number(e, "mult", &v->mult, ctx, err)))
    return rc;
  json_t *sh = json_object_get(e, "shares");
  if (sh && !json_is_object(sh))
    return vr_errf(err, VR_EINVAL, "%s '%s': \"shares\" must be an object "
                   "{child: share}", ctx, v->name);
  const char *key;
  json_t *val;
  json_object_foreach(sh, key, val) {
    int c = 0;
    while (c < t->nchildren && strcmp(p->tasks[t->children[c]].name, key)) c++;
    if (c == t->nchildren)
      return vr_errf(err, VR_ENOENT, "%s '%s': share for '%s', which is not "
                     "a child", ctx, v->name, key);
    if (!json_is_number(val))
      return vr_errf(err, VR_EINVAL, "%s '%s': share must be a number", ctx,
                     v->name);
    v->share[c] = json_number_value(val);
  }
  int rest = vr_pipe_task_route_label(p, t, NULL);
  if (rest >= 0 && !json_object_get(sh, p->tasks[t->children[rest]].name))
    vr_pipe_rest_share(p, ti, v->share);
  return 0;
}

static int spec_details(vr_pipeline *p, const spec_ctx *c, vr_errbuf *err) {
  for (int si = 0; si < c->n; si++) {
    const json_t *o = json_array_get(c->tasks, si);
    int ti = c->placed[si];
    vr_pipe_task *t = &p->tasks[ti];
    json_t *ad = json_object_get(o, "adapter");
    if (ad && !json_is_null(ad)) {
      if (!json_is_object(ad))
        return vr_errf(err, VR_EINVAL, "task '%s': \"adapter\" must be an "
                       "object", t->name);
      if (!(t->adapter = json_deep_copy(ad)))
        return vr_errf(err, VR_ENOMEM, "pipeline: out of memory");
    }
    json_t *vs = json_object_get(o, "variants");
    if (vs && !json_is_array(vs))
      return vr_errf(err, VR_EINVAL, "task '%s': \"variants\" must be an "
                     "array", t->name);
    size_t n = json_array_size(vs);
    if (n > VR_PIPE_MAX_VARIANTS)
      return vr_errf(err, VR_ELIMIT, "task '%s': more than %d variants",
                     t->name, VR_PIPE_MAX_VARIANTS);
    if (!(t->variants = calloc(n ? n : 1, sizeof *t->variants)))
      return vr_errf(err, VR_ENOMEM, "pipeline: out of memory");
    for (size_t k = 0; k < n; k++) {
      int rc = parse_variant(p, ti, json_array_get(vs, k), &t->variants[k],
                             err);
      if (rc) return rc;
      t->nvariants++;
    }
  }
  return 0;
}

static int spec_build(vr_pipeline *p, const json_t *spec, vr_errbuf *err) {
  int rc;
  if (!json_is_object(spec))
    return vr_errf(err, VR_EINVAL, "pipeline: expected a JSON object");
  if ((rc = copy_name(p->name, sizeof p->name, json_object_get(spec, "name"),
                      "pipeline name", err)))
    return rc;
  json_t *slo = json_object_get(spec, "latency_ms");
  if (!json_is_number(slo))
    return vr_errf(err, VR_EINVAL, "pipeline '%s': \"latency_ms\" (end-to-end "
                   "SLO) is required", p->name);
  p->slo_ms = json_number_value(slo);
  spec_ctx c = {.tasks = json_object_get(spec, "tasks")};
  if (!json_is_array(c.tasks) || json_array_size(c.tasks) == 0)
    return vr_errf(err, VR_EINVAL, "pipeline '%s': \"tasks\" must be a "
                   "non-empty array", p->name);
  if (json_array_size(c.tasks) > VR_PIPE_MAX_TASKS)
    return vr_errf(err, VR_ELIMIT, "pipeline '%s': more than %d tasks",
                   p->name, VR_PIPE_MAX_TASKS);
  c.n = (int)json_array_size(c.tasks);
  for (int i = 0; i < c.n; i++) {
    json_t *o = json_array_get(c.tasks, i), *nm = json_object_get(o, "name");
    if (!json_is_object(o) || !json_is_string(nm))
      return vr_errf(err, VR_EINVAL, "pipeline '%s': task %d needs a \"name\"",
                     p->name, i);
    if (spec_find(&c, json_string_value(nm)) != i)
      return vr_errf(err, VR_EINVAL, "pipeline '%s': task '%s' defined twice",
                     p->name, json_string_value(nm));
  }
  int root = 0;
  json_t *r = json_object_get(spec, "root");
  if (r) {
    if (!json_is_string(r) || (root = spec_find(&c, json_string_value(r))) < 0)
      return vr_errf(err, VR_ENOENT, "pipeline '%s': root is not a task",
                     p->name);
  }
  if ((rc = spec_visit(p, &c, root, -1, NULL, err))) return rc;
  for (int i = 0; i < c.n; i++)
    if (!c.state[i])
      return vr_errf(err, VR_EINVAL, "pipeline '%s': task '%s' is not "
                     "reachable from the root", p->name,
                     json_string_value(json_object_get(
                         json_array_get(c.tasks, i), "name")));
  return spec_details(p, &c, err);
}

/* Validates a finished build; a failed build (or a pipeline that does not
 * validate) is freed whole, so callers never see half a pipeline. */
static int finish(vr_pipeline *p, int rc, vr_pipeline **out, vr_errbuf *err) {
  if (!rc) rc = vr_pipeline_validate(p, err);
  if (rc) {
    vr_pipeline_free(p);
    return rc;
  }
  *out = p;
  return 0;
}

int vr_pipeline_from_json(const json_t *spec, vr_pipeline **out,
                          vr_errbuf *err) {
  *out = NULL;
  vr_pipeline *p = pipeline_new();
  if (!p) return vr_errf(err, VR_ENOMEM, "pipeline: out of memory");
  return finish(p, spec_build(p, spec, err), out, err);
}

/* ---- Loki app definition ------------------------------------------ */

static int is_sink(const json_t *node) {
  json_t *t = json_object_get(node, "task");
  return json_is_string(t) && !strcmp(json_string_value(t), "sink") &&
         json_array_size(json_object_get(node, "children")) == 0;
}

static int loki_node(vr_pipeline *p, const json_t *node, int parent,
                     vr_errbuf *err) {
  if (!json_is_object(node))
    return vr_errf(err, VR_EINVAL, "loki app: a task must be an object");
  int rc, ti = p->ntasks;
  if ((rc = add_task(p, parent, err))) return rc;
  vr_pipe_task *t = &p->tasks[ti];
  if ((rc = copy_name(t->name, sizeof t->name, json_object_get(node, "task"),
                      "loki app: \"task\"", err)) ||
      (rc = copy_label(t->label, json_object_get(node, "label"), t->name,
                       err)))
    return rc;
  json_t *mv = json_object_get(node, "model_variants");
  size_t n = json_array_size(mv);
  if (!json_is_array(mv) || n == 0)
    return vr_errf(err, VR_EINVAL, "task '%s' has no model: \"model_variants\""
                   " must be a non-empty array", t->name);
  if (n > VR_PIPE_MAX_VARIANTS)
    return vr_errf(err, VR_ELIMIT, "task '%s': more than %d variants",
                   t->name, VR_PIPE_MAX_VARIANTS);
  if (!(t->variants = calloc(n, sizeof *t->variants)))
    return vr_errf(err, VR_ENOMEM, "pipeline: out of memory");
  for (size_t k = 0; k < n; k++, t->nvariants++) {
    vr_pipe_variant *v = &t->variants[k];
    v->accuracy = -1, v->mult = 1;
    if ((rc = copy_name(v->name, sizeof v->name, json_array_get(mv, k),
                        "loki app: model variant", err)))
      return rc;
  }
  json_t *kids = json_object_get(node, "children");
  if (kids && !json_is_array(kids))
    return vr_errf(err, VR_EINVAL, "task '%s': \"children\" must be an array",
                   t->name);
  for (size_t k = 0; k < json_array_size(kids); k++) {
    json_t *ch = json_array_get(kids, k);
    if (is_sink(ch)) continue;
    if ((rc = loki_node(p, ch, ti, err))) return rc;
  }
  return 0;
}

/* Shares are set once the children are known. */
static void loki_defaults(vr_pipeline *p) {
  for (int i = 0; i < p->ntasks; i++)
    for (int v = 0; v < p->tasks[i].nvariants; v++)
      vr_pipe_default_shares(p, i, p->tasks[i].variants[v].share);
}

static int loki_build(vr_pipeline *p, const json_t *app, vr_errbuf *err) {
  if (!json_is_object(app))
    return vr_errf(err, VR_EINVAL, "loki app: expected a JSON object");
  json_t *nm = json_object_get(app, "appName");
  int rc;
  if (nm && (rc = copy_name(p->name, sizeof p->name, nm, "loki app: appName",
                            err)))
    return rc;
  if (!nm) snprintf(p->name, sizeof p->name, "loki_app");
  json_t *slo = json_object_get(app, "latencySLOInMSec");
  if (!json_is_number(slo))
    return vr_errf(err, VR_EINVAL, "loki app '%s': \"latencySLOInMSec\" must "
                   "be a number", p->name);
  p->slo_ms = json_number_value(slo);
  json_t *root = json_object_get(app, "root");
  if (!json_is_object(root))
    return vr_errf(err, VR_EINVAL, "loki app '%s': \"root\" must be a task "
                   "object", p->name);
  if ((rc = loki_node(p, root, -1, err))) return rc;
  p->tasks[0].label[0] = 0; /* the root has no incoming edge */
  loki_defaults(p);
  return 0;
}

int vr_pipeline_from_loki_json(const json_t *app, vr_pipeline **out,
                               vr_errbuf *err) {
  *out = NULL;
  vr_pipeline *p = pipeline_new();
  if (!p) return vr_errf(err, VR_ENOMEM, "pipeline: out of memory");
  return finish(p, loki_build(p, app, err), out, err);
}

int vr_pipeline_parse(const char *buf, size_t len, vr_pipeline **out,
                      vr_errbuf *err) {
  *out = NULL;
  json_error_t je;
  json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
  if (!j)
    return vr_errf(err, VR_EFORMAT, "pipeline: bad JSON at line %d col %d: %s",
                   je.line, je.column, je.text);
  int rc = json_object_get(j, "latencySLOInMSec")
               ? vr_pipeline_from_loki_json(j, out, err)
               : vr_pipeline_from_json(j, out, err);
  json_decref(j);
  return rc;
}

/* ---- writer -------------------------------------------------------- */

static json_t *variant_json(const vr_pipeline *p, const vr_pipe_task *t,
                            const vr_pipe_variant *v) {
  json_t *o = json_object(), *sh = json_object();
  json_object_set_new(o, "name", json_string(v->name));
  if (v->accuracy >= 0) json_object_set_new(o, "accuracy", json_real(v->accuracy));
  json_object_set_new(o, "mult", json_real(v->mult));
  for (int c = 0; c < t->nchildren; c++)
    json_object_set_new(sh, p->tasks[t->children[c]].name,
                        json_real(v->share[c]));
  json_object_set_new(o, "shares", sh);
  return o;
}

static json_t *task_json(const vr_pipeline *p, const vr_pipe_task *t) {
  json_t *o = json_object(), *vs = json_array(), *kids = json_array();
  json_object_set_new(o, "name", json_string(t->name));
  if (t->app[0]) json_object_set_new(o, "app", json_string(t->app));
  for (int v = 0; v < t->nvariants; v++)
    json_array_append_new(vs, variant_json(p, t, &t->variants[v]));
  json_object_set_new(o, "variants", vs);
  for (int c = 0; c < t->nchildren; c++) {
    const vr_pipe_task *ch = &p->tasks[t->children[c]];
    json_t *e = json_object();
    json_object_set_new(e, "task", json_string(ch->name));
    if (ch->label[0]) json_object_set_new(e, "label", json_string(ch->label));
    json_array_append_new(kids, e);
  }
  json_object_set_new(o, "children", kids);
  if (t->adapter) json_object_set_new(o, "adapter", json_deep_copy(t->adapter));
  return o;
}

json_t *vr_pipeline_to_json(const vr_pipeline *p) {
  json_t *o = json_object(), *ts = json_array();
  if (!o || !ts) {
    json_decref(o), json_decref(ts);
    return NULL;
  }
  json_object_set_new(o, "name", json_string(p->name));
  json_object_set_new(o, "latency_ms", json_real(p->slo_ms));
  json_object_set_new(o, "root", json_string(p->tasks[0].name));
  for (int i = 0; i < p->ntasks; i++)
    json_array_append_new(ts, task_json(p, &p->tasks[i]));
  json_object_set_new(o, "tasks", ts);
  return o;
}
