#!/usr/bin/env python3
"""Write a copy of a dataset directory of unlabelled real RGB-D frames whose label images hold
floor and ceiling found from the measured depth alone (training/geometric_labels.py; every
other pixel void). No model and no human label is involved. Frames without depth, or where gravity
cannot be found, stay all void. Never point it at frames of an evaluation set.

Usage: python scripts/geometric_labels.py --data data/ds_real_depth_train --out data/ds_real_geo
           [--classes-from models/depth3dseg_nyu13.pt]
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.modelfile import read_model_file
from depth3dseg_ros.training.geometric_labels import geometric_labels
from depth3dseg_ros.training.pseudo_labels import write_pseudo_labelled


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, write the directory, print the manifest entry; 0 on success, 2 on bad
    input."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--data', required=True, help='dataset directory of unlabelled RGB-D frames')
    ap.add_argument('--out', required=True, help='output dataset directory (replaced)')
    ap.add_argument(
        '--classes-from', default='models/depth3dseg_nyu13.pt', help='model file: class ids'
    )
    a = ap.parse_args(argv)
    try:
        classes = ClassSet.from_dict(read_model_file(a.classes_from)['meta']['classes'])
        ids = {k: classes.names.index(k) for k in ('floor', 'ceiling')}
    except (ValueError, FileNotFoundError) as err:
        print(f'geometric_labels: {a.classes_from}: {err}', file=sys.stderr)
        return 2

    def predict(rgb: np.ndarray, K: np.ndarray, depth: np.ndarray | None):
        if depth is None:
            lab = np.full(rgb.shape[:2], classes.void_id, np.uint8)
        else:
            lab = geometric_labels(depth, K, ids, classes.void_id)
        return lab, (lab != classes.void_id).astype(np.float32)

    try:  # confidence 1 on every labelled pixel: portion 1 keeps them all
        entry = write_pseudo_labelled(
            a.data,
            a.out,
            predict,
            portion=1.0,
            min_confidence=0.5,
            void_id=classes.void_id,
            provenance={'geometric_labels': ids, 'source': a.data},
        )
    except (ValueError, FileNotFoundError) as err:
        print(f'geometric_labels: {err}', file=sys.stderr)
        return 2
    print(json.dumps(entry, indent=1))
    return 0


if __name__ == '__main__':
    sys.exit(main())
