"""Set-up shared by the pipeline process tests (pipeline_api.py,
pipeline_loki.py, pipeline_inferline.py): arguments, a scratch store and
the admin token, the example pipeline's models registered, `vario serve`
started on port 0, the authorised HTTP call, load from `vario bench
--pipeline`, the policy's view, and the ok/FAIL lines (FAIL shows the
last policy read and the server log's tail). setup() must be called
first."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vr_http  # noqa: E402

VARIO = SRC = P = TMP = DB = REPO = TOKEN = TOKEN_FILE = None
LAST = {}  # the last policy read (pipeline()), shown on failure
_OWN = object()  # http()'s default: the admin token from setup()


def setup(prefix, token_tag):
    """Reads VARIO SOURCE_DIR from argv, makes the scratch directory and a
    fresh admin token (also in VARIO_ADMIN_TOKEN for `vario` clients):
    sets VARIO, SRC, P (the pipeline's folder), TMP, DB, REPO, TOKEN and
    TOKEN_FILE here."""
    global VARIO, SRC, P, TMP, DB, REPO, TOKEN, TOKEN_FILE
    VARIO, SRC = sys.argv[1], sys.argv[2]
    P = os.path.join(SRC, "models/pipelines/fashion_scenes")
    TMP = tempfile.mkdtemp(prefix=prefix)
    DB, REPO = os.path.join(TMP, "store.db"), os.path.join(TMP, "repo")
    TOKEN = os.environ["VARIO_ADMIN_TOKEN"] = token_tag + "-" + os.urandom(8).hex()
    TOKEN_FILE = os.path.join(TMP, "admin.token")
    with open(TOKEN_FILE, "w") as f:
        f.write(TOKEN + "\n")


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        if LAST:
            short = dict(LAST)
            hist = short.pop("history", [])
            print(json.dumps(short, indent=1)[:6000])
            for h in hist:
                print(json.dumps(h))
        log = os.path.join(TMP, "serve.log")
        if os.path.exists(log):
            print("".join(open(log).readlines()[-40:]))
        sys.exit(1)
    print("ok:", what)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def http(port, method, path, body=None, raw=None, token=_OWN):
    """(status, parsed JSON); with the admin token unless token says
    otherwise (None: none)."""
    return vr_http.request(port, method, path, body, raw,
                           token=TOKEN if token is _OWN else token)


def register(detectors, flags):
    """fmnist_linear and fmnist_mlp for app fashion (the committed
    validation set), the given detectors for app fscenes_detect (their
    declared accuracy from config.json); `vario register` FLAGS."""
    data = os.path.join(SRC, "models/fmnist-data")
    for m in ["fmnist_linear", "fmnist_mlp"]:
        r = run([VARIO, "register", "--store", DB, "--repo", REPO, "--app", "fashion",
                 "--model", f"{SRC}/models/fmnist/{m}/model.onnx", "--input",
                 f"{data}/val_inputs.npy", "--labels", f"{data}/val_labels.npy"] + flags)
        check(r.returncode == 0, f"register {m} {r.stderr.strip()}")
    for m in detectors:
        acc = json.load(open(f"{P}/{m}/config.json"))["accuracy"]
        r = run([VARIO, "register", "--store", DB, "--repo", REPO, "--app", "fscenes_detect",
                 "--name", m, "--model", f"{P}/{m}/model.onnx", "--declared-accuracy",
                 str(acc)] + flags)
        check(r.returncode == 0, f"register {m} {r.stderr.strip()}")


def serve(*flags, log="serve.log"):
    """`vario serve` on the scratch store and repo, port 0, more FLAGS,
    logging to TMP/LOG; -> (process, port) once it listens."""
    return vr_http.start_server([VARIO, "serve", "--repo", REPO, "--store", DB,
                                 "--port", "0", *flags], os.path.join(TMP, log))


def register_pipeline(port):
    r = run([VARIO, "pipeline", "register", f"{P}/pipeline.json", "--port", str(port)])
    check(r.returncode == 0, f"vario pipeline register: {r.stderr.strip()}")


def stop(srv, secs):
    """Cleanup for a server still running after a failure: SIGTERM, then
    SIGKILL after secs."""
    if srv:
        srv.terminate()
        try:
            srv.wait(timeout=secs)
        except subprocess.TimeoutExpired:
            srv.kill()
    shutil.rmtree(TMP, ignore_errors=True)


def bench(port, rate, secs, cv=None):
    """Open-loop load on the pipeline in the background (16 connections,
    binary payloads from sample.npy; Gamma arrivals with CV cv if given);
    its stdout is the `vario bench --json` summary."""
    cmd = [VARIO, "bench", "--port", str(port), "--pipeline", "fashion_scenes", "--rate",
           str(rate), "--duration", str(secs), "--connections", "16", "--binary",
           "--payloads", "8", "--input", f"{P}/sample.npy", "--json", "--no-progress"]
    if cv:
        cmd += ["--arrival", "gamma", "--cv", str(cv)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def pipeline(port):
    """GET /v2/pipelines/fashion_scenes (must be 200); remembers its
    policy for check()'s failure output."""
    st, j = http(port, "GET", "/v2/pipelines/fashion_scenes")
    if st != 200:  # (not check(): no ok line for every poll)
        check(False, f"GET /v2/pipelines/fashion_scenes: {st}")
    LAST.clear()
    LAST.update(j.get("policy", {}))
    return j


def wait_plan(port, pred, secs):
    """Polls the policy until it has a plan and pred(policy) holds (or secs
    pass); -> (the last policy, whether pred held)."""
    end = time.time() + secs
    while True:
        pol = pipeline(port)["policy"]
        if "plan" in pol and pred(pol):
            return pol, True
        if time.time() > end:
            return pol, False
        time.sleep(0.5)
