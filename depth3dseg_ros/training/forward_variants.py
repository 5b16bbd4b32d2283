"""Score one model file under variants of its forward pass, as depth3dseg-eval scores it.

The inference-time levers of docs/levers.md (test-time augmentation, `scripts/tta_eval.py`; logit
adjustment, `scripts/logit_adjust_eval.py`) change what a loaded model computes without training
it. Each variant is a function that takes the loaded model and returns a replacement for one of
its methods; the model is scored with the replacement bound, then restored, so every variant runs
on the same weights and frames and the variant that changes nothing gives depth3dseg-eval's
figures (METHOD M7/M8 metrics, training.evaluate).
"""

from __future__ import annotations

import argparse
import types
from typing import Any, Callable

import torch

from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.paths import share_file
from depth3dseg_ros.training.dataset import load_records
from depth3dseg_ros.training.evaluate import evaluate_model, model_dataset

#: what the command lines catch and turn into a usage error (exit 2): a bad value or file
#: (ValueError, core.modelfile.ModelFileError) or a missing / wrong kind of path (OSError)
INPUT_ERRORS = (ValueError, OSError)

#: the figures each variant reports (keys of evaluate_model's result)
KEYS = ('miou_2d', 'miou_3d', 'miou_fused', 'pixel_acc_fused', 'absrel', 'delta1')

#: a variant: model -> the function to bind as ``model.<method>`` (self first)
Variant = Callable[[torch.nn.Module], Callable[..., Any]]


def add_data_args(ap: argparse.ArgumentParser) -> None:
    """The command-line options every lever script shares: --model (default: the shipped model,
    found as the node finds it), --data (default: the real evaluation set), --measured-depth."""
    ap.add_argument(
        '--model',
        default=None,
        help='model file (default: the shipped models/depth3dseg_nyu13.pt)',
    )
    ap.add_argument(
        '--data',
        nargs='+',
        default=['data/ds_real_labelled'],
        help='dataset directories (depth3dseg-extract format; default data/ds_real_labelled, the '
        '11 labelled real frames: make it with python scripts/real_depth_split.py)',
    )
    ap.add_argument(
        '--measured-depth',
        action='store_true',
        help="only the labelled frames with depth, their depth given as an RGB-D camera's",
    )


def model_arg(value: str | None) -> str:
    """The --model value, or the shipped model's path (depth3dseg_ros.paths.share_file) when it
    is None; FileNotFoundError naming the places looked in when that is missing."""
    return value if value is not None else str(share_file('models', 'depth3dseg_nyu13.pt'))


def load_labelled(
    model_path: str, data: list[str], measured_depth: bool = False
) -> tuple[torch.nn.Module, ClassSet, Any]:
    """(model in eval mode, its ClassSet, the un-augmented dataset of the labelled frames of the
    dataset directories ``data`` at the model's input size); with ``measured_depth`` only the
    labelled frames that have depth. Raises ValueError when there is no such frame, or for a bad
    model file (core.modelfile.ModelFileError)."""
    model, meta = load_model(model_path, map_location='cpu')
    model.eval()
    classes = ClassSet.from_dict(meta['classes'])
    records = [r for r in load_records(data, classes) if r.get('labels')]
    if measured_depth:
        records = [r for r in records if r.get('depth')]
    if not records:
        raise ValueError(f'{data}: no labelled frame{" with depth" if measured_depth else ""}')
    return model, classes, model_dataset(records, meta, classes)


def evaluate_variants(
    model: torch.nn.Module,
    classes: ClassSet,
    dataset: Any,
    variants: dict[Any, Variant],
    method: str = 'forward',
    measured_depth: bool = False,
) -> dict[Any, dict]:
    """{name: KEYS figures + frames} of ``model`` on ``dataset`` with each variant's function bound
    as ``model.<method>`` ('forward' or 'forward_2d'); the model's own method is restored after
    each, also on error."""
    out = {}
    for name, make in variants.items():
        setattr(model, method, types.MethodType(make(model), model))
        try:
            r = evaluate_model(model, dataset, classes, measured_depth=measured_depth)
        finally:
            delattr(model, method)
        out[name] = {k: r[k] for k in KEYS} | {'frames': r['frames']}
    return out


def markdown_table(first: str, results: dict[Any, dict]) -> str:
    """The figures of evaluate_variants as a Markdown table: one row per variant, its name (a
    float printed short: 0.3, 1) in the column headed ``first``; '-' where a figure is None (no
    depth to score)."""
    lines = [f'| {first} | frames | ' + ' | '.join(KEYS) + ' |', '|---|---|' + '---|' * len(KEYS)]
    for name, r in results.items():
        label = f'{name:g}' if isinstance(name, float) else str(name)
        cells = ['-' if r[k] is None else f'{r[k]:.3f}' for k in KEYS]
        lines.append(f'| {label} | {r["frames"]} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)
