/*
 * Model repository extension (index, load, unload) and the statistics and
 * instance endpoints. Loads and unloads run on their own short-lived thread
 * (profiling a model or draining its queue takes far longer than the
 * event thread may block).
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "base/alloc.h"
#include "server/kserve.h"
#include "server/server_int.h"

int vr__srv_valid_name(const char *m) {
  if (!*m || strlen(m) >= VR_NAME_MAX || m[0] == '.') return 0;
  for (const char *p = m; *p; p++)
    if (!(*p == '_' || *p == '-' || *p == '.' || (*p >= '0' && *p <= '9') ||
          (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
      return 0;
  return 1;
}

void vr__srv_repo_list(vr_server *s, vr__srv_repo_fn fn, void *u) {
  DIR *d = s->repo ? opendir(s->repo) : NULL;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", s->repo, e->d_name);
    /* a name the API refuses is never loaded (server.c load_all) */
    if (e->d_name[0] == '.' || !vr__srv_valid_name(e->d_name) || !vr_model_dir_is_model(dir))
      continue;
    if (vr_rt_model_ready(s->rt, e->d_name)) {
      fn(u, e->d_name, vr__srv_version(s, e->d_name), 1, "");
      continue;
    }
    /* Say why it is not loaded: a config error is the common reason;
     * else what its last load failed on (the engine refusing the graph). */
    vr_model_config c;
    vr_errbuf err = {0};
    int rc = vr_model_dir_load(dir, &c, &err);
    if (!rc && !vr__srv_load_error_get(s, e->d_name, err.msg, sizeof err.msg))
      snprintf(err.msg, sizeof err.msg, "unloaded");
    fn(u, e->d_name, rc || !c.version ? 1 : c.version, 0, err.msg);
  }
  if (d) closedir(d);
}

typedef struct index_acc {
  vr_sbuf *b;
  int first;
  int ready_only;
} index_acc;

static void index_entry(void *u, const char *name, int version, int ready,
                        const char *reason) {
  index_acc *a = u;
  if (a->ready_only && !ready) return;
  vr_sbuf_puts(a->b, a->first ? "{\"name\":" : ",{\"name\":");
  a->first = 0;
  vr_sbuf_json_str(a->b, name);
  vr_sbuf_printf(a->b, ",\"version\":\"%d\",\"state\":\"%s\",\"reason\":", version,
                 ready ? "READY" : "UNAVAILABLE");
  vr_sbuf_json_str(a->b, reason);
  vr_sbuf_puts(a->b, "}");
}

/* A repository request's optional body: *out the JSON object (the
 * caller's), or NULL when there is none; an error when it is not one. */
static int body_object(const vr_http_req *r, json_t **out, vr_errbuf *err) {
  size_t len;
  const char *body = vr_http_body(r, &len);
  *out = NULL;
  if (!body || !len) return 0;
  json_error_t je;
  json_t *j = json_loadb(body, len, 0, &je);
  if (json_is_object(j)) {
    *out = j;
    return 0;
  }
  json_decref(j);
  return vr_errf(err, VR_EFORMAT, "request body must be a JSON object");
}

/* The optional body of Triton's index request, {"ready": bool}: true
 * lists only the models ready for inference (as gRPC's RepositoryIndex). */
static int index_body(const vr_http_req *r, int *ready_only, vr_errbuf *err) {
  *ready_only = 0;
  json_t *j, *v;
  int rc = body_object(r, &j, err);
  const char *k;
  json_object_foreach(j, k, v) {
    if (rc) break;
    if (strcmp(k, "ready"))
      rc = vr_errf(err, VR_EUNSUPPORTED, "unknown field \"%.64s\"", k);
    else if (!json_is_boolean(v))
      rc = vr_errf(err, VR_EFORMAT, "\"ready\" must be a boolean");
    else
      *ready_only = json_is_true(v);
  }
  json_decref(j);
  return rc;
}

