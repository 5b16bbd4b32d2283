"""Floor and ceiling labels from an RGB-D frame's measured depth alone (real rooms; M5).

A real RGB-D frame without labels still says where its room's floor and ceiling are: the floor is
the lowest large surface that faces up, the ceiling the highest that faces down. Labelling those
pixels, and only those (every other pixel void, which the cross-entropies ignore), lets the
segmentation terms train on real images without a human label. The rules follow the geometric
reasoning of Gupta, Arbeláez and Malik (CVPR 2013, "Perceptual organization and recognition of
indoor scenes from RGB-D images": gravity from the normals, then height and orientation per
surface). Walls are left out: on real Kinect frames at 3–5 m a wall's visible patches between
furniture were too small and noisy to tell from curtains and cupboard fronts (docs/levers.md,
"Floor labels from measured depth").

Steps, all in the camera's optical frame (x right, y down, z forward; metres):

1. Normals from the organized cloud (M2) of the depth averaged over ``smooth`` × ``smooth``
   measured pixels, by central differences ``step`` pixels apart, facing the camera; none across
   depth discontinuities. A structured-light sensor's depth noise grows with the square of the
   distance (σ ≈ 0.0012 + 0.0019 (z − 0.4)² m; Nguyen, Izadi and Lovell 2012, "Modeling Kinect
   sensor noise"), so every height test below allows ``tol_m`` + 2σ(z).
2. Gravity: the normals within 40° of the image's up or down axis (−y / +y) vote, each turned to
   point up; their mean is refined twice within 20° and 10°. Heights are P · up.
3. Floor: pixels facing up (within ``angle_deg``) within the tolerance of the lowest such height
   that holds ``min_area`` of the frame and spans at least ``min_floor_extent_m`` in depth (a table
   top does not). Ceiling: facing down, within the tolerance of the highest such height, at least
   1.8 m above the floor when one was found.

Frames where gravity cannot be found (under 2 % of the pixels facing up or down) get no labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from depth3dseg_ros.core.geometry import backproject_np


@dataclass(frozen=True)
class GeometricLabelConfig:
    """Thresholds of `geometric_labels` (module docstring); lengths in metres, angles in
    degrees, areas as fractions of the frame's pixels."""

    step: int = 3
    smooth: int = 5
    angle_deg: float = 15.0
    tol_m: float = 0.06
    min_area: float = 0.02
    min_floor_extent_m: float = 1.5


def tolerance(z: np.ndarray, tol_m: float) -> np.ndarray:
    """Distance tolerance (m) at depth ``z`` (m): ``tol_m`` + twice the Kinect axial noise σ(z)
    (module docstring)."""
    return tol_m + 2.0 * (0.0012 + 0.0019 * np.square(np.maximum(z - 0.4, 0.0)))


def smooth_depth(depth: np.ndarray, k: int) -> np.ndarray:
    """Mean of the measured depths (finite, > 0) in each k×k window, H×W float32; NaN where the
    pixel itself is not measured. k <= 1 returns the depth as float32."""
    d = np.asarray(depth, np.float32)
    valid = np.isfinite(d) & (d > 0)
    if k <= 1:
        return np.where(valid, d, np.nan).astype(np.float32)
    v = valid.astype(np.float32)
    num = cv2.boxFilter(np.where(valid, d, 0).astype(np.float32), -1, (k, k), normalize=False)
    den = cv2.boxFilter(v, -1, (k, k), normalize=False)
    with np.errstate(invalid='ignore', divide='ignore'):
        return np.where(valid, num / den, np.nan).astype(np.float32)


def camera_normals(cloud: np.ndarray, step: int = 3, max_jump: float = 0.05) -> np.ndarray:
    """Unit normals H×W×3 float32 of an organized cloud (H×W×3 m, NaN invalid), facing the camera
    (n · P < 0); NaN where the pixel or a neighbour ``step`` px away is missing, or a neighbour
    differs in depth by more than ``max_jump`` × its depth. Raises ValueError for a cloud that is
    not H×W×3 or a step < 1."""
    if cloud.ndim != 3 or cloud.shape[2] != 3:
        raise ValueError(f'cloud must be H×W×3, got shape {cloud.shape}')
    if step < 1:
        raise ValueError(f'step={step} must be >= 1')
    s = step
    n = np.full(cloud.shape, np.nan, np.float32)
    c = cloud[s:-s, s:-s]
    dx = cloud[s:-s, 2 * s :] - cloud[s:-s, : -2 * s]
    dy = cloud[2 * s :, s:-s] - cloud[: -2 * s, s:-s]
    z = c[..., 2:3]
    jump = (np.abs(dx[..., 2:3]) > 2 * max_jump * z) | (np.abs(dy[..., 2:3]) > 2 * max_jump * z)
    cr = np.cross(dx, dy)
    norm = np.linalg.norm(cr, axis=2, keepdims=True)
    with np.errstate(invalid='ignore', divide='ignore'):
        cr = cr / norm
    unmeasured = ~np.isfinite(c).all(axis=2, keepdims=True)
    cr = np.where(jump | (norm == 0) | unmeasured, np.nan, cr)
    facing = np.sum(cr * c, axis=2, keepdims=True) > 0
    n[s:-s, s:-s] = np.where(facing, -cr, cr)
    return n


