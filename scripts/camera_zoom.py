#!/usr/bin/env python3
"""Write a dataset directory as another camera would have seen it: a k times longer focal length.

Each frame of ``--data`` (depth3dseg-extract format, docs/ARCHITECTURE.md "Dataset directory") is
cropped to its central 1/k (width and height) and resized back to its own size; K follows both
steps (core.geometry.crop_intrinsics, resize_intrinsics: fx, fy × k, a narrower field of view), the
depth and labels are cropped and resized with nearest neighbour (core.imageops), the depth values
stay what they were (the same scene, the same distances). So ``--zoom 1.33`` turns the NYU
frames (vertical field of view 50°, fy = 1.08 × the height) into frames of a 39° camera
(fy = 1.44 × the height), RealSense-D435-like. Evaluating a model on both says how its metric
depth depends on the camera it is given (docs/levers.md, "Depth for the robot's camera").

Usage: python scripts/camera_zoom.py --data data/ds_real_labelled --zoom 1.33 \\
           --out data/ds_real_labelled_zoom133
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import sys
from pathlib import Path

import cv2
import numpy as np

from depth3dseg_ros.core.depth import meters_to_16uc1
from depth3dseg_ros.core.geometry import crop_intrinsics, resize_intrinsics
from depth3dseg_ros.core.imageops import resize_depth, resize_labels
from depth3dseg_ros.dataset_format import MANIFEST, read_index, read_manifest, write_index
from depth3dseg_ros.training.dataset import FrameDataset


def zoom_frame(rgb, depth, labels, K, k: float):
    """Central 1/k crop of a frame resized back to its size: (rgb, depth, labels, K); depth m
    (NaN = none) or None, labels or None, K 3×3. Raises ValueError for k < 1."""
    if not k >= 1.0:
        raise ValueError(f'--zoom {k} must be >= 1 (a longer focal length: a crop)')
    h, w = rgb.shape[:2]
    cw, ch = int(round(w / k)), int(round(h / k))
    x0, y0 = (w - cw) // 2, (h - ch) // 2
    crop = (slice(y0, y0 + ch), slice(x0, x0 + cw))
    rgb = cv2.resize(rgb[crop], (w, h), interpolation=cv2.INTER_LINEAR)
    depth = None if depth is None else resize_depth(np.ascontiguousarray(depth[crop]), (w, h))
    labels = None if labels is None else resize_labels(np.ascontiguousarray(labels[crop]), (w, h))
    K = resize_intrinsics(crop_intrinsics(np.asarray(K, np.float64), x0, y0), (cw, ch), (w, h))
    return rgb, depth, labels, K


def main(argv: list[str] | None = None) -> int:
    """Write the zoomed copy; returns the exit status (2 on bad arguments, said in one line)."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--data', type=Path, required=True)
    ap.add_argument('--zoom', type=float, required=True, help='focal length factor k >= 1')
    ap.add_argument('--out', type=Path, required=True)
    a = ap.parse_args(argv)
    try:
        records = read_index(a.data)
        zoom_frame(np.zeros((2, 2, 3), np.uint8), None, None, np.eye(3), a.zoom)
    except (FileNotFoundError, ValueError) as exc:
        print(f'camera_zoom: {exc}', file=sys.stderr)
        return 2
    ds = FrameDataset(records=records)
    if a.out.exists():
        shutil.rmtree(a.out)
    for sub in ('rgb', 'depth', 'labels'):
        (a.out / sub).mkdir(parents=True)
    out = []
    for i, rec in enumerate(records):
        rgb, depth, labels, K = zoom_frame(*ds.load_raw(i), a.zoom)
        r = {k: v for k, v in rec.items() if k != 'dir'}
        cv2.imwrite(str(a.out / rec['rgb']), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
        if depth is not None:
            cv2.imwrite(str(a.out / rec['depth']), meters_to_16uc1(depth))
            r['depth_scale'] = 0.001
        if labels is not None:
            cv2.imwrite(str(a.out / rec['labels']), labels)
        r['K'] = [float(v) for v in np.asarray(K).reshape(-1)]
        out.append(r)
    write_index(a.out, out)
    manifest = copy.deepcopy(read_manifest(a.data) or {})
    manifest['split'] = f'{a.data} seen through a {a.zoom}x longer focal length (camera_zoom.py)'
    (a.out / MANIFEST).write_text(json.dumps(manifest, indent=1) + '\n', encoding='utf-8')
    print(f'{len(out)} frames -> {a.out} (fx, fy x {a.zoom})')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