void vr_server_repo_index(vr_server *s, vr_http_req *r) {
  vr_errbuf err = {0};
  int ready_only;
  if (index_body(r, &ready_only, &err)) {
    vr_server_count(s, 400);
    vr_http_error(r, 400, err.msg);
    return;
  }
  vr_sbuf b;
  vr_sbuf_init(&b);
  vr_sbuf_puts(&b, "[");
  index_acc a = {&b, 1, ready_only};
  vr__srv_repo_list(s, index_entry, &a);
  vr_sbuf_puts(&b, "]");
  vr_server_count(s, 200);
  vr_server_reply_json(r, 200, &b);
}

typedef struct admin_job {
  vr_server *s;
  vr_http_req *http;
  char name[VR_NAME_MAX];
  int load;
  int pair_begin, pair_end; /* "pair_range": an AsyFunc body's nodes */
  int rc;
  vr_errbuf err;
} admin_job;

/* Triton's unload of a model that is not loaded finds nothing to unload
 * and succeeds (core model_repository_manager.cc: no ids for the name, no
 * version left READY), so a client that unloads every model of the index,
 * or one twice, does not fail on those not loaded. */
int vr__srv_unload(vr_server *s, const char *name, vr_errbuf *err) {
  int rc = vr_rt_unload(s->rt, name, err);
  vr__srv_expect(s, name, 0);
  return rc == VR_ENOENT ? 0 : rc;
}

static void *admin_main(void *arg) {
  admin_job *j = arg;
  j->rc = j->load ? vr_server_load_pair(j->s, j->name, j->pair_begin, j->pair_end, &j->err)
                  : vr__srv_unload(j->s, j->name, &j->err);
  /* Triton: an explicit load adds the model to what readiness waits for
   * (even when it failed); an explicit unload takes it out. */
  if (j->load && j->rc != VR_ENOENT) vr__srv_expect(j->s, j->name, 1);
  vr_server *s = j->s;
  /* Released before the answer goes out: a client that sends its next
   * admin request on seeing it must find the slot free. (Shutdown still
   * waits for the woken request: it is in flight until answered.) */
  __atomic_fetch_sub(&s->admin_jobs, 1, __ATOMIC_SEQ_CST);
  vr_http_wake(j->http);
  return NULL;
}

static void admin_done(vr_http_req *r, void *user) {
  vr_server *s = user;
  admin_job *j = vr_http_state(r);
  int st = vr_server_http_status(j->rc);
  vr_server_count(s, st);
  if (j->rc) {
    vr_http_error(r, st, j->err.msg);
    return;
  }
  vr_http_respond(r, 200, "application/json", vr_strdup("{}"), 2, (size_t)-1);
}

int vr__srv_repo_param(int load, const char *key, int is_bool, vr_errbuf *err) {
  if (!load && !strcmp(key, "unload_dependents"))
    return is_bool ? 0 /* no ensembles: nothing depends on a model */
                   : vr_errf(err, VR_EINVAL, "parameter \"unload_dependents\" must be"
                             " a boolean");
  if (load && (!strcmp(key, "config") || !strncmp(key, "file:", 5)))
    return vr_errf(err, VR_EUNSUPPORTED, "load parameter \"%.64s\" is not supported:"
                   " Vario loads the model's files and config from the repository"
                   " (--repo)", key);
  return vr_errf(err, VR_EUNSUPPORTED, "unknown %s parameter \"%.64s\"",
                 load ? "load" : "unload", key);
}

/* The optional request body: {"parameters": {...}} as Triton's; a load
 * may carry Vario's "pair_range" (server_shadow.c) into *pb, *pe. */
static int check_body(const vr_http_req *r, int load, int *pb, int *pe, vr_errbuf *err) {
  json_t *j, *v;
  int rc = body_object(r, &j, err);
  const char *k;
  json_object_foreach(j, k, v) {
    if (rc) break;
    if (strcmp(k, "parameters"))
      rc = vr_errf(err, VR_EUNSUPPORTED, "unknown field \"%.64s\"", k);
    else if (!json_is_object(v))
      rc = vr_errf(err, VR_EFORMAT, "\"parameters\" must be an object");
    else {
      const char *pk;
      json_t *pv;
      json_object_foreach(v, pk, pv) {
        if (load && !strcmp(pk, "pair_range"))
          rc = vr__srv_pair_range(json_string_value(pv), pb, pe, err);
        else
          rc = vr__srv_repo_param(load, pk, json_is_boolean(pv), err);
        if (rc) break;
      }
    }
  }
  json_decref(j);
  return rc;
}

