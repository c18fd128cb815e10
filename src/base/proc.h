/*
 * What /proc/PID/stat says of a process: its state letter and its start
 * time, which with the pid names one process (pids are reused).
 */
#ifndef VR_BASE_PROC_H
#define VR_BASE_PROC_H

#include <stddef.h>

/* 0 and *state ('R', 'S', ..., 'Z' a zombie, 'X' dead) and *start (clock
 * ticks after boot; either may be NULL), or -1: no such process, or
 * /proc unreadable. */
int vr_proc_stat(long pid, char *state, unsigned long long *start);

/* The vario executable to start this program's helpers with (`vario
 * shadow`, `vario worker`): $VARIO_EXE when set and not empty (a wrapper
 * that runs vario through a carried loader, where /proc/self/exe is the
 * loader: bench/asyfunc_device_pack.sh), else /proc/self/exe. 0, or -1
 * when it does not fit in cap or /proc is unreadable. */
int vr_proc_self_exe(char *buf, size_t cap);

/* The executable to start an AsyFunc shadow process with:
 * $VARIO_SHADOW_EXE when set and not empty; else `vario-shadow` beside
 * the vario executable (vr_proc_self_exe) when it is there and
 * executable, which starts in about a millisecond where `vario` takes
 * tens (cli/shadow/main.c); else the vario executable itself. Both take
 * the same argv (`EXE shadow --fd ...`). 0, or -1 as vr_proc_self_exe. */
int vr_proc_shadow_exe(char *buf, size_t cap);

#endif
