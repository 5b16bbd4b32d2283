"""M2: depth map -> organized point cloud in the optical frame, and camera-intrinsics bookkeeping.

The one implementation of back-projection in the package (training, inference, node, tools).

Convention (docs/method.md M2, REP 103 optical frame: z forward, x right, y down;
depth_image_proc):
pixel (u, v) = (column, row), 0-based, pixel centres at integer coordinates, and

    X = (u - cx) * d / fx,   Y = (v - cy) * d / fy,   Z = d.

K is [[fx, s, cx], [0, fy, cy], [0, 0, 1]]; a 3x4 projection matrix P (sensor_msgs/CameraInfo
``p``, for rectified images, case C17) may be passed wherever K is accepted: its left 3x3 block is
used for back-projection (the translation column P[:, 3] only concerns the other camera of a stereo
pair). A non-zero skew s (K[0,1]) is honoured exactly: X = (u - cx - s*(v - cy)/fy) * d / fx.

Resizing from (W0, H0) to (W1, H1) uses sx = W1/W0, sy = H1/H0 and scales the first row of K/P by
sx and the second by sy (fx, s, cx, P[0,3] by sx; fy, cy, P[1,3] by sy), without a half-pixel
shift, like image_proc's resize (case C18; the half-pixel convention differs by at most 0.5 px). A
crop whose top-left corner is (x0, y0) shifts cx -= x0, cy -= y0.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Dict, Optional, Tuple, Union

import numpy as np

if TYPE_CHECKING:  # torch is imported where a function needs it: numpy-only callers (the K
    import torch  # bookkeeping of ros.camera_info, depth3dseg-extract) start without it

ArrayOrTensor = Union[np.ndarray, 'torch.Tensor']

__all__ = [
    'backproject',
    'backproject_np',
    'pixel_grid',
    'scale_intrinsics',
    'crop_intrinsics',
    'resize_intrinsics',
    'check_intrinsics_np',
]


def _is_tensor(x: object) -> bool:
    """True when ``x`` is a torch.Tensor (never imports torch: without it, nothing is a tensor)."""
    torch = sys.modules.get('torch')
    return torch is not None and isinstance(x, torch.Tensor)


# ----------------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------------
def check_intrinsics_np(K: np.ndarray, name: str = 'K') -> np.ndarray:
    """Validate a 3x3 K or 3x4 P (numpy) and return it as float64.

    Raises ValueError naming the field when the shape is not 3x3/3x4, a value is not finite, or
    fx = K[0,0] / fy = K[1,1] is not > 0 (e.g. an all-zero P from a driver, case C17: refuse rather
    than divide by zero and publish inf/NaN clouds).
    """
    K = np.asarray(K, dtype=np.float64)
    if K.shape not in ((3, 3), (3, 4)):
        raise ValueError(f'{name} must be 3x3 (K) or 3x4 (P), got shape {K.shape}')
    if not np.all(np.isfinite(K)):
        raise ValueError(f'{name} has non-finite entries: {K.tolist()}')
    if not K[0, 0] > 0:
        raise ValueError(f'{name}[0,0] (fx)={K[0, 0]} must be > 0 (all-zero P? see case C17)')
    if not K[1, 1] > 0:
        raise ValueError(f'{name}[1,1] (fy)={K[1, 1]} must be > 0')
    return K


def _check_intrinsics_torch(K: torch.Tensor, batch: int, name: str = 'K') -> torch.Tensor:
    import torch

    if K.dim() == 2:
        K = K.unsqueeze(0)
    if K.dim() != 3 or tuple(K.shape[1:]) not in ((3, 3), (3, 4)):
        raise ValueError(f'{name} must be Bx3x3 (or Bx3x4 P), got shape {tuple(K.shape)}')
    if K.shape[0] not in (1, batch):
        raise ValueError(f'{name} batch size {K.shape[0]} does not match depth batch size {batch}')
    fx, fy = K[:, 0, 0], K[:, 1, 1]
    if not bool(torch.all(torch.isfinite(K)) and torch.all(fx > 0) and torch.all(fy > 0)):
        raise ValueError(
            f'{name} must be finite with fx, fy > 0, got fx={fx.tolist()} fy={fy.tolist()}'
        )
    return K


# ----------------------------------------------------------------------------------------------
# back-projection
# ----------------------------------------------------------------------------------------------
_GRID_CACHE: Dict[Tuple[int, int, str, torch.dtype], Tuple[torch.Tensor, torch.Tensor]] = {}
_GRID_CACHE_MAX = 16


def pixel_grid(
    height: int,
    width: int,
    device: Union[str, torch.device] = 'cpu',
    dtype: Optional[torch.dtype] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Pixel-centre coordinates (u, v), each 1x1xHxW, cached per (H, W, device, dtype).

    u = column index, v = row index (0-based, integer pixel centres); dtype None = float32. The
    tensors are shared: do not modify them in place.
    """
    import torch

    if height <= 0 or width <= 0:
        raise ValueError(f'image size must be positive, got height={height} width={width}')
    dtype = torch.float32 if dtype is None else dtype
    device = torch.device(device)
    key = (int(height), int(width), str(device), dtype)
    grid = _GRID_CACHE.get(key)
    if grid is None:
        v, u = torch.meshgrid(
            torch.arange(height, device=device, dtype=dtype),
            torch.arange(width, device=device, dtype=dtype),
            indexing='ij',
        )
        grid = (u.reshape(1, 1, height, width), v.reshape(1, 1, height, width))
        if len(_GRID_CACHE) >= _GRID_CACHE_MAX:
            _GRID_CACHE.pop(next(iter(_GRID_CACHE)))
        _GRID_CACHE[key] = grid
    return grid


