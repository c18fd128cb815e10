#!/usr/bin/python3
"""Issue 12 reproduced against a real `vario serve --store` over loopback:
what a hostile client could do to the server's files and apps. Each check
failed on the code before the fix (see the issue's numbered list).

usage: hostile_client.py VARIO SOURCE_DIR
"""
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../integration"))
import vr_http  # noqa: E402

VARIO, SRC = sys.argv[1], sys.argv[2]
DATA = os.path.join(SRC, "models/fmnist-data")
TMP = tempfile.mkdtemp(prefix="vr_sec_")
DB, REPO = os.path.join(TMP, "store.db"), os.path.join(TMP, "repo")
ROOT = os.path.join(TMP, "data-root")  # --data-root
TOKEN = "sec-" + os.urandom(8).hex()
TOKEN_FILE = os.path.join(TMP, "token")
FAST = ["--threads", "1", "--max-batch", "2", "--runs", "2", "--quiet"]
LIN = f"{SRC}/models/fmnist/fmnist_linear/model.onnx"
OTHER = f"{SRC}/tests/fuzz/seeds/onnx/matmul_softmax.onnx"  # a different input signature
failed = []


def check(cond, what):
    print(("ok:  " if cond else "FAIL:") + " " + what)
    if not cond:
        failed.append(what)


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def start_server(*extra):
    return vr_http.start_server([VARIO, "serve", "--repo", REPO, "--store", DB, "--port", "0",
                                 "--cores", "64", *extra], os.path.join(TMP, "serve.log"))


def http(port, method, path, body=None, raw=None, ctype=None, token=TOKEN):
    return vr_http.request(port, method, path, body, raw, ctype, token)


multipart = vr_http.multipart


def wait_job(port, jid):
    for _ in range(600):
        st, j = http(port, "GET", f"/v2/jobs/{jid}")
        if j.get("state") in ("done", "failed"):
            return j
        time.sleep(0.05)
    return j


