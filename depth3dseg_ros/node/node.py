"""``depth3dseg_node``: RGB (+ CameraInfo) -> label image, overlay, class-colour mask, depth and
a labelled PointCloud2.

Topics (relative names, remap them; outputs under the node's private namespace ``~``):

- ``image`` (or ``<image>/compressed``): sensor_msgs/Image (CompressedImage with
  ``use_compressed``)
- ``camera_info``: sensor_msgs/CameraInfo, paired by stamp (ros.sync.StampSync)
- ``depth`` (with ``use_measured_depth``): a depth image registered to ``image`` (issue 12)
- ``~/labels/image`` + ``~/labels/camera_info``: mono8 class ids (16UC1 beyond 256 classes)
- ``~/overlay/image`` + ``~/overlay/camera_info``: rgb8, ``overlay_alpha`` label colours over the
  image
- ``~/mask/image`` + ``~/mask/camera_info``: rgb8, each pixel its label's class colour (no
  blending)
- ``~/depth/image`` + ``~/depth/camera_info``: 32FC1 metres, NaN = no data (16UC1 mm, 0 = no data,
  by parameter)
- ``~/points``: organized PointCloud2 x, y, z, rgb, label [, confidence] (M9)
- ``~/classes``: std_msgs/String, JSON ClassSet.to_dict(), transient-local, once
- ``/diagnostics``: diagnostic_msgs/DiagnosticArray: rate, stage timings, drops

Each image's camera_info sits beside it, ``<namespace of the image>/camera_info``, where
image_transport, image_pipeline (depth_image_proc, image_proc) and RViz's Camera display look for
it (issue 14; ``OUTPUT_TOPICS``).

Every output carries the input image's header (stamp and frame_id); each image's camera_info
describes that image's size (K scaled once, C18). Per frame (METHOD M7-M9): decode (ros.image /
ros.compressed; over ``max_image_pixels`` refused first) -> intrinsics (ros.camera_info) -> input
rules (node/frame.py: degenerate K, size mismatch, distortion) -> ``Segmenter.infer`` -> output
rules (node/frame.py: max_depth, resize, camera model, cloud) -> ros converters -> publish.

Robustness (docs/cases.md): malformed images are dropped with a throttled error naming the field,
0x0 images skipped with a warning (C04); callbacks and the worker never let an exception out; QoS
from parameters, best-effort subscriptions and reliable publishers by default (C24); ``RCLError``
from ``publish`` is caught and counted (C25); subscriptions keep only the newest frame and a worker
thread processes the newest one, counting drops (C26).

Parameters (node/params.py): a run-time change (``set_parameters``) is checked with the start-up
rules and applied from the next frame, or refused with the reason (C44); start-up-only parameters
are read-only. An image whose CameraInfo cannot be matched by stamp goes out at once with the
latest CameraInfo, with one warning per kind of mismatch (ros/sync.py, issue 14).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import SetParametersResult
from rclpy._rclpy_pybind11 import RCLError
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import CameraInfo, CompressedImage, Image, PointCloud2
from std_msgs.msg import String

from depth3dseg_ros.core.depth import meters_to_16uc1
from depth3dseg_ros.core.imageops import colorize_labels, overlay
from depth3dseg_ros.node.diagnostics import (
    AgeFilteredStats,
    CameraSlot,
    Counts,
    Health,
    format_value,
)
from depth3dseg_ros.node.frame import (
    LATEST_WARNINGS,
    Rectifier,
    frame_outputs,
    plan_input,
    registered_depth,
)
from depth3dseg_ros.node.params import (
    SPEC_BY_NAME,
    SPECS,
    NodeParams,
    declare_and_read,
    unknown_names,
    updated,
    validate,
)
from depth3dseg_ros.node.worker import Worker, summary_line
from depth3dseg_ros.ros.camera_info import (
    Intrinsics,
    camera_info_for_output,
    intrinsics_from_camera_info,
)
from depth3dseg_ros.ros.compressed import ImageTooLargeError, check_pixel_limit, compressed_to_rgb
from depth3dseg_ros.ros.image import (
    EmptyImageError,
    cv2_to_imgmsg,
    describe,
    imgmsg_to_cv2,
    to_rgb,
)
from depth3dseg_ros.ros.pointcloud2 import create_cloud
from depth3dseg_ros.ros.sync import LATEST, NONE, Pair, StampBuffer, StampSync, header_stamp_ns

from depth3dseg_ros.node.wiring import (  # noqa: F401 - OUTPUT_TOPICS re-exported (node API)
    OUTPUT_TOPICS,
    OUTPUTS,
    default_segmenter,
    image_topic,
    info_topic,
    make_qos,
    resolve_model_file,
)


class Depth3DSegNode(Node):
    """The rclpy node. ``segmenter_factory(params, model_file)`` builds the model (default:
    Segmenter; another object needs its ``classes``, ``infer`` and ``warmup``).

    Raises (from the constructor, start-up stops):
        ValueError: a bad parameter value (named, with the allowed values).
        FileNotFoundError: the model file is missing.
    """

    def __init__(
        self,
        segmenter_factory: Callable[[NodeParams, str], Any] | None = None,
        node_name: str = 'depth3dseg',
        **kwargs: Any,
    ) -> None:
        super().__init__(node_name, **kwargs)
        self._warn_unknown_parameters()
        self.p = p = declare_and_read(self)
        model_file = resolve_model_file(p.model_file)
        self.seg = (segmenter_factory or default_segmenter)(p, model_file)
        self.classes = self.seg.classes
        warm_ms = self._warm_up()
        self.palette = np.asarray(self.classes.colors, np.uint8)
        self.sync = StampSync(slop=p.sync_slop, queue_size=3)
        self.slot = CameraSlot()  # LatestSlot + time and frame_id of the latest frame
        self.stats = AgeFilteredStats()  # StageStats without implausible frame ages (stamp 0)
        self._health = Health(time.monotonic())  # windowed rates and levels (node/diagnostics.py)
        self.rectifier = Rectifier()  # undistort maps cached per CameraInfo (issue 14)
        self._last_error: dict[str, float] = {}
        self._warned: set[str] = set()

        self._out_qos = make_qos(p.output_reliability, p.output_depth)
        self.pubs: dict[str, Any] = {}
        self._ensure_publishers(p)
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        classes_pub = self.create_publisher(
            String, '~/classes', make_qos('reliable', 1, transient_local=True)
        )
        classes_pub.publish(String(data=json.dumps(self.classes.to_dict())))
        self._classes_pub = classes_pub

        in_qos = make_qos(p.input_reliability, p.input_depth)
        if p.use_compressed:  # like image_transport: <image topic after remapping>/compressed
            self.create_subscription(
                CompressedImage,
                self.resolve_topic_name('image') + '/compressed',
                self._on_image,
                in_qos,
            )
        else:
            self.create_subscription(Image, 'image', self._on_image, in_qos)
        self._info_topic = self.resolve_topic_name('camera_info')
        self._depths = None  # measured depth registered to the colour image (issue 12)
        if p.use_measured_depth:
            self._depths = StampBuffer(8)
            self.create_subscription(
                Image,
                'depth',
                self._depths.add,
                make_qos(p.input_reliability, max(p.input_depth, 5)),
            )
        self.create_subscription(
            CameraInfo,
            'camera_info',
            self._on_info,
            make_qos(p.input_reliability, max(p.input_depth, 5)),
        )
        # steady clock: a /clock jump back (looped bag, use_sim_time) must not stop it (issue 14)
        self._diag_timer = self.create_timer(
            p.diagnostics_period,
            self._on_diagnostics,
            clock=Clock(clock_type=ClockType.STEADY_TIME),
        )
        # run-time parameter changes (C44): checked like start-up, applied from the next frame
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.add_post_set_parameters_callback(self._on_parameters_set)
        self.worker = Worker(self.slot, self._process, self._on_worker_error)
        self.worker.start()
        self.get_logger().info(
            f'model {model_file} ({len(self.classes)} classes, warm-up {warm_ms:.0f} ms), '
            f'label_source={p.label_source}, '
            f'input {self.resolve_topic_name("image")}{"/compressed" if p.use_compressed else ""} '
            f'({p.input_reliability}), '
            f'outputs {sorted(self.pubs)} ({p.output_reliability}), '
            f'output_resolution={p.output_resolution}'
        )

    def _warn_unknown_parameters(self) -> None:
        """Log a warning for each parameter given to this node (``-p``, ``--params-file``) that it
        does not have, naming the closest known name: rclpy ignores such overrides silently, so a
        misspelt ``-p lable_source:=2d`` would otherwise start with the default. Known:
        node/params.py and the parameters rclpy declares itself (use_sim_time, ...). Runs before
        the values are validated.
        """
        # rclpy (9.x) keeps the overrides that apply to this node, -p and params files, in this
        # dict
        given = getattr(self, '_parameter_overrides', None)
        if not isinstance(given, dict):
            self.get_logger().debug(
                'this rclpy has no Node._parameter_overrides: unknown names not checked'
            )
            return
        known = {s.name for s in SPECS} | set(self.list_parameters([], 0).names)
        for name, close in unknown_names(given, known):
            hint = f"; did you mean '{close}'?" if close else ''
            self.get_logger().warning(
                f"unknown parameter '{name}' is ignored{hint} "
                f'(depth3dseg_node --help lists the parameters)'
            )

    def _warm_up(self) -> float:
        """One inference with and one without K on a grey 640x480 image, before any topic exists.

        The first torch call of a process is slow (thread pools, kernel selection: seconds on a
        small CPU); doing it here keeps it out of the first camera frame's latency (C26). Returns
        ms. ``Segmenter.warmup`` runs the no-K path without logging or using up its once-only "no K
        given" warning, which is kept for a camera that really sends no CameraInfo.
        """
        t0 = time.perf_counter()
        for with_k in (True, False):
            self.seg.warmup(
                runs=1, with_k=with_k, label_source=self.p.label_source, image_size=(640, 480)
            )
        return (time.perf_counter() - t0) * 1e3

    def _ensure_publishers(self, p: NodeParams) -> None:
        """Create the publishers of the outputs ``p`` switches on that do not exist yet. An output
        switched off later keeps its publisher (the topic stays advertised) and publishes
        nothing."""
        on = {name: getattr(p, f'publish_{name}') for name in OUTPUTS}
        for name in OUTPUTS:
            if not on[name] or name in self.pubs:
                continue
            if name == 'points':
                self.pubs['points'] = self.create_publisher(PointCloud2, '~/points', self._out_qos)
            else:
                self.pubs[name] = self.create_publisher(Image, image_topic(name), self._out_qos)
                self.pubs[name + '/camera_info'] = self.create_publisher(
                    CameraInfo, info_topic(name), self._out_qos
                )

    # -- run-time parameters (docs/cases.md C44) -----------------------------------------------
    def _check_parameters(self, parameters: list[Parameter]) -> SetParametersResult:
        """Refuse (``successful=False``, reason) a change start-up validation would refuse, with
        the same message, or one to a start-up-only parameter ("... read at start-up: restart the
        node
        ..."); parameters not in node/params.py (use_sim_time, ...) are left to rclpy."""
        changes = {q.name: q.value for q in parameters if q.name in SPEC_BY_NAME}
        if not changes:
            return SetParametersResult(successful=True)
        try:
            updated(self.p, changes)
        except ValueError as err:
            return SetParametersResult(successful=False, reason=str(err))
        return SetParametersResult(successful=True)

    def set_parameters_atomically(self, parameter_list: list[Parameter]) -> SetParametersResult:
        """rclpy's, after ``_check_parameters``: so a refusal carries this node's reason (rclpy's
        own read-only and range checks, which run before any on-set callback, would word it
        differently). The ``~/set_parameters`` and ``~/set_parameters_atomically`` services call
        this method."""
        result = self._check_parameters(list(parameter_list))
        return (
            result if not result.successful else super().set_parameters_atomically(parameter_list)
        )

    def set_parameters(self, parameter_list: list[Parameter]) -> list[SetParametersResult]:
        """One ``set_parameters_atomically`` per parameter, in order (rclpy's semantics)."""
        return [self.set_parameters_atomically([q]) for q in parameter_list]

    def _on_set_parameters(self, parameters: list[Parameter]) -> SetParametersResult:
        """On-set callback: the same check, for any path that reaches rclpy's setter directly."""
        return self._check_parameters(parameters)

    def _on_parameters_set(self, parameters: list[Parameter]) -> None:
        """Post-set callback (executor thread): build the new ``NodeParams`` from the stored values
        and swap it in with one assignment; the worker reads ``self.p`` once per frame, so each
        frame sees either all old or all new values (no torn update). Publishers an output now
        needs are created first; sync_slop and diagnostics_period are applied to the synchroniser
        and the timer."""
        if not any(q.name in SPEC_BY_NAME for q in parameters):
            return
        old = self.p
        try:
            new = validate({s.name: self.get_parameter(s.name).value for s in SPECS})
            self._ensure_publishers(new)
            if new.sync_slop != old.sync_slop:
                self.sync.set_slop(new.sync_slop)
            if new.diagnostics_period != old.diagnostics_period:
                self._diag_timer.timer_period_ns = int(round(new.diagnostics_period * 1e9))
        except Exception as err:  # noqa: BLE001 - checked before; never let a callback raise
            self.get_logger().error(f'parameter change not applied: {err}')
            return
        self.p = new
        changed = [
            f'{s.name}: {getattr(old, s.name)!r} -> {getattr(new, s.name)!r}'
            for s in SPECS
            if getattr(old, s.name) != getattr(new, s.name)
        ]
        if changed:
            self.get_logger().info(
                f'parameters changed ({", ".join(changed)}): applied from the next frame'
            )

    # -- callbacks: cheap, never raise --------------------------------------------------------
    def _on_image(self, msg: Any) -> None:
        try:
            # until the first CameraInfo arrives, wait for it only if someone publishes camera_info
            expected = (
                self.sync.latest_info is None and self.count_publishers(self._info_topic) > 0
            )
            self._to_slot(self.sync.add_image(msg, info_expected=expected))
        except Exception as err:  # noqa: BLE001 - exceptions never escape callbacks (C04)
            self.get_logger().error(f'image callback: {err}', throttle_duration_sec=5.0)

    def _on_info(self, msg: Any) -> None:
        try:
            self._to_slot(self.sync.add_info(msg))
        except Exception as err:  # noqa: BLE001
            self.get_logger().error(f'camera_info callback: {err}', throttle_duration_sec=5.0)

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

    def _on_worker_error(self, err: BaseException) -> None:
        self.get_logger().error(
            f'frame failed: {type(err).__name__}: {err}', throttle_duration_sec=5.0
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
            self.get_logger().warning(
                f'no depth image within sync_slop={p.sync_slop} s of the colour '
                'image: cloud from the predicted depth',
                throttle_duration_sec=10.0,
            )
            return None
        try:
            raw = imgmsg_to_cv2(dmsg)
        except ValueError as err:
            self._error_throttled('depth', f'ignoring depth image [{describe(dmsg)}]: {err}')
            return None
        depth, problem = registered_depth(raw, dmsg.encoding, (rgb.shape[1], rgb.shape[0]), plan)
        if problem is not None:
            self._error_throttled(problem.key, problem.text)
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

    def _process(self, pair: Pair) -> None:
        p, msg = self.p, pair.image  # one parameter snapshot per frame (C44: no torn update)
        t0 = time.perf_counter()
        rgb = self._decode(msg, p)
        if rgb is None:
            return
        plan = plan_input(
            self._intrinsics(pair.info, p),
            (rgb.shape[1], rgb.shape[0]),
            p.distortion,
            self.rectifier,
        )
        for problem in plan.problems:
            self._error_throttled(problem.key, problem.text)
        depth_in = self._measured_depth(msg, rgb, plan, p) if self._depths is not None else None
        rgb = plan.prepare(rgb)
        t1 = time.perf_counter()
        res = (
            self.seg.infer(rgb, plan.K, p.label_source)
            if depth_in is None
            else self.seg.infer(rgb, plan.K, p.label_source, depth=depth_in)
        )
        t2 = time.perf_counter()
        out = frame_outputs(
            res,
            plan,
            rgb,
            p.max_depth,
            p.output_resolution,
            cloud=p.publish_points and 'points' in self.pubs,
        )
        info_out = (
            None
            if out.camera is None
            else camera_info_for_output(
                out.camera, out.camera.width, out.camera.height, msg.header
            )
        )
        cloud = None
        if out.xyz is not None:
            cloud = create_cloud(
                msg.header,
                out.xyz,
                out.rgb,
                out.labels,
                confidence=out.confidence if p.cloud_confidence else None,
                organized=p.cloud_organized,
                stride=p.cloud_stride,
                label_dtype=np.uint16 if out.labels.dtype == np.uint16 else np.uint32,
            )
        t3 = time.perf_counter()
        self._publish_all(p, msg.header, out.labels, out.depth, out.rgb, info_out, cloud)
        t4 = time.perf_counter()
        age_ms = (self.get_clock().now().nanoseconds - header_stamp_ns(msg)) / 1e6
        self.stats.add(
            {
                'decode': (t1 - t0) * 1e3,
                'inference': (t2 - t1) * 1e3,
                'cloud': (t3 - t2) * 1e3,
                'publish': (t4 - t3) * 1e3,
                'total': (t4 - t0) * 1e3,
            },
            age_ms,
        )

    def _publish_all(
        self,
        p: NodeParams,
        header: Any,
        labels: np.ndarray,
        depth: np.ndarray,
        rgb: np.ndarray,
        info_out: Any,
        cloud: Any,
    ) -> None:
        images = {
            'labels': (
                p.publish_labels,
                lambda: cv2_to_imgmsg(
                    labels, 'mono8' if labels.dtype == np.uint8 else '16UC1', header
                ),
            ),
            'overlay': (
                p.publish_overlay,
                lambda: cv2_to_imgmsg(
                    overlay(rgb, labels, self.palette, p.overlay_alpha), 'rgb8', header
                ),
            ),
            'mask': (
                p.publish_mask,
                lambda: cv2_to_imgmsg(colorize_labels(labels, self.palette), 'rgb8', header),
            ),
            'depth': (
                p.publish_depth,
                lambda: (
                    cv2_to_imgmsg(meters_to_16uc1(depth), '16UC1', header)
                    if p.depth_encoding == '16UC1'
                    else cv2_to_imgmsg(depth, '32FC1', header)
                ),
            ),
        }
        for name, (on, make) in images.items():
            if on and name in self.pubs:
                self._publish(name, make())
                self._publish(name + '/camera_info', info_out)
        if cloud is not None and p.publish_points:
            self._publish('points', cloud)

    def _publish(self, name: str, msg: Any) -> None:
        if msg is None or self.slot.closed:  # shutting down: publish nothing more
            return
        try:
            self.pubs[name].publish(msg)
        except RCLError as err:  # C25: never crash on a failed publish
            self.stats.publish_errors += 1
            self.get_logger().error(
                f'publish on {self.pubs[name].topic_name} failed: {err}', throttle_duration_sec=5.0
            )

    # -- health -------------------------------------------------------------------------------
    def _on_diagnostics(self) -> None:
        """Steady-clock timer: log the summary line and publish one DiagnosticStatus
        (node/diagnostics.py:
        windowed rates, OK/WARN/ERROR, hardware_id = camera frame_id). Never raises."""
        try:
            s = self.stats.summary()
            counts = Counts(
                received=self.slot.put_count,
                processed=s['processed'],
                dropped=self.slot.dropped,
                skipped=s['skipped'],
                refused=s.get('refused', 0),
                publish_errors=s['publish_errors'],
            )
            s.update(
                age_ignored=self.stats.age_ignored,
                **{f'camera_info_{k}': v for k, v in self.sync.counts.items()},
            )
            rep = self._health.report(
                time.monotonic(), counts, self.slot.last_put, self.slot.frame_id, extra=s
            )
            line = summary_line(rep.values)
            if rep.values['rate_hz'] > 0:
                self.get_logger().info(line)
            message = line if rep.message == 'ok' else f'{rep.message}; {line}'
            status = DiagnosticStatus(
                level=bytes([rep.level]),
                name=f'{self.get_name()}: pipeline',
                message=message,
                hardware_id=rep.hardware_id,
                values=[KeyValue(key=k, value=format_value(v)) for k, v in rep.values.items()],
            )
            arr = DiagnosticArray(status=[status])
            arr.header.stamp = self.get_clock().now().to_msg()
            self.pub_diag.publish(arr)
        except Exception as err:  # noqa: BLE001
            self.get_logger().error(f'diagnostics: {err}', throttle_duration_sec=30.0)

    def destroy_node(self) -> bool:
        """Stop the worker, then destroy the node. Returns False (node left alone) when the worker
        is still inside a call after 5 s: destroying publishers under it could block; the caller
        exits."""
        if not self.worker.stop(timeout=5.0):
            return False
        super().destroy_node()
        return True
