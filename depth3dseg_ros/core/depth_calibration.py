"""Depth-scale calibration of a monocular depth head to one camera (METHOD M1's depth; model
arch ``depth_gain``).

A monocular depth head reads metric scale from appearance only, so a camera whose rooms look like
training rooms of another size gets depth off by a near-global factor. A handful of the camera's
own RGB-D frames measure that factor: per frame the median ratio median(gt) / median(pred)
(median scaling, Eigen et al. 2014), over frames its median (robust to a frame with a bad
prediction). The model then multiplies its predicted depth by that gain before anything uses it
(`focal_depth`), so the cloud (M2) and the 3D net (M3) see the calibrated metres too.

Pure functions (torch, numpy); no ROS, no files: training/calibrate.py is the command line.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np
import torch

__all__ = ['GAIN_RANGE', 'focal_depth', 'frame_scale_stats', 'fit_depth_gain']

#: The gains arch ``depth_gain`` accepts (arch.check_arch): a factor outside it is not a
#: calibration but a wrong camera, unit or dataset.
GAIN_RANGE: Tuple[float, float] = (0.25, 4.0)


def frame_scale_stats(
    pred: torch.Tensor, gt: torch.Tensor, min_depth: float = 0.1, max_depth: float = 10.0
) -> Optional[Tuple[float, float, float]]:
    """(AbsRel, scale s = median(gt) / median(pred), AbsRel of s·pred) of one frame.

    pred and gt: tensors of one shape (1×H×W or H×W), metres; gt NaN, ±inf or not strictly
    between min_depth and max_depth, and pred non-finite or <= 0, are no data. Computed in float64;
    the median of an even count is the lower middle value (torch.median). Returns None when no
    pixel is valid. s < 1: the prediction is too far; s > 1: too near. ValueError when the shapes
    differ.
    """
    if pred.shape != gt.shape:
        raise ValueError(f'pred shape {tuple(pred.shape)} differs from gt shape {tuple(gt.shape)}')
    v = torch.isfinite(gt) & (gt > min_depth) & (gt < max_depth) & torch.isfinite(pred)
    v &= pred > 0
    if not bool(v.any()):
        return None
    p, g = pred[v].double(), gt[v].double()
    s = float(g.median() / p.median())
    return float(((p - g).abs() / g).mean()), s, float(((p * s - g).abs() / g).mean())


def fit_depth_gain(
    scales: Sequence[float], current_gain: float = 1.0, min_frames: int = 3
) -> float:
    """The ``depth_gain`` that removes the median per-frame scale error.

    scales: per-frame median(gt) / median(pred) (`frame_scale_stats`) of a model whose arch
    already has ``depth_gain`` = current_gain -> current_gain × median(scales). Raises ValueError
    naming the value when fewer than ``min_frames`` frames are given, a scale is not finite and
    > 0, or the result leaves GAIN_RANGE (a wrong depth unit or camera, not a calibration).
    """
    a = np.asarray(list(scales), dtype=np.float64)
    if a.size < max(1, int(min_frames)):
        raise ValueError(
            f'{a.size} frames with valid depth: a depth gain needs at least {min_frames} '
            '(RGB-D frames of the camera, depth registered to the colour image)'
        )
    if not np.all(np.isfinite(a) & (a > 0)):
        raise ValueError(f'scales must be finite and > 0, got {a[~(np.isfinite(a) & (a > 0))]}')
    gain = float(current_gain) * float(np.median(a))
    lo, hi = GAIN_RANGE
    if not lo <= gain <= hi:
        raise ValueError(
            f'depth gain {gain:.3f} (median scale {np.median(a):.3f} × current gain '
            f'{current_gain:.4f}) is outside [{lo}, {hi}]: check the depth unit (16UC1 mm, '
            '32FC1 m) and that the frames come from the camera the model runs on'
        )
    return gain


def focal_depth(
    depth: torch.Tensor,
    K: Optional[torch.Tensor],
    depth_focal: float,
    min_depth: float,
    max_depth: float,
    gain: float = 1.0,
) -> torch.Tensor:
    """Metric depth of a depth head calibrated for a camera of normalised focal length
    ``depth_focal`` (fy / image height), seen through camera K, times a calibration ``gain``.

    A network that sees no K reads depth from apparent size and perspective, both proportional to
    the focal length: the same scene through a camera with k times the focal length looks k times
    larger, and the network answers k times closer. So its depth is that of the camera it was
    trained for and scales by (fy / H) / depth_focal for another one (the canonical-camera
    transform of Metric3D, Yin et al. 2023). ``gain`` (arch ``depth_gain``, `fit_depth_gain`)
    is a global scale fitted on a camera's own RGB-D frames. One multiplication by the combined
    factor, then the clamp. depth B×1×H×W m, K B×3×3 (or 3×3, B×3×4) at H×W or None -> B×1×H×W
    m clamped to [min_depth, max_depth]; ``depth`` unchanged when ``gain`` is 1 and
    ``depth_focal`` <= 0 or K is None (the focal part needs K).
    """
    use_focal = depth_focal > 0 and K is not None
    if not use_focal and gain == 1.0:
        return depth
    factor: Any = float(gain)
    if use_focal:
        fy = K[..., 1, 1].to(depth.dtype).reshape(-1, 1, 1, 1)
        factor = fy * (float(gain) / (depth.shape[-2] * float(depth_focal)))
    return (depth * factor).clamp(min_depth, max_depth)