void vr_server_repo_load(vr_server *s, vr_http_req *r, const char *model,
                         int load) {
  if (!vr__srv_valid_name(model)) {
    vr_server_count(s, 400);
    vr_http_error(r, 400, "model names use only [A-Za-z0-9_.-]");
    return;
  }
  vr_errbuf perr = {0};
  int pb = 0, pe = 0;
  if (check_body(r, load, &pb, &pe, &perr)) {
    vr_server_count(s, 400);
    vr_http_error(r, 400, perr.msg);
    return;
  }
  admin_job *j = VR_NEW(admin_job);
  if (!j) {
    vr_http_error(r, 500, "out of memory");
    return;
  }
  j->s = s;
  j->http = r;
  j->load = load;
  j->pair_begin = pb;
  j->pair_end = pe;
  snprintf(j->name, sizeof j->name, "%s", model);
  vr_http_set_state(r, j, vr_free);
  if (vr_server_spawn_admin(s, r, admin_done, admin_main, j) < 0)
    j->rc = vr_errf(&j->err, VR_EINTERNAL, "cannot start a thread");
}

/* ---- statistics ---------------------------------------------------------- */

typedef struct stats_acc {
  vr_sbuf *b;
  int first;
  vr_server *s;
} stats_acc;

static void put_stat(vr_sbuf *b, const char *key, uint64_t n, double s) {
  vr_sbuf_printf(b, "\"%s\":{\"count\":%llu,\"ns\":%.0f}", key,
                 (unsigned long long)n, s * 1e9);
}

static void stats_one(const vr_rt_variant_stats *v, void *u) {
  stats_acc *a = u;
  vr_sbuf *b = a->b;
  uint64_t fail = 0;
  for (int o = 1; o < VR_OUT_COUNT; o++) fail += v->outcomes[o];
  vr_sbuf_puts(b, a->first ? "{\"name\":" : ",{\"name\":");
  a->first = 0;
  vr_sbuf_json_str(b, v->model);
  vr_sbuf_printf(b, ",\"version\":\"%d\",\"variant\":", vr__srv_version(a->s, v->model));
  vr_sbuf_json_str(b, v->variant);
  vr_sbuf_printf(b, ",\"last_inference\":%lld,\"inference_count\":%llu,"
                 "\"execution_count\":%llu,\"inference_stats\":{",
                 (long long)v->last_inference_ms,
                 (unsigned long long)v->outcomes[VR_OUT_OK],
                 (unsigned long long)v->batches);
  put_stat(b, "success", v->request.count, v->request.sum_s);
  vr_sbuf_puts(b, ",");
  put_stat(b, "fail", fail, 0);
  vr_sbuf_puts(b, ",");
  put_stat(b, "queue", v->queue.count, v->queue.sum_s);
  vr_sbuf_puts(b, ",");
  put_stat(b, "compute_input", v->compute_n, v->compute_input_ns / 1e9);
  vr_sbuf_puts(b, ",");
  put_stat(b, "compute_infer", v->compute_n, v->compute_infer_ns / 1e9);
  vr_sbuf_puts(b, ",");
  put_stat(b, "compute_output", v->compute_n, v->compute_output_ns / 1e9);
  vr_sbuf_puts(b, "},\"batch_stats\":[");
  int bf = 1;
  for (int k = 1; k <= VR_RT_MAX_BATCH; k++) {
    if (!v->by_batch[k].count) continue;
    uint64_t n = v->by_batch[k].count;
    vr_sbuf_printf(b, "%s{\"batch_size\":%d,", bf ? "" : ",", k);
    bf = 0;
    put_stat(b, "compute_input", n, v->by_batch[k].input_ns / 1e9);
    vr_sbuf_puts(b, ",");
    put_stat(b, "compute_infer", n, v->by_batch[k].infer_ns / 1e9);
    vr_sbuf_puts(b, ",");
    put_stat(b, "compute_output", n, v->by_batch[k].output_ns / 1e9);
    vr_sbuf_puts(b, "}");
  }
  vr_sbuf_printf(b, "],\"vario\":{\"dropped\":%llu,\"rejected\":%llu,"
                 "\"failed\":%llu,\"slo_violations\":%llu,\"batch_rows\":%llu,"
                 "\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f}}",
                 (unsigned long long)v->outcomes[VR_OUT_DROPPED],
                 (unsigned long long)v->outcomes[VR_OUT_REJECTED],
                 (unsigned long long)v->outcomes[VR_OUT_FAILED],
                 (unsigned long long)v->slo_violations,
                 (unsigned long long)v->batch_rows, v->p50_ns / 1e3,
                 v->p90_ns / 1e3, v->p99_ns / 1e3);
}

