"""Kinect-v1-like depth noise and holes for rendered (exact) depth maps.

Model (structured-light sensor, values from Khoshelham & Elberink 2012 and Nguyen, Izadi & Lovell
2012):
- axial noise σ(z) = 0.0012 + 0.0019·(z − 0.4)² m (grows with z², ≈ 1.4 cm at 3 m);
- disparity quantisation: d = f·b / z with baseline b = 7.5 cm, f = fx scaled to the 640 px sensor,
  rounded to 1/8 px, so depth steps grow with z² (z²/(8·f·b): ≈ 4.6 cm at 4 m for f = 580 px);
- holes (no data, NaN here, 0 once written as 16UC1): out of range (z < 0.5 m; beyond 4.0 m with a
  probability rising to 1 at 6 m), at depth discontinuities (projector shadow/edge band to the left
  of foreground edges, randomly dilated), and a few irregular dropout blobs.
All randomness comes from the given ``numpy.random.Generator`` (deterministic per seed).
"""

from __future__ import annotations

import cv2
import numpy as np

BASELINE_M = 0.075
SENSOR_WIDTH = 640
SUBPIXEL = 8.0
MIN_RANGE, FAR_START, FAR_END = 0.5, 4.0, 6.0


def axial_sigma(z: np.ndarray) -> np.ndarray:
    """Axial noise standard deviation (m) at depth z (m): 0.0012 + 0.0019·(z − 0.4)²."""
    return 0.0012 + 0.0019 * (np.asarray(z) - 0.4) ** 2


def quantise_disparity(z: np.ndarray, fx: float, width: int) -> np.ndarray:
    """Round z (m) to the depth of the nearest 1/8-pixel disparity of a Kinect-like sensor."""
    f = fx * SENSOR_WIDTH / float(width)
    with np.errstate(divide='ignore', invalid='ignore'):
        disp = np.round(f * BASELINE_M / z * SUBPIXEL) / SUBPIXEL
        return (f * BASELINE_M / disp).astype(np.float32)


def kinect_noise(
    depth: np.ndarray,
    K: np.ndarray,
    rng: np.random.Generator,
    far: tuple = (FAR_START, FAR_END),
) -> np.ndarray:
    """Add Kinect-like noise and holes to an exact depth map.

    Args:
        depth: H×W float32 z-depth in metres (NaN = no surface).
        K: 3×3 intrinsics of the image (fx sets the disparity scale).
        rng: random generator (all draws come from it).
        far: (start, end) m of the far dropout: a pixel is a hole with a probability rising from 0
            at start to 1 at end (default 4–6 m; the 'nyu_large' layout uses 6–9 m, as NYU's and
            TUM's raw Kinect frames reach 8 m).
    Returns:
        H×W float32 metres with NaN holes.
    Raises:
        ValueError: depth is not 2-D.
    """
    z = np.asarray(depth, dtype=np.float32)
    if z.ndim != 2:
        raise ValueError(f'depth.shape={z.shape} must be H×W')
    h, w = z.shape
    valid = np.isfinite(z) & (z > 0)
    zf = np.where(valid, z, 1.0).astype(np.float32)
    # smooth-ish noise: half-resolution noise field upsampled (neighbouring pixels correlate, as on
    # a Kinect)
    field = rng.standard_normal((max(1, h // 2), max(1, w // 2))).astype(np.float32)
    field = cv2.resize(field, (w, h), interpolation=cv2.INTER_LINEAR)
    field = 0.6 * field + 0.4 * rng.standard_normal((h, w)).astype(np.float32)
    noisy = zf + axial_sigma(zf).astype(np.float32) * field
    noisy = quantise_disparity(noisy, float(K[0, 0]), w)

    holes = ~valid | (zf < MIN_RANGE)
    far_p = np.clip((zf - far[0]) / (far[1] - far[0]), 0.0, 1.0)
    holes |= rng.random((h, w)) < far_p
    # edges: a depth jump > 4 % between horizontal or vertical neighbours; the band left of a near
    # object (the projector sits to the right of the IR camera) is widened by a random 1–4 px
    jump_x = np.abs(np.diff(zf, axis=1)) > 0.04 * zf[:, 1:]
    jump_y = np.abs(np.diff(zf, axis=0)) > 0.04 * zf[1:, :]
    edge = np.zeros((h, w), bool)
    edge[:, 1:] |= jump_x
    edge[:, :-1] |= jump_x
    edge[1:, :] |= jump_y
    edge[:-1, :] |= jump_y
    width_px = int(rng.integers(1, 5))
    band = cv2.dilate(edge.astype(np.uint8), np.ones((1, 2 * width_px + 1), np.uint8)).astype(bool)
    holes |= band & (rng.random((h, w)) < 0.7)
    # irregular dropout blobs (dark/specular patches): the top 0.2–1.5 % of a smooth random field
    coarse = rng.random((max(2, h // 40), max(2, w // 40))).astype(np.float32)
    smooth = cv2.resize(coarse, (w, h), interpolation=cv2.INTER_CUBIC)
    holes |= smooth > np.quantile(smooth, 1.0 - rng.uniform(0.002, 0.015))
    out = noisy.astype(np.float32)
    out[holes] = np.nan
    return out
