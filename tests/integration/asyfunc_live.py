#!/usr/bin/python3
"""AsyFunc live (issue 17): a real `vario serve --policy asyfunc`, a rate
step over loopback, bodies and shadows decided by the policy driver.

A CNN whose convolutions are CPU-sensitive and light in weights, with a
heavy FC head (tests/data/asyfunc/gen_model.py), is registered (fp32,
1 thread) and its block profile is put in the store (`vario perf --blocks
--store`). The server runs twice on the same trace (base rate, a step to
~2x one body's capacity, base again): AsyFunc (shadows allowed) and
AsyFunc- (--af-kappa 0: the same bodies, no shadow). Checks:
  - AsyFunc pairs a shadow during the step (vario_shadows_attached_total)
    and releases it after (vario_shadow_cores back to 0, released_total);
    batches run split with it (vario_paired_batches_total) — asserted with
    the attainment below, since the split comes from a measured profile;
  - every request is answered (200, or 504 dropped at its deadline): none
    lost or failed while shadows come and go;
  - SLO attainment with shadows is higher than without (asserted when the
    machine has 3 idle cores, or with --strict; else reported).
Prints one line per mode with the measured figures (bench/asyfunc_live.sh
runs this script for them).

usage: asyfunc_live.py VARIO SOURCE_DIR [--keep] [--slo-ms X] [--base Q]
       [--burst Q] [--seconds S] [--shadow-process] [--strict] [--model ONNX]
       [--cores N] [--cmax K] [--burst-x F] [--period-ms P]
  --cores N  the server's cores (default 2, the development box);
  --cmax K   the block profile's largest core count, so the most cores a
             shadow may get (default 2). The CI test keeps 2/2: a shadow of
             one core beside a 1-thread body. On a many-core machine
             (bench/asyfunc_device.sh) a shadow of up to K cores pairs
             with the same 1-thread body, which is the set-up the claim
             "shadows absorb a burst" needs (the paper's shadows get
             their own cores, up to C_max).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import af_app  # noqa: E402
import vr_http  # noqa: E402
from af_app import run  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("vario")
ap.add_argument("src")
ap.add_argument("--keep", action="store_true")
ap.add_argument("--slo-ms", type=float, default=0)
ap.add_argument("--base", type=float, default=0)
ap.add_argument("--burst", type=float, default=0)
ap.add_argument("--burst-x", type=float, default=1.7,
                help="the step as a multiple of one body's capacity (when --burst is not given)")
ap.add_argument("--seconds", type=float, default=4)
ap.add_argument("--shadow-process", action="store_true")
ap.add_argument("--cores", type=int, default=2)
ap.add_argument("--cmax", type=int, default=2)
ap.add_argument("--period-ms", type=int, default=50,
                help="the server's control period; LLS also runs as soon as a routed query "
                     "finds the bodies crowded, so provision_ms stays well under it")
ap.add_argument("--model", default="",
                help="the test CNN already generated (gen_model.py --size 64 --channels 48"
                     " --hidden 256), for machines without protoc")
ap.add_argument("--strict", action="store_true",
                help="assert the attainment comparison even on a busy machine")
A = ap.parse_args()
TMP = tempfile.mkdtemp(prefix="vr_aflive_")
DB = REPO = ONNX = ""  # set by af_app.register below


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)
    print("ok:", what)


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for name in ("vario_shadow_cores", "vario_shadows_attached_total",
                 "vario_shadows_released_total", "vario_paired_batches_total",
                 "vario_shadow_rows_total", "vario_shadow_load_ms", "vario_shadow_provision_ms"):
        out[name] = sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))
    return out


def serve(extra, log):
    return vr_http.start_server(
        [A.vario, "serve", "--repo", REPO, "--store", DB, "--port", "0", "--grpc-port", "-1",
         "--insecure-admin", "--cores", str(A.cores), "--policy", "asyfunc", "--control-period-ms", str(A.period_ms),
         "--af-mls-period-s", "3600", "--af-release-ms", "500"] + extra,
        os.path.join(TMP, log))


def one_mode(name, extra, trace, slo):
    proc, port = serve(extra, f"serve_{name}.log")
    try:
        # one query loads the body (query path) before the clock starts
        x = {"name": "x", "datatype": "FP32", "shape": [1, 1, 64, 64], "data": [0.5] * 4096}
        for _ in range(50):
            st, r = vr_http.request(port, "POST", "/v2/apps/afapp/infer",
                                    {"inputs": [x], "parameters": {"latency_ms": 5000}})
            if st == 200:
                break
            time.sleep(0.1)
        check(st == 200, f"{name}: the first query loads a body ({st})")
        seen = []  # (seconds since the trace started, shadow cores)
        stop = threading.Event()
        t0 = time.time()

        provision = set()  # crowd seen -> shadow paired, ms (each shadow's, as sampled)

        def poll():
            while not stop.is_set():
                mm = metrics(port)
                seen.append((time.time() - t0, mm["vario_shadow_cores"]))
                if mm["vario_shadows_attached_total"] > 0:
                    provision.add(mm["vario_shadow_provision_ms"])
                time.sleep(0.02)

        th = threading.Thread(target=poll)
        th.start()
        b = subprocess.run([A.vario, "bench", "--port", str(port), "--app", "afapp",
                            "--arrival", "trace", "--trace", trace, "--binary",
                            "--connections", "64", "--slo-ms", str(slo), "--json",
                            "--no-progress"], capture_output=True, text=True)
        # the step is over: wait for the release (release delay + a period)
        for _ in range(60):
            if metrics(port)["vario_shadow_cores"] == 0:
                break
            time.sleep(0.1)
        stop.set()
        th.join()
        if b.returncode:
            sys.exit(f"FAIL: bench: {b.stderr.strip()}")
        s = json.loads(b.stdout)
        m = metrics(port)
        m["provision"] = sorted(provision)
        return s, m, seen
    finally:
        proc.terminate()
        proc.wait(timeout=60)


LOAD0 = os.getloadavg()[0]
try:
    DB, REPO, ONNX, out = af_app.register(A.vario, A.src, TMP, A.model, A.cmax, runs=5)
    print(out.strip().splitlines()[-1])
    # one body's capacity: the blocks on one core at batch 4
    blk = json.loads(run([A.vario, "perf", ONNX, "--blocks", "--name", "afcnn", "--cmax", "1",
                          "--bmax", "4", "--runs", "3", "--json"]).splitlines()[0])
    b4 = sum(bl["lat_ms"][0][3] for bl in blk["blocks"])  # one core, batch 4
    cap = 4 / b4 * 1000.0
    slo = A.slo_ms or max(50.0, 6 * b4)
    base = A.base or 0.4 * cap
    burst = A.burst or A.burst_x * cap
    T = A.seconds
    # base for T s, the step for T s, base for T s (Poisson, fixed seed)
    import random
    random.seed(7)
    trace = os.path.join(TMP, "step.csv")
    with open(trace, "w") as f:
        t = 0.0
        while t < 3 * T:
            rate = burst if T <= t < 2 * T else base
            t += random.expovariate(rate)
            f.write(f"{t * 1000:.3f},0,{slo}\n")
    print(f"body: {b4:.2f} ms per batch of 4 on 1 core (~{cap:.0f} rows/s); "
          f"SLO {slo:.0f} ms; base {base:.0f} qps, step to {burst:.0f} qps for {T:.0f} s")
    extra = ["--shadow-process"] if A.shadow_process else []
    res = {}
    for name, x in (("asyfunc", extra), ("asyfunc-", ["--af-kappa", "0"])):
        s, m, seen = one_mode(name, x, trace, slo)
        res[name] = (s, m, seen)
        T = A.seconds

        def share(a, b):  # of the samples in [a, b), those with a shadow
            x = [c > 0 for t, c in seen if a <= t < b]
            return sum(x) / len(x) if x else 0.0

        print(f"mode={name} sent={s['sent']} ok={s['ok']} dropped={s['dropped']} "
              f"attainment={s['slo_attainment']:.4f} p99_ms={s['p99_us'] / 1000:.1f} "
              f"errors={s['errors']} shadows_attached={m['vario_shadows_attached_total']:.0f} "
              f"shadows_released={m['vario_shadows_released_total']:.0f} "
              f"paired_batches={m['vario_paired_batches_total']:.0f} "
              f"shadow_rows={m['vario_shadow_rows_total']:.0f} "
              f"shadow_load_ms={m['vario_shadow_load_ms']:.2f} "
              f"max_shadow_cores={max((c for _, c in seen), default=0):.0f} "
              f"provision_ms_max={max(m['provision'], default=0):.2f} "
              f"provision_ms_median={(m['provision'][len(m['provision']) // 2] if m['provision'] else 0):.2f} "
              f"shadow_share_base={share(0, T):.2f} shadow_share_step={share(T, 2 * T):.2f} "
              f"shadow_share_after={share(2 * T + 1, 3 * T):.2f}")
    (s1, m1, _), (s0, m0, _) = res["asyfunc"], res["asyfunc-"]
    check(m1["vario_shadows_attached_total"] >= 1, "AsyFunc paired a shadow during the step")
    check(m1["vario_shadow_cores"] == 0 and
          m1["vario_shadows_released_total"] == m1["vario_shadows_attached_total"],
          "every shadow was released after the step")
    check(m0["vario_shadows_attached_total"] == 0, "AsyFunc- (kappa 0) paired none")
    for name, (s, _, _) in res.items():
        answered = s["ok"] + s["dropped"] + s["rejected"]
        check(answered == s["sent"] and s["errors"] == 0 and s["unfinished"] == 0,
              f"{name}: every request answered ({s['ok']} served, {s['dropped']} dropped at "
              f"their deadline, {s['rejected']} rejected of {s['sent']}), none failed or lost")
    # LLS on arrival: with a long control period, a shadow still comes a
    # tick (not a period) after a routed query finds the bodies crowded.
    # From the server's log: "loaded in X ms, Y ms after the crowd was seen";
    # Y - X is the tick and the wait for the body's batch in progress.
    with open(os.path.join(TMP, "serve_asyfunc.log")) as f:
        lags = [(float(y), float(x)) for x, y in
                re.findall(r"loaded in ([\d.]+) ms, ([\d.]+) ms after the crowd", f.read())]
    if A.period_ms >= 500 and not lags:
        # a periodic tick paired first (its rule sees the exact queue, the
        # route's counts a full batch in service): nothing to time
        print("not checked: no shadow followed a crowd seen by routing")
    elif A.period_ms >= 500:
        check(all(y - x < A.period_ms / 2 for y, x in lags),
              f"shadows paired within half a {A.period_ms}-ms control period of the crowd "
              f"(crowd -> paired, load: {', '.join(f'{y:.1f}/{x:.1f}' for y, x in lags)} ms)")
    else:
        print("crowd -> paired, load (ms):", ", ".join(f"{y:.1f}/{x:.1f}" for y, x in lags))
    # A shadow adds capacity only on a core nobody else wants: the body, the
    # shadow and the HTTP threads need about three. On a machine busy with
    # other work the split batch waits for its slower, descheduled half and
    # the comparison measures the neighbours; it is then reported, not
    # asserted.
    ncpu = os.cpu_count() or 1
    idle = ncpu - LOAD0
    what = (f"SLO attainment with shadows {s1['slo_attainment']:.4f} > without "
            f"{s0['slo_attainment']:.4f}")
    # Whether a paired batch runs depends on the split LLS computes from
    # the block profile (b_S = 0 when the shadow cannot finish its rows in
    # time): a profile measured on a busy machine can make every split 0.
    ran = f"AsyFunc ran batches with the shadow ({m1['vario_paired_batches_total']:.0f})"
    if idle >= 3 or A.strict:
        check(m1["vario_paired_batches_total"] >= 1, ran)
        check(s1["slo_attainment"] > s0["slo_attainment"], what)
    elif m1["vario_paired_batches_total"] < 1:
        print(f"not checked (fails): {ran} — the machine is busy")
    else:
        print(f"not checked ({'holds' if s1['slo_attainment'] > s0['slo_attainment'] else 'fails'}):"
              f" {what} — the machine is busy (load {LOAD0:.1f} on {ncpu} cores before "
              f"the run, {idle:.1f} idle; body + shadow + HTTP need 3)")
finally:
    if A.keep:
        print("kept", TMP)
    else:
        shutil.rmtree(TMP, ignore_errors=True)
