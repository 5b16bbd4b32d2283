#!/usr/bin/env python3
"""Markdown table of a loss-term ablation (scripts/ablation.sh, one OUT_DIR per seed): per seed and
per configuration the last validation epoch's figures, then the mean ± sample standard deviation
over the seeds and the per-seed paired difference of each configuration against '2D + depth'. When
every run directory also holds ``eval_real/report.json`` (``depth3dseg-eval --model RUN/model.pt
--bag "$(python -m depth3dseg_ros.samples bag)" --out RUN/eval_real``), a second table gives the
same for the real-camera bag.

Usage: python scripts/ablation_table.py RUN_DIR [RUN_DIR ...]
(each RUN_DIR holds 2d_depth/, plus_3d/, plus_consistency/ with summary.json from depth3dseg-train)
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

RUNS = (
    ('2d_depth', '2D + depth'),
    ('plus_3d', '+ 3D loss'),
    ('plus_consistency', '+ consistency'),
)
KEYS = ('miou_2d', 'miou_3d', 'miou_fused', 'absrel', 'delta1')


def last_epoch(run_dir: Path) -> dict:
    """The last validation epoch of ``run_dir/summary.json`` (FileNotFoundError / KeyError name
    it)."""
    summary = json.loads((run_dir / 'summary.json').read_text())
    return summary['history'][-1]


def fmt(values: list) -> str:
    """A value, or mean ± sample sd of several, with 3 decimals."""
    if len(values) == 1:
        return f'{values[0]:.3f}'
    return f'{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}'


def table(dirs: list, figs: dict) -> None:
    """Print the per-seed rows, mean ± sd and paired differences of ``figs`` (run -> per-seed
    dicts)."""
    print('| run | seed | ' + ' | '.join(KEYS) + ' |')
    print('|' + '---|' * (len(KEYS) + 2))
    for r, name in RUNS:
        for d, h in zip(dirs, figs[r]):
            print(f'| {name} | {d.name} | ' + ' | '.join(f'{h[k]:.3f}' for k in KEYS) + ' |')
    print(f'| **mean ± sd over {len(dirs)} seeds** |' + ' |' * (len(KEYS) + 1))
    for r, name in RUNS:
        print(f'| {name} | all | ' + ' | '.join(fmt([h[k] for h in figs[r]]) for k in KEYS) + ' |')
    print('| **paired difference (same seed)** |' + ' |' * (len(KEYS) + 1))
    for r, base, name in (
        ('plus_3d', '2d_depth', '+ 3D loss − 2D + depth'),
        ('plus_consistency', '2d_depth', '+ consistency − 2D + depth'),
        ('plus_consistency', 'plus_3d', '+ consistency − + 3D loss'),
    ):
        diffs = {k: [a[k] - b[k] for a, b in zip(figs[r], figs[base])] for k in KEYS}
        print(f'| {name} | all | ' + ' | '.join(fmt(diffs[k]) for k in KEYS) + ' |')


def main(argv: list) -> int:
    """Print the Markdown tables for the RUN_DIRs in ``argv``; returns the exit status."""
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    dirs = [Path(a) for a in argv]
    steps = {
        json.loads((d / r / 'summary.json').read_text()).get('global_step')
        for d in dirs
        for r, _ in RUNS
    }
    print(
        f'Held-out synthetic validation, last epoch ({", ".join(map(str, sorted(steps)))} '
        'steps):\n'
    )
    table(dirs, {r: [last_epoch(d / r) for d in dirs] for r, _ in RUNS})
    reports = [d / r / 'eval_real' / 'report.json' for d in dirs for r, _ in RUNS]
    if all(p.is_file() for p in reports):
        print('\nReal-camera sample bag (python -m depth3dseg_ros.samples bag):\n')
        table(
            dirs,
            {
                r: [json.loads((d / r / 'eval_real' / 'report.json').read_text()) for d in dirs]
                for r, _ in RUNS
            },
        )
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
