#include "sim/il_sim.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "sim/psim_ctl.h"
#include "sim/psim_stage.h"

static const char *const k_policies[VR_ILP__COUNT] = {
    "inferline", "inferline_plan", "cg_peak", "cg_mean", "cg_peak_static",
    "cg_mean_static"};

const char *vr_il_policy_name(int p) {
  return p >= 0 && p < VR_ILP__COUNT ? k_policies[p] : "?";
}

int vr_il_policy_parse(const char *s) {
  for (int p = 0; s && p < VR_ILP__COUNT; p++)
    if (!strcmp(s, k_policies[p])) return p;
  return -1;
}

static double wall_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

void vr_il_sim_forget(vr_il_sim *s) {
  vr_psim_stages_free(s->stages);
  s->stages = NULL;
}

void vr_il_sim_free(vr_il_sim *s) {
  vr_il_sim_forget(s);
  vr_pipe_data_free(&s->data);
  vr_free(s->t);
  memset(s, 0, sizeof *s);
}

/* The most accurate variant of task t (ties: the first). */
static int most_accurate(const vr_pipe_task *t) {
  int best = 0;
  for (int v = 1; v < t->nvariants; v++)
    if (t->variants[v].accuracy > t->variants[best].accuracy) best = v;
  return best;
}

/* Task t of the derived pipeline: one variant per hardware option of the
 * chosen model, with the model's factor and shares and the option's
 * profile and price. */
static int derive_task(vr_il_sim *s, const vr_pipe_data *const *by_hw,
                       const char *const *hw_names, const double *price,
                       int nhw, int t, vr_errbuf *err) {
  const vr_pipe_task *src = &by_hw[0]->pipe->tasks[t];
  const vr_pipe_variant *model = &src->variants[most_accurate(src)];
  char names[VR_IL_MAX_HW][VR_PIPE_NAME_MAX];
  const char *np[VR_IL_MAX_HW] = {0};
  double acc[VR_IL_MAX_HW] = {0};
  for (int h = 0; h < nhw; h++) {
    if (snprintf(names[h], sizeof names[h], "%s@%s", model->name,
                 hw_names[h]) >= (int)sizeof names[h])
      return vr_errf(err, VR_EINVAL, "inferline: name '%s@%s' too long",
                     model->name, hw_names[h]);
    np[h] = names[h];
    acc[h] = model->accuracy;
  }
  int rc = vr_pipe_task_set_variants(s->data.pipe, t, np, acc, nhw, err);
  if (rc) return rc;
  vr_pipe_task *dt = &s->data.pipe->tasks[t];
  for (int h = 0; h < nhw; h++) {
    dt->variants[h].mult = model->mult;
    memcpy(dt->variants[h].share, model->share, sizeof model->share);
  }
  return 0;
}

static int copy_profiles(vr_il_sim *s, const vr_pipe_data *const *by_hw,
                         const char *const *hw_names, const double *price,
                         int nhw, vr_errbuf *err) {
  const vr_pipeline *p = by_hw[0]->pipe;
  for (int t = 0; t < p->ntasks; t++) {
    const char *model = p->tasks[t].variants[most_accurate(&p->tasks[t])].name;
    for (int h = 0; h < nhw; h++) {
      const vr_pipeline *ph = by_hw[h]->pipe;
      int v = ph->ntasks == p->ntasks
                  ? vr_pipe_task_variant(&ph->tasks[t], model) : -1;
      if (v < 0)
        return vr_errf(err, VR_ENOENT, "inferline: task '%s': model '%s' "
                       "has no profile on '%s'", p->tasks[t].name, model,
                       hw_names[h]);
      vr_profile *dst = &s->data.prof[s->data.off[t] + h];
      *dst = by_hw[h]->prof[by_hw[h]->off[t] + v];
      dst->cost_per_s = price[h];
      snprintf(dst->variant, sizeof dst->variant, "%s@%s", model,
               hw_names[h]);
    }
  }
  return 0;
}

