"""``depth3dseg-calibrate``: fit a model's depth scale to one camera from a few of its RGB-D frames
(core.depth_calibration; arch ``depth_gain``, applied to the predicted depth by every backend).

    depth3dseg-calibrate --model models/depth3dseg_nyu13.pt --data ds/my_rgbd --out my_camera.pt
    depth3dseg-calibrate --model models/depth3dseg_nyu13.pt --bag bags/rgbd --preset realsense \
        --out my_camera.pt

``--data``: dataset directories (``depth3dseg-extract`` of a bag with the camera's colour image,
registered depth and CameraInfo); labels are not needed. ``--bag``: bags extracted first into a
temporary directory (the depth3dseg-extract code path; ``--preset`` / ``--extract-config`` as
there, the label topic off). Runs the model at its input size as
depth3dseg-eval does (depth resized NaN-safe, K scaled), takes each frame's median(gt) /
median(pred) over the pixels with depth in 0.1–10 m, and writes a copy of the model file whose
``depth_gain`` is the current one times the median of those scales; everything else is unchanged.
Prints one Markdown row per directory (AbsRel, scale, median-scaled AbsRel before calibrating)
and the frames it skipped (no valid depth) with the reason. The frames that fit the gain should
not be the frames that evaluate it.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.depth_calibration import fit_depth_gain, frame_scale_stats
from depth3dseg_ros.training.dataset import load_records
from depth3dseg_ros.training.evaluate import model_dataset

__all__ = ['frame_scales', 'depth_scale', 'main']


@torch.no_grad()
def frame_scales(
    model: torch.nn.Module, meta: dict, data: str, max_frames: int | None = None
) -> tuple[list[tuple[str, tuple[float, float, float]]], list[str]]:
    """Per-frame (frame id, (AbsRel, scale, median-scaled AbsRel)) of ``model`` (Depth3DSeg in eval
    mode, CPU) with its model file's ``meta`` (core.modelfile.load_model) on the frames with depth
    of dataset directory ``data`` (the first ``max_frames`` of them), and the ids of the frames
    with depth but no valid pixel (skipped). The depth is the model's as the node gives it (K
    passed: arch depth_focal and depth_gain applied). Raises FileNotFoundError / ValueError for a
    missing or malformed directory (training.dataset.load_records)."""
    classes = ClassSet.from_dict(meta['classes'])
    records = [
        r for r in load_records([data], classes, prog='depth3dseg-calibrate') if r.get('depth')
    ][:max_frames]
    if not records:
        return [], []
    ids = [str(r.get('id', i)) for i, r in enumerate(records)]
    rows, skipped, i = [], [], 0
    for batch in DataLoader(model_dataset(records, meta, classes), batch_size=8):
        pred = model.forward_2d(batch['rgb'], batch['K'])['depth']
        for p, gt in zip(pred, batch['depth']):
            r = frame_scale_stats(p, gt)
            (skipped.append(ids[i]) if r is None else rows.append((ids[i], r)))
            i += 1
    return rows, skipped


def depth_scale(
    model: torch.nn.Module, meta: dict, data: str, max_frames: int | None = None
) -> dict[str, Any]:
    """{'frames', 'absrel', 'scaled_absrel' (means over frames), 'scale' (median over frames)} of
    `frame_scales`. Raises ValueError when no frame has valid depth."""
    rows, _ = frame_scales(model, meta, data, max_frames)
    if not rows:
        raise ValueError(f'{data}: no frame with valid depth')
    return {'frames': len(rows), **_summary(rows)}


def _summary(rows: list[tuple[str, tuple[float, float, float]]]) -> dict[str, float]:
    """AbsRel and median-scaled AbsRel (means over frames) and the scale (median over frames) of
    `frame_scales` rows (at least one)."""
    a = np.array([r for _, r in rows])
    return {
        'absrel': float(a[:, 0].mean()),
        'scale': float(np.median(a[:, 1])),
        'scaled_absrel': float(a[:, 2].mean()),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line of the module docstring."""
    ap = argparse.ArgumentParser(
        prog='depth3dseg-calibrate', description=__doc__.split('\n')[0].replace('``', '')
    )
    ap.add_argument('--model', required=True, help='model file to calibrate (core.modelfile)')
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument('--data', nargs='+', help='dataset directories with depth')
    src.add_argument('--bag', nargs='+', help='RGB-D bags, extracted to a temporary directory')
    ap.add_argument('--preset', help='depth3dseg-extract topic preset for --bag')
    ap.add_argument('--extract-config', help='depth3dseg-extract YAML (topics etc.) for --bag')
    for role in ('rgb', 'depth', 'camera_info'):
        flag = f"--{role.replace('_', '-')}-topic"
        ap.add_argument(flag, help=f'{role} topic for --bag (overrides preset and YAML)')
    ap.add_argument('--out', required=True, help='calibrated model file to write (a new file)')
    ap.add_argument(
        '--max-frames',
        type=int,
        default=None,
        help='first N frames with depth of each --data directory (of all the bags for --bag)',
    )
    ap.add_argument('--min-frames', type=int, default=3, help='refuse with fewer (default 3)')
    return ap.parse_args(argv)


