"""The cost of a model file's input white balance (``input_balance``, core/colour_balance.py) in
``Segmenter.infer``: the same weights run with ``grey_world`` and with ``none``, one frame each in
turn (interleaved, so the machine's drift cancels), on a 640x480 uint8 frame.

Prints the median time per call of each and their ratio, measured in this run on this machine
(models/README.md, "2026-12-07", records the figure for the shipped model).

The balance is part of the preprocessing, which both backends share, so torch is timed.

Usage: python bench/bench_balance.py [--model models/depth3dseg_nyu13.pt] [--runs 30] [--threads 2]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch

from depth3dseg_ros.core.inference import Segmenter
from depth3dseg_ros.core.modelfile import load_model, save_model
from timing import interleaved

REPO = Path(__file__).resolve().parents[1]
NYU_K = np.array([[518.86, 0.0, 325.58], [0.0, 519.47, 253.74], [0.0, 0.0, 1.0]])


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--model', default=str(REPO / 'models' / 'depth3dseg_nyu13.pt'))
    ap.add_argument('--runs', type=int, default=30)
    ap.add_argument('--threads', type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, meta = load_model(args.model)
    keep = {k: v for k, v in meta.items() if k != 'arch'}
    rgb = np.random.default_rng(0).integers(0, 256, (480, 640, 3), dtype=np.uint8)
    with tempfile.TemporaryDirectory() as tmp:
        segs = {}
        for balance in ('grey_world', 'none'):
            path = Path(tmp) / f'{balance}.pt'
            save_model(path, model, dict(keep, input_balance=balance))
            segs[balance] = Segmenter(
                path, device='cpu', backend='torch', num_threads=args.threads
            )
            segs[balance].warmup(3)
        grey, none, _ = interleaved(
            lambda: segs['grey_world'].infer(rgb, NYU_K, 'fused'),
            lambda: segs['none'].infer(rgb, NYU_K, 'fused'),
            torch.device('cpu'),
            args.runs,
            0,
        )
    print(
        f'Segmenter.infer 640x480, torch, {args.threads} threads, median of {args.runs}: '
        f'grey_world {grey:.2f} ms, none {none:.2f} ms, '
        f'ratio {grey / none:.3f} (+{grey - none:.2f} ms)'
    )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
