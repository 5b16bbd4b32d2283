"""Per-frame counts beside an evaluation report, and the frame bootstrap intervals made from them.

depth3dseg-eval writes ``frames.npz`` next to ``report.json``: the frame ids (the dataset records'
``id``, in evaluation order), the 2D / 3D / fused confusion matrix of each frame (F×C×C int64) and
each frame's AbsRel sum and valid depth pixel count (core.metrics.SegDepthEvaluator.frames). From
them the report gets 95 % frame bootstrap intervals (core.bootstrap) and depth3dseg-compare gets
paired intervals for two models on the same frames.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from depth3dseg_ros.core import bootstrap

FRAMES_FILE = 'frames.npz'
MIN_RESAMPLES = 100  # the CLIs' floor: fewer gives percentiles that are one or two draws
ARRAYS = ('conf_2d', 'conf_3d', 'conf_fused', 'absrel_sum', 'depth_pixels')
SEG_KEYS = (('miou_2d', 'conf_2d'), ('miou_3d', 'conf_3d'), ('miou_fused', 'conf_fused'))
#: the figures with intervals, in table order: report key, table label, the frames they need
FIGURES = (
    ('miou_fused', 'mIoU fused', 'labelled'),
    ('miou_2d', 'mIoU 2D', 'labelled'),
    ('miou_3d', 'mIoU 3D', 'labelled'),
    ('absrel', 'AbsRel', 'depth'),
)


def save_frames(
    report_dir: str | Path,
    ids: Sequence[str],
    arrays: dict[str, np.ndarray],
    void_id: Optional[int] = 0,
) -> Path:
    """Write ``frames.npz`` (ids, ARRAYS and the class set's ``void_id``, -1 for none) into
    ``report_dir``; returns its path. Raises ValueError when an array's frame count differs from
    ``len(ids)``."""
    for k in ARRAYS:
        if len(arrays[k]) != len(ids):
            raise ValueError(f'{k} holds {len(arrays[k])} frames, ids {len(ids)}')
    path = Path(report_dir) / FRAMES_FILE
    np.savez_compressed(
        path,
        ids=np.asarray(list(ids), dtype=str),
        void_id=np.int64(-1 if void_id is None else void_id),
        **{k: arrays[k] for k in ARRAYS},
    )
    return path


def load_frames(report_dir: str | Path) -> tuple[list[str], dict[str, Any]]:
    """(ids, arrays) of the ``frames.npz`` in ``report_dir`` (or the file itself); ``arrays``
    holds ARRAYS and ``void_id`` (int or None).

    Raises FileNotFoundError naming the path when the directory or its frames file does not exist
    (a report written before depth3dseg-eval kept per-frame counts: evaluate again), ValueError
    naming the file when an array is missing or the file is damaged or of another kind."""
    p = Path(report_dir)
    if not p.exists():
        raise FileNotFoundError(f'report directory {p} not found')
    path = p / FRAMES_FILE if p.is_dir() else p
    if not path.is_file():
        raise FileNotFoundError(
            f'{path} not found: per-frame counts are written by depth3dseg-eval (a report made '
            'before it kept them: evaluate the model again)'
        )
    try:
        z = np.load(path, allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):  # a single .npy array
            raise ValueError('an .npy array, not an .npz archive')
        with z:
            missing = [k for k in ('ids', 'void_id') + ARRAYS if k not in z]
            arrays: dict[str, Any] = {k: z[k] for k in ARRAYS if k in z}
            v = int(z['void_id']) if 'void_id' in z else -1
            ids = [str(i) for i in z['ids']] if 'ids' in z else []
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, KeyError) as exc:
        # damaged, cut short, or not a depth3dseg-eval frames file at all
        raise ValueError(
            f'{path} cannot be read as a depth3dseg-eval frames file ({type(exc).__name__}: {exc})'
        ) from exc
    if missing:
        raise ValueError(f'{path} lacks {", ".join(missing)}')
    arrays['void_id'] = None if v < 0 else v
    return ids, arrays


def repeated_ids(ids: Sequence[str]) -> list[str]:
    """The ids that occur more than once in ``ids`` (sorted): frames given twice, e.g. a dataset
    directory and a subset of it, which the bootstrap would count as separate frames."""
    seen: set[str] = set()
    rep: set[str] = set()
    for i in ids:
        (rep if i in seen else seen).add(i)
    return sorted(rep)


def level_label(level: float) -> str:
    """'95 %' for 0.95, '99.9 %' for 0.999 (rounded, never truncated)."""
    return f'{round(level * 100, 4):g} %'


def intervals(
    arrays: dict[str, np.ndarray],
    void_id: Optional[int] = 0,
    resamples: int = bootstrap.DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Frame bootstrap intervals (core.bootstrap) of mIoU 2D / 3D / fused and AbsRel, as
    {'miou_2d': Interval dict, ..., 'absrel': Interval dict} (JSON-serialisable)."""
    out: dict[str, Any] = {}
    for key, arr in SEG_KEYS:
        out[key] = bootstrap.bootstrap_miou(arrays[arr], void_id, resamples, level, seed).to_dict()
    out['absrel'] = bootstrap.bootstrap_absrel(
        arrays['absrel_sum'], arrays['depth_pixels'], resamples, level, seed
    ).to_dict()
    return out


def _fmt(v: Optional[float], signed: bool = False) -> str:
    if v is None:
        return '-'
    return f'{v:+.3f}' if signed else f'{v:.3f}'


def interval_lines(ci: dict[str, Any]) -> list[str]:
    """Table lines for a report's ``ci`` (`intervals`): one per figure, value and interval."""
    if not ci:
        return []
    first = next(iter(ci.values()))
    lines = [
        f"{level_label(first['level'])} frame bootstrap intervals ({first['resamples']} "
        'resamples of the frames; a few frames give wide intervals):'
    ]
    for key, label, what in FIGURES:
        c = ci.get(key)
        if c and c['value'] is not None:
            lines.append(
                f"  {label:<11} {_fmt(c['value'])}  [{_fmt(c['lo'])}, {_fmt(c['hi'])}]  "
                f"over {c['frames']} frames"
            )
        elif c:
            lines.append(f'  {label:<11} -  (no {what} frames)')
    return lines
