/*
 * KServe v2 gRPC: Triton's extension methods (model configuration,
 * statistics, repository index, load and unload). The call lifecycle and
 * the core KServe methods are in grpc.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/thread.h"
#include "server/grpc_int.h"

static Inference__DataType data_type(vr_dtype dt) {
  static const struct { const char *k; Inference__DataType t; } m[] = {
      {"BOOL", INFERENCE__DATA_TYPE__TYPE_BOOL}, {"UINT8", INFERENCE__DATA_TYPE__TYPE_UINT8},
      {"UINT16", INFERENCE__DATA_TYPE__TYPE_UINT16}, {"UINT32", INFERENCE__DATA_TYPE__TYPE_UINT32},
      {"UINT64", INFERENCE__DATA_TYPE__TYPE_UINT64}, {"INT8", INFERENCE__DATA_TYPE__TYPE_INT8},
      {"INT16", INFERENCE__DATA_TYPE__TYPE_INT16}, {"INT32", INFERENCE__DATA_TYPE__TYPE_INT32},
      {"INT64", INFERENCE__DATA_TYPE__TYPE_INT64}, {"FP16", INFERENCE__DATA_TYPE__TYPE_FP16},
      {"FP32", INFERENCE__DATA_TYPE__TYPE_FP32}, {"FP64", INFERENCE__DATA_TYPE__TYPE_FP64},
      {"BYTES", INFERENCE__DATA_TYPE__TYPE_STRING}, {"BF16", INFERENCE__DATA_TYPE__TYPE_BF16}};
  const char *k = vr_dtype_kserve(dt);
  for (size_t i = 0; k && i < sizeof m / sizeof m[0]; i++)
    if (!strcmp(k, m[i].k)) return m[i].t;
  return INFERENCE__DATA_TYPE__TYPE_INVALID;
}

void vr__grpc_model_config(gcall *c) {
  Inference__ModelConfigRequest *q =
      (void *)vr__grpc_unpack(c, &inference__model_config_request__descriptor);
  vr_model_config cfg;
  if (!q) return;
  int bad = vr__grpc_config_of(c, q->name, q->version, &cfg);
  inference__model_config_request__free_unpacked(q, NULL);
  if (bad) return;
  Inference__ModelConfig mc = INFERENCE__MODEL_CONFIG__INIT;
  Inference__ModelInput mi[VR_RT_MAX_IO], *mip[VR_RT_MAX_IO];
  Inference__ModelOutput mo[VR_RT_MAX_IO], *mop[VR_RT_MAX_IO];
  Inference__ModelInstanceGroup ig = INFERENCE__MODEL_INSTANCE_GROUP__INIT, *igp = &ig;
  Inference__ModelDynamicBatching db = INFERENCE__MODEL_DYNAMIC_BATCHING__INIT;
  mc.name = cfg.name;
  mc.platform = "onnxruntime_onnx";
  mc.backend = "onnxruntime";
  mc.max_batch_size = cfg.max_batch_size;
  mc.default_model_filename = cfg.model_file[0] ? cfg.model_file : "model.onnx";
  for (int i = 0; i < cfg.n_inputs; i++) {
    inference__model_input__init(&mi[i]);
    mi[i].name = cfg.inputs[i].name;
    mi[i].data_type = data_type(cfg.inputs[i].dtype);
    mi[i].dims = cfg.inputs[i].shape + 1;
    mi[i].n_dims = (size_t)(cfg.inputs[i].ndim - 1);
    mip[i] = &mi[i];
  }
  for (int i = 0; i < cfg.n_outputs; i++) {
    inference__model_output__init(&mo[i]);
    mo[i].name = cfg.outputs[i].name;
    mo[i].data_type = data_type(cfg.outputs[i].dtype);
    mo[i].dims = cfg.outputs[i].shape + 1;
    mo[i].n_dims = (size_t)(cfg.outputs[i].ndim - 1);
    mo[i].label_filename = cfg.label_file[i];
    mop[i] = &mo[i];
  }
  mc.input = mip;
  mc.n_input = (size_t)cfg.n_inputs;
  mc.output = mop;
  mc.n_output = (size_t)cfg.n_outputs;
  ig.name = cfg.name;
  ig.count = cfg.instances;
  ig.kind = INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU;
  mc.instance_group = &igp;
  mc.n_instance_group = 1;
  db.preferred_batch_size = cfg.preferred_batch;
  db.n_preferred_batch_size = (size_t)cfg.n_preferred_batch;
  db.max_queue_delay_microseconds = (uint64_t)cfg.max_queue_delay_us;
  mc.dynamic_batching = &db;
  Inference__ModelConfigResponse r = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
  r.config = &mc;
  vr__grpc_reply(c, &r.base);
}

typedef struct stats_acc {
  vr_server *s;
  Inference__ModelStatisticsResponse r;
  vr_vec all; /* heap blocks to free after the reply */
} stats_acc;

