"""How far a figure on a few frames can be trusted: frame bootstrap intervals for mIoU and AbsRel,
and paired intervals for the difference between two models on the same frames.

An evaluation on 11 labelled real frames measures the model *and* the choice of frames. The
bootstrap (Efron & Tibshirani 1993, ch. 13; for a paired difference: resampling the same frames for
both models) redraws the frame set with replacement, recomputes the metric from the summed
per-frame counts — the same pooled convention as core.metrics (mIoU from one summed confusion
matrix, AbsRel = Σ|d−g|/g / n over all valid pixels), never a mean of per-frame values — and
reports the percentile interval of the redrawn figures. A lever whose paired interval holds 0 is
not told apart from a different draw of frames by this set.

Inputs are per-frame counts (core.metrics.SegDepthEvaluator with ``per_frame=True``):
``confusions`` F×C×C int (rows ground truth, columns prediction), ``absrel_sums`` and
``depth_pixels`` F floats. Only frames that hold counted pixels are resampled (a frame without
labels says nothing about mIoU). Pure numpy; deterministic for a given ``seed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from .metrics import miou_of

__all__ = [
    'Interval',
    'PairedInterval',
    'miou_of',
    'frame_weights',
    'bootstrap_miou',
    'bootstrap_absrel',
    'paired_miou',
    'paired_absrel',
]

DEFAULT_RESAMPLES = 2000


@dataclass(frozen=True)
class Interval:
    """A figure on all frames (``value``), the percentile interval [lo, hi] of its frame
    bootstrap at ``level``, ``frames`` resampled and ``resamples`` drawn. None where undefined
    (no counted frames)."""

    value: Optional[float]
    lo: Optional[float]
    hi: Optional[float]
    level: float
    frames: int
    resamples: int

    def to_dict(self) -> dict:
        """JSON-serialisable fields."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class PairedInterval(Interval):
    """A paired difference new − base: ``value`` on all frames, [lo, hi] its percentile interval,
    ``p_not_better`` the fraction of resamples where the difference is ≤ 0 for a higher-is-better
    figure (mIoU) or ≥ 0 for a lower-is-better one (AbsRel): a one-sided bootstrap p-value."""

    p_not_better: Optional[float] = None


def _check_level(level: float, resamples: int) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f'level={level} must be in (0, 1)')
    if int(resamples) < 1:
        raise ValueError(f'resamples={resamples} must be >= 1')


def frame_weights(frames: int, resamples: int, seed: int = 0) -> np.ndarray:
    """Resample counts R×F (int64): row r holds how often each of the F frames is drawn in the
    r-th resample (F draws with replacement, a multinomial). Raises ValueError for F < 1."""
    if int(frames) < 1:
        raise ValueError(f'frames={frames}: nothing to resample')
    rng = np.random.default_rng(seed)
    return rng.multinomial(int(frames), np.full(int(frames), 1.0 / int(frames)), size=resamples)


def _resampled_miou(w: np.ndarray, c: np.ndarray, void_id: Optional[int]) -> np.ndarray:
    """mIoU of each resample: the frames' confusions ``c`` F×C×C pooled with the counts ``w``
    R×F of `frame_weights`."""
    return miou_of((w @ c.reshape(len(c), -1)).reshape(-1, c.shape[1], c.shape[2]), void_id)


def _percentiles(x: np.ndarray, level: float) -> tuple[Optional[float], Optional[float]]:
    x = x[np.isfinite(x)]
    if not x.size:
        return None, None
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(x, [a, 1.0 - a])
    return float(lo), float(hi)


def _f(x: float) -> Optional[float]:
    return float(x) if np.isfinite(x) else None


def _counted(confusions: np.ndarray, void_id: Optional[int]) -> np.ndarray:
    c = np.asarray(confusions)
    if c.ndim != 3 or c.shape[1] != c.shape[2]:
        raise ValueError(f'confusions must be F×C×C, got shape {c.shape}')
    counted = c.sum((1, 2))
    if void_id is not None:
        counted = counted - c[:, void_id, :].sum(1)
    return counted > 0


