/*
 * Minimal keep-alive "hello" server on libmicrohttpd. Mode "epoll": one
 * internal epoll thread; mode "pool": an epoll thread pool of N threads.
 * Used only to compare HTTP front-end libraries (see run.sh).
 * Usage: hello_mhd PORT [threads]
 */
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static enum MHD_Result on_req(void *cls, struct MHD_Connection *c,
                              const char *url, const char *method,
                              const char *version, const char *upload,
                              size_t *upload_size, void **con_cls) {
  (void)cls; (void)url; (void)method; (void)version; (void)upload;
  static int marker;
  if (*con_cls == NULL) { /* first call: headers only */
    *con_cls = &marker;
    return MHD_YES;
  }
  if (*upload_size) { *upload_size = 0; return MHD_YES; }
  static const char body[] = "{\"hello\":\"world\"}";
  struct MHD_Response *r = MHD_create_response_from_buffer(
      sizeof body - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
  MHD_add_response_header(r, "Content-Type", "application/json");
  enum MHD_Result ret = MHD_queue_response(c, 200, r);
  MHD_destroy_response(r);
  return ret;
}

int main(int argc, char **argv) {
  int port = argc > 1 ? atoi(argv[1]) : 8802;
  unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_TURBO;
  struct MHD_Daemon *d;
  if (threads > 1)
    d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_req, NULL,
                         MHD_OPTION_THREAD_POOL_SIZE, threads,
                         MHD_OPTION_CONNECTION_LIMIT, 1024, MHD_OPTION_END);
  else
    d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_req, NULL,
                         MHD_OPTION_CONNECTION_LIMIT, 1024, MHD_OPTION_END);
  if (!d) { fprintf(stderr, "MHD_start_daemon failed\n"); return 1; }
  pause();
  MHD_stop_daemon(d);
  return 0;
}
