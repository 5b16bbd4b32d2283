#!/usr/bin/env python3
"""Markdown table of the augmentation levers (scripts/ablation_camera.sh, one OUT_DIR per seed):
per seed and run (``plus_consistency`` = the shipped configuration; ``camera`` = the same with
``augment.camera=real_camera``; ``texture`` with ``augment.texture=domain_rand``;
``texture_camera`` with both; ``balance`` with ``loss.class_weights=median_freq``; ``wide`` with
``model.arch.width=1.0``) the last
validation epoch on the held-out synthetic rooms and
``eval_real/report.json`` (depth3dseg-eval on the real-camera bag); then the mean ± sd per run and
the paired (same seed) difference run − plus_consistency where a seed has both. Runs missing are
skipped.

``real gt-miou``: the fused mIoU over the classes that have pixels in the real labels (the sample
frames, depth3dseg_ros.samples; 11 of 13: no books, no tv). depth3dseg-eval's mIoU averages over
classes present in the labels *or* the prediction, so a model that never predicts an absent class
averages over fewer classes than one that does (a 0 for each false class); this column compares
runs over the same classes.

Usage: python scripts/ablation_camera_table.py OUT_DIR [OUT_DIR ...]
  e.g. runs/cam/s0 runs/tex/s0 runs/tex/s1 (OUT_DIRs named alike are one seed)
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

RUNS = (
    ('plus_consistency', 'shipped config (+ consistency)'),
    ('camera', '+ camera aug (real_camera)'),
    ('texture', '+ texture randomisation (domain_rand)'),
    ('texture_camera', '+ texture randomisation + camera aug'),
    ('balance', '+ median-frequency class weights'),
    ('wide', 'encoder width 1.0 (capacity)'),
)
VAL_KEYS = ('miou_fused', 'miou_2d', 'miou_3d', 'absrel')
REAL_KEYS = ('miou_fused', 'miou_2d', 'miou_3d', 'absrel', 'delta1')


def gt_classes() -> list[str]:
    """Names of the classes with pixels in the real sample frames' labels (void excluded)."""
    import numpy as np

    from depth3dseg_ros.core.classes import NYU13
    from depth3dseg_ros.samples.frames import labelled_frames, load as load_frame

    count = np.zeros(NYU13.num_classes, np.int64)
    for f in labelled_frames():
        lab = load_frame(f)[3]
        count += np.bincount(lab.ravel(), minlength=NYU13.num_classes)[: NYU13.num_classes]
    return [n for i, n in enumerate(NYU13.names) if i != NYU13.void_id and count[i] > 0]


def load(run: Path, present: list[str]) -> dict | None:
    """Figures of one run directory (last validation epoch, real-bag report), None if missing."""
    try:
        val = json.loads((run / 'summary.json').read_text())['history'][-1]
        real = json.loads((run / 'eval_real' / 'report.json').read_text())
    except (FileNotFoundError, KeyError, IndexError):
        return None
    iou = real['fused']['iou']
    gt_miou = sum(iou[c] or 0.0 for c in present) / len(present)
    return {
        **{f'val_{k}': val[k] for k in VAL_KEYS},
        **{f'real_{k}': real[k] for k in REAL_KEYS},
        'real_gt-miou': gt_miou,
        'real_pixel_acc': real['pixel_acc_fused'],
    }


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
    keys[len(VAL_KEYS) + 1 : len(VAL_KEYS) + 1] = ['real_gt-miou', 'real_pixel_acc']
    present = gt_classes()
    figs: dict = {r: {} for r, _ in RUNS}  # run -> seed (OUT_DIR name) -> figures
    for d in argv:  # OUT_DIRs of one seed may be several (e.g. runs/cam/s0 and runs/tex/s0)
        for r, _ in RUNS:
            f = load(Path(d) / r, present)
            if f or Path(d).name not in figs[r]:
                figs[r][Path(d).name] = f
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
    for r, _ in RUNS[1:]:
        pairs = [
            (figs[r][s], figs['plus_consistency'][s])
            for s in figs[r]
            if figs[r][s] and figs['plus_consistency'][s]
        ]
        if pairs:
            print(
                f'| {r} − shipped, same seed | {len(pairs)} seed(s) | '
                + ' | '.join(fmt([a[k] - b[k] for a, b in pairs]) for k in keys)
                + ' |'
            )
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