void vr_server_model_stats(vr_server *s, vr_http_req *r, const char *model) {
  vr_model_config c;
  if (model && vr_rt_model_config(s->rt, model, &c)) {
    char msg[256];
    snprintf(msg, sizeof msg, "model '%.128s' is not loaded", model);
    vr_server_count(s, 404);
    vr_http_error(r, 404, msg);
    return;
  }
  vr_sbuf b;
  vr_sbuf_init(&b);
  vr_sbuf_puts(&b, "{\"model_stats\":[");
  stats_acc a = {&b, 1, s};
  vr_rt_foreach_variant(s->rt, model, stats_one, &a);
  vr_sbuf_puts(&b, "]}");
  vr_server_count(s, 200);
  vr_server_reply_json(r, 200, &b);
}

void vr_server_model_instances(vr_server *s, vr_http_req *r,
                               const char *model) {
  vr_rt_instance_stats is[VR_RT_MAX_INSTANCES];
  int n = vr_rt_instances(s->rt, model, is, VR_RT_MAX_INSTANCES);
  if (n == 0 && !vr_rt_model_ready(s->rt, model)) {
    char msg[200]; /* named, as the other model endpoints do */
    snprintf(msg, sizeof msg, "model '%.128s' is not loaded", model);
    vr_server_count(s, 404);
    vr_http_error(r, 404, msg);
    return;
  }
  if (n > VR_RT_MAX_INSTANCES) n = VR_RT_MAX_INSTANCES;
  vr_sbuf b;
  vr_sbuf_init(&b);
  vr_sbuf_puts(&b, "{\"instances\":[");
  for (int i = 0; i < n; i++) {
    const vr_rt_instance_stats *x = &is[i];
    vr_sbuf_printf(&b, "%s{\"id\":%d,\"variant\":", i ? "," : "", x->id);
    vr_sbuf_json_str(&b, x->variant);
    vr_sbuf_printf(&b, ",\"state\":\"%s\",\"precision\":\"%s\",\"threads\":%d,"
                   "\"max_batch\":%d,\"queue_rows\":%d,\"busy_rows\":%d,"
                   "\"served_qps\":%.1f,\"latency_ewma_us\":%.1f,"
                   "\"served\":%llu,\"dropped\":%llu,\"batches\":%llu,"
                   "\"profile_us\":{",
                   vr_rt_state_name(x->state),
                   vr_rt_precision_name(x->precision), x->threads,
                   x->max_batch, x->queue_rows, x->busy_rows, x->served_qps,
                   x->latency_ewma_ns / 1e3, (unsigned long long)x->served,
                   (unsigned long long)x->dropped,
                   (unsigned long long)x->batches);
    int first = 1;
    for (int k = 0; k < VR_PROF_NB; k++)
      if (x->profile.p50_ms[k] > 0) {
        vr_sbuf_printf(&b, "%s\"%d\":%.1f", first ? "" : ",", 1 << k,
                       x->profile.p50_ms[k] * 1e3);
        first = 0;
      }
    vr_sbuf_puts(&b, "}");
    if (x->body)
      vr_sbuf_printf(&b, ",\"body\":{\"pair_range\":[%d,%d],\"shadow_threads\":%d,"
                     "\"shadows_attached\":%llu,\"paired_batches\":%llu}",
                     x->pair_begin, x->pair_end, x->shadow_threads,
                     (unsigned long long)x->shadows_attached,
                     (unsigned long long)x->paired_batches);
    vr_sbuf_puts(&b, "}");
  }
  vr_sbuf_puts(&b, "]}");
  vr_server_count(s, 200);
  vr_server_reply_json(r, 200, &b);
}
