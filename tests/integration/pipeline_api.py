#!/usr/bin/python3
"""Pipelines over HTTP on the real server (issue 14), end to end: the
example fashion_scenes registered with `vario pipeline register`, listed
and shown (tasks, candidate variants, serving state, observed factors);
bad specs answered 400/404/409 with the reason and nothing registered;
inference on every sample canvas with the fan-out matching the detector's
own scores; a bad input shape and an unknown pipeline answered 400/404; a
request with a deadline it cannot meet answered 504 "dropped"; the
pipeline metrics exported; a task's app left without models answered 503
"rejected"; the registration surviving a restart; DELETE.

usage: pipeline_api.py VARIO SOURCE_DIR
"""
import json
import os
import re
import sys
import urllib.parse
import urllib.request

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipeline_harness as H  # noqa: E402
from pipeline_harness import check, http, run  # noqa: E402

H.setup("vr_pipe_", "pipeline-api")
VARIO, P = H.VARIO, H.P
FAST = ["--threads", "1", "--max-batch", "4", "--runs", "3", "--precisions", "fp32", "--quiet"]


def start_server():
    return H.serve("--cores", "64", "--admin-token-file", H.TOKEN_FILE)


X = np.load(f"{P}/sample.npy")
SPEC = open(f"{P}/pipeline.json").read()


def infer(port, rows, params):
    x = X[rows]
    t = {"name": "input", "datatype": "FP32", "shape": list(x.shape), "data": x.ravel().tolist()}
    return http(port, "POST", "/v2/pipelines/fashion_scenes/infer",
                {"inputs": [t], "parameters": params})


LABEL = r'"(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*=' + LABEL +
                    r'(?:,[a-zA-Z_][a-zA-Z0-9_]*=' + LABEL + r')*\})? \S+$')


def check_exposition(text):
    """Every sample line well formed, every family one contiguous block
    after its TYPE line (Prometheus text format 0.0.4)."""
    typed, done, cur, bad = {}, set(), None, []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            if name in typed:
                bad.append(f"a second TYPE line for {name}")
            typed[name] = kind
            continue
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            bad.append(f"malformed: {line!r}")
            continue
        fam = m.group(1)
        for suf in ("_bucket", "_sum", "_count"):
            if fam.endswith(suf) and typed.get(fam[:-len(suf)]) in ("histogram", "summary"):
                fam = fam[:-len(suf)]
        if fam not in typed:
            bad.append(f"{fam} has no TYPE line")
        if fam != cur:
            if fam in done:
                bad.append(f"family {fam} in two blocks")
            if cur:
                done.add(cur)
            cur = fam
    check(not bad, f"/metrics is valid exposition text: {bad[:5]}")


