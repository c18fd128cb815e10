/*
 * Loopback HTTPS server replaying a recorded conversation (k8s_conv.h) in
 * order, checking every request against the recording.
 *
 * Ownership: the server borrows conv and the PEM strings until
 * vr_kr_stop; vr_kr_error's string belongs to the server.
 */
#ifndef VR_TEST_K8S_REPLAY_H
#define VR_TEST_K8S_REPLAY_H

#include <stddef.h>

#include "k8s_conv.h"

typedef struct vr_kr_server vr_kr_server;

/* Listens on 127.0.0.1, a free port (written to *port). NULL when
 * libmicrohttpd has no TLS or the key/certificate is bad. */
vr_kr_server *vr_kr_start(const vr_kc_conv *conv, const char *cert_pem,
                          const char *key_pem, int *port);
/* Exchanges matched so far. */
size_t vr_kr_consumed(vr_kr_server *s);
/* The first mismatch, or NULL. */
const char *vr_kr_error(vr_kr_server *s);
void vr_kr_stop(vr_kr_server *s);

#endif
