/*
 * The forwarder's internals (fwd.h), shared by fwd.c (connections, the I/O
 * thread, sending and retrying) and fwd_routes.c (the routing table in
 * force and the choice of a worker for a call). Everything here is under
 * the forwarder's mu unless a comment says otherwise.
 */
#ifndef VR_SERVER_FWD_INT_H
#define VR_SERVER_FWD_INT_H

#include <pthread.h>
#include <stdint.h>

#include "server/fwd.h"

typedef struct fworker fworker;
typedef struct conn conn;

/* A worker ever named by a table. Kept until vr_fwd_free (a connection
 * under way may point at it after a table drops it); a worker that comes
 * back under the same id is reused. */
struct fworker {
  vr_fwd_worker w;
  int in_table;          /* in the current table */
  int64_t down_until;    /* ns; skipped until then */
  unsigned gen;          /* bumped when a table moves it to a new address */
  long outstanding;      /* requests sent and not answered */
  conn **idle;
  int n_idle;
  int open;              /* connections open to it, busy or idle */
  vr_fwd_call *wq, *wq_tail; /* calls waiting for one (max_conns) */
  fworker *next;
};

/* One connection; owned by the sender until it arms it in epoll, then by
 * the I/O thread until it is idle again. */
struct conn {
  int fd;
  fworker *w;
  unsigned gen;          /* w->gen when it connected: the address it leads to */
  vr_fwd_call *call;
  char head[1024];
  char *head_big;        /* when extra headers do not fit head[] */
  size_t head_len, sent; /* bytes of head + body sent */
  char *buf;             /* response */
  size_t cap, len;
  int reused;            /* came from the idle pool */
  int timed_out;
  conn *prev, *next;     /* busy list (under mu) */
};

struct vr_fwd {
  vr_fwd_opts o;
  pthread_mutex_t mu;
  fworker *workers;      /* every worker seen */
  vr_fwd_table t;        /* current table; route entries index t.workers */
  fworker **tw;          /* t.workers[i] -> its fworker */
  unsigned rr;
  conn *busy;
  vr_fwd_call *ready, *ready_tail; /* waiters to send again (I/O thread) */
  int ep, evfd, stop;
  pthread_t io;
  vr_fwd_stats st;
};

/* fwd.c: closes and frees a connection (not under mu). */
void vr__fwd_conn_free(conn *c);
/* fwd.c, under mu: n of x's waiting calls (all when n < 0) go to the
 * ready list, which the I/O thread sends again. -> how many. */
int vr__fwd_wq_release(vr_fwd *f, fworker *x, int n);
/* fwd.c: wakes the I/O thread to send the ready list (not under mu). */
void vr__fwd_wake_io(vr_fwd *f);
/* fwd_routes.c, under mu: the table index of the worker c goes to next
 * for key (exact key, else "<kind>:*", else "*"; "w:<id>" that worker
 * alone): the lightest not tried by c and not down at now, or -1.
 * *any_in_route: whether the key has any worker at all. */
int vr__fwd_pick(vr_fwd *f, const char *key, const vr_fwd_call *c, int64_t now,
                 int *any_in_route);

#endif