def estimate_up(normals: np.ndarray) -> np.ndarray | None:
    """The up direction (unit 3-vector, camera frame) from normals H×W×3 (module docstring, step
    2), or None when fewer than 2 % of the pixels face up or down within 40° of the image axis."""
    n = normals.reshape(-1, 3)
    n = n[np.isfinite(n).all(axis=1)]
    up = np.array([0.0, -1.0, 0.0])
    for deg in (40.0, 20.0, 10.0):
        cos = n @ up
        sel = np.abs(cos) > np.cos(np.radians(deg))
        if sel.sum() < 0.02 * normals.shape[0] * normals.shape[1]:
            return None
        v = (n[sel] * np.sign(cos[sel])[:, None]).mean(axis=0)
        up = v / np.linalg.norm(v)
    return up


def _level(heights: np.ndarray, depth: np.ndarray, lowest: bool, cfg, npix: int, extent: float):
    """The lowest (or highest) height level (± tol_m) holding min_area of the frame and spanning
    ``extent`` m in depth, or None."""
    if heights.size < cfg.min_area * npix:
        return None
    order = np.argsort(heights if lowest else -heights)
    hs, ds = heights[order], depth[order]
    tol = tolerance(ds, cfg.tol_m)
    for i in range(0, hs.size, max(1, hs.size // 200)):
        near = np.abs(hs - hs[i]) < tol
        if near.sum() >= cfg.min_area * npix:
            d = ds[near]
            if np.percentile(d, 95) - np.percentile(d, 5) >= extent:
                return float(np.median(hs[near]))
    return None


def geometric_labels(
    depth: np.ndarray,
    K: np.ndarray,
    ids: dict[str, int],
    void_id: int = 0,
    cfg: GeometricLabelConfig = GeometricLabelConfig(),
) -> np.ndarray:
    """Floor / ceiling label image of one RGB-D frame (module docstring).

    Args:
        depth: H×W float metres, NaN or <= 0 where not measured.
        K: 3×3 K of that image.
        ids: class ids for the keys 'floor' and 'ceiling' (e.g. NYU13: 5, 3).
        void_id: the id of every other pixel.
        cfg: thresholds.
    Returns:
        H×W uint8 label image; all ``void_id`` when gravity cannot be found.
    Raises:
        ValueError: depth not H×W float, bad K (core.geometry), or ``ids`` missing a key.
    """
    missing = {'floor', 'ceiling'} - set(ids)
    if missing:
        raise ValueError(f'ids lacks {sorted(missing)} (needs floor and ceiling)')
    depth = np.asarray(depth)
    if depth.ndim != 2 or not np.issubdtype(depth.dtype, np.floating):
        raise ValueError(
            f'depth must be H×W float metres, got shape {depth.shape} dtype {depth.dtype} '
            '(convert 16UC1 mm with core.depth.depth_to_meters)'
        )
    cloud = backproject_np(smooth_depth(depth, cfg.smooth), K)
    normals = camera_normals(cloud, cfg.step)
    h, w = depth.shape
    out = np.full((h, w), void_id, np.uint8)
    up = estimate_up(normals)
    if up is None:
        return out
    ok = np.isfinite(normals).all(axis=2)
    cos = np.where(ok, normals @ up, 0.0)
    height = np.where(ok, cloud @ up, np.nan)
    cos_tol = np.cos(np.radians(cfg.angle_deg))
    facing_up, facing_down = ok & (cos > cos_tol), ok & (cos < -cos_tol)
    npix = h * w
    z = cloud[..., 2]
    floor_h = _level(height[facing_up], z[facing_up], True, cfg, npix, cfg.min_floor_extent_m)
    if floor_h is not None:
        out[facing_up & (np.abs(height - floor_h) < tolerance(z, cfg.tol_m))] = ids['floor']
    ceil_h = _level(height[facing_down], z[facing_down], False, cfg, npix, 0.0)
    if ceil_h is not None and (floor_h is None or ceil_h - floor_h > 1.8):
        out[facing_down & (np.abs(height - ceil_h) < tolerance(z, cfg.tol_m))] = ids['ceiling']
    return out
