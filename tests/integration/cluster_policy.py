"""The controller's INFaaS policy acting on real workers (issue 18):
`vario controller --policy infaas --provider local --min-workers 1` starts
one 1-core worker; load through a `vario frontend` drives its instance
past INFaaS's utilisation threshold, so the policy asks the provider for
a second worker and replicates the model onto it (the routing table then
names both); when the load stops, the policy unloads the spare copy
(never the last) and releases the idle worker (--worker-idle-s), and the
model keeps serving. Thresholds are the policy's own (vm_util 0.8, slack
1.05); the worker measures the model's latency at load under whatever
build runs this, so a slow (sanitised) build only moves the load needed.
Usage: cluster_policy.py VARIO SOURCE_DIR   (exit 77: no redis-server)"""
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as H  # noqa: E402
from cluster_harness import fail, req, state, wait  # noqa: E402,F401

vario, src, redis_bin, tmp, procs = H.setup("vario-policy-")


MODEL = "fmnist_resnet"  # the slowest committed model: compute-bound under load


try:
    url = H.start_redis(redis_bin)
    repo = H.model_repo(MODEL)
    wrepo = os.path.join(tmp, "wrepo")
    os.makedirs(wrepo)
    cp = H.start_controller(url, repo, [
        "--period-ms", "200", "--policy", "infaas", "--slo-ms", "200", "--worker-idle-s", "2",
        "--provider-opt", "share-cores=1", "--min-workers", "1", "--max-workers", "2"] +
        H.worker_args(url, wrepo, 300))
    fp = H.start_frontend(url)

    def policy_sees_model():
        s = state(cp)
        return s.get("policy", {}).get("snapshot", {}).get("variants") == 1 and \
            len(H.routed(fp, MODEL)) == 1
    t_up = wait(policy_sees_model, "one worker serving the model, measured, in the policy")
    print(f"1. one worker serving {MODEL}, in the policy's snapshot after {t_up:.1f}s")
    js = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 28, 28],
                                 "data": [0.5] * 784}]}).encode()
    # closed loop, 16 connections x 16 rows: the instance runs full
    # batches back to back, at its capacity (rows/s are what the policy
    # counts)
    blog = open(os.path.join(tmp, "bench.log"), "w")
    bench = subprocess.Popen([vario, "bench", "--model", MODEL, "--port", str(fp), "--arrival",
                              "closed", "--connections", "16", "--batch", "16", "--binary",
                              "--duration", "300", "--no-progress", "--json"],
                             stdout=blog, stderr=blog)
    procs.append(bench)
    t_scale = wait(lambda: len(H.routed(fp, MODEL)) == 2,
                   "the policy to add a worker and replicate the model onto it", timeout=240)
    s1 = state(cp)
    bench.send_signal(signal.SIGINT)
    try:
        bench.wait(60)
    except subprocess.TimeoutExpired:
        fail("the load generator did not stop")
    pol = s1["policy"]
    # The second copy comes from the policy's load or, when the new worker
    # starts after the first one fetched the model into the repository
    # directory they share on this host, from the worker's own start-up
    # load (a race seen 1 run in 5): the worker added is the policy's either way.
    if s1["workers_started"] < 2 or pol["applied"].get("add_worker", 0) < 1:
        fail(f"not the policy's doing: started {s1['workers_started']}, policy {pol}")
    print(f"2. under load the policy added"
          f" a worker and replicated {MODEL} onto it: both serve after {t_scale:.1f}s;"
          f" policy {pol['applied']}")

    def shrunk():
        s = state(cp)
        return len(s["workers"]) == 1 and len(H.routed(fp, MODEL)) == 1 and \
            s.get("unloads", {}).get("ok", 0) >= 1 and s.get("workers_removed", 0) >= 1
    t_down = wait(shrunk, "the policy to unload the spare copy and release the idle worker",
                  timeout=240)
    st, b, _ = req(fp, "POST", f"/v2/models/{MODEL}/infer", js)
    if st != 200:
        fail(f"the last copy does not serve: {st} {b[:200]}")
    s2 = state(cp)
    print(f"3. idle: spare copy unloaded, idle worker released after {t_down:.1f}s; the model"
          f" still serves; policy {s2['policy']['applied']}, kept last copy"
          f" {s2['policy']['kept_last_copy']}x")
    H.stop_clean()  # the controller stops the worker it started
    print("ok")
finally:
    H.cleanup()
