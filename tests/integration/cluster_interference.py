"""Interference across workers (issue 18): each worker measures, per model,
its compute time against the profile its instance measured at load
(runtime/slowdown.h) and publishes that slowdown with its heartbeat; the
controller's INFaaS policy reads it in its snapshot and applies INFaaS's
interference rule (policy/policy.c: slowdown above 1.5 while not
saturated -> migrate to a worker with room; the old copy is unloaded
once the new one serves).

`vario controller --policy infaas --provider local --min-workers 2` starts
two 1-core workers pinned to different cores; the model is placed on one.
Light open-loop load runs through a `vario frontend`; once the worker has
its baseline, CPU hogs pinned to that worker's core slow its batches
down, and the policy moves the model to the other worker. Asserted: the
migration away from the hogged worker (the controller's event and the
routing table), every request answered. Usage: cluster_interference.py
VARIO SOURCE_DIR   (exit 77: no redis-server)"""
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as H  # noqa: E402
from cluster_harness import fail, state, wait  # noqa: E402

vario, src, redis_bin, tmp, procs = H.setup("vario-interf-")
MODEL = "fmnist_resnet"
if len(os.sched_getaffinity(0)) < 2:
    print("skip: one core: the two workers cannot be on different cores")
    sys.exit(77)


def worker_pid(wid):
    """The pid of `vario worker --worker-id wid` (the provider's child)."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            argv = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"worker" in argv and wid.encode() in argv:
            return int(d)
    return 0


def slowdown(url, wid):
    """The model's slowdown as the worker last published it (0: none)."""
    r = subprocess.run([vario, "cluster", "--registry", url, "instances", wid],
                       capture_output=True, text=True)
    for line in r.stdout.splitlines()[1:]:
        f = line.split()
        if f and f[0] == MODEL:
            return float(f[-2])
    return 0.0


hogs = []
try:
    url = H.start_redis(redis_bin)
    repo = H.model_repo(MODEL)
    wrepo = os.path.join(tmp, "wrepo")
    os.makedirs(wrepo)
    cp = H.start_controller(url, repo, [
        "--period-ms", "200", "--policy", "infaas", "--slo-ms", "200", "--worker-idle-s", "600",
        "--min-workers", "2", "--max-workers", "2"] +
        H.worker_args(url, wrepo, 300, "--no-load"))
    fp = H.start_frontend(url)

    def fe_routed():
        return H.routed(fp, MODEL)

    def placed():
        s = state(cp)
        return len(s["workers"]) == 2 and \
            s.get("policy", {}).get("snapshot", {}).get("variants") == 1 and \
            len(fe_routed()) == 1
    wait(placed, "two workers, the model on one, in the policy", timeout=240)
    # light load (8-row requests, Poisson 60/s): batches enough for a
    # measure every heartbeat, far below saturation (INFaaS moves only an
    # instance that is slow without being overloaded)
    load = H.BenchRounds(fp, ["--model", MODEL, "--arrival", "poisson", "--rate", "60",
                              "--connections", "8", "--batch", "8", "--binary"])
    load.start()
    # The worker's baseline (its first batches under this load), and no
    # move under way: on a shared host other processes interfere too, and
    # INFaaS may already have moved the model for them (reported below).
    def moves():
        ev = [e["what"] for e in state(cp)["events"]]
        return (sum("interference mitigation" in e for e in ev),
                sum("(migrated)" in e and "unload" in e and "policy" in e for e in ev))

    def quiet():
        r = fe_routed()
        m = moves()
        return len(r) == 1 and m[0] == m[1] and slowdown(url, r[0]) > 0
    time.sleep(2)
    wait(quiet, "the worker's slowdown measured, no move under way", timeout=120)
    hot = fe_routed()[0]
    started0 = moves()[0]
    pid = worker_pid(hot)
    if not pid:
        fail(f"no process for worker {hot}")
    cores = os.sched_getaffinity(pid)
    other = [w["id"] for w in state(cp)["workers"] if w["id"] != hot][0]
    sd_before = slowdown(url, hot)
    sd_seen = [0.0]
    sampling = threading.Event()
    sampling.set()

    def sample():  # the hot worker's published slowdown while hogged
        while sampling.is_set():
            sd_seen[0] = max(sd_seen[0], slowdown(url, hot))
            time.sleep(0.5)
    ts = threading.Thread(target=sample)
    # four spinning processes on the worker's cores: it gets ~1/5 of them,
    # and a batch (8 rows, ~1 ms) is preempted often enough to show
    for _ in range(4):
        hogs.append(subprocess.Popen(
            [sys.executable, "-c", "while True: pass"],
            preexec_fn=lambda: os.sched_setaffinity(0, cores)))
    t0 = time.time()
    ts.start()
    print(f"1. {MODEL} on {hot} (cores {sorted(cores)}), slowdown {sd_before:.2f}; moves"
          f" before the hogs (interference of this host's other work): {started0}; CPU hogs"
          f" started on them")

    def moved():  # a move started after the hogs, and done: only `other` serves it
        return moves()[0] > started0 and fe_routed() == [other]
    wait(moved, f"INFaaS to migrate {MODEL} from {hot} to {other}", timeout=180)
    t_moved = time.time() - t0
    sampling.clear()
    ts.join()
    for h in hogs:
        h.kill()
    s1 = state(cp)
    ev = [e["what"] for e in s1["events"] if "interference" in e["what"] or
          ("unload" in e["what"] and hot in e["what"])]
    print(f"2. migrated to {other} {t_moved:.1f}s after the hogs started (slowdown on {hot}"
          f" up to {sd_seen[0]:.2f} as published); the old copy unloaded; events: {ev};"
          f" policy {s1['policy']['applied']}")
    res = load.stop()
    print(f"3. load ({len(load.rounds)} rounds of 4 s): {res['sent']} requests, {res['ok']} served,"
          f" {res['dropped']} dropped at their deadline, {res['errors']} errors")
    H.stop_clean()
    print("ok")
finally:
    for h in hogs:
        if h.poll() is None:
            h.kill()
    H.cleanup()
