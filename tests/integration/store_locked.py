#!/usr/bin/python3
"""A store another process holds locked (SQLite BEGIN EXCLUSIVE) must not
stall the server: requests naming pipelines it does not serve read the
store (another server may have registered them), and each such read waits
up to the store's busy timeout (2 s), and a pipeline's registration or
deletion writes it. Those ran on the HTTP event thread, so health probes
and every other connection waited behind them. Now: the probes answer at
once, the lookups answer explicitly (404), a deletion 503 (the store is
locked), and the server serves again once the lock is gone. A server
started on a locked store is not ready, and answers 503 "starting" (not
404 "no control plane") until its control plane is attached.

usage: store_locked.py VARIO SOURCE_DIR
"""
import http.client
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vr_http  # noqa: E402

VARIO = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="vr_lock_")
DB, REPO = os.path.join(TMP, "store.db"), os.path.join(TMP, "repo")
os.makedirs(REPO)
proc = None


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        if proc:
            proc.kill()
            print(open(os.path.join(TMP, "serve.log")).read()[-3000:])
        sys.exit(1)
    print("ok:", what)


def ready_status(port):
    """GET /v2/health/ready's status (its 400 has no body to parse)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("GET", "/v2/health/ready")
        return c.getresponse().status
    finally:
        c.close()


BODY = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [0]}]}
try:
    proc, port = vr_http.start_server([VARIO, "serve", "--repo", REPO, "--store", DB,
                                       "--port", "0", "--grpc-port", "-1",
                                       "--insecure-admin"],
                                      os.path.join(TMP, "serve.log"))
    for _ in range(200):
        try:
            if vr_http.request(port, "GET", "/v2/health/live")[0] == 200:
                break
        except OSError:
            pass
        time.sleep(0.05)
    lock = sqlite3.connect(DB, isolation_level=None, timeout=10)
    lock.execute("BEGIN EXCLUSIVE")
    answers = []

    def lookup(i):
        path = f"/v2/pipelines/nope{i}" + ("/infer" if i % 2 else "")
        answers.append(vr_http.request(port, "POST" if i % 2 else "GET", path,
                                       BODY if i % 2 else None)[0])

    # Three lookups, 150 ms apart (past the pipes' ten-a-second limit on
    # store reads), then a probe while they wait on the lock.
    ths = []
    for i in range(3):
        ths.append(threading.Thread(target=lookup, args=(i,)))
        ths[-1].start()
        time.sleep(0.15)
    t0 = time.time()
    st, _ = vr_http.request(port, "GET", "/v2/health/live")
    took = time.time() - t0
    check(st == 200 and took < 1.5,
          f"a probe is answered while the store is locked ({took:.2f} s)")
    for t in ths:
        t.join()
    check(sorted(answers) == [404, 404, 404], f"every lookup answered 404: {answers}")
    deleted = []
    th = threading.Thread(target=lambda: deleted.append(
        vr_http.request(port, "DELETE", "/v2/pipelines/nope")))
    th.start()
    time.sleep(0.2)
    t0 = time.time()
    st, _ = vr_http.request(port, "GET", "/v2/health/live")
    took = time.time() - t0
    check(st == 200 and took < 1.5,
          f"a probe is answered while a deletion waits for the store ({took:.2f} s)")
    th.join()
    check(deleted[0][0] == 503 and "locked" in deleted[0][1].get("error", ""),
          f"the deletion is answered 503: {deleted}")
    lock.execute("ROLLBACK")
    lock.close()
    st, b = vr_http.request(port, "GET", "/v2/pipelines/nope")
    check(st == 404 and "nope" in b.get("error", ""), f"the store read again: {st} {b}")
    st, b = vr_http.request(port, "DELETE", "/v2/pipelines/nope")
    check(st == 404, f"and written again: {st} {b}")
    proc.terminate()
    check(proc.wait(timeout=30) == 0, "the server drains and exits 0")
    proc = None

    # Started on a locked store: it listens before the control plane can
    # read the store (up to the 2-s busy timeout); /v2/health/ready said
    # 200 and /v2/apps 404 "no control plane (start vario serve with
    # --store)" meanwhile.
    sk = socket.socket()
    sk.bind(("127.0.0.1", 0))
    fixed = sk.getsockname()[1]
    sk.close()
    lock = sqlite3.connect(DB, isolation_level=None, timeout=10)
    lock.execute("BEGIN EXCLUSIVE")
    proc = subprocess.Popen([VARIO, "serve", "--repo", REPO, "--store", DB, "--port",
                             str(fixed), "--grpc-port", "-1", "--insecure-admin"],
                            stderr=open(os.path.join(TMP, "serve.log"), "w"),
                            stdout=subprocess.DEVNULL)
    ready = None
    for _ in range(400):
        try:
            ready = ready_status(fixed)
            break
        except OSError:
            time.sleep(0.005)
    st, b = vr_http.request(fixed, "GET", "/v2/apps")
    lock.execute("ROLLBACK")
    lock.close()
    check(ready == 400, f"not ready (400) before the control plane is attached: {ready}")
    check(st == 503 and "starting" in b.get("error", ""),
          f"/v2/apps answers 503 'starting' meanwhile: {st} {b}")
    for _ in range(200):
        if ready_status(fixed) == 200:
            break
        time.sleep(0.05)
    st, b = vr_http.request(fixed, "GET", "/v2/apps")
    check(st == 200 and "apps" in b, f"ready, and /v2/apps served, once attached: {st} {b}")
    proc.terminate()
    check(proc.wait(timeout=30) == 0, "the server drains and exits 0")
    proc = None
finally:
    if proc:
        proc.kill()
    shutil.rmtree(TMP, ignore_errors=True)
