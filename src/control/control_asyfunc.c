/*
 * AsyFunc in the live control plane: block profiles read from the store,
 * bodies loaded splittable, and the driver's PAIR/UNPAIR actuator slots
 * carried out on the runtime (vr_rt_pair_shadow / vr_rt_unpair_shadow).
 * The decisions themselves are policy/asyfunc_tick.c's.
 */
#include <jansson.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "control/control_int.h"

typedef struct af_load {
  vr_af_model *m;
  size_t n, cap;
  int bad;
} af_load;

static int collect(void *ctx, const char *name, const char *body) {
  af_load *l = ctx;
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 4;
    vr_af_model *m = vr_realloc(l->m, cap * sizeof *m);
    if (!m) return VR_ENOMEM;
    l->m = m, l->cap = cap;
  }
  json_error_t je;
  json_t *j = json_loads(body, 0, &je);
  vr_errbuf e = {0};
  int rc = j ? vr_af_model_from_json(j, &l->m[l->n], &e) : VR_EFORMAT;
  json_decref(j);
  if (rc) { /* a bad document disables AsyFunc for that model only */
    vr_warn("control: block profile '%s' in the store: %s", name, j ? e.msg : je.text);
    l->bad++;
    return 0;
  }
  /* the document's name is the registered model's */
  snprintf(l->m[l->n].name, sizeof l->m[l->n].name, "%s", name);
  l->n++;
  return 0;
}

int ctl_af_load(vr_control *c, vr_errbuf *err) {
  af_load l = {0};
  int rc = vr_store_load_docs(c->o.store, VR_AF_DOC_KIND, collect, &l, err);
  if (rc) {
    vr_free(l.m);
    return rc;
  }
  for (size_t v = 0; v < c->nvar; v++) {
    c->var[v].blocks = NULL;
    for (size_t k = 0; k < l.n; k++)
      if (!strcmp(l.m[k].name, c->var[v].prof.model)) c->var[v].blocks = &l.m[k];
  }
  vr_free(c->af);
  c->af = l.m;
  c->naf = l.n;
  return 0;
}

static int shadow_cores_default(const vr_af_model *m) {
  return m->cmax / 2 > 0 ? m->cmax / 2 : 1;
}

/* A body batches: of v's siblings (same model, precision, threads) the
 * largest max batch whose batch still leaves room to queue within the SLO
 * (2 t_l <= SLO, BATCH's and the selection's rule), from the block
 * profile. The query path loads the variant that answers one query
 * fastest (max batch 1), which a shadow cannot share rows with. */
static int body_batch(vr_control *c, const ctl_var *v, double slo) {
  int best = v->prof.max_batch;
  for (int b = 1; b <= VR_RT_MAX_BATCH; b *= 2)
    if (2 * vr_af_lat(v->blocks, VR_AF_ALL(v->blocks), v->prof.threads, b) <= slo &&
        ctl_find_var(c, v->prof.model, v->prec, v->prof.threads, b) >= 0)
      best = b > best ? b : best;
  return best;
}

void ctl_af_body_opts(vr_control *c, const ctl_var *v, vr_rt_instance_opts *io) {
  if (c->o.policy.kind != VR_POL_ASYFUNC || !v->blocks || v->prec != VR_PREC_FP32) return;
  vr_af_scale_cfg sc;
  double slo = v->slo_ms > 0 ? v->slo_ms : c->o.default_slo_ms;
  vr_af_scale_cfg_init(&sc, slo);
  io->max_batch = body_batch(c, v, slo);
  uint32_t mask;
  int pb, pe;
  if (vr_af_body_range(v->blocks, &sc, v->prof.threads, shadow_cores_default(v->blocks), &pb,
                       &pe, &mask)) {
    vr_warn("control: %s: no blocks worth a shadow; loaded as a plain instance",
            v->prof.variant);
    return;
  }
  io->pair_begin = pb;
  io->pair_end = pe;
}

/* The rows waiting at v's bodies are counted as what was routed and not
 * completed less one full batch per body (the one it may be running): at
 * most what is queued or on its way to the queue, so a kick seldom finds
 * nothing to do (the tick decides on the runtime's exact queue, and the
 * periodic tick still runs). */
