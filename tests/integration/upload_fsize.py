#!/usr/bin/python3
"""`vario serve` under a file size limit (ulimit -f, systemd's LimitFSIZE):
an upload larger than the limit is answered with an error that names the
reason, and the server stays up. SIGXFSZ's default action killed it on
the write.

usage: upload_fsize.py VARIO SOURCE_DIR
"""
import os
import resource
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vr_http  # noqa: E402

VARIO = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="vr_fsize_")
DB, REPO = os.path.join(TMP, "store.db"), os.path.join(TMP, "repo")
os.makedirs(REPO)
LIMIT = 1 << 20
proc = None


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        if proc:
            proc.kill()
            print(open(os.path.join(TMP, "serve.log")).read()[-3000:])
        sys.exit(1)
    print("ok:", what)


try:
    # the server inherits the limit (this script writes nothing near it)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    proc, port = vr_http.start_server([VARIO, "serve", "--repo", REPO, "--store", DB,
                                       "--port", "0", "--grpc-port", "-1", "--insecure-admin"],
                                      os.path.join(TMP, "serve.log"))
    try:
        st, b = vr_http.request(port, "POST", "/v2/apps/x/models?name=big&declared_accuracy=50",
                                raw=b"\0" * (2 * LIMIT), ctype="application/octet-stream")
    except OSError as e:
        st, b = 0, {"error": str(e)}
    check(st == 500 and "File too large" in b.get("error", ""),
          f"an upload past the file size limit: {st} {b}")
    check(proc.poll() is None and vr_http.request(port, "GET", "/v2/health/live")[0] == 200,
          "the server is still up")
    proc.terminate()
    check(proc.wait(timeout=30) == 0, "the server drains and exits 0")
    proc = None
finally:
    if proc:
        proc.kill()
    shutil.rmtree(TMP, ignore_errors=True)
