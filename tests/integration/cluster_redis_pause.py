"""Redis paused longer than the workers' lease (SIGSTOP of redis-server):
the workers were alive all along, it was the registry that could not be
reached, so the controller must not take them for dead when Redis
resumes and finds their leases ended. A redis-server (started here on a
free port), `vario controller`, workers w1 and w2 (heartbeat 200 ms, lease
400 ms) and `vario frontend`. Twice:
  a. a pause shorter than the controller's Redis I/O timeout (2 s): its
     read just waits, no call fails, no connection breaks;
  b. a pause longer than it (its reads fail, it reconnects).
w1 is killed (SIGKILL) during pause a. Checks: every request through the
front end answers 200 during and after each pause (a killed w1 in the
table is retried on w2; a table without w2 is a 503 "no worker serves");
the front end's table keeps w2 throughout; w1 leaves the table within
the grace the controller gives after a pause (a lease) plus margin.
  c. a third worker w3 (lease 4 s) deregisters (SIGTERM) right after a
     pause, while the controller keeps missing workers: it leaves the front
     end's table within about a controller period, not its lease.
  d. Redis stalls again and again (250 ms pauses, 200 ms apart, for 4 s)
     and a worker w4 is killed as it starts: each stall starts a grace,
     but w4 leaves the table a lease after it went missing, not only once
     the stalls stop; w2 stays in the table throughout.
With "pauses" after SOURCE_DIR, instead of a-d: eight 1-s pauses, with
the same checks after each (run with VARIO_FAULT_REGISTRY_GAP_MS, which
holds the controller's period between listing the workers and reading
their instances: a pause that fell there made a listed w2's instances,
whose lease ended meanwhile, read as none, and its models were placed
again and routed nowhere).
Usage: cluster_redis_pause.py VARIO SOURCE_DIR [pauses]   (exit 77: no redis-server)"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

vario, src = sys.argv[1], sys.argv[2]
PAUSES = sys.argv[3:] == ["pauses"]
redis_bin = shutil.which("redis-server")
if not redis_bin:
    print("skip: no redis-server")
    sys.exit(77)
tmp = tempfile.mkdtemp(prefix="vario-pause-")
procs = {}
HB = 200  # worker heartbeat, ms; lease: two heartbeats


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def fail(msg):
    if procs.get("redis") and procs["redis"].poll() is None:
        procs["redis"].send_signal(signal.SIGCONT)
    for p in procs.values():
        if p.poll() is None:
            p.kill()
    for f in sorted(os.listdir(tmp)):
        if f.endswith(".log"):
            print(f"--- {f}\n" + open(os.path.join(tmp, f)).read()[-4000:])
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def start(name, args):
    pf = os.path.join(tmp, name + ".port")
    f = open(os.path.join(tmp, name + ".log"), "a")
    p = subprocess.Popen([vario] + args + ["--port", "0", "--port-file", pf], stdout=f, stderr=f)
    procs[name] = p
    for _ in range(1200):
        if os.path.exists(pf):
            return int(open(pf).read())
        if p.poll() is not None:
            fail(f"{name} exited ({p.returncode})")
        time.sleep(0.05)
    fail(f"{name} did not start")


def req(port, method, path, body=None, timeout=60):
    r = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method,
                               headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (ConnectionError, urllib.error.URLError) as e:
        return 0, str(e).encode()


def wait(cond, what, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if cond():
            return time.time() - t0
        time.sleep(0.02)
    fail("timed out waiting for " + what)


def table_workers(fport):
    st, b = req(fport, "GET", "/v2/cluster/routes", timeout=10)
    return sorted(w["id"] for w in json.loads(b).get("workers", [])) if st == 200 else None


def served_by(fport):
    st, b = req(fport, "GET", "/v2/cluster/routes", timeout=10)
    return json.loads(b).get("routes", {}).get("m:fmnist_linear", []) if st == 200 else None


# A 30-s queue timeout: the test is about the registry, and the model's
# default (100 ms) dropped a request now and then on a loaded ASan box.
JS = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 28, 28],
                             "data": [0.5] * 784}],
                 "parameters": {"timeout": 30000000}}).encode()


def serving_checked(fport, secs, what, until=None):
    """Requests and the front end's table for secs (or until until()):
    every request 200, w2 always in the table; -> seconds until until()."""
    t0 = time.time()
    while time.time() - t0 < secs:
        if until and until():
            return time.time() - t0
        rt = served_by(fport)
        check(rt is not None and "w2" in rt, f"{what}: table without w2 after "
              f"{time.time() - t0:.2f} s: {rt}")
        st, b = req(fport, "POST", "/v2/models/fmnist_linear/infer", JS)
        check(st == 200, f"{what}: request answered {st} {b[:200]}")
    return None


def pause(fport, secs, during=None):
    """SIGSTOP redis-server for secs (requests go on meanwhile), then SIGCONT."""
    procs["redis"].send_signal(signal.SIGSTOP)
    t0 = time.time()
    if during:
        during()
    for _ in range(10):
        st, b = req(fport, "POST", "/v2/models/fmnist_linear/infer", JS)
        check(st == 200, f"request while Redis is paused: {st} {b[:200]}")
    time.sleep(max(0.0, secs - (time.time() - t0)))
    procs["redis"].send_signal(signal.SIGCONT)
    return time.time() - t0


try:
    rport = free_port()
    rlog = open(os.path.join(tmp, "redis.log"), "a")
    procs["redis"] = subprocess.Popen([redis_bin, "--port", str(rport), "--bind", "127.0.0.1",
                                       "--save", "", "--appendonly", "no", "--dir", tmp],
                                      stdout=rlog, stderr=rlog)

    def redis_up():
        try:
            socket.create_connection(("127.0.0.1", rport), 0.2).close()
            return True
        except OSError:
            return False
    wait(redis_up, "redis-server", 20)
    url = f"redis://127.0.0.1:{rport}"
    repo = os.path.join(tmp, "repo")
    os.makedirs(repo)
    shutil.copytree(os.path.join(src, "models/fmnist/fmnist_linear"),
                    os.path.join(repo, "fmnist_linear"))
    tokf = os.path.join(tmp, "token")
    with open(tokf, "w") as f:
        f.write("pause-test-token\n")
    cport = start("ctl", ["controller", "--registry", url, "--repo", repo, "--period-ms", "100",
                          "--admin-token-file", tokf])
    for w in ("w1", "w2"):
        os.makedirs(os.path.join(tmp, "repo-" + w))
        start(w, ["worker", "--worker-id", w, "--registry", url, "--controller",
                  f"http://127.0.0.1:{cport}", "--repo", os.path.join(tmp, "repo-" + w),
                  "--heartbeat-ms", str(HB), "--admin-token-file", tokf])
    fport = start("fe", ["frontend", "--registry", url, "--timeout-ms", "30000"])
    wait(lambda: sorted(served_by(fport) or []) == ["w1", "w2"], "both workers in the table")
    serving_checked(fport, 1.0, "before the pauses")
    print("both workers serve")

    if PAUSES:
        for k in range(8):
            t = pause(fport, 1.0)
            serving_checked(fport, 4 * HB / 1000 + 0.5, f"after pause {k + 1}")
        print("8 pauses of 1 s: served throughout, w2 in the table throughout")
        sys.exit(0)

    # a. shorter than the controller's I/O timeout; w1 killed meanwhile
    def kill_w1():
        procs["w1"].send_signal(signal.SIGKILL)
        procs["w1"].wait()
    t = pause(fport, 1.5, kill_w1)
    kept = {}  # what /v2/cluster/state said of each worker while w1 was kept

    def w1_gone():
        st, b = req(cport, "GET", "/v2/cluster/state", timeout=10)
        if st == 200:
            for w in json.loads(b)["workers"]:
                kept.setdefault(w["id"], set()).add(w["kept"])
        return served_by(fport) == ["w2"]
    gone = serving_checked(fport, 6.0, "after a 1.5 s pause", until=w1_gone)
    check(gone is not None, "w1, killed during the pause, still in the table 6 s after it")
    # the grace is a lease (2 HB) from when Redis answered again; margin for
    # a loaded machine (ASan, 2 cores)
    check(gone < 2 * HB / 1000 + 3.0, f"w1 left the table only {gone:.2f} s after the pause")
    # the state marks the worker it keeps (w2, alive, may be kept too until
    # its next heartbeat: its lease also ended during the pause)
    check(True in kept.get("w1", set()), f"w1 never shown kept in /v2/cluster/state: {kept}")
    check(False in kept.get("w2", set()), f"w2 never shown listed in /v2/cluster/state: {kept}")
    serving_checked(fport, 4 * HB / 1000 + 1.0, "after a 1.5 s pause")
    print(f"a. paused {t:.2f} s (lease {2 * HB} ms): served throughout; killed w1 out of the "
          f"table {gone:.2f} s after")

    # b. longer than the controller's I/O timeout: its reads fail meanwhile
    t = pause(fport, 3.0)
    serving_checked(fport, 4 * HB / 1000 + 1.0, "after a 3 s pause")
    print(f"b. paused {t:.2f} s: served throughout")

    # c. a worker that deregisters during the grace after a pause said it
    # is gone: not kept like one whose lease ended while Redis was paused
    HB3 = 2000
    os.makedirs(os.path.join(tmp, "repo-w3"))
    start("w3", ["worker", "--worker-id", "w3", "--registry", url, "--controller",
                 f"http://127.0.0.1:{cport}", "--repo", os.path.join(tmp, "repo-w3"),
                 "--heartbeat-ms", str(HB3), "--admin-token-file", tokf])
    wait(lambda: sorted(served_by(fport) or []) == ["w2", "w3"], "w3 in the table")
    t = pause(fport, 1.0)
    time.sleep(0.3)  # the controller's read waited out the pause: its grace runs
    t0 = time.time()
    procs["w3"].send_signal(signal.SIGTERM)
    gone = serving_checked(fport, 2 * HB3 / 1000 + 2.0, "w3 deregistered after a pause",
                           until=lambda: table_workers(fport) == ["w2"])
    check(gone is not None, "w3, deregistered after the pause, still in the table after a lease")
    # a controller period (100 ms) and a table, with margin; the grace
    # (w3's lease, 4 s) would end about 3.7 s after the SIGTERM
    check(gone < 1.5, f"w3 left the table only {gone:.2f} s after it deregistered")
    check(procs["w3"].wait(60) == 0, f"w3 exit code {procs['w3'].returncode}")
    st, b = req(cport, "GET", "/v2/cluster/state", timeout=10)
    check(not any(e["what"].startswith("worker w3 missing") for e in json.loads(b)["events"]),
          "the controller kept w3 after it deregistered")
    print(f"c. paused {t:.2f} s: w3 deregistered, out of the table {gone:.2f} s after "
          f"(lease {2 * HB3} ms)")

    # d. a grace is not renewed by the next stall while a worker is kept
    os.makedirs(os.path.join(tmp, "repo-w4"))
    start("w4", ["worker", "--worker-id", "w4", "--registry", url, "--controller",
                 f"http://127.0.0.1:{cport}", "--repo", os.path.join(tmp, "repo-w4"),
                 "--heartbeat-ms", str(HB), "--admin-token-file", tokf])
    wait(lambda: sorted(served_by(fport) or []) == ["w2", "w4"], "w4 in the table")
    procs["w4"].send_signal(signal.SIGKILL)
    procs["w4"].wait()
    t0, gone = time.time(), None
    while time.time() - t0 < 4.0:
        procs["redis"].send_signal(signal.SIGSTOP)
        time.sleep(0.25)
        procs["redis"].send_signal(signal.SIGCONT)
        time.sleep(0.2)
        tw = table_workers(fport)
        check(tw is not None and "w2" in tw, f"table without w2 while Redis stalls: {tw}")
        if gone is None and "w4" not in tw:
            gone = time.time() - t0
    check(gone is not None, "w4, killed, still in the table after 4 s of stalls")
    # its lease (400 ms) to go missing, a grace (a lease), periods and
    # stalls between: well under the 4 s of stalls, with margin
    check(gone < 2.5, f"w4 left the table only {gone:.2f} s after it was killed")
    serving_checked(fport, 4 * HB / 1000 + 1.0, "after the stalls")
    print(f"d. Redis stalled 250 ms every 450 ms: killed w4 out of the table {gone:.2f} s after")

    st, b = req(cport, "GET", "/v2/cluster/state", timeout=10)
    s = json.loads(b)
    check([w["id"] for w in s["workers"]] == ["w2"], f"controller's workers: {s['workers']}")
    check(not any(e["what"].startswith("worker w2 gone") for e in s["events"]),
          "the controller took w2 for gone")
    for name in ("fe", "w2", "ctl"):
        procs[name].send_signal(signal.SIGTERM)
    for name in ("fe", "w2", "ctl"):
        check(procs[name].wait(60) == 0, f"{name} exit code {procs[name].returncode}")
    print("ok")
finally:
    for p in procs.values():
        if p.poll() is None:
            p.kill()
    shutil.rmtree(tmp, ignore_errors=True)