static void *keep(stats_acc *a, size_t n) {
  void *p = vr_calloc(1, n);
  if (p && vr_vec_push(&a->all, &p)) {
    vr_free(p);
    return NULL;
  }
  return p;
}

/* Frees every block keep() handed out, after the reply is packed. */
static void keep_free(stats_acc *a) {
  for (size_t i = 0; i < a->all.len; i++) vr_free(*(void **)vr_vec_at(&a->all, i));
  vr_vec_free(&a->all);
}

static Inference__StatisticDuration *dur(stats_acc *a, uint64_t n, double ns) {
  Inference__StatisticDuration *d = keep(a, sizeof *d);
  if (!d) return NULL;
  inference__statistic_duration__init(d);
  d->count = n;
  d->ns = (uint64_t)(ns > 0 ? ns : 0);
  return d;
}

static void stats_one(const vr_rt_variant_stats *v, void *u) {
  stats_acc *a = u;
  Inference__ModelStatistics *m = keep(a, sizeof *m);
  Inference__InferStatistics *is = keep(a, sizeof *is);
  char *ver = keep(a, 16);
  Inference__ModelStatistics **arr =
      vr_realloc(a->r.model_stats, (a->r.n_model_stats + 1) * sizeof *arr);
  if (arr) a->r.model_stats = arr; /* realloc may have freed the old array */
  if (!m || !is || !ver || !arr) return;
  inference__model_statistics__init(m);
  inference__infer_statistics__init(is);
  snprintf(ver, 16, "%d", vr__srv_version(a->s, v->model));
  m->name = keep(a, VR_NAME_MAX);
  if (!m->name) return;
  snprintf(m->name, VR_NAME_MAX, "%s", v->model);
  m->version = ver;
  m->last_inference = (uint64_t)v->last_inference_ms;
  m->inference_count = v->outcomes[VR_OUT_OK];
  m->execution_count = v->batches;
  uint64_t fail = 0;
  for (int o = 1; o < VR_OUT_COUNT; o++) fail += v->outcomes[o];
  is->success = dur(a, v->request.count, v->request.sum_s * 1e9);
  is->fail = dur(a, fail, 0);
  is->queue = dur(a, v->queue.count, v->queue.sum_s * 1e9);
  is->compute_input = dur(a, v->compute_n, v->compute_input_ns);
  is->compute_infer = dur(a, v->compute_n, v->compute_infer_ns);
  is->compute_output = dur(a, v->compute_n, v->compute_output_ns);
  m->inference_stats = is;
  for (int k = 1; k <= VR_RT_MAX_BATCH; k++) {
    if (!v->by_batch[k].count) continue;
    Inference__InferBatchStatistics *b = keep(a, sizeof *b);
    Inference__InferBatchStatistics **bs =
        keep(a, (m->n_batch_stats + 1) * sizeof *bs);
    if (!b || !bs) break;
    if (m->n_batch_stats) memcpy(bs, m->batch_stats, m->n_batch_stats * sizeof *bs);
    inference__infer_batch_statistics__init(b);
    uint64_t n = v->by_batch[k].count;
    b->batch_size = (uint64_t)k;
    b->compute_input = dur(a, n, v->by_batch[k].input_ns);
    b->compute_infer = dur(a, n, v->by_batch[k].infer_ns);
    b->compute_output = dur(a, n, v->by_batch[k].output_ns);
    bs[m->n_batch_stats++] = b;
    m->batch_stats = bs;
  }
  a->r.model_stats[a->r.n_model_stats++] = m;
}

