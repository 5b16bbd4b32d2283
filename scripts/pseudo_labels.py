#!/usr/bin/env python3
"""Write a pseudo-labelled copy of a dataset directory of unlabelled real frames (self-training;
training/pseudo_labels.py, docs/levers.md "Real-camera levers").

The model's fused labels (M7) on each frame without labels become its label image where the model
is confident (class-balanced: per class, the ``--portion`` most confident of its pixels over all
frames, at least ``--min-confidence``); the rest is void. With ``--measured-depth`` the frames'
sensor depth builds the cloud for the 3D branch (as the node's use_measured_depth does). Never
point it at frames of an evaluation set.

Usage: python scripts/pseudo_labels.py --model M --data data/ds_real_depth_train \\
           --out data/ds_real_pseudo [--portion 0.5] [--min-confidence 0.0] [--measured-depth]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from depth3dseg_ros.core.inference import Segmenter
from depth3dseg_ros.training.pseudo_labels import write_and_report


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, write the directory, print the manifest entry; 0 on success."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--model', default='models/depth3dseg_nyu13.pt')
    ap.add_argument('--data', required=True, help='dataset directory of unlabelled real frames')
    ap.add_argument('--out', required=True, help='output dataset directory (replaced)')
    ap.add_argument('--portion', type=float, default=0.5)
    ap.add_argument('--min-confidence', type=float, default=0.0)
    ap.add_argument('--measured-depth', action='store_true')
    a = ap.parse_args(argv)
    seg = Segmenter(a.model, device='cpu', num_threads=0)

    def predict(rgb: np.ndarray, K: np.ndarray, depth: np.ndarray | None):
        r = seg.infer(rgb, K, 'fused', depth if a.measured_depth else None)
        return r.labels, r.confidence

    return write_and_report(
        'pseudo_labels',
        a.data,
        a.out,
        predict,
        a.portion,
        a.min_confidence,
        seg.classes.void_id,
        provenance={'model': a.model, 'source': a.data, 'measured_depth': a.measured_depth},
    )


if __name__ == '__main__':
    sys.exit(main())