proc = None
try:
    with open(TOKEN_FILE, "w") as f:
        f.write(TOKEN + "\n")
    os.makedirs(ROOT)
    shutil.copy(LIN, os.path.join(ROOT, "lin.onnx"))
    shutil.copy(f"{DATA}/val_inputs.npy", os.path.join(ROOT, "x.npy"))
    os.symlink("/etc/passwd", os.path.join(ROOT, "escape.onnx"))
    r = subprocess.run([VARIO, "register", "--store", DB, "--repo", REPO, "--app", "fashion",
                        "--model", LIN, "--val-inputs", f"{DATA}/val_inputs.npy",
                        "--val-labels", f"{DATA}/val_labels.npy", *FAST],
                       capture_output=True, text=True)
    check(r.returncode == 0, "register fmnist_linear with the CLI (local files)")
    victim = os.path.join(TMP, "victim.txt")
    open(victim, "w").write("precious\n")
    proc, port = start_server("--admin-token-file", TOKEN_FILE)
    db_sha = sha(DB)

    # 1. No client-named output: a job cannot overwrite the store or any file.
    for out in [DB, victim]:
        st, r = http(port, "POST", "/v2/apps/fashion/jobs",
                     {"input": f"{DATA}/val_inputs.npy", "output": out, "min_accuracy": 0})
        check(st == 400, f"job with a client-named output {os.path.basename(out)} -> {st}")
    time.sleep(0.3)
    check(sha(DB) == db_sha and open(victim).read() == "precious\n",
          "the store and the victim file are untouched")
    # 1b. Without a token nothing is accepted at all.
    st, r = http(port, "POST", "/v2/apps/fashion/jobs", {"input": "x", "output": DB},
                 token=None)
    check(st == 401, f"job without the token -> {st}")

    # 4. File oracle: every server path gets the same answer (no --data-root).
    answers = set()
    for p in ["/etc/shadow", "/nonexistent", "/dev/zero", f"{DATA}/val_inputs.npy"]:
        st, r = http(port, "POST", "/v2/apps/fashion/models", {"model": p, "name": "h"})
        answers.add((st, r["error"].replace(p, "P")))
        st, r = http(port, "POST", "/v2/apps/fashion/jobs", {"input": p})
        answers.add((st, r["error"].replace(p, "P")))
    check(len(answers) == 1 and list(answers)[0][0] == 400,
          f"server paths (registration, job input) get one answer: {answers}")

    # 2. Registration travels in the body; nothing is read from server paths.
    body, ct = multipart({"name": "lin_up", "declared_accuracy": 80, "threads": 1,
                          "max_batch": 2, "runs": 2}, {"model": open(LIN, "rb").read()})
    st, r = http(port, "POST", "/v2/apps/fashion/models", raw=body, ctype=ct)
    check(st == 201 and r.get("model") == "lin_up", f"multipart registration -> {st} {r}")
    st, r = http(port, "POST", "/v2/apps/fashion/models?name=lin_bin&declared_accuracy=80"
                 "&threads=1&max_batch=2&runs=2", raw=open(LIN, "rb").read(),
                 ctype="application/octet-stream")
    check(st == 201 and r.get("model") == "lin_bin", f"octet-stream registration -> {st} {r}")
    uploads = os.path.join(REPO, ".uploads")
    check(not os.path.isdir(uploads) or os.listdir(uploads) == [],
          "upload scratch files are removed after registration")
    body, ct = multipart({"name": "bad", "declared_accuracy": 80}, {"model": os.urandom(3000)})
    st, r = http(port, "POST", "/v2/apps/fashion/models", raw=body, ctype=ct)
    check(st == 400 and ".uploads" not in r["error"] and TMP not in r["error"],
          f"corrupt upload -> {st}, no server path in the message: {r['error']}")
    # counts are whole: 2.5 threads is refused by name, not read as 2
    st, r = http(port, "POST", "/v2/apps/fashion/models?name=lin_frac&declared_accuracy=80"
                 "&threads=2.5", raw=open(LIN, "rb").read(), ctype="application/octet-stream")
    check(st == 400 and "threads" in r["error"], f"threads=2.5 -> {st} {r}")
    for bad in [b"--x\r\nno", b"", b"--vario\r\n\r\n\r\n--vario--"]:
        st, r = http(port, "POST", "/v2/apps/fashion/models", raw=bad,
                     ctype="multipart/form-data; boundary=vario")
        check(st == 400, f"malformed multipart {bad[:12]!r} -> {st} {r['error']}")

    # 2. One input signature per app: a model that differs cannot take it over.
    body, ct = multipart({"name": "h", "declared_accuracy": 99}, {"model": open(OTHER, "rb").read()})
    st, r = http(port, "POST", "/v2/apps/fashion/models", raw=body, ctype=ct)
    check(st == 409 and "app 'fashion' takes 'input' FP32 [N,1,28,28]" in r["error"],
          f"HTTP registration with another input signature -> {st}: {r['error']}")
    r = subprocess.run([VARIO, "register", "--store", DB, "--repo", REPO, "--app", "fashion",
                        "--model", OTHER, "--name", "h", "--declared-accuracy", "99", *FAST],
                       capture_output=True, text=True)
    check(r.returncode != 0 and "app 'fashion' takes" in r.stderr,
          f"CLI registration with another signature refused: {r.stderr.strip()}")
    x = np.load(f"{DATA}/val_inputs.npy")[:1]
    q = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 28, 28],
                     "data": x.flatten().tolist()}], "parameters": {"latency_ms": 100}}
    st, r = http(port, "POST", "/v2/apps/fashion/infer", q, token=None)
    check(st == 200, f"ordinary queries to the app still served -> {st}")

    # 6. Model-less parameters that used to mean something else silently.
    # max_cost 0 was read as "no limit"
    for bad in [{"latency_ms": 0}, {"latency_ms": -5}, {"max_cost": -1}, {"max_cost": 0}]:
        st, r = http(port, "POST", "/v2/apps/fashion/infer", dict(q, parameters=bad), token=None)
        check(st == 400 and "error" in r, f"{bad} -> {st} {r.get('error')}")

    # DELETE: stops routing at once, drains, answers everything.
    import threading
    pinned = dict(q, parameters={"latency_ms": 100, "model": "lin_bin"})
    seen = []

    def hammer():
        for _ in range(40):
            seen.append(http(port, "POST", "/v2/apps/fashion/infer", pinned, token=None)[0])
    ts = [threading.Thread(target=hammer) for _ in range(3)]
    for t in ts:
        t.start()
    time.sleep(0.1)
    st, r = http(port, "DELETE", "/v2/apps/fashion/models/lin_bin", token=None)
    check(st == 401, f"DELETE without the token -> {st}")
    st, r = http(port, "DELETE", "/v2/apps/fashion/models/lin_bin")
    check(st == 200, f"DELETE /v2/apps/fashion/models/lin_bin -> {st} {r}")
    st2, r2 = http(port, "POST", "/v2/apps/fashion/infer", pinned, token=None)
    check(st2 == 404, f"right after DELETE a query pinned to it -> {st2}")
    for t in ts:
        t.join()
    check(set(seen) <= {200, 404} and 200 in seen,
          f"queries during the DELETE: served or 404, none lost: {sorted(set(seen))}")
    st, apps = http(port, "GET", "/v2/apps/fashion")
    check(all(v["model"] != "lin_bin" for v in apps["apps"]["fashion"]),
          "its variants are gone from GET /v2/apps/fashion")
    st, r = http(port, "GET", "/v2/models/lin_bin")
    check(st == 404, f"and no longer loaded in the runtime -> {st}")
    check(not os.path.exists(os.path.join(REPO, "lin_bin")), "its repository entry is removed")
    st, r = http(port, "DELETE", "/v2/apps/fashion/models/lin_bin")
    check(st == 404, f"DELETE again -> {st}")
    st, r = http(port, "DELETE", "/v2/apps/other/models/lin_up")
    check(st == 404, f"DELETE through another app -> {st}")

    # `vario register --remove` while the server runs: it stops serving it.
    pin_up = dict(q, parameters={"latency_ms": 100, "model": "lin_up"})
    st, r = http(port, "POST", "/v2/apps/fashion/infer", pin_up, token=None)
    check(st == 200, f"lin_up serves before its removal -> {st}")
    r = subprocess.run([VARIO, "register", "--store", DB, "--remove", "lin_up"],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"vario register --remove lin_up: {r.stderr.strip()}")
    def until_404(call, tries):  # -> the last status, polled every 0.1 s
        for _ in range(tries):
            st = call()[0]
            if st == 404:
                break
            time.sleep(0.1)
        return st
    # the control loop notices within a period (1 s)
    st = until_404(lambda: http(port, "POST", "/v2/apps/fashion/infer", pin_up, token=None), 60)
    check(st == 404, f"a running server stops routing to a model removed by the CLI -> {st}")
    # routing stops first; the unload follows once the instance drained
    st = until_404(lambda: http(port, "GET", "/v2/models/lin_up"), 100)
    check(st == 404, f"and unloads it -> {st}")

    # Jobs: input uploaded, output fetched; the path is not shown.
    st, r = http(port, "POST", "/v2/apps/fashion/jobs?min_accuracy=0",
                 raw=open(f"{DATA}/val_inputs.npy", "rb").read(),
                 ctype="application/octet-stream")
    check(st == 201, f"job with an uploaded input -> {st} {r}")
    j = wait_job(port, r["id"])
    check(j["state"] == "done" and j["output"] == f"/v2/jobs/{r['id']}/output"
          and TMP not in json.dumps(j), f"job done; output is a URL, not a path: {j}")
    st, out = http(port, "GET", j["output"])
    check(st == 200 and np.load(io.BytesIO(out)).shape == (1000, 10),
          "GET /v2/jobs/{id}/output returns the .npy")
    st, r = http(port, "GET", j["output"], token=None)
    check(st == 401, f"job output without the token -> {st}")
    st, r = http(port, "GET", "/v2/jobs/999/output")
    check(st == 404, f"unknown job output -> {st}")
    body, ct = multipart({"min_accuracy": 0}, {"input": open(f"{DATA}/val_inputs.npy", "rb").read()})
    st, r = http(port, "POST", "/v2/apps/fashion/jobs", raw=body, ctype=ct)
    check(st == 201, f"multipart job -> {st} {r}")
    st, r = http(port, "POST", "/v2/apps/fashion/jobs", raw=b"\x93NUMPY garbage",
                 ctype="application/octet-stream")
    check(st == 400 and TMP not in r["error"], f"bad uploaded .npy -> {st}: {r['error']}")
    proc.terminate()
    proc.wait(timeout=30)

    # --data-root: server paths under it work, nothing else does.
    proc, port = start_server("--admin-token-file", TOKEN_FILE, "--data-root", ROOT)
    st, r = http(port, "POST", "/v2/apps/fashion/models",
                 {"model": os.path.join(ROOT, "lin.onnx"), "name": "lin_root",
                  "declared_accuracy": 80, "threads": 1, "max_batch": 2, "runs": 2})
    check(st == 201, f"registration from a path under --data-root -> {st} {r}")
    answers = set()
    for p in [os.path.join(ROOT, "escape.onnx"), os.path.join(ROOT, "../store.db"),
              "/etc/passwd", os.path.join(ROOT, "missing.onnx"), ROOT]:
        st, r = http(port, "POST", "/v2/apps/fashion/models", {"model": p, "name": "h2"})
        answers.add((st, r["error"].replace(p, "P")))
    check(len(answers) == 1 and list(answers)[0][0] == 400,
          f"symlink escape, '..', outside, missing, a directory: one answer {answers}")
    st, r = http(port, "POST", "/v2/apps/fashion/jobs",
                 {"input": os.path.join(ROOT, "x.npy"), "min_accuracy": 0})
    check(st == 201, f"job input from under --data-root -> {st} {r}")
    check(wait_job(port, r["id"])["state"] == "done", "and it runs")
    proc.terminate()
    proc.wait(timeout=30)
    proc = None
    # The store still opens (it was never overwritten).
    r = subprocess.run([VARIO, "register", "--store", DB, "--list"], capture_output=True,
                       text=True)
    check(r.returncode == 0 and "lin_root" in r.stdout, "the store is intact after all that")
    # 6. `register --list` (and --remove) never create a store or its directory.
    ghost = os.path.join(TMP, "nodir", "store.db")
    r = subprocess.run([VARIO, "register", "--store", ghost, "--list"], capture_output=True,
                       text=True)
    check(r.returncode == 1 and not os.path.exists(os.path.dirname(ghost)),
          f"register --list on a missing store creates nothing: {r.stderr.strip()}")
finally:
    if proc:
        proc.kill()
        proc.wait()
    shutil.rmtree(TMP, ignore_errors=True)
if failed:
    print(f"{len(failed)} check(s) failed")
    sys.exit(1)
print("PASS")