def bootstrap_miou(
    confusions: np.ndarray,
    void_id: Optional[int] = 0,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Frame bootstrap of the pooled mIoU of per-frame confusion matrices ``confusions`` F×C×C.

    Frames without counted (non-void ground-truth) pixels are left out. Raises ValueError for a
    bad shape, level or resample count."""
    _check_level(level, resamples)
    c = np.asarray(confusions, np.int64)
    c = c[_counted(c, void_id)]
    if not len(c):
        return Interval(None, None, None, level, 0, int(resamples))
    w = frame_weights(len(c), resamples, seed)
    lo, hi = _percentiles(_resampled_miou(w, c, void_id), level)
    return Interval(_f(miou_of(c.sum(0), void_id)), lo, hi, level, len(c), int(resamples))


def _depth_arrays(absrel_sums, depth_pixels) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(absrel_sums, np.float64).reshape(-1)
    n = np.asarray(depth_pixels, np.float64).reshape(-1)
    if s.shape != n.shape:
        raise ValueError(f'absrel_sums has {s.size} frames, depth_pixels {n.size}')
    keep = n > 0
    return s[keep], n[keep]


def bootstrap_absrel(
    absrel_sums,
    depth_pixels,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Frame bootstrap of the pooled AbsRel Σ|d−g|/g / n from per-frame sums ``absrel_sums`` and
    valid-pixel counts ``depth_pixels`` (F each; frames with no valid pixel are left out)."""
    _check_level(level, resamples)
    s, n = _depth_arrays(absrel_sums, depth_pixels)
    if not len(s):
        return Interval(None, None, None, level, 0, int(resamples))
    w = frame_weights(len(s), resamples, seed)
    lo, hi = _percentiles((w @ s) / (w @ n), level)
    return Interval(float(s.sum() / n.sum()), lo, hi, level, len(s), int(resamples))


def _paired(d_all: float, d: np.ndarray, higher_better: bool, level, frames, resamples):
    lo, hi = _percentiles(d, level)
    d = d[np.isfinite(d)]
    p = None
    if d.size:
        p = float(np.mean(d <= 0) if higher_better else np.mean(d >= 0))
    return PairedInterval(_f(d_all), lo, hi, level, frames, int(resamples), p)


def paired_miou(
    base: np.ndarray,
    new: np.ndarray,
    void_id: Optional[int] = 0,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> PairedInterval:
    """Paired frame bootstrap of mIoU(new) − mIoU(base), both F×C×C over the same frames in the
    same order: each resample draws the same frames for both models. Frames counted in neither are
    left out. Raises ValueError when the shapes differ."""
    _check_level(level, resamples)
    a, b = np.asarray(base, np.int64), np.asarray(new, np.int64)
    if a.shape != b.shape:
        raise ValueError(f'base confusions {a.shape} and new {b.shape} differ in shape')
    keep = _counted(a, void_id) | _counted(b, void_id)
    a, b = a[keep], b[keep]
    if not len(a):
        return PairedInterval(None, None, None, level, 0, int(resamples), None)
    w = frame_weights(len(a), resamples, seed)
    d = _resampled_miou(w, b, void_id) - _resampled_miou(w, a, void_id)
    d_all = miou_of(b.sum(0), void_id) - miou_of(a.sum(0), void_id)
    return _paired(d_all, d, True, level, len(a), resamples)


def paired_absrel(
    base_sums,
    base_pixels,
    new_sums,
    new_pixels,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> PairedInterval:
    """Paired frame bootstrap of AbsRel(new) − AbsRel(base) from per-frame sums and valid-pixel
    counts over the same frames (F each, same order). Lower is better: ``p_not_better`` is the
    fraction of resamples where the difference is ≥ 0."""
    _check_level(level, resamples)
    sa, na = (np.asarray(x, np.float64).reshape(-1) for x in (base_sums, base_pixels))
    sb, nb = (np.asarray(x, np.float64).reshape(-1) for x in (new_sums, new_pixels))
    if not sa.shape == na.shape == sb.shape == nb.shape:
        raise ValueError(
            f'per-frame depth arrays differ in length: base {sa.size}/{na.size}, '
            f'new {sb.size}/{nb.size}'
        )
    keep = (na > 0) & (nb > 0)
    sa, na, sb, nb = sa[keep], na[keep], sb[keep], nb[keep]
    if not len(sa):
        return PairedInterval(None, None, None, level, 0, int(resamples), None)
    w = frame_weights(len(sa), resamples, seed)
    d = (w @ sb) / (w @ nb) - (w @ sa) / (w @ na)
    d_all = sb.sum() / nb.sum() - sa.sum() / na.sum()
    return _paired(d_all, d, False, level, len(sa), resamples)
