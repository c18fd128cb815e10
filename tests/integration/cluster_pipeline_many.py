"""The controller reads every stored pipeline, up to VR_PIPES_MAX (64, the
most a server registers and a worker follows): redis-server, the example
pipeline's models registered in the Redis store, 17 copies of the example
pipeline registered through `vario serve` on that store, then `vario
controller --store --pipeline-policy loki` (no workers, no provider): its
state lists all 17 (it kept 16 and ignored the 17th without a word, so
that one was never planned), one planned and 16 not, with the reason (they
share its models, and one plan holds a model's instances). Once the others
are deleted, the one left is planned. The 17th is named "fs 16 q%" (a space and a
'%', and so no registry id): once the others are deleted and a worker
joins, the worker follows the plan the controller made for it (the plan
went to registry table "pipe.fs 16 q%", which the registry refused, and
the worker served it without a plan, without a word). Then the model its
plan takes for the garment tasks is unregistered: the controller plans
afresh over the models left (it kept planning the gone one).
Usage: cluster_pipeline_many.py VARIO SOURCE_DIR (exit 77: no redis-server)"""
import json
import os
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as H  # noqa: E402
import vr_http  # noqa: E402
from cluster_harness import fail, portfile, procs, run, state  # noqa: E402

vario, src, redis_bin, tmp, _ = H.setup("vario-cpmany-")
P = os.path.join(src, "models/pipelines/fashion_scenes")
FAST = ["--threads", "1", "--max-batch", "1", "--runs", "2", "--precisions", "fp32", "--quiet"]
N = 17


try:
    url = H.start_redis(redis_bin)
    repo = os.path.join(tmp, "repo")
    H.register_fashion(vario, url, repo, src, FAST)
    run([vario, "register", "--store", url, "--repo", repo, "--app", "fscenes_detect",
         "--name", "fscenes_det_tiny", "--model", f"{P}/fscenes_det_tiny/model.onnx",
         "--declared-accuracy", "90"] + FAST)
    spec = json.load(open(f"{P}/pipeline.json"))
    srv, port = vr_http.start_server([vario, "serve", "--repo", repo, "--store", url, "--port",
                                      "0", "--insecure-admin"], os.path.join(tmp, "serve.log"))
    procs.append(srv)
    names = [f"fs_{i}" for i in range(N - 1)] + [f"fs {N - 1} q%"]
    for nm in names:
        spec["name"] = nm
        st, j = vr_http.request(port, "POST", "/v2/pipelines", spec)
        if st != 201:
            fail(f"register {nm}: {st} {j}")
    srv.terminate()
    if srv.wait(60) != 0:
        fail("vario serve exit code")
    procs.remove(srv)
    print(f"1. {N} pipelines stored")

    log = open(os.path.join(tmp, "ctl.log"), "w")
    procs.append(subprocess.Popen(
        [vario, "controller", "--registry", url, "--repo", repo, "--port", "0", "--port-file",
         os.path.join(tmp, "ctl.port"), "--store", url, "--pipeline-policy", "loki"],
        stdout=log, stderr=log))
    cp = portfile("ctl")
    end, got, ps = time.time() + 60, [], []
    while time.time() < end:
        ps = state(cp).get("pipelines", {}).get("pipelines", [])
        got = sorted(p["name"] for p in ps)
        if len(got) >= N:
            break
        time.sleep(0.5)
    if got != sorted(names):
        fail(f"the controller lists {len(got)} of the {N} stored pipelines: {got}")
    # the copies share every model: one is planned, the others say why not
    # (each plan held every instance of the models, so plans that differed
    # unloaded each other's)
    out = [p for p in ps if p.get("state") == "not planned"]
    if len(out) != N - 1 or not all("is planned for pipeline" in p["reason"] for p in out):
        fail(f"expected one planned and {N - 1} not planned, naming the other: {ps}")
    print(f"2. the controller lists all {N}: one planned, {N - 1} not (they share its models)")

    log = open(os.path.join(tmp, "w1.log"), "w")
    procs.append(subprocess.Popen(
        [vario, "worker", "--registry", url, "--store", url, "--repo", repo, "--port", "0",
         "--port-file", os.path.join(tmp, "w1.port"), "--worker-id", "w1", "--heartbeat-ms",
         "300", "--insecure-admin",
         # 4 cores whatever the machine: Loki cannot host the example
         # pipeline's 3 tasks on fewer (a 2-core box: "2 worker(s) cannot
         # host pipeline ..."), and this test is about the plan reaching it
         "--cores", "0-3"], stdout=log, stderr=log))
    wp = portfile("w1")
    for nm in names[:-1]:
        st, j = vr_http.request(wp, "DELETE", "/v2/pipelines/" + nm)
        if st != 200:
            fail(f"delete {nm}: {st} {j}")
    path = "/v2/pipelines/" + urllib.parse.quote(names[-1], safe="")
    end, pol = time.time() + 90, {}
    while time.time() < end:
        st, j = vr_http.request(wp, "GET", path)
        pol = j.get("policy", {}) if st == 200 else {}
        if pol.get("name") == "controller" and pol.get("state") == "planned":
            break
        time.sleep(0.5)
    else:
        fail(f"the worker does not follow a plan for {names[-1]!r}: {pol}")
    print(f"3. the worker follows the controller's plan for {names[-1]!r}")

    def plan_models():
        ps = state(cp).get("pipelines", {}).get("pipelines", [])
        return {s["model"] for p in ps for s in p.get("plan", {}).get("slots", [])}
    end = time.time() + 60
    while time.time() < end and "fmnist_mlp" not in plan_models():
        time.sleep(0.5)
    if "fmnist_mlp" not in plan_models():
        fail(f"the plan does not take fmnist_mlp (the most accurate): {plan_models()}")
    st, j = vr_http.request(wp, "DELETE", "/v2/apps/fashion/models/fmnist_mlp")
    if st != 200:
        fail(f"unregister fmnist_mlp: {st} {j}")
    def planned():
        ps = state(cp).get("pipelines", {}).get("pipelines", [])
        return any(p["name"] == names[-1] and "plan" in p for p in ps)
    end = time.time() + 60
    while time.time() < end and ("fmnist_mlp" in plan_models() or not planned()):
        time.sleep(0.5)
    if "fmnist_mlp" in plan_models() or not planned():
        fail(f"the controller still plans the unregistered fmnist_mlp: {plan_models()}")
    print("4. a model unregistered: the controller plans afresh without it")
    H.stop_clean()
    print("PASS")
finally:
    H.cleanup()
