#!/usr/bin/env python3
"""Markdown table of the camera-augmentation lever (scripts/ablation_camera.sh, one OUT_DIR per
seed):
per seed and run (``plus_consistency`` = the shipped configuration, ``camera`` = the same with
``augment.camera=real_camera``) the last validation epoch on the held-out synthetic rooms and
``eval_real/report.json`` (depth3dseg-eval on the real-camera bag); then the mean ± sd per run and
the paired (same seed) difference camera − plus_consistency where a seed has both. Runs missing are
skipped.

Usage: python scripts/ablation_camera_table.py OUT_DIR [OUT_DIR ...]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

RUNS = (
    ('plus_consistency', 'shipped config (+ consistency)'),
    ('camera', '+ camera aug (real_camera)'),
)
VAL_KEYS = ('miou_fused', 'miou_2d', 'miou_3d', 'absrel')
REAL_KEYS = ('miou_fused', 'miou_2d', 'miou_3d', 'absrel', 'delta1')


def load(run: Path) -> dict | None:
    """Figures of one run directory (last validation epoch, real-bag report), None if missing."""
    try:
        val = json.loads((run / 'summary.json').read_text())['history'][-1]
        real = json.loads((run / 'eval_real' / 'report.json').read_text())
    except (FileNotFoundError, KeyError, IndexError):
        return None
    return {**{f'val_{k}': val[k] for k in VAL_KEYS}, **{f'real_{k}': real[k] for k in REAL_KEYS}}


def fmt(v: list) -> str:
    """A value, or mean ± sample sd of several, with 3 decimals."""
    return (
        f'{v[0]:.3f}' if len(v) == 1 else f'{statistics.mean(v):.3f} ± {statistics.stdev(v):.3f}'
    )


def main(argv: list) -> int:
    """Print the Markdown tables for the OUT_DIRs in ``argv``; returns the exit status."""
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    keys = [f'val_{k}' for k in VAL_KEYS] + [f'real_{k}' for k in REAL_KEYS]
    figs = {r: {Path(d).name: load(Path(d) / r) for d in argv} for r, _ in RUNS}
    print('| run | seed | ' + ' | '.join(k.replace('_', ' ', 1) for k in keys) + ' |')
    print('|' + '---|' * (len(keys) + 2))
    for r, name in RUNS:
        for seed, f in figs[r].items():
            if f:
                print(f'| {name} | {seed} | ' + ' | '.join(f'{f[k]:.3f}' for k in keys) + ' |')
    for r, name in RUNS:
        fs = [f for f in figs[r].values() if f]
        if len(fs) > 1:
            print(
                f'| {name} | mean ± sd ({len(fs)}) | '
                + ' | '.join(fmt([f[k] for f in fs]) for k in keys)
                + ' |'
            )
    pairs = [
        (figs['camera'][s], figs['plus_consistency'][s])
        for s in figs['camera']
        if figs['camera'][s] and figs['plus_consistency'][s]
    ]
    if pairs:
        print(
            f'| camera − shipped, same seed | {len(pairs)} seed(s) | '
            + ' | '.join(fmt([a[k] - b[k] for a, b in pairs]) for k in keys)
            + ' |'
        )
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
