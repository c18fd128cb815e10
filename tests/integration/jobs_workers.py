#!/usr/bin/python3
"""Offline jobs of workers over one repository (control/jobs.h): each
`vario worker` keeps its jobs in a directory of its own,
<repo>/.jobs/<worker-id>, with its own journal, so that neither resumes
nor overwrites the other's, while a plain `vario serve` on the same
repository keeps <repo>/.jobs. A worker killed (SIGKILL) right after
accepting a job and started again under the same id runs that job and
still answers its earlier one. Workers alone, no registry.
usage: jobs_workers.py VARIO SOURCE_DIR"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vr_http  # noqa: E402

VARIO, SRC = sys.argv[1], sys.argv[2]
DATA = os.path.join(SRC, "models/fmnist-data")
TMP = tempfile.mkdtemp(prefix="vr_jobsw_")
DB, REPO = os.path.join(TMP, "store.db"), os.path.join(TMP, "repo")
procs = {}


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        for name in procs:
            path = os.path.join(TMP, name + ".log")
            if os.path.exists(path):
                print(f"--- {name}.log\n" + open(path).read()[-2000:])
        sys.exit(1)
    print("ok:", what)


def start(name, *args):
    procs[name] = vr_http.start_server([VARIO, *args, "--repo", REPO, "--store", DB, "--port", "0",
                                        "--cores", "64", "--insecure-admin"],
                                       os.path.join(TMP, name + ".log"))
    return procs[name][1]


def submit(port):
    st, r = vr_http.request(port, "POST", "/v2/apps/fashion/jobs?min_accuracy=50", None,
                            open(f"{DATA}/val_inputs.npy", "rb").read(),
                            "application/octet-stream")
    check(st == 201, f"job accepted: {st} {r}")
    return r["id"]


def done(port, jid):
    for _ in range(1200):
        st, j = vr_http.request(port, "GET", f"/v2/jobs/{jid}")
        if st != 200 or j["state"] in ("done", "failed"):
            return j
        time.sleep(0.05)
    return j


def output(port, jid):
    st, b = vr_http.request(port, "GET", f"/v2/jobs/{jid}/output")
    return b if st == 200 else None


try:
    r = subprocess.run([VARIO, "register", "--store", DB, "--repo", REPO, "--app", "fashion",
                        "--model", os.path.join(SRC, "models/fmnist/fmnist_linear/model.onnx"),
                        "--declared-accuracy", "85", "--threads", "1", "--max-batch", "4",
                        "--runs", "3", "--quiet"], capture_output=True, text=True)
    check(r.returncode == 0, "register: " + r.stderr[-500:])
    pa = start("wa", "worker", "--id", "wa")
    pb = start("wb", "worker", "--id", "wb")
    ps = start("serve", "serve")
    ids = {name: submit(port) for name, port in (("wa", pa), ("wb", pb), ("serve", ps))}
    check(ids == {"wa": 1, "wb": 1, "serve": 1}, f"each server numbers its own jobs: {ids}")
    for name, port in (("wa", pa), ("wb", pb), ("serve", ps)):
        check(done(port, 1)["state"] == "done", f"{name}'s job 1 done")
    jobs = os.path.join(REPO, ".jobs")
    for name, d in (("wa", os.path.join(jobs, "wa")), ("wb", os.path.join(jobs, "wb")),
                    ("serve", jobs)):
        files = os.listdir(d)
        check("job-1.json" in files and any(f.startswith("out-") for f in files),
              f"{name}'s record and output in {os.path.relpath(d, REPO)}: {sorted(files)}")
        log = open(os.path.join(TMP, name + ".log")).read()
        check("another server keeps" not in log, f"{name} journals its own jobs")
    first = output(pb, 1)
    # wb killed right after a 201, started again under its id
    jid = submit(pb)
    procs["wb"][0].send_signal(signal.SIGKILL)
    procs["wb"][0].wait(timeout=30)
    pb = start("wb", "worker", "--id", "wb")
    check(done(pb, jid)["state"] == "done", f"wb's job {jid}, accepted before the kill, done")
    check(output(pb, 1) == first, "wb's job 1 answers the same output after the restart")
    check(done(pa, 1)["state"] == "done" and submit(pa) == 2,
          "wa, untouched: its job 1 still there, its next id 2")
    print("PASS")
finally:
    for p, _ in procs.values():
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    shutil.rmtree(TMP, ignore_errors=True)
