/* Internals shared by registry.c and registry_sub.c. */
#ifndef VR_CLUSTER_REGISTRY_INT_H
#define VR_CLUSTER_REGISTRY_INT_H

#include "cluster/redis.h"

#include "cluster/registry.h"

#define VR_REG_PREFIX "vario:"

/* An instance record as stored (JSON; free() it: jansson's allocation),
 * and back: 0, or -1 for anything malformed (v zeroed). Other processes
 * write these records: the parser is fuzzed (fuzz_reginst). */
char *vr__reg_inst_json(const vr_instance_info *v);
int vr__reg_inst_parse(const char *id, const char *text, size_t len, vr_instance_info *v);

/* Integer in [lo, hi] from a string reply; -1 otherwise. */
int vr__reg_get_i64(const redisReply *e, int64_t lo, int64_t hi, int64_t *out);
/* Every routing table as name, version, body triples (one script). */
redisReply *vr__reg_all_routes(vr_redis *r, vr_errbuf *err);

#endif
