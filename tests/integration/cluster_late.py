"""A hung worker's queued model-less queries are dropped, not answered
late: `vario frontend` forwarding to two workers (a model's: Triton's
`timeout`; a model-less app's: `latency_ms`) that are stopped (SIGSTOP)
for 3 s while queries with a 200 ms deadline wait in their sockets. The
worker counts their deadline from their arrival at the front end, but it
reads them only when it resumes; the front end, which knows when each
query reached it, answers 504 "dropped" for an app answer past the
worker's allowance (Vario-Due-Us) instead of passing on a 200 seconds
late, and counts it as dropped. Triton's `timeout` bounds the time in
the queue, which time unread in a socket is not: those queries are
served (200, no Vario-Due-Us), as Triton would. A query without a
deadline is unaffected, and the workers serve normally afterwards.
Usage: cluster_late.py VARIO SOURCE_DIR"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

vario, src = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="vario-late-")
procs = []


def check(cond, msg):
    if not cond:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
        for f in sorted(os.listdir(tmp)):
            if f.endswith(".log"):
                print(f"--- {f}\n" + open(os.path.join(tmp, f)).read()[-3000:])
        sys.exit("FAIL: " + msg)


def start(args, name):
    pf = os.path.join(tmp, name + ".port")
    log = open(os.path.join(tmp, name + ".log"), "w")
    p = subprocess.Popen([vario] + args + ["--port", "0", "--port-file", pf],
                         stdout=log, stderr=log)
    procs.append(p)
    for _ in range(1200):  # generous: an ASan build on a loaded machine
        if os.path.exists(pf):
            return p, int(open(pf).read())
        check(p.poll() is None, f"{name} exited")
        time.sleep(0.05)
    check(False, f"{name} did not start")


def req(port, path, body, timeout=120):
    r = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST"
                               if body is not None else "GET",
                               headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r, timeout=timeout) as resp:
            return resp.status, resp.read(), resp.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers


def query(timeout_us=None, slo_ms=None):
    params = {"timeout": timeout_us} if timeout_us else {}
    if slo_ms:
        params = {"latency_ms": slo_ms}
    return json.dumps({"inputs": [{"name": "input", "datatype": "FP32",
                                   "shape": [1, 1, 28, 28], "data": [0.5] * 784}],
                       "parameters": params}).encode()


INFER = "/v2/models/fmnist_linear/infer"
APP = "/v2/apps/fashion/infer"
try:
    repo = os.path.join(tmp, "repo")
    os.makedirs(repo)
    shutil.copytree(os.path.join(src, "models/fmnist/fmnist_linear"),
                    os.path.join(repo, "fmnist_linear"))
    # No deadline unless a query brings one (DELAY: no default timeout).
    cfg_path = os.path.join(repo, "fmnist_linear", "config.json")
    cfg = json.load(open(cfg_path))
    cfg["queue_policy"] = {"timeout_action": "DELAY"}
    json.dump(cfg, open(cfg_path, "w"))
    # The model-less worker: fmnist_linear registered for app "fashion".
    db, mrepo = os.path.join(tmp, "store.db"), os.path.join(tmp, "mrepo")
    data = os.path.join(src, "models/fmnist-data")
    r = subprocess.run([vario, "register", "--store", db, "--repo", mrepo, "--app", "fashion",
                        "--model", os.path.join(src, "models/fmnist/fmnist_linear/model.onnx"),
                        "--input", f"{data}/val_inputs.npy", "--labels",
                        f"{data}/val_labels.npy", "--threads", "1", "--max-batch", "4",
                        "--runs", "3", "--quiet"], capture_output=True, text=True)
    check(r.returncode == 0, "register: " + r.stderr[-500:])
    w, pw = start(["worker", "--repo", repo, "--id", "w1"], "w1")
    wa, pa = start(["worker", "--repo", mrepo, "--store", db, "--cores", "64", "--id", "w2"],
                   "w2")
    fe, pf = start(["frontend", "--worker", f"w1=127.0.0.1:{pw}", "--worker",
                    f"w2=127.0.0.1:{pa}", "--route", "m:fmnist_linear=w1",
                    "--route", "a:fashion=w2", "--timeout-ms", "60000"], "fe")
    for port in (pw, pa):
        for _ in range(1200):
            if req(port, "/v2/health/ready", None)[0] == 200:
                break
            time.sleep(0.05)

    # In time: served.
    st, b, h = req(pf, INFER, query(30000000))
    check(st == 200, f"query before the stop: {st} {b[:200]}")
    st, b, h = req(pf, APP, query(slo_ms=30000))
    check(st == 200, f"app query before the stop: {st} {b[:200]}")

    # The worker hangs with queries in its socket: 200 ms deadlines, and
    # one without a deadline.
    w.send_signal(signal.SIGSTOP)
    wa.send_signal(signal.SIGSTOP)
    out = {}

    def send(i, path, body):
        out[i] = req(pf, path, body)

    sends = [(INFER, query(200000))] * 2 + [(APP, query(slo_ms=200))] * 2 + [(INFER, query())]
    ths = [threading.Thread(target=send, args=(i, *a)) for i, a in enumerate(sends)]
    for t in ths:
        t.start()
    time.sleep(3)
    w.send_signal(signal.SIGCONT)
    wa.send_signal(signal.SIGCONT)
    for t in ths:
        t.join(90)
    check(len(out) == 5, f"answers: {sorted(out)}")
    for i in range(2):  # Triton's timeout: the queue's
        # Unread in the worker's socket it is served (not queue time); kept
        # at the front end for want of a free connection to the worker it
        # is the worker's own 504 (Vario-Upstream-Us counts the front end's
        # wait). Which one depends on the connection pool; the front end's
        # answer-time drop is never applied on this path.
        st, b, h = out[i]
        err = json.loads(b).get("error", "") if st == 504 else ""
        check(st == 200 or (st == 504 and err.startswith("dropped: the deadline cannot be met")
                            and "reached the front end" not in err),
              f"model query {i} with a 200 ms queue timeout after a 3 s stop: {st} {b[:300]}")
        check(h.get("Vario-Due-Us") is None, f"model query {i}: Vario-Due-Us passed on")
    for i in range(2, 4):
        st, b, h = out[i]
        err = json.loads(b).get("error", "") if st == 504 else ""
        check(st == 504 and err.startswith("dropped: the deadline cannot be met"),
              f"query {i} ({sends[i][0]}) with a 200 ms deadline after a 3 s stop: {st} "
              f"{b[:300]}")
        check(h.get("Vario-Due-Us") is None, "Vario-Due-Us is the front end's, not passed on")
    check(out[4][0] == 200, f"query without a deadline: {out[4][0]} {out[4][1][:200]}")

    # Afterwards: served as before.
    st, b, _ = req(pf, INFER, query(30000000))
    check(st == 200, f"query after the stop: {st} {b[:200]}")
    st, b, _ = req(pf, APP, query(slo_ms=30000))
    check(st == 200, f"app query after the stop: {st} {b[:200]}")
    # The worker's allowance, counted from the query's origin: its deadline
    # (+ the batch's time); none on Triton's path.
    st, b, h = req(pw, INFER, query(30000000))
    check(st == 200 and h.get("Vario-Due-Us") is None,
          f"no Vario-Due-Us on /v2/models: {st} {h.get('Vario-Due-Us')}")
    st, b, h = req(pa, APP, query(slo_ms=30000))
    check(st == 200 and h.get("Vario-Due-Us") and int(h["Vario-Due-Us"]) >= 30000000,
          f"the app answer carries Vario-Due-Us: {st} {h.get('Vario-Due-Us')}")
    # The front end's own drops (a worker slow enough to see the deadline
    # passed drops a query itself, and the front end passes that 504 on).
    mine = sum(b"reached the front end" in out[i][1] for i in range(2, 4))
    check(mine > 0, "the front end dropped none of them")
    st, m, _ = req(pf, "/metrics", None)
    dropped = [ln for ln in m.decode().splitlines()
               if ln.startswith('vario_frontend_forwarded_total{outcome="dropped"}')]
    check(dropped and float(dropped[0].split()[-1]) == mine, f"dropped in metrics: {dropped}")
    print("ok")
finally:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.terminate()
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
    shutil.rmtree(tmp, ignore_errors=True)
