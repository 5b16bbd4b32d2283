#!/usr/bin/env python3
"""Markdown table of a loss-term ablation (scripts/ablation.sh, one OUT_DIR per seed): per seed and
per configuration the last validation epoch's figures, then the mean ± sample standard deviation over
the seeds and the per-seed paired difference of each configuration against '2D + depth'.

Usage: python scripts/ablation_table.py RUN_DIR [RUN_DIR ...]   (each RUN_DIR holds 2d_depth/, plus_3d/,
plus_consistency/ with summary.json from depth3dseg-train)
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

RUNS = (('2d_depth', '2D + depth'), ('plus_3d', '+ 3D loss'), ('plus_consistency', '+ consistency'))
KEYS = ('miou_2d', 'miou_3d', 'miou_fused', 'absrel', 'delta1')


def last_epoch(run_dir: Path) -> dict:
    """The last validation epoch of ``run_dir/summary.json`` (FileNotFoundError / KeyError name it)."""
    summary = json.loads((run_dir / 'summary.json').read_text())
    return summary['history'][-1]


def fmt(values: list) -> str:
    if len(values) == 1:
        return f'{values[0]:.3f}'
    return f'{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}'


def main(argv: list) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    dirs = [Path(a) for a in argv]
    figs = {r: [last_epoch(d / r) for d in dirs] for r, _ in RUNS}
    head = '| run | seed | ' + ' | '.join(KEYS) + ' | steps |'
    print(head)
    print('|' + '---|' * (len(KEYS) + 3))
    for r, name in RUNS:
        for d, h in zip(dirs, figs[r]):
            steps = json.loads((d / r / 'summary.json').read_text()).get('global_step', '')
            print(f'| {name} | {d.name} | ' + ' | '.join(f'{h[k]:.3f}' for k in KEYS) + f' | {steps} |')
    print(f'| **mean ± sd over {len(dirs)} seeds** | | | | | | | |')
    for r, name in RUNS:
        print(f'| {name} | all | ' + ' | '.join(fmt([h[k] for h in figs[r]]) for k in KEYS) + ' | |')
    print(f'| **paired difference vs 2D + depth (same seed)** | | | | | | | |')
    for r, name in RUNS[1:]:
        diffs = {k: [a[k] - b[k] for a, b in zip(figs[r], figs['2d_depth'])] for k in KEYS}
        print(f'| {name} − 2D + depth | all | ' + ' | '.join(fmt(diffs[k]) for k in KEYS) + ' | |')
    r, name = RUNS[2]
    diffs = {k: [a[k] - b[k] for a, b in zip(figs['plus_consistency'], figs['plus_3d'])] for k in KEYS}
    print('| + consistency − + 3D loss | all | ' + ' | '.join(fmt(diffs[k]) for k in KEYS) + ' | |')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