def _check_args(a: argparse.Namespace) -> dict[str, str | None]:
    """ValueError naming the flag for arguments that cannot work, before any frame is run; returns
    the topic overrides for --bag."""
    for flag, v in (('--max-frames', a.max_frames), ('--min-frames', a.min_frames)):
        if v is not None and v < 1:
            raise ValueError(f'{flag}={v} must be >= 1')
    out = Path(a.out)
    if not a.out or out.is_dir():
        raise ValueError(f'--out {a.out!r} must be a model file path, not a directory')
    if any(p.exists() and not p.is_dir() for p in out.resolve().parents):
        raise ValueError(f'--out {a.out}: a parent of it is a file, not a directory')
    if out.resolve() == Path(a.model).resolve():
        raise ValueError(f'--out {a.out} is the input model file: write a new file')
    topics = {'rgb_topic': a.rgb_topic, 'depth_topic': a.depth_topic}
    topics['camera_info_topic'] = a.camera_info_topic
    if a.data is not None:
        if a.preset or a.extract_config or any(topics.values()):
            raise ValueError('--preset, --extract-config and the topic flags apply to --bag only')
        seen: dict[Path, str] = {}
        for d in a.data:
            if not Path(d).is_dir():
                raise FileNotFoundError(f'--data {d}: no such dataset directory')
            r = Path(d).resolve()
            if r in seen:
                raise ValueError(f'--data names {d} twice (as {seen[r]})')
            seen[r] = d
    return topics


def _run(a: argparse.Namespace) -> int:
    topics = _check_args(a)
    if a.data is not None:
        return _calibrate(a, a.data, a.data)
    from depth3dseg_ros.bags.extract import extract, load_extract_config
    from depth3dseg_ros.bags.topic_check import MissingTopics

    # strict topics (as depth3dseg-extract): a bag without the depth topic is an error that names
    # the bag's image topics, not an empty calibration
    from depth3dseg_ros.bags.extract_config import config_error_line

    try:
        cfg = load_extract_config(
            a.extract_config, a.preset, {**topics, 'labels_topic': '', 'allow_missing': []}
        )
    except (FileNotFoundError, ValueError) as err:  # one line naming --extract-config
        raise ValueError(config_error_line(err, '--extract-config', a.extract_config)) from None
    with tempfile.TemporaryDirectory(prefix='depth3dseg_calibrate_') as tmp:
        try:
            extract(a.bag, Path(tmp) / 'ds', cfg)
        except MissingTopics as err:  # its advice offers --allow-missing, which cannot apply here
            msg = re.sub(r', or --allow-missing \w+ to write its frames without \w+', '', str(err))
            raise ValueError(f'{msg} (calibration needs depth)') from None
        return _calibrate(a, [str(Path(tmp) / 'ds')], a.bag)


def _calibrate(a: argparse.Namespace, dirs: list[str], sources: list[str]) -> int:
    """Measure on the dataset directories ``dirs`` and write ``a.out``; ``sources`` (the
    directories or bags the user named) label the rows and the metadata."""
    from depth3dseg_ros.core.modelfile import load_model, save_model

    model, meta = load_model(a.model, map_location='cpu')
    model.eval()
    names = sources if len(sources) == len(dirs) else [', '.join(sources)]
    measured = [
        (name, *frame_scales(model, meta, d, a.max_frames)) for d, name in zip(dirs, names)
    ]
    print(
        '| data | frames | skipped | AbsRel (frame mean) | scale gt/pred | median-scaled AbsRel |'
    )
    print('|---|---|---|---|---|---|')
    scales: list[float] = []
    for name, rows, skipped in measured:
        s = _summary(rows) if rows else None
        figs = (
            f"{s['absrel']:.3f} | {s['scale']:.3f} | {s['scaled_absrel']:.3f}"
            if s
            else '- | - | -'
        )
        print(f'| {name} | {len(rows)} | {len(skipped)} | {figs} |')
        for s in skipped:
            print(f'skipped {name}: {s}: no pixel with depth in 0.1-10 m', file=sys.stderr)
        scales += [r[1] for _, r in rows]
    n_skipped = sum(len(m[2]) for m in measured)
    if not scales:
        where = ', '.join(map(str, sources))
        raise ValueError(
            f'none of the {n_skipped} frames with depth of {where} has a pixel in 0.1-10 m: check '
            'the depth unit (16UC1 is mm, 32FC1 m)'
            if n_skipped
            else f'no frame of {where} has depth: calibration needs RGB-D frames'
            + (
                ' (check the depth topic: --preset / --extract-config / --depth-topic)'
                if a.bag
                else ''
            )
        )
    old = float(model.arch['depth_gain'])
    gain = fit_depth_gain(scales, old, a.min_frames)
    out_meta = {k: v for k, v in meta.items() if k not in ('arch', 'created')}
    out_meta['depth_calibration'] = {
        'gain': gain,
        'previous_gain': old,
        'frames': len(scales),
        'skipped': n_skipped,
        'data': [str(d) for d in sources],
        'model': Path(a.model).name,
        'created': _dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds'),
    }
    try:
        save_model(a.out, model.with_arch(depth_gain=gain), out_meta)
    except OSError as exc:
        raise ValueError(f'--out {a.out}: cannot write it ({exc.strerror or exc})') from None
    n = len(scales)
    print(f'depth_gain {old:.4f} -> {gain:.4f} from {n} frame{"s" * (n != 1)}; wrote {a.out}')
    return 0


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns 0, or 2 after printing ``depth3dseg-calibrate: error:
    <message>`` for a user error (training.config.USER_ERRORS: missing model file or dataset,
    too few frames with depth, a gain outside the accepted range)."""
    from depth3dseg_ros.training.config import USER_ERRORS

    a = parse_args(argv)
    try:
        return _run(a)
    except USER_ERRORS as exc:
        print(f'depth3dseg-calibrate: error: {" ".join(str(exc).split())}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    raise SystemExit(main())
