/*
 * A watchdog for tests of code that could hang (a deadlock, a wait that
 * never ends): watchdog_arm(s, why) makes the process print "FAIL: why"
 * and exit 1 after s seconds, so the hang fails the test instead of
 * stalling the suite until ctest's timeout; watchdog_disarm() ends it.
 * One at a time (SIGALRM). Header-only, test code only.
 */
#ifndef VR_TEST_WATCHDOG_H
#define VR_TEST_WATCHDOG_H

#include <signal.h>
#include <string.h>
#include <unistd.h>

static const char *watchdog_why;

static void watchdog_fire(int sig) {
  (void)sig;
  /* async-signal-safe: write and _exit only */
  if (write(2, "FAIL: ", 6) < 0 || write(2, watchdog_why, strlen(watchdog_why)) < 0 ||
      write(2, "\n", 1) < 0)
    _exit(1);
  _exit(1);
}

static inline void watchdog_arm(unsigned seconds, const char *why) {
  watchdog_why = why;
  signal(SIGALRM, watchdog_fire);
  alarm(seconds);
}

static inline void watchdog_disarm(void) {
  alarm(0);
  signal(SIGALRM, SIG_DFL);
}

#endif
