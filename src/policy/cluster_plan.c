/* Cluster placement (cluster_plan.h). */
#include "policy/cluster_plan.h"

#include "vario/status.h"

int vr_cluster_plan(const vr_cplan_in *in, vr_cplan_out *out) {
  out->n_loads = 0;
  out->add_workers = 0;
  if (in->n_workers < 0 || in->n_models < 0 || in->replicas < 0 || in->starting < 0 ||
      in->min_workers < 0 || in->max_workers < 0 ||
      (in->n_workers && in->n_models && !in->has))
    return VR_EINVAL;
  int nw = in->n_workers;
  /* models held per worker, counting loads decided in this call */
  int count[nw > 0 ? nw : 1];
  for (int w = 0; w < nw; w++) {
    count[w] = 0;
    for (int m = 0; m < in->n_models; m++) count[w] += in->has[m * nw + w] != 0;
  }
  for (int m = 0; m < in->n_models; m++) {
    const unsigned char *h = in->has + m * nw;
    int held = 0;
    for (int w = 0; w < nw; w++) held += h[w] != 0;
    int want = in->replicas == 0 || in->replicas > nw ? nw : in->replicas;
    char taken[nw > 0 ? nw : 1];
    for (int w = 0; w < nw; w++) taken[w] = h[w] != 0;
    while (held < want) {
      int best = -1;
      for (int w = 0; w < nw; w++)
        if (!taken[w] && (best < 0 || count[w] < count[best])) best = w;
      if (best < 0) break;
      taken[best] = 1;
      count[best]++;
      held++;
      out->load_model[out->n_loads] = m;
      out->load_worker[out->n_loads] = best;
      out->n_loads++;
    }
  }
  int have = nw + in->starting;
  int target = in->min_workers;
  if (in->max_workers > 0 && target > in->max_workers) target = in->max_workers;
  if (have < target) out->add_workers = target - have;
  return 0;
}

int vr_cluster_pick_worker(int n, const int *free_cores, const unsigned char *holds,
                           const int *mine, int need) {
  int best = -1;
  for (int w = 0; w < n; w++) {
    if (free_cores[w] < need || holds[w]) continue;
    if (best < 0 || mine[w] < mine[best] ||
        (mine[w] == mine[best] && free_cores[w] > free_cores[best]))
      best = w;
  }
  return best;
}
