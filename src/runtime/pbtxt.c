/*
 * config.pbtxt reader (see pbtxt.h). Two steps: a generic protobuf-text
 * parser builds a small tree of fields (bounded: depth, node count, token
 * lengths), then interpret() maps the fields Triton's ModelConfig defines
 * onto vr_model_config, refusing what it cannot honour.
 */
#include "runtime/pbtxt.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

#define MAX_NODES 4096
#define MAX_DEPTH 16
#define MAX_TEXT 256

typedef struct node {
  char name[64];
  char val[MAX_TEXT]; /* scalar: unquoted text; message: "" */
  int line, is_msg, quoted;
  int child, next; /* first child / next sibling; -1 = none */
} node;

typedef struct pt {
  const char *s, *end;
  int line;
  node *n;
  int nn, cap;
  vr_errbuf *err;
} pt;

/* ---- lexer ----------------------------------------------------------------- */

static void skip_ws(pt *p) {
  while (p->s < p->end) {
    char c = *p->s;
    if (c == '\n') p->line++;
    if (c == '#') {
      while (p->s < p->end && *p->s != '\n') p->s++;
    } else if (isspace((unsigned char)c)) {
      p->s++;
    } else {
      break;
    }
  }
}

static int peek(pt *p) {
  skip_ws(p);
  return p->s < p->end ? (unsigned char)*p->s : -1;
}

static int is_ident(int c) { return c == '_' || isalnum(c); }

/* An identifier, number or enum value into out. */
static int word(pt *p, char *out, size_t cap, const char *what) {
  skip_ws(p);
  size_t k = 0;
  while (p->s < p->end && (is_ident((unsigned char)*p->s) || *p->s == '.' ||
                           *p->s == '-' || *p->s == '+')) {
    if (k + 1 >= cap)
      return vr_errf(p->err, VR_EFORMAT, "line %d: %s too long", p->line, what);
    out[k++] = *p->s++;
  }
  out[k] = 0;
  if (!k)
    return vr_errf(p->err, VR_EFORMAT, "line %d: expected %s", p->line, what);
  return 0;
}

static int string(pt *p, char *out, size_t cap) {
  char q = *p->s++;
  size_t k = 0;
  while (p->s < p->end && *p->s != q) {
    char c = *p->s++;
    if (c == '\n')
      return vr_errf(p->err, VR_EFORMAT, "line %d: newline in a string", p->line);
    if (c == '\\' && p->s < p->end) {
      c = *p->s++;
      c = c == 'n' ? '\n' : c == 't' ? '\t' : c;
    }
    if (k + 1 >= cap)
      return vr_errf(p->err, VR_EFORMAT, "line %d: string too long", p->line);
    out[k++] = c;
  }
  if (p->s >= p->end)
    return vr_errf(p->err, VR_EFORMAT, "line %d: unterminated string", p->line);
  p->s++;
  out[k] = 0;
  return 0;
}

/* ---- tree ------------------------------------------------------------------ */

static int add_node(pt *p, int parent, int *last, const char *name) {
  if (p->nn >= MAX_NODES)
    return vr_errf(p->err, VR_ELIMIT, "more than %d fields", MAX_NODES), -1;
  if (p->nn == p->cap) { /* grows: most configs have a few dozen fields */
    int cap = p->cap ? 2 * p->cap : 64;
    node *n = vr_realloc(p->n, (size_t)cap * sizeof *n);
    if (!n) return vr_errf(p->err, VR_ENOMEM, "out of memory"), -1;
    p->n = n;
    p->cap = cap;
  }
  node *x = &p->n[p->nn];
  memset(x, 0, sizeof *x);
  snprintf(x->name, sizeof x->name, "%s", name);
  x->line = p->line;
  x->child = x->next = -1;
  if (*last >= 0) p->n[*last].next = p->nn;
  else if (parent >= 0) p->n[parent].child = p->nn;
  *last = p->nn;
  return p->nn++;
}

static int message(pt *p, int parent, int close, int depth);

