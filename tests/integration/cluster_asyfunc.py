"""The controller's AsyFunc policy across workers (issue 18):
`vario controller --policy asyfunc --provider local --min-workers 2`
starts two 2-core workers; the model (a committed Fashion-MNIST ResNet)
has a block profile next to it in the repository (blocks.json, `vario
perf --blocks --json`), so the controller loads it as an AsyFunc body
(load parameter pair_range). Open-loop load through a `vario frontend` at 1.5 x one
body's R_max (from the profile) then drives the body past alpha R_max: model-level scaling (MLS) places a second
body on the other worker (a worker holds one body per model; the one
with free cores gets it), and layer-level scaling (LLS) pairs a shadow
inside a worker that holds a body once rows queue there (POST
.../shadow with the split table; the worker's heartbeat shows it). When
the load stops the shadows are released and MLS unloads the spare body
(never the last); the model keeps serving throughout.

What is asserted is what the policy decided and the workers did (bodies
on both workers, a shadow attached and released, every request
answered), not how fast: the thresholds are the policy's own (alpha 0.8,
beta 0.6, gamma 2 rows per body) on the latency the profile measured
under whatever build and load runs this.
Usage: cluster_asyfunc.py VARIO SOURCE_DIR   (exit 77: no redis-server)"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as H  # noqa: E402
from cluster_harness import fail, req, state, wait  # noqa: E402

vario, src, redis_bin, tmp, procs = H.setup("vario-asyfunc-")
# --shadow-process: shadows as `vario shadow` processes (shared memory)
SHADOW_PROCESS = "--shadow-process" in sys.argv[3:]
# --grow: start with one worker (--max-workers 2): the second body asks the
# provider for a worker, and the worker left idle after the load goes
GROW = "--grow" in sys.argv[3:]
NW0 = 1 if GROW else 2
MODEL = "fmnist_resnet"


def instances(addr):
    """The model's instances on the worker at host:port ([] if none)."""
    port = int(addr.rsplit(":", 1)[1])
    st, b, _ = req(port, "GET", f"/v2/models/{MODEL}/instances", timeout=10)
    return json.loads(b).get("instances", []) if st == 200 else []


def bodies(s):
    """Worker ids whose copy of the model is a body, from the workers."""
    out = []
    for w in s.get("workers", []):
        if any("body" in i for i in instances(w["addr"])):
            out.append(w["id"])
    return sorted(out)


def shadows(s):
    """(attached so far, cores attached now) over the workers' bodies."""
    att = cores = 0
    for w in s.get("workers", []):
        for i in instances(w["addr"]):
            att += i.get("body", {}).get("shadows_attached", 0)
            cores += i.get("body", {}).get("shadow_threads", 0)
    return att, cores