void ctl_af_routed(vr_control *c, int v) {
  if (c->o.policy.kind != VR_POL_ASYFUNC || c->o.policy.af_kappa == 0 ||
      (size_t)v >= c->nvar || !c->var[v].blocks)
    return; /* kappa 0 is AsyFunc-: LLS never pairs */
  long rows = 0;
  int n = 0, unpaired = 0;
  for (size_t i = 0; i < c->insts.len; i++) {
    ctl_inst *in = vr_vec_at(&c->insts, i);
    if (in->var != v || in->removing) continue;
    n++;
    unpaired += !in->shadow_cores;
    int q = in->inflight - (in->cap > 0 ? in->cap : 1);
    rows += q > 0 ? q : 0;
  }
  /* every body has its shadow: LLS has nothing to add */
  if (!unpaired || !vr_pol_af_crowded(&c->o.policy, rows, n)) return;
  int64_t now = vr_now_ns();
  if (!c->var[v].af_cross_ns) c->var[v].af_cross_ns = now;
  if (c->kick || now - c->af_kick_ns < c->af_kick_gap_ns) return;
  c->kick = 1;
  c->af_kick_ns = now;
  pthread_cond_broadcast(&c->cv);
}

int ctl_af_pair(void *self, const vr_action *a) {
  vr_control *c = self;
  int64_t t0 = vr_now_ns();
  vr_rt_instance_stats st = {0};
  int n = 0;
  vr_rt_instance_stats all[CTL_MAX_INST];
  int k = vr_rt_instances(c->o.rt, NULL, all, CTL_MAX_INST);
  for (int i = 0; i < k && i < CTL_MAX_INST; i++)
    if (all[i].id == a->instance) st = all[i], n = 1;
  pthread_mutex_lock(&c->mu);
  const vr_af_model *m =
      a->variant >= 0 && (size_t)a->variant < c->nvar ? c->var[a->variant].blocks : NULL;
  vr_af_model copy;
  if (m) copy = *m; /* a store reload may replace c->af meanwhile */
  int process = c->o.shadow_process;
  pthread_mutex_unlock(&c->mu);
  if (!n || !m || !st.body) return 0; /* gone, or not a body: nothing to do */
  /* the blocks of the body's range, split per batch size as Eq. 3 says */
  uint32_t mask = 0;
  for (int i = 0; i < copy.nblocks; i++)
    if (copy.blk[i].node_begin >= st.pair_begin && copy.blk[i].node_end <= st.pair_end)
      mask |= 1u << i;
  int cs = a->value > 0 ? a->value : 1;
  int *split = vr_calloc((size_t)st.max_batch + 1, sizeof(int));
  if (!split) return VR_ENOMEM;
  vr_af_split_table(&copy, mask, st.threads, cs, st.max_batch, split);
  vr_rt_shadow_opts so = {cs, process, split};
  double ms = 0;
  vr_errbuf err = {0};
  int rc = vr_rt_pair_shadow(c->o.rt, (int)a->instance, &so, &ms, &err);
  vr_free(split);
  if (rc) {
    vr_warn("control: pair instance %lld: %s", (long long)a->instance, err.msg);
    return 0;
  }
  pthread_mutex_lock(&c->mu);
  int64_t cross = (size_t)a->variant < c->nvar ? c->var[a->variant].af_cross_ns : 0;
  /* a crowd first seen while this shadow loaded is not what it answers */
  double lag = cross && cross <= t0 ? (double)(vr_now_ns() - cross) / 1e6 : -1;
  if (lag >= 0) c->af_provision_ms = lag;
  c->af_pairs++;
  pthread_mutex_unlock(&c->mu);
  char since[64] = "";
  if (lag >= 0) snprintf(since, sizeof since, ", %.1f ms after the crowd was seen", lag);
  vr_info("control: instance %lld paired with a %d-core shadow%s (loaded in %.1f ms%s)",
          (long long)a->instance, cs, process ? " process" : "", ms, since);
  return 0;
}

int ctl_af_unpair(void *self, const vr_action *a) {
  vr_control *c = self;
  vr_errbuf err = {0};
  if (vr_rt_unpair_shadow(c->o.rt, (int)a->instance, &err))
    vr_debug("control: unpair %lld: %s", (long long)a->instance, err.msg);
  else
    vr_info("control: instance %lld released its shadow", (long long)a->instance);
  return 0;
}
