/*
 * AsyFunc shadows through the repository API (Vario extension, issue 18;
 * docs/API.md "AsyFunc bodies and shadows"): the controller's AsyFunc
 * policy decides across workers, and a worker carries out what concerns
 * its own runtime —
 *   POST /v2/repository/models/{m}/load   {"parameters":{"pair_range":"B:E"}}
 *        loads m's instances as bodies splittable over nodes [B, E);
 *   POST /v2/repository/models/{m}/shadow {"cores":C,"split":[...]}
 *        pairs a shadow of C cores with m's first unpaired body, with
 *        split[b] = the shadow's rows of a batch of b (b = 0..max batch);
 *   POST /v2/repository/models/{m}/unshadow
 *        releases m's shadows.
 * Pairing loads the shadow's blocks, so it runs as an admin job on its own
 * thread, as a load does.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "server/server_int.h"

int vr__srv_pair_range(const char *s, int *pb, int *pe, vr_errbuf *err) {
  int b = -1, e = -1, used = 0;
  if (!s || sscanf(s, "%9d:%9d%n", &b, &e, &used) != 2 || s[used] || b < 0 || e <= b)
    return vr_errf(err, VR_EINVAL, "load parameter \"pair_range\" must be \"B:E\" with"
                   " 0 <= B < E (the body's splittable node range)");
  *pb = b, *pe = e;
  return 0;
}

int vr__srv_shadow_parse(const char *body, size_t len, vr__srv_shadow_req *q, vr_errbuf *err) {
  memset(q, 0, sizeof *q);
  json_error_t je;
  json_t *j = body && len ? json_loadb(body, len, 0, &je) : NULL;
  int rc = 0;
  if (!json_is_object(j)) {
    json_decref(j);
    return vr_errf(err, VR_EFORMAT, "request body must be a JSON object"
                   " {\"cores\":C,\"split\":[...]}");
  }
  const char *k;
  json_t *v;
  int have_cores = 0, have_split = 0;
  json_object_foreach(j, k, v) {
    if (rc) break;
    if (!strcmp(k, "cores")) {
      json_int_t c = json_is_integer(v) ? json_integer_value(v) : 0;
      if (c < 1 || c > 256) rc = vr_errf(err, VR_EINVAL, "\"cores\" must be an integer 1..256");
      q->cores = (int)c;
      have_cores = 1;
    } else if (!strcmp(k, "process")) {
      if (!json_is_boolean(v)) rc = vr_errf(err, VR_EINVAL, "\"process\" must be a boolean");
      q->process = json_is_true(v);
    } else if (!strcmp(k, "split")) {
      size_t n = json_is_array(v) ? json_array_size(v) : 0;
      if (n < 2 || n > VR_RT_MAX_BATCH + 1) {
        rc = vr_errf(err, VR_EINVAL, "\"split\" must be an array of 2..%d integers",
                     VR_RT_MAX_BATCH + 1);
        break;
      }
      for (size_t b = 0; b < n && !rc; b++) {
        json_t *x = json_array_get(v, b);
        json_int_t r = json_is_integer(x) ? json_integer_value(x) : -1;
        if (r < 0 || r > (json_int_t)b || (b == 0 && r != 0))
          rc = vr_errf(err, VR_EINVAL, "\"split\"[%zu] must be an integer 0..%zu (the"
                       " shadow's rows of a batch of %zu)", b, b, b);
        q->split[b] = (int)r;
      }
      q->nsplit = (int)n;
      have_split = 1;
    } else {
      rc = vr_errf(err, VR_EUNSUPPORTED, "unknown field \"%.64s\"", k);
    }
  }
  json_decref(j);
  if (!rc && (!have_cores || !have_split))
    rc = vr_errf(err, VR_EINVAL, "\"cores\" and \"split\" are required");
  return rc;
}

typedef struct shadow_job {
  vr_server *s;
  vr_http_req *http;
  char name[VR_NAME_MAX];
  int pair;
  vr__srv_shadow_req q;
  int rc, id;
  double load_ms;
  vr_errbuf err;
} shadow_job;

/* Pairs q with the model's first body that has no shadow. */
static int pair_one(shadow_job *j, const vr_rt_instance_stats *is, int n) {
  int body = -1, any = 0;
  for (int i = 0; i < n && body < 0; i++) {
    any |= is[i].body;
    if (is[i].body && is[i].shadow_threads <= 0) body = i;
  }
  if (!any)
    return vr_errf(&j->err, VR_EINVAL, "model '%s' has no AsyFunc body (load it with the"
                   " \"pair_range\" parameter)", j->name);
  if (body < 0) return vr_errf(&j->err, VR_EEXIST, "every body of '%s' has a shadow", j->name);
  if (j->q.nsplit != is[body].max_batch + 1)
    return vr_errf(&j->err, VR_EINVAL, "\"split\" has %d entries; the body batches up to %d"
                   " (max batch + 1 entries)", j->q.nsplit, is[body].max_batch);
  vr_rt_shadow_opts so = {j->q.cores, j->q.process, j->q.split};
  j->id = is[body].id;
  return vr_rt_pair_shadow(j->s->rt, is[body].id, &so, &j->load_ms, &j->err);
}

