#!/usr/bin/env python3
"""Edge-aware refinement: does a guided filter on the class distributions help on real frames?

On real frames (docs/levers.md, "Edge-aware refinement by a guided filter").

The shipped model's labels are blurred across object edges at 1/4 resolution (its decoder), and
its errors on real frames sit largely along those edges. A guided filter (He, Sun, Tang, "Guided
Image Filtering", ECCV 2010 / TPAMI 2013) smooths each class's probability map while following the
edges of a guide image, as cost-volume filtering does for stereo (Rhemann et al., CVPR 2011): in
every r-radius window the output is a linear function a·I + b of the guide I fitted to the input
p, with ``eps`` damping a where the guide is flat. Here p is each head's class distribution
(METHOD M7: softmax, void excluded), I the input image's grey level (mean of R, G, B, min-max
normalised per frame to [0, 1]), both at the network's input size; the filtered distributions
replace the heads' outputs before the M7 fusion (by linearity the fused one is filtered the same
way). ``r = 0`` is the model as shipped.

Usage: python scripts/guided_refine_eval.py [--model M] [--data D ...] [--measured-depth]
       [--radii 4 8] [--eps 1e-3 1e-2]
"""

from __future__ import annotations

import argparse
import itertools

import torch
import torch.nn.functional as F

from depth3dseg_ros.training.forward_variants import (
    INPUT_ERRORS,
    add_data_args,
    evaluate_variants,
    load_labelled,
    markdown_table,
    model_arg,
)

__all__ = ['box_mean', 'guided_filter', 'refined_forward', 'main']


def box_mean(x: torch.Tensor, r: int) -> torch.Tensor:
    """Mean over the (2r+1)×(2r+1) window around each pixel, windows clipped at the border (only
    the pixels inside count): B×C×H×W float -> same shape. Raises ValueError for r < 0."""
    if r < 0:
        raise ValueError(f'r={r} must be >= 0')
    if r == 0:
        return x
    return F.avg_pool2d(x, 2 * r + 1, stride=1, padding=r, count_include_pad=False)


def guided_filter(p: torch.Tensor, guide: torch.Tensor, r: int, eps: float) -> torch.Tensor:
    """The grey-guide guided filter (He et al. 2013, Algorithm 1): p B×C×H×W float filtered with
    guide B×1×H×W float (same B, H, W), window radius r px, regulariser eps (in the guide's units
    squared) -> B×C×H×W float. Constant p stays constant; p equal to a·guide + b comes back
    unchanged. Raises ValueError for mismatched shapes, r < 0 or eps <= 0."""
    if guide.dim() != 4 or guide.shape[1] != 1 or guide.shape[0] != p.shape[0]:
        raise ValueError(f'guide must be B×1×H×W for p {tuple(p.shape)}, got {tuple(guide.shape)}')
    if guide.shape[-2:] != p.shape[-2:]:
        raise ValueError(f'guide {tuple(guide.shape)} and p {tuple(p.shape)} differ in H×W')
    if not eps > 0:
        raise ValueError(f'eps={eps} must be > 0')
    mean_i = box_mean(guide, r)
    var_i = box_mean(guide * guide, r) - mean_i * mean_i
    mean_p = box_mean(p, r)
    cov_ip = box_mean(guide * p, r) - mean_i * mean_p
    a = cov_ip / (var_i + eps)
    b = mean_p - a * mean_i
    return box_mean(a, r) * guide + box_mean(b, r)


def grey_guide(rgb_norm: torch.Tensor) -> torch.Tensor:
    """B×3×H×W normalised RGB -> B×1×H×W grey level min-max normalised per frame to [0, 1] (a
    flat frame gives 0). Per-channel normalisation is affine, so the grey level of the normalised
    input differs from the image's only by channel weights close to equal."""
    g = rgb_norm.float().mean(1, keepdim=True)
    lo = g.amin((2, 3), keepdim=True)
    span = g.amax((2, 3), keepdim=True) - lo
    return (g - lo) / span.clamp_min(1e-6)


def refined_forward(model: torch.nn.Module, r: int, eps: float, void_id: int = 0):
    """A replacement for ``model.forward`` (bind with types.MethodType) whose ``seg2d`` and
    ``seg3d`` are the log of their guided-filtered class distributions (clamped to >= 1e-8 before
    the log, void kept at probability 0); ``r = 0`` returns the model's own outputs."""
    base = model.forward

    def forward(self, rgb_norm, *args, **kwargs) -> dict:
        out = dict(base(rgb_norm, *args, **kwargs))
        if r == 0:
            return out
        guide = grey_guide(rgb_norm)
        for key in ('seg2d', 'seg3d'):
            logits = out[key].float().clone()
            logits[:, void_id] = -float('inf')
            q = guided_filter(torch.softmax(logits, 1), guide, r, eps).clamp_min(1e-8)
            q[:, void_id] = 0.0
            out[key] = torch.log(q)
        return out

    return forward


def main(argv: list[str] | None = None) -> int:
    """Command line: a Markdown table, one row per (r, eps) plus r = 0; exit 0 (2 on bad
    input)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_args(ap)
    ap.add_argument('--radii', nargs='+', type=int, default=[4, 8], help='window radii r, px')
    ap.add_argument('--eps', nargs='+', type=float, default=[1e-3, 1e-2], help='regularisers')
    a = ap.parse_args(argv)
    try:
        if any(r < 1 for r in a.radii) or any(not e > 0 for e in a.eps):
            raise ValueError(f'--radii {a.radii} must be >= 1 and --eps {a.eps} > 0')
        model, classes, ds = load_labelled(model_arg(a.model), a.data, a.measured_depth)
        variants = {'none': lambda m: refined_forward(m, 0, 1.0, classes.void_id)}
        for r, eps in itertools.product(a.radii, a.eps):
            variants[f'r {r}, eps {eps:g}'] = lambda m, r=r, eps=eps: refined_forward(
                m, r, eps, classes.void_id
            )
        res = evaluate_variants(model, classes, ds, variants, 'forward', a.measured_depth)
    except INPUT_ERRORS as e:
        ap.error(str(e))
    print(markdown_table('guided filter', res))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