try:
    url = H.start_redis(redis_bin)
    repo = H.model_repo(MODEL)
    mdir = os.path.join(repo, MODEL)
    r = subprocess.run([vario, "perf", os.path.join(mdir, "model.onnx"), "--blocks", "--name",
                        MODEL, "--cmax", "2", "--bmax", "4", "--runs", "3", "--json"],
                       capture_output=True, text=True)
    if r.returncode:
        fail("vario perf --blocks: " + r.stderr)
    prof = json.loads(r.stdout.splitlines()[0])
    # A shadow must load within the SLO (LLS counts a block's load_ms
    # against it): with none that can, the controller rightly loads the
    # model plain, no body, and this test waits for one in vain. An ASan
    # build on a loaded box measured blocks loading in 170-310 ms (a quiet
    # one well under 100); that is the box, not what is tested here, so
    # each block's load time is capped at a tenth of the SLO. Latencies,
    # memory and sensitivities stay as measured.
    for bl in prof["blocks"]:
        bl["load_ms"] = min(bl["load_ms"], 10.0)
    with open(os.path.join(mdir, "blocks.json"), "w") as f:
        json.dump(prof, f)
    # one 1-core body's R_max as the policy computes it (vr_af_rmax: the
    # best b / t_l over the profiled batches within the SLO, 100 ms)
    rmax = max(b / sum(bl["lat_ms"][0][b - 1] for bl in prof["blocks"]) * 1000.0
               for b in range(1, prof["bmax"] + 1))
    wrepo = os.path.join(tmp, "wrepo")
    os.makedirs(wrepo)
    cp = H.start_controller(url, repo, [
        "--period-ms", "200", "--policy", "asyfunc", "--slo-ms", "100",
        "--af-mls-period-s", "2", "--af-release-ms", "1000", "--worker-cores", "2"] +
        (["--af-shadow-process"] if SHADOW_PROCESS else []) + [
        "--provider-opt", "share-cores=1", "--min-workers", str(NW0), "--max-workers", "2",
        "--worker-idle-s", "3"] + H.worker_args(url, wrepo, 300, "--no-load"))
    fp = H.start_frontend(url)

    def fe_routed():
        return H.routed(fp, MODEL)

    def one_body():
        s = state(cp)
        return len(s["workers"]) == NW0 and \
            s.get("policy", {}).get("snapshot", {}).get("variants") == 1 and \
            len(bodies(s)) == 1 and len(fe_routed()) == 1
    t_up = wait(one_body, f"{NW0} worker(s), the model loaded as a body on one, in the policy",
                timeout=240)
    s0 = state(cp)
    print(f"1. {NW0} worker(s) up; {MODEL} a body on {bodies(s0)} after {t_up:.1f}s")
    # bad shadow and load requests get a clear error; the worker stays up
    wk = [w for w in s0["workers"] if w["id"] in bodies(s0)][0]
    wp = int(wk["addr"].rsplit(":", 1)[1])
    base = f"/v2/repository/models/{MODEL}"
    for path, body, want in ((base + "/shadow", b'{"cores":0,"split":[0,1]}', 400),
                             (base + "/shadow", b'{"cores":1,"split":[0,1]}', 400),
                             (base + "/shadow", b'{"cores":1,"split":[0,2]}', 400),
                             (base + "/shadow", b'[1,2', 400),
                             ("/v2/repository/models/nope/shadow", b'{"cores":1,"split":[0,1]}',
                              404),
                             (base + "/unshadow", b'', 404),
                             (base + "/load", b'{"parameters":{"pair_range":"9:3"}}', 400)):
        st, b, _ = req(wp, "POST", path, body, timeout=30)
        if st != want or b"error" not in b:
            fail(f"POST {path} {body!r}: {st} {b[:200]!r}, wanted {want} with a message")
    if req(wp, "GET", "/v2/health/live")[0] != 200 or not bodies(state(cp)):
        fail("the worker is not serving its body after bad requests")
    print("   bad shadow / pair_range requests: 400/404 with a message; the body still serves")
    # Open loop at 1.5 x one body's R_max in rows (requests of 32 rows):
    # above alpha R_max (0.8) of one body, so MLS adds one, and more than
    # a body serves, so rows queue (LLS). Rounds of 4 s (each reports what
    # it sent and how it was answered) until the policy has acted.
    rate = 1.5 * rmax / 32
    print(f"   one body: R_max {rmax:.0f} rows/s from the profile; load {rate:.0f} requests/s"
          f" of 32 rows")
    load = H.BenchRounds(fp, ["--model", MODEL, "--arrival", "poisson", "--rate", f"{rate:.1f}",
                              "--connections", "64", "--batch", "32", "--binary"])
    t_load = time.time()
    load.start()
    seen = {"att": 0}

    def spread():
        s = state(cp)
        seen["att"] = max(seen["att"], shadows(s)[0])
        if seen["att"] >= 1:
            seen.setdefault("t_shadow", time.time() - t_load)
        nb = len(bodies(s))
        if nb == 2:
            seen.setdefault("t_body", time.time() - t_load)
        return nb == 2 and len(fe_routed()) == 2 and seen["att"] >= 1
    t_spread = wait(spread, "MLS to place a second body on the other worker and LLS to pair a"
                    " shadow", timeout=240)
    s1 = state(cp)
    pol = s1["policy"]
    mls = [e["what"] for e in s1["events"] if "rate above alpha R_max (MLS)" in e["what"]]
    if not mls:
        fail(f"the second body is not MLS's doing: events {s1['events']}")
    if pol["applied"].get("pair_shadow", 0) < 1 or pol["shadows"]["paired"] < 1:
        fail(f"no shadow paired through the controller: {pol}")
    if GROW and (pol["applied"].get("add_worker", 0) < 1 or s1["workers_started"] < 2):
        fail(f"the second worker is not the policy's: started {s1['workers_started']}, {pol}")
    print(f"2. under load: bodies on {bodies(s1)} (both route) after {t_spread:.1f}s"
          f" ({mls[0]}; second body seen at {seen['t_body']:.1f}s, first shadow at"
          f" {seen['t_shadow']:.1f}s{' as a process' if SHADOW_PROCESS else ''}); shadows"
          f" paired {pol['shadows']['paired']}, policy {pol['applied']}")
    res = load.stop()
    print(f"3. load ({len(load.rounds)} rounds of 4 s): {res['sent']} requests of 32 rows, {res['ok']} served, {res['dropped']}"
          f" dropped, {res['rejected']} rejected, {res['errors']} errors")

    def calm():
        s = state(cp)
        return shadows(s)[1] == 0 and s["policy"]["shadows"]["released"] >= 1 and \
            len(bodies(s)) == 1 and len(fe_routed()) == 1 and \
            (not GROW or (len(s["workers"]) == 1 and s["workers_removed"] >= 1))
    t_calm = wait(calm, "the shadows released and the spare body unloaded (not the last)",
                  timeout=240)
    js = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 28, 28],
                                 "data": [0.5] * 784}]}).encode()
    st, b, _ = req(fp, "POST", f"/v2/models/{MODEL}/infer", js)
    if st != 200:
        fail(f"the last body does not serve: {st} {b[:200]}")
    s2 = state(cp)
    print(f"4. idle: shadows released ({s2['policy']['shadows']}), spare body unloaded"
          f"{', the idle worker released' if GROW else ''} after {t_calm:.1f}s; the model still"
          f" serves; policy {s2['policy']['applied']}")
    H.stop_clean()
    print("ok")
finally:
    H.cleanup()
