#!/usr/bin/env python3
"""Write a copy of a dataset directory of unlabelled real RGB-D frames whose label images hold
floor and ceiling found from the measured depth alone (training/geometric_labels.py; every
other pixel void). No human label is involved. Frames without depth, or where gravity cannot be
found, stay all void. Never point it at frames of an evaluation set.

Labels of one kind alone teach the network that real images are floor (docs/levers.md, "Floor
labels from measured depth"). With ``--pseudo-model`` the other pixels get that model's confident
fused labels (class-balanced, ``--portion`` per class; training/pseudo_labels.py, with the frame's
measured depth for the cloud) as the counter-examples, except where it says floor and the geometry
does not (void there).

Usage: python scripts/geometric_labels.py --data data/ds_real_depth_train --out data/ds_real_geo
           [--classes-from models/depth3dseg_nyu13.pt] [--pseudo-model M [--portion 0.2]]
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.modelfile import read_model_file
from depth3dseg_ros.training.geometric_labels import geometric_labels
from depth3dseg_ros.training.pseudo_labels import fit_to_frame, write_pseudo_labelled


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, write the directory, print the manifest entry; 0 on success, 2 on bad
    input."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--data', required=True, help='dataset directory of unlabelled RGB-D frames')
    ap.add_argument('--out', required=True, help='output dataset directory (replaced)')
    ap.add_argument(
        '--classes-from', default='models/depth3dseg_nyu13.pt', help='model file: class ids'
    )
    ap.add_argument('--pseudo-model', help='model file whose confident labels fill the rest')
    ap.add_argument('--portion', type=float, default=0.2, help='with --pseudo-model')
    a = ap.parse_args(argv)
    try:
        classes = ClassSet.from_dict(read_model_file(a.classes_from)['meta']['classes'])
        ids = {k: classes.names.index(k) for k in ('floor', 'ceiling')}
    except (ValueError, FileNotFoundError) as err:
        print(f'geometric_labels: {a.classes_from}: {err}', file=sys.stderr)
        return 2

    seg = None
    if a.pseudo_model:
        from depth3dseg_ros.core.inference import Segmenter

        seg = Segmenter(a.pseudo_model, device='cpu', num_threads=0)
        if seg.classes.names != classes.names:
            ap.error(f'--pseudo-model {a.pseudo_model}: its classes differ from {a.classes_from}')
    void = classes.void_id

    def predict(rgb: np.ndarray, K: np.ndarray, depth: np.ndarray | None):
        if depth is None:
            geo = np.full(rgb.shape[:2], void, np.uint8)
        else:
            geo = geometric_labels(depth, K, ids, void)
        known = geo != void
        if seg is None:
            return geo, known.astype(np.float32)
        r = seg.infer(rgb, K, 'fused', depth)
        lab, conf = fit_to_frame(r.labels, r.confidence, geo.shape)
        wrong_floor = (lab == ids['floor']) & ~known
        lab = np.where(known, geo, np.where(wrong_floor, void, lab))
        conf = np.where(known, 1.0, np.where(wrong_floor, 0.0, conf)).astype(np.float32)
        return lab, conf

    try:  # geometric pixels have confidence 1: every one is kept (ties are kept)
        entry = write_pseudo_labelled(
            a.data,
            a.out,
            predict,
            portion=a.portion if seg is not None else 1.0,
            min_confidence=0.0 if seg is not None else 0.5,
            void_id=void,
            provenance={
                'geometric_labels': ids,
                'source': a.data,
                'pseudo_model': a.pseudo_model,
            },
        )
    except (ValueError, FileNotFoundError) as err:
        print(f'geometric_labels: {err}', file=sys.stderr)
        return 2
    print(json.dumps(entry, indent=1))
    return 0


if __name__ == '__main__':
    sys.exit(main())
