"""The cost of the RGB-D late fusion (core/late_fusion.py) in ``Segmenter.infer``: the colour model
with measured depth, alone and with a geometry model (``geometry_model``), one frame each in turn
(interleaved, so the machine's drift cancels), on a 640x480 uint8 frame and a 640x480 depth image.

Prints the median time per call of each and their ratio, measured in this run on this machine,
and the geometry branch alone (depth code, its network, the fusion); docs/levers.md, "The RGB-D
late fusion, served by the package", records the figures. No geometry model ships: without
``--geometry`` the benchmark times an untrained one of the shipped colour model's arch at 160×120
(lever 44's recipe), with denormals flushed to zero, whose cost is then that of a trained one.

Usage: python bench/bench_late_fusion.py [--model models/depth3dseg_nyu13.pt]
       [--geometry GEOMETRY_MODEL] [--runs 30] [--threads 2]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch

from depth3dseg_ros.clihelp import DefaultsHelpFormatter
from depth3dseg_ros.core.geometry import resize_intrinsics
from depth3dseg_ros.core.imageops import measured_at
from depth3dseg_ros.core.inference import Segmenter
from depth3dseg_ros.core.model import Depth3DSeg
from depth3dseg_ros.core.modelfile import load_model, save_model
from timing import interleaved, median_ms

REPO = Path(__file__).resolve().parents[1]
NYU_K = np.array([[518.86, 0.0, 325.58], [0.0, 519.47, 253.74], [0.0, 0.0, 1.0]])


def room_depth(h: int = 480, w: int = 640) -> np.ndarray:
    """A floor seen from 1.2 m and a wall at 4 m, with a few holes: H×W float32 metres."""
    v = np.arange(h, dtype=np.float64)[:, None] - NYU_K[1, 2]
    floor = np.where(v > 0, 1.2 * NYU_K[1, 1] / np.maximum(v, 1e-6), np.inf)
    d = np.minimum(floor, 4.0).repeat(w, 1).astype(np.float32)
    d[::17, ::13] = 0.0  # sensor holes
    return d


def untrained_geometry_model(colour: str, path: Path) -> Path:
    """A geometry model file at ``path``: the colour model's arch with fresh weights at 160×120,
    marked ``input: depth_code`` (what the benchmark times does not depend on the weights)."""
    model, meta = load_model(colour)
    fresh = Depth3DSeg.from_arch(dict(meta['arch']))
    keep = {k: v for k, v in meta.items() if k not in ('arch', 'training', 'created')}
    return save_model(path, fresh, dict(keep, input_size=[160, 120], input='depth_code'))


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0."""
    ap = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0], formatter_class=DefaultsHelpFormatter
    )
    ap.add_argument(
        '--model',
        default=str(REPO / 'models' / 'depth3dseg_nyu13.pt'),
        help='the colour model file',
    )
    ap.add_argument(
        '--geometry',
        default=None,
        help="a geometry model file (meta input depth_code); default: an untrained "
        "one of the colour model's arch at 160x120",
    )
    ap.add_argument('--runs', type=int, default=30, help='timed calls of each')
    ap.add_argument('--threads', type=int, default=2, help='torch CPU threads')
    args = ap.parse_args(argv)
    tmp = tempfile.TemporaryDirectory()
    untrained = args.geometry is None
    if untrained:
        args.geometry = untrained_geometry_model(args.model, Path(tmp.name) / 'geo.pt')
        # fresh weights give denormal activations, 3x slower on the CPU than a trained net's
        # (measured: 165 against 52 ms); flushed, it costs what a trained one does
        torch.set_flush_denormal(True)
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
    cpu = torch.device('cpu')
    colour_ms, fused_ms, _ = interleaved(
        lambda: segs['colour'].infer(rgb, NYU_K, 'fused', depth),
        lambda: segs['late fusion'].infer(rgb, NYU_K, 'fused', depth),
        cpu,
        args.runs,
        3,
    )
    geo = segs['late fusion'].geometry
    w, h = segs['colour'].input_size  # the branch's inputs as the Segmenter makes them
    m = torch.from_numpy(measured_at(depth, rgb.shape, (w, h)))[None, None]
    K = torch.tensor(resize_intrinsics(NYU_K, (640, 480), (w, h)), dtype=torch.float32)
    out = {'seg2d': torch.zeros(1, len(segs['colour'].classes), h, w)}
    branch_ms = median_ms(lambda: geo.fuse(out, m, K, 0), cpu, args.runs, 0)
    print(
        f'Segmenter.infer 640x480 with measured depth, torch, {args.threads} threads, median of '
        f'{args.runs}: colour {colour_ms:.2f} ms, late fusion {fused_ms:.2f} ms, '
        f'ratio {fused_ms / colour_ms:.3f}; the geometry branch alone '
        f'{branch_ms:.2f} ms (geometry model at {geo.input_size[0]}x'
        f'{geo.input_size[1]}{", untrained" if untrained else ""})'
    )
    tmp.cleanup()
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
