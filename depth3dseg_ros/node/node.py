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
- ``~/labels/image/compressed`` (PNG), ``~/overlay/image/compressed`` (JPEG),
  ``~/depth/image/compressedDepth`` (compressed_depth_image_transport): sensor_msgs/
  CompressedImage, each behind ``publish_<output>_compressed`` (off by default; node/outputs.py)
- ``~/points``: organized PointCloud2 x, y, z, rgb (camera or class colour, ``cloud_rgb``),
  label [, confidence] (M9)
- ``~/classes``: std_msgs/String, JSON of the output classes (ClassPalette.to_dict()),
  transient-local, at start-up and when ``class_palette_file`` changes

Label ids, overlay and mask colours, the cloud's label and class colour and ~/classes follow
``class_palette_file`` (core/palette.py: colours and groupings; '' = the model's classes).
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

Parameters (node/params.py; run-time changes in node/runtime.py): a run-time change
(``set_parameters``) is checked with the start-up rules and applied from the next frame, or
refused with the reason (C44); start-up-only parameters are read-only. Input callbacks and
decoding are in node/inputs.py, the per-frame messages in node/outputs.py. An image whose
CameraInfo cannot be matched by stamp goes out at once with the
latest CameraInfo, with one warning per kind of mismatch (ros/sync.py, issue 14).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy._rclpy_pybind11 import RCLError
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, CompressedImage, Image, PointCloud2
from std_msgs.msg import String

from depth3dseg_ros.core.imageops import colorize_labels
from depth3dseg_ros.core.palette import ClassPalette, load_palette
from depth3dseg_ros.node.diagnostics import (
    AgeFilteredStats,
    CameraSlot,
    Counts,
    Health,
    format_value,
)
from depth3dseg_ros.node.frame import Rectifier, frame_outputs, plan_input
from depth3dseg_ros.node.inputs import InputHandling
from depth3dseg_ros.node.outputs import cloud_colors, image_messages, publisher_specs
from depth3dseg_ros.node.params import NodeParams, declare_and_read
from depth3dseg_ros.node.runtime import RuntimeParameters
from depth3dseg_ros.node.worker import Worker, summary_line
from depth3dseg_ros.ros.camera_info import camera_info_for_output
from depth3dseg_ros.ros.pointcloud2 import create_cloud
from depth3dseg_ros.ros.sync import Pair, StampBuffer, StampSync, header_stamp_ns

from depth3dseg_ros.node.wiring import (  # noqa: F401 - OUTPUT_TOPICS re-exported (node API)
    COMPRESSED_TOPICS,
    OUTPUT_TOPICS,
    default_segmenter,
    key_topic,
    make_qos,
    resolve_model_file,
)


class Depth3DSegNode(InputHandling, RuntimeParameters, Node):
    """The rclpy node. ``segmenter_factory(params, model_file)`` builds the model (default:
    Segmenter; another object needs its ``classes``, ``infer`` and ``warmup``).

    Raises (from the constructor, start-up stops):
        ValueError: a bad parameter value (named, with the allowed values) or class palette file
            (core/palette.py: file, field and value named).
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
        self.classes = self.seg.classes  # the model's; the outputs use self.palette's
        self.palette: ClassPalette = load_palette(p.class_palette_file, self.classes)
        warm_ms = self._warm_up()
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
        self._classes_pub = classes_pub
        self._publish_classes()

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
        # run-time parameter changes (C44, node/runtime.py): checked, applied from the next frame
        self._install_parameter_callbacks()
        self.worker = Worker(self.slot, self._process, self._on_worker_error)
        self.worker.start()
        self.get_logger().info(
            f'model {model_file} ({len(self.classes)} classes, warm-up {warm_ms:.0f} ms), '
            f'label_source={p.label_source}, '
            f'input {self.resolve_topic_name("image")}{"/compressed" if p.use_compressed else ""} '
            f'({p.input_reliability}), '
            f'outputs {sorted(self.pubs)} ({p.output_reliability}), '
            f'output_resolution={p.output_resolution}, classes {self._classes_text()}'
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
        """Create the publishers the switches in ``p`` need that do not exist yet
        (node/outputs.py ``publisher_specs``). An output switched off later keeps its publisher
        (the topic stays advertised) and publishes nothing."""
        classes = {
            'sensor_msgs/msg/Image': Image,
            'sensor_msgs/msg/CompressedImage': CompressedImage,
            'sensor_msgs/msg/CameraInfo': CameraInfo,
            'sensor_msgs/msg/PointCloud2': PointCloud2,
        }
        for key, type_name in publisher_specs(p):
            if key not in self.pubs:
                self.pubs[key] = self.create_publisher(
                    classes[type_name], key_topic(key), self._out_qos
                )

    # -- classes and palette (issue 14) ------------------------------------------------------
    def _classes_text(self) -> str:
        src = self.palette.source or "the model's"
        return f'{src} ({len(self.palette.classes)}: {", ".join(self.palette.classes.names)})'

    def _publish_classes(self) -> None:
        """``~/classes``: the output class set as JSON (transient-local: the last one stays)."""
        self._classes_pub.publish(String(data=json.dumps(self.palette.to_dict())))

    # -- run-time parameters (C44): node/runtime.py calls these ----------------------------------
    def _check_extra(self, changes: dict[str, Any]) -> str | None:
        """A new ``class_palette_file`` must load for the model's classes (its error otherwise)."""
        if 'class_palette_file' in changes:
            try:  # kept for _apply_parameters: the file applied is the one checked
                self._checked_palette = load_palette(changes['class_palette_file'], self.classes)
            except ValueError as err:
                return str(err)
        return None

    def _apply_parameters(self, old: NodeParams, new: NodeParams) -> None:
        """Publishers the new switches need, sync_slop, diagnostics_period, and a new palette
        (loaded, swapped in, ``~/classes`` published again)."""
        self._ensure_publishers(new)
        if new.sync_slop != old.sync_slop:
            self.sync.set_slop(new.sync_slop)
        if new.diagnostics_period != old.diagnostics_period:
            self._diag_timer.timer_period_ns = int(round(new.diagnostics_period * 1e9))
        if new.class_palette_file != old.class_palette_file:
            checked = getattr(self, '_checked_palette', None)
            self.palette = (
                checked
                if checked is not None and checked.source == new.class_palette_file
                else load_palette(new.class_palette_file, self.classes)
            )
            self._publish_classes()
            self.get_logger().info(f'classes now {self._classes_text()}')

    def _on_worker_error(self, err: BaseException) -> None:
        self.get_logger().error(
            f'frame failed: {type(err).__name__}: {err}', throttle_duration_sec=5.0
        )

    # -- the worker: call the per-frame rules (node/frame.py), convert, publish ------------
    def _process(self, pair: Pair) -> None:
        # one parameter and palette snapshot per frame (C44: no torn update)
        p, palette, msg = self.p, self.palette, pair.image
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
        labels = palette.relabel(out.labels)  # output ids (class_palette_file groups)
        info_out = (
            None
            if out.camera is None
            else camera_info_for_output(
                out.camera, out.camera.width, out.camera.height, msg.header
            )
        )
        cache: dict[str, np.ndarray] = {}

        def mask() -> np.ndarray:  # class colours, shared by ~/mask and a class-coloured cloud
            if 'mask' not in cache:
                cache['mask'] = colorize_labels(labels, palette.colors)
            return cache['mask']

        cloud = None
        if out.xyz is not None:
            cloud = create_cloud(
                msg.header,
                out.xyz,
                cloud_colors(p, out.rgb, mask),
                labels,
                confidence=out.confidence if p.cloud_confidence else None,
                organized=p.cloud_organized,
                stride=p.cloud_stride,
                label_dtype=np.uint16 if labels.dtype == np.uint16 else np.uint32,
            )
        t3 = time.perf_counter()
        for key, m in image_messages(
            p, msg.header, labels, out.depth, out.rgb, info_out, palette, self.pubs, mask
        ):
            self._publish(key, m)
        if cloud is not None and p.publish_points:
            self._publish('points', cloud)
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
