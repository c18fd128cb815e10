/*
 * Test helper: a private redis-server on a free loopback port, in a
 * temporary directory, with persistence off, stopped (and its directory
 * removed) by vr_test_redis_stop. Tests that need Redis exit 77 (ctest's
 * SKIP_RETURN_CODE) only when redis-server is not installed at all;
 * scripts/setup-deps.sh check installs it, so CI runs them.
 */
#ifndef VR_TEST_REDIS_UTIL_H
#define VR_TEST_REDIS_UTIL_H

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct vr_test_redis {
  pid_t pid;
  int port;
  char dir[64];
  char url[64]; /* redis://127.0.0.1:<port> (db 0) */
} vr_test_redis;

/* 1 when an executable redis-server is on PATH. */
static int vr_test_redis_installed(void) {
  const char *path = getenv("PATH");
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path ? path : "/usr/bin:/bin");
  for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    char exe[4200];
    snprintf(exe, sizeof exe, "%s/redis-server", d);
    if (access(exe, X_OK) == 0) return 1;
  }
  return 0;
}

static int vr_test_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

/* Runs one command on a fresh connection; 0 when Redis answered +OK/PONG. */
static int vr_test_redis_simple(int port, const char *cmd) {
  struct timeval tv = {0, 200000};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  int ok = -1;
  if (c && !c->err) {
    redisReply *r = redisCommand(c, cmd);
    if (r && r->type != REDIS_REPLY_ERROR) ok = 0;
    if (r) freeReplyObject(r);
  }
  if (c) redisFree(c);
  return ok;
}

/* Starts redis-server on t->port (chosen when 0). 0 on success. */
static int vr_test_redis_spawn(vr_test_redis *t) {
  if (!t->port) t->port = vr_test_free_port();
  if (t->port <= 0) return -1;
  if (!t->dir[0]) {
    snprintf(t->dir, sizeof t->dir, "/tmp/vr_redis_XXXXXX");
    if (!mkdtemp(t->dir)) return -1;
  }
  snprintf(t->url, sizeof t->url, "redis://127.0.0.1:%d", t->port);
  char port[16], log[128];
  snprintf(port, sizeof port, "%d", t->port);
  snprintf(log, sizeof log, "%s/redis.log", t->dir);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
           "--appendonly", "no", "--dir", t->dir, "--daemonize", "no", (char *)NULL);
    _exit(127);
  }
  t->pid = pid;
  for (int i = 0; i < 500; i++) { /* up to 5 s */
    if (vr_test_redis_simple(t->port, "PING") == 0) return 0;
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      t->pid = 0;
      fprintf(stderr, "redis-server exited; see %s\n", log);
      return -1;
    }
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  return -1;
}

/* Stops the server (SIGKILL: a crash as far as clients can tell; the
 * directory stays for a restart). */
static void vr_test_redis_kill(vr_test_redis *t) {
  if (t->pid > 0) {
    kill(t->pid, SIGKILL);
    waitpid(t->pid, NULL, 0);
  }
  t->pid = 0;
}

/* 0: running; 77: redis-server not installed; -1: it would not start. */
static int vr_test_redis_start(vr_test_redis *t) {
  memset(t, 0, sizeof *t);
  if (!vr_test_redis_installed()) return 77;
  return vr_test_redis_spawn(t);
}

static void vr_test_redis_stop(vr_test_redis *t);

/* vr_test_redis_start for a test's main(), saying why on stderr: 0
 * running; 77 (ctest's skip code) when redis-server is not installed; 1
 * when it would not start. */
static int vr_test_redis_start_main(vr_test_redis *t) {
  int rc = vr_test_redis_start(t);
  if (rc == 77) {
    fprintf(stderr, "redis-server is not installed (scripts/setup-deps.sh check): skipped\n");
    return 77;
  }
  if (rc) {
    fprintf(stderr, "cannot start redis-server\n");
    vr_test_redis_stop(t);
    return 1;
  }
  return 0;
}

static void vr_test_redis_stop(vr_test_redis *t) {
  vr_test_redis_kill(t);
  if (!t->dir[0]) return;
  DIR *d = opendir(t->dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char p[512];
      snprintf(p, sizeof p, "%s/%s", t->dir, e->d_name);
      unlink(p);
    }
    closedir(d);
  }
  rmdir(t->dir);
  t->dir[0] = 0;
}

/* ---- a loopback TCP proxy that can lose one reply ------------------------
 * vr_test_proxy_arm makes it forward the next command to Redis, wait for
 * Redis's reply and then close the client's connection instead of passing
 * the reply on: the client cannot tell whether its command ran, which is
 * what a Redis crash or a network cut right after a write looks like. */
typedef struct vr_test_proxy {
  int lfd, port, target_port;
  pthread_t th;
  int armed; /* atomic: lose the next reply */
  int drops; /* atomic: replies lost so far */
  int stop;  /* atomic */
  char url[64];
} vr_test_proxy;

static int vr__proxy_pump(int from, int to) {
  char buf[65536];
  ssize_t n = read(from, buf, sizeof buf);
  if (n <= 0) return -1;
  for (ssize_t off = 0; off < n;) {
    ssize_t w = write(to, buf + off, (size_t)(n - off));
    if (w <= 0) return -1;
    off += w;
  }
  return 0;
}

static void *vr__proxy_main(void *arg) {
  vr_test_proxy *p = arg;
  while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
    struct pollfd lp = {.fd = p->lfd, .events = POLLIN};
    if (poll(&lp, 1, 50) <= 0) continue;
    int c = accept(p->lfd, NULL, NULL);
    if (c < 0) continue;
    int r = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->target_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (r < 0 || connect(r, (struct sockaddr *)&a, sizeof a)) {
      close(c);
      if (r >= 0) close(r);
      continue;
    }
    int sent_armed = 0;
    while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
      struct pollfd f[2] = {{.fd = c, .events = POLLIN}, {.fd = r, .events = POLLIN}};
      if (poll(f, 2, 50) <= 0) continue;
      if (f[0].revents) {
        if (__atomic_load_n(&p->armed, __ATOMIC_ACQUIRE)) sent_armed = 1;
        if (vr__proxy_pump(c, r)) break;
      }
      if (f[1].revents) {
        if (sent_armed) { /* Redis answered: lose the answer */
          __atomic_store_n(&p->armed, 0, __ATOMIC_RELEASE);
          __atomic_add_fetch(&p->drops, 1, __ATOMIC_ACQ_REL);
          break;
        }
        if (vr__proxy_pump(r, c)) break;
      }
    }
    close(c);
    close(r);
  }
  return NULL;
}

static int vr_test_proxy_start(vr_test_proxy *p, int target_port) {
  memset(p, 0, sizeof *p);
  p->target_port = target_port;
  p->lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&a, sizeof a) || listen(p->lfd, 4) ||
      getsockname(p->lfd, (struct sockaddr *)&a, &len))
    return -1;
  p->port = ntohs(a.sin_port);
  snprintf(p->url, sizeof p->url, "redis://127.0.0.1:%d", p->port);
  return pthread_create(&p->th, NULL, vr__proxy_main, p) ? -1 : 0;
}

static void vr_test_proxy_arm(vr_test_proxy *p) {
  __atomic_store_n(&p->armed, 1, __ATOMIC_RELEASE);
}

static int vr_test_proxy_drops(vr_test_proxy *p) {
  return __atomic_load_n(&p->drops, __ATOMIC_ACQUIRE);
}

static void vr_test_proxy_stop(vr_test_proxy *p) {
  __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
  pthread_join(p->th, NULL);
  close(p->lfd);
}

#endif
