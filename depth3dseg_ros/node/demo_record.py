"""``depth3dseg-demo``'s recorder: what the demo subscribes and keeps.

:class:`Recorder` subscribes the node's outputs and the replayed input in the demo process
(reliable subscriptions, deep queues) and keeps every frame's arrays; :func:`ground_truth_metrics`
scores the recorded label and depth images against the bag's ground-truth topics (core.metrics).
node/demo_report.py writes the report from them; ``node.demo`` runs the demo around both.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

NODE = 'depth3dseg'
IMAGE_TOPIC = '/camera/color/image_raw'
INFO_TOPIC = '/camera/color/camera_info'
GT_DEPTH_TOPIC = '/camera/depth/image_raw'
GT_LABELS_TOPIC = '/camera/semantic/labels'


class Recorder:
    """Subscribes the node's outputs and the replayed input; keeps arrival times and decoded
    frames."""

    def __init__(self, node: Any, out: Path) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image, PointCloud2
        from std_msgs.msg import String

        self.out = out
        self.t_in: dict[int, float] = {}
        self.t_out: dict[int, float] = {}
        self.counts = {'input': 0, 'labels': 0, 'overlay': 0, 'depth': 0, 'points': 0}
        self.classes: dict | None = None
        self.diag: dict[str, str] = {}
        self.last_cloud: Any = None
        self.frame_ids: set[str] = set()
        self.rgb: dict[int, np.ndarray] = {}  # stamp -> the replayed camera image (RGB)
        self.overlay: dict[int, np.ndarray] = {}  # stamp -> the node's overlay (RGB)
        # stamp -> {'labels', 'depth'} (the node's output size)
        self.pred: dict[int, dict[str, np.ndarray]] = {}
        # stamp -> {'labels', 'depth'} (camera size)
        self.gt: dict[int, dict[str, np.ndarray]] = {}
        rel = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        self.outputs = [
            node.create_subscription(Image, f'/{NODE}/overlay/image', self._on_overlay, rel),
            node.create_subscription(Image, f'/{NODE}/depth/image', self._on_depth, rel),
            node.create_subscription(Image, f'/{NODE}/labels/image', self._on_labels, rel),
            node.create_subscription(PointCloud2, f'/{NODE}/points', self._on_points, rel),
        ]
        node.create_subscription(Image, IMAGE_TOPIC, self._on_input, rel)
        node.create_subscription(Image, GT_DEPTH_TOPIC, lambda m: self._on_gt('depth', m), rel)
        node.create_subscription(Image, GT_LABELS_TOPIC, lambda m: self._on_gt('labels', m), rel)
        node.create_subscription(String, f'/{NODE}/classes', self._on_classes, latched)
        node.create_subscription(DiagnosticArray, '/diagnostics', self._on_diag, 10)

    def outputs_matched(self) -> bool:
        """Whether each output subscription has matched the node's publisher (nothing the node
        publishes from now on is lost to the recorder)."""
        return all(sub.get_publisher_count() > 0 for sub in self.outputs)

    @staticmethod
    def _stamp(msg: Any) -> int:
        return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec

    def _on_input(self, msg: Any) -> None:
        from depth3dseg_ros.ros.image import to_rgb

        t_arrival = time.monotonic()  # before the decoding: the input time of the latency
        self.counts['input'] += 1
        t = self._stamp(msg)
        self.t_in.setdefault(t, t_arrival)
        self.rgb.setdefault(t, to_rgb(msg).copy())

    def _count(self, name: str, msg: Any) -> int:
        self.counts[name] += 1
        self.frame_ids.add(msg.header.frame_id)
        t = self._stamp(msg)
        self.t_out.setdefault(t, time.monotonic())
        return t

    def _on_labels(self, msg: Any) -> None:
        from depth3dseg_ros.ros.image import imgmsg_to_cv2

        t = self._count('labels', msg)
        self.pred.setdefault(t, {})['labels'] = imgmsg_to_cv2(msg).copy()

    def _on_gt(self, kind: str, msg: Any) -> None:
        from depth3dseg_ros.core.depth import depth_to_meters
        from depth3dseg_ros.ros.image import imgmsg_to_cv2

        arr = imgmsg_to_cv2(msg)
        self.gt.setdefault(self._stamp(msg), {})[kind] = (
            depth_to_meters(arr, msg.encoding) if kind == 'depth' else arr.copy()
        )

    def _on_overlay(self, msg: Any) -> None:
        from depth3dseg_ros.ros.image import imgmsg_to_cv2

        t = self._count('overlay', msg)
        self.overlay[t] = imgmsg_to_cv2(msg).copy()

    def _on_depth(self, msg: Any) -> None:
        from depth3dseg_ros.core.depth import depth_to_meters
        from depth3dseg_ros.ros.image import imgmsg_to_cv2

        t = self._count('depth', msg)
        self.pred.setdefault(t, {})['depth'] = depth_to_meters(imgmsg_to_cv2(msg), msg.encoding)

    def _on_points(self, msg: Any) -> None:
        self._count('points', msg)
        self.last_cloud = msg

    def _on_classes(self, msg: Any) -> None:
        self.classes = json.loads(msg.data)

    def _on_diag(self, msg: Any) -> None:
        for st in msg.status:
            if st.name.startswith(NODE):
                self.diag = {kv.key: kv.value for kv in st.values}

    def latencies_ms(self) -> np.ndarray:
        """Output arrival - input arrival (ms) for every stamp seen on both sides."""
        both = sorted(set(self.t_in) & set(self.t_out))
        return np.array([(self.t_out[t] - self.t_in[t]) * 1e3 for t in both])


def ground_truth_metrics(rec: Recorder, num_classes: int, void_id: int) -> dict:
    """mIoU and AbsRel/RMSE/δ1 of the node's outputs against the bag's labels/depth on the
    processed frames.

    The ground truth is resized to the output size with nearest neighbour (core.imageops), as
    depth3dseg-eval does; metrics from core.metrics (void ignored; depth valid where GT > 0).
    """
    from depth3dseg_ros.core.imageops import resize_depth, resize_labels
    from depth3dseg_ros.core.metrics import ConfusionMatrix, DepthMetrics

    cm, dm = ConfusionMatrix(num_classes, void_id), DepthMetrics()
    n_lab = n_dep = 0
    for t, pred in rec.pred.items():
        gt = rec.gt.get(t, {})
        if 'labels' in pred and 'labels' in gt:
            h, w = pred['labels'].shape
            cm.update(
                pred['labels'].astype(np.int64),
                resize_labels(gt['labels'], (w, h)).astype(np.int64),
            )
            n_lab += 1
        if 'depth' in pred and 'depth' in gt:
            h, w = pred['depth'].shape
            dm.update(pred['depth'], resize_depth(gt['depth'], (w, h)))
            n_dep += 1
    seg, dep = cm.summary(), dm.summary()
    return {
        'labelled_frames': n_lab,
        'miou': seg['miou'],
        'pixel_acc': seg['pixel_acc'],
        'depth_frames': n_dep,
        'absrel': dep['absrel'],
        'rmse_m': dep['rmse'],
        'delta1': dep['delta1'],
    }
