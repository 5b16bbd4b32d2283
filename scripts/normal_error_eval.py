#!/usr/bin/env python3
"""Surface-normal error of a model's predicted depth against the measured depth, in degrees.

docs/levers.md, "A surface-normal term on the depth": the angle between the normals
(core.normals.surface_normals, box 5 at 320×240) of the predicted and of the measured depth, over
the pixels where both are defined, on the frames of a dataset that have depth. Printed as the mean
and median angle and the share of pixels under 11.25°, 22.5° and 30° (the thresholds of NYUv2
normal estimation, Eigen & Fergus 2015), for each model given.

Usage: python scripts/normal_error_eval.py --data DS [--only-labelled] MODEL [MODEL ...]
"""

from __future__ import annotations
import argparse

import torch

from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.depth_code import smooth_px_for
from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.core.normals import surface_normals
from depth3dseg_ros.training.dataset import load_records
from depth3dseg_ros.training.evaluate import model_dataset


@torch.no_grad()
def normal_errors(model_path: str, data: str, only_labelled: bool = False) -> torch.Tensor:
    """1-D float tensor: the angle (degrees) at every pixel where both normals are defined."""
    model, meta = load_model(model_path)
    model.eval()
    classes = ClassSet.from_dict(meta['classes'])
    recs = [
        r
        for r in load_records([data], classes)
        if r.get('depth') and (r.get('labels') or not only_labelled)
    ]
    if not recs:
        raise SystemExit(f'{data}: no frame with depth')
    ds = model_dataset(recs, meta, classes)
    angles = []
    for i in range(len(ds)):
        item = ds[i]
        K = item['K'][None].float()
        pred = model.forward_2d(item['rgb'][None], K)['depth'].float()
        k = smooth_px_for(pred.shape[-1])
        n_p, ok_p, _ = surface_normals(pred, K, k)
        n_t, ok_t, _ = surface_normals(item['depth'][None].float(), K, k)
        ok = (ok_p & ok_t)[:, 0]
        cos = (n_p * n_t).sum(1).clamp(-1, 1)
        angles.append(torch.rad2deg(torch.acos(cos[ok])))
    return torch.cat(angles)


def main() -> None:
    """CLI (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--data', required=True)
    ap.add_argument('--only-labelled', action='store_true', help='only frames with labels too')
    ap.add_argument('models', nargs='+')
    a = ap.parse_args()
    for m in a.models:
        e = normal_errors(m, a.data, a.only_labelled)
        share = ' '.join(f'<{t}°: {float((e < t).float().mean()):.3f}' for t in (11.25, 22.5, 30))
        print(
            f'{m}: {e.numel()} px  mean {float(e.mean()):.1f}°  median '
            f'{float(e.median()):.1f}°  {share}'
        )


if __name__ == '__main__':
    main()