/* The problem over the derived pipeline (one variant per option). */
static void setup_problem(vr_il_sim *s) {
  const vr_pipeline *p = s->data.pipe;
  int choice[VR_PIPE_MAX_TASKS] = {0};
  double scale[VR_PIPE_MAX_TASKS];
  vr_pipeline_rates(p, choice, NULL, 1.0, scale);
  s->est_noise = 1;
  vr_il_problem *pb = &s->pb;
  pb->nstages = p->ntasks;
  pb->slo_ms = p->slo_ms;
  pb->estimate = vr_il_sim_estimate;
  pb->ctx = s;
  for (int t = 0; t < p->ntasks; t++) {
    vr_il_stage *st = &pb->st[t];
    snprintf(st->name, sizeof st->name, "%s", p->tasks[t].name);
    st->parent = p->tasks[t].parent;
    st->scale = scale[t] > 0 ? scale[t] : 1e-6; /* unreachable: idle */
    st->nhw = p->tasks[t].nvariants;
    st->hw = &s->data.prof[s->data.off[t]];
  }
}

int vr_il_sim_init(vr_il_sim *s, const vr_pipe_data *const *by_hw,
                   const char *const *hw_names, const double *price, int nhw,
                   vr_errbuf *err) {
  memset(s, 0, sizeof *s);
  if (nhw < 1 || nhw > VR_IL_MAX_HW)
    return vr_errf(err, VR_EINVAL, "inferline: %d hardware options (1..%d)",
                   nhw, VR_IL_MAX_HW);
  const vr_pipeline *p = by_hw[0]->pipe;
  if (p->ntasks > VR_IL_MAX_STAGES)
    return vr_errf(err, VR_ELIMIT, "inferline: %d tasks (at most %d)",
                   p->ntasks, VR_IL_MAX_STAGES);
  if (!(s->data.pipe = vr_pipeline_dup(p))) return VR_ENOMEM;
  int rc = 0;
  for (int t = 0; !rc && t < p->ntasks; t++)
    rc = derive_task(s, by_hw, hw_names, price, nhw, t, err);
  if (!rc) {
    vr_pipe_data_index(&s->data);
    s->data.prof = VR_NEWN(vr_profile, s->data.off[p->ntasks]);
    rc = s->data.prof ? copy_profiles(s, by_hw, hw_names, price, nhw, err)
                      : VR_ENOMEM;
  }
  if (rc) {
    vr_il_sim_free(s);
    return rc;
  }
  setup_problem(s);
  return 0;
}

/* Task t of a serving view: the options of its most accurate model, one
 * per (precision, threads), each the variant with the largest batch cap
 * (its profile covers every smaller batch). */
static int view_task(vr_il_sim *s, const vr_pipeline *p, const vr_profile *prof,
                     int off, int t, int *opt, vr_errbuf *err) {
  const vr_pipe_task *tk = &p->tasks[t];
  int best = most_accurate(tk), n = 0;
  /* a profile without a model name (Loki's data) is its own model */
#define MODEL(v) (prof[off + (v)].model[0] ? prof[off + (v)].model : tk->variants[v].name)
  const char *model = MODEL(best);
  for (int v = 0; v < tk->nvariants; v++) {
    const vr_profile *x = &prof[off + v];
    if (strcmp(MODEL(v), model)) continue;
    int h = 0;
    while (h < n && (prof[off + opt[h]].threads != x->threads ||
                     strcmp(prof[off + opt[h]].precision, x->precision)))
      h++;
    if (h == n) {
      if (n == VR_IL_MAX_HW) continue; /* more shapes than options */
      opt[n++] = v;
    } else if (x->max_batch > prof[off + opt[h]].max_batch) {
      opt[h] = v;
    }
  }
  const char *np[VR_IL_MAX_HW] = {0};
  double acc[VR_IL_MAX_HW] = {0};
  for (int h = 0; h < n; h++)
    np[h] = tk->variants[opt[h]].name, acc[h] = tk->variants[opt[h]].accuracy;
  int rc = vr_pipe_task_set_variants(s->data.pipe, t, np, acc, n, err);
  if (rc) return rc;
  for (int h = 0; h < n; h++) {
    s->data.pipe->tasks[t].variants[h].mult = tk->variants[best].mult;
    memcpy(s->data.pipe->tasks[t].variants[h].share, tk->variants[best].share,
           sizeof tk->variants[best].share);
  }
  for (int h = n; h < VR_IL_MAX_HW; h++) opt[h] = -1;
  return 0;
#undef MODEL
}

