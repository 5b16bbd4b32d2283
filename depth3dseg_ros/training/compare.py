"""``depth3dseg-compare``: did a new model beat a base model on the same frames by more than the
choice of frames explains? Paired frame bootstrap (core.bootstrap) of two depth3dseg-eval reports.

    depth3dseg-eval --model models/depth3dseg_nyu13.pt --data ds/site --out eval/base
    depth3dseg-eval --model runs/finetune/model.pt   --data ds/site --out eval/new
    depth3dseg-compare eval/base eval/new

Prints, for mIoU fused / 2D / 3D and AbsRel: the base and new figures, the difference new − base,
its 95 % paired interval (each resample draws the same frames for both models) and the one-sided
bootstrap p-value (the fraction of resamples in which new is not better). Both reports must hold
the same frames in the same order (their ``frames.npz`` ids); the reports' evaluation settings
(data, ``--measured-depth``) are printed so that a mismatch is seen. ``--json`` writes the result.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from depth3dseg_ros.core import bootstrap
from depth3dseg_ros.training.frame_stats import (
    FIGURES,
    MIN_RESAMPLES,
    SEG_KEYS,
    level_label,
    load_frames,
    repeated_ids,
)


def compare_frames(
    base: tuple[list[str], dict],
    new: tuple[list[str], dict],
    resamples: int = bootstrap.DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Paired intervals {'miou_fused': PairedInterval dict, 'miou_2d', 'miou_3d', 'absrel'} of
    ``new`` − ``base``, each (ids, arrays) as frame_stats.load_frames returns.

    Raises ValueError naming the first differing frame when the two hold different frames: other
    ids, the same ids in another order, or the same ids with other ground truth (each frame's
    labelled pixels per class, its valid depth pixels: the same bag extracted another way, or
    relabelled; for depth, also two models with other max_depth); or when their class sets
    differ."""
    (ids_a, a), (ids_b, b) = base, new
    if ids_a != ids_b:
        i = next((i for i, (x, y) in enumerate(zip(ids_a, ids_b)) if x != y), None)
        where = (
            f'frame {i}: {ids_a[i]!r} against {ids_b[i]!r}'
            if i is not None
            else f'{len(ids_a)} frames against {len(ids_b)}'
        )
        raise ValueError(
            f'the two reports were made on different frames ({where}): evaluate both models on '
            'the same dataset directories, in the same order'
        )
    if a['conf_2d'].shape != b['conf_2d'].shape:
        raise ValueError(
            f"the two reports use other class sets ({a['conf_2d'].shape[1]} classes against "
            f"{b['conf_2d'].shape[1]})"
        )
    for what, fa, fb in (
        ('labels', a['conf_2d'].sum(2), b['conf_2d'].sum(2)),  # per frame: pixels per true class
        ('valid depth pixels', a['depth_pixels'], b['depth_pixels']),
    ):
        diff = np.flatnonzero((np.asarray(fa) != np.asarray(fb)).reshape(len(ids_a), -1).any(1))
        if diff.size:
            i = int(diff[0])
            raise ValueError(
                f'the two reports name the same frames but their ground truth differs ({what} of '
                f'frame {i}, {ids_a[i]!r}, and {diff.size - 1} more): evaluate both models on the '
                'same dataset directories, extracted the same way'
                + (' (or the models\' max_depth differ)' if what.startswith('valid') else '')
            )
    if a.get('void_id') != b.get('void_id'):
        raise ValueError(f"void ids differ: base {a.get('void_id')}, new {b.get('void_id')}")
    out: dict[str, Any] = {}
    for key, arr in SEG_KEYS:
        out[key] = bootstrap.paired_miou(
            a[arr], b[arr], a.get('void_id'), resamples, level, seed
        ).to_dict()
    out['absrel'] = bootstrap.paired_absrel(
        a['absrel_sum'],
        a['depth_pixels'],
        b['absrel_sum'],
        b['depth_pixels'],
        resamples,
        level,
        seed,
    ).to_dict()
    return out


def _read_report(d: Path) -> dict[str, Any]:
    p = d / 'report.json'
    return json.loads(p.read_text()) if p.is_file() else {}


