#!/usr/bin/env python3
"""Test-time augmentation of the 2D+depth net: do averaged mirrored or rescaled views help?

On real frames (docs/levers.md, "Test-time augmentation").

Each view runs the 2D+depth net (METHOD M1) on the input image horizontally flipped and/or resized
by a scale factor (K is not needed: the net sees no K unless ``depth_focal`` is set, and fy / H is
unchanged by resizing and flipping); its outputs are mapped back to the input grid (flipped back,
resized bilinearly). The S2D logits are averaged and the depth is the geometric mean; the cloud
(M2) and the 3D net (M3) then run once on that depth, and the fused labels (M7) are scored as
depth3dseg-eval scores them. The view ``1`` alone is the model as shipped (a test checks it gives
depth3dseg-eval's figures).

Usage: python scripts/tta_eval.py --model M --data data/ds_real_labelled [--measured-depth]
       [--views 1 1f 0.75 0.75+1]     (a view list: scales joined by '+', 'f' adds the mirror)
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from depth3dseg_ros.training.forward_variants import (
    INPUT_ERRORS,
    KEYS,
    add_data_args,
    evaluate_variants,
    load_labelled,
    markdown_table,
    model_arg,
)

__all__ = ['KEYS', 'parse_views', 'tta_forward_2d', 'evaluate_views', 'main']


def parse_views(spec: str) -> list[tuple[float, bool]]:
    """'0.75+1f' -> [(0.75, False), (1.0, False), (1.0, True)]: each '+'-joined scale is a view,
    a trailing 'f' adds its mirror image. Raises ValueError naming the spec for a scale that is not
    a number in (0, 4]."""
    views = []
    for part in spec.split('+'):
        flip = part.endswith('f')
        try:
            s = float(part[:-1] if flip else part)
        except ValueError:
            raise ValueError(f'view {spec!r}: {part!r} is not a scale (e.g. 0.75 or 1f)') from None
        if not 0.0 < s <= 4.0:
            raise ValueError(f'view {spec!r}: scale {s} must lie in (0, 4]')
        views.append((s, False))
        if flip:
            views.append((s, True))
    return views


def tta_forward_2d(model: torch.nn.Module, views: list[tuple[float, bool]]):
    """A replacement for ``model.forward_2d`` (bind with types.MethodType) that averages ``views``
    ((scale, mirrored) pairs): S2D logits B×C×H×W by their mean, depth B×1×H×W m by its geometric
    mean, both on the input's H×W grid."""
    base = model.forward_2d

    def forward_2d(self, rgb_norm: torch.Tensor, K: torch.Tensor | None = None) -> dict:
        H, W = rgb_norm.shape[-2:]
        segs, logd = [], []
        for s, flip in views:
            x = rgb_norm
            if s != 1.0:
                size = (max(2, round(H * s)), max(2, round(W * s)))
                x = F.interpolate(x, size=size, mode='bilinear', align_corners=False)
            if flip:
                x = torch.flip(x, [-1])
            o = base(x, K)
            seg, d = o['seg2d'], o['depth']
            if flip:
                seg, d = torch.flip(seg, [-1]), torch.flip(d, [-1])
            if s != 1.0:
                seg = F.interpolate(seg, size=(H, W), mode='bilinear', align_corners=False)
                d = F.interpolate(d, size=(H, W), mode='bilinear', align_corners=False)
            segs.append(seg)
            logd.append(torch.log(d))
        return {'seg2d': torch.stack(segs).mean(0), 'depth': torch.exp(torch.stack(logd).mean(0))}

    return forward_2d


def evaluate_views(
    model_path: str, data: list[str], specs: list[str], measured_depth: bool = False
) -> dict[str, dict]:
    """{spec: depth3dseg-eval figures (KEYS)} of the model file with each view list of ``specs``
    on the dataset directories ``data`` (with ``measured_depth``: only the labelled frames with
    depth, their depth given as an RGB-D camera's). Raises ValueError for a bad spec or data with
    no labelled frame to score."""
    parsed = {spec: parse_views(spec) for spec in specs}
    model, classes, ds = load_labelled(model_path, data, measured_depth)
    variants = {spec: (lambda m, v=views: tta_forward_2d(m, v)) for spec, views in parsed.items()}
    return evaluate_variants(model, classes, ds, variants, 'forward_2d', measured_depth)


def main(argv: list[str] | None = None) -> int:
    """Command line: print a Markdown table, one row per view list; exit 0 (2 on bad input)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_args(ap)
    ap.add_argument(
        '--views',
        nargs='+',
        default=['1', '1f', '0.75', '0.75+1', '1.25'],
        help="view lists: scales joined by '+', a trailing 'f' adds the mirror image",
    )
    a = ap.parse_args(argv)
    try:
        res = evaluate_views(model_arg(a.model), a.data, a.views, a.measured_depth)
    except INPUT_ERRORS as e:
        ap.error(str(e))
    print(markdown_table('views', res))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
