#!/usr/bin/python3
"""Model-less scenarios on the real server (issue 6), end to end:
registration (good and bad input, nothing half-registered), accuracy floors
always respected, latency SLOs respected by selection, infeasible requests
answered 400 naming the closest variant, HTTP registration, offline jobs,
and registrations surviving a restart.

usage: control_scenario.py VARIO SOURCE_DIR
"""
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vr_http  # noqa: E402

VARIO, SRC = sys.argv[1], sys.argv[2]
DATA = os.path.join(SRC, "models/fmnist-data")
TMP = tempfile.mkdtemp(prefix="vr_scn_")
DB, REPO = os.path.join(TMP, "store.db"), os.path.join(TMP, "repo")
FAST = ["--threads", "1", "--max-batch", "4", "--runs", "3", "--quiet"]
TOKEN = "scenario-" + os.urandom(8).hex()
TOKEN_FILE = os.path.join(TMP, "admin.token")
with open(TOKEN_FILE, "w") as f:
    f.write(TOKEN + "\n")


def register(model_path, name=None, extra=None):
    cmd = [VARIO, "register", "--store", DB, "--repo", REPO, "--app", "fashion",
           "--model", model_path] + FAST
    if name:
        cmd += ["--name", name]
    cmd += extra if extra is not None else [
        "--input", f"{DATA}/val_inputs.npy", "--labels", f"{DATA}/val_labels.npy"]
    return subprocess.run(cmd, capture_output=True, text=True)


def listing():
    return subprocess.run([VARIO, "register", "--store", DB, "--list"],
                          capture_output=True, text=True, check=True).stdout


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)
    print("ok:", what)


def start_server():
    # --cores 64: this test is about selection, not capacity (a full worker
    # answers 503 until the autoscaler releases idle instances).
    return vr_http.start_server([VARIO, "serve", "--repo", REPO, "--store", DB, "--port", "0",
                                 "--cores", "64", "--admin-token-file", TOKEN_FILE],
                                os.path.join(TMP, "serve.log"))


def http(port, method, path, body=None, raw=None, ctype=None):
    return vr_http.request(port, method, path, body, raw, ctype, TOKEN)


def multipart(fields, files):
    return vr_http.multipart(fields, {k: open(p, "rb").read() for k, p in files.items()})


X = np.load(f"{DATA}/val_inputs.npy")
Y = np.load(f"{DATA}/val_labels.npy")


def infer(port, params, row=0):
    t = {"name": "input", "datatype": "FP32", "shape": [1, 1, 28, 28],
         "data": X[row].flatten().tolist()}
    return http(port, "POST", "/v2/apps/fashion/infer", {"inputs": [t], "parameters": params})


