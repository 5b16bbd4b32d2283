"""Camera poses for the synthetic generator: smooth paths at robot height, hand-held snapshots
across the room, optical-frame rotation, and the pinhole K that matches pybullet's TinyRenderer
exactly.

Optical frame (REP 103): z forward, x right, y down. ``T_world_cam`` (4×4 float64) maps
optical-frame points to world points, so a back-projected pixel ``p_c``
(core.geometry.backproject_np, M2) lies at ``R @ p_c + t`` in the room.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Tuple

import numpy as np


@dataclass(frozen=True)
class CameraPose:
    """Eye position (m, world), yaw/pitch/roll (rad; yaw about world z from +x, pitch up
    positive)."""

    eye: Tuple[float, float, float]
    yaw: float
    pitch: float
    roll: float = 0.0

    def rotation(self) -> np.ndarray:
        """R_world_optical (3×3 float64): columns are the optical x (right), y (down), z (forward)
        axes."""
        cy, sy, cp, sp = (
            math.cos(self.yaw),
            math.sin(self.yaw),
            math.cos(self.pitch),
            math.sin(self.pitch),
        )
        fwd = np.array([cp * cy, cp * sy, sp])
        right = np.array([sy, -cy, 0.0])  # horizontal, to the right of fwd
        down = np.cross(fwd, right)  # z × x = y (right-handed optical frame)
        cr, sr = math.cos(self.roll), math.sin(self.roll)
        x = cr * right + sr * down
        y = -sr * right + cr * down
        return np.stack([x, y, fwd], axis=1)

    def matrix(self) -> np.ndarray:
        """T_world_cam, 4×4 float64 (optical frame -> world)."""
        T = np.eye(4)
        T[:3, :3] = self.rotation()
        T[:3, 3] = self.eye
        return T

    def view_target_up(self) -> Tuple[List[float], List[float], List[float]]:
        """(eye, target, up) for ``pybullet.computeViewMatrix``: up = −y_optical."""
        R = self.rotation()
        eye = np.asarray(self.eye, dtype=np.float64)
        return eye.tolist(), (eye + R[:, 2]).tolist(), (-R[:, 1]).tolist()


def tinyrenderer_K(width: int, height: int, fov_y_deg: float) -> np.ndarray:
    """K (3×3 float64) of a pybullet ``computeProjectionMatrixFOV(fov_y, width/height, ...)``
    render.

    fx = fy = (H/2)/tan(fov_y/2). The principal point was measured, not assumed: back-projecting
    TinyRenderer's depth onto known planes (a floor and a rotated wall, 64×48 to 640×480, odd sizes
    too) fits cx = W/2, cy = H/2 − 1 to 1e-6 m mean residual, whereas (W−1)/2, (H−1)/2 leaves
    millimetre residuals (TinyRenderer samples pixel corners and its row flip shifts rows by one).
    test/test_synth.py re-checks this on every run.

    Raises:
        ValueError: non-positive size or fov outside (0, 180).
    """
    f = _focal_px(width, height, fov_y_deg)
    return np.array([[f, 0.0, width / 2.0], [0.0, f, height / 2.0 - 1.0], [0.0, 0.0, 1.0]])


def centred_K(width: int, height: int, fov_y_deg: float) -> np.ndarray:
    """K (3×3 float64) of a square-pixel camera with vertical field of view ``fov_y_deg`` and its
    principal point at the image centre ((W−1)/2, (H−1)/2 in pixel-centre coordinates): the
    Cycles renderer's camera (synth/cycles_render.py sets lens and shift from it).

    Raises:
        ValueError: non-positive size or fov outside (0, 180).
    """
    f = _focal_px(width, height, fov_y_deg)
    return np.array([[f, 0.0, (width - 1) / 2.0], [0.0, f, (height - 1) / 2.0], [0.0, 0.0, 1.0]])


def _focal_px(width: int, height: int, fov_y_deg: float) -> float:
    """fx = fy = (H/2)/tan(fov_y/2) in pixels, after checking the size and field of view."""
    if width <= 0 or height <= 0:
        raise ValueError(f'image size width={width} height={height} must be positive')
    if not 0.0 < fov_y_deg < 180.0:
        raise ValueError(f'fov_y_deg={fov_y_deg} must be in (0, 180)')
    return (height / 2.0) / math.tan(math.radians(fov_y_deg) / 2.0)


def camera_path(rng: np.random.Generator, free_zone, n_frames: int) -> List[CameraPose]:
    """A smooth path of ``n_frames`` poses inside ``free_zone`` (x0, y0, x1, y1) at robot height.

    Position: a Lissajous curve over the free zone; height 0.3–1.5 m varying slowly; yaw turns
    monotonically by 180–400° over the path (the robot looks around the whole room) with a small
    wobble; pitch −30°..+15°; roll within ±2°. The path covers the room in ``n_frames`` whatever
    that number is, so a short scene is a fast robot (stamps stay 30 Hz).
    """
    if n_frames <= 0:
        raise ValueError(f'n_frames={n_frames} must be positive')
    x0, y0, x1, y1 = free_zone
    t = np.linspace(0.0, 1.0, n_frames)
    ph = rng.uniform(0, 2 * math.pi, 6)
    fx, fy = rng.uniform(0.5, 1.5), rng.uniform(0.5, 1.5)
    x = (x0 + x1) / 2 + (x1 - x0) / 2 * np.sin(2 * math.pi * fx * t + ph[0])
    y = (y0 + y1) / 2 + (y1 - y0) / 2 * np.sin(2 * math.pi * fy * t + ph[1])
    h0, ha = rng.uniform(0.5, 1.3), rng.uniform(0.05, 0.3)
    z = np.clip(h0 + ha * np.sin(2 * math.pi * rng.uniform(0.3, 1.2) * t + ph[2]), 0.3, 1.5)
    turn = rng.uniform(math.pi, 2.2 * math.pi) * (1 if rng.random() < 0.5 else -1)
    yaw = rng.uniform(-math.pi, math.pi) + turn * t + 0.2 * np.sin(2 * math.pi * 1.5 * t + ph[3])
    p0 = rng.uniform(-0.25, 0.05)
    pitch = np.clip(
        p0 + 0.2 * np.sin(2 * math.pi * rng.uniform(0.5, 1.5) * t + ph[4]),
        math.radians(-30),
        math.radians(15),
    )
    roll = math.radians(2.0) * np.sin(2 * math.pi * t + ph[5])
    return [
        CameraPose(
            (float(x[i]), float(y[i]), float(z[i])), float(yaw[i]), float(pitch[i]), float(roll[i])
        )
        for i in range(n_frames)
    ]


def _exit_distance(x: float, y: float, yaw: float, lx: float, ly: float) -> float:
    """Horizontal distance (m) from (x, y) inside the lx×ly room to its wall along ``yaw``."""
    c, s = math.cos(yaw), math.sin(yaw)
    ts = [(lx - x) / c if c > 1e-9 else (-x / c if c < -1e-9 else math.inf)]
    ts.append((ly - y) / s if s > 1e-9 else (-y / s if s < -1e-9 else math.inf))
    return min(ts)


def handheld_poses(
    rng: np.random.Generator,
    size: Tuple[float, float, float],
    footprints,
    n_frames: int,
    clearance: float = 0.3,
    min_view: float = 2.5,
    tries: int = 400,
) -> List[CameraPose]:
    """``n_frames`` independent poses of a hand-held RGB-D camera looking across the room, as in
    NYU Depth v2's labelled frames (Silberman et al. 2012: a person holding a Kinect at chest to
    eye height, mostly from the room's edge).

    Each pose: eye anywhere on the floor plan at least ``clearance`` from the walls and from every
    furniture ``footprints`` rectangle (x0, y0, x1, y1, m) at height 1.1–1.7 m; yaw towards the
    room's centre ± 50°, redrawn until the wall straight ahead is at least ``min_view`` away (the
    camera looks across the room, not at a nearby wall); pitch −30°..+5°; roll ±3°. Unlike
    :func:`camera_path` the poses are snapshots, not a path (stamps stay 30 Hz).

    Raises:
        ValueError: ``n_frames`` not positive, or no eye position found in ``tries`` draws for a
            pose (a room too full or too small for ``clearance``/``min_view``).
    """
    if n_frames <= 0:
        raise ValueError(f'n_frames={n_frames} must be positive')
    lx, ly, _ = size
    poses: List[CameraPose] = []
    while len(poses) < n_frames:
        for _ in range(tries):
            x = float(rng.uniform(clearance, lx - clearance))
            y = float(rng.uniform(clearance, ly - clearance))
            if any(
                a0 - clearance < x < a1 + clearance and b0 - clearance < y < b1 + clearance
                for a0, b0, a1, b1 in footprints
            ):
                continue
            yaw = math.atan2(ly / 2 - y, lx / 2 - x) + float(rng.uniform(-1, 1)) * math.radians(50)
            if _exit_distance(x, y, yaw, lx, ly) >= min_view:
                break
        else:
            raise ValueError(
                f'no hand-held eye position in {tries} draws (room {lx:.2f}×{ly:.2f} m, '
                f'{len(footprints)} footprints, clearance={clearance}, min_view={min_view})'
            )
        z = float(rng.uniform(1.1, 1.7))
        pitch = math.radians(float(rng.uniform(-30.0, 5.0)))
        roll = math.radians(float(rng.uniform(-3.0, 3.0)))
        poses.append(CameraPose((x, y, z), yaw, pitch, roll))
    return poses
