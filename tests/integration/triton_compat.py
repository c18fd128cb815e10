#!/usr/bin/python3
"""A Triton user's repository and requests on the real server (issue 19):
a Triton model repository of the zoo's models (<m>/<version>/model.onnx +
config.pbtxt, one with no config at all) serves unchanged (outputs equal the
PyTorch reference logits), GET /v2/models/{m}/config in Triton's JSON form,
readiness as Triton's (a model that fails to load keeps the server not
ready), --repo required and checked, a taken port fails before any model
loads, Triton's preferred batch sizes, the classification extension
(with label_filename), Triton's statistics split, and
unsupported parameters/extensions answered 400 naming them.

usage: triton_compat.py VARIO SOURCE_DIR
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import numpy as np

VARIO, SRC = sys.argv[1], sys.argv[2]
DATA = os.path.join(SRC, "models/fmnist-data")
TMP = tempfile.mkdtemp(prefix="vr_triton_")
REPO = os.path.join(TMP, "repo")
ZOO = ["fmnist_linear", "fmnist_mlp", "fmnist_cnn_s", "fmnist_cnn_bn", "fmnist_resnet"]

PBTXT = """# as Triton's docs write them
name: "%s"
platform: "onnxruntime_onnx"
max_batch_size: 16
input [
  {
    name: "input"
    data_type: TYPE_FP32
    dims: [ 1, 28, 28 ]
  }
]
output [
  {
    name: "logits"
    data_type: TYPE_FP32
    dims: [ 10 ]
  }
]
dynamic_batching {
  max_queue_delay_microseconds: 100
  preferred_batch_size: [ 4, 8 ]
}
instance_group [ { count: 1, kind: KIND_CPU } ]
"""

# Triton's preferred batch sizes: a batch of 4 leaves at once, anything
# else waits the (long) max_queue_delay; no deadline (timeout 0) cuts in.
PREF_DELAY_S = 1.5
PBTXT_PREF = """name: "fmnist_pref"
platform: "onnxruntime_onnx"
max_batch_size: 16
input [ { name: "input" data_type: TYPE_FP32 dims: [ 1, 28, 28 ] } ]
output [ { name: "logits" data_type: TYPE_FP32 dims: [ 10 ] label_filename: "labels.txt" } ]
dynamic_batching {
  preferred_batch_size: [ 4 ]
  max_queue_delay_microseconds: %d
  default_queue_policy { default_timeout_microseconds: 0 }
}
""" % int(PREF_DELAY_S * 1e6)
LABELS = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
          "Sneaker", "Bag", "Ankle boot"]


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)
    print("ok:", what)


# The servers this test starts inherit the admin token (repository
# load/unload/index change state: docs/SECURITY.md); requests send it.
TOKEN = os.environ["VARIO_ADMIN_TOKEN"] = "triton-compat-" + os.urandom(8).hex()


def http(port, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    rq = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                headers={"Authorization": "Bearer " + TOKEN})
    try:
        with urllib.request.urlopen(rq, timeout=30) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw.decode(errors="replace")


def make_repo():
    for i, m in enumerate(ZOO):
        ver = "2" if i == 0 else "1"
        os.makedirs(os.path.join(REPO, m, ver))
        shutil.copy(os.path.join(SRC, "models/fmnist", m, "model.onnx"),
                    os.path.join(REPO, m, ver, "model.onnx"))
        if i != 0:  # the first has no config: auto-complete from the graph
            with open(os.path.join(REPO, m, "config.pbtxt"), "w") as f:
                f.write(PBTXT % m)
    os.makedirs(os.path.join(REPO, "fmnist_pref", "1"))
    shutil.copy(os.path.join(SRC, "models/fmnist/fmnist_mlp/model.onnx"),
                os.path.join(REPO, "fmnist_pref", "1", "model.onnx"))
    with open(os.path.join(REPO, "fmnist_pref", "config.pbtxt"), "w") as f:
        f.write(PBTXT_PREF)
    with open(os.path.join(REPO, "fmnist_pref", "labels.txt"), "w") as f:
        f.write("\n".join(LABELS) + "\n")


def serve(extra, log_name):
    log = open(os.path.join(TMP, log_name), "w+")
    p = subprocess.Popen([VARIO, "serve"] + extra, stderr=log, stdout=log)
    return p, log


def wait_port(p, log):
    for _ in range(600):
        log.seek(0)
        m = re.search(r"listening on http://[0-9.]+:(\d+)", log.read())
        if m:
            return int(m.group(1))
        if p.poll() is not None:
            break
        time.sleep(0.05)
    log.seek(0)
    print(log.read())
    check(False, "server started")


def cli_checks():
    r = subprocess.run([VARIO, "serve", "--port", "0"], capture_output=True, text=True)
    check(r.returncode == 2 and "--repo" in r.stderr, "serve without --repo exits 2 naming --repo")
    r = subprocess.run([VARIO, "serve", "--repo", os.path.join(TMP, "nope"), "--port", "0"],
                       capture_output=True, text=True)
    check(r.returncode == 1 and "not a directory" in r.stderr, "serve with a missing --repo exits 1")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    t0 = time.time()
    r = subprocess.run([VARIO, "serve", "--repo", REPO, "--port", str(port)],
                       capture_output=True, text=True, timeout=60)
    s.close()
    check(r.returncode != 0 and "loaded" not in r.stderr,
          f"taken port fails before loading any model ({time.time() - t0:.2f} s)")


def infer_checks(port):
    x = np.load(os.path.join(DATA, "val_inputs.npy"))[:4].astype(np.float32)
    # A 30 s timeout: without one a request gets the model's default 100 ms
    # (Vario's default queue policy), which a stall of the loaded test
    # machine can exceed (504), and these checks are about the answers.
    slow_ok = {"timeout": 30000000}
    for m in ZOO:
        ref = np.load(os.path.join(DATA, "ref", m + ".npy"))[:4]
        st, r = http(port, "POST", f"/v2/models/{m}/infer", {
            "parameters": slow_ok,
            "inputs": [{"name": "input", "datatype": "FP32", "shape": list(x.shape),
                        "data": x.ravel().tolist()}]})
        check(st == 200, f"{m}: infer -> {st} {r}")
        y = np.array(r["outputs"][0]["data"], dtype=np.float32).reshape(4, 10)
        err = float(np.abs(y - ref).max())
        check(err < 1e-3, f"{m}: logits equal the PyTorch reference (max err {err:.2e})")
        want = "2" if m == ZOO[0] else "1"
        _, md = http(port, "GET", f"/v2/models/{m}")
        check(r["model_version"] == want and md["versions"] == [want],
              f"{m}: response and metadata name the served version {want}")
    st, r = http(port, "POST", "/v2/models/fmnist_mlp/infer", {
        "parameters": slow_ok,
        "inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 1, 28, 28],
                    "data": x[:2].ravel().tolist()}],
        "outputs": [{"name": "logits", "parameters": {"classification": 3}}]})
    ref = np.load(os.path.join(DATA, "ref", "fmnist_mlp.npy"))[:2]
    ok = st == 200 and r["outputs"][0]["datatype"] == "BYTES" and r["outputs"][0]["shape"] == [2, 3]
    if ok:
        d = r["outputs"][0]["data"]
        top = [int(d[0].split(":")[1]), int(d[3].split(":")[1])]
        ok = top == [int(ref[0].argmax()), int(ref[1].argmax())] and \
            float(d[0].split(":")[0]) >= float(d[1].split(":")[0])
    check(ok, f"classification extension: top-3 'score:index' per row ({st} {r})")
    base = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 28, 28],
                        "data": x[:1].ravel().tolist()}]}
    for params, where, name in [({"sequence_id": 7}, None, "sequence_id"),
                                ({"sequence_start": True}, None, "sequence_start"),
                                ({"frobnicate": 1}, None, "frobnicate"),
                                ({"shared_memory_region": "r"}, "input", "shared_memory_region"),
                                ({"shared_memory_region": "r"}, "output", "shared_memory_region"),
                                ({"top_k": 2}, "output", "top_k")]:
        body = json.loads(json.dumps(base))
        if where is None:
            body["parameters"] = params
        elif where == "input":
            body["inputs"][0]["parameters"] = params
        else:
            body["outputs"] = [{"name": "logits", "parameters": params}]
        st, r = http(port, "POST", "/v2/models/fmnist_mlp/infer", body)
        check(st == 400 and name in json.dumps(r), f"{where or 'request'} parameter {name} -> {st} {r}")


def burst(port, n):
    """n one-row requests at once; [(seconds, batch_size)] in send order."""
    x = np.load(os.path.join(DATA, "val_inputs.npy"))[:1].astype(np.float32)
    body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 28, 28],
                        "data": x.ravel().tolist()}]}
    out = [None] * n
    t0 = time.time()

    def one(i):
        st, r = http(port, "POST", "/v2/models/fmnist_pref/infer", body)
        out[i] = (time.time() - t0, r["parameters"]["batch_size"] if st == 200 else -st)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
        time.sleep(0.01)
    for t in ts:
        t.join()
    return sorted(out)


def burst_until(port, n, ok):
    """A burst of n, retried (3 tries) while ok(result) fails: the rule is
    deterministic, but a stall of the loaded test machine (a thread that
    starts late, a slow answer) can move a burst past the timing windows.
    A broken batcher fails all three."""
    for _ in range(3):
        r = burst(port, n)
        if ok(r):
            break
        print(f"  (burst of {n} off its timing window, retried: {r})")
    return r


def preferred_checks(port):
    r = burst_until(port, 4, lambda r: all(b == 4 for _, b in r) and r[-1][0] < PREF_DELAY_S / 2)
    check(all(b == 4 for _, b in r) and r[-1][0] < PREF_DELAY_S / 2,
          f"preferred_batch_size 4: 4 requests leave at once as one batch {r}")
    r = burst_until(port, 3, lambda r: all(b == 3 for _, b in r) and r[0][0] >= PREF_DELAY_S * 0.9)
    check(all(b == 3 for _, b in r) and r[0][0] >= PREF_DELAY_S * 0.9,
          f"3 requests (no preferred size) wait max_queue_delay, then go together {r}")

    def six(r):
        fast = [t for t, b in r if b == 4]
        slow = [t for t, b in r if b == 2]
        return (len(fast) == 4 and len(slow) == 2 and max(fast) < PREF_DELAY_S / 2
                and min(slow) >= PREF_DELAY_S * 0.9)
    r = burst_until(port, 6, six)
    check(six(r), f"6 requests: a preferred batch of 4 at once, the other 2 after the delay {r}")


def label_checks(port):
    """Triton's label_filename: classification answers score:index:label."""
    x = np.load(os.path.join(DATA, "val_inputs.npy"))[:4].astype(np.float32)
    ref = np.load(os.path.join(DATA, "ref", "fmnist_mlp.npy"))[:4]
    st, r = http(port, "POST", "/v2/models/fmnist_pref/infer", {
        "inputs": [{"name": "input", "datatype": "FP32", "shape": [4, 1, 28, 28],
                    "data": x.ravel().tolist()}],
        "outputs": [{"name": "logits", "parameters": {"classification": 2}}]})
    ok = st == 200 and r["outputs"][0]["shape"] == [4, 2]
    if ok:
        d = r["outputs"][0]["data"]
        for row in range(4):
            score, idx, label = d[2 * row].split(":", 2)
            ok = ok and int(idx) == int(ref[row].argmax()) and label == LABELS[int(idx)]
    check(ok, f"classification with label_filename: 'score:index:label' ({st} {r})")
    st, c = http(port, "GET", "/v2/models/fmnist_pref/config")
    check(st == 200 and c["output"][0]["label_filename"] == "labels.txt",
          "config names the output's label_filename")
    # a label file that does not match the output is refused at load
    d = os.path.join(REPO, "badlabels")
    os.makedirs(os.path.join(d, "1"))
    shutil.copy(os.path.join(SRC, "models/fmnist/fmnist_mlp/model.onnx"),
                os.path.join(d, "1", "model.onnx"))
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(PBTXT_PREF.replace('"fmnist_pref"', '"badlabels"'))
    with open(os.path.join(d, "labels.txt"), "w") as f:
        f.write("\n".join(LABELS[:9]) + "\n")
    st, r = http(port, "POST", "/v2/repository/models/badlabels/load", {})
    check(st == 400 and "9 labels" in json.dumps(r) and "labels.txt" in json.dumps(r),
          f"a label file of 9 labels for 10 classes fails the load, named: {st} {r}")
    os.remove(os.path.join(d, "labels.txt"))
    st, r = http(port, "POST", "/v2/repository/models/badlabels/load", {})
    check(st in (400, 404) and "labels.txt" in json.dumps(r),
          f"a missing label file fails the load, named: {st} {r}")
    http(port, "POST", "/v2/repository/models/badlabels/unload", {})
    shutil.rmtree(d)


