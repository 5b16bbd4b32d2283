#!/usr/bin/env python3
"""Is a model's depth error scale or structure? Per dataset directory (docs/levers.md, "A
scale-sensitive depth loss").

For every frame with depth (METHOD M1's predicted depth at the network input size against the
frame's depth, over 0.1–10 m): AbsRel, the scale s = median(gt) / median(pred), and AbsRel after
multiplying the prediction by s (median scaling, Eigen et al. 2014: scale errors removed). Means
over frames (AbsRel here is a per-frame mean; depth3dseg-eval pools pixels), and the median of s:
s < 1 means the model sees the frames too far, s > 1 too near.

Usage: python scripts/depth_scale.py --data DIR [DIR ...] --model M [M ...] [--max-frames N]

The statistics are core.depth_calibration's, as ``depth3dseg-calibrate`` fits a model's
``depth_gain`` with them.
"""

from __future__ import annotations

import argparse

from depth3dseg_ros.core.depth_calibration import frame_scale_stats
from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.training.calibrate import depth_scale

__all__ = ['frame_scale_stats', 'depth_scale', 'main']


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
