"""A worker follows routing changes through its subscription (issue 18:
"front ends and workers subscribe to routing changes"), over loopback:
redis-server, one `vario worker` with a 30-s heartbeat, and tables
stored with `vario cluster put-routes`. The worker must put each new
version of table "main" in use well before its next heartbeat (the
heartbeat re-read is only the fallback), and a malformed table must be
refused without taking the worker down; a --repo that cannot be created
(for the models fetched from --controller) fails at start-up with a clear
error. Prints the propagation times.
Usage: cluster_worker_routes.py VARIO SOURCE_DIR   (exit 77: no redis-server)"""
import json
import os
import re
import subprocess
import time

import cluster_harness as h

vario, src, redis_bin, tmp, procs = h.setup("vario-wroutes-")
HB_MS = 30000  # a change seen before this elapses came through the subscription


def log_text():
    return open(os.path.join(tmp, "worker.log")).read()


def put(url, body):
    p = subprocess.run([vario, "cluster", "--registry", url, "put-routes", "main", "-"],
                       input=body.encode(), capture_output=True, timeout=60)
    if p.returncode != 0:
        h.fail("put-routes: " + p.stderr.decode())
    m = re.search(rb"version (\d+)", p.stdout + p.stderr)
    if not m:
        h.fail("put-routes printed no version: " + (p.stdout + p.stderr).decode())
    return int(m.group(1))


try:
    url = h.start_redis(redis_bin)
    repo = h.model_repo("fmnist_mlp")
    log = open(os.path.join(tmp, "worker.log"), "w")
    procs.append(subprocess.Popen(
        [vario, "worker", "--registry", url, "--store", url, "--repo", repo, "--port", "0",
         "--port-file", os.path.join(tmp, "w.port"), "--heartbeat-ms", str(HB_MS),
         "--worker-id", "wsub", "--insecure-admin"],
        stdout=log, stderr=log, env=dict(os.environ, VARIO_LOG="info")))
    h.portfile("w")
    h.wait(lambda: "registered at" in log_text(), "the worker to register", 120)
    h.wait(lambda: "following routing changes" in log_text(), "the worker's subscription", 120)
    time.sleep(1.0)  # past the first heartbeat's own read of the tables
    if "no subscription" in log_text():
        h.fail("the worker did not subscribe")
    times = []
    for i in range(3):
        table = {"workers": [{"id": "wsub", "addr": "127.0.0.1:1"},
                             {"id": "other", "addr": "127.0.0.1:2"}],
                 "routes": {"m:fmnist_mlp": ["other"], "m:x%d" % i: ["other", "wsub"]}}
        t0 = time.time()
        v = put(url, json.dumps(table))
        line = "routing table main v%d in use" % v
        h.wait(lambda: line in log_text(), "'%s' in the worker's log" % line, HB_MS / 1000 / 3)
        times.append((time.time() - t0) * 1000)
    print("propagation to the worker, ms (put-routes process included): " +
          " ".join("%.1f" % t for t in times))
    # a table the worker cannot use: refused, logged, the worker stays up
    v = put(url, '{"workers":[{"id":"a","addr":"not-an-address"}],"routes":{}}')
    h.wait(lambda: "routing table v%d" % v in log_text(), "the bad table's warning", HB_MS / 1000 / 3)
    if procs[-1].poll() is not None:
        h.fail("the worker exited on a bad table")
    wp = int(open(os.path.join(tmp, "w.port")).read())
    st, _, _ = h.req(wp, "GET", "/v2/health/live", timeout=10)
    if st != 200:
        h.fail("worker not live after a bad table: %d" % st)
    procs[-1].terminate()
    if procs[-1].wait(60) != 0:
        h.fail("worker exit code %d" % procs[-1].returncode)
    # --controller makes a missing --repo; one that cannot be made is a
    # clear error at start-up, before anything listens
    blocker = os.path.join(tmp, "a-file")
    open(blocker, "w").close()
    r = subprocess.run([vario, "worker", "--controller", "http://127.0.0.1:1", "--repo",
                        os.path.join(blocker, "repo"), "--port", "0", "--insecure-admin"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode == 0 or "--repo" not in r.stderr:
        h.fail("a --repo that cannot be created: exit %d, %r" % (r.returncode, r.stderr[-300:]))
    print("bad --repo:", r.stderr.strip().splitlines()[-1])
    print("PASS")
finally:
    h.cleanup()