int vr_il_sim_init_view(vr_il_sim *s, const vr_pipeline *p,
                        const vr_profile *prof, int (*opt)[VR_IL_MAX_HW],
                        vr_errbuf *err) {
  memset(s, 0, sizeof *s);
  if (p->ntasks > VR_IL_MAX_STAGES)
    return vr_errf(err, VR_ELIMIT, "inferline: %d tasks (at most %d)",
                   p->ntasks, VR_IL_MAX_STAGES);
  if (!(s->data.pipe = vr_pipeline_dup(p))) return VR_ENOMEM;
  int off[VR_PIPE_MAX_TASKS + 1] = {0}, rc = 0;
  for (int t = 0; t < p->ntasks; t++)
    off[t + 1] = off[t] + p->tasks[t].nvariants;
  for (int t = 0; !rc && t < p->ntasks; t++) {
    if (p->tasks[t].nvariants < 1)
      rc = vr_errf(err, VR_EINVAL, "inferline: task '%s' has no variants",
                   p->tasks[t].name);
    else rc = view_task(s, p, prof, off[t], t, opt[t], err);
  }
  if (!rc) {
    vr_pipe_data_index(&s->data);
    s->data.prof = VR_NEWN(vr_profile, s->data.off[p->ntasks]);
    if (!s->data.prof) rc = VR_ENOMEM;
  }
  for (int t = 0; !rc && t < p->ntasks; t++)
    for (int h = 0; h < s->data.pipe->tasks[t].nvariants; h++)
      s->data.prof[s->data.off[t] + h] = prof[off[t] + opt[t][h]];
  if (rc) {
    vr_il_sim_free(s);
    return rc;
  }
  setup_problem(s);
  return 0;
}

int vr_il_sim_arrivals(const vr_workload *w, double duration_s, uint64_t seed,
                       int64_t **t, size_t *n, vr_errbuf *err) {
  vr_workload c = *w;
  c.f = NULL;
  *t = NULL, *n = 0;
  int rc = vr_wl_open(&c, seed ^ 0x5eed, err); /* psim's rule */
  size_t cap = 0;
  vr_req r;
  while (!rc && (rc = vr_wl_next(&c, duration_s, &r, err)) == 1) {
    if (*n == cap) {
      cap = cap ? cap * 2 : 4096;
      int64_t *g = vr_realloc(*t, cap * sizeof **t);
      if (!g) {
        rc = VR_ENOMEM;
        break;
      }
      *t = g;
    }
    (*t)[(*n)++] = r.t_ns;
    rc = 0;
  }
  if (c.f) fclose(c.f);
  if (rc < 0) {
    vr_free(*t);
    *t = NULL, *n = 0;
    return rc;
  }
  return 0;
}

int vr_il_sim_sample(vr_il_sim *s, const vr_workload *w, double duration_s,
                     uint64_t seed, vr_errbuf *err) {
  vr_free(s->t);
  s->t = NULL;
  vr_il_sim_forget(s); /* its results are the old sample's */
  int rc = vr_il_sim_arrivals(w, duration_s, seed, &s->t, &s->n, err);
  if (rc) return rc;
  if (s->n < 2)
    return vr_errf(err, VR_EINVAL, "inferline: the sample trace has %zu "
                   "arrivals in %.0f s", s->n, duration_s);
  s->sample = w;
  s->sample_s = duration_s;
  s->seed = seed;
  s->pb.rate_qps = s->n / duration_s;
  return 0;
}

