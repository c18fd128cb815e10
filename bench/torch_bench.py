#!/usr/bin/python3
"""PyTorch CPU latency/throughput of a zoo model: the peer column of Vario's
engine benchmark (bench/engine_vs_torch.sh).

    /usr/bin/python3 bench/torch_bench.py --model resnet50 --batch 1 \
        --threads 2 --duration 3 [--json]

NAME is a torchvision architecture of tools/zoo/export_torchvision.py
(rebuilt with weights=None) or a Fashion-MNIST model of
tools/zoo/fmnist_models.py (architecture only). Latency does not depend on
the weight values, so no trained weights are needed.

Runs torch.set_num_threads(T) under torch.inference_mode(): warm-up (at
least 1 run and 0.5 s), then timed runs back to back for S seconds (at least
3 runs, so slow models take longer than S). Prints one line; with --json the keys are those of
`vario perf --json`: p50_ms, p90_ms, p99_ms, throughput (samples/s), gflops
(achieved GFLOP/s = FLOPs per sample x samples/s; FLOPs from
tools/zoo/flops.py: 2 x multiply-adds of Conv, Linear and attention).
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "zoo"))
import fmnist_models  # noqa: E402
import export_torchvision as tv  # noqa: E402
from flops import count_flops  # noqa: E402


def build(name, batch):
    if name in fmnist_models.NAMES:
        torch.manual_seed(0)
        return fmnist_models.build(name).eval(), (batch, 1, 28, 28)
    if name in tv.MODELS:
        return tv.build(name), tv.input_shape(name, batch)
    sys.exit(f"unknown model {name!r}; choose from "
             f"{fmnist_models.NAMES + tv.NAMES}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--duration", "--seconds", dest="seconds", type=float, default=3.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    model, shape = build(args.model, args.batch)
    flops = count_flops(model, (1,) + tuple(shape[1:]))
    x = torch.rand(shape)
    with torch.inference_mode():
        t0 = time.perf_counter()
        n = 0
        while n < 1 or time.perf_counter() - t0 < 0.5:
            model(x)
            n += 1
        lat = []
        t_start = time.perf_counter()
        while len(lat) < 3 or time.perf_counter() - t_start < args.seconds:
            t1 = time.perf_counter()
            model(x)
            lat.append(time.perf_counter() - t1)
        wall = time.perf_counter() - t_start
    lat_ms = np.array(lat) * 1e3
    thr = args.batch * len(lat) / wall
    res = {
        "engine": "pytorch", "torch_version": torch.__version__,
        "model": args.model, "batch": args.batch, "threads": args.threads,
        "iterations": len(lat), "seconds": round(wall, 3),
        "p50_ms": round(float(np.percentile(lat_ms, 50)), 4),
        "p90_ms": round(float(np.percentile(lat_ms, 90)), 4),
        "p99_ms": round(float(np.percentile(lat_ms, 99)), 4),
        "throughput": round(thr, 3),
        "gflops": round(flops * thr / 1e9, 3),
        "flops_per_sample": flops,
    }
    if args.json:
        print(json.dumps(res))
    else:
        print(f"pytorch {args.model} batch {args.batch} threads {args.threads}:"
              f" p50 {res['p50_ms']:.3f} ms p90 {res['p90_ms']:.3f} ms"
              f" p99 {res['p99_ms']:.3f} ms, {thr:.1f} samples/s,"
              f" {res['gflops']:.2f} GFLOP/s ({len(lat)} runs)")


if __name__ == "__main__":
    main()
