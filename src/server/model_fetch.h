/*
 * Models travel to cluster workers without a shared filesystem (issue 18):
 * the controller serves its repository's model directories over HTTP and
 * a worker that is told to load a model it does not have fetches the
 * directory first.
 *
 *   GET /v2/cluster/models/{m}/files          {"model":m,"files":[{"path":
 *                                             "config.json","size":N},...]}
 *   GET /v2/cluster/models/{m}/files/{path}   the file's bytes
 *
 * Paths are relative, made of [A-Za-z0-9_.-] segments that do not start
 * with '.', at most 4 deep; both sides check that, so neither can be led
 * outside the repository. The fetch writes into <repo>/.fetch-<m>-<pid>/
 * and renames it to <repo>/<m> when every file arrived, so a worker never
 * sees half a model.
 */
#ifndef VR_SERVER_MODEL_FETCH_H
#define VR_SERVER_MODEL_FETCH_H

#include "server/http.h"
#include "vario/status.h"

/* Answers r for GET /v2/cluster/models/{name}/files[/{path}] (path NULL
 * = the listing) from repo (event thread; files are read whole). */
void vr_model_files_reply(vr_http_req *r, const char *repo, const char *name,
                          const char *path);

/* Fetches model `name` from the controller at host:port (token: bearer
 * token or NULL) into <repo>/<name>. VR_EEXIST when it is already there
 * (not an error for callers that only need it present). */
int vr_model_fetch(const char *host, int port, const char *token, const char *repo,
                   const char *name, vr_errbuf *err);

/* 1 when p is an acceptable relative path (see above). */
int vr_model_path_ok(const char *p);

#endif