int vr_il_sim_plan(const vr_il_sim *s, const vr_il_config *cfg,
                   vr_pipe_plan *plan) {
  int rc = vr_pipe_plan_init(plan, s->data.pipe);
  if (rc) return rc;
  for (int t = 0; t < cfg->nstages; t++)
    vr_pipe_plan_set(plan, s->data.prof, t, cfg->st[t].hw,
                     cfg->st[t].replicas, cfg->st[t].batch);
  plan->feasible = 1;
  return 0;
}

static vr_psim_cfg psim_cfg(const vr_il_sim *s, vr_workload *wl, double dur,
                            uint64_t seed, int noise) {
  return (vr_psim_cfg){.data = &s->data, .arrivals = wl, .workers = 1,
                       .duration_s = dur, .tick_s = 1, .seed = seed,
                       .noise = noise, .max_queue = 4096,
                       .drop_mode = VR_EDROP_NONE, .ctl_period_s = 10,
                       .stage_rng = 1};
}

/* The estimator's engine for the sample: psim stage by stage (sim/
 * psim_stage.h), which keeps the stages a candidate does not change. */
static int stages_for(vr_il_sim *s, vr_errbuf *err) {
  if (s->stages && s->est_stages_noise == s->est_noise) return 0;
  vr_il_sim_forget(s);
  vr_psim_stages_cfg c = {.data = &s->data, .t = s->t, .n = s->n,
                          .duration_s = s->sample_s, .seed = s->seed,
                          .noise = s->est_noise, .max_queue = 4096};
  s->est_stages_noise = s->est_noise;
  return vr_psim_stages_new(&c, &s->stages, err);
}

int vr_il_sim_estimate(void *ctx, const vr_il_problem *pb,
                       const vr_il_config *cfg, double above_ms,
                       double *p99_ms) {
  (void)pb;
  vr_il_sim *s = ctx;
  if (!s->sample) return VR_ESTATE;
  double t0 = wall_s();
  vr_errbuf err;
  int rc = stages_for(s, &err);
  if (rc) return rc;
  vr_pipe_plan plan;
  if ((rc = vr_il_sim_plan(s, cfg, &plan))) return rc;
  /* The same run as vr_psim_run over the replayed sample with this plan
   * (psim_cfg above, one worker per replica). P99 (the latency at rank
   * floor(0.99 n)) is above above_ms as soon as n - floor(0.99 n)
   * queries took longer: stop there. Infeasible candidates, most of what
   * the planner tries, then cost a fraction of a run instead of
   * simulating queues that grow until psim gives up; so do batch raises
   * that cannot beat the best one found. */
  vr_psim_stages_result r;
  rc = vr_psim_stages_run(s->stages, &plan,
                          (int64_t)s->n - (int64_t)floor(0.99 * (double)s->n),
                          above_ms, &r, &err);
  vr_pipe_plan_free(&plan);
  if (rc) return rc;
  /* a drop, or a query still unfinished when psim would give up on
   * runaway queues, is a miss of unbounded latency */
  *p99_ms = r.stopped || r.dropped || r.unfinished ? INFINITY : r.p99_ms;
  s->est_stages_run += r.stages_run;
  s->est_stages_reused += r.stages_reused;
  s->est_wall_s += wall_s() - t0;
  return 0;
}

/* ---- evaluation: the policy through the pipeline-policy hook
 * (policy/pipe_policy.h, sim/psim_ctl.h), as live; this wrapper only
 * integrates the cost of the plans it returns ---- */

typedef struct eval_ctl {
  vr_psim_ctl ctl;
  vr_il_tick_cfg tc;   /* what configure() hands the policy */
  const vr_profile *prof;
  double last_s, cost, cost_int, max_cost;
} eval_ctl;

