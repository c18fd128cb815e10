/* libFuzzer harness for the kubernetes provider's readers of API answers:
 * autoscaling/v1 Scale, core/v1 PodList and meta/v1 Status (k8s_json.c).
 * Checks what the provider relies on when a parse succeeds. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "cluster/provider_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *b = (const char *)data;
  vr_errbuf err;
  vr__k8s_scale s;
  if (vr__k8s_parse_scale(b, size, &s, &err) == 0) {
    if (s.replicas < 0 || !s.resource_version[0]) abort();
    if (strlen(s.resource_version) >= sizeof s.resource_version) abort();
  }
  vr_worker_info *ws = NULL;
  size_t n = 0;
  if (vr__k8s_parse_pods(b, size, &ws, &n, &err) == 0) {
    for (size_t i = 0; i < n; i++) {
      if (!ws[i].id[0] || strlen(ws[i].id) >= sizeof ws[i].id) abort();
      if (ws[i].state < VR_PW_STARTING || ws[i].state > VR_PW_EXITED) abort();
      if (ws[i].since_ns < 0) abort();
    }
    if ((n == 0) != (ws == NULL)) abort();
  }
  vr_free(ws);
  char msg[128];
  vr__k8s_status_msg(b, size, msg, sizeof msg);
  if (strlen(msg) >= sizeof msg) abort();
  return 0;
}
