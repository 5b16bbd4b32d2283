#!/usr/bin/env python3
"""Average the weights of model files fine-tuned from one model (a "model soup").

Wortsman et al. (ICML 2022, "Model soups: averaging weights of multiple fine-tuned models improves
accuracy without increasing inference time") average the parameters of several fine-tunes of one
pre-trained network; the average often scores better than each of them, most of all under
distribution shift, and costs nothing at inference: it is one model of the same size and speed.
Here the ingredients are `depth3dseg-train` runs that started from the same ``model.init`` (M6)
with different ``train.seed``; docs/levers.md ("Weight averaging") measures it on real frames.

Every floating-point tensor of the state_dict (weights, biases, BatchNorm running mean and
variance) becomes the weighted mean of the ingredients' tensors; integer buffers (BatchNorm's
``num_batches_tracked``) are taken from the first file. The metadata is the first file's, with
``training.weight_average`` naming the ingredients and their weights. Ingredients whose input white
balance (``input_balance``, core.colour_balance) differs are refused unless ``--input-balance``
names the soup's: a soup of a model and its fine-tunes under another balance is a choice to state.

Usage: python scripts/weight_average.py A/model.pt B/model.pt [C/model.pt ...] --out soup.pt
       [--weights 0.5 0.5 ...]     (default: equal weights; they are normalised to sum 1)
       [--input-balance none|grey_world]   (the soup's, where the ingredients' differ)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from depth3dseg_ros.core.colour_balance import BALANCES, check_balance
from depth3dseg_ros.core.model import check_arch
from depth3dseg_ros.core.modelfile import ModelFileError, load_model, save_model

SAME_META = ('classes', 'arch', 'input_size', 'mean', 'std', 'max_depth')


def _plain(key: str, value):
    """A metadata value as compared: an arch with its defaults filled in (files written before a
    key was added to the arch lack it)."""
    return check_arch(dict(value)) if key == 'arch' else value


def average_models(
    paths: list[str], weights: list[float] | None = None, input_balance: str | None = None
):
    """(model, meta): the weighted average of the model files ``paths`` (see the module text).

    Args:
        paths: two or more model files (core.modelfile) with equal classes, arch, input size,
            normalisation and max_depth.
        weights: one number >= 0 per file (default equal); normalised to sum 1.
        input_balance: the soup's ``input_balance`` ('none' | 'grey_world'); None: the files'
            own, which must then be equal.

    Raises:
        ValueError: fewer than two files, a weight count that differs from the file count, a
            negative weight or weights summing to 0.
        ModelFileError: a file that is not a model file, or whose metadata key (named) differs from
            the first file's (``input_balance`` only when ``input_balance`` is None).
    """
    if input_balance is not None:
        check_balance(input_balance, 'input_balance')
    if len(paths) < 2:
        raise ValueError(f'weight averaging needs two or more model files, got {len(paths)}')
    weights = [1.0] * len(paths) if weights is None else [float(w) for w in weights]
    if len(weights) != len(paths):
        raise ValueError(f'{len(weights)} weights for {len(paths)} model files')
    if min(weights) < 0 or sum(weights) <= 0:
        raise ValueError(f'weights {weights} must be >= 0 with a positive sum')
    weights = [w / sum(weights) for w in weights]
    model, meta = load_model(paths[0])
    state = model.state_dict()
    total = {k: v.double() * weights[0] for k, v in state.items() if v.is_floating_point()}
    for path, w in zip(paths[1:], weights[1:]):
        other, other_meta = load_model(path)
        for key in SAME_META:
            if _plain(key, other_meta[key]) != _plain(key, meta[key]):
                raise ModelFileError(
                    f"{path}: meta['{key}']={other_meta[key]!r} differs from {paths[0]}'s "
                    f'{meta[key]!r}: only fine-tunes of one model can be averaged'
                )
        if input_balance is None and other_meta['input_balance'] != meta['input_balance']:
            raise ModelFileError(
                f"{path}: meta['input_balance']={other_meta['input_balance']!r} differs from "
                f"{paths[0]}'s {meta['input_balance']!r}: name the soup's with --input-balance"
            )
        for k, v in other.state_dict().items():
            if k in total:
                total[k] += v.double() * w
    model.load_state_dict({k: total[k].to(v.dtype) if k in total else v for k, v in state.items()})
    training = dict(meta.get('training') or {})
    training['weight_average'] = {'models': [str(p) for p in paths], 'weights': weights}
    balance = meta['input_balance'] if input_balance is None else input_balance
    return model, {**meta, 'training': training, 'input_balance': balance}


def main(argv: list[str] | None = None) -> int:
    """Command line: write the averaged model file; exit 0 (2 on bad input)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('models', nargs='+', help='model files fine-tuned from one model')
    ap.add_argument('--out', required=True, help='the averaged model file to write')
    ap.add_argument('--weights', nargs='+', type=float, help='one per model (default equal)')
    ap.add_argument(
        '--input-balance', choices=BALANCES, help="the soup's, where the files' differ"
    )
    a = ap.parse_args(argv)
    try:
        model, meta = average_models(a.models, a.weights, a.input_balance)
    except (ValueError, FileNotFoundError) as e:  # ModelFileError is a ValueError
        ap.error(str(e))
    out = save_model(Path(a.out), model, meta)
    w = meta['training']['weight_average']['weights']
    print(f'{out}: average of {len(a.models)} model files, weights {w}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