static int scalar(pt *p, node *x) {
  int c = peek(p);
  if (c == '"' || c == '\'') {
    x->quoted = 1;
    int rc = string(p, x->val, sizeof x->val);
    /* adjacent literals concatenate, as in protobuf text */
    while (!rc && (peek(p) == '"' || peek(p) == '\'')) {
      char more[MAX_TEXT];
      rc = string(p, more, sizeof more);
      if (!rc && strlen(x->val) + strlen(more) >= sizeof x->val)
        rc = vr_errf(p->err, VR_EFORMAT, "line %d: string too long", p->line);
      if (!rc) strcat(x->val, more);
    }
    return rc;
  }
  return word(p, x->val, sizeof x->val, "a value");
}

/* One value of field `name`: a {message} or a scalar. */
static int value(pt *p, int parent, int *last, const char *name, int depth) {
  int id = add_node(p, parent, last, name);
  if (id < 0) return p->err && p->err->code ? p->err->code : VR_ELIMIT;
  int c = peek(p);
  if (c == '{' || c == '<') {
    p->s++;
    p->n[id].is_msg = 1;
    return message(p, id, c == '{' ? '}' : '>', depth + 1);
  }
  return scalar(p, &p->n[id]);
}

static int field(pt *p, int parent, int *last, int depth) {
  char name[64];
  int rc = word(p, name, sizeof name, "a field name");
  if (rc) return rc;
  if (!isalpha((unsigned char)name[0]) && name[0] != '_')
    return vr_errf(p->err, VR_EFORMAT, "line %d: '%s' is not a field name",
                   p->line, name);
  int colon = peek(p) == ':';
  if (colon) p->s++;
  int c = peek(p);
  if (c == '[') {
    p->s++;
    if (peek(p) == ']') {
      p->s++;
      return 0;
    }
    for (;;) {
      if ((rc = value(p, parent, last, name, depth))) return rc;
      c = peek(p);
      p->s += c == ',' || c == ']';
      if (c == ']') return 0;
      if (c != ',')
        return vr_errf(p->err, VR_EFORMAT, "line %d: expected ',' or ']' in"
                       " the list of '%s'", p->line, name);
    }
  }
  if (!colon && c != '{' && c != '<')
    return vr_errf(p->err, VR_EFORMAT, "line %d: expected ':' after '%s'",
                   p->line, name);
  return value(p, parent, last, name, depth);
}

static int message(pt *p, int parent, int close, int depth) {
  if (depth > MAX_DEPTH)
    return vr_errf(p->err, VR_ELIMIT, "line %d: nested deeper than %d", p->line,
                   MAX_DEPTH);
  int last = -1, rc;
  for (;;) {
    int c = peek(p);
    if (c == close) {
      p->s += close >= 0;
      return 0;
    }
    if (c < 0)
      return vr_errf(p->err, VR_EFORMAT, "line %d: missing '%c'", p->line, close);
    if ((rc = field(p, parent, &last, depth))) return rc;
    c = peek(p);
    if (c == ',' || c == ';') p->s++;
  }
}

/* ---- interpretation ---------------------------------------------------------- */

static const node *kid(const pt *p, const node *x) {
  return x->child >= 0 ? &p->n[x->child] : NULL;
}
static const node *sib(const pt *p, const node *x) {
  return x->next >= 0 ? &p->n[x->next] : NULL;
}

static int want(pt *p, const node *x, int msg) {
  if (x->is_msg != msg)
    return vr_errf(p->err, VR_EFORMAT, "line %d: '%s' must be %s", x->line,
                   x->name, msg ? "a { message }" : "a value");
  return 0;
}

static int int_of(pt *p, const node *x, long long lo, long long hi, long long *v) {
  int rc = want(p, x, 0);
  if (rc) return rc;
  char *end;
  *v = strtoll(x->val, &end, 10);
  if (x->quoted || !x->val[0] || *end || *v < lo || *v > hi)
    return vr_errf(p->err, VR_ERANGE, "line %d: '%s' must be an integer in"
                   " [%lld, %lld], not '%s'", x->line, x->name, lo, hi, x->val);
  return 0;
}

