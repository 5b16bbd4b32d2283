"""sensor_msgs/CameraInfo -> intrinsics of the image actually received, and CameraInfo for outputs.

Follows image_geometry's PinholeCameraModel and REP 104: K (with D) describes the raw image, P's
left 3×3 block the rectified image (docs/cases.md C17); binning_x/y (0 or 1 = none) divide the
first/second row; a ROI (x_offset, y_offset in full-resolution pixels) shifts cx, cy before
binning. An all-zero P falls back to K with a one-time warning (drivers that publish P = 0).
Scaling and cropping to the network resolution use core.geometry (fx, cx by sx; fy, cy by sy; no
half-pixel shift; crop: cx -= x0, cy -= y0; C18). Duck-typed: rclpy (``k``, ``p``...) and
rosbags/ROS 1 (``K``, ``P``) field names both work.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from depth3dseg_ros.core.geometry import (
    check_intrinsics_np,
    crop_intrinsics,
    resize_intrinsics,
    scale_intrinsics,
)
from depth3dseg_ros.ros.msgutil import (
    build,
    convert_header,
    float64_field,
    is_rosbags_cls,
    rclpy_cls,
)

log = logging.getLogger(__name__)
_warned: set[str] = set()


def _warn_once(key: str, text: str) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning(text)


def _get(msg: Any, name: str, default: Any = None) -> Any:
    """Field ``name`` in ROS 2 (lower-case) or ROS 1 (upper-case) spelling."""
    for n in (name, name.upper()):
        if hasattr(msg, n):
            return getattr(msg, n)
    return default


@dataclass(frozen=True)
class Intrinsics:
    """Pinhole intrinsics of one image.

    Attributes:
        K: 3×3 float64 [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] of this image (pixels).
        width, height: image size in pixels the K belongs to.
        P: 3×4 float64 projection matrix at the same size (rectified; K with zero column if
            unknown).
        D: distortion coefficients (copied; empty for none). distortion_model: e.g. 'plumb_bob'.
        R: 3×3 rectification rotation (copied; identity if unknown).
        rectified: True if K came from P.
    """

    K: np.ndarray
    width: int
    height: int
    P: np.ndarray = field(default_factory=lambda: np.zeros((3, 4)))
    D: np.ndarray = field(default_factory=lambda: np.zeros(0))
    distortion_model: str = 'plumb_bob'
    R: np.ndarray = field(default_factory=lambda: np.eye(3))
    rectified: bool = False

    def resized(self, width: int, height: int) -> 'Intrinsics':
        """Intrinsics for this image resized to width×height (sx = W1/W0, sy = H1/H0; K and P,
        C18)."""
        src, dst = (self.width, self.height), (int(width), int(height))
        return replace(
            self,
            K=resize_intrinsics(self.K, src, dst),
            P=resize_intrinsics(self.P, src, dst),
            width=dst[0],
            height=dst[1],
        )

    def cropped(self, x0: int, y0: int, width: int, height: int) -> 'Intrinsics':
        """Intrinsics of the crop with top-left (x0, y0) and size width×height (cx -= x0, cy -=
        y0).

        Raises:
            ValueError: the crop is not inside the image.
        """
        if (
            x0 < 0
            or y0 < 0
            or width <= 0
            or height <= 0
            or x0 + width > self.width
            or y0 + height > self.height
        ):
            raise ValueError(
                f'crop x0={x0} y0={y0} {width}x{height} is outside the {self.width}x{self.height} '
                'image'
            )
        return replace(
            self,
            K=crop_intrinsics(self.K, x0, y0),
            P=crop_intrinsics(self.P, x0, y0),
            width=int(width),
            height=int(height),
        )


def intrinsics_from_camera_info(msg: Any, use_rectified: bool = False) -> Intrinsics:
    """Intrinsics of the image a CameraInfo describes: K (raw) or P[:, :3] (rectified), binning and
    ROI applied.

    Args:
        msg: sensor_msgs/CameraInfo (rclpy, rosbags, or ROS 1 field names).
        use_rectified: True for rectified images (image_rect*): use P. If P is all zero (fx = 0)
            fall back to K with a warning once per D (C17); the image being rectified, D is then
            returned as zeros so that nothing undistorts it again.
    Returns:
        Intrinsics at the received image's size ((roi.width or width) / binning_x, likewise y).
    Raises:
        ValueError: K/P not 9/12 numbers, fx or fy <= 0 or a non-finite entry in the matrix used
            (names the field and value), a zero image size, an ROI not inside the image (names
            the ROI and the size), or binning that leaves no pixel
            (binning_x=2**32-1). Implausible but finite values (fx = 5e-324) pass:
            node.frame.intrinsics_problem judges them.
    """
    k = np.asarray(_get(msg, 'k'), dtype=np.float64).reshape(-1)
    p = np.asarray(_get(msg, 'p', np.zeros(12)), dtype=np.float64).reshape(-1)
    d = np.asarray(_get(msg, 'd', np.zeros(0)), dtype=np.float64).reshape(-1)
    r = np.asarray(_get(msg, 'r', np.zeros(9)), dtype=np.float64).reshape(-1)
    if k.size != 9 or p.size != 12:
        raise ValueError(f'CameraInfo.k has {k.size} values and .p {p.size}; expected 9 and 12')
    K, P = k.reshape(3, 3), p.reshape(3, 4)
    rectified = bool(use_rectified)
    if rectified and not (P[0, 0] > 0 and P[1, 1] > 0):
        dnote = (
            ''
            if not np.any(d)
            else f' (D={d.tolist()} is not zero: correct only for undistorted images)'
        )
        _warn_once(
            f'p_zero {d.tolist()}',  # once per distortion: another camera gets its own warning
            f'CameraInfo.p has fx={P[0, 0]} fy={P[1, 1]} (all-zero P?): using K instead{dnote}; '
            'the image is taken as rectified (use_rectified), so D is not applied again',
        )
        rectified = False
        d = np.zeros_like(d)  # a rectified image is undistorted: never undistort it a second time
    if not rectified:
        check_intrinsics_np(K, 'CameraInfo.k')
        if not (P[0, 0] > 0 and P[1, 1] > 0):
            P = np.concatenate([K, np.zeros((3, 1))], axis=1)
    else:
        check_intrinsics_np(P, 'CameraInfo.p')
    width, height = int(msg.width), int(msg.height)
    bx, by = (
        max(int(_get(msg, 'binning_x', 0) or 0), 1),
        max(int(_get(msg, 'binning_y', 0) or 0), 1),
    )
    roi = _get(msg, 'roi')
    x0 = y0 = 0
    if roi is not None and int(roi.width) > 0 and int(roi.height) > 0:
        x0, y0 = int(roi.x_offset), int(roi.y_offset)
        if (x0 + int(roi.width) > width or y0 + int(roi.height) > height) and width and height:
            raise ValueError(
                f'CameraInfo.roi x_offset={x0} y_offset={y0} width={roi.width} '
                f'height={roi.height} is not inside the {width}x{height} image it is a window of'
            )
        width, height = int(roi.width), int(roi.height)
    if width <= 0 or height <= 0:
        raise ValueError(
            f'CameraInfo size width={msg.width} height={msg.height} (roi {width}x{height}) is '
            'empty'
        )
    if width // bx == 0 or height // by == 0:  # absurd binning (issue 14): nothing left
        raise ValueError(
            f'CameraInfo binning_x={bx} binning_y={by} leaves a {width // bx}x{height // by} '
            f'image of {width}x{height}'
        )
    K0 = P[:, :3].copy() if rectified else K.copy()
    K1 = scale_intrinsics(crop_intrinsics(K0, x0, y0), 1.0 / bx, 1.0 / by)
    P1 = scale_intrinsics(crop_intrinsics(P, x0, y0), 1.0 / bx, 1.0 / by)
    R = r.reshape(3, 3) if r.size == 9 and np.any(r) else np.eye(3)
    return Intrinsics(
        K=K1,
        width=width // bx,
        height=height // by,
        P=P1,
        D=d.copy(),
        distortion_model=str(_get(msg, 'distortion_model', '') or ''),
        R=R,
        rectified=rectified,
    )


def make_camera_info(
    K: np.ndarray,
    width: int,
    height: int,
    header: Any = None,
    msg_cls: type | None = None,
    P: np.ndarray | None = None,
    D: np.ndarray | None = None,
    R: np.ndarray | None = None,
    distortion_model: str = 'plumb_bob',
) -> Any:
    """Build a CameraInfo for an image of width×height with intrinsics K (and P, D, R).

    Args:
        K: 3×3 intrinsics at this image's size. P: 3×4 (default [K | 0]). D: distortion (default
            none).
        R: rectification rotation (default identity). header: copied (stamp, frame_id).
        msg_cls: None = rclpy sensor_msgs.msg.CameraInfo, or a rosbags typestore class.
    Binning is written as 0 and ROI as all zeros (the message describes the full output image).

    Raises:
        ValueError: K/P shape or fx/fy invalid, or a non-positive size.
    """
    K = check_intrinsics_np(K, 'K')
    if K.shape != (3, 3):
        raise ValueError(f'K shape={K.shape} must be 3x3')
    P = (
        np.concatenate([K, np.zeros((3, 1))], axis=1)
        if P is None
        else np.asarray(P, dtype=np.float64)
    )
    if P.shape != (3, 4):
        raise ValueError(f'P shape={P.shape} must be 3x4')
    if int(width) <= 0 or int(height) <= 0:
        raise ValueError(f'CameraInfo size width={width} height={height} must be positive')
    cls = msg_cls or rclpy_cls('sensor_msgs/msg/CameraInfo')
    if is_rosbags_cls(cls):
        roi_cls = getattr(sys.modules[cls.__module__], 'sensor_msgs__msg__RegionOfInterest')
    else:
        roi_cls = rclpy_cls('sensor_msgs/msg/RegionOfInterest')
    roi = roi_cls(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False)
    return build(
        cls,
        header=convert_header(header, cls),
        height=int(height),
        width=int(width),
        distortion_model=distortion_model,
        d=float64_field(np.zeros(0) if D is None else D, cls),
        k=float64_field(K, cls),
        r=float64_field(np.eye(3) if R is None else R, cls),
        p=float64_field(P, cls),
        binning_x=0,
        binning_y=0,
        roi=roi,
    )


def camera_info_for_output(
    intr: Intrinsics, width: int, height: int, header: Any = None, msg_cls: type | None = None
) -> Any:
    """CameraInfo for an output image of width×height made from the image ``intr`` describes (C18).

    K and P are scaled by sx = width/intr.width, sy = height/intr.height; D, R and the distortion
    model are copied; the header (stamp, frame_id) is copied from ``header``.
    """
    out = (
        intr.resized(width, height)
        if (int(width), int(height)) != (intr.width, intr.height)
        else intr
    )
    return make_camera_info(
        out.K,
        out.width,
        out.height,
        header=header,
        msg_cls=msg_cls,
        P=out.P,
        D=out.D,
        R=out.R,
        distortion_model=out.distortion_model or 'plumb_bob',
    )
