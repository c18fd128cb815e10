/*
 * How many CPUs this process may use: the CPUs of its affinity mask (a
 * cpuset, `taskset`, Kubernetes' static CPU manager), capped by a cgroup
 * v2 CPU quota (`cpu.max`: a container's CPU limit) rounded up. Not the
 * machine's online count, which inside a container is the node's.
 */
#ifndef VR_BASE_CPUS_H
#define VR_BASE_CPUS_H

/* >= 1. cgroup_dir: the cgroup v2 directory to read cpu.max from (NULL:
 * /sys/fs/cgroup, the container's own under a cgroup namespace). */
int vr_cpus_usable(const char *cgroup_dir);

#endif