static int str_of(pt *p, const node *x, char *out, size_t cap) {
  int rc = want(p, x, 0);
  if (rc) return rc;
  if (!x->quoted || strlen(x->val) >= cap)
    return vr_errf(p->err, VR_EFORMAT, "line %d: '%s' must be a quoted string"
                   " under %zu bytes", x->line, x->name, cap);
  memcpy(out, x->val, strlen(x->val) + 1);
  return 0;
}

static int unknown(pt *p, const node *x, const char *where) {
  return vr_errf(p->err, VR_EUNSUPPORTED, "line %d: field '%s' in %s is not"
                 " supported by Vario", x->line, x->name, where);
}

/* An input or output { }; label (NULL for inputs) gets label_filename. */
static int tensor(pt *p, const node *m, vr_tensor_info *t, const char *what,
                  char *label, size_t label_cap) {
  int rc = want(p, m, 1), have_dt = 0, nd = 0;
  int64_t row = 1; /* elements of one sample, bounded as config.json's */
  memset(t, 0, sizeof *t);
  t->shape[0] = -1; /* the batch dimension Triton leaves out */
  for (const node *x = kid(p, m); !rc && x; x = sib(p, x)) {
    long long v;
    if (!strcmp(x->name, "name")) {
      rc = str_of(p, x, t->name, sizeof t->name);
    } else if (!strcmp(x->name, "data_type")) {
      vr_dtype dt = VR_DT_UNDEFINED;
      if (!strncmp(x->val, "TYPE_", 5) && !x->quoted)
        dt = vr_dtype_from_kserve(x->val + 5);
      if (dt == VR_DT_UNDEFINED)
        rc = vr_errf(p->err, VR_EUNSUPPORTED, "line %d: %s data_type '%s' is"
                     " not supported", x->line, what, x->val);
      t->dtype = dt;
      have_dt = 1;
    } else if (!strcmp(x->name, "dims")) {
      if (nd + 1 >= VR_MAX_DIMS)
        rc = vr_errf(p->err, VR_ELIMIT, "line %d: more than %d dims", x->line,
                     VR_MAX_DIMS - 1);
      else if (!(rc = int_of(p, x, -1, (long long)1 << 28, &v)) && v <= 0)
        rc = vr_errf(p->err, VR_EUNSUPPORTED, "line %d: %s dim %lld: Vario"
                     " needs fixed positive dims after the batch", x->line,
                     what, v);
      if (!rc && (row *= v) > ((int64_t)1 << 28))
        rc = vr_errf(p->err, VR_ELIMIT, "line %d: %s dims: sample of more than"
                     " 2^28 elements", x->line, what);
      if (!rc) t->shape[++nd] = v;
    } else if (!strcmp(x->name, "format") && !strcmp(x->val, "FORMAT_NONE")) {
      continue;
    } else if (label && !strcmp(x->name, "label_filename")) {
      rc = str_of(p, x, label, label_cap);
      if (!rc && (!label[0] || strchr(label, '/') || !strcmp(label, "..")))
        rc = vr_errf(p->err, VR_EINVAL, "line %d: label_filename '%s' must be"
                     " a file name in the model directory", x->line, label);
    } else {
      rc = unknown(p, x, what);
    }
  }
  t->ndim = nd + 1;
  if (!rc && (!t->name[0] || !have_dt))
    rc = vr_errf(p->err, VR_EFORMAT, "line %d: %s needs a name and a data_type",
                 m->line, what);
  return rc;
}