def backproject(
    depth: torch.Tensor, K: torch.Tensor, check: bool = True
) -> Tuple[torch.Tensor, torch.Tensor]:
    """M2, batched and differentiable: depth B×1×H×W (metres) + K B×3×3 -> organized cloud.

    Args:
        depth: float tensor B×1×H×W, metres; NaN, ±inf, 0 and negatives mean "no depth".
        K: B×3×3 intrinsics (or B×3×4 P, or one 3×3 shared by the batch) of the image the depth map
           belongs to (after any resize/crop: see `resize_intrinsics`, case C18).
        check: validate K (fx, fy > 0, finite); costs one device sync, so hot loops may pass False.
    Returns:
        xyz: B×3×H×W, same dtype as depth, optical frame (x right, y down, z forward), metres;
             0 at invalid pixels so that gradients stay finite — always use `valid`, never treat
             (0, 0, 0) as a point (case C09).
        valid: bool B×1×H×W, depth finite and > 0.
    Gradients flow from xyz into depth (this is what couples the 3D losses to the depth head, M3);
    invalid pixels get zero gradient.
    Raises:
        ValueError: depth not B×1×H×W or not floating point, K of the wrong shape/batch or fx/fy <=
            0.
    """
    import torch

    if not isinstance(depth, torch.Tensor) or depth.dim() != 4 or depth.shape[1] != 1:
        shape = tuple(depth.shape) if hasattr(depth, 'shape') else type(depth).__name__
        raise ValueError(f'depth must be a B×1×H×W tensor, got {shape}')
    if not depth.is_floating_point():
        raise ValueError(f'depth must be floating point (metres), got dtype {depth.dtype}')
    b, _, h, w = depth.shape
    K = K.to(device=depth.device, dtype=depth.dtype)
    if check:
        K = _check_intrinsics_torch(K, b)
    elif K.dim() == 2:
        K = K.unsqueeze(0)
    valid = torch.isfinite(depth) & (depth > 0)
    d = torch.where(valid, depth, torch.zeros((), dtype=depth.dtype, device=depth.device))
    u, v = pixel_grid(h, w, depth.device, depth.dtype)
    u, v = u[:, :, :1, :], v[:, :, :, :1]  # 1×1×1×W and 1×1×H×1 (separable rays)
    fx = K[:, 0, 0].view(-1, 1, 1, 1)
    fy = K[:, 1, 1].view(-1, 1, 1, 1)
    s = K[:, 0, 1].view(-1, 1, 1, 1)
    cx = K[:, 0, 2].view(-1, 1, 1, 1)
    cy = K[:, 1, 2].view(-1, 1, 1, 1)
    # K^-1 [u, v, 1]^T for an upper-triangular K with skew s: ry = (v-cy)/fy, rx = (u-cx-s*ry)/fx.
    ry = (v - cy) / fy  # B×1×H×1
    rx = (u - cx) / fx - (s / fx) * ry  # B×1×H×W only when s != 0 (else B×1×1×W)
    xyz = torch.cat([rx * d, ry * d, d], dim=1)
    return xyz, valid


def backproject_np(depth: np.ndarray, K: np.ndarray) -> np.ndarray:
    """M2, numpy twin of `backproject` for one frame.

    Args:
        depth: H×W float depth in metres (NaN/inf/<=0 = no data). Integer arrays are refused:
               convert 16UC1 millimetres with core.depth.depth_to_meters first.
        K: 3×3 K or 3×4 P of that image (left 3×3 block used).
    Returns:
        H×W×3 float32 organized cloud in the optical frame, metres; NaN (all three) where invalid.
    Raises:
        ValueError: depth not 2-D floating point; K bad (see `check_intrinsics_np`).
    """
    depth = np.asarray(depth)
    if depth.ndim != 2:
        raise ValueError(f'depth must be H×W, got shape {depth.shape}')
    if not np.issubdtype(depth.dtype, np.floating):
        raise ValueError(
            f'depth must be float metres, got dtype {depth.dtype} '
            '(convert 16UC1 mm with core.depth.depth_to_meters)'
        )
    K = check_intrinsics_np(K)
    h, w = depth.shape
    # Rays in float64 (H + W values), the H×W products in float32 straight into the output
    # (5x faster than float64 H×W temporaries; differs by <= 1 ulp of the float32 result).
    d = depth.astype(np.float32)
    valid = np.isfinite(d) & (d > 0)
    d = np.where(valid, d, np.float32(np.nan))
    u = np.arange(w, dtype=np.float64)[None, :]
    v = np.arange(h, dtype=np.float64)[:, None]
    fx, s, cx, fy, cy = K[0, 0], K[0, 1], K[0, 2], K[1, 1], K[1, 2]
    ry = (v - cy) / fy
    rx = ((u - cx - s * ry) / fx).astype(np.float32)
    out = np.empty((h, w, 3), dtype=np.float32)
    np.multiply(rx, d, out=out[..., 0])
    np.multiply(ry.astype(np.float32), d, out=out[..., 1])
    out[..., 2] = d
    return out


