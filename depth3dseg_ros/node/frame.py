"""Per-frame rules of ``depth3dseg_node`` as pure functions (issue 16): no rclpy, no rosbags.

As depth_image_proc keeps its arithmetic in conversions.hpp, the node only decodes, calls, converts
and publishes. One pass down and one up, K scaled once per output size:

1. node: decode (ros.image / ros.compressed); CameraInfo -> :class:`Intrinsics` of the received
   image (ros.camera_info: K or P, binning and ROI applied; malformed values raise there);
2. :func:`plan_input` (here): what geometry the frame may use (issue 14, "Inputs"): none without
   CameraInfo, with degenerate intrinsics (:func:`intrinsics_problem`) or when the image size is
   not the size its CameraInfo describes; with a non-zero D, rectification maps (node/rectify.py
   :class:`Rectifier`, as image_proc) or a refusal, by the ``distortion`` parameter.
   ``InputPlan.prepare`` rectifies the image;
3. ``Segmenter.infer(rgb, plan.K)`` (core.inference): network-size result, its own K scaled once;
4. :func:`frame_outputs` (here): the ``max_depth`` cut, the nearest resize to the camera size, the
   camera model of the output images and the organized cloud (model points or back-projection of
   the published depth with the published K, core.geometry M2);
5. node: ros converters (make_camera_info, create_cloud, cv2_to_imgmsg) and publish.

What needs no geometry (labels from the 2D head, overlay, mask, depth) is always published; a
problem only drops what needs K (camera_info where K is untrustworthy, the cloud, the 3D branch)
and is returned as a :class:`Problem` for the node to log (throttled, repeated while it lasts).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import cv2
import numpy as np

from depth3dseg_ros.core.depth import depth_to_meters, meters_to_32fc1
from depth3dseg_ros.core.geometry import backproject_np, resize_intrinsics
from depth3dseg_ros.core.imageops import resize_depth, resize_labels
from depth3dseg_ros.ros.camera_info import Intrinsics
from depth3dseg_ros.ros.sync import FAR, LATE, PASSED, STALE

from depth3dseg_ros.node.rectify import (  # noqa: F401 - re-exported (rules API)
    RECTIFIABLE,
    Rectifier,
    has_distortion,
    rectified_intrinsics,
)

DISTORTION_MODES = ('rectify', 'refuse_cloud', 'ignore')
#: plausible focal length and principal point / skew, relative to the image's larger side: fx =
#: 1e-3 px per px of width is a 179.9 degree pinhole field of view, 1e3 a 0.06 degree one
FOCAL_REL = (1e-3, 1e3)
OFFSET_REL = 1e3

#: an image that goes out with the latest CameraInfo (ros/sync.py): reason -> (group, why); the
#: node warns once per group: stamps that cannot match (stale, far) and single CameraInfos missing
#: (passed, late)
LATEST_WARNINGS = {
    STALE: (
        'unmatchable',
        'CameraInfo stamps stay behind the image stamps by more than sync_slop (constant, '
        'unset or offset stamps?)',
    ),
    FAR: (
        'unmatchable',
        'the image stamp is far from every CameraInfo stamp (unset or old CameraInfo '
        'stamps, or an image stamped in the future or reset to the past)',
    ),
    PASSED: (
        'missing',
        'no CameraInfo within sync_slop of the image stamp, a newer one has arrived '
        '(lost CameraInfo?)',
    ),
    LATE: ('missing', "the next image arrived before this image's CameraInfo"),
}


@dataclass(frozen=True)
class Problem:
    """Why a frame goes out without (some) geometry. ``key``: throttling key ('intrinsics', 'size',
    'distortion'); ``text``: the log line, naming the field and value or both sizes."""

    key: str
    text: str


def intrinsics_problem(
    K: np.ndarray, width: int, height: int, name: str = 'CameraInfo.k'
) -> str | None:
    """None when the 3×3 (or 3×4) ``K`` of a ``width``×``height`` image is plausible, else the
    reason.

    Plausible: finite; fx, fy within ``FOCAL_REL`` × max(width, height) pixels; |cx|, |cy|, |skew|
    at most ``OFFSET_REL`` × max(width, height). Catches what core.geometry.check_intrinsics_np
    lets through and that makes the arithmetic overflow or underflow (fx = 5e-324, entries of
    1e308). The text names the field and value (after binning and ROI), e.g.
    ``CameraInfo.k fx=5e-324 is not a plausible focal length for a 80x60 image (0.08 .. 80000
    px)``.
    """
    K = np.asarray(K, np.float64)
    if not np.all(np.isfinite(K)):
        return f'{name} has non-finite entries: {K.tolist()}'
    size = float(max(int(width), int(height), 1))
    lo, hi = FOCAL_REL[0] * size, FOCAL_REL[1] * size
    for label, v in (('fx', float(K[0, 0])), ('fy', float(K[1, 1]))):
        if not lo <= v <= hi:
            return (
                f'{name} {label}={v!r} is not a plausible focal length for a {width}x{height} '
                f'image ({lo:g} .. {hi:g} px)'
            )
    for label, v in (('cx', float(K[0, 2])), ('cy', float(K[1, 2])), ('skew', float(K[0, 1]))):
        if not abs(v) <= OFFSET_REL * size:
            return (
                f'{name} {label}={v!r} is not plausible for a {width}x{height} image '
                f'(|{label}| > {OFFSET_REL * size:g} px)'
            )
    return None


@dataclass
class InputPlan:
    """What one frame may do with geometry (:func:`plan_input`).

    K: 3×3 float64 intrinsics of the image given to the network (the rectified one when ``maps``),
    or None (no 3D branch: labels from the 2D head). camera: model of that image at its size, the
    source of every output camera_info (None: no camera_info published). cloud: a cloud may be
    built.
    maps: rectification maps for ``prepare``, or None. problems: to log (throttled, by key).
    """

    K: np.ndarray | None = None
    camera: Intrinsics | None = None
    cloud: bool = False
    maps: tuple[np.ndarray, np.ndarray] | None = None
    problems: list[Problem] = field(default_factory=list)

    def prepare(self, rgb: np.ndarray) -> np.ndarray:
        """The network input: ``rgb`` (H×W×3 uint8) rectified with ``maps`` (cv2.remap, bilinear,
        black outside the raw image), or ``rgb`` itself."""
        if self.maps is None:
            return rgb
        return cv2.remap(
            rgb, self.maps[0], self.maps[1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT
        )

    def prepare_depth(self, depth: np.ndarray) -> np.ndarray:
        """A depth image registered to the raw colour image (H×W float32 metres, NaN = no data)
        rectified with the same ``maps``, nearest neighbour (no blended depth at edges, C09; NaN
        outside)."""
        if self.maps is None:
            return depth
        return cv2.remap(
            depth,
            self.maps[0],
            self.maps[1],
            cv2.INTER_NEAREST,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=float('nan'),
        )


def registered_depth(
    raw: np.ndarray, encoding: str, image_wh: tuple[int, int], plan: InputPlan
) -> tuple[np.ndarray | None, Problem | None]:
    """Measured depth for the 3D branch (issue 12): a depth image registered to the colour image,
    as (H×W float32 metres with NaN = no data, rectified like the colour image; None) or (None,
    Problem).

    Args: raw: the depth pixels (ros.image.imgmsg_to_cv2), encoding: its ROS encoding (16UC1 mm,
    32FC1 m, …, core.depth.depth_to_meters), image_wh: (width, height) of the decoded colour image,
    plan: the frame's InputPlan. A frame without geometry (plan.K None) takes no measured depth.
    """
    if plan.K is None:
        return None, None
    try:
        depth = depth_to_meters(raw, encoding)
    except ValueError as err:
        return None, Problem('depth', f'ignoring depth image: {err}')
    if depth.shape != (image_wh[1], image_wh[0]):
        return None, Problem(
            'depth_size',
            f'depth image {depth.shape[1]}x{depth.shape[0]} is not registered to '
            f'the {image_wh[0]}x{image_wh[1]} colour image: cloud from the '
            'predicted depth',
        )
    return plan.prepare_depth(depth), None


def plan_input(
    intr: Intrinsics | None,
    image_wh: tuple[int, int],
    distortion: str = 'rectify',
    rectifier: Rectifier | None = None,
) -> InputPlan:
    """The geometry rules for one frame (issue 14, "Inputs"), first match wins.

    Args:
        intr: intrinsics from the frame's CameraInfo (ros.camera_info.intrinsics_from_camera_info),
            or None (no CameraInfo, or one refused there).
        image_wh: (width, height) of the decoded image.
        distortion: 'rectify' | 'refuse_cloud' | 'ignore' (node parameter ``distortion``).
        rectifier: map cache for 'rectify' (a fresh one when None: no caching).
    Rules:
        * no intrinsics: no geometry, no problem (the node warns about the missing CameraInfo);
        * implausible K (:func:`intrinsics_problem`): no geometry, problem 'intrinsics';
        * image size != the size the CameraInfo describes (after binning and ROI): no geometry, K
          not guessed by rescaling, problem 'size' naming both sizes;
        * non-zero D (raw K): 'rectify' -> maps, network K = P[:, :3], outputs described with D = 0
          (:func:`rectified_intrinsics`; an implausible P or an unknown model -> as
          'refuse_cloud'); 'refuse_cloud' -> no 3D branch, no cloud, camera_info with the
          CameraInfo's D, problem 'distortion'; 'ignore' -> pinhole K (the behaviour before issue
          14);
        * otherwise: K and the cloud; a rectified input (``use_rectified``) is described with D =
          0 and R = identity, like a rectified output.
    Raises:
        ValueError: ``distortion`` not one of ``DISTORTION_MODES``.
    """
    if distortion not in DISTORTION_MODES:
        raise ValueError(f'distortion={distortion!r} is not one of {list(DISTORTION_MODES)}')
    if intr is None:
        return InputPlan()
    why = intrinsics_problem(
        intr.K, intr.width, intr.height, 'CameraInfo.p' if intr.rectified else 'CameraInfo.k'
    )
    if why:
        return InputPlan(
            problems=[
                Problem(
                    'intrinsics',
                    f'{why}: publishing labels (2D head), overlay, mask and depth '
                    'without camera_info, no cloud',
                )
            ]
        )
    w, h = int(image_wh[0]), int(image_wh[1])
    if (intr.width, intr.height) != (w, h):
        return InputPlan(
            problems=[
                Problem(
                    'size',
                    (
                        f'image is {w}x{h} but its CameraInfo describes '
                        f'{intr.width}x{intr.height} (after binning and '
                        'ROI): K not rescaled; publishing labels (2D head), overlay, mask and '
                        'depth without camera_info, no cloud'
                    ),
                )
            ]
        )
    if not has_distortion(intr):
        cam = (  # a rectified image: no distortion, no rectifying rotation (as after 'rectify')
            replace(intr, D=np.zeros(5), distortion_model='plumb_bob', R=np.eye(3))
            if intr.rectified
            else intr
        )
        return InputPlan(K=intr.K, camera=cam, cloud=True)
    if distortion == 'ignore':
        return InputPlan(K=intr.K, camera=intr, cloud=True)
    refuse = (
        f'CameraInfo.d={np.asarray(intr.D).tolist()} ({intr.distortion_model or "unnamed model"}) '
        'is not zero'
    )
    if distortion == 'rectify':
        rect = rectified_intrinsics(intr)
        why = intrinsics_problem(rect.K, w, h, 'CameraInfo.p')
        if why is None:
            try:
                maps = (rectifier or Rectifier()).maps(intr)
                return InputPlan(K=rect.K, camera=rect, cloud=True, maps=maps)
            except ValueError as err:
                why = str(err)
        refuse += f' and cannot be rectified ({why})'
    else:
        refuse += ' (distortion: refuse_cloud)'
    return InputPlan(
        camera=intr,
        problems=[
            Problem(
                'distortion',
                (
                    f'{refuse}: the pinhole K does not describe this image; publishing labels (2D '
                    'head), overlay, mask and depth, no cloud (distortion: rectify undistorts the '
                    'input)'
                ),
            )
        ],
    )


@dataclass
class FrameOutputs:
    """One frame's outputs at the output size (h, w) (:func:`frame_outputs`).

    labels: (h, w) uint8/uint16 class ids. depth: (h, w) float32 metres, NaN = no data (beyond
    max_depth too). confidence: (h, w) float32. rgb: (h, w, 3) uint8, the image the labels belong
    to.
    camera: model of these images (K, P, D, R at (w, h)) for their camera_info, or None. xyz: (h,
    w, 3) float32 organized cloud, optical frame, metres, NaN where depth is no data, or None (no
    cloud).
    """

    labels: np.ndarray
    depth: np.ndarray
    confidence: np.ndarray
    rgb: np.ndarray
    camera: Intrinsics | None
    xyz: np.ndarray | None


def output_camera(
    plan: InputPlan, res_K: np.ndarray | None, out_wh: tuple[int, int]
) -> Intrinsics | None:
    """Model of the output images at ``out_wh``: the input's (``plan.camera``) at its own size; at
    another size K is the network's (``res_K``, the one the 3D branch used) or, without it, K
    scaled once (sx = w/W, sy = h/H, C18); P is scaled the same way; D and R are kept."""
    cam = plan.camera
    if cam is None:
        return None
    w, h = int(out_wh[0]), int(out_wh[1])
    if (cam.width, cam.height) == (w, h):
        return cam
    K = res_K if res_K is not None else resize_intrinsics(cam.K, (cam.width, cam.height), (w, h))
    return replace(
        cam,
        K=np.asarray(K, np.float64),
        P=resize_intrinsics(cam.P, (cam.width, cam.height), (w, h)),
        width=w,
        height=h,
    )


def frame_outputs(
    res: Any,
    plan: InputPlan,
    rgb: np.ndarray,
    max_depth: float,
    output_resolution: str = 'network',
    cloud: bool = True,
) -> FrameOutputs:
    """The output arrays and their camera model for one inference result (issue 16).

    Args:
        res: core.inference.InferenceResult (labels, confidence, depth, K, points, rgb at the
            network size).
        plan: this frame's :class:`InputPlan`.
        rgb: the network's input image at the camera size (after ``plan.prepare``), H×W×3 uint8.
        max_depth: metres; depth beyond it (and NaN) is no data in depth and cloud.
        output_resolution: 'network' (outputs at the network size) or 'camera' (labels nearest,
            depth and confidence NaN-safe nearest, resized to H×W; the image is ``rgb``).
        cloud: a cloud is wanted (``publish_points``, and with ``lazy_outputs`` a ``~/points``
            subscriber: node/outputs.py ``wanted_outputs``); built only when ``plan.cloud`` and a
            camera model.
    The cloud: at the network size the model's points (back-projection of this depth with
    ``res.K``, M9), masked by the max_depth cut; otherwise core.geometry.backproject_np(depth,
    camera K) of the published depth (depth_image_proc's point_cloud_xyz rule).
    """
    labels, conf, rgb_out = res.labels, res.confidence, res.rgb
    depth = meters_to_32fc1(res.depth)  # NaN where not finite and > 0 (C09: 0 is no data)
    depth[~(depth <= max_depth)] = np.nan  # beyond max_depth (and NaN) = no data
    nh, nw = labels.shape
    h, w = rgb.shape[:2]
    if output_resolution == 'camera' and (nw, nh) != (w, h):
        labels, depth = resize_labels(labels, (w, h)), resize_depth(depth, (w, h))
        conf, rgb_out = resize_depth(np.asarray(conf, np.float32), (w, h)), rgb
    oh, ow = labels.shape
    camera = output_camera(plan, res.K, (ow, oh))
    xyz = None
    if cloud and plan.cloud and camera is not None:
        pts = res.points
        if pts is not None and pts.shape[:2] == depth.shape:
            # NaN where the published depth has no data; a copy only when some point goes
            # (np.where over the whole H×W×3 cloud cost ~0.9 ms a frame at 320×240)
            bad = ~np.isfinite(depth)
            xyz = pts
            if bad.any():
                xyz = np.array(pts, np.float32)
                xyz[bad] = np.nan
        else:
            xyz = backproject_np(depth, camera.K)
    return FrameOutputs(
        labels=labels, depth=depth, confidence=conf, rgb=rgb_out, camera=camera, xyz=xyz
    )
