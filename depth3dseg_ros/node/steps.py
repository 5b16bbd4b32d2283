"""Set-up and tear-down steps of ``depth3dseg_node``, as a mixin of the node (node/node.py
``NodePipeline``). The plain node runs the set-up steps in its constructor; the managed node
(node/lifecycle.py) runs them from its transitions (ROS 2 design article "Managed nodes"):

- ``_setup_model(p, factory)``: the model (Segmenter), class palette, warm-up, stamp
  synchroniser, statistics (configure);
- ``_setup_outputs()``: the output publishers, /diagnostics and ``~/classes`` (configure);
- ``_start_inputs()``: the subscriptions, the diagnostics timer and the worker thread (activate);
- ``_stop_inputs(timeout)``: all three stopped (deactivate);
- ``_release()``: the publishers destroyed and the model dropped (cleanup).

Publishers come from ``_make_publisher`` and go through ``_destroy_publisher``, which the managed
node overrides (lifecycle publishers: nothing goes out unless active).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.clock import Clock, ClockType
from sensor_msgs.msg import CameraInfo, CompressedImage, Image, PointCloud2
from std_msgs.msg import String

from depth3dseg_ros.core.arch import DEFAULT_ARCH
from depth3dseg_ros.core.palette import ClassPalette, load_palette
from depth3dseg_ros.node.diagnostics import AgeFilteredStats, CameraSlot, Health
from depth3dseg_ros.node.logbridge import route_python_logging
from depth3dseg_ros.node.outputs import publisher_specs
from depth3dseg_ros.node.params import NodeParams
from depth3dseg_ros.node.rectify import Rectifier
from depth3dseg_ros.node.wiring import default_segmenter, key_topic, make_qos, resolve_model_file
from depth3dseg_ros.node.worker import Worker
from depth3dseg_ros.ros.stamp_buffer import StampBuffer
from depth3dseg_ros.ros.sync import StampSync


class SetupSteps:
    """Mixin (before ``rclpy.node.Node``): the steps above. The node provides ``_on_image``,
    ``_on_info`` (node/inputs.py), ``_process``, ``_on_worker_error``, ``_on_diagnostics`` and
    ``_publish_classes`` (node/node.py)."""

    def _setup_model(self, p: NodeParams, segmenter_factory: Callable | None) -> str:
        """Load the model for ``p`` and the per-run state; returns the model file.

        Raises:
            ValueError: a bad class palette file (core/palette.py: file, field and value named).
            FileNotFoundError: the model file is missing (wiring.resolve_model_file).
            Exception: whatever the model factory raises for a file it cannot load.
        """
        self.p = p
        route_python_logging(self.get_logger())  # the core's log lines go through the node's
        model_file = resolve_model_file(p.model_file)
        self.seg = (segmenter_factory or default_segmenter)(p, model_file)
        self.classes = self.seg.classes  # the model's; the outputs use self.palette's
        self.palette: ClassPalette = load_palette(p.class_palette_file, self.classes)
        self._warm_ms = self._warm_up()
        self.sync = StampSync(slop=p.sync_slop, queue_size=3)
        self.slot = CameraSlot()  # LatestSlot + time and frame_id of the latest frame
        self.stats = AgeFilteredStats()  # StageStats without implausible frame ages (stamp 0)
        self._health = Health(time.monotonic())  # windowed rates and levels (node/diagnostics.py)
        self.rectifier = Rectifier()  # undistort maps cached per CameraInfo (issue 14)
        self._last_error: dict[str, float] = {}
        self._warned: set[str] = set()
        self._jumps_logged: set[str] = set()  # kinds of time jump logged at INFO (node/inputs.py)
        self.last_outputs: frozenset[str] | None = None  # keys the latest frame published
        return model_file

    def _make_publisher(self, msg_type: Any, topic: str, qos: Any) -> Any:
        """A publisher (``create_publisher``; the managed node overrides it)."""
        return self.create_publisher(msg_type, topic, qos)

    def _setup_outputs(self) -> None:
        """The output publishers the switches ask for, /diagnostics and ``~/classes`` (published
        once here: transient-local)."""
        self._out_qos = make_qos(self.p.output_reliability, self.p.output_depth)
        self.pubs: dict[str, Any] = {}
        self._ensure_publishers(self.p)
        self.pub_diag = self._make_publisher(DiagnosticArray, '/diagnostics', 10)
        self._classes_pub = self._make_publisher(
            String, '~/classes', make_qos('reliable', 1, transient_local=True)
        )
        self._publish_classes()

    def _measured_depth_topic(self) -> str | None:
        """The resolved topic of the ``depth`` input, or None without ``use_measured_depth``
        (also before the subscriptions exist: the managed node describes itself at configure)."""
        return self.resolve_topic_name('depth') if self.p.use_measured_depth else None

    def _start_inputs(self) -> None:
        """Subscriptions (image or ``<image>/compressed``, camera_info, depth), the steady-clock
        diagnostics timer and the worker thread (on a new newest-frame slot)."""
        p = self.p
        self.slot = CameraSlot()
        self._subs: list[Any] = []
        in_qos = make_qos(p.input_reliability, p.input_depth)
        self._image_topic = self.resolve_topic_name('image')
        if p.use_compressed:  # like image_transport: <image topic after remapping>/compressed
            self._image_topic += '/compressed'
            self._subs.append(
                self.create_subscription(
                    CompressedImage, self._image_topic, self._on_image, in_qos
                )
            )
        else:
            self._subs.append(self.create_subscription(Image, 'image', self._on_image, in_qos))
        self._info_topic = self.resolve_topic_name('camera_info')
        self._depths = None  # measured depth registered to the colour image (issue 12)
        aux_qos = make_qos(p.input_reliability, max(p.input_depth, 5))
        if p.use_measured_depth:
            self._depths = StampBuffer(8)
            self._subs.append(self.create_subscription(Image, 'depth', self._depths.add, aux_qos))
        self._subs.append(
            self.create_subscription(CameraInfo, 'camera_info', self._on_info, aux_qos)
        )
        # steady clock: a /clock jump back (looped bag, use_sim_time) must not stop it (issue 14)
        self._diag_timer = self.create_timer(
            p.diagnostics_period,
            self._on_diagnostics,
            clock=Clock(clock_type=ClockType.STEADY_TIME),
        )
        self.worker = Worker(self.slot, self._process, self._on_worker_error)
        self.worker.start()

    def _stop_inputs(self, timeout: float = 5.0) -> bool:
        """Drop the subscriptions and the timer, stop the worker (at most ``timeout`` s); True when
        no worker thread is left running (a late frame of one that is publishes nothing: its slot
        is closed)."""
        for sub in getattr(self, '_subs', []):
            self.destroy_subscription(sub)
        self._subs = []
        if getattr(self, '_diag_timer', None) is not None:
            self.destroy_timer(self._diag_timer)
            self._diag_timer = None
        return self.stop_worker(timeout)

    def stop_worker(self, timeout: float = 5.0) -> bool:
        """Stop the worker thread, if any (at most ``timeout`` s); True when none is running."""
        worker = getattr(self, 'worker', None)
        return worker is None or worker.stop(timeout=timeout)

    def _release(self) -> None:
        """Destroy the publishers and drop the model (``_setup_outputs``, ``_setup_model``
        undone)."""
        pubs = list(getattr(self, 'pubs', {}).values())
        pubs += [getattr(self, name, None) for name in ('pub_diag', '_classes_pub')]
        for pub in pubs:
            if pub is not None:
                self._destroy_publisher(pub)
        self.pubs, self.pub_diag, self._classes_pub = {}, None, None
        self.seg = self.classes = None

    def _destroy_publisher(self, pub: Any) -> None:
        """Destroy ``pub`` (the managed node overrides it for lifecycle publishers)."""
        self.destroy_publisher(pub)

    def _ready_line(self, model_file: str) -> str:
        """The log line once the node is set up: model, topics, QoS, classes."""
        p = self.p
        # a segmenter_factory may wrap the Segmenter without its model-file metadata
        meta = getattr(self.seg, 'meta', None) or {}
        arch = meta.get('arch', {})
        # model-file keys that change the outputs without changing the weights, when set
        gain, w3d = (float(arch.get(k, DEFAULT_ARCH[k])) for k in ('depth_gain', 'fusion_w3d'))
        cal = f'depth_gain {gain:.4g}, ' if gain != DEFAULT_ARCH['depth_gain'] else ''  # calibrate
        cal += f'fusion_w3d {w3d:g}, ' if w3d != DEFAULT_ARCH['fusion_w3d'] else ''
        balance = meta.get('input_balance') or 'none'  # core.colour_balance, before mean/std
        cal += f'input_balance {balance}, ' if balance != 'none' else ''
        if arch.get('code_input'):  # an RGB-D input model: say whether it gets its depth
            cal += 'RGB-D input, ' + ('' if p.use_measured_depth else 'no depth: colour only, ')
        geo = getattr(self.seg, 'geometry', None)  # core.late_fusion.GeometryBranch
        if geo is not None:
            cal += f'RGB-D late fusion with {geo.path} (weight {geo.weight:g}), '
        elif p.geometry_model:
            cal += 'geometry_model unused (use_measured_depth is false), '
        depth = self._measured_depth_topic()
        depth_in = f'measured depth {depth}, ' if depth else ''
        return (
            f'model {model_file} ({len(self.classes)} classes, {cal}'
            f'warm-up {self._warm_ms:.0f} ms), '
            f'label_source={p.label_source}, '
            f'input {self.resolve_topic_name("image")}{"/compressed" if p.use_compressed else ""} '
            f'({p.input_reliability}), '
            + depth_in
            + f'outputs {sorted(self.pubs)} ({p.output_reliability}), '
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
                self.pubs[key] = self._make_publisher(
                    classes[type_name], key_topic(key), self._out_qos
                )
