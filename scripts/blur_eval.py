#!/usr/bin/env python3
"""Input low-pass lever: does a Gaussian blur of every input image help on real frames?

On real frames (docs/levers.md, "A low-pass of the input image"). The rendered training rooms
have almost no fine texture; real photographs have plenty, and the depth head follows it (floor
tiles show up as depth stripes). A fixed Gaussian blur of the input (σ in px at 320 px width,
applied to the normalised image before the 2D+depth net, METHOD M1; blur commutes with the
per-channel normalisation) removes that texture from every frame, rendered or real. The cloud
(M2), the 3D net (M3) and the fused labels (M7) run as shipped on the blurred frame's outputs and
are scored as depth3dseg-eval scores them (σ 0 is the model as shipped).

Usage: python scripts/blur_eval.py --model M --data DIR [DIR ...] [--sigmas 0 1 2]
       [--measured-depth]
       (frames without labels, e.g. data/ds_real_depth_train, give the depth figures only)
"""

from __future__ import annotations

import argparse

import torch

from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.lowpass import InputLowPass
from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.training.dataset import load_records
from depth3dseg_ros.training.evaluate import model_dataset
from depth3dseg_ros.training.forward_variants import (
    INPUT_ERRORS,
    add_data_args,
    evaluate_variants,
    markdown_table,
    model_arg,
)

__all__ = ['blur_forward_2d', 'main']


def blur_forward_2d(model: torch.nn.Module, sigma: float):
    """A replacement for ``model.forward_2d`` (bind with types.MethodType) that blurs the
    normalised input by ``sigma`` px at 320 px width (scaled with the input width) first."""
    base = model.forward_2d

    def forward_2d(self, rgb_norm: torch.Tensor, K: torch.Tensor | None = None) -> dict:
        return base(InputLowPass(sigma * rgb_norm.shape[-1] / 320.0)(rgb_norm), K)

    return forward_2d


def main(argv: list[str] | None = None) -> int:
    """Command line: one Markdown table per dataset directory, one row per σ; exit 0 (2 on bad
    input)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_args(ap)
    ap.add_argument('--sigmas', type=float, nargs='+', default=[0.0, 1.0, 2.0])
    a = ap.parse_args(argv)
    try:
        model, meta = load_model(model_arg(a.model), map_location='cpu')
        model.eval()
        classes = ClassSet.from_dict(meta['classes'])
        for d in a.data:
            records = load_records([d], classes)
            if a.measured_depth:
                records = [r for r in records if r.get('depth') and r.get('labels')]
            if not records:
                raise ValueError(f'{d}: no frame to score')
            ds = model_dataset(records, meta, classes)
            variants = {s: (lambda m, s=s: blur_forward_2d(m, s)) for s in a.sigmas}
            res = evaluate_variants(model, classes, ds, variants, 'forward_2d', a.measured_depth)
            print(f'\n{d} ({len(records)} frames)')
            print(markdown_table('σ px', res))
    except INPUT_ERRORS as e:
        ap.error(str(e))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
