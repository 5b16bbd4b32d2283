#!/usr/bin/env python3
"""Should the fused labels lean on the 3D branch where the depth is measured? (docs/levers.md)

With an RGB-D camera's depth given to the model (``Depth3DSeg.forward(rgb, K, measured_depth)``),
the cloud and so S3D come from measured geometry on the pixels where the sensor has depth. The
fusion (core.fusion, METHOD M7) is (1 − w)·S2D + w·S3D everywhere with w the model's arch
``fusion_w3d`` (0.5, the mean, by default). This script scores, on the labelled frames of a
dataset directory that have depth, the fused labels p = (1 − w)·p2D + w·p3D on measured pixels
(the model's own rule elsewhere: S2D alone where there is no 3D point) for several weights w; w =
the model's ``fusion_w3d`` is its rule, w = 1 the 3D labels alone there. It prints mIoU (over the
classes in the labels or the predictions, as depth3dseg-eval) and pixel accuracy per weight.

``--everywhere``: the weight applies on every pixel with a 3D point, and the cloud is the predicted
depth's unless ``--measured-depth`` is also given (all labelled frames are scored then, with or
without depth): the fusion weight of the 3D branch for a camera without a depth sensor.

Usage: python scripts/measured_fusion_sweep.py --model M [--data data/ds_real_labelled]
       [--weights 0 0.25 0.5 0.75 1] [--everywhere [--measured-depth]]
"""

from __future__ import annotations

import argparse

import torch

from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.fusion import class_probs, labels_confidence, source_probs
from depth3dseg_ros.core.metrics import ConfusionMatrix
from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.training.dataset import load_records
from depth3dseg_ros.training.evaluate import model_dataset


def sweep(
    model_path: str,
    data: str,
    weights: list[float],
    everywhere: bool = False,
    measured_depth: bool = False,
    loaded: tuple | None = None,
) -> dict[float, dict]:
    """{w: ConfusionMatrix summary} over the labelled frames with depth of ``data``, w on the
    measured pixels; with ``everywhere``, w on every pixel with a 3D point, over the labelled
    frames, their measured depth given only when ``measured_depth``. ``loaded``: the
    ``(model, meta)`` of ``load_model(model_path)`` when the caller has it already.

    Raises ValueError when no frame there has labels (and depth where it is needed), or a weight is
    outside [0, 1]."""
    bad = [w for w in weights if not 0.0 <= w <= 1.0]
    if bad:
        raise ValueError(f'--weights {bad} must lie in [0, 1]')
    model, meta = loaded or load_model(model_path, map_location='cpu')
    model.eval()
    classes = ClassSet.from_dict(meta['classes'])
    measured_depth = measured_depth or not everywhere
    records = [
        r
        for r in load_records([data], classes)
        if r.get('labels') and (r.get('depth') or not measured_depth)
    ]
    if not records:
        raise ValueError(
            f'{data}: no frame has both labels and depth'
            if measured_depth
            else f'{data}: no frame has labels'
        )
    ds = model_dataset(records, meta, classes)
    cms = {w: ConfusionMatrix(len(classes), classes.void_id) for w in weights}
    with torch.no_grad():
        for i in range(len(ds)):
            b = ds[i]
            md = b['depth'][None] if measured_depth else None
            out = model(b['rgb'][None], b['K'][None], md)
            s2, s3, void = out['seg2d'], out['seg3d'], classes.void_id
            p2 = class_probs(s2, void)
            rule = source_probs(s2, s3, out['valid'], 'fused', void, w3d=model.arch['fusion_w3d'])
            measured = out['valid'] if everywhere else out['measured'] & out['valid']
            for w in weights:  # through core.fusion, so w = fusion_w3d is the rule bit for bit
                fw = p2 if w == 0 else source_probs(s2, s3, None, 'fused', void, w3d=w)
                p = torch.where(measured, fw, rule)
                cms[w].update(labels_confidence(p)[0], b['labels'][None])
    return {w: cm.summary(classes.names) for w, cm in cms.items()}


def main() -> int:
    """Command line: print the sweep as a Markdown table; exit 0 (a bad argument exits with its
    message)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--model', default='models/depth3dseg_nyu13.pt')
    ap.add_argument('--data', default='data/ds_real_labelled')
    ap.add_argument('--weights', type=float, nargs='+', default=[0.0, 0.25, 0.5, 0.75, 1.0])
    ap.add_argument('--everywhere', action='store_true', help='w on every pixel with a 3D point')
    ap.add_argument('--measured-depth', action='store_true', help='with --everywhere: depth given')
    args = ap.parse_args()
    try:
        loaded = load_model(args.model, map_location='cpu')
        a = args
        res = sweep(a.model, a.data, a.weights, a.everywhere, a.measured_depth, loaded)
        own = loaded[0].arch['fusion_w3d']  # checked, with core.arch's default filled in
    except ValueError as e:
        raise SystemExit(f'measured_fusion_sweep: {e}') from None
    where = 'every pixel with a 3D point' if args.everywhere else 'measured pixels'
    print(f'| w (S3D on {where}) | fused mIoU | pixel acc |\n|---|---|---|')
    for w, s in res.items():
        tag = " (the model's rule)" if w == own else ''
        print(f"| {w:g}{tag} | {s['miou']:.3f} | {s['pixel_acc']:.3f} |")
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
