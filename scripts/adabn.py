#!/usr/bin/env python3
"""Test-time BatchNorm statistics from real images (AdaBN; Li et al. 2016, "Revisiting batch
normalization for practical domain adaptation"), measured on the real sample frames.

AdaBN re-estimates every BatchNorm layer's running mean/variance of the 2D+depth network on
unlabelled images of the target domain, with no labels and no gradient step: a robot team could do
it with a few minutes of its own camera. Cross-split, so no frame adapts the statistics it is
scored on: the statistics come from the 11 unlabelled frames (plus their mirror images) when
scoring the 11 labelled frames (fused mIoU over the classes present, pixel accuracy, AbsRel on the
3 of them with depth), and from the labelled frames' RGB when scoring depth on the unlabelled ones.

Usage: python scripts/adabn.py [--model M]
"""

from __future__ import annotations

import argparse
import copy
import tempfile
from pathlib import Path

import cv2
import numpy as np
import torch

from depth3dseg_ros.core.inference import Segmenter
from depth3dseg_ros.core.modelfile import load_model, save_model
from depth3dseg_ros.samples.frames import load, sample_frames


def adapt(model: torch.nn.Module, meta: dict, frames: list, size: tuple[int, int]):
    """A copy of ``model`` whose 2D net's BatchNorm statistics are the cumulative mean/variance
    over ``frames`` (each also mirrored) at the network input ``size`` (W, H)."""
    m = copy.deepcopy(model)
    mean = torch.tensor(meta['mean']).view(1, 3, 1, 1)
    std = torch.tensor(meta['std']).view(1, 3, 1, 1)
    for b in m.net.modules():
        if isinstance(b, torch.nn.BatchNorm2d):
            b.reset_running_stats()
            b.momentum = None  # cumulative average over all batches
            b.train()
    with torch.no_grad():
        for rgb, *_ in frames:
            x = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA).astype(np.float32) / 255.0
            t = (torch.from_numpy(x).permute(2, 0, 1)[None] - mean) / std
            m.net(t)
            m.net(torch.flip(t, [3]))
    return m.eval()


def score(model, meta: dict, frames: list, workdir: Path, tag: str) -> dict:
    """Fused mIoU (classes present in labels or prediction), pixel accuracy and AbsRel of
    ``model`` (served as the node serves it) on ``frames``."""
    path = save_model(workdir / f'{tag}.pt', model, meta)
    seg = Segmenter(path, device='cpu', backend='torch')
    n = len(seg.classes)
    inter, union = np.zeros(n), np.zeros(n)
    hit = tot = 0
    absrel = []
    for rgb, K, depth, lab in frames:
        r = seg.infer(rgb, K)
        h, w = r.depth.shape
        if depth is not None:
            g = cv2.resize(depth, (w, h), interpolation=cv2.INTER_NEAREST)
            v = np.isfinite(g) & (g > 0.1) & (g < 10)
            absrel.append(np.mean(np.abs(r.depth[v] - g[v]) / g[v]))
        if lab is not None:
            L = cv2.resize(lab, (w, h), interpolation=cv2.INTER_NEAREST)
            v = L > 0
            hit += int((r.labels[v] == L[v]).sum())
            tot += int(v.sum())
            for c in range(1, n):
                inter[c] += ((r.labels == c) & (L == c) & v).sum()
                union[c] += (((r.labels == c) & v) | (L == c)).sum()
    present = union[1:] > 0
    return {
        'miou': float(np.mean((inter[1:] / np.maximum(union[1:], 1))[present])) if tot else None,
        'pixel_acc': hit / tot if tot else None,
        'absrel': float(np.mean(absrel)) if absrel else None,
    }


def main() -> int:
    """Print the figures with and without AdaBN; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--model', default='models/depth3dseg_nyu13.pt')
    args = ap.parse_args()
    torch.set_num_threads(1)
    model, meta = load_model(args.model)
    size = tuple(meta.get('input_size') or (320, 240))
    frames = [load(f) for f in sample_frames()]  # (rgb, K, depth or None, labels or None)
    labelled = [f for f in frames if f[3] is not None]
    unlabelled = [f for f in frames if f[3] is None]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, lab_model, unl_model in (
            ('as shipped', model, model),
            (
                'AdaBN (cross-split)',
                adapt(model, meta, unlabelled, size),
                adapt(model, meta, labelled, size),
            ),
        ):
            a = score(lab_model, meta, labelled, work, 'lab')
            b = score(unl_model, meta, unlabelled, work, 'unl')
            print(
                f'{name:20s} labelled ({len(labelled)}): fused mIoU {a["miou"]:.3f}, pixel acc '
                f'{a["pixel_acc"]:.3f}, AbsRel {a["absrel"]:.3f} | unlabelled '
                f'({len(unlabelled)}): AbsRel {b["absrel"]:.3f}'
            )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
