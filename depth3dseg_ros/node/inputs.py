"""The input side of ``depth3dseg_node``, as a mixin of the node: the image and CameraInfo
callbacks (cheap, never raise: pairing by stamp in ros/sync.py, the newest-frame slot, C26) and
the worker's first steps, decoding the image (C04, max_image_pixels), reading the CameraInfo's
intrinsics and the registered measured depth, each problem logged throttled and counted, never
fatal (docs/node.md "Behaviour").
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from sensor_msgs.msg import CompressedImage, Image

from depth3dseg_ros.node.frame import LATEST_WARNINGS, registered_depth
from depth3dseg_ros.node.params import NodeParams
from depth3dseg_ros.ros.camera_info import Intrinsics, intrinsics_from_camera_info
from depth3dseg_ros.ros.compressed import ImageTooLargeError, check_pixel_limit, compressed_to_rgb
from depth3dseg_ros.ros.image import EmptyImageError, describe, imgmsg_to_cv2, to_rgb
from depth3dseg_ros.ros.sync import LATEST, NONE, Pair, header_stamp_ns


class InputHandling:
    """Mixin for the node: needs ``self.p``, ``self.sync`` (StampSync), ``self.slot``
    (CameraSlot), ``self.stats``, ``self._depths`` (StampBuffer or None) and
    ``self._measured_depth_topic()`` (node/steps), ``self._info_topic``,
    ``self._warned``, ``self._jumps_logged`` (sets) and ``self._last_error`` (dict)."""

    # -- callbacks: cheap, never raise --------------------------------------------------------
    def _on_image(self, msg: Any) -> None:
        try:
            # until the first CameraInfo arrives, wait for it only if someone publishes camera_info
            expected = (
                self.sync.latest_info is None and self.count_publishers(self._info_topic) > 0
            )
            jumps = self.sync.jumps
            self._to_slot(self.sync.add_image(msg, info_expected=expected))
            self._log_jump(jumps, 'image')
        except Exception as err:  # noqa: BLE001 - exceptions never escape callbacks (C04)
            self.get_logger().error(f'image callback: {err}', throttle_duration_sec=5.0)

    def _on_info(self, msg: Any) -> None:
        try:
            jumps = self.sync.jumps
            self._to_slot(self.sync.add_info(msg))
            self._log_jump(jumps, 'CameraInfo')
        except Exception as err:  # noqa: BLE001
            self.get_logger().error(f'camera_info callback: {err}', throttle_duration_sec=5.0)

    def _log_jump(self, jumps_before: int, which: str) -> None:
        """A line when the stamps went back (a bag played again or looped: ros/sync.py): the
        first jump of each kind (image, CameraInfo) at INFO, the next ones at DEBUG (a looped bag
        jumps on every pass; /diagnostics' time_jumps counts them)."""
        if self.sync.jumps == jumps_before:
            return
        text = (
            f'{which} stamps went back {self.sync.last_jump_ns / 1e9:.3f} s (bag played again '
            'or looped?): pairing starts again, CameraInfos stamped after that dropped'
        )
        if which in self._jumps_logged:
            self.get_logger().debug(text)
        else:
            self._jumps_logged.add(which)
            self.get_logger().info(text + ' (further jumps of this kind: DEBUG)')

    def _to_slot(self, pairs: list[Pair]) -> None:
        for pair in pairs:
            group, why = LATEST_WARNINGS.get(pair.reason, (pair.reason, pair.reason))
            if pair.how == LATEST and group not in self._warned:  # once per group
                self._warned.add(group)
                self.get_logger().warning(
                    f'{why}: image and CameraInfo stamps {pair.dt_ns / 1e6:.1f} ms apart, '
                    'sync_slop='
                    f'{self.p.sync_slop} s: using the latest CameraInfo (intrinsics are static) '
                    'without waiting'
                )
            elif pair.how == NONE and self.p.publish_points:
                self.get_logger().warning(
                    'no CameraInfo received on camera_info: publishing the images '
                    '(labels, overlay, mask, depth) without camera_info and no cloud',
                    throttle_duration_sec=10.0,
                )
            if self.slot.put(pair):
                self.get_logger().info(
                    f'model slower than the camera: {self.slot.dropped} frames dropped '
                    'so far (newest frame is processed)',
                    throttle_duration_sec=10.0,
                )

    # -- the worker: decode, call the per-frame rules (node/frame.py), convert, publish -----------
    def _decode(self, msg: Any, p: NodeParams) -> np.ndarray | None:
        """H×W×3 uint8 RGB, or None (counted and logged): empty (skipped, warning), malformed
        (skipped, error naming the field), over ``max_image_pixels`` (refused before decoding,
        issue 14)."""
        try:
            if isinstance(msg, CompressedImage):
                return compressed_to_rgb(msg, p.max_image_pixels)
            check_pixel_limit(msg.width, msg.height, p.max_image_pixels, 'Image header')
            return to_rgb(msg)
        except EmptyImageError as err:
            self.stats.skipped += 1
            self.get_logger().warning(
                f'skipping empty image ({err}): nothing published', throttle_duration_sec=5.0
            )
        except ImageTooLargeError as err:
            self.stats.refused += 1
            self._error_throttled(
                'max_image_pixels', f'refusing image: {err} (refused so far: {self.stats.refused})'
            )
        except ValueError as err:
            self.stats.skipped += 1
            what = (
                describe(msg)
                if isinstance(msg, Image)
                else f'CompressedImage format={msg.format!r}'
            )
            # throttled per kind of fault (the field named before '='), so each kind is reported
            self._error_throttled(
                str(err).split('=')[0], f'dropping malformed image [{what}]: {err}'
            )
        return None

    def _measured_depth(
        self, msg: Any, rgb: np.ndarray, plan: Any, p: NodeParams
    ) -> np.ndarray | None:
        """The frame's registered depth (node/frame.registered_depth), or None with a throttled
        log."""
        if plan.K is None:  # no geometry this frame: no cloud to build from measured depth
            return None
        dmsg = self._depths.nearest(header_stamp_ns(msg), p.sync_slop)
        if dmsg is None:
            fused = ' and no late fusion' if getattr(self.seg, 'geometry', None) else ''
            if self._depths.empty():  # nothing ever arrived: name the topic and its publishers
                topic = self._measured_depth_topic()
                n = self.count_publishers(topic)
                why = (
                    'no publisher (remap with -r depth:=TOPIC, the depth image registered to the '
                    'colour image)'
                    if n == 0
                    else f'{n} publisher(s) but nothing received (QoS, DDS transport?)'
                )
                text = f'no depth image received on {topic}: {why}'
            else:
                text = f'no depth image within sync_slop={p.sync_slop} s of the colour image'
            self.get_logger().warning(
                f'{text}: cloud from the predicted depth{fused}', throttle_duration_sec=10.0
            )
            return None
        try:
            raw = imgmsg_to_cv2(dmsg)
        except ValueError as err:
            self._error_throttled('depth', f'ignoring depth image [{describe(dmsg)}]: {err}')
            return None
        depth, problem = registered_depth(raw, dmsg.encoding, (rgb.shape[1], rgb.shape[0]), plan)
        if problem is not None:  # both messages described: sizes, encodings, steps (C20)
            colour = f'; colour {describe(msg)}' if isinstance(msg, Image) else ''
            self._error_throttled(problem.key, f'{problem.text} [depth {describe(dmsg)}{colour}]')
        return depth

    def _error_throttled(self, key: str, text: str, period: float = 5.0) -> None:
        now = time.monotonic()
        if now - self._last_error.get(key, -1e9) >= period:
            self._last_error[key] = now
            self.get_logger().error(text)

    def _intrinsics(self, info: Any, p: NodeParams) -> Intrinsics | None:
        """Intrinsics of the received image from ``info`` (K or P, binning, ROI), or None (no
        CameraInfo, or one refused: throttled error naming the field)."""
        if info is None:
            return None
        try:
            return intrinsics_from_camera_info(info, p.use_rectified)
        except ValueError as err:
            self._error_throttled(
                'camera_info',
                f'ignoring CameraInfo: {err}: publishing labels (2D head), overlay, '
                'mask and depth without camera_info, no cloud',
            )
            return None