def config_and_stats(port):
    st, c = http(port, "GET", "/v2/models/fmnist_mlp/config")
    check(st == 200 and c["name"] == "fmnist_mlp" and c["platform"] == "onnxruntime_onnx"
          and c["max_batch_size"] == 16 and c["input"][0]["dims"] == [1, 28, 28]
          and c["input"][0]["data_type"] == "TYPE_FP32" and c["output"][0]["dims"] == [10]
          and c["dynamic_batching"]["max_queue_delay_microseconds"] == 100
          and c["dynamic_batching"]["preferred_batch_size"] == [4, 8]
          and c["instance_group"][0]["kind"] == "KIND_CPU", f"config in Triton's JSON form: {c}")
    st, c = http(port, "GET", f"/v2/models/{ZOO[0]}/config")
    check(st == 200 and c["max_batch_size"] == 4 and c["input"][0]["name"] == "input"
          and c["parameters"]["vario_autocompleted"]["string_value"] == "true",
          "a bare model.onnx is auto-completed from the graph")
    st, _ = http(port, "GET", f"/v2/models/{ZOO[0]}/versions/2/ready")
    check(st == 200, "the served version is the highest directory (2)")
    st, s = http(port, "GET", "/v2/models/fmnist_mlp/stats")
    e = s["model_stats"][0] if st == 200 and s["model_stats"] else {}
    inf = e.get("inference_stats", {})
    check(all(k in inf for k in ("success", "queue", "compute_input", "compute_infer",
                                 "compute_output")) and inf["compute_infer"]["count"] > 0
          and e.get("batch_stats") and e["batch_stats"][0]["compute_infer"]["count"] > 0,
          f"stats: inference_stats split and batch_stats ({json.dumps(e)[:300]})")
    # Triton's HTTP extensions Vario lacks: 400 naming the extension
    for method, path, name in [("GET", "/v2/systemsharedmemory/status", "shared-memory"),
                               ("POST", "/v2/systemsharedmemory/region/r/register", "shared-memory"),
                               ("GET", "/v2/cudasharedmemory/status", "CUDA shared-memory"),
                               ("GET", "/v2/trace/setting", "trace"),
                               ("GET", "/v2/models/fmnist_mlp/trace/setting", "trace"),
                               ("GET", "/v2/models/fmnist_mlp/versions/1/trace/setting", "trace"),
                               ("GET", "/v2/logging", "logging")]:
        st, r = http(port, method, path, {} if method == "POST" else None)
        check(st == 400 and f"{name} extension" in r.get("error", ""),
              f"{method} {path}: 400 naming the extension ({st} {r})")
    # the Prometheus name map (docs/TRITON_METRICS.md) reads only series the
    # server exports
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
        families = set(re.findall(r"^# TYPE (\S+)", r.read().decode(), re.M))
    rules = open(os.path.join(SRC, "docs/prometheus/triton_names.rules.yml")).read()
    used = {re.sub(r"_(sum|count|bucket)$", "", n)
            for n in re.findall(r"expr:.*?\b(vario_[a-z_]+)", rules)}
    check(used and used <= families,
          f"triton_names.rules.yml reads exported series only (missing: {used - families})")


