#!/usr/bin/env python3
"""The geometry code of a colour model's *predicted* depth (docs/levers.md, "The geometry model
on predicted depth"): a dataset copy whose RGB images are replaced by the HHA-like code
(scripts/geometry_input.py) of the depth that a colour model predicts from each frame, so that
a geometry model (trained on the code of rendered sensor depth) can be scored, or late-fused
(scripts/late_fusion_eval.py --all-labelled), on a colour camera's frames without a sensor.

Each frame is run through the model at the model file's input size (its un-augmented
evaluation pipeline, METHOD M1; ``depth_gain`` applied), the predicted depth (metres) resized
bilinearly to the frame's own size, and coded with the frame's own K. Depth, labels and K are
the source dataset's (symlinked); every frame gets a code, with or without measured depth.

Usage: python scripts/predicted_geometry.py SRC_DATASET OUT_DATASET --model MODEL
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from geometry_input import finish_copy, geometry_image, start_copy  # noqa: E402

from depth3dseg_ros.core.classes import ClassSet  # noqa: E402
from depth3dseg_ros.core.modelfile import load_model  # noqa: E402
from depth3dseg_ros.training.dataset import load_records  # noqa: E402
from depth3dseg_ros.training.evaluate import model_dataset  # noqa: E402


@torch.no_grad()
def predicted_depths(model_path: str, src: Path) -> tuple[list[dict], list[np.ndarray]]:
    """(records, H×W float64 predicted depth in metres at each record's own size) of SRC."""
    model, meta = load_model(model_path)
    model.eval()
    classes = ClassSet.from_dict(meta['classes'])
    recs = load_records([src], classes)
    ds = model_dataset(recs, meta, classes)
    depths = []
    for i, r in enumerate(recs):
        item = ds[i]
        out = model.forward_2d(item['rgb'][None], item['K'][None])
        d = F.interpolate(
            out['depth'].float(),
            size=(r['height'], r['width']),
            mode='bilinear',
            align_corners=False,
        )
        depths.append(d[0, 0].double().numpy())
    return recs, depths


def convert(src: Path, out: Path, model_path: str) -> int:
    """Write OUT as SRC with each rgb image replaced by the geometry code of the model's depth.
    Returns the number of frames written. Raises FileNotFoundError for a SRC without an index."""
    recs, depths = predicted_depths(model_path, src)
    start_copy(src, out)
    kept = []
    for r, d in zip(recs, depths):
        code = geometry_image(d, np.asarray(r['K']).reshape(3, 3))
        Image.fromarray(code).save(out / r['rgb'])
        kept.append({k: v for k, v in r.items() if k != 'dir'})
    finish_copy(src, out, kept, {'depth': f'predicted by {model_path}'})
    return len(kept)


def main() -> None:
    """CLI: convert one dataset directory (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('src', type=Path)
    ap.add_argument('out', type=Path)
    ap.add_argument('--model', required=True, help='colour model file whose depth is coded')
    a = ap.parse_args()
    n = convert(a.src, a.out, a.model)
    print(f'{a.out}: {n} frames written (code of the depth predicted by {a.model})')


if __name__ == '__main__':
    main()
