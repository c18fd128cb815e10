#!/usr/bin/env python3
"""Headline orderings of the simulator experiments (issue 13), checked on
what experiments/run.sh wrote.

Usage: experiments/orderings.py SUMMARY.csv|TABLE.md

SUMMARY.csv (OUT/summary.csv) holds the numbers unrounded; TABLE.md
(OUT/table.md, rounded to 0.01 point and 0.001 cost) is read as before for
result folders written before summary.csv existed. On a failure the
markdown table is printed (table.md beside the file given).

Each check compares policies of one experiment. REQUIRED checks (the
issue's headline orderings that hold, and sanity orderings) hold at the
commit recorded in docs/EXPERIMENTS.md; if one fails, a change broke it
and the exit code is 1. TARGETS are the issue's targets that the
simulator does not meet today (docs/EXPERIMENTS.md says why); they are
printed with their numbers and do not fail the run.
"""
import csv
import os
import sys


def load(path):
    rows = {}
    if path.endswith('.csv'):
        with open(path, newline='') as f:
            for r in csv.DictReader(f):
                rows[(r['experiment'], r['policy'])] = (float(r['slo_violation_pct']),
                                                        float(r['cost']))
        return rows
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if len(cells) != 9 or cells[0] in ('experiment', '') or cells[0].startswith('-'):
            continue
        exp, pol, _req, viol, _p99, _acc, cost, _inst, _work = cells
        rows[(exp, pol)] = (float(viol.rstrip('%')), float(cost))
    return rows


def fewer_at_lower_cost(t, exp, a, b):
    (va, ca), (vb, cb) = t[(exp, a)], t[(exp, b)]
    return (va < vb and ca < cb,
            f'{exp}: {a} {va:.2f}% at {ca:.3f} vs {b} {vb:.2f}% at {cb:.3f}')


def near_at_fraction(t, exp, a, b, points, frac):
    (va, ca), (vb, cb) = t[(exp, a)], t[(exp, b)]
    return (va <= vb + points and ca <= frac * cb,
            f'{exp}: {a} {va:.2f}% at {ca:.3f} vs {b} {vb:.2f}% at {cb:.3f} '
            f'(within {points} point at <= {frac}x cost)')


def cheaper_by(t, exp, a, b, factor):
    (va, ca), (vb, cb) = t[(exp, a)], t[(exp, b)]
    return (ca * factor <= cb,
            f'{exp}: {a} cost {ca:.3f} vs {b} {cb:.3f} ({cb / ca:.1f}x, '
            f'need >= {factor}x)')


# The headline orderings (INFaaS vs the paper's baselines) that
# hold at the commit recorded in docs/EXPERIMENTS.md, plus the sanity
# orderings of the other experiments. One failing is a regression.
REQUIRED = [
    # fewer SLO violations than SM+ at lower cost
    lambda t: fewer_at_lower_cost(t, 'proteus_medium', 'infaas', 'sm'),
    lambda t: fewer_at_lower_cost(t, 'infaas_fluctuating', 'infaas', 'sm_gpu'),
    # within 1 point of the peak-provisioned Clipper+ at <= 0.5x its cost
    lambda t: near_at_fraction(t, 'proteus_zipf', 'infaas', 'clipper', 1, 0.5),
    # the cost half of the same target where the violation half is not met
    lambda t: (t[('proteus_medium', 'infaas')][1] <= 0.5 * t[('proteus_medium', 'clipper')][1],
               'proteus_medium: infaas cost <= 0.5x clipper'),
    lambda t: (t[('infaas_fluctuating', 'infaas')][1] <=
               0.5 * t[('infaas_fluctuating', 'clipper_gpu')][1],
               'infaas_fluctuating: infaas cost <= 0.5x clipper_gpu'),
    lambda t: (t[('infaas_fluctuating', 'infaas')][1] < t[('infaas_fluctuating', 'sm_gpu')][1],
               'infaas_fluctuating: infaas cost < sm_gpu'),
    # >= 15x cheaper than the GPU baselines at flat low load
    lambda t: cheaper_by(t, 'infaas_flat_low', 'infaas', 'clipper_gpu', 15),
    lambda t: cheaper_by(t, 'infaas_flat_low', 'infaas', 'sm_gpu', 15),
    # sanity: CG-Mean (sized for the mean) loses to INFaaS; interference
    # mitigation works
    lambda t: fewer_at_lower_cost(t, 'proteus_medium', 'infaas', 'cg_mean'),
    lambda t: fewer_at_lower_cost(t, 'proteus_zipf', 'infaas', 'cg_mean'),
    lambda t: (t[('synthetic_interference', 'infaas')][0] * 10 <
               t[('synthetic_interference', 'no_mitigation')][0],
               'synthetic_interference: mitigation cuts violations > 10x'),
]

# The targets the simulator does not meet at that commit
# (docs/EXPERIMENTS.md, "(b)", says why): printed with their numbers, not
# failing the run. Move one to REQUIRED when it holds.
# The fluctuating load against Clipper+ GPU holds on the seed the table
# uses with no margin (1.03% against 0.03% + 1 point) and on 2 of 10
# seeds (docs/EXPERIMENTS.md, "Third pass"), so it stays a target: a
# required check at the edge would fail on noise, not on a regression.
TARGETS = [
    lambda t: fewer_at_lower_cost(t, 'proteus_zipf', 'infaas', 'sm'),
    lambda t: near_at_fraction(t, 'proteus_medium', 'infaas', 'clipper', 1, 0.5),
    lambda t: near_at_fraction(t, 'infaas_fluctuating', 'infaas', 'clipper_gpu', 1, 0.5),
]


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: orderings.py SUMMARY.csv|TABLE.md')
    t = load(sys.argv[1])
    failed = 0
    for kind, checks in (('required', REQUIRED), ('target', TARGETS)):
        for check in checks:
            try:
                ok, what = check(t)
            except KeyError as e:
                ok, what = False, f'missing row {e}'
            if kind == 'required':
                failed += not ok
                print(('ok      ' if ok else 'FAILED  ') + what)
            else:
                print(('met     ' if ok else 'not met ') + what + ' [target]')
    if failed:
        table = os.path.join(os.path.dirname(sys.argv[1]), 'table.md')
        print(f'{failed} required ordering(s) no longer hold; table:')
        sys.stdout.write(open(table if os.path.exists(table) else sys.argv[1]).read())
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
