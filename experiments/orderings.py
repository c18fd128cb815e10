#!/usr/bin/env python3
"""Headline orderings of the simulator experiments (issue 13), checked on
a table written by experiments/run.sh.

Usage: experiments/orderings.py TABLE.md

Each check compares policies of one experiment. REQUIRED checks hold at
the commit recorded in docs/EXPERIMENTS.md; if one fails, a change broke
it and the exit code is 1. TARGETS are the issue's targets that the
simulator does not meet today (docs/EXPERIMENTS.md says why); they are
printed with their numbers and do not fail the run.
"""
import sys


def load(path):
    rows = {}
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


REQUIRED = [
    lambda t: fewer_at_lower_cost(t, 'proteus_medium', 'infaas', 'sm'),
    lambda t: fewer_at_lower_cost(t, 'proteus_medium', 'infaas', 'cg_mean'),
    lambda t: fewer_at_lower_cost(t, 'proteus_zipf', 'infaas', 'cg_mean'),
    lambda t: (t[('proteus_zipf', 'infaas')][1] <= 0.5 * t[('proteus_zipf', 'clipper')][1],
               'proteus_zipf: infaas cost <= 0.5x clipper'),
    lambda t: (t[('proteus_medium', 'infaas')][1] <= 0.5 * t[('proteus_medium', 'clipper')][1],
               'proteus_medium: infaas cost <= 0.5x clipper'),
    lambda t: cheaper_by(t, 'infaas_flat_low', 'infaas', 'clipper_gpu', 15),
    lambda t: cheaper_by(t, 'infaas_flat_low', 'infaas', 'sm_gpu', 15),
    lambda t: (t[('infaas_fluctuating', 'infaas')][0] < t[('infaas_fluctuating', 'sm_cpu')][0]
               and t[('infaas_fluctuating', 'infaas')][1] <= t[('infaas_fluctuating', 'sm_cpu')][1],
               'infaas_fluctuating: infaas fewer violations than sm_cpu at no more cost'),
    lambda t: (t[('synthetic_interference', 'infaas')][0] * 10 <
               t[('synthetic_interference', 'no_mitigation')][0],
               'synthetic_interference: mitigation cuts violations > 10x'),
]

TARGETS = [
    lambda t: fewer_at_lower_cost(t, 'proteus_zipf', 'infaas', 'sm'),
    lambda t: near_at_fraction(t, 'proteus_medium', 'infaas', 'clipper', 1, 0.5),
    lambda t: near_at_fraction(t, 'proteus_zipf', 'infaas', 'clipper', 1, 0.5),
    lambda t: fewer_at_lower_cost(t, 'infaas_fluctuating', 'infaas', 'sm_gpu'),
    lambda t: near_at_fraction(t, 'infaas_fluctuating', 'infaas', 'clipper_gpu', 1, 0.5),
]


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: orderings.py TABLE.md')
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
        print(f'{failed} required ordering(s) no longer hold; table:')
        sys.stdout.write(open(sys.argv[1]).read())
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
