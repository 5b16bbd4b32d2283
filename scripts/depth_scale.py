#!/usr/bin/env python3
"""Is a model's depth error scale or structure? Per dataset directory (models/README.md, "A
scale-sensitive depth loss").

For every frame with depth (METHOD M1's predicted depth at the network input size against the
frame's depth, over 0.1–10 m): AbsRel, the scale s = median(gt) / median(pred), and AbsRel after
multiplying the prediction by s (median scaling, Eigen et al. 2014: scale errors removed). Means
over frames (AbsRel here is a per-frame mean; depth3dseg-eval pools pixels), and the median of s:
s < 1 means the model sees the frames too far, s > 1 too near.

Usage: python scripts/depth_scale.py --data DIR [DIR ...] --model M [M ...] [--max-frames N]
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from torch.utils.data import DataLoader

from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.training.dataset import load_records
from depth3dseg_ros.training.evaluate import model_dataset

__all__ = ['frame_scale_stats', 'depth_scale', 'main']


def frame_scale_stats(pred: torch.Tensor, gt: torch.Tensor) -> tuple[float, float, float] | None:
    """(AbsRel, median scale gt/pred, median-scaled AbsRel) of one 1×H×W predicted depth against
    1×H×W ground truth (m; NaN, 0 or out of 0.1–10 m = no data), or None when no pixel is valid."""
    v = torch.isfinite(gt) & (gt > 0.1) & (gt < 10) & torch.isfinite(pred) & (pred > 0)
    if not bool(v.any()):
        return None
    p, g = pred[v].double(), gt[v].double()
    s = float(g.median() / p.median())
    return float(((p - g).abs() / g).mean()), s, float(((p * s - g).abs() / g).mean())


@torch.no_grad()
def depth_scale(
    model: torch.nn.Module, meta: dict, data: str, max_frames: int | None = None
) -> dict:
    """{'frames', 'absrel', 'scaled_absrel' (means over frames), 'scale' (median over frames)} of
    ``model`` (a Depth3DSeg in eval mode) with its model file's ``meta`` (both from
    core.modelfile.load_model) on the frames with depth of the dataset directory ``data`` (the
    first ``max_frames``). Raises ValueError when no frame has valid depth."""
    classes = ClassSet.from_dict(meta['classes'])
    records = [r for r in load_records([data], classes) if r.get('depth')][:max_frames]
    rows = []
    for batch in DataLoader(model_dataset(records, meta, classes), batch_size=8):
        pred = model.forward_2d(batch['rgb'])['depth']
        for p, gt in zip(pred, batch['depth']):
            r = frame_scale_stats(p, gt)
            if r is not None:
                rows.append(r)
    if not rows:
        raise ValueError(f'{data}: no frame with valid depth')
    a = np.array(rows)
    return {
        'frames': len(rows),
        'absrel': float(a[:, 0].mean()),
        'scale': float(np.median(a[:, 1])),
        'scaled_absrel': float(a[:, 2].mean()),
    }


def main(argv: list[str] | None = None) -> int:
    """Command line: a Markdown table, one row per (model, dataset); exit 0 (2 on bad input)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--data', nargs='+', required=True, help='dataset directories')
    ap.add_argument('--model', nargs='+', required=True, help='model files (core.modelfile)')
    ap.add_argument('--max-frames', type=int, default=None, help='first N frames with depth')
    a = ap.parse_args(argv)
    print('| model | data | frames | AbsRel | scale gt/pred | median-scaled AbsRel |')
    print('|---|---|---|---|---|---|')
    try:
        for m in a.model:
            model, meta = load_model(m, map_location='cpu')  # once for all the directories
            model.eval()
            for d in a.data:
                r = depth_scale(model, meta, d, a.max_frames)
                print(
                    f"| {m} | {d} | {r['frames']} | {r['absrel']:.3f} | {r['scale']:.3f} | "
                    f"{r['scaled_absrel']:.3f} |"
                )
    except (ValueError, OSError) as e:
        ap.error(str(e))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
