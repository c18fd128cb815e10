/*
 * Threads nobody joins: a job that answers for itself (a model load, a
 * registration) runs on one, and its memory is the job's to free.
 */
#ifndef VR_BASE_THREAD_H
#define VR_BASE_THREAD_H

/* Starts fn(arg) on a detached thread. 0, or the pthread_create error
 * (then fn never runs and arg is still the caller's). */
int vr_thread_detached(void *(*fn)(void *), void *arg);

#endif