proc = None
try:
    # -- registration ---------------------------------------------------------
    for m in ["fmnist_linear", "fmnist_mlp", "fmnist_cnn_s"]:
        r = register(f"{SRC}/models/fmnist/{m}/model.onnx")
        check(r.returncode == 0, f"register {m}: {r.stdout.strip()}{r.stderr.strip()}")
    before = listing()
    entries = sorted(os.listdir(REPO))
    bad_onnx = os.path.join(TMP, "corrupt.onnx")
    open(bad_onnx, "wb").write(os.urandom(2000))
    np.save(os.path.join(TMP, "y999.npy"), Y[:999])
    np.save(os.path.join(TMP, "x0.npy"), X[:0])
    np.save(os.path.join(TMP, "y0.npy"), Y[:0])
    cases = {
        "corrupt ONNX": register(bad_onnx, "bad1"),
        "labels that do not match inputs": register(
            f"{SRC}/models/fmnist/fmnist_mlp/model.onnx", "bad2",
            ["--input", f"{DATA}/val_inputs.npy", "--labels", f"{TMP}/y999.npy"]),
        "empty validation set": register(
            f"{SRC}/models/fmnist/fmnist_mlp/model.onnx", "bad3",
            ["--input", f"{TMP}/x0.npy", "--labels", f"{TMP}/y0.npy"]),
    }
    for what, r in cases.items():
        check(r.returncode == 1 and r.stderr.startswith("vario register:"),
              f"{what} rejected: {r.stderr.strip()}")
    check(listing() == before and sorted(os.listdir(REPO)) == entries,
          "rejected registrations left nothing in the store or the repository")
    fresh = os.path.join(TMP, "new", "dir", "store.db")
    r = subprocess.run([VARIO, "register", "--store", fresh, "--repo", REPO, "--app", "x",
                        "--model", bad_onnx, "--declared-accuracy", "90"] + FAST,
                       capture_output=True, text=True)
    check(r.returncode == 1 and not os.path.exists(os.path.join(TMP, "new")),
          f"a failed registration leaves no new store behind: {r.stderr.strip()}")

    # -- serving --------------------------------------------------------------
    proc, port = start_server()
    st, apps = http(port, "GET", "/v2/apps/fashion")
    variants = apps["apps"]["fashion"]
    check(st == 200 and len(variants) >= 9, f"GET /v2/apps/fashion lists {len(variants)} variants")

    # vario bench replays a trace from its first arrival, wherever that is
    # in the trace's clock: one starting at 5 s, 1 s of it -> 100 requests
    tr = os.path.join(TMP, "late_trace.csv")
    with open(tr, "w") as f:
        f.write("".join(f"{5000 + 10 * i},0,100\n" for i in range(300)))
    b = subprocess.run([VARIO, "bench", "--port", str(port), "--path", "/v2/health/live",
                        "--arrival", "trace", "--trace", tr, "--duration", "1", "--json"],
                       capture_output=True, text=True, timeout=60)
    res = json.loads(b.stdout) if b.returncode == 0 else {}
    check(res.get("sent", 0) + res.get("unsent", 0) == 100,
          f"trace from 5 s, 1 s replayed: {b.stdout.strip()} {b.stderr.strip()}")

    random.seed(1)
    dropped = 0
    for i in range(40):
        acc = random.choice([0, 50, 80, 85, 88, 89, 90])
        slo = random.choice([5, 20, 100])
        st, r = infer(port, {"latency_ms": slo, "min_accuracy": acc}, row=i)
        if st == 504 and r.get("error", "").startswith("dropped"):
            # latency_ms is the query's live deadline: one that waited for
            # its variant to load past it is dropped, never served late
            dropped += 1
            continue
        if st != 200:
            check(False, f"query acc>={acc} slo {slo}: HTTP {st} {r}")
        p = r["parameters"]
        if p["accuracy"] < acc or 2 * p["profile_p99_ms"] > slo * 1.0001:
            check(False, f"query acc>={acc} slo {slo} served by {p['variant']} ({p['accuracy']}%)")
    check(dropped < 20, f"40 random queries: accuracy floor and profiled SLO always "
          f"respected ({dropped} dropped at their deadline)")

    # The fastest qualifying variant alone meets a tight SLO.
    good = [v for v in variants if v["accuracy"] >= 88]
    fastest = min(good, key=lambda v: v["p99_ms_b1"])
    slo = 2 * fastest["p99_ms_b1"] * 1.001
    # (a deadline this tight, a fraction of a millisecond, is often gone by
    # the time the query reaches its instance on a busy machine: then the
    # answer is an explicit 504 "dropped", never a late 200)
    st, r = infer(port, {"latency_ms": slo, "min_accuracy": 88})
    ok = (st == 200 and 2 * r["parameters"]["profile_p99_ms"] <= slo * 1.0001) or \
         (st == 504 and r["error"].startswith("dropped"))
    check(ok, f"tight SLO {slo:.4f} ms served by {r.get('parameters', r)}")

    st, r = infer(port, {"latency_ms": 100, "model": "fmnist_linear"})
    check(st == 200 and r["parameters"]["model"] == "fmnist_linear",
          "a query pinned to a model is served by it")
    st, r = infer(port, {"latency_ms": 100, "model": "nope"})
    check(st == 404, f"a pinned unknown model -> 404: {r}")
    st, r = infer(port, {"latency_ms": 50, "min_accuracy": 99.9})
    check(st == 400 and "closest is" in r["error"], f"infeasible -> 400: {r['error']}")
    st, r = http(port, "POST", "/v2/apps/nope/infer", {"inputs": []})
    check(st in (400, 404), f"unknown app -> {st}")
    # A query refused after routing (an output the chosen model lacks) is
    # no longer in flight on its instance: nothing stays counted.
    t = {"name": "input", "datatype": "FP32", "shape": [1, 1, 28, 28],
         "data": X[0].flatten().tolist()}
    for _ in range(5):
        st, r = http(port, "POST", "/v2/apps/fashion/infer",
                     {"inputs": [t], "outputs": [{"name": "nope"}],
                      "parameters": {"latency_ms": 100, "model": "fmnist_linear"}})
        check(st == 400 and "nope" in r.get("error", ""), f"unknown output -> 400: {st} {r}")
    st, apps = http(port, "GET", "/v2/apps/fashion")
    left = sum(v["in_flight"] for v in apps["apps"]["fashion"])
    check(st == 200 and left == 0, f"nothing left in flight after refused queries ({left})")

    # Offline job: the input is uploaded, the result fetched from the server.
    st, r = http(port, "POST", "/v2/apps/fashion/jobs?min_accuracy=89",
                 raw=open(f"{DATA}/val_inputs.npy", "rb").read(), ctype="application/octet-stream")
    check(st == 201, f"job submitted (uploaded input): {r}")
    for _ in range(600):
        st, j = http(port, "GET", f"/v2/jobs/{r['id']}")
        if j["state"] in ("done", "failed"):
            break
        time.sleep(0.05)
    st, out = http(port, "GET", j["output"])
    res = np.load(io.BytesIO(out)) if st == 200 else None
    check(res is not None and (res.argmax(1) == Y).mean() >= 0.89,
          f"job done by {j['variant']}: accuracy {(res.argmax(1) == Y).mean() if res is not None else j}")
    job1 = (r["id"], out)
    # a path that is not there is 404; one there for the other method 405
    for method, path, want in [("GET", "/v2/apps/fashion/nope", 404),
                               ("GET", "/v2/apps/fashion/infer", 405),
                               ("POST", "/v2/apps/fashion", 405)]:
        st, r = http(port, method, path, {} if method == "POST" else None)
        check(st == want, f"{method} {path} -> {st} {r}")
    # a misspelt field is refused, as an unknown multipart part is (it was
    # ignored: the job ran at the default accuracy, 0)
    st, r = http(port, "POST", "/v2/apps/fashion/jobs?min_acuracy=89",
                 raw=open(f"{DATA}/val_inputs.npy", "rb").read(), ctype="application/octet-stream")
    check(st == 400 and "unknown field 'min_acuracy'" in r.get("error", ""),
          f"job with a misspelt query field -> {st} {r}")
    # an upload that is no .npy: said of "the uploaded input", not of the
    # server's own file for it (in-XXXXXX.npy)
    st, r = http(port, "POST", "/v2/apps/fashion/jobs", raw=b"not an npy file at all",
                 ctype="application/octet-stream")
    err = r.get("error", "") if st != 201 else ""
    if st == 201:
        for _ in range(600):
            st2, j = http(port, "GET", f"/v2/jobs/{r['id']}")
            if j["state"] in ("done", "failed"):
                break
            time.sleep(0.05)
        err = j.get("error", "")
    check("the uploaded input" in err and not re.search(r"in-\w{6}\.npy", err),
          f"a bad upload names the upload: {st} {err}")
    # a named model's job without the name: said so (the server names the
    # input and output files itself, so they are not what is missing)
    st, r = http(port, "POST", "/v2/jobs", raw=open(f"{DATA}/val_inputs.npy", "rb").read(),
                 ctype="application/octet-stream")
    check(st == 400 and 'needs "model"' in r.get("error", ""), f"job without a model -> {st} {r}")

    # HTTP registration, then a query that needs it.
    body, ct = multipart({"name": "lin2", "declared_accuracy": 99, "threads": 1,
                          "max_batch": 2, "runs": 3},
                         {"model": f"{SRC}/models/fmnist/fmnist_linear/model.onnx"})
    st, r = http(port, "POST", "/v2/apps/fashion/models", raw=body, ctype=ct)
    check(st == 201 and r["variants"] == 2, f"POST /v2/apps/fashion/models -> {st} {r}")
    st, r = infer(port, {"latency_ms": 100, "min_accuracy": 98})
    check(st == 200 and r["parameters"]["model"] == "lin2", "the new model serves what it claims")
    st, r = http(port, "POST", "/v2/apps/fashion/models?name=lin3&declared_accuracy=99&max_bach=2",
                 raw=open(f"{SRC}/models/fmnist/fmnist_linear/model.onnx", "rb").read(),
                 ctype="application/octet-stream")
    check(st == 400 and "unknown field 'max_bach'" in r.get("error", ""),
          f"registration with a misspelt query field -> {st} {r}")
    body, ct = multipart({"name": "bad4"}, {"model": bad_onnx})
    st, r = http(port, "POST", "/v2/apps/fashion/models", raw=body, ctype=ct)
    check(st == 400, f"bad HTTP registration -> {st}: {r.get('error')}")
    # Three registrations of one name at once: one 201, the others 409, the
    # entry whole (they shared a temporary directory, removed each other's
    # files, and the losers got a 500 naming a server path).
    codes = []

    def reg_dup():
        b, c = multipart({"name": "dupk", "declared_accuracy": 85, "threads": 1,
                          "max_batch": 2, "runs": 3},
                         {"model": f"{SRC}/models/fmnist/fmnist_mlp/model.onnx"})
        codes.append(http(port, "POST", "/v2/apps/fashion/models", raw=b, ctype=c)[0])
    ths = [threading.Thread(target=reg_dup) for _ in range(3)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(120)
    profs = os.listdir(os.path.join(REPO, "dupk", "profiles"))
    check(sorted(codes) == [201, 409, 409] and len(profs) == 2 and
          not [e for e in os.listdir(REPO) if ".tmp" in e],
          f"concurrent registrations of one name: {codes}, profiles {profs}")

    # Control-plane metrics.
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    loads = re.search(r'vario_scaling_actions_total\{kind="load"\} (\d+)', text)
    check(loads and int(loads.group(1)) >= 1 and "vario_variant_selection_seconds_count" in text
          and "vario_app_slo_violations_total" in text, "/metrics has the control plane's series")

    # A restart after SIGKILL keeps registrations and offline jobs: a job
    # accepted (201) just before the kill runs after the restart (from the
    # rows it had computed, if any) under its id, and a finished one is
    # still answered with its output.
    n_before = len(http(port, "GET", "/v2/apps/fashion")[1]["apps"]["fashion"])
    st, r = http(port, "POST", "/v2/jobs?model=fmnist_cnn_s",
                 raw=open(f"{DATA}/val_inputs.npy", "rb").read(), ctype="application/octet-stream")
    check(st == 201, f"job submitted before the kill: {r}")
    killed_id = r["id"]
    proc.kill()
    proc.wait(timeout=30)
    proc, port = start_server()
    n_after = len(http(port, "GET", "/v2/apps/fashion")[1]["apps"]["fashion"])
    check(n_after == n_before, f"restart keeps registrations ({n_after} variants)")
    st, r = infer(port, {"latency_ms": 100, "min_accuracy": 98})
    check(st == 200 and r["parameters"]["model"] == "lin2", "and serves them")
    st, out = http(port, "GET", f"/v2/jobs/{job1[0]}/output")
    check(st == 200 and out == job1[1], f"job {job1[0]}, done before the kill: same output ({st})")
    for _ in range(1200):
        st, j = http(port, "GET", f"/v2/jobs/{killed_id}")
        if st != 200 or j["state"] in ("done", "failed"):
            break
        time.sleep(0.05)
    st, out = http(port, "GET", f"/v2/jobs/{killed_id}/output")
    res = np.load(io.BytesIO(out)) if st == 200 else None
    check(res is not None and res.shape == (len(Y), 10) and (res.argmax(1) == Y).mean() >= 0.89,
          f"job {killed_id}, accepted before the kill, done after the restart: {j}")
    st, r = http(port, "POST", "/v2/jobs?model=fmnist_cnn_s",
                 raw=open(f"{DATA}/val_inputs.npy", "rb").read(), ctype="application/octet-stream")
    check(st == 201 and r["id"] == killed_id + 1, f"the next job's id follows: {r}")
    proc.terminate()
    proc.wait(timeout=30)
    print("PASS")
finally:
    if proc is not None and proc.poll() is None:  # a failed check: no server left behind
        proc.kill()
        proc.wait(timeout=30)
    shutil.rmtree(TMP, ignore_errors=True)
