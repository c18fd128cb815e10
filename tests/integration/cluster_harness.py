"""Shared set-up of the controller tests (cluster_autoscale.py,
cluster_policy.py): arguments, the redis-server check (exit 77 without
it), a scratch directory, the processes to kill on failure, and the
HTTP/polling helpers. setup() must be called first; `procs` is the list
the test appends its processes to."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

tmp = None
procs = []


def setup(prefix):
    """-> (vario, source dir, redis-server path, scratch dir, procs)."""
    global tmp
    vario, src = sys.argv[1], sys.argv[2]
    redis_bin = shutil.which("redis-server")
    if not redis_bin:
        print("skip: no redis-server")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix=prefix)
    return vario, src, redis_bin, tmp, procs


def fail(msg):
    for p in procs:
        if p.poll() is None:
            p.kill()
    for root, _, files in os.walk(tmp):
        for f in files:
            if f.endswith(".log"):
                print(f"--- {f}\n" + open(os.path.join(root, f)).read()[-3000:])
    print("FAIL: " + msg)
    sys.exit(1)


def req(port, method, path, body=None, timeout=120):
    r = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method,
                               headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r, timeout=timeout) as resp:
            return resp.status, resp.read(), resp.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers
    except (ConnectionError, urllib.error.URLError) as e:
        return 0, str(e).encode(), {}


def wait(cond, what, timeout=180):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = cond()
        if v:
            return time.time() - t0
        time.sleep(0.05)
    fail("timed out waiting for " + what)


def portfile(name):
    pf = os.path.join(tmp, name + ".port")
    wait(lambda: os.path.exists(pf), name + " to listen")
    return int(open(pf).read())


def state(cp):
    st, b, _ = req(cp, "GET", "/v2/cluster/state", timeout=10)
    return json.loads(b) if st == 200 else {"workers": []}


def start_redis(redis_bin):
    """A private redis-server on a free loopback port, no persistence, in
    the scratch directory (killed with procs); -> its redis:// URL."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    rport = s.getsockname()[1]
    s.close()
    log = open(os.path.join(tmp, "redis.log"), "w")
    procs.append(subprocess.Popen([redis_bin, "--port", str(rport), "--bind", "127.0.0.1",
                                   "--save", "", "--appendonly", "no", "--dir", tmp],
                                  stdout=log, stderr=log))
    wait(lambda: socket.socket().connect_ex(("127.0.0.1", rport)) == 0, "redis")
    return f"redis://127.0.0.1:{rport}"
