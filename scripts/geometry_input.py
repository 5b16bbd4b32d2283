#!/usr/bin/env python3
"""Geometry as the 2D network's input: a dataset copy whose RGB images are replaced by an encoding
of each frame's depth image (docs/levers.md, "Geometry as the 2D network's input"; one row of
models/README.md "Levers at a glance").

The lever tests the issue's hypothesis (Handa et al. 2016, SceneNet: synthetic *depth alone*
crosses to real NYUv2 far better than colour) with the same 2D network rather than the 3D one: a
model trained on geometry images of the synthetic rooms is scored on geometry images of the real
frames that have measured depth. The encoding is a 3-channel, 8-bit image (an HHA-like code, Gupta
et al. ECCV 2014, with the camera's optical axes in place of the gravity direction, which the
frames do not carry):

* R: log depth, ``(ln d − ln 0.4) / (ln 10 − ln 0.4)`` clipped to [0, 1] (0.4–10 m);
* G: the surface normal's y component in the optical frame (y down), ``(n_y + 1) / 2``: floors
  (n_y ≈ −1) dark, ceilings bright, walls mid-grey;
* B: ``|n_x|``: how much the surface faces sideways (absolute, so a horizontal flip, which the
  training augmentation applies, leaves the code valid);

normals from the cross product of the back-projected points' image-space differences (METHOD M2's
back-projection with K) after a hole-aware box smoothing of the depth. Pixels without valid depth
(0, NaN), and pixels whose four neighbours do not all have (smoothed) depth, are 0 in all three
channels. Depth, labels and K are the source dataset's (symlinked).

Usage: python scripts/geometry_input.py SRC_DATASET OUT_DATASET [--only-with-depth]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

from depth3dseg_ros.dataset_format import MANIFEST, read_index, write_index

#: log-depth range of the R channel, metres
NEAR_M, FAR_M = 0.4, 10.0
#: side of the box that smooths the depth before the normals (pixels at 320×240)
SMOOTH_PX = 5


def _box(a: np.ndarray, k: int) -> np.ndarray:
    """k×k box sum of a float64 H×W array (zero padding), by an integral image."""
    pad = k // 2
    p = np.pad(a, ((pad + 1, pad), (pad + 1, pad)))
    c = p.cumsum(0).cumsum(1)
    return c[k:, k:] - c[:-k, k:] - c[k:, :-k] + c[:-k, :-k]


def geometry_image(depth_m: np.ndarray, K: np.ndarray, smooth_px: int = SMOOTH_PX) -> np.ndarray:
    """The geometry code of a depth image (module docstring).

    Args:
        depth_m: H×W float depth in metres along the optical axis; 0 or non-finite = no depth.
        K: 3×3 intrinsics of that image (pixels).
        smooth_px: odd box side for the hole-aware smoothing (1: none).
    Returns H×W×3 uint8 (R log depth, G (n_y + 1) / 2, B |n_x|; 0 where depth is invalid).
    Raises ValueError for a depth that is not 2-D or a K that is not 3×3 with fx, fy > 0.
    """
    d = np.asarray(depth_m, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64).reshape(-1)
    if d.ndim != 2:
        raise ValueError(f'geometry_image: depth shape {d.shape} must be H×W')
    if K.size != 9 or not (K[0] > 0 and K[4] > 0):
        raise ValueError(f'geometry_image: K={K.tolist()} must be 3×3 with fx, fy > 0')
    if smooth_px < 1 or smooth_px % 2 == 0:
        raise ValueError(f'geometry_image: smooth_px={smooth_px} must be odd and >= 1')
    valid = np.isfinite(d) & (d > 0)
    d0 = np.where(valid, d, 0.0)
    if smooth_px > 1:
        n = _box(valid.astype(np.float64), smooth_px)
        ds = np.where(n > 0, _box(d0, smooth_px) / np.maximum(n, 1), 0.0)
    else:
        ds = d0
    h, w = d.shape
    fx, cx, fy, cy = K[0], K[2], K[4], K[5]
    u, v = np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64))
    pts = np.stack([(u - cx) / fx * ds, (v - cy) / fy * ds, ds], axis=-1)
    du = np.zeros_like(pts)
    dv = np.zeros_like(pts)
    du[:, 1:-1] = pts[:, 2:] - pts[:, :-2]
    dv[1:-1, :] = pts[2:, :] - pts[:-2, :]
    nrm = np.cross(du, dv)
    norm = np.linalg.norm(nrm, axis=-1, keepdims=True)
    nrm = np.where(norm > 0, nrm / np.maximum(norm, 1e-12), 0.0)
    # orient each normal towards the camera (n · p < 0)
    flip = (nrm * pts).sum(-1, keepdims=True) > 0
    nrm = np.where(flip, -nrm, nrm)
    logd = (np.log(np.maximum(ds, 1e-6)) - np.log(NEAR_M)) / (np.log(FAR_M) - np.log(NEAR_M))
    code = np.stack([np.clip(logd, 0, 1), (nrm[..., 1] + 1) / 2, np.abs(nrm[..., 0])], axis=-1)
    has = np.pad(ds > 0, 1)  # the four neighbours of the central differences have depth too
    nb = has[1:-1, :-2] & has[1:-1, 2:] & has[:-2, 1:-1] & has[2:, 1:-1]
    ok = valid & (ds > 0) & (norm[..., 0] > 0) & nb
    return np.where(ok[..., None], np.round(code * 255), 0).astype(np.uint8)


def start_copy(src: Path, out: Path) -> None:
    """Empty OUT (removed first if it exists) with an rgb folder, and SRC's depth and labels
    folders symlinked into it."""
    if out.exists():
        shutil.rmtree(out)
    (out / 'rgb').mkdir(parents=True)
    for sub in ('depth', 'labels'):
        if (src / sub).is_dir():
            os.symlink((src / sub).resolve(), out / sub)


def finish_copy(src: Path, out: Path, kept: list[dict], info: dict) -> None:
    """Write OUT's index (``kept`` records) and SRC's manifest with a ``geometry_input`` entry
    (source, code constants, frame count, plus ``info``)."""
    write_index(out, kept)
    man = json.loads((src / MANIFEST).read_text()) if (src / MANIFEST).is_file() else {}
    man['geometry_input'] = {
        'source': str(src),
        'near_m': NEAR_M,
        'far_m': FAR_M,
        'smooth_px': SMOOTH_PX,
        'frames': len(kept),
        **info,
    }
    (out / MANIFEST).write_text(json.dumps(man, indent=1))


def convert(src: Path, out: Path, only_with_depth: bool) -> tuple[int, int]:
    """Write OUT as SRC with each rgb image replaced by the geometry code of its depth.

    Returns (frames written, frames skipped for lack of depth). Raises FileNotFoundError for a
    SRC without an index.
    """
    records = read_index(src)
    start_copy(src, out)
    kept, skipped = [], 0
    for r in records:
        if not r.get('depth'):
            skipped += 1
            if only_with_depth:
                continue
            code = np.zeros((r['height'], r['width'], 3), np.uint8)
        else:
            raw = np.asarray(Image.open(src / r['depth']))
            scale = float(r.get('depth_scale') or 0.001) if raw.dtype != np.float32 else 1.0
            code = geometry_image(raw.astype(np.float64) * scale, np.asarray(r['K']).reshape(3, 3))
        Image.fromarray(code).save(out / r['rgb'])
        rec = {k: v for k, v in r.items() if k != 'dir'}
        kept.append(rec)
    finish_copy(src, out, kept, {})
    return len(kept), skipped


def main() -> None:
    """CLI: convert one dataset directory (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('src', type=Path)
    ap.add_argument('out', type=Path)
    ap.add_argument(
        '--only-with-depth',
        action='store_true',
        help='leave out frames without depth (default: their code is all 0)',
    )
    a = ap.parse_args()
    n, skipped = convert(a.src, a.out, a.only_with_depth)
    print(
        f'{a.out}: {n} frames written; {skipped} without depth '
        f'({"left out" if a.only_with_depth else "all-zero code"})'
    )


if __name__ == '__main__':
    main()