def format_comparison(res: dict[str, Any], base: dict, new: dict) -> str:
    """Readable table of `compare_frames`' result, with the two reports' figures."""

    def f(v, signed=False):
        return '    -' if v is None else (f'{v:+.3f}' if signed else f'{v:.3f}')

    level = level_label(next(iter(res.values()))['level'])
    lines = [
        f"{'figure':<12}{'base':>7}{'new':>7}{'new-base':>10}   {level} interval"
        f"{'p(not better)':>17}{'frames':>8}"
    ]
    for key, label, _ in FIGURES:
        r = res[key]
        p = '-' if r['p_not_better'] is None else f"{r['p_not_better']:.3f}"
        lines.append(
            f'{label:<12}{f(base.get(key)):>7}{f(new.get(key)):>7}{f(r["value"], True):>10}'
            f'   [{f(r["lo"], True)}, {f(r["hi"], True)}]{p:>12}{r["frames"]:>8}'
        )
    lines.append(
        f"{r['resamples']} paired resamples of the frames; AbsRel: lower is better, so its "
        'p counts resamples where new is not lower.'
    )
    return '\n'.join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse the depth3dseg-compare command line (``argv`` None: sys.argv)."""
    p = argparse.ArgumentParser(
        prog='depth3dseg-compare', description=__doc__.split('\n\n')[0].replace('``', '')
    )
    p.add_argument('base', help='depth3dseg-eval report directory of the base model')
    p.add_argument('new', help='depth3dseg-eval report directory of the new model (same frames)')
    p.add_argument(
        '--resamples',
        type=int,
        default=bootstrap.DEFAULT_RESAMPLES,
        help=f'paired resamples of the frames (default %(default)s, at least {MIN_RESAMPLES})',
    )
    p.add_argument('--level', type=float, default=0.95, help='interval level (default 0.95)')
    p.add_argument('--seed', type=int, default=0, help='resampling seed (>= 0; default 0)')
    p.add_argument('--json', help='also write the result to this JSON file')
    return p.parse_args(argv)


def check_args(args: argparse.Namespace) -> None:
    """Raise ValueError naming the flag for --resamples < MIN_RESAMPLES, --level outside (0, 1)
    or --seed < 0."""
    if args.resamples < MIN_RESAMPLES:
        raise ValueError(f'--resamples={args.resamples} must be >= {MIN_RESAMPLES}')
    if not 0.0 < args.level < 1.0:
        raise ValueError(f'--level={args.level} must be in (0, 1)')
    if args.seed < 0:
        raise ValueError(f'--seed={args.seed} must be >= 0')


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns 0, or 2 after one ``depth3dseg-compare: error:`` line for a
    missing report or frames file, a damaged one, frames that differ, a bad --resamples / --level /
    --seed, or a --json path that cannot be written; warns (stderr) when frame ids repeat."""
    args = parse_args(argv)
    try:
        check_args(args)
        base, new = Path(args.base), Path(args.new)
        fb, fn = load_frames(base), load_frames(new)
        res = compare_frames(fb, fn, args.resamples, args.level, args.seed)
    except (FileNotFoundError, ValueError) as exc:
        print(f'depth3dseg-compare: error: {" ".join(str(exc).split())}', file=sys.stderr)
        return 2
    rep = repeated_ids(fb[0])
    if rep:
        print(
            f'depth3dseg-compare: warning: {len(rep)} frame ids occur more than once (e.g. '
            f'{rep[0]!r}: a dataset given twice?); the intervals count them as separate frames '
            'and are too narrow',
            file=sys.stderr,
        )
    rb, rn = _read_report(base), _read_report(new)
    for name, r, d in (('base', rb, base), ('new', rn, new)):
        print(
            f"{name}: {d}  model {r.get('model', '?')}  data {r.get('data', '?')}  "
            f"measured depth {r.get('measured_depth', '?')}"
        )
    print(format_comparison(res, rb, rn))
    if args.json:
        try:
            Path(args.json).write_text(json.dumps(res, indent=1))
        except OSError as exc:
            print(f'depth3dseg-compare: error: --json {args.json}: {exc}', file=sys.stderr)
            return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