/* dynamic_batching.default_queue_policy (Triton's ModelQueuePolicy). */
static int queue_policy(pt *p, const node *m, vr_model_config *c) {
  int rc = want(p, m, 1);
  for (const node *x = kid(p, m); !rc && x; x = sib(p, x)) {
    long long v;
    if (!strcmp(x->name, "max_queue_size")) {
      rc = int_of(p, x, 0, 1 << 20, &v);
      c->queue.max_queue_size = v;
    } else if (!strcmp(x->name, "default_timeout_microseconds")) {
      rc = int_of(p, x, 0, (long long)3600 * 1000000, &v);
      c->queue.default_timeout_us = v;
    } else if (!strcmp(x->name, "timeout_action")) {
      if (strcmp(x->val, "REJECT") && strcmp(x->val, "DELAY"))
        rc = vr_errf(p->err, VR_EFORMAT, "line %d: timeout_action must be REJECT or"
                     " DELAY", x->line);
      c->queue.delay = !strcmp(x->val, "DELAY");
    } else if (!strcmp(x->name, "allow_timeout_override")) {
      if (strcmp(x->val, "true") && strcmp(x->val, "false"))
        rc = vr_errf(p->err, VR_EFORMAT, "line %d: allow_timeout_override must be"
                     " true or false", x->line);
      c->queue.allow_timeout_override = !strcmp(x->val, "true");
    } else {
      rc = unknown(p, x, "default_queue_policy");
    }
  }
  return rc;
}

static int dyn_batching(pt *p, const node *m, vr_model_config *c) {
  int rc = want(p, m, 1);
  c->has_dynamic_batching = 1;
  for (const node *x = kid(p, m); !rc && x; x = sib(p, x)) {
    long long v;
    if (!strcmp(x->name, "max_queue_delay_microseconds")) {
      rc = int_of(p, x, 0, 10 * 1000 * 1000, &v);
      c->max_queue_delay_us = v;
    } else if (!strcmp(x->name, "preferred_batch_size")) {
      if (c->n_preferred_batch == 8)
        return vr_errf(p->err, VR_ELIMIT, "line %d: more than 8 preferred"
                       " batch sizes", x->line);
      rc = int_of(p, x, 1, VR_RT_MAX_BATCH, &v);
      c->preferred_batch[c->n_preferred_batch++] = (int)v;
    } else if (!strcmp(x->name, "default_queue_policy")) {
      rc = queue_policy(p, x, c);
    } else if (strcmp(x->name, "preserve_ordering")) {
      rc = unknown(p, x, "dynamic_batching");
    }
  }
  return rc;
}

static int instance_group(pt *p, const node *m, vr_model_config *c) {
  int rc = want(p, m, 1);
  long long count = 1;
  for (const node *x = kid(p, m); !rc && x; x = sib(p, x)) {
    if (!strcmp(x->name, "count")) {
      rc = int_of(p, x, 0, VR_RT_MAX_INSTANCES, &count);
    } else if (!strcmp(x->name, "kind")) {
      if (strcmp(x->val, "KIND_CPU") && strcmp(x->val, "KIND_AUTO"))
        rc = vr_errf(p->err, VR_EUNSUPPORTED, "line %d: instance_group kind"
                     " '%s' is not supported (Vario runs on CPUs: KIND_CPU or"
                     " KIND_AUTO)", x->line, x->val);
    } else if (strcmp(x->name, "name")) {
      rc = unknown(p, x, "instance_group");
    }
  }
  c->instances += (int)count;
  if (!rc && c->instances > VR_RT_MAX_INSTANCES)
    rc = vr_errf(p->err, VR_ERANGE, "line %d: more than %d instances", m->line,
                 VR_RT_MAX_INSTANCES);
  return rc;
}

static int version_policy(pt *p, const node *m, vr_model_config *c) {
  int rc = want(p, m, 1);
  const node *x = rc ? NULL : kid(p, m);
  if (!rc && (!x || sib(p, x)))
    return vr_errf(p->err, VR_EFORMAT, "line %d: version_policy needs one of"
                   " latest, all, specific", m->line);
  if (rc || !strcmp(x->name, "all")) return rc;
  if (!strcmp(x->name, "latest")) { /* serves one version: the latest */
    for (const node *y = kid(p, x); !rc && y; y = sib(p, y)) {
      long long v;
      rc = strcmp(y->name, "num_versions") ? unknown(p, y, "latest")
                                           : int_of(p, y, 1, 1 << 20, &v);
    }
    return rc;
  }
  if (strcmp(x->name, "specific")) return unknown(p, x, "version_policy");
  for (const node *y = kid(p, x); !rc && y; y = sib(p, y)) {
    long long v;
    if (strcmp(y->name, "versions")) return unknown(p, y, "specific");
    if (c->n_versions == 8)
      return vr_errf(p->err, VR_ELIMIT, "line %d: more than 8 versions", y->line);
    rc = int_of(p, y, 1, 1 << 30, &v);
    c->versions[c->n_versions++] = (int)v;
  }
  return rc;
}

