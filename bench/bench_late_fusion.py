"""The cost of the RGB-D late fusion (core/late_fusion.py) in ``Segmenter.infer``: the colour model
with measured depth, alone and with a geometry model (``geometry_model``), one frame each in turn
(interleaved, so the machine's drift cancels), on a 640x480 uint8 frame and a 640x480 depth image.

Prints the median time per call of each and their ratio, measured in this run on this machine
(models/README.md records the figure for the shipped pair), and the geometry branch alone
(depth code, its network, the fusion).

Usage: python bench/bench_late_fusion.py [--model models/depth3dseg_nyu13.pt]
       [--geometry models/depth3dseg_geometry.pt] [--runs 30] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from depth3dseg_ros.core.inference import Segmenter

REPO = Path(__file__).resolve().parents[1]
NYU_K = np.array([[518.86, 0.0, 325.58], [0.0, 519.47, 253.74], [0.0, 0.0, 1.0]])


def room_depth(h: int = 480, w: int = 640) -> np.ndarray:
    """A floor seen from 1.2 m and a wall at 4 m, with a few holes: H×W float32 metres."""
    v = np.arange(h, dtype=np.float64)[:, None] - NYU_K[1, 2]
    floor = np.where(v > 0, 1.2 * NYU_K[1, 1] / np.maximum(v, 1e-6), np.inf)
    d = np.minimum(floor, 4.0).repeat(w, 1).astype(np.float32)
    d[::17, ::13] = 0.0  # sensor holes
    return d


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--model', default=str(REPO / 'models' / 'depth3dseg_nyu13.pt'))
    ap.add_argument('--geometry', default=str(REPO / 'models' / 'depth3dseg_geometry.pt'))
    ap.add_argument('--runs', type=int, default=30)
    ap.add_argument('--threads', type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    rgb = np.random.default_rng(0).integers(0, 256, (480, 640, 3), dtype=np.uint8)
    depth = room_depth()
    segs = {
        'colour': Segmenter(args.model, device='cpu', backend='torch', num_threads=args.threads),
        'late fusion': Segmenter(
            args.model,
            device='cpu',
            backend='torch',
            num_threads=args.threads,
            geometry_model=args.geometry,
        ),
    }
    times: dict[str, list[float]] = {k: [] for k in segs}
    for seg in segs.values():
        for _ in range(3):
            seg.infer(rgb, NYU_K, 'fused', depth)
    for _ in range(args.runs):
        for name, seg in segs.items():
            t0 = time.perf_counter()
            seg.infer(rgb, NYU_K, 'fused', depth)
            times[name].append((time.perf_counter() - t0) * 1e3)
    geo = segs['late fusion'].geometry
    w, h = segs['colour'].input_size
    m = torch.from_numpy(np.ascontiguousarray(depth[:: 480 // h, :: 640 // w]))[None, None]
    K = torch.tensor(NYU_K * [[w / 640], [h / 480], [1]], dtype=torch.float32)
    out = {'seg2d': torch.zeros(1, len(segs['colour'].classes), h, w)}
    branch = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        geo.fuse(out, m, K, 0)
        branch.append((time.perf_counter() - t0) * 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f'Segmenter.infer 640x480 with measured depth, torch, {args.threads} threads, median of '
        f"{args.runs}: colour {med['colour']:.2f} ms, late fusion {med['late fusion']:.2f} ms, "
        f"ratio {med['late fusion'] / med['colour']:.3f}; the geometry branch alone "
        f'{statistics.median(branch):.2f} ms (geometry model at {geo.input_size[0]}x'
        f'{geo.input_size[1]})'
    )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
