"""The geometry code of a measured depth image, as a second input of the 2D network (RGB-D input).

An HHA-like code (Gupta et al., ECCV 2014, "Learning Rich Features from RGB-D Images for Object
Detection and Segmentation"), with the camera's optical axes in place of the gravity direction,
which a frame does not carry. Three channels in [0, 1], computed per pixel of a depth image
registered to the colour image:

* 0: log depth, ``(ln d − ln 0.4) / (ln 10 − ln 0.4)`` clipped to [0, 1] (0.4–10 m);
* 1: the surface normal's y component in the optical frame (REP 103 optical: y down),
  ``(n_y + 1) / 2``: floors dark, ceilings bright, walls mid-grey;
* 2: ``|n_x|``, how much the surface faces sideways (absolute, so a horizontal flip of image, depth
  and K leaves it valid).

Normals are core.normals.surface_normals: the cross product of the back-projected points'
(METHOD M2, K) central differences along the image axes after a hole-aware box smoothing of the
depth, oriented towards the camera.
Pixels without valid depth (0, negative, NaN, ±inf), and the one-pixel image border, are 0 in all
three channels; a frame without a depth image is all 0, which the network learns as "no depth"
(the training draws measured depth per batch: ``LossConfig.measured_depth_for_3d``).

Pure torch and stateless (no gradient is needed through it); it runs inside
`core.model.Depth3DSeg.forward_2d` when the model's arch has ``code_input`` (docs/levers.md,
"RGB-D input").
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from .normals import surface_normals

__all__ = ['CODE_CHANNELS', 'NEAR_M', 'FAR_M', 'depth_code', 'smooth_px_for']

#: channels of the code
CODE_CHANNELS = 3
#: log-depth range of channel 0, metres
NEAR_M, FAR_M = 0.4, 10.0


def smooth_px_for(width: int) -> int:
    """The odd box side used at an image ``width`` (px): 5 px at 320 px wide, scaled with the
    width and made odd upwards (3 at 160, 11 at 640), at least 1."""
    k = max(1, int(round(5 * int(width) / 320)))  # int(): a traced (ONNX export) shape
    return k if k % 2 else k + 1


def depth_code(
    depth_m: torch.Tensor, K: torch.Tensor, smooth_px: Optional[int] = None
) -> torch.Tensor:
    """The geometry code of a batch of depth images (module docstring).

    Args:
        depth_m: B×1×H×W float, metres along the optical axis; 0, negative or non-finite = none.
        K: B×3×3 (or 3×3, shared) intrinsics of those images at H×W, pixels.
        smooth_px: odd box side of the smoothing (1 = none); default `smooth_px_for` (W).
    Returns B×3×H×W float32 in [0, 1] on depth's device (0 where there is no code).
    Raises ValueError for a depth that is not B×1×H×W with H, W >= 3, a K that is not (B×)3×3
    with fx, fy > 0, or a smooth_px that is not odd and >= 1.
    """
    if depth_m.dim() != 4 or depth_m.shape[1] != 1 or min(depth_m.shape[-2:]) < 3:
        raise ValueError(
            f'depth_code: depth shape {tuple(depth_m.shape)} must be B×1×H×W with H, W >= 3'
        )
    b, _, _, w = depth_m.shape
    K = K.to(depth_m.device, torch.float32)
    if tuple(K.shape) == (3, 3):
        K = K.expand(b, 3, 3)
    if tuple(K.shape) != (b, 3, 3):
        raise ValueError(f'depth_code: K shape {tuple(K.shape)} must be 3×3 or {b}×3×3')
    fx, fy = K[:, 0, 0], K[:, 1, 1]
    if not bool(((fx > 0) & (fy > 0)).all()):
        raise ValueError(f'depth_code: K fx={fx.tolist()} fy={fy.tolist()} must be > 0')
    k = smooth_px_for(w) if smooth_px is None else int(smooth_px)
    if k < 1 or k % 2 == 0:
        raise ValueError(f'depth_code: smooth_px={smooth_px} must be odd and >= 1')
    normals, ok, ds = surface_normals(depth_m, K, k)
    span = math.log(FAR_M) - math.log(NEAR_M)
    logd = (torch.log(ds.clamp_min(1e-6)) - math.log(NEAR_M)) / span
    code = torch.cat([logd.clamp(0, 1), (normals[:, 1:2] + 1) / 2, normals[:, 0:1].abs()], dim=1)
    return torch.where(ok, code, torch.zeros_like(code))
