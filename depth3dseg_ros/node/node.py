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

Lazy outputs (``lazy_outputs``, default true): per frame only the outputs whose publishers have
subscribers are built and published (image_transport's rule, node/outputs.py ``wanted_outputs``);
``~/classes`` and ``/diagnostics`` always go out, and /diagnostics' ``outputs`` names what the
latest frame published.

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
import os
import time
from typing import Any, Callable

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy._rclpy_pybind11 import RCLError
from rclpy.node import Node
from std_msgs.msg import String

from depth3dseg_ros.core.imageops import colorize_labels
from depth3dseg_ros.core.palette import load_palette
from depth3dseg_ros.node.diagnostics import (
    ERROR,
    Counts,
    age_values,
    format_value,
    no_input_hint,
)
from depth3dseg_ros.node.frame import frame_outputs, plan_input
from depth3dseg_ros.node.inputs import InputHandling
from depth3dseg_ros.node.outputs import cloud_colors, image_messages, wanted_outputs
from depth3dseg_ros.node.params import NodeParams, declare_and_read
from depth3dseg_ros.node.runtime import RuntimeParameters
from depth3dseg_ros.node.steps import SetupSteps
from depth3dseg_ros.node.worker import outputs_text, summary_line
from depth3dseg_ros.ros.camera_info import camera_info_for_output
from depth3dseg_ros.ros.pointcloud2 import create_cloud
from depth3dseg_ros.ros.sync import Pair, header_stamp_ns
from depth3dseg_ros.rosenv import TRANSPORT_VAR

from depth3dseg_ros.node.wiring import (  # noqa: F401 - OUTPUT_TOPICS re-exported (node API)
    COMPRESSED_TOPICS,
    OUTPUT_TOPICS,
    default_segmenter,
    key_topic,
    make_qos,
    resolve_model_file,
)


class NodePipeline(SetupSteps, InputHandling, RuntimeParameters):
    """What ``depth3dseg_node`` does, shared by both node classes (this module's and the managed
    one, node/lifecycle.py): a mixin listed before ``rclpy.node.Node``. The set-up and tear-down
    steps both call are node/steps.py's; here are the classes/palette, the run-time parameter
    hooks, the per-frame work of the worker, publishing and diagnostics.
    """

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
        if new.diagnostics_period != old.diagnostics_period and self._diag_timer is not None:
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
        # lazy outputs (image_transport's rule, node/outputs.py wanted_outputs): only what has
        # subscribers is built and published; the labels' own computation ran above regardless
        counts = self._subscriber_counts()
        wanted = wanted_outputs(p, counts, counts)  # counts' keys: the publishers that exist
        self.last_outputs = wanted
        if not wanted:  # nobody listens: no output work at all
            t3 = time.perf_counter()
            self._add_stats(msg, t0, t1, t2, t3, t3)
            return
        out = frame_outputs(
            res, plan, rgb, p.max_depth, p.output_resolution, cloud='points' in wanted
        )
        labels = palette.relabel(out.labels)  # output ids (class_palette_file groups)
        info_out = (
            None
            if out.camera is None or not any(k.endswith('/camera_info') for k in wanted)
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
            p, msg.header, labels, out.depth, out.rgb, info_out, palette, wanted, mask
        ):
            self._publish(key, m)
        if cloud is not None:
            self._publish('points', cloud)
        self._add_stats(msg, t0, t1, t2, t3, time.perf_counter())

    def _subscriber_counts(self) -> dict[str, int]:
        """``{key: subscriber count}`` of the output publishers
        (``Publisher.get_subscription_count()``: the subscriptions DDS has matched, e.g. RViz,
        ``ros2 topic echo``, ``ros2 bag record``). A count that cannot be read is taken as 1
        (publish rather than lose an output)."""
        counts = {}
        # a snapshot: a run-time parameter change may add publishers from the executor thread
        for key, pub in list(self.pubs.items()):
            try:
                counts[key] = pub.get_subscription_count()
            except Exception:  # noqa: BLE001 - a destroyed/invalid publisher: publish decides
                counts[key] = 1
        return counts

    def _add_stats(self, msg: Any, t0: float, t1: float, t2: float, t3: float, t4: float) -> None:
        """One processed frame's stage times (perf_counter s: start, decoded, inferred, cloud
        built, published) and its age into ``self.stats``."""
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
                outputs=outputs_text(getattr(self, 'last_outputs', None)),
                age_ignored=self.stats.age_ignored,
                **{f'camera_info_{k}': v for k, v in self.sync.counts.items()},
                time_jumps=self.sync.jumps,
                time_outliers=self.sync.outliers_back,
                **age_values(s, self.stats.age_ignored),
            )
            rep = self._health.report(
                time.monotonic(), counts, self.slot.last_put, self.slot.frame_id, extra=s
            )
            line = summary_line(rep.values)
            if rep.values['rate_hz'] > 0:
                self.get_logger().info(line)
            elif rep.level == ERROR and rep.message.startswith('no input frame'):
                self._warn_no_input(rep.message)
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

    def _warn_no_input(self, message: str) -> None:
        """The console side of the "no input frame" ERROR: which topic, who publishes it, which
        image topics exist (node/diagnostics.no_input_hint); every 10 s at most."""
        topic = self._image_topic
        depth = self._measured_depth_topic()
        hint = no_input_hint(
            topic,
            self.count_publishers(topic),
            self.get_topic_names_and_types(),
            own_prefix=self.get_fully_qualified_name().rstrip('/') + '/',
            transport=os.environ.get(TRANSPORT_VAR) or None,
            own_inputs=(depth,) if depth else (),
        )
        self.get_logger().warning(f'{message}: {hint}', throttle_duration_sec=10.0)

    def destroy_node(self) -> bool:
        """Stop the worker, then destroy the node. Returns False (node left alone) when the worker
        is still inside a call after 5 s: destroying publishers under it could block; the caller
        exits."""
        if not self.stop_worker(timeout=5.0):
            return False
        super().destroy_node()
        return True


class Depth3DSegNode(NodePipeline, Node):
    """The rclpy node: set up at construction and running until destroyed (the managed variant
    is node/lifecycle.py). ``segmenter_factory(params, model_file)`` builds the model (default:
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
        model_file = self._setup_model(declare_and_read(self), segmenter_factory)
        self._setup_outputs()
        self._start_inputs()
        # run-time parameter changes (C44, node/runtime.py): checked, applied from the next frame
        self._install_parameter_callbacks()
        self.get_logger().info(self._ready_line(model_file))