void vr__grpc_model_statistics(gcall *c) {
  Inference__ModelStatisticsRequest *q =
      (void *)vr__grpc_unpack(c, &inference__model_statistics_request__descriptor);
  if (!q) return;
  stats_acc a = {c->g->s, INFERENCE__MODEL_STATISTICS_RESPONSE__INIT, {0}};
  vr_vec_init(&a.all, sizeof(void *));
  vr_model_config cfg;
  if (*q->name && vr__grpc_config_of(c, q->name, q->version, &cfg)) {
    inference__model_statistics_request__free_unpacked(q, NULL);
    vr_vec_free(&a.all);
    return;
  }
  vr_rt_foreach_variant(c->g->s->rt, *q->name ? q->name : NULL, stats_one, &a);
  inference__model_statistics_request__free_unpacked(q, NULL);
  vr__grpc_reply(c, &a.r.base);
  keep_free(&a);
  vr_free(a.r.model_stats);
}

typedef struct index_acc {
  stats_acc k; /* only its block list */
  Inference__RepositoryIndexResponse r;
  int ready_only;
} index_acc;

static void index_one(void *u, const char *name, int version, int ready,
                      const char *reason) {
  index_acc *a = u;
  if (a->ready_only && !ready) return;
  Inference__RepositoryIndexResponse__ModelIndex *m = keep(&a->k, sizeof *m);
  char *nm = keep(&a->k, strlen(name) + 1), *ver = keep(&a->k, 16),
       *why = keep(&a->k, strlen(reason) + 1);
  Inference__RepositoryIndexResponse__ModelIndex **arr =
      vr_realloc(a->r.models, (a->r.n_models + 1) * sizeof *arr);
  if (arr) a->r.models = arr; /* realloc may have freed the old array */
  if (!m || !nm || !ver || !why || !arr) return;
  inference__repository_index_response__model_index__init(m);
  memcpy(nm, name, strlen(name) + 1);
  memcpy(why, reason, strlen(reason) + 1);
  snprintf(ver, 16, "%d", version);
  m->name = nm;
  m->version = ver;
  m->state = ready ? "READY" : "UNAVAILABLE";
  m->reason = why;
  a->r.models[a->r.n_models++] = m;
}

void vr__grpc_repository_index(gcall *c) {
  Inference__RepositoryIndexRequest *q =
      (void *)vr__grpc_unpack(c, &inference__repository_index_request__descriptor);
  if (!q) return;
  index_acc a = {{c->g->s, INFERENCE__MODEL_STATISTICS_RESPONSE__INIT, {0}},
                 INFERENCE__REPOSITORY_INDEX_RESPONSE__INIT, q->ready};
  inference__repository_index_request__free_unpacked(q, NULL);
  vr_vec_init(&a.k.all, sizeof(void *));
  vr__srv_repo_list(c->g->s, index_one, &a);
  vr__grpc_reply(c, &a.r.base);
  keep_free(&a.k);
  vr_free(a.r.models);
}

/* A load or unload that passed its checks: it runs, and is answered, on
 * its own thread. */
typedef struct load_job {
  gcall *c;
  int load;
  char name[VR_NAME_MAX];
} load_job;

static void *load_main(void *arg) {
  load_job *j = arg;
  gcall *c = j->c;
  vr_grpc *g = c->g;
  vr_server *s = g->s;
  vr_errbuf err = {0};
  int rc = j->load ? vr_server_load(s, j->name, &err) : vr__srv_unload(s, j->name, &err);
  if (j->load && rc != VR_ENOENT) vr__srv_expect(s, j->name, 1);
  if (rc) {
    vr__grpc_fail(c, rc, err.msg);
  } else {
    Inference__RepositoryModelLoadResponse lr = INFERENCE__REPOSITORY_MODEL_LOAD_RESPONSE__INIT;
    Inference__RepositoryModelUnloadResponse ur = INFERENCE__REPOSITORY_MODEL_UNLOAD_RESPONSE__INIT;
    vr__grpc_reply(c, j->load ? &lr.base : &ur.base);
  }
  vr_free(j);
  __atomic_fetch_sub(&s->admin_jobs, 1, __ATOMIC_SEQ_CST);
  __atomic_fetch_sub(&g->inflight, 1, __ATOMIC_SEQ_CST); /* g may go after this */
  return NULL;
}

