#!/usr/bin/python3
"""A 405 names what its path takes (RFC 9110 15.5.6: Allow is required of
it) on Vario's own routes too: /v2/apps, /v2/jobs and /v2/pipelines of a
server with a control plane, which answered 405 with no Allow; a path
that does not exist is 404 whatever the method. The KServe v2 / Triton
routes are checked in test_server.c (test_health_and_metadata).

usage: http_allow.py VARIO SOURCE_DIR
"""
import http.client
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vr_http  # noqa: E402

VARIO = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="vr_allow_")
REPO = os.path.join(TMP, "repo")
os.makedirs(REPO)
proc = None

# method, path, the status, the Allow it must carry (None: no 405)
CASES = [
    ("PUT", "/v2/apps", 405, "GET, HEAD"),
    ("POST", "/v2/apps/a", 405, "GET, HEAD"),
    ("GET", "/v2/apps/a/infer", 405, "POST"),
    ("GET", "/v2/apps/a/models", 405, "POST"),
    ("GET", "/v2/apps/a/jobs", 405, "POST"),
    ("GET", "/v2/apps/a/models/m", 405, "DELETE"),
    ("GET", "/v2/jobs", 405, "POST"),
    ("POST", "/v2/jobs/j1", 405, "GET, HEAD"),
    ("PUT", "/v2/pipelines", 405, "GET, HEAD, POST"),
    ("PUT", "/v2/pipelines/p", 405, "GET, HEAD, DELETE"),
    ("GET", "/v2/pipelines/p/infer", 405, "POST"),
    ("PUT", "/v2/apps/a/bogus", 404, None),
    ("POST", "/v2/jobs/j1/bogus", 404, None),
    ("PUT", "/v2/bogus", 404, None),
]


def ask(port, method, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request(method, path)
        r = c.getresponse()
        r.read()
        return r.status, r.getheader("Allow")
    finally:
        c.close()


try:
    proc, port = vr_http.start_server([VARIO, "serve", "--repo", REPO, "--store",
                                       os.path.join(TMP, "store.db"), "--port", "0",
                                       "--grpc-port", "-1", "--insecure-admin"],
                                      os.path.join(TMP, "serve.log"))
    for _ in range(400):
        if ask(port, "GET", "/v2/health/ready")[0] == 200:
            break
        time.sleep(0.05)
    bad = []
    for method, path, want, allow in CASES:
        st, got = ask(port, method, path)
        if st != want or (allow is not None and got != allow):
            bad.append(f"{method} {path}: {st} Allow {got!r}, want {want} {allow!r}")
        else:
            print(f"ok: {method} {path}: {st} {got or ''}")
    if bad:
        print("FAIL:\n  " + "\n  ".join(bad))
        print(open(os.path.join(TMP, "serve.log")).read()[-2000:])
        sys.exit(1)
    print(f"ok: {len(CASES)} answers")
finally:
    if proc:
        proc.terminate()
        proc.wait(timeout=30)
    shutil.rmtree(TMP, ignore_errors=True)
