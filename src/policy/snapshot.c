#include "policy/snapshot.h"

void vr_actions_init(vr_actions *a) { vr_vec_init(a, sizeof(vr_action)); }
void vr_actions_free(vr_actions *a) { vr_vec_free(a); }

int vr_actions_push(vr_actions *a, int kind, int variant, int64_t instance,
                    int worker, int wtype, int value, const char *why) {
  vr_action x = {kind, variant, instance, worker, wtype, value, why};
  return vr_vec_push(a, &x);
}

const char *vr_vstate_name(int s) {
  static const char *n[] = {"inactive", "active", "overloaded", "interfered"};
  return s >= 0 && s < VR_VS__COUNT ? n[s] : "?";
}

const char *vr_istate_name(int s) {
  static const char *n[] = {"loading", "active", "overloaded", "interfered",
                            "draining"};
  return s >= 0 && s < VR_IS__COUNT ? n[s] : "?";
}

const char *vr_action_name(int kind) {
  switch (kind) {
  case VR_ACT_LOAD: return "load";
  case VR_ACT_UNLOAD: return "unload";
  case VR_ACT_SET_BATCH: return "set_batch";
  case VR_ACT_ADD_WORKER: return "add_worker";
  case VR_ACT_REMOVE_WORKER: return "remove_worker";
  case VR_ACT_SET_VSTATE: return "set_vstate";
  case VR_ACT_SET_ISTATE: return "set_istate";
  case VR_ACT_MIGRATE: return "migrate";
  case VR_ACT_PAIR_SHADOW: return "pair_shadow";
  case VR_ACT_UNPAIR_SHADOW: return "unpair_shadow";
  case VR_ACT_SET_ROUTES: return "set_routes";
  }
  return "?";
}
