/*
 * Minimal keep-alive "hello" server on libevent's evhttp, one event-loop
 * thread. Used only to compare HTTP front-end libraries (see run.sh).
 * Usage: hello_libevent PORT
 */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>

static void on_req(struct evhttp_request *req, void *arg) {
  (void)arg;
  struct evbuffer *b = evhttp_request_get_output_buffer(req);
  evbuffer_add(b, "{\"hello\":\"world\"}", 17);
  evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                    "application/json");
  evhttp_send_reply(req, 200, "OK", NULL);
}

int main(int argc, char **argv) {
  int port = argc > 1 ? atoi(argv[1]) : 8801;
  struct event_base *base = event_base_new();
  struct evhttp *http = evhttp_new(base);
  evhttp_set_gencb(http, on_req, NULL);
  if (evhttp_bind_socket(http, "127.0.0.1", (unsigned short)port) != 0) {
    fprintf(stderr, "bind failed\n");
    return 1;
  }
  event_base_dispatch(base);
  return 0;
}
