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

#endif
