"""Lazy outputs across processes (``lazy_outputs``, default true; node/outputs.py
``wanted_outputs``): the node in a subprocess (tiny real model), a harness here subscribing only
``~/points`` and ``/diagnostics``. The node's /diagnostics ``outputs`` value names what each frame
built and published: only the cloud while nobody else listens; once the harness subscribes
``~/overlay/image``, the overlay (and its camera_info) is built and arrives within a few frames,
as image_transport's publishers do.
"""

from __future__ import annotations

import time

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image, PointCloud2
from std_msgs.msg import String

from nodeutil import (
    NodeProcess,
    camera_image,
    camera_info_msg,
    make_tiny_model,
    spin_until,
    stamp_ns,
)
from test_node import K_CAM, NH, NW, H, W

NAME = 'd3s_lazy'
RELIABLE = QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE)
LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)


class Lazy:
    """Image + CameraInfo in; ``~/points``, ``~/classes`` and /diagnostics out."""

    def __init__(self) -> None:
        self.node = rclpy.create_node('harness_lazy')
        self.pub_img = self.node.create_publisher(Image, f'/{NAME}_cam/image', RELIABLE)
        self.pub_info = self.node.create_publisher(
            CameraInfo, f'/{NAME}_cam/camera_info', RELIABLE
        )
        self.points: dict[int, object] = {}
        self.overlay: dict[int, object] = {}
        self.classes: list = []
        self.outputs: list[tuple[float, str]] = []  # (arrival, diagnostics 'outputs')
        self.node.create_subscription(
            PointCloud2, f'/{NAME}/points', lambda m: self.points.__setitem__(stamp_ns(m), m), 5
        )
        self.node.create_subscription(String, f'/{NAME}/classes', self.classes.append, LATCHED)
        self.node.create_subscription(DiagnosticArray, '/diagnostics', self._diag, 10)
        self.t = 2_000_000_000_000_000_000

    def _diag(self, msg) -> None:
        for s in msg.status:
            if s.name.startswith(NAME):
                for kv in s.values:
                    if kv.key == 'outputs':
                        self.outputs.append((time.monotonic(), kv.value))

    def subscribe_overlay(self) -> None:
        self.node.create_subscription(
            Image,
            f'/{NAME}/overlay/image',
            lambda m: self.overlay.__setitem__(stamp_ns(m), m),
            RELIABLE,
        )

    def stream_until(self, proc, cond, timeout: float) -> bool:
        """Send a frame every 0.1 s until ``cond()``."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.t += 100_000_000
            self.pub_info.publish(camera_info_msg(K_CAM, W, H, self.t))
            self.pub_img.publish(camera_image(W, H, self.t))
            if spin_until(self.node, cond, 0.1, proc):
                return True
        return cond()

    def outputs_since(self, t0: float) -> list[str]:
        return [v for t, v in self.outputs if t > t0]


@pytest.mark.flaky(reruns=1)  # FastDDS discovery rarely never completes (docs/pip_ros_stack.md §1)
@pytest.mark.timeout(240)
def test_unsubscribed_outputs_are_not_built_until_a_subscriber_appears(ros, tmp_path):
    model = make_tiny_model(tmp_path / 'tiny.pt')
    h = Lazy()
    proc = NodeProcess(
        tmp_path / 'node.log',
        dict(
            model_file=str(model),
            device='cpu',
            input_width=NW,
            input_height=NH,
            torch_threads=1,
            diagnostics_period=0.3,
        ),
        name=NAME,
        remaps={'image': f'/{NAME}_cam/image', 'camera_info': f'/{NAME}_cam/camera_info'},
    )
    try:
        assert spin_until(h.node, lambda: bool(h.classes), 90, proc), proc.log()
        assert h.stream_until(proc, lambda: len(h.points) >= 3, 90), proc.log()
        # only ~/points is subscribed: the latest frames built the cloud and nothing else
        t0 = time.monotonic()
        assert h.stream_until(proc, lambda: len(h.outputs_since(t0)) >= 2, 30), proc.log()
        assert set(h.outputs_since(t0)) == {'points'}, h.outputs_since(t0)

        h.subscribe_overlay()  # a subscriber appears: the overlay is built from then on
        assert h.stream_until(proc, lambda: len(h.overlay) >= 2, 30), (
            'no overlay after subscribing:\n' + proc.log()
        )
        t1 = time.monotonic()
        assert h.stream_until(proc, lambda: len(h.outputs_since(t1)) >= 2, 30), proc.log()
        assert h.outputs_since(t1)[-1] == 'overlay,overlay/camera_info,points'
        img = h.overlay[max(h.overlay)]
        assert img.encoding == 'rgb8' and (img.width, img.height) == (NW, NH)
        assert max(h.overlay) in h.points  # the same frame on both topics
    finally:
        h.node.destroy_node()
        assert proc.stop() == 0, proc.log()