/* Fields that only tune other engines: accepted, not applied. */
static int ignorable(const char *name) {
  static const char *const k[] = {"optimization", "model_warmup", "parameters",
                                  "response_cache", "model_operations",
                                  "runtime", "model_repository_agents"};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
    if (!strcmp(name, k[i])) return 1;
  return 0;
}

static int top_field(pt *p, const node *x, vr_model_config *c, long long *mb) {
  if (!strcmp(x->name, "name")) return str_of(p, x, c->name, sizeof c->name);
  if (!strcmp(x->name, "platform") || !strcmp(x->name, "backend")) {
    int rc = str_of(p, x, c->platform, sizeof c->platform);
    if (!rc && strcmp(c->platform, "onnxruntime_onnx") &&
        strcmp(c->platform, "onnxruntime"))
      rc = vr_errf(p->err, VR_EUNSUPPORTED, "line %d: %s '%s' is not supported"
                   " (Vario serves ONNX models: onnxruntime_onnx)", x->line,
                   x->name, c->platform);
    snprintf(c->platform, sizeof c->platform, "onnxruntime_onnx");
    return rc;
  }
  if (!strcmp(x->name, "max_batch_size")) return int_of(p, x, 0, VR_RT_MAX_BATCH, mb);
  if (!strcmp(x->name, "input") || !strcmp(x->name, "output")) {
    int in = x->name[0] == 'i', *n = in ? &c->n_inputs : &c->n_outputs;
    if (*n == VR_RT_MAX_IO)
      return vr_errf(p->err, VR_ELIMIT, "line %d: more than %d %ss", x->line,
                     VR_RT_MAX_IO, x->name);
    vr_tensor_info *t = in ? &c->inputs[*n] : &c->outputs[*n];
    char *label = in ? NULL : c->label_file[*n];
    (*n)++;
    return tensor(p, x, t, x->name, label, sizeof c->label_file[0]);
  }
  if (!strcmp(x->name, "dynamic_batching")) return dyn_batching(p, x, c);
  if (!strcmp(x->name, "instance_group")) return instance_group(p, x, c);
  if (!strcmp(x->name, "version_policy")) return version_policy(p, x, c);
  if (!strcmp(x->name, "default_model_filename"))
    return str_of(p, x, c->model_file, sizeof c->model_file);
  if (ignorable(x->name)) return 0;
  return unknown(p, x, "the model config");
}

static int interpret(pt *p, vr_model_config *c) {
  long long mb = -1;
  int rc = 0;
  for (const node *x = p->nn ? &p->n[0] : NULL; !rc && x; x = sib(p, x))
    rc = top_field(p, x, c, &mb);
  if (rc) return rc;
  if (mb == 0)
    return vr_errf(p->err, VR_EUNSUPPORTED, "max_batch_size 0 (a model without"
                   " a batch dimension) is not supported: Vario batches on dim 0");
  c->max_batch_size = mb < 0 ? 4 : (int)mb; /* unset: Triton's default, 4 */
  if (c->instances == 0) c->instances = 1;
  if (!c->platform[0]) snprintf(c->platform, sizeof c->platform, "onnxruntime_onnx");
  return 0;
}

int vr_pbtxt_parse(const char *text, size_t len, vr_model_config *out,
                   vr_errbuf *err) {
  memset(out, 0, sizeof *out);
  out->threads = 1;
  out->precision = VR_PREC_FP32;
  out->accuracy = -1;
  vr_model_config_queue_defaults(out);
  pt p = {text, text + len, 1, NULL, 0, 0, err};
  if (memchr(text, 0, len))
    return vr_errf(err, VR_EFORMAT, "config.pbtxt contains a NUL byte");
  int rc = message(&p, -1, -1, 0);
  if (!rc) rc = interpret(&p, out);
  vr_free(p.n);
  return rc;
}
