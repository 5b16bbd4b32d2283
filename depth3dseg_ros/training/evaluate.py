"""``depth3dseg-eval``: evaluate a model file on dataset directories (or a bag) — METHOD M7/M8
metrics.

    depth3dseg-eval --model runs/x/model.pt --data ds/val [ds/other ...] --out eval/x [--grids 4]
    depth3dseg-eval --model runs/x/model.pt --bag bags/room_mcap --out eval/x [--preset realsense]

Runs the model batched at its network input size (the model file's ``input_size``,
``mean``/``std``), against ground truth resized to that size with nearest neighbour (labels: C22,
depth: NaN-safe, K scaled:
C18). Metrics (core.metrics.SegDepthEvaluator, accumulated over all pixels): mIoU, per-class IoU
and pixel accuracy for the 2D, 3D and fused labels; AbsRel, RMSE and δ1–δ3 for depth; and frames/s
of the batched forward pass. Writes ``report.json`` and ``report.txt`` (the table also printed),
``frames.npz`` (each frame's counts, for 95 % frame bootstrap intervals in the report and for
depth3dseg-compare), and with ``--grids N`` ``grid_XXX.png`` images (rgb | ground truth | fused
prediction | predicted depth). A tqdm progress bar over the batches goes to stderr when it is a
terminal (``--no-progress`` turns it off), like training's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cv2

from depth3dseg_ros.bags.dataset_writer import check_label_range
from depth3dseg_ros.clihelp import DefaultsHelpFormatter
from depth3dseg_ros.core import bootstrap
from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.inference import resolve_device
from depth3dseg_ros.core.late_fusion import HEADS, GeometryBranch, check_weight
from depth3dseg_ros.training import frame_stats
from depth3dseg_ros.training.dataset import load_records
from depth3dseg_ros.training.eval_report import (
    format_table,
    sample_grid,
    source_line,
)
from depth3dseg_ros.training.frame_stats import interval_lines
from depth3dseg_ros.training.scoring import FLAT_KEYS, evaluate_model, model_dataset  # noqa: F401


def extract_bags_to(bags: list[str], dst: Path, config: str | None, preset: str | None) -> Path:
    """Extract ``bags`` with bags.extract (the depth3dseg-extract code path, ``config``/``preset``
    as there) into the dataset directory ``dst``; returns dst. Image messages refused before
    decoding (over the config's ``max_image_pixels``, issue 55) are named on stderr, one warning
    line per topic. Errors are those of bags.extract.extract."""
    from depth3dseg_ros.bags.extract import extract, load_extract_config, refused_image_lines
    from depth3dseg_ros.bags.extract_config import config_error_line

    try:
        cfg = load_extract_config(config, preset)
    except (FileNotFoundError, ValueError) as err:  # one line naming --extract-config
        raise ValueError(config_error_line(err, '--extract-config', config)) from None
    report = extract(bags, dst, cfg)
    for line in refused_image_lines(report, 'depth3dseg-eval'):
        print(line, file=sys.stderr)
    return dst


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse the depth3dseg-eval command line (``argv`` None: sys.argv)."""
    p = argparse.ArgumentParser(
        prog='depth3dseg-eval',
        description=__doc__.split('\n\n')[0].replace('``', ''),
        formatter_class=DefaultsHelpFormatter,  # --help shows the defaults
    )
    p.add_argument(
        '--model', required=True, help='model file (core.modelfile, e.g. runs/x/model.pt)'
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument('--data', nargs='+', help='dataset directories (depth3dseg-extract format)')
    src.add_argument(
        '--bag', nargs='+', help='bags to extract to a temporary dataset directory first'
    )
    p.add_argument('--extract-config', help='depth3dseg-extract YAML (topics etc.) for --bag')
    p.add_argument('--preset', help='depth3dseg-extract topic preset for --bag')
    p.add_argument(
        '--out',
        required=True,
        help='report directory (report.json, report.txt, frames.npz, grids)',
    )
    p.add_argument('--batch-size', type=int, default=8, help='frames per forward pass')
    p.add_argument('--device', default='auto', help="'auto', 'cpu' or 'cuda[:N]'")
    p.add_argument(
        '--grids',
        type=int,
        default=0,
        metavar='N',
        help='write up to N PNG grids of 4 frames each (rgb | ground truth | fused | depth), '
        'fewer when the frames run out',
    )
    p.add_argument(
        '--measured-depth',
        action='store_true',
        help="feed each frame's sensor depth to the model as measured depth (RGB-D camera): the "
        'cloud and 3D net use it where valid',
    )
    p.add_argument(
        '--geometry-model',
        metavar='FILE',
        help='with --measured-depth: a geometry model (meta input depth_code) whose 2D labels of '
        "each frame's depth are late-fused with the model's (RGB-D late fusion, core.late_fusion)",
    )
    p.add_argument(
        '--geometry-weight',
        type=float,
        default=None,
        help="with --geometry-model: its weight in the fused 2D distribution, in [0, 1] "
        '(default 0.5)',
    )
    p.add_argument(
        '--geometry-heads',
        choices=HEADS,
        default=None,
        help="with --geometry-model: which distributions are fused: 2d (default), or both (its "
        "3D net's too)",
    )
    p.add_argument(
        '--only-with-depth', action='store_true', help='evaluate only the frames that have depth'
    )
    p.add_argument(
        '--resamples',
        type=int,
        default=bootstrap.DEFAULT_RESAMPLES,
        help='frame bootstrap resamples for the 95 %% intervals of mIoU and AbsRel (default '
        f'%(default)s; 0: none, else at least {frame_stats.MIN_RESAMPLES}; frames.npz is '
        'written either way, for depth3dseg-compare)',
    )
    p.add_argument(
        '--no-progress',
        action='store_true',
        help='no progress bar (it is shown only when stderr is a terminal anyway)',
    )
    return p.parse_args(argv)


def show_progress(no_progress: bool, stream: Any = None) -> bool:
    """Whether depth3dseg-eval shows its tqdm bar: not with ``--no-progress``, and only when
    ``stream`` (default stderr, where tqdm writes) is a terminal (no bar in logs, pipes or CI)."""
    stream = sys.stderr if stream is None else stream
    return not no_progress and bool(getattr(stream, 'isatty', lambda: False)())


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns 0, or 2 after printing ``depth3dseg-eval: error: <message>`` to
    stderr for a user error (training.config.USER_ERRORS: missing model file / dataset / bag, bad
    model file, bad --batch-size); other exceptions keep their traceback."""
    from depth3dseg_ros.training.config import USER_ERRORS

    args = parse_args(argv)
    try:
        return _run(args)
    except USER_ERRORS as exc:
        print(
            f'depth3dseg-eval: error: {" ".join(str(exc).split())}', file=sys.stderr, flush=True
        )  # one line
        return 2


def _run(args: argparse.Namespace) -> int:
    """Evaluate as `main` describes; raises FileNotFoundError / ValueError / ModelFileError for bad
    inputs."""
    from depth3dseg_ros.core.modelfile import load_model

    if args.batch_size < 1:
        raise ValueError(f'--batch-size={args.batch_size} must be >= 1')
    if args.grids < 0:
        raise ValueError(f'--grids={args.grids} must be >= 0')
    if args.resamples < 0 or 0 < args.resamples < frame_stats.MIN_RESAMPLES:
        raise ValueError(
            f'--resamples={args.resamples} must be 0 (no intervals) or >= '
            f'{frame_stats.MIN_RESAMPLES}'
        )
    if args.geometry_model and not args.measured_depth:
        raise ValueError(
            f'--geometry-model {args.geometry_model} needs --measured-depth (it labels the depth)'
        )
    for flag, value in (
        ('--geometry-weight', args.geometry_weight),
        ('--geometry-heads', args.geometry_heads),
    ):
        if value is not None and not args.geometry_model:
            raise ValueError(f'{flag} {value} needs --geometry-model (the model it weighs)')
    device = resolve_device(args.device)
    model, meta = load_model(args.model, map_location=device)
    model.to(device).eval()
    classes = ClassSet.from_dict(meta['classes'])
    geometry = None
    if args.geometry_model:
        args.geometry_weight = 0.5 if args.geometry_weight is None else args.geometry_weight
        args.geometry_heads = args.geometry_heads or '2d'
        check_weight(args.geometry_weight, '--geometry-weight')
        geometry = GeometryBranch(
            args.geometry_model, args.geometry_weight, device, classes, args.geometry_heads
        )
    out = Path(args.out)  # made once the inputs have loaded: a failed start leaves nothing
    with tempfile.TemporaryDirectory(prefix='depth3dseg_eval_') as tmp:
        dirs = args.data or [
            str(extract_bags_to(args.bag, Path(tmp) / 'ds', args.extract_config, args.preset))
        ]
        records = load_records(dirs, classes, meta.get('input', 'rgb'), 'depth3dseg-eval')
        src = ', '.join(map(str, args.data or args.bag))  # what the user named, for messages
        if not records:
            raise ValueError(f'no frames in {src}')
        rep = frame_stats.repeated_ids([str(r['id']) for r in records])
        if rep:
            print(
                f'depth3dseg-eval: warning: {len(rep)} frame ids occur more than once (e.g. '
                f'{rep[0]!r}: the same frames given twice?); they count twice in every figure '
                'and the intervals are too narrow',
                file=sys.stderr,
            )
        if args.only_with_depth:
            n, records = len(records), [r for r in records if r.get('depth')]
            if n and not records:
                raise ValueError(
                    f'--only-with-depth: none of the {n} frames of {src} has depth (for --bag, '
                    'check the depth topic: --preset / --extract-config)'
                )
        check_label_range(
            records, classes
        )  # ids outside the class set: one error line before any frame (C43)
        if not any(r.get('labels') or r.get('depth') for r in records):
            raise ValueError(
                f'none of the {len(records)} frames of {src} has labels or depth: nothing to '
                f'evaluate (for --bag, check the topics: --preset {args.preset or "(default)"} / '
                "--extract-config; depth3dseg-extract names the bag's image topics)"
            )
        for key, what in (
            ('labels', 'segmentation (mIoU)'),
            ('depth', 'depth (AbsRel, RMSE, δ1)'),
        ):
            if records and not any(
                r.get(key) for r in records
            ):  # e.g. a --preset naming absent topics
                print(
                    f'depth3dseg-eval: warning: none of the {len(records)} frames has {key}: no '
                    f'{what} metrics (check the topics: --preset / --extract-config)',
                    file=sys.stderr,
                )
        ds = model_dataset(records, meta, classes)
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        report = evaluate_model(
            model,
            ds,
            classes,
            device,
            batch_size=args.batch_size,
            full=True,
            measured_depth=args.measured_depth,
            progress=show_progress(args.no_progress),
            per_frame=True,
            geometry=geometry,
        )
        frames = report.pop('per_frame')
        report['wall_frames_per_s'] = report['frames'] / (time.perf_counter() - t0)
        report.update(
            model=str(args.model),
            data=args.data or args.bag,
            batch_size=args.batch_size,
            measured_depth=args.measured_depth,
            geometry_model=args.geometry_model,
            geometry_weight=args.geometry_weight if geometry is not None else None,
            geometry_heads=args.geometry_heads if geometry is not None else None,
            only_with_depth=args.only_with_depth,
            device=str(device),
            input_size=list(meta['input_size']),
            # the model file's keys that change the figures without changing the weights (the
            # loaded network's arch: a file written before a key existed has its default)
            depth_gain=model.arch['depth_gain'],
            fusion_w3d=model.arch['fusion_w3d'],
        )
        if args.resamples:
            report['ci'] = frame_stats.intervals(frames, classes.void_id, args.resamples)
        grids = min(args.grids, -(-len(ds) // 4))  # 4 frames a grid, while they last
        for g in range(grids):
            grid = sample_grid(model, ds, classes, device, 4, g * 4, args.measured_depth, geometry)
            cv2.imwrite(str(out / f'grid_{g:03d}.png'), cv2.cvtColor(grid, cv2.COLOR_RGB2BGR))
        report['grids'] = grids
    table = '\n'.join(
        [source_line(report), format_table(report, classes.names)]
        + interval_lines(report.get('ci'))
    )
    frame_stats.save_frames(out, [str(r['id']) for r in records], frames, classes.void_id)
    (out / 'report.json').write_text(json.dumps(report, indent=1))
    (out / 'report.txt').write_text(table + '\n')
    print(table)
    print(f'report: {out / "report.json"}' + (f' ({grids} grid_*.png)' if grids else ''))
    return 0


if __name__ == '__main__':
    sys.exit(main())
