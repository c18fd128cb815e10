"""Worker replacement through the local provider (issue 18): `vario
controller --provider local --min-workers 2` starts two workers itself;
one is killed with SIGKILL under load through a `vario frontend`; no
request hangs, failures are explicit, the controller removes it and the
provider's replacement registers, gets the model placed and serves. Last,
a worker killed while Redis is paused past the leases leaves at once (the
provider saw it exit), not after the grace the controller gives workers
missing after the pause; and a worker stopped (SIGSTOP) with queries in
its sockets is stopped by the controller after --lost-timeout-s, drains
(SIGTERM with SIGCONT), answers them, and is replaced.
Usage: cluster_autoscale.py VARIO SOURCE_DIR   (exit 77: no redis-server)"""
import json
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_harness as H  # noqa: E402
from cluster_harness import fail, req, state, wait  # noqa: E402,F401

vario, src, redis_bin, tmp, procs = H.setup("vario-autoscale-")
START_S = 20  # a started worker has this long to register (ASan, a loaded box)
LOST_S = 4  # one that dropped out of the registry, this long to come back


def flushall(url):
    """FLUSHALL on the registry's Redis (it lost its data)."""
    host, port = url[len("redis://"):].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as c:
        c.sendall(b"*1\r\n$8\r\nFLUSHALL\r\n")
        if not c.recv(64).startswith(b"+OK"):
            fail("FLUSHALL refused")