/* vr_il_pipe_arg.configure for the evaluation: the configuration planned
 * (and timed) before the run. */
static int preset(void *self, const vr_pipe_snap *s, int kind,
                  vr_il_tick_cfg *out, vr_errbuf *err) {
  (void)s, (void)kind, (void)err;
  *out = ((const eval_ctl *)self)->tc;
  return 0;
}

static double plan_cost(const vr_pipe_plan *p, const vr_profile *prof) {
  double c = 0;
  for (int i = 0; i < p->off[p->ntasks]; i++)
    c += p->a[i].inst * prof[i].cost_per_s;
  return c;
}

static int eval_replan(void *ctx, const vr_psim_view *v, vr_pipe_plan *plan,
                       vr_errbuf *err) {
  eval_ctl *k = ctx;
  k->cost_int += k->cost * (v->now_s - k->last_s);
  k->last_s = v->now_s;
  int rc = vr_psim_policy_replan(&k->ctl, v, plan, err);
  if (rc) return rc;
  k->cost = plan_cost(plan, k->prof);
  if (k->cost > k->max_cost) k->max_cost = k->cost;
  return 0;
}

static int initial_cfg(vr_il_sim *s, int policy, vr_il_result *out,
                       vr_errbuf *err) {
  double t0 = wall_s();
  int rc;
  if (policy == VR_ILP_INFERLINE || policy == VR_ILP_PLAN_ONLY) {
    rc = vr_il_plan(&s->pb, &out->cfg, &out->stats, err);
  } else {
    double target = s->pb.rate_qps;
    if (policy == VR_ILP_CG_PEAK || policy == VR_ILP_CG_PEAK_STATIC)
      target = vr_il_peak_qps(s->t, s->n, (int64_t)(s->pb.slo_ms * 1e6));
    rc = vr_il_coarse(&s->pb, target, &out->cfg, err);
  }
  out->plan_s = wall_s() - t0;
  return rc;
}

int vr_il_sim_tick_cfg(const vr_il_sim *s, int policy, const vr_il_config *cfg,
                       vr_il_tick_cfg *out, vr_errbuf *err) {
  memset(out, 0, sizeof *out);
  out->base = *cfg;
  out->mode = VR_ILT_STATIC;
  if (policy == VR_ILP_INFERLINE) {
    out->mode = VR_ILT_TUNER;
    int rc = vr_il_tuner_cfg(&s->pb, cfg, s->t, s->n, &out->tuner, err);
    if (rc) return rc;
  } else if (policy == VR_ILP_CG_PEAK || policy == VR_ILP_CG_MEAN) {
    out->mode = VR_ILT_AUTOSCALE;
    vr_il_autoscale_default(&out->as);
    out->as.pack = vr_il_autoscale_pack(&s->pb, cfg);
  }
  return vr_il_tick_validate(out, err);
}

