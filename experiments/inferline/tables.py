#!/usr/bin/env python3
"""The cost-vs-SLO tables of docs/EXPERIMENTS.md, section (d), from the
files experiments/inferline/run.sh writes:

    python3 experiments/inferline/tables.py experiments/results/inferline/inferline_slo.dat
    python3 experiments/inferline/tables.py experiments/results/inferline/fscenes_slo.dat

One row per (CV, SLO): $/h with the % of queries missing the SLO in
brackets for each policy, then Fig. 5's two ratios (CG-Peak static /
planner cost; CG-Mean static / planner misses).

    python3 experiments/inferline/tables.py --factor1 R/inferline_slo.dat \
        R/fscenes_slo.dat R/cg_factor1.dat

The table under "The coarse batch rule": CG-Peak with the paper's literal
batch rule (experiments/inferline/spread.sh writes cg_factor1.dat) beside
the planner and InferLine of the two cost tables.
"""
import math
import sys

POLICIES = ["inferline", "inferline_plan", "cg_peak", "cg_mean",
            "cg_peak_static", "cg_mean_static"]
HEAD = ("| CV | SLO ms | InferLine | planner only | CG-Peak (AutoScale) | "
        "CG-Mean (AutoScale) | CG-Peak static | CG-Mean static | "
        "CG-Peak static / planner cost | CG-Mean static / planner misses |")


def num(s):
    try:
        return float(s)
    except ValueError:
        return math.nan


def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            cv, slo, pol, cost, miss = line.split()[:5]
            rows.setdefault((int(cv), int(slo)), {})[pol] = (num(cost), num(miss))
    return rows


def cell(v):
    cost, miss = v
    return "nan" if math.isnan(cost) else f"{cost:.3f} ({miss:.3f})"


def miss_ratio(mean_miss, plan_miss):
    if mean_miss == 0 and plan_miss == 0:
        return "both 0"
    if plan_miss == 0:
        return "planner 0"
    if mean_miss == 0:
        return "CG-Mean 0"
    return f"{mean_miss / plan_miss:.0f}x"


def factor1(traffic, example, f1path):
    main_rows = {"traffic": load(traffic), "example": load(example)}
    f1 = {}
    with open(f1path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            pipe, cv, slo, pol, cost, miss = line.split()[:6]
            f1.setdefault((pipe, int(cv), int(slo)), {})[pol] = (num(cost), num(miss))
    print("| pipeline | CV | SLO ms | CG-Peak static, factor 1 | planner only | "
          "CG-Peak static / planner: factor 1 (2) | CG-Peak AutoScale, factor 1 | "
          "InferLine | CG-Peak AutoScale / InferLine, factor 1 |")
    print("|" + "---|" * 9)
    nan = (math.nan, math.nan)
    for pipe in ("traffic", "example"):
        for key in sorted(k for k in f1 if k[0] == pipe):
            r, m = f1[key], main_rows[pipe].get(key[1:], {})
            st, au = r.get("cg_peak_static", nan), r.get("cg_peak", nan)
            plan, il = m.get("inferline_plan", nan), m.get("inferline", nan)
            two = m.get("cg_peak_static", nan)
            r2 = "—" if math.isnan(two[0]) else f"{two[0] / plan[0]:.1f}x"
            print(f"| {pipe} | {key[1]} | {key[2]} | {cell(st)} | {cell(plan)} | "
                  f"{st[0] / plan[0]:.1f}x ({r2}) | {cell(au)} | {cell(il)} | "
                  f"{au[0] / il[0]:.1f}x |")


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--factor1":
        factor1(*sys.argv[2:])
        return
    if len(sys.argv) != 2:
        sys.exit("usage: tables.py SLO_DAT | --factor1 TRAFFIC_DAT EXAMPLE_DAT F1_DAT")
    rows = load(sys.argv[1])
    print(HEAD)
    print("|" + "---|" * 10)
    for key in sorted(rows):
        r = rows[key]
        nan = (math.nan, math.nan)
        cells = [cell(r.get(p, nan)) for p in POLICIES]
        plan, peak, mean = (r.get(p, nan) for p in
                            ("inferline_plan", "cg_peak_static", "cg_mean_static"))
        if math.isnan(peak[0]) or math.isnan(plan[0]) or plan[0] == 0:
            ratios = ["—", "—"]
        else:
            ratios = [f"{peak[0] / plan[0]:.1f}x", miss_ratio(mean[1], plan[1])]
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cells + ratios) + " |")


if __name__ == "__main__":
    main()
