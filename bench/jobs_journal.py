#!/usr/bin/python3
"""What the offline jobs' journal costs: the same 20,000-row job (20 x
the Fashion-MNIST validation set, fmnist_cnn_s fp32, one thread) on two
`vario serve`s over one repository. The first holds the journal
(<repo>/.jobs); the second keeps its jobs in memory (the journal is one
server's). Alternated four times; prints each job's run_s and the ratio
of the medians.
usage: bench/jobs_journal.py [BUILD_DIR] [WORK_DIR]"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "tests/integration"))
import vr_http  # noqa: E402

VARIO = os.path.join(sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build"), "vario")
TMP = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="vr_jobs_journal_")
os.makedirs(TMP, exist_ok=True)
DB, REPO = os.path.join(TMP, "store.db"), os.path.join(TMP, "repo")
TOKEN = "bench-" + os.urandom(4).hex()
with open(os.path.join(TMP, "admin.token"), "w") as f:
    f.write(TOKEN + "\n")

subprocess.run([VARIO, "register", "--store", DB, "--repo", REPO, "--app", "fashion",
                "--model", f"{SRC}/models/fmnist/fmnist_cnn_s/model.onnx", "--threads", "1",
                "--max-batch", "64", "--runs", "3", "--quiet", "--declared-accuracy", "91",
                "--precisions", "fp32"], check=True)
x = np.load(f"{SRC}/models/fmnist-data/val_inputs.npy")
np.save(os.path.join(TMP, "big.npy"), np.concatenate([x] * 20))
with open(os.path.join(TMP, "big.npy"), "rb") as f:
    RAW = f.read()


def serve(name):
    return vr_http.start_server([VARIO, "serve", "--repo", REPO, "--store", DB, "--port", "0",
                                 "--cores", "64", "--admin-token-file",
                                 os.path.join(TMP, "admin.token")],
                                os.path.join(TMP, name + ".log"))


def job(port):
    st, r = vr_http.request(port, "POST", "/v2/jobs?model=fmnist_cnn_s", None, RAW,
                            "application/octet-stream", TOKEN)
    assert st == 201, r
    while True:
        st, j = vr_http.request(port, "GET", f"/v2/jobs/{r['id']}", None, None, None, TOKEN)
        if j["state"] in ("done", "failed"):
            assert j["state"] == "done", j
            return j["run_s"]
        time.sleep(0.05)


procs = []
try:
    a, port_a = serve("journal")  # started first: holds the journal
    procs.append(a)
    b, port_b = serve("memory")   # the same repository: jobs in memory
    procs.append(b)
    runs = {"journal": [], "memory": []}
    order = [("journal", port_a), ("memory", port_b)]
    for k in range(4):
        for name, port in order if k % 2 == 0 else order[::-1]:
            runs[name].append(job(port))
    with open(os.path.join(TMP, "memory.log")) as f:
        assert "another server keeps" in f.read(), "the second server journaled too"
    for name, v in runs.items():
        print(f"{name}: run_s {' '.join(f'{s:.3f}' for s in v)}")
    jm, mm = statistics.median(runs["journal"]), statistics.median(runs["memory"])
    print(f"rows=20000 journal_s={jm:.3f} memory_s={mm:.3f} ratio={jm / mm:.3f}")
finally:
    for p in procs:
        p.terminate()
        p.wait(timeout=30)