# ----------------------------------------------------------------------------------------------
# intrinsics scaling / cropping (numpy 3x3 K or 3x4 P; torch B×3×3 / B×3×4 / 3×3)
# ----------------------------------------------------------------------------------------------
def _check_K_shape(K: ArrayOrTensor) -> None:
    shape = tuple(K.shape)
    if shape[-2:] not in ((3, 3), (3, 4)) or len(shape) not in (2, 3):
        raise ValueError(f'K must be 3x3, 3x4 (P) or Bx3x3/Bx3x4, got shape {shape}')


def _rows(
    K: ArrayOrTensor, a0: ArrayOrTensor, a1: ArrayOrTensor, b0: ArrayOrTensor, b1: ArrayOrTensor
) -> ArrayOrTensor:
    """Return T @ K for T = [[a0, 0, b0], [0, a1, b1], [0, 0, 1]] (scalars or per-batch values)."""
    if _is_tensor(K):
        import torch

        out = K.clone()

        def col(x):  # noqa: E306 - scalar or B-vector -> broadcastable over (..., 3|4)
            x = torch.as_tensor(x, dtype=K.dtype, device=K.device)
            return x.reshape(-1, 1) if (K.dim() == 3 and x.dim() == 1) else x

        r2 = K[..., 2, :]
        out[..., 0, :] = col(a0) * K[..., 0, :] + col(b0) * r2
        out[..., 1, :] = col(a1) * K[..., 1, :] + col(b1) * r2
        return out
    K = np.asarray(K, dtype=np.float64)
    out = K.copy()
    out[..., 0, :] = a0 * K[..., 0, :] + b0 * K[..., 2, :]
    out[..., 1, :] = a1 * K[..., 1, :] + b1 * K[..., 2, :]
    return out


def scale_intrinsics(K: ArrayOrTensor, sx, sy) -> ArrayOrTensor:
    """Intrinsics after scaling the image by sx (x/columns) and sy (y/rows).

    fx, skew, cx (and P[0,3]) are multiplied by sx; fy, cy (and P[1,3]) by sy; no half-pixel shift
    (image_proc resize convention, case C18). K: numpy 3×3/3×4 (returned float64) or torch
    3×3/B×3×3/ B×3×4 (sx, sy scalars or length-B tensors). Raises ValueError for a bad shape or
    sx/sy <= 0.
    """
    _check_K_shape(K)
    for name, val in (('sx', sx), ('sy', sy)):
        arr = val.detach().cpu().numpy() if _is_tensor(val) else np.asarray(val)
        if not (np.all(np.isfinite(arr)) and np.all(arr > 0)):
            raise ValueError(f'{name}={val} must be finite and > 0')
    return _rows(K, sx, sy, 0.0, 0.0)


def crop_intrinsics(K: ArrayOrTensor, x0, y0) -> ArrayOrTensor:
    """Intrinsics of the crop whose top-left pixel is (x0, y0) in the original: cx -= x0, cy -= y0.

    Exact as T @ K with T = [[1, 0, -x0], [0, 1, -y0], [0, 0, 1]], so it holds for 3×4 P too.
    Same array/tensor rules as `scale_intrinsics`. Raises ValueError for a bad shape.
    """
    _check_K_shape(K)
    if _is_tensor(x0):
        x0n, y0n = -x0, -y0
    else:
        x0n, y0n = -np.asarray(x0, dtype=np.float64), -np.asarray(y0, dtype=np.float64)
    return _rows(K, 1.0, 1.0, x0n, y0n)


def resize_intrinsics(
    K: ArrayOrTensor, src_wh: Tuple[int, int], dst_wh: Tuple[int, int]
) -> ArrayOrTensor:
    """Intrinsics after resizing an image from src_wh = (W0, H0) to dst_wh = (W1, H1) pixels.

    sx = W1/W0, sy = H1/H0 (separate factors for aspect-changing resizes, case C20), see
    `scale_intrinsics`. Example (C18): 1280×720, fx=fy=900, cx=640, cy=360 -> 640×360 gives
    fx=fy=450, cx=320, cy=180. Raises ValueError when a size is not two positive integers.
    """
    for name, wh in (('src_wh', src_wh), ('dst_wh', dst_wh)):
        if len(wh) != 2 or any(int(x) != x or x <= 0 for x in wh):
            raise ValueError(f'{name}={tuple(wh)} must be (width, height) positive integers')
    return scale_intrinsics(K, dst_wh[0] / src_wh[0], dst_wh[1] / src_wh[1])
