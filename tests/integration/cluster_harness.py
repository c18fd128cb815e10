"""Shared set-up of the controller tests (cluster_autoscale.py,
cluster_policy.py, cluster_asyfunc.py, cluster_interference.py):
arguments, the redis-server check (exit 77 without it), a scratch
directory, the processes to kill on failure, the HTTP/polling helpers,
the processes every such test runs: redis-server, `vario controller`
with the local provider, `vario frontend`, and load in rounds of `vario
bench` (BenchRounds). setup() must be called first;
`procs` is the list the test appends its processes to (redis-server,
controller, front end first, in that order)."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

tmp = None
vario = src = None
procs = []


def setup(prefix):
    """-> (vario, source dir, redis-server path, scratch dir, procs)."""
    global tmp, vario, src
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


def run(cmd):
    """A command that must succeed (else the test fails with its stderr)."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        fail(f"{' '.join(cmd[:4])}: {r.stderr.strip()[-800:]}")
    return r


def register_fashion(vario, store, repo, src, fast):
    """fmnist_linear and fmnist_mlp for app "fashion", with their
    validation set (fast: the profiling options)."""
    data = os.path.join(src, "models/fmnist-data")
    for m in ["fmnist_linear", "fmnist_mlp"]:
        run([vario, "register", "--store", store, "--repo", repo, "--app", "fashion", "--model",
             f"{src}/models/fmnist/{m}/model.onnx", "--input", f"{data}/val_inputs.npy",
             "--labels", f"{data}/val_labels.npy"] + fast)


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


def model_repo(*models):
    """The scratch repository tmp/repo with a copy of each committed
    models/fmnist/<model>; -> its path."""
    repo = os.path.join(tmp, "repo")
    os.makedirs(repo)
    for m in models:
        shutil.copytree(os.path.join(src, "models/fmnist", m), os.path.join(repo, m))
    return repo


def worker_args(url, repo, heartbeat_ms, *more):
    """The controller's --worker-arg pairs for the workers its provider
    starts: the registry, their repository, port 0, the heartbeat, no
    admin token, then `more`."""
    out = []
    for a in ["--registry", url, "--repo", repo, "--port", "0", "--heartbeat-ms",
              str(heartbeat_ms), "--insecure-admin", *more]:
        out += ["--worker-arg", a]
    return out


def start_controller(url, repo, args):
    """`vario controller` on the registry and repository with the local
    provider (this vario binary; the workers' logs in tmp/workers) and the
    test's own args (ctl.log); -> its port."""
    log = open(os.path.join(tmp, "ctl.log"), "w")
    procs.append(subprocess.Popen(
        [vario, "controller", "--registry", url, "--repo", repo, "--port", "0",
         "--port-file", os.path.join(tmp, "ctl.port"), "--provider", "local",
         "--provider-opt", "binary=" + os.path.abspath(vario),
         "--provider-opt", "log-dir=" + os.path.join(tmp, "workers")] + args,
        stdout=log, stderr=log))
    return portfile("ctl")


def start_frontend(url):
    """`vario frontend` on the registry (fe.log); -> its port."""
    log = open(os.path.join(tmp, "fe.log"), "w")
    procs.append(subprocess.Popen([vario, "frontend", "--registry", url, "--port", "0",
                                   "--port-file", os.path.join(tmp, "fe.port")],
                                  stdout=log, stderr=log))
    return portfile("fe")


def routed(fp, model):
    """The workers the front end at port fp routes the model to (sorted;
    [] when it does not answer)."""
    st, b, _ = req(fp, "GET", "/v2/cluster/routes", timeout=10)
    return sorted(json.loads(b).get("routes", {}).get("m:" + model, [])) if st == 200 else []


class BenchRounds:
    """`vario bench` against the front end at port fp in rounds of 4 s on
    a thread of its own, from start() until stop(): each round's --json
    line (or how it failed) in .rounds. bench_args: the load (model,
    arrival, rate, connections, batch...)."""

    KEYS = ("sent", "ok", "dropped", "rejected", "errors", "unfinished")

    def __init__(self, fp, bench_args):
        self.args = [vario, "bench", "--port", str(fp), *bench_args, "--duration", "4",
                     "--no-progress", "--json"]
        self.on = threading.Event()
        self.rounds = []
        self.th = threading.Thread(target=self._drive)

    def _drive(self):
        while self.on.is_set():
            b = subprocess.run(self.args, capture_output=True, text=True)
            try:
                self.rounds.append(json.loads(b.stdout.splitlines()[0]))
            except (ValueError, IndexError):
                self.rounds.append({"failed": b.returncode, "stderr": b.stderr[-500:]})

    def start(self):
        self.on.set()
        self.th.start()

    def stop(self):
        """Ends the load after the round under way; -> the totals over the
        rounds. Fails the test if a request was lost: a round failed, none
        served, an error, one unfinished, or one neither served, dropped
        nor rejected."""
        self.on.clear()
        self.th.join()
        res = {k: sum(r.get(k, 0) for r in self.rounds) for k in self.KEYS}
        if any("failed" in r for r in self.rounds) or res["ok"] < 1 or res["errors"] or \
                res["unfinished"] or res["ok"] + res["dropped"] + res["rejected"] != res["sent"]:
            fail(f"requests lost or failed: {res} {[r for r in self.rounds if 'failed' in r]}")
        return res


def stop_clean():
    """SIGTERM the front end, then the controller (it stops its workers);
    each must exit 0 within 60 s (sanitised builds report leaks and errors
    in the exit code)."""
    for p in procs[2:0:-1]:
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(60)
        except subprocess.TimeoutExpired:
            fail("a process did not stop on SIGTERM")
        if rc != 0:
            fail(f"exit code {rc}")


def cleanup():
    """For `finally`: SIGTERM what runs besides redis-server (the
    controller stops its workers), SIGKILL what has not stopped 60 s later,
    then redis-server; removes the scratch directory."""
    for p in procs[1:][::-1]:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs[1:]:
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
    for p in procs:
        if p.poll() is None:
            p.kill()
    shutil.rmtree(tmp, ignore_errors=True)