/* Starts the job's thread, counted as HTTP's are (shutdown waits for
 * admin jobs; max_admin_jobs at once) and as in flight (the queue stays
 * open for its answer). Answers the call itself when it cannot. */
static void load_spawn(gcall *c, int load, const char *name) {
  vr_server *s = c->g->s;
  int max = s->o.max_admin_jobs > 0 ? s->o.max_admin_jobs : 4;
  load_job *j = VR_NEW(load_job);
  if (!j) return vr__grpc_fail(c, VR_ENOMEM, "out of memory");
  j->c = c;
  j->load = load;
  snprintf(j->name, sizeof j->name, "%s", name);
  if (__atomic_add_fetch(&s->admin_jobs, 1, __ATOMIC_SEQ_CST) > max) {
    __atomic_fetch_sub(&s->admin_jobs, 1, __ATOMIC_SEQ_CST);
    vr_free(j);
    char msg[128];
    snprintf(msg, sizeof msg, "%d admin jobs (loads, registrations) are already running;"
             " retry later", max);
    return vr__grpc_fail(c, VR_EBUSY, msg);
  }
  __atomic_fetch_add(&c->g->inflight, 1, __ATOMIC_SEQ_CST);
  if (vr_thread_detached(load_main, j)) {
    vr_free(j);
    __atomic_fetch_sub(&s->admin_jobs, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_sub(&c->g->inflight, 1, __ATOMIC_SEQ_CST);
    vr__grpc_fail(c, VR_EINTERNAL, "cannot start a thread");
  }
}

/* Load/unload do not run on the queue thread: it is also the one that
 * polls the gRPC sockets, so while a load ran there every other call
 * (ServerLive included) waited for it. The checks are quick and stay. */
void vr__grpc_repository_load(gcall *c, int load) {
  const ProtobufCMessageDescriptor *d =
      load ? &inference__repository_model_load_request__descriptor
           : &inference__repository_model_unload_request__descriptor;
  ProtobufCMessage *m = vr__grpc_unpack(c, d);
  if (!m) return;
  Inference__RepositoryModelLoadRequest *lq = load ? (void *)m : NULL;
  Inference__RepositoryModelUnloadRequest *uq = load ? NULL : (void *)m;
  const char *name = load ? lq->model_name : uq->model_name;
  const char *repo = load ? lq->repository_name : uq->repository_name;
  size_t np = load ? lq->n_parameters : uq->n_parameters;
  vr_errbuf err = {0};
  int rc = 0;
  for (size_t i = 0; !rc && i < np; i++) {
    const char *key = load ? lq->parameters[i]->key : uq->parameters[i]->key;
    Inference__ModelRepositoryParameter *v = load ? lq->parameters[i]->value
                                                  : uq->parameters[i]->value;
    int is_bool = v && v->parameter_choice_case ==
                           INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
    rc = vr__srv_repo_param(load, key ? key : "", is_bool, &err);
  }
  /* a refused parameter: nothing is tried */
  if (!rc && *repo)
    rc = vr_errf(&err, VR_EUNSUPPORTED, "repository_name '%.64s': Vario serves one"
                 " repository (--repo); leave it empty", repo);
  if (!rc && !vr__srv_valid_name(name)) /* the HTTP route's rule */
    rc = vr_errf(&err, VR_EINVAL, "model names use only [A-Za-z0-9_.-]");
  if (rc) vr__grpc_fail(c, rc, err.msg);
  else load_spawn(c, load, name);
  protobuf_c_message_free_unpacked(m, NULL);
}