static void *shadow_main(void *arg) {
  shadow_job *j = arg;
  vr_rt_instance_stats *is = vr_calloc(VR_RT_MAX_INSTANCES, sizeof *is);
  int n = is ? vr_rt_instances(j->s->rt, j->name, is, VR_RT_MAX_INSTANCES) : 0;
  if (n > VR_RT_MAX_INSTANCES) n = VR_RT_MAX_INSTANCES;
  if (!is) {
    j->rc = vr_errf(&j->err, VR_ENOMEM, "out of memory");
  } else if (n <= 0) {
    j->rc = vr_errf(&j->err, VR_ENOENT, "model '%s' is not loaded", j->name);
  } else if (j->pair) {
    j->rc = pair_one(j, is, n);
  } else {
    int released = 0;
    for (int i = 0; i < n; i++)
      if (is[i].shadow_threads > 0 && !vr_rt_unpair_shadow(j->s->rt, is[i].id, &j->err))
        released++;
    j->rc = released ? 0 : vr_errf(&j->err, VR_ENOENT, "model '%s' has no shadow", j->name);
    j->id = released;
  }
  vr_free(is);
  vr_server *s = j->s;
  __atomic_fetch_sub(&s->admin_jobs, 1, __ATOMIC_SEQ_CST);
  vr_http_wake(j->http);
  return NULL;
}

static void shadow_done(vr_http_req *r, void *user) {
  vr_server *s = user;
  shadow_job *j = vr_http_state(r);
  int st = vr_server_http_status(j->rc);
  vr_server_count(s, st);
  if (j->rc) {
    vr_http_error(r, st, j->err.msg);
    return;
  }
  vr_sbuf b;
  vr_sbuf_init(&b);
  if (j->pair)
    vr_sbuf_printf(&b, "{\"instance\":%d,\"cores\":%d,\"load_ms\":%.3f}", j->id, j->q.cores,
                   j->load_ms);
  else
    vr_sbuf_printf(&b, "{\"released\":%d}", j->id);
  vr_server_reply_json(r, 200, &b);
}

void vr_server_repo_shadow(vr_server *s, vr_http_req *r, const char *model, int pair) {
  shadow_job *j = VR_NEW(shadow_job);
  if (!j) {
    vr_http_error(r, 500, "out of memory");
    return;
  }
  size_t len = 0;
  const char *body = vr_http_body(r, &len);
  if (!vr__srv_valid_name(model)) {
    j->rc = vr_errf(&j->err, VR_EINVAL, "model names use only [A-Za-z0-9_.-]");
  } else if (pair) {
    j->rc = vr__srv_shadow_parse(body, len, &j->q, &j->err);
  } else if (body && len && !(len == 2 && !memcmp(body, "{}", 2))) {
    j->rc = vr_errf(&j->err, VR_EUNSUPPORTED, "unshadow takes no parameters");
  }
  if (j->rc) {
    int st = vr_server_http_status(j->rc);
    vr_server_count(s, st);
    vr_http_error(r, st, j->err.msg);
    vr_free(j);
    return;
  }
  j->s = s;
  j->http = r;
  j->pair = pair;
  snprintf(j->name, sizeof j->name, "%s", model);
  vr_http_set_state(r, j, vr_free);
  if (vr_server_spawn_admin(s, r, shadow_done, shadow_main, j) < 0)
    j->rc = vr_errf(&j->err, VR_EINTERNAL, "cannot start a thread");
}
