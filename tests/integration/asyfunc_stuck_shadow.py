#!/usr/bin/python3
"""A stuck AsyFunc shadow process does not make a model-less query late:
`vario serve --policy asyfunc` with a body (the test CNN and its block
profile, as asyfunc_live.py), a shadow paired by hand in its own process
(POST /v2/repository/models/afcnn/shadow, "process": true, a split that
gives it every row; --af-kappa 0 and an hour-long control period keep the
policy from pairing or releasing shadows itself), then the shadow is
stopped (SIGSTOP) while queries with a 300 ms latency SLO arrive.

The body waits for the stopped shadow until its batch's earliest
deadline less twice the batch's time (at most 2 s), then re-runs its rows itself
(runtime/pair.c) and releases it. Checks:
  - the paired run works before the stop (vario_paired_batches_total);
  - during the stop every query is answered 200 or 504 "dropped" within
    its SLO plus a generous allowance: none ~2 s late. Three rules make
    that: the stuck batch gives up on its shadow at its deadlines
    (instance.c shadow_give_up; it waited the whole 2 s before); what is
    queued behind it is dropped when it becomes due (runtime/reaper.c; it
    was answered when the batch ended); and the stuck batch's own answers,
    if later than their deadline plus the batch's time, are dropped at
    answer time (policy/drop.h vr_drop_answer_due: the wait is not the
    batch's execution time, vr_rt_request.batch_ns), not served late;
  - the server logs the shadow's failure, the body has no shadow after,
    the shadow process is gone, and the model serves normally again.
usage: asyfunc_stuck_shadow.py VARIO SOURCE_DIR [--model ONNX] [--keep]
"""
import argparse
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import af_app  # noqa: E402
import vr_http  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("vario")
ap.add_argument("src")
ap.add_argument("--model", default="", help="the test CNN already generated (gen_model.py)")
ap.add_argument("--keep", action="store_true")
A = ap.parse_args()
TMP = tempfile.mkdtemp(prefix="vr_afstuck_")
SLO_MS = 300
# A 200 later than this after it was sent was served late: the SLO, plus
# far more than a batch of this CNN takes even under the sanitizers, and
# far less than the shadow's 2-s timeout.
LATE_MS = SLO_MS + 1000
procs = []


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        for p in procs:
            if p.poll() is None:
                p.kill()
        with open(os.path.join(TMP, "serve.log")) as f:
            print("--- serve.log\n" + f.read()[-3000:])
        sys.exit(1)
    print("ok:", what)


def infer(port, slo_ms):
    """(status, client-measured ms, body) of one query of the test CNN."""
    x = {"name": "x", "datatype": "FP32", "shape": [1, 1, 64, 64], "data": [0.5] * 4096}
    body = json.dumps({"inputs": [x], "parameters": {"latency_ms": slo_ms}}).encode()
    r = urllib.request.Request(f"http://127.0.0.1:{port}/v2/apps/afapp/infer", data=body,
                               method="POST", headers={"Content-Type": "application/json"})
    t0 = time.time()
    try:
        with urllib.request.urlopen(r, timeout=60) as resp:
            st, b = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        st, b = e.code, e.read()
    return st, (time.time() - t0) * 1000, b


def metric(port, name, label=""):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(float(v) for v in
               re.findall(rf"^{name}(?:{{[^}}]*{label}[^}}]*}})? (\S+)$", text, re.M))


def children(pid, word):
    """Pids of pid's child processes whose command line has `word`."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and word in cmd:
            out.append(int(d))
    return out


def body_state(port):
    st, r = vr_http.request(port, "GET", "/v2/models/afcnn/instances")
    check(st == 200 and r["instances"], f"the model's instances are listed ({st})")
    return r["instances"][0]


try:
    DB, REPO, _, _ = af_app.register(A.vario, A.src, TMP, A.model, cmax=2)
    proc, port = vr_http.start_server(
        [A.vario, "serve", "--repo", REPO, "--store", DB, "--port", "0", "--grpc-port", "-1",
         "--insecure-admin", "--cores", "2", "--policy", "asyfunc", "--af-kappa", "0",
         "--control-period-ms", "3600000"], os.path.join(TMP, "serve.log"))
    procs.append(proc)
    st, _, b = infer(port, 30000)  # loads the body on the query path
    check(st == 200, f"the first query loads a body ({st} {b[:200]})")
    inst = body_state(port)
    check("body" in inst, "the instance is an AsyFunc body (it has a block profile)")
    mb = inst["max_batch"]
    split = [b // 2 + b % 2 for b in range(mb + 1)]  # the shadow's rows of a batch of b
    split[1] = 1
    st, r = vr_http.request(port, "POST", "/v2/repository/models/afcnn/shadow",
                            {"cores": 1, "split": split, "process": True})
    check(st == 200, f"a shadow process is paired with the body ({st} {r})")
    kids = children(proc.pid, "shadow")
    check(len(kids) == 1, f"one `vario shadow` process runs beside the server ({kids})")
    with open(f"/proc/{kids[0]}/cmdline", "rb") as f:
        argv0 = f.read().split(b"\0")[0].decode(errors="replace")
    check(argv0.endswith("/vario-shadow"),
          f"it is the small `vario-shadow` beside `vario` ({argv0})")
    st, _, b = infer(port, 30000)
    check(st == 200 and metric(port, "vario_paired_batches_total") >= 1,
          "a query runs with the shadow (a paired batch)")

    os.kill(kids[0], signal.SIGSTOP)
    out = []

    def one():
        out.append(infer(port, SLO_MS))

    ths = [threading.Thread(target=one) for _ in range(6)]
    for t in ths:
        t.start()
        time.sleep(0.01)
    for t in ths:
        t.join(120)
    try:
        os.kill(kids[0], signal.SIGCONT)
    except ProcessLookupError:
        pass
    for st, ms, b in sorted(out, key=lambda o: o[1]):
        print(f"   {st} after {ms:.0f} ms {b[:150] if st != 200 else b''}")
    check(len(out) == 6 and all(st in (200, 504) for st, _, _ in out),
          "every query during the stop is answered, 200 or 504")
    late = [(st, round(ms)) for st, ms, _ in out if ms > LATE_MS]
    check(not late, f"no answer later than {LATE_MS} ms for a {SLO_MS}-ms SLO (late: {late})")
    # a 200 is within its deadline plus its batch's time, or it is a 504
    # (answer time); those counted as such
    drops = sum(st == 504 and b"the answer was ready" in b for st, _, b in out)
    check(metric(port, "vario_app_late_beyond_batch_total", 'cause="answer"') >= drops,
          f"vario_app_late_beyond_batch_total{{cause=\"answer\"}} counts the {drops} "
          "answer-time drops")
    with open(os.path.join(TMP, "serve.log")) as f:
        log = f.read()
    check("shadow did not answer in time" in log, "the server logged the stuck shadow")
    inst = body_state(port)
    check(inst["body"]["shadow_threads"] == 0, "the body has no shadow after it failed")
    for _ in range(100):  # reaped: asked to stop, then killed (pair.c reap)
        if not os.path.exists(f"/proc/{kids[0]}") or \
                open(f"/proc/{kids[0]}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.05)
    check(kids[0] not in children(proc.pid, "shadow"), "the shadow process is gone")
    st, ms, b = infer(port, 30000)
    check(st == 200, f"the body serves alone afterwards ({st})")
    proc.terminate()
    proc.wait(timeout=60)
    print("PASS")
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
    if not A.keep:
        shutil.rmtree(TMP, ignore_errors=True)
