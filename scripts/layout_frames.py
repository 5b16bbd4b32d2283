#!/usr/bin/env python3
"""Write a dataset directory of training frames painted over NYU's real label layouts
(training/layout_paint.py): labels and K, no depth, ``"geometry": false`` (the painted image
shows no 3D scene, so the frames train the 2D segmentation term only; METHOD M5).

The label images are NYU Depth v2's 13-class test labels (the sample file registry's archive,
docs/sample_data.md; no RGB comes with them). Every label image within ``--exclude-margin``
labelled-set indices of a frame of the real evaluation set is left out, as is the frame itself:
NYU's labelled set is ordered by scene, so its neighbours are most likely views of the same room.
Each kept label image is resized to ``--size`` (nearest; K = NYU's colour K scaled with it) and
painted ``--variants`` times, each with its own seed. ``--photo`` gives dataset directories of
unlabelled real frames (never an evaluation set) whose photographs texture half of the segments.

Usage: python scripts/layout_frames.py --out data/ds_nyu_layouts [--variants 5]
           [--exclude-margin 25] [--photo data/ds_real_depth_train] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys

import numpy as np

from depth3dseg_ros.bags.dataset_writer import DatasetWriter
from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.geometry import scale_intrinsics
from depth3dseg_ros.core.imageops import resize_labels
from depth3dseg_ros.samples.frames import NYU_K, labelled_frames, nyu_label, nyu_label_indices
from depth3dseg_ros.training.layout_paint import paint_layout
from depth3dseg_ros.training.real_pool import load_rgb_pool


def kept_indices(all_idx: list[int], eval_idx: list[int], margin: int) -> list[int]:
    """``all_idx`` without every index within ``margin`` of one of ``eval_idx`` (sorted)."""
    return [i for i in all_idx if all(abs(i - e) > margin for e in eval_idx)]


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, write the directory, print its summary; 0 on success, 2 on bad input."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--out', required=True, help='output dataset directory (replaced)')
    ap.add_argument('--variants', type=int, default=5, help='paintings per label image')
    ap.add_argument('--exclude-margin', type=int, default=25, help='labelled-set indices')
    ap.add_argument(
        '--photo', nargs='*', default=[], help='dataset dirs of unlabelled real frames'
    )
    ap.add_argument('--size', type=int, nargs=2, default=[320, 240], metavar=('W', 'H'))
    ap.add_argument('--seed', type=int, default=0)
    a = ap.parse_args(argv)
    if a.variants < 1 or a.exclude_margin < 0 or min(a.size) < 8:
        ap.error(
            f'--variants {a.variants} >= 1, --exclude-margin {a.exclude_margin} >= 0 and '
            f'--size {a.size} >= 8 px are required'
        )
    w, h = a.size
    try:
        eval_idx = sorted(f.label_idx for f in labelled_frames())
        all_idx = nyu_label_indices()
        keep = kept_indices(all_idx, eval_idx, a.exclude_margin)
        photos = load_rgb_pool(a.photo, (w, h), '--photo') if a.photo else None
    except (ValueError, FileNotFoundError) as err:
        print(f'layout_frames: {err}', file=sys.stderr)
        return 2
    fx, fy, cx, cy = NYU_K
    K = scale_intrinsics(np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1.0]]), w / 640, h / 480)
    shutil.rmtree(a.out, ignore_errors=True)
    pixels = np.zeros(len(NYU13), np.int64)
    with DatasetWriter(a.out, NYU13) as out:
        for idx in keep:
            labels = resize_labels(nyu_label(idx), (w, h))
            pixels += np.bincount(labels.ravel(), minlength=len(NYU13))
            for v in range(a.variants):
                rng = np.random.default_rng([a.seed, idx, v])
                out.write_frame(
                    f'nyu_layout_{idx:04d}_{v}',
                    paint_layout(labels, rng, photos),
                    K,
                    stamp_ns=0,
                    bag='nyu_test_labels_13',
                    topics={'rgb': None, 'depth': None, 'labels': None},
                    labels=labels,
                    geometry=False,
                )
        report = {
            'layout_frames': {
                'label_images': len(keep),
                'variants': a.variants,
                'excluded': sorted(set(all_idx) - set(keep)),
                'evaluation_indices': eval_idx,
                'exclude_margin': a.exclude_margin,
                'photo': list(a.photo),
                'seed': a.seed,
            }
        }
        out.write_manifest([{'bag': 'nyu_test_labels_13', 'labels': 'NYU 13-class'}], report)
    share = pixels / max(int(pixels.sum()), 1)
    print(
        json.dumps(
            {
                'out': a.out,
                'frames': len(keep) * a.variants,
                'label_images': len(keep),
                'excluded': len(report['layout_frames']['excluded']),
                'class_share': {n: round(float(s), 4) for n, s in zip(NYU13.names, share)},
            },
            indent=1,
        )
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