srv = None
try:
    H.register(["fscenes_det_tiny", "fscenes_det_large"], FAST)
    # fmnist_linear with its input named "inpuT" (same length: the ONNX
    # bytes stay valid), for a fan-out whose children name their inputs
    # differently
    renamed = os.path.join(H.TMP, "fmnist_renamed.onnx")
    with open(f"{H.SRC}/models/fmnist/fmnist_linear/model.onnx", "rb") as f:
        onnx_bytes = f.read()
    check(onnx_bytes.count(b"input") >= 2, "fmnist_linear names its input 'input'")
    with open(renamed, "wb") as f:
        f.write(onnx_bytes.replace(b"input", b"inpuT"))
    data = f"{H.SRC}/models/fmnist-data"
    r = run([VARIO, "register", "--store", H.DB, "--repo", H.REPO, "--app", "fashion_b",
             "--name", "fmnist_renamed", "--model", renamed, "--input", f"{data}/val_inputs.npy",
             "--labels", f"{data}/val_labels.npy"] + FAST)
    check(r.returncode == 0, f"register fmnist_renamed {r.stderr.strip()}")
    srv, port = start_server()
    port_s = str(port)

    # -- bad specs: the reason, nothing registered --------------------------
    bad = {
        "not JSON": (b"{", 400, ""),
        "a missing model (app with none)": (SPEC.replace('"app": "fashion"', '"app": "shoes"').encode(),
                                            404, "app 'shoes' has no registered model"),
        "a child that does not take the crops": (
            SPEC.replace('{"name": "garment", "app": "fashion"}',
                         '{"name": "garment", "app": "fscenes_detect"}').encode(),
            400, "sends crops [1,28,28]"),
        "an unknown task": (SPEC.replace('{"task": "garment", "label": "garment"}',
                                         '{"task": "nosuch", "label": "garment"}').encode(),
                            400, "child 'nosuch' is an unknown task"),
        "a cycle": (SPEC.replace('{"name": "garment", "app": "fashion"}',
                                 '{"name": "garment", "app": "fashion", "children": ["detect"]}').encode(),
                    400, "cycle: detect -> garment -> detect"),
    }
    for what, (body, code, part) in bad.items():
        st, j = http(port, "POST", "/v2/pipelines", raw=body)
        check(st == code and part in j.get("error", ""), f"{what}: {st} {j.get('error')}")
    st, j = http(port, "GET", "/v2/pipelines")
    check(st == 200 and j["pipelines"] == [], "nothing registered by the bad specs")

    st, j = http(port, "POST", "/v2/pipelines", raw=SPEC.encode(), token=None)
    check(st == 401, f"registering needs the admin token: {st}")
    st, j = http(port, "GET", "/v2/pipelines", token=None)
    check(st == 200 and j["pipelines"] == [], "reading does not")

    # -- register with the CLI, list, show ---------------------------------
    r = run([VARIO, "pipeline", "register", f"{P}/pipeline.json", "--port", port_s])
    check(r.returncode == 0, f"vario pipeline register: {r.stderr.strip()}")
    r = run([VARIO, "pipeline", "register", f"{P}/pipeline.json", "--port", port_s])
    check(r.returncode != 0 and "already registered" in r.stderr, "a second register is refused")
    r = run([VARIO, "pipeline", "list", "--port", port_s])
    check(r.returncode == 0 and json.loads(r.stdout)["pipelines"][0]["name"] == "fashion_scenes",
          "vario pipeline list")

    # -- inference: fan-out = the detector's detections ---------------------
    for row in range(len(X)):
        st, j = infer(port, [row], {"latency_ms": 5000})
        check(st == 200 and j["outcome"] == "ok", f"canvas {row}: {st} {j.get('error')}")
        root = j["hops"][0]
        scores = np.array(root["outputs"][0]["data"])
        labels = np.array(root["outputs"][1]["data"]).reshape(9, 2)
        want = [(g, "footwear_bag" if labels[g].argmax() else "garment")
                for g in range(9) if scores[g] > 0.5]
        got = [(h["region"], h["task"]) for h in j["hops"][1:]]
        check(got == want and root["fanout"] == len(want),
              f"canvas {row}: fan-out {root['fanout']} = detections {len(want)}")
        check(all(h["queue_ms"] >= 0 and h["compute_ms"] >= 0 and "variant" in h
                  and len(h["outputs"][0]["data"]) == 10 for h in j["hops"][1:]),
              f"canvas {row}: every child answered with variant, times and logits")
    # A front end's allowance (Vario-Due-Us): the end-to-end deadline (+ the
    # last hop's batch) from the query's arrival.
    x = X[[0]]
    body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": list(x.shape),
                                   "data": x.ravel().tolist()}],
                       "parameters": {"latency_ms": 5000}}).encode()
    with urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{port}/v2/pipelines/fashion_scenes/infer", data=body,
            headers={"Content-Type": "application/json"}), timeout=60) as resp:
        due = resp.headers.get("Vario-Due-Us")
        check(resp.status == 200 and due and int(due) >= 5000000,
              f"a pipeline's answer carries Vario-Due-Us: {resp.status} {due}")
    st, j = infer(port, [0, 1], {"latency_ms": 5000, "min_accuracy": 50})
    check(st in (200, 400, 503) and (st != 200 or {h["row"] for h in j["hops"][1:]} <= {0, 1}),
          f"two canvases in one request: {st}")

    # -- errors ----------------------------------------------------------------
    st, j = http(port, "POST", "/v2/pipelines/fashion_scenes/infer",
                 {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 28, 28],
                              "data": [0.0] * 784}]})
    check(st == 400 and "[N,1,84,84]" in j["error"], f"wrong input shape: {st} {j['error']}")
    st, j = http(port, "POST", "/v2/pipelines/nosuch/infer",
                 {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1], "data": [0]}]})
    check(st == 404, f"unknown pipeline: {st}")
    # (A deadline passing mid-pipeline -> 504 "dropped" at the next hop is
    # tested deterministically in tests/unit/test_pipes.c.)
    # 1 us: either gone before the root hop starts (504 dropped) or too
    # short for any variant (400 infeasible), never served late.
    st, j = infer(port, [0], {"latency_ms": 0.001})
    impossible = j.get("outcome")
    check((st, impossible) in ((504, "dropped"), (400, "infeasible"))
          and ("deadline" in j["error"] or "latency_ms" in j["error"]),
          f"a deadline no variant can meet: {st} {j.get('error')}")
    # an accuracy no variant reaches: 400 infeasible; the hop names no
    # variant (none served it), the error names the closest
    st, j = infer(port, [0], {"latency_ms": 5000, "min_accuracy": 100})
    h = j.get("hops", [{}])[0]
    check(st == 400 and j.get("outcome") == "infeasible" and "variant" not in h
          and "closest is" in h.get("error", ""),
          f"an infeasible hop names no serving variant: {st} {h}")

    # -- show: factors, routing, serving ------------------------------------
    r = run([VARIO, "pipeline", "show", "fashion_scenes", "--port", port_s])
    show = json.loads(r.stdout)
    det = show["tasks"][0]
    check(det["name"] == "detect" and len(det["candidate_variants"]) > 0
          and det["multiplicative_factor"] > 0 and det["routing"]
          and "fscenes_detect" in det["serving"]["apps"],
          f"show: detector factor {det['multiplicative_factor']:.2f}, routing {det['routing']}")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as m:
        text = m.read().decode()
    check('vario_pipeline_requests_total{pipeline="fashion_scenes",outcome="ok"}' in text
          and 'vario_pipeline_requests_total{pipeline="fashion_scenes",outcome="%s"} %d' % (
              impossible, 2 if impossible == "infeasible" else 1) in text  # + the accuracy one
          and "vario_pipeline_latency_seconds_bucket" in text
          and 'vario_pipeline_fanout_total{pipeline="fashion_scenes",task="detect"}' in text
          and "vario_pipeline_multiplicative_factor" in text, "pipeline metrics")

    # -- a model registered into a task's app after the pipeline: one of
    # its candidates from then on, the counters kept (the candidates were
    # those of the pipeline's registration until the server restarted);
    # unregistered: no longer one ------------------------------------------
    def candidates(task):
        st, j = http(port, "GET", "/v2/pipelines/fashion_scenes")
        return {v["name"].split("-")[0] for t in j["tasks"] if t["name"] == task
                for v in t["candidate_variants"]}
    ok_before = show["requests"]["ok"]
    with open(f"{H.SRC}/models/fmnist/fmnist_mlp/model.onnx", "rb") as f:
        onnx = f.read()
    st, j = H.vr_http.request(port, "POST", "/v2/apps/fashion/models?name=fmnist_late&"
                              "declared_accuracy=95&threads=1&max_batch=4&runs=3", raw=onnx,
                              ctype="application/octet-stream", token=H.TOKEN)
    check(st == 201, f"fmnist_late registered into app fashion: {st} {j}")
    check("fmnist_late" in candidates("garment") and "fmnist_late" in candidates("footwear_bag"),
          f"a candidate of the pipeline once registered: {candidates('garment')}")
    st, j = http(port, "GET", "/v2/pipelines/fashion_scenes")
    check(j["requests"]["ok"] == ok_before, f"counters kept: {j['requests']} vs {ok_before}")
    st, j = infer(port, [0], {"latency_ms": 5000})
    check(st == 200 and j["outcome"] == "ok", f"served after the refresh: {st} {j.get('error')}")
    st, j = http(port, "DELETE", "/v2/apps/fashion/models/fmnist_late")
    check(st == 200, f"fmnist_late unregistered: {st} {j}")
    check("fmnist_late" not in candidates("garment") and "fmnist_mlp" in candidates("garment"),
          f"no longer a candidate once unregistered: {candidates('garment')}")

    # -- children whose models name their inputs differently: each crop
    # goes in under its own model's input name (a held child request read
    # the name from a stack frame that was gone: every fan-out with both
    # labels had one child rejected) ------------------------------------
    mixed = json.loads(SPEC)
    mixed["name"] = "mixed_inputs"
    mixed["tasks"][0]["adapter"]["threshold"] = 0.0001  # both labels in every canvas
    mixed["tasks"][2]["app"] = "fashion_b"
    st, j = http(port, "POST", "/v2/pipelines", raw=json.dumps(mixed).encode())
    check(st == 201, f"mixed-input pipeline registered: {st} {j.get('error')}")
    for row in range(len(X)):
        x = X[[row]]
        t = {"name": "input", "datatype": "FP32", "shape": list(x.shape), "data": x.ravel().tolist()}
        st, j = http(port, "POST", "/v2/pipelines/mixed_inputs/infer",
                     {"inputs": [t], "parameters": {"latency_ms": 5000}})
        kids = [(h["task"], h["outcome"]) for h in j.get("hops", [])[1:]]
        check(st == 200 and {k for k, _ in kids} == {"garment", "footwear_bag"}
              and all(o == "ok" for _, o in kids), f"mixed inputs, canvas {row}: {st} {kids}")

    # -- a task's app left without models (fmnist_renamed, fashion_b's
    # only one, unregistered): the pipeline keeps its candidates, and a
    # request reaching that task is 503 "rejected" naming the app and the
    # pipeline (it was 500 "failed: no registered app named ...") ----------
    st, j = http(port, "DELETE", "/v2/apps/fashion_b/models/fmnist_renamed")
    check(st == 200, f"fmnist_renamed unregistered: {st} {j}")
    x = X[[0]]
    t = {"name": "input", "datatype": "FP32", "shape": list(x.shape), "data": x.ravel().tolist()}
    st, j = http(port, "POST", "/v2/pipelines/mixed_inputs/infer",
                 {"inputs": [t], "parameters": {"latency_ms": 5000}})
    err = j.get("error", "")
    check(st == 503 and j.get("outcome") == "rejected" and "task 'footwear_bag'" in err
          and "app 'fashion_b' has no registered model" in err and "'mixed_inputs'" in err,
          f"a task's app without models: {st} {j.get('outcome')} {err}")
    http(port, "DELETE", "/v2/pipelines/mixed_inputs")

    # -- a name with a quote and a backslash: escaped in /metrics (the
    # scrape stays parseable), families whole, DELETE answers JSON ----------
    awk = 'fs"q\\x'
    st, j = http(port, "POST", "/v2/pipelines",
                 raw=SPEC.replace('"name": "fashion_scenes"', '"name": ' + json.dumps(awk)).encode())
    check(st == 201, f"awkward name registered: {st} {j.get('error')}")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as m:
        text = m.read().decode()
    check('vario_pipeline_requests_total{pipeline="fs\\"q\\\\x",outcome="ok"} 0' in text,
          "label values escaped")
    check_exposition(text)
    st, j = http(port, "DELETE", "/v2/pipelines/" + urllib.parse.quote(awk, safe=""))
    check(st == 200 and j.get("deleted") == awk, f"DELETE answers JSON naming it: {st} {j}")

    # -- `vario pipeline show/delete NAME` names exactly that pipeline: the
    # name went into the path raw, and the server decoded "fs a%62" to
    # "fs ab", another pipeline, and deleted that one ---------------------
    for nm in ("fs a%62", "fs ab"):
        st, j = http(port, "POST", "/v2/pipelines",
                     raw=SPEC.replace('"name": "fashion_scenes"', '"name": ' + json.dumps(nm)).encode())
        check(st == 201, f"{nm!r} registered: {st} {j.get('error')}")
    r = run([VARIO, "pipeline", "show", "fs a%62", "--port", port_s])
    check(r.returncode == 0 and json.loads(r.stdout)["name"] == "fs a%62",
          f"vario pipeline show 'fs a%62': {r.stdout[:80]} {r.stderr.strip()}")
    r = run([VARIO, "pipeline", "delete", "fs a%62", "--port", port_s])
    check(r.returncode == 0 and json.loads(r.stdout).get("deleted") == "fs a%62",
          f"vario pipeline delete 'fs a%62': {r.stdout.strip()} {r.stderr.strip()}")
    st, j = http(port, "GET", "/v2/pipelines")
    names = [p["name"] for p in j["pipelines"]]
    check("fs ab" in names and "fs a%62" not in names, f"only 'fs a%62' deleted: {names}")
    st, j = http(port, "DELETE", "/v2/pipelines/" + urllib.parse.quote("fs ab", safe=""))
    check(st == 200, f"'fs ab' deleted: {st}")
    # `vario bench --pipeline NAME` too: the name went into the path raw, and
    # the server decoded "fs a%63" to "fs ac", which does not exist
    st, j = http(port, "POST", "/v2/pipelines",
                 raw=SPEC.replace('"name": "fashion_scenes"', '"name": "fs a%63"').encode())
    check(st == 201, f"'fs a%63' registered: {st} {j.get('error')}")
    r = run([VARIO, "bench", "--port", port_s, "--pipeline", "fs a%63", "--rate", "20",
             "--duration", "1", "--binary", "--payloads", "8", "--input", f"{P}/sample.npy",
             "--json", "--no-progress"])
    b = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else {}
    # (ok > 0 and no error: under load a request may be dropped at its SLO)
    check(b.get("sent", 0) > 0 and b.get("ok", 0) > 0 and b.get("errors", 1) == 0,
          f"vario bench --pipeline 'fs a%63': {r.stdout[:200]} {r.stderr.strip()[:200]}")
    st, j = http(port, "DELETE", "/v2/pipelines/" + urllib.parse.quote("fs a%63", safe=""))
    check(st == 200, f"'fs a%63' deleted: {st}")

    # -- restart: still registered; DELETE ----------------------------------
    srv.terminate()
    srv.wait(30)
    srv, port = start_server()
    st, j = infer(port, [3], {"latency_ms": 5000})
    check(st == 200 and j["outcome"] == "ok", "served after a restart (persisted)")
    st, j = http(port, "DELETE", "/v2/pipelines/fashion_scenes", token=None)
    check(st == 401, f"deleting needs the admin token: {st}")
    r = run([VARIO, "pipeline", "delete", "fashion_scenes", "--port", str(port)])
    check(r.returncode == 0, "vario pipeline delete")
    st, j = http(port, "GET", "/v2/pipelines/fashion_scenes")
    check(st == 404, "gone after DELETE")
    srv.terminate()
    rc = srv.wait(30)
    srv = None
    check(rc == 0, "server exits cleanly")
finally:
    H.stop(srv, 30)
