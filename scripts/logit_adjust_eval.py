#!/usr/bin/env python3
"""Post-hoc logit adjustment: does removing the training set's class prior help on real frames?

On real frames (docs/levers.md, "Logit adjustment by the training prior").

The rendered rooms are mostly wall and floor (wall 46 % of the labelled pixels of the last
fine-tune's data), and on real frames the model over-predicts wall (43 % of the pixels against 30 %
in the labels) while it almost never says chair or objects. Menon et al. (ICLR 2021, "Long-tail
learning via logit adjustment") show that subtracting τ·log π_c from each class's logit, π the
training label prior, turns a model trained under that prior into one for a balanced prior (τ = 1:
the balanced-error optimum). Here both heads' logits (S2D and S3D, METHOD M1/M3) are shifted
before the M7 fusion; the void channel is left alone (it is never predicted). τ = 0 is the model as
shipped (a test checks it gives depth3dseg-eval's figures).

π is counted over the label images of ``--prior-data`` (every ``--every``-th labelled frame; pixel
counts per class id, void excluded, normalised to sum 1).

Usage: python scripts/logit_adjust_eval.py --model M --data data/ds_real_labelled
       --prior-data data/ds_synth_train data/ds_synth_nyu [--taus 0 0.3 1] [--measured-depth]
"""

from __future__ import annotations

import argparse
import numpy as np
import torch

from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.modelfile import read_model_file
from depth3dseg_ros.training.class_weights import label_statistics
from depth3dseg_ros.training.dataset import load_records
from depth3dseg_ros.training.forward_variants import (
    INPUT_ERRORS,
    KEYS,
    add_data_args,
    evaluate_variants,
    load_labelled,
    markdown_table,
    model_arg,
)

__all__ = ['KEYS', 'label_prior', 'logit_shift', 'adjusted_forward', 'evaluate_taus', 'main']


def label_prior(dirs: list[str], classes: ClassSet, every: int = 1) -> np.ndarray:
    """The class prior π (C float64, sums to 1, 0 at the void id) of the label images of the
    dataset directories ``dirs``: pixel counts of every ``every``-th labelled frame. Raises
    ValueError naming the directory or file when no labelled frame is found, a label image cannot
    be read or holds an id >= len(classes) (training.class_weights.label_statistics), or ``every``
    < 1; FileNotFoundError for a directory without a dataset index."""
    if every < 1:
        raise ValueError(f'every={every} must be >= 1')
    records = [r for r in load_records(dirs, classes) if r.get('labels')]
    if not records:
        raise ValueError(f'{dirs}: no labelled frame to count a prior from')
    counts = label_statistics(records[::every], len(classes))[0].astype(np.float64)
    counts[classes.void_id] = 0.0
    if counts.sum() == 0:
        raise ValueError(f'{dirs}: every counted pixel is void')
    return counts / counts.sum()


def logit_shift(prior: np.ndarray, tau: float, classes: ClassSet) -> torch.Tensor:
    """τ·log π as a 1×C×1×1 float32 tensor to subtract from B×C×H×W logits; 0 at the void id.

    Raises ValueError when τ is not finite, or when τ ≠ 0 and a class other than void has π = 0:
    log 0 would hand that class every pixel, so the prior must come from data that holds every
    class the model predicts (the model's own training data)."""
    if not np.isfinite(tau):
        raise ValueError(f'tau={tau} must be a finite number')
    missing = [n for i, n in enumerate(classes.names) if i != classes.void_id and prior[i] <= 0]
    if tau != 0 and missing:
        raise ValueError(
            f'the prior data has no pixels of {", ".join(missing)}: log 0 would give '
            'that class every pixel; count the prior over the data the model trained on'
        )
    shift = tau * np.log(np.where(prior > 0, prior, 1.0))
    shift[classes.void_id] = 0.0
    return torch.tensor(shift, dtype=torch.float32).view(1, -1, 1, 1)


def adjusted_forward(model: torch.nn.Module, shift: torch.Tensor):
    """A replacement for ``model.forward`` (bind with types.MethodType) whose ``seg2d`` and
    ``seg3d`` logits have ``shift`` subtracted; every other output is the model's own."""
    base = model.forward

    def forward(self, *args, **kwargs) -> dict:
        out = dict(base(*args, **kwargs))
        for key in ('seg2d', 'seg3d'):
            if out.get(key) is not None:
                out[key] = out[key] - shift.to(out[key].device)
        return out

    return forward


def evaluate_taus(
    model_path: str,
    data: list[str],
    prior: np.ndarray,
    taus: list[float],
    measured_depth: bool = False,
) -> dict[float, dict]:
    """{τ: depth3dseg-eval figures (KEYS) + frames} of the model file on the dataset directories
    ``data`` with both heads' logits shifted by τ·log ``prior``. Raises ValueError when
    ``data`` has no labelled frame (with depth, for ``measured_depth``), ``prior`` has the wrong
    length, or a τ is refused by logit_shift (all checked before any frame runs)."""
    model, classes, ds = load_labelled(model_path, data, measured_depth)
    if len(prior) != len(classes):
        raise ValueError(f'prior has {len(prior)} classes, the model {len(classes)}')
    shifts = {tau: logit_shift(prior, tau, classes) for tau in taus}
    variants = {tau: (lambda m, sh=sh: adjusted_forward(m, sh)) for tau, sh in shifts.items()}
    return evaluate_variants(model, classes, ds, variants, 'forward', measured_depth)


def main(argv: list[str] | None = None) -> int:
    """Command line: print the prior and a Markdown table, one row per τ; exit 0 (2 on bad
    input)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_args(ap)
    ap.add_argument(
        '--prior-data',
        nargs='+',
        required=True,
        help='the training set\'s labelled dataset directories, e.g. data/ds_synth_train '
        'data/ds_synth_nyu (made by the commands of models/README.md, "How it was trained")',
    )
    ap.add_argument('--every', type=int, default=7, help='count every N-th labelled frame (>= 1)')
    ap.add_argument('--taus', nargs='+', type=float, default=[0.0, 0.3, 1.0], help='values of τ')
    a = ap.parse_args(argv)
    try:
        model = model_arg(a.model)
        classes = ClassSet.from_dict(read_model_file(model)['meta']['classes'])
        prior = label_prior(a.prior_data, classes, a.every)
        res = evaluate_taus(model, a.data, prior, a.taus, a.measured_depth)
    except INPUT_ERRORS as e:
        ap.error(str(e))
    shown = (
        f'{n} {p:.3f}'
        for i, (n, p) in enumerate(zip(classes.names, prior))
        if i != classes.void_id
    )
    print('prior: ' + ', '.join(shown))
    print(markdown_table('τ', res))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
