#!/usr/bin/env python3
"""Pseudo-labels from an RGB-D teacher for a colour model (cross-modal distillation, Gupta et al.,
CVPR 2016; docs/levers.md, "Pseudo-labels from the RGB-D late fusion").

Writes a copy of a dataset directory of unlabelled real RGB-D frames whose label images are the 2D
late fusion of a colour model and a geometry model (scripts/late_fusion_eval.py: the mean of the
two 2D softmax maps, the geometry model run on the frames' geometry code from
scripts/geometry_input.py), kept class-balanced where confident as scripts/pseudo_labels.py keeps
its own (training/pseudo_labels.py). A colour model trained on them sees real images labelled by
a teacher that also saw the measured geometry. Never point it at frames of an evaluation set.

Usage: python scripts/cross_modal_labels.py --colour M --geometry GEO_M --data DS
           --geometry-data GEO_DS --out OUT [--w 0.5] [--portion 0.5]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch
import torch.nn.functional as F

from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.dataset_format import read_index
from depth3dseg_ros.training.dataset import load_records
from depth3dseg_ros.training.evaluate import model_dataset
from depth3dseg_ros.training.pseudo_labels import write_and_report


def softmax_2d(model_path: str, data: str) -> tuple[dict[str, torch.Tensor], ClassSet]:
    """({frame id: C×h×w 2D softmax}, the model's classes) of a model file on the unlabelled
    frames of ``data`` (at the model's input size and normalisation, as depth3dseg-eval feeds
    it)."""
    model, meta = load_model(model_path)
    classes = ClassSet.from_dict(meta['classes'])
    recs = [r for r in load_records([data], classes) if not r.get('labels')]
    ds = model_dataset(recs, meta, classes)
    out = {}
    with torch.no_grad():
        for i, r in enumerate(recs):
            item = ds[i]
            seg = model.forward_2d(item['rgb'][None], item['K'][None])['seg2d']
            out[r['id']] = torch.softmax(seg.float(), 1)[0]
    return out, classes


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, write the directory, print the manifest entry; 0 on success, 2 on bad
    input."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--colour', default='models/depth3dseg_nyu13.pt')
    ap.add_argument('--geometry', required=True, help='model file trained on geometry codes')
    ap.add_argument('--data', required=True, help='dataset directory of unlabelled RGB-D frames')
    ap.add_argument('--geometry-data', required=True, help='its geometry_input.py copy')
    ap.add_argument('--out', required=True, help='output dataset directory (replaced)')
    ap.add_argument('--w', type=float, default=0.5, help="the geometry model's weight")
    ap.add_argument('--portion', type=float, default=0.5)
    a = ap.parse_args(argv)
    pc, classes = softmax_2d(a.colour, a.data)
    pg, gclasses = softmax_2d(a.geometry, a.geometry_data)
    if gclasses.names != classes.names:
        print(
            f'cross_modal_labels: the two models have different classes: {classes.names} / '
            f'{gclasses.names}',
            file=sys.stderr,
        )
        return 2
    if set(pc) != set(pg):
        print(
            f'cross_modal_labels: {a.geometry_data} has other frames than {a.data}',
            file=sys.stderr,
        )
        return 2
    void = classes.void_id
    # write_pseudo_labelled predicts the frames without labels in index order
    todo = iter([r['id'] for r in read_index(a.data) if not r.get('labels')])

    def predict(rgb: np.ndarray, K: np.ndarray, depth: np.ndarray | None):
        fid = next(todo)
        c = pc[fid]
        g = F.interpolate(pg[fid][None], size=c.shape[-2:], mode='bilinear', align_corners=False)
        mix = (1 - a.w) * c + a.w * g[0]
        mix[void] = -1.0  # void is never predicted (core.metrics.predict_labels)
        conf, lab = mix.max(0)
        return lab.numpy(), conf.numpy()

    provenance = {'colour': a.colour, 'geometry': a.geometry, 'w': a.w, 'source': a.data}
    return write_and_report(
        'cross_modal_labels', a.data, a.out, predict, a.portion, 0.0, void, provenance=provenance
    )


if __name__ == '__main__':
    sys.exit(main())
