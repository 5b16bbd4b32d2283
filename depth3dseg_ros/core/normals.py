"""Surface normals of a depth image, and a normal loss that teaches the depth head local shape.

Normals are the cross product of the back-projected points' (METHOD M2, K) central differences
along the image axes, after a hole-aware k×k box smoothing of the depth, and are oriented
towards the camera (n · p < 0), in the optical frame (REP 103: x right, y down, z forward).
`surface_normals` is differentiable (the geometry code of core.depth_code uses it without
gradients).

The normal loss (docs/levers.md, "A surface-normal term on the depth"; Eigen & Fergus, ICCV
2015, predict normals beside depth; Hu et al., WACV 2019, and Yin et al., ICCV 2019, "virtual
normals", add such a term to a depth loss): ``1 − cos`` between the normals of the predicted and
of the target depth, averaged over the pixels where both are defined. METHOD M5's log-depth loss
scores each pixel's distance; it tolerates a floor that tilts or bulges as long as the distances
are near, and the cloud M2 builds, which M3 labels, then carries that wrong shape.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from .geometry import backproject
from .losses import Term, _zero, frames_mask

__all__ = ['surface_normals', 'normal_loss']


def _box_mean(x: torch.Tensor, k: int) -> torch.Tensor:
    """k×k box mean of B×1×H×W with zero padding (the padding counts in the mean)."""
    return F.avg_pool2d(x, k, stride=1, padding=k // 2, count_include_pad=True)


def surface_normals(
    depth_m: torch.Tensor, K: torch.Tensor, smooth_px: int = 1
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Unit normals of a B×1×H×W depth image (module docstring).

    Args:
        depth_m: B×1×H×W float, metres along the optical axis; 0, negative or non-finite = none.
        K: B×3×3 float32 intrinsics at H×W (pixels), already checked (fx, fy > 0) by the caller.
        smooth_px: odd box side of the hole-aware smoothing (1 = none).
    Returns (normals, ok, ds):
        normals: B×3×H×W float32 unit vectors in the optical frame, 0 where ok is False;
        ok: B×1×H×W bool, a normal is defined: valid depth there and (after smoothing) at its
            four neighbours, a non-degenerate cross product, not on the one-pixel border;
        ds: B×1×H×W float32 smoothed depth (m), 0 where no valid pixel lies within the box.
    """
    d = depth_m.float()
    valid = torch.isfinite(d) & (d > 0)
    d0 = torch.where(valid, d, torch.zeros_like(d))
    if smooth_px > 1:
        n = _box_mean(valid.float(), smooth_px)
        mean = _box_mean(d0, smooth_px) / n.clamp_min(1e-12)
        ds = torch.where(n > 0, mean, torch.zeros_like(d0))
    else:
        ds = d0
    pts, _ = backproject(ds, K, check=False)  # M2, B×3×H×W (0 where ds is 0)
    x, y = pts[:, 0:1], pts[:, 1:2]
    du = F.pad(pts[..., :, 2:] - pts[..., :, :-2], (1, 1, 0, 0))
    dv = F.pad(pts[..., 2:, :] - pts[..., :-2, :], (0, 0, 1, 1))
    nx = du[:, 1:2] * dv[:, 2:3] - du[:, 2:3] * dv[:, 1:2]
    ny = du[:, 2:3] * dv[:, 0:1] - du[:, 0:1] * dv[:, 2:3]
    nz = du[:, 0:1] * dv[:, 1:2] - du[:, 1:2] * dv[:, 0:1]
    sq = nx * nx + ny * ny + nz * nz
    # sqrt of a clamped square: a finite gradient where the cross product vanishes
    inv = torch.where(sq > 0, torch.rsqrt(sq.clamp_min(1e-30)), torch.zeros_like(sq))
    nx, ny, nz = nx * inv, ny * inv, nz * inv
    sign = torch.where(nx * x + ny * y + nz * ds > 0, -1.0, 1.0)  # towards the camera
    # the four neighbours of the central differences must have depth too (a hole's point is
    # the optical centre); only the smoothing-free case (smooth_px 1) has such pixels
    has = F.pad((ds > 0).float(), (1, 1, 1, 1))
    nb = has[..., 1:-1, :-2] * has[..., 1:-1, 2:] * has[..., :-2, 1:-1] * has[..., 2:, 1:-1]
    ok = valid & (ds > 0) & (sq > 0) & (nb > 0)
    normals = torch.cat([nx * sign, ny * sign, nz * sign], dim=1)
    return torch.where(ok, normals, torch.zeros_like(normals)), ok, ds


def normal_loss(
    pred: torch.Tensor,
    target: torch.Tensor,
    K: torch.Tensor,
    has_depth: Optional[torch.Tensor] = None,
    smooth_px: int = 5,
) -> Term:
    """Mean ``1 − cos(n_pred, n_target)`` over the pixels where both normals are defined.

    Args:
        pred: B×1×H×W predicted depth (m), with gradient.
        target: B×1×H×W depth label (m); 0, negative or non-finite = none (holes).
        K: B×3×3 intrinsics at H×W (pixels).
        has_depth: optional B bool, frames whose depth label counts (as M5's depth term).
        smooth_px: odd box side smoothing both depths before their normals (5 at 320×240:
            sensor noise, and the rendered Kinect-like noise, make 1-pixel normals noise).
    Returns a Term (value in [0, 2], pixel count; a zero connected to pred's graph when no pixel
    counts). Raises ValueError for shapes that differ or are not B×1×H×W, or an even or < 1
    smooth_px.
    """
    if pred.shape != target.shape or pred.dim() != 4 or pred.shape[1] != 1:
        raise ValueError(
            f'normal_loss: pred {tuple(pred.shape)} and target {tuple(target.shape)} must both '
            'be B×1×H×W'
        )
    if smooth_px < 1 or smooth_px % 2 == 0:
        raise ValueError(f'normal_loss: smooth_px={smooth_px} must be odd and >= 1')
    K = K.to(pred.device, torch.float32)
    with torch.no_grad():
        nt, ok_t, _ = surface_normals(target, K, smooth_px)
    np_, ok_p, _ = surface_normals(pred, K, smooth_px)
    ok = frames_mask(ok_t & ok_p, has_depth, 'has_depth')
    n = int(ok.sum())
    if n == 0:
        return Term(_zero(pred), 0)
    cos = (np_ * nt).sum(1, keepdim=True)
    return Term(torch.where(ok, 1.0 - cos, torch.zeros_like(cos)).sum() / n, n)
