"""The AsyFunc test app shared by the live AsyFunc tests (asyfunc_live.py,
asyfunc_stuck_shadow.py): the test CNN (tests/data/asyfunc/gen_model.py,
or one already generated), registered as app "afapp" (variant family
"afcnn", fp32, 1 thread, max batch 8) in a store, with its block profile
(`vario perf --blocks --store`), so that `vario serve --policy asyfunc`
loads it as a body."""
import os
import shutil
import subprocess
import sys


def run(cmd):
    """stdout of cmd; exits the test with its stderr when it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"FAIL: {' '.join(cmd[:3])}...: {r.stderr.strip()}")
    return r.stdout


def register(vario, src, tmp, model="", cmax=2, runs=3):
    """(db, repo, onnx, perf's output) in tmp. model: the CNN already
    generated (machines without protoc); cmax: the block profile's
    largest core count, the most cores a shadow may get."""
    db, repo, onnx = (os.path.join(tmp, x) for x in ("store.db", "repo", "af_cnn.onnx"))
    if model:
        shutil.copyfile(model, onnx)
    else:
        # --hidden 256: a 12 MB head, so the convolutions' block (its
        # activation arena, ~6.2 MiB at batch 4) is under LLS's memory
        # filter, half a body's memory. With 128 (a 6 MB head) it was
        # over by 1% and shadows held only the first conv and the pool,
        # 0.5% of the work: pairing could not add capacity.
        run(["/usr/bin/python3", os.path.join(src, "tests/data/asyfunc/gen_model.py"), onnx,
             "--size", "64", "--channels", "48", "--hidden", "256"])
    run([vario, "register", "--store", db, "--repo", repo, "--app", "afapp", "--model", onnx,
         "--name", "afcnn", "--threads", "1", "--max-batch", "8", "--precisions", "fp32",
         "--runs", "3", "--declared-accuracy", "90", "--quiet"])
    out = run([vario, "perf", onnx, "--blocks", "--name", "afcnn", "--store", db,
               "--cmax", str(cmax), "--bmax", "4", "--runs", str(runs)])
    return db, repo, onnx, out
