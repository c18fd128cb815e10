/*
 * What /proc/PID/stat says of a process: its state letter and its start
 * time, which with the pid names one process (pids are reused).
 */
#ifndef VR_BASE_PROC_H
#define VR_BASE_PROC_H

/* 0 and *state ('R', 'S', ..., 'Z' a zombie, 'X' dead) and *start (clock
 * ticks after boot; either may be NULL), or -1: no such process, or
 * /proc unreadable. */
int vr_proc_stat(long pid, char *state, unsigned long long *start);

#endif