def main():
    make_repo()
    cli_checks()
    p, log = serve(["--repo", REPO, "--port", "0"], "serve.log")
    try:
        port = wait_port(p, log)
        st, _ = http(port, "GET", "/v2/health/ready")
        check(st == 200, "ready once every model of the repository is loaded")
        st, idx = http(port, "POST", "/v2/repository/index", {})
        check(st == 200 and len(idx) == 6 and all(e["state"] == "READY" for e in idx),
              f"repository index: {idx}")
        infer_checks(port)
        config_and_stats(port)
        preferred_checks(port)
        # model control as Triton's: a load of a loaded model reloads it
        # and it keeps serving; parameters Vario cannot honour are refused
        st, _ = http(port, "POST", "/v2/repository/models/fmnist_mlp/load", {})
        st2, _ = http(port, "GET", "/v2/models/fmnist_mlp/ready")
        check(st == 200 and st2 == 200, f"load of a loaded model reloads it ({st}, ready {st2})")
        st, r = http(port, "POST", "/v2/repository/models/fmnist_mlp/load",
                     {"parameters": {"config": "{\"max_batch_size\": 2}"}})
        check(st == 400 and "config" in json.dumps(r), f"load parameter config refused: {st} {r}")
        st, r = http(port, "POST", "/v2/repository/models/fmnist_mlp/unload",
                     {"parameters": {"frobnicate": True}})
        check(st == 400 and "frobnicate" in json.dumps(r), f"unknown unload parameter refused: {st} {r}")
        label_checks(port)
        st, _ = http(port, "GET", "/v2/health/ready")
        check(st == 200, "ready again once the bad model is unloaded")
        # a model that cannot load keeps the server not ready (Triton)
        os.makedirs(os.path.join(REPO, "seq", "1"))
        shutil.copy(os.path.join(SRC, "models/fmnist/fmnist_linear/model.onnx"),
                    os.path.join(REPO, "seq", "1", "model.onnx"))
        with open(os.path.join(REPO, "seq", "config.pbtxt"), "w") as f:
            f.write('name: "seq"\nmax_batch_size: 4\nsequence_batching { }\n')
        st, r = http(port, "POST", "/v2/repository/models/seq/load", {})
        check(st == 400 and "sequence_batching" in json.dumps(r), f"unsupported config field named: {r}")
        st, _ = http(port, "GET", "/v2/health/ready")
        check(st == 400, f"not ready (400, as Triton) while a wanted model failed to load: {st}")
        http(port, "POST", "/v2/repository/models/seq/unload", {})
        st, _ = http(port, "GET", "/v2/health/ready")
        check(st == 200, "ready again once it is unloaded")
    finally:
        p.terminate()
        p.wait(timeout=30)
    # the same repository with the bad model, from the start: never ready
    p, log = serve(["--repo", REPO, "--port", "0"], "serve2.log")
    try:
        port = wait_port(p, log)
        st, _ = http(port, "GET", "/v2/health/ready")
        check(st == 400, f"a repository with a model that fails to load is not ready (400): {st}")
    finally:
        p.terminate()
        p.wait(timeout=30)
    # an empty repository, or a directory in it that holds no model: ready
    # (nothing to wait for, as Triton) but said in the log, not silent
    empty = os.path.join(TMP, "empty")
    os.makedirs(os.path.join(empty, "notamodel"))
    p, log = serve(["--repo", empty, "--port", "0", "--grpc-port", "-1"], "serve3.log")
    try:
        port = wait_port(p, log)
        st, _ = http(port, "GET", "/v2/health/ready")
        log.seek(0)
        text = log.read()
        check(st == 200 and "holds no model directory" in text
              and "notamodel: not a model directory" in text,
              f"an empty repository is ready and warned about: {st} {text}")
    finally:
        p.terminate()
        p.wait(timeout=30)
    shutil.rmtree(TMP, ignore_errors=True)
    print("triton compat: all checks passed")


main()
