/*
 * A stand-in for `vario worker` in the provider tests: a real process that
 * accepts the local provider's command line, records what it was given
 * (argv, environment, CPU affinity, open descriptors) in OUT/ID.info and
 * then behaves as told: wait for SIGTERM and exit 0 (default), ignore
 * SIGTERM (--ignore-term), or exit by itself (--exit-after-ms N
 * --exit-code C). It prints to stdout/stderr so that log capture can be
 * checked.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t got_term;
static void on_term(int sig) { (void)sig; got_term = 1; }

int main(int argc, char **argv) {
  const char *id = NULL, *out = NULL;
  int ignore_term = 0, exit_after = -1, exit_code = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--worker-id") && i + 1 < argc) id = argv[++i];
    else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "--ignore-term")) ignore_term = 1;
    else if (!strcmp(argv[i], "--exit-after-ms") && i + 1 < argc)
      exit_after = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--exit-code") && i + 1 < argc)
      exit_code = atoi(argv[++i]);
  }
  if (!id || !out) {
    fprintf(stderr, "worker_probe: need --worker-id and --out\n");
    return 2;
  }
  /* before the info file says it runs: a test that reads it may stop it
   * at once, and a SIGTERM before the handler killed it (exit -1) */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = ignore_term ? SIG_IGN : on_term;
  sigaction(SIGTERM, &sa, NULL);
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/%s.info", out, id);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return 3;
  fprintf(f, "pid=%d\n", (int)getpid());
  fprintf(f, "pgid=%d\n", (int)getpgid(0));
  cpu_set_t set;
  sched_getaffinity(0, sizeof set, &set);
  fprintf(f, "affinity=");
  for (int c = 0, first = 1; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) {
      fprintf(f, first ? "%d" : ",%d", c);
      first = 0;
    }
  fprintf(f, "\nargv=");
  for (int i = 1; i < argc; i++) fprintf(f, i > 1 ? " %s" : "%s", argv[i]);
  const char *ev[] = {"VARIO_WORKER_ID", "VARIO_CONTROLLER",
                      "VARIO_WORKER_CORES", "VARIO_WORKER_MEM_BYTES"};
  for (size_t i = 0; i < sizeof ev / sizeof *ev; i++)
    fprintf(f, "\n%s=%s", ev[i], getenv(ev[i]) ? getenv(ev[i]) : "");
  /* Descriptors other than 0..2 (and the one opendir uses) must not have
   * leaked from the provider's process. */
  fprintf(f, "\nfds=");
  DIR *d = opendir("/proc/self/fd");
  int dfd = d ? dirfd(d) : -1, first = 1;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] == '.' || fd <= 2 || fd == dfd || fd == fileno(f))
      continue;
    char lp[64], tgt[256];
    snprintf(lp, sizeof lp, "/proc/self/fd/%d", fd);
    ssize_t tl = readlink(lp, tgt, sizeof tgt - 1);
    tgt[tl > 0 ? tl : 0] = 0;
    fprintf(f, first ? "%d:%s" : ",%d:%s", fd, tgt);
    first = 0;
  }
  if (d) closedir(d);
  fprintf(f, "\n");
  fclose(f);
  rename(tmp, path);
  printf("probe %s started\n", id);
  fprintf(stderr, "probe %s stderr line\n", id);
  fflush(stdout);

  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    if (got_term) {
      printf("probe %s got SIGTERM\n", id);
      return 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (now.tv_sec - t0.tv_sec) * 1000 +
              (now.tv_nsec - t0.tv_nsec) / 1000000;
    if (exit_after >= 0 && ms >= exit_after) return exit_code;
    if (ms > 120000) return 4; /* never outlive a broken test by much */
    struct timespec ts = {0, 5 * 1000000};
    nanosleep(&ts, NULL);
  }
}