int vr_il_sim_eval(vr_il_sim *s, int policy, const vr_workload *eval,
                   double duration_s, uint64_t seed, int noise, double load_s,
                   FILE *csv, vr_il_result *out, vr_errbuf *err) {
  memset(out, 0, sizeof *out);
  if (policy < 0 || policy >= VR_ILP__COUNT)
    return vr_errf(err, VR_EINVAL, "inferline: unknown policy %d", policy);
  if (!s->sample)
    return vr_errf(err, VR_ESTATE, "inferline: no sample trace");
  int rc = initial_cfg(s, policy, out, err);
  if (rc) return rc;
  eval_ctl k = {.prof = s->data.prof};
  rc = vr_il_sim_tick_cfg(s, policy, &out->cfg, &k.tc, err);
  if (rc) return rc;
  vr_workload wl = *eval;
  wl.f = NULL;
  vr_psim_cfg c = psim_cfg(s, &wl, duration_s, seed, noise);
  rc = vr_psim_policy(vr_il_policy_name(policy), &s->data, &k.ctl, &c, err);
  if (rc) return rc;
  vr_il_pipe_arg arg = {.configure = preset, .self = &k};
  k.ctl.arg = &arg;
  c.workers = 100000;
  c.load_s = load_s;
  c.warm_start = 1;
  c.tick_s = k.tc.mode != VR_ILT_STATIC ? 0.1 : 1;
  c.ctl_period_s = c.tick_s;
  c.ctl_change = 0;
  c.replan = eval_replan;
  c.replan_ctx = &k;
  vr_psim_summary sum;
  rc = vr_psim_run(&c, csv, &sum, err);
  if (!rc) {
    k.cost_int += k.cost * (duration_s - k.last_s);
    out->cost_per_s = k.cost_int / duration_s;
    out->max_cost_per_s = k.max_cost;
    /* late, dropped, or never finished (psim stops runaway queues) */
    out->miss_pct =
        sum.queries ? 100.0 * (double)(sum.queries - sum.ok) / sum.queries : 0;
    out->p99_ms = sum.p99_ms;
    out->queries = sum.queries;
    const vr_il_pipe *ip = k.ctl.ctx;
    if (ip) out->ups = ip->st.ups, out->downs = ip->st.downs;
    vr_psim_summary_free(&sum);
  }
  vr_psim_ctl_free(&k.ctl);
  return rc;
}

int vr_il_sim_configure(void *self, const vr_pipe_snap *s, int kind,
                        vr_il_tick_cfg *out, vr_errbuf *err) {
  const vr_il_live_opts *o = self;
  if (!o || !(o->rate_qps > 0))
    return vr_errf(err, VR_EINVAL, "inferline: the planner needs a sample "
                   "rate (--inferline-rate QPS)");
  if (kind < 0 || kind >= VR_ILP__COUNT)
    return vr_errf(err, VR_EINVAL, "inferline: unknown policy %d", kind);
  vr_il_sim sim;
  int opt[VR_PIPE_MAX_TASKS][VR_IL_MAX_HW];
  int rc = vr_il_sim_init_view(&sim, s->p, s->prof, opt, err);
  if (rc) return rc;
  vr_workload w = vr_wl_gamma(o->rate_qps, o->cv > 0 ? o->cv : 1);
  rc = vr_il_sim_sample(&sim, &w, o->sample_s > 0 ? o->sample_s : 60,
                        o->seed ? o->seed : 1, err);
  vr_il_result r;
  memset(&r, 0, sizeof r);
  if (!rc) rc = initial_cfg(&sim, kind, &r, err);
  if (!rc) rc = vr_il_sim_tick_cfg(&sim, kind, &r.cfg, out, err);
  int64_t minw = (int64_t)((o->min_window_ms > 0 ? o->min_window_ms : 10) * 1e6);
  if (!rc && out->mode == VR_ILT_TUNER && out->tuner.plan.win_ns[0] < minw &&
      (vr_envelope_windows(&out->tuner.plan, minw, VR_ENV_HORIZON_NS) ||
       vr_envelope_compute(&out->tuner.plan, sim.t, sim.n)))
    rc = vr_errf(err, VR_EINVAL, "inferline: envelope windows");
  /* no stage beyond its share of the pipeline's workers: more would only
   * be loads refused for want of room, retried every tick */
  int cap = s->workers / (out->base.nstages > 0 ? out->base.nstages : 1);
  for (int m = 0; m < out->base.nstages; m++)
    if (out->base.st[m].replicas > cap) cap = out->base.st[m].replicas;
  if (cap < 1) cap = 1;
  out->tuner.max_replicas = cap;
  out->as.max_units = cap;
  for (int m = 0; !rc && m < out->base.nstages; m++) {
    int h = out->base.st[m].hw;
    out->base.st[m].hw = opt[m][h];
  }
  vr_il_sim_free(&sim);
  return rc;
}
