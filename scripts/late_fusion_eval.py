#!/usr/bin/env python3
"""Late fusion of a colour model and a geometry model at test time (docs/levers.md, "Geometry as
the 2D network's input"): the 2D class distribution of each pixel is ``(1 − w)·softmax(colour 2D
logits) + w·softmax(geometry 2D logits)``, the colour model run on the RGB frames, the geometry
model (trained on scripts/geometry_input.py's datasets) on the same frames' geometry code. Scored
as 2D mIoU (METHOD M8) at the colour model's input size (the geometry model's logits resized
bilinearly), on the frames that have depth (the geometry code needs it), or with --all-labelled
on every labelled frame (a geometry set coded from predicted depth: scripts/predicted_geometry.py).

Usage: python scripts/late_fusion_eval.py --colour MODEL --geometry MODEL
       --colour-data DS --geometry-data GEO_DS [--w 0.25 0.5 0.75] [--all-labelled]
Prints one line per w: 2D mIoU, pixel accuracy, and the per-class IoU.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.metrics import ConfusionMatrix, predict_labels
from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.training.dataset import load_records
from depth3dseg_ros.training.evaluate import model_dataset


def probs_2d(model_path: str, data: str, ids: list[str] | None = None, need_depth: bool = True):
    """(ids, B×C×H×W 2D softmax, B×H×W labels, classes) of the labelled frames (with
    ``need_depth``, only those that have depth)."""
    model, meta = load_model(model_path)
    classes = ClassSet.from_dict(meta['classes'])
    recs = [
        r
        for r in load_records([data], classes)
        if r.get('labels') and (r.get('depth') or not need_depth)
    ]
    if ids is not None:
        by_id = {r['id']: r for r in recs}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise SystemExit(
                f'{data}: frames {missing} missing (not the same frames as the colour set)'
            )
        recs = [by_id[i] for i in ids]
    ds = model_dataset(recs, meta, classes)
    batch = {k: torch.stack([ds[i][k] for i in range(len(ds))]) for k in ('rgb', 'K', 'labels')}
    with torch.no_grad():
        out = model(batch['rgb'], batch['K'], None)
    probs = torch.softmax(out['seg2d'].float(), 1)
    return [r['id'] for r in recs], probs, batch['labels'], classes


def late_fusion(
    colour: str,
    geometry: str,
    colour_data: str,
    geometry_data: str,
    ws: list[float],
    need_depth: bool = True,
) -> tuple[int, list[dict]]:
    """(frames scored, one ConfusionMatrix.summary per w) of the late fusion (module docstring);
    ``need_depth=False`` scores every labelled frame (a geometry set coded from predicted depth,
    scripts/predicted_geometry.py).

    Raises SystemExit when the geometry set lacks a frame of the colour set, or the two models'
    classes differ."""
    ids, pc, labels, classes = probs_2d(colour, colour_data, need_depth=need_depth)
    _, pg, _, gclasses = probs_2d(geometry, geometry_data, ids, need_depth)
    if gclasses.names != classes.names:
        raise SystemExit(
            f'the two models have different classes: {classes.names} / {gclasses.names}'
        )
    pg = F.interpolate(pg, size=pc.shape[-2:], mode='bilinear', align_corners=False)
    out = []
    for w in ws:
        cm = ConfusionMatrix(len(classes), classes.void_id)
        cm.update(predict_labels((1 - w) * pc + w * pg, classes.void_id), labels)
        out.append(cm.summary(classes.names))
    return len(ids), out


def main() -> None:
    """CLI (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--colour', required=True)
    ap.add_argument('--geometry', required=True)
    ap.add_argument('--colour-data', required=True)
    ap.add_argument('--geometry-data', required=True)
    ap.add_argument('--w', type=float, nargs='+', default=[0.0, 0.25, 0.5, 0.75, 1.0])
    ap.add_argument(
        '--all-labelled',
        action='store_true',
        help='score every labelled frame, not only those with depth (a geometry set '
        'coded from predicted depth: scripts/predicted_geometry.py)',
    )
    a = ap.parse_args()
    n, summaries = late_fusion(
        a.colour, a.geometry, a.colour_data, a.geometry_data, a.w, not a.all_labelled
    )
    print(f'{n} frames; w = weight of the geometry model')
    for w, s in zip(a.w, summaries):
        per = ' '.join(f'{k}={v:.2f}' for k, v in s['iou'].items() if v is not None)
        print(f"w={w:.2f}  2D mIoU {s['miou']:.4f}  pixel acc {s['pixel_acc']:.4f}  {per}")


if __name__ == '__main__':
    main()