try:
    url = H.start_redis(redis_bin)
    repo = H.model_repo("fmnist_linear")
    cp = H.start_controller(url, repo, [
        "--period-ms", "100", "--provider-opt", "share-cores=1", "--min-workers", "2",
        "--max-workers", "3", "--start-timeout-s", str(START_S),
        "--lost-timeout-s", str(LOST_S)] + H.worker_args(url, repo, 500))
    fp = H.start_frontend(url)

    def two_serving():
        s = state(cp)
        return len(s["workers"]) == 2 and all("fmnist_linear" in w["models"] for w in s["workers"])
    wait(two_serving, "two provider-started workers serving fmnist_linear")
    js = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 1, 28, 28],
                                 "data": [0.5] * 784}]}).encode()

    def clients():
        """Four threads querying fmnist_linear through the front end until
        the returned stop(timeout, what) joins them (failing with `what`
        if one still hangs); each answer is (status, seconds, body[:200])."""
        out, lock, done = [], threading.Lock(), threading.Event()

        def loop():
            while not done.is_set():
                t0 = time.time()
                st, b, h = req(fp, "POST", "/v2/models/fmnist_linear/infer", js)
                with lock:
                    out.append((st, time.time() - t0, b[:200]))
        ts = [threading.Thread(target=loop) for _ in range(4)]
        for t in ts:
            t.start()

        def stop(timeout, what):
            done.set()
            for t in ts:
                t.join(timeout)
                if t.is_alive():
                    fail(what)
        return out, stop
    results, stop_clients = clients()
    time.sleep(0.5)
    s0 = state(cp)
    victim = s0["workers"][0]
    os.kill(json.loads(victim["meta"])["pid"], signal.SIGKILL)
    t_gone = wait(lambda: victim["id"] not in [w["id"] for w in state(cp)["workers"]],
                  "the controller to remove the killed worker")
    t_back = wait(two_serving, "a replacement worker serving")
    time.sleep(0.3)
    stop_clients(180, "a request hangs")
    bad = [r for r in results if r[0] != 200]
    if not all(r[0] in (502, 503, 504) and b"error" in r[2] for r in bad):
        fail(f"failures not explicit: {bad[:3]}")
    s1 = state(cp)
    if s1["workers_died"] < 1 or s1["workers_started"] < 3:
        fail(f"provider counts: {s1['workers_started']} started, {s1['workers_died']} died")
    # Redis loses its data with the workers running and older than the
    # start timeout: they re-register at their next heartbeat, and the
    # controller starts none in their place meanwhile.
    time.sleep(START_S + 1)
    started = state(cp)["workers_started"]
    flushall(url)
    wait(two_serving, "the workers to re-register after Redis lost its data", 60)
    time.sleep(1.5)
    # both, waited for (a heartbeat past its lease on a loaded box takes
    # a worker out of the registry until its next beat: see below)
    s2 = {}
    wait(lambda: s2.update(state(cp)) or len(s2["workers"]) == 2,
         "both workers registered after Redis lost its data", 30)
    if s2["workers_started"] != started or len(s2["workers"]) != 2:
        fail(f"after FLUSHALL: {s2['workers_started'] - started} more workers started, "
             f"{[w['id'] for w in s2['workers']]} registered")
    # The controller crashes with its workers running: the next one adopts
    # them (started by the same provider configuration) instead of leaving
    # orphans it can neither stop nor watch. It starts none in their place,
    # sees an adopted worker's death at once (the provider, not the lease)
    # and stops them when it stops itself (H.cleanup).
    procs[1].kill()
    procs[1].wait()
    os.unlink(os.path.join(tmp, "ctl.port"))
    pids = {w["id"]: json.loads(w["meta"])["pid"] for w in s2["workers"]}
    cp = H.start_controller(url, repo, [
        "--period-ms", "100", "--provider-opt", "share-cores=1", "--min-workers", "2",
        "--max-workers", "3", "--start-timeout-s", str(START_S),
        "--lost-timeout-s", str(LOST_S)] + H.worker_args(url, repo, 500))

    def adopted():
        ev = " ".join(e["what"] for e in state(cp)["events"])
        return all(f"worker {i} adopted" in ev for i in pids)
    wait(adopted, "the restarted controller to adopt both workers")
    # Both registered, by their ids, waited for rather than read at one
    # instant: on a loaded box a worker's heartbeat can come past its
    # lease (two heartbeats), and it is out of the registry (the
    # controller logs it gone) until its next beat registers it again;
    # the provider counts it as starting meanwhile (--lost-timeout-s),
    # so none is started in its place.
    time.sleep(1.0)
    wait(lambda: sorted(w["id"] for w in state(cp)["workers"]) == sorted(pids),
         "both adopted workers registered after the restart", 30)
    s3 = state(cp)
    if s3["workers_started"] != 0:
        fail(f"after the restart: {s3['workers_started']} workers started, "
             f"{[w['id'] for w in s3['workers']]} registered")
    for i, pid in pids.items():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            fail(f"adopted worker {i} (pid {pid}) no longer runs")
    orphan = sorted(pids)[0]
    os.kill(pids[orphan], signal.SIGKILL)
    wait(lambda: state(cp)["workers_died"] >= 1, "the adopted worker's death seen by the provider")
    wait(two_serving, "a replacement for the adopted worker serving")
    # Redis paused past the leases (1 s) and a worker killed meanwhile: the
    # controller keeps a worker missing from the registry after the pause
    # for a lease (it may just not have heartbeaten yet), but not one the
    # provider saw exit: it leaves the table at once, not a lease later.
    pids = {w["id"]: json.loads(w["meta"])["pid"] for w in state(cp)["workers"]}
    dead = sorted(pids)[0]
    procs[0].send_signal(signal.SIGSTOP)
    time.sleep(0.3)  # the controller's period in flight is past its provider poll
    os.kill(pids[dead], signal.SIGKILL)
    time.sleep(2.2)
    procs[0].send_signal(signal.SIGCONT)
    t_out = wait(lambda: dead not in [w["id"] for w in state(cp)["workers"]],
                 "the worker killed during the pause to leave the controller's state")
    evs = [e["what"] for e in state(cp)["events"]]
    if not any(e.startswith(f"worker {dead} exited unexpectedly") for e in evs):
        fail(f"the provider did not see {dead} exit: {evs[-12:]}")
    if any(e.startswith(f"worker {dead} missing") for e in evs):
        fail(f"{dead}, seen dead by the provider, kept through the grace: {evs[-12:]}")
    print(f"Redis paused 2.5 s, {dead} killed meanwhile: out {t_out:.2f}s after the pause")
    # A worker stopped (SIGSTOP) with queries in its sockets: it drops out
    # of the registry, and the controller stops it once it has been out for
    # --lost-timeout-s (not --start-timeout-s); the provider's SIGTERM comes
    # with SIGCONT, so it drains: the queries waiting in its sockets are
    # answered within seconds, none waits out the front end's 30-s timeout,
    # and a replacement serves.
    wait(two_serving, "two workers serving before the stop")
    hung = state(cp)["workers"][0]
    hung_pid = json.loads(hung["meta"])["pid"]
    res2, stop_clients = clients()
    time.sleep(0.5)
    os.kill(hung_pid, signal.SIGSTOP)
    tag = f"worker {hung['id']} out of the registry"
    t_hung = wait(lambda: any(e["what"].startswith(tag) for e in state(cp)["events"]),
                  "the controller to stop the stopped worker", 60)
    if t_hung > LOST_S + 15:
        fail(f"the stopped worker was stopped {t_hung:.1f} s after it hung")
    t_rep = wait(two_serving, "a replacement for the stopped worker serving", 90)
    time.sleep(0.3)
    stop_clients(60, "a request to the stopped worker hangs")
    slowest = max(r[1] for r in res2)
    bad2 = [r for r in res2 if r[0] != 200]
    # stopped ~LOST_S + a lease after it hung, then drained at once: not
    # at the provider's SIGKILL 10 s later, nor at the front end's 30 s
    if slowest > LOST_S + 8 or not all(r[0] in (502, 503, 504) and b"error" in r[2] for r in bad2):
        fail(f"queries in the stopped worker's sockets: slowest {slowest:.1f} s (stopped after"
             f" {t_hung:.1f} s), failures {bad2[:3]}")
    wait(lambda: not os.path.exists(f"/proc/{hung_pid}"), "the stopped worker to exit", 60)
    print(f"stopped {hung['id']}: stopped by the controller {t_hung:.2f}s later, replacement"
          f" serving {t_hung + t_rep:.2f}s after; {len(res2)} requests, slowest {slowest:.2f}s,"
          f" {len(bad2)} explicit errors")
    print(f"ok: killed {victim['id']}; removed after {t_gone:.2f}s, replacement serving after"
          f" {t_gone + t_back:.2f}s; {len(results)} requests, {len(bad)} explicit errors;"
          f" workers now {[w['id'] for w in s1['workers']]}; a restarted controller adopted"
          f" {sorted(pids)}")
finally:
    H.cleanup()
