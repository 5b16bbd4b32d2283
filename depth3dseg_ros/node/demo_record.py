"""``depth3dseg-demo``'s recorder and report: what the demo subscribes and what it writes.

:class:`Recorder` subscribes the node's outputs and the replayed input in the demo process
(reliable subscriptions, deep queues); :func:`ground_truth_metrics` scores the recorded label and
depth images against the bag's ground-truth topics (core.metrics); :func:`write_report` writes
``report.json`` and ``report.md`` plus the per-frame renders. ``node.demo`` runs the demo around
them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import cv2
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
        self.pred: dict[
            int, dict[str, np.ndarray]
        ] = {}  # stamp -> {'labels', 'depth'} (network size)
        self.gt: dict[
            int, dict[str, np.ndarray]
        ] = {}  # stamp -> {'labels', 'depth'} (camera size)
        rel = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        node.create_subscription(Image, IMAGE_TOPIC, self._on_input, rel)
        node.create_subscription(Image, f'/{NODE}/overlay/image', self._on_overlay, rel)
        node.create_subscription(Image, f'/{NODE}/depth/image', self._on_depth, rel)
        node.create_subscription(Image, f'/{NODE}/labels/image', self._on_labels, rel)
        node.create_subscription(Image, GT_DEPTH_TOPIC, lambda m: self._on_gt('depth', m), rel)
        node.create_subscription(Image, GT_LABELS_TOPIC, lambda m: self._on_gt('labels', m), rel)
        node.create_subscription(PointCloud2, f'/{NODE}/points', self._on_points, rel)
        node.create_subscription(String, f'/{NODE}/classes', self._on_classes, latched)
        node.create_subscription(DiagnosticArray, '/diagnostics', self._on_diag, 10)
        for sub in ('overlay', 'depth'):
            (out / sub).mkdir(parents=True, exist_ok=True)

    @staticmethod
    def _stamp(msg: Any) -> int:
        return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec

    def _on_input(self, msg: Any) -> None:
        self.counts['input'] += 1
        self.t_in.setdefault(self._stamp(msg), time.monotonic())

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
        cv2.imwrite(
            str(self.out / 'overlay' / f'{t}.png'),
            cv2.cvtColor(imgmsg_to_cv2(msg), cv2.COLOR_RGB2BGR),
        )

    def _on_depth(self, msg: Any) -> None:
        from depth3dseg_ros.core.depth import depth_to_meters
        from depth3dseg_ros.core.imageops import colorize_depth
        from depth3dseg_ros.ros.image import imgmsg_to_cv2

        t = self._count('depth', msg)
        depth = depth_to_meters(imgmsg_to_cv2(msg), msg.encoding)
        self.pred.setdefault(t, {})['depth'] = depth
        cv2.imwrite(
            str(self.out / 'depth' / f'{t}.png'),
            cv2.cvtColor(colorize_depth(depth), cv2.COLOR_RGB2BGR),
        )

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


def write_report(out: Path, rec: Recorder, info: dict) -> dict:
    """Write report.json, report.md and cloud.ply from the recorder; return the report dict."""
    from depth3dseg_ros.ros.pointcloud2 import read_points, unpack_rgb, write_ply

    lat = rec.latencies_ms()
    outs = sorted(rec.t_out.values())
    fps = (len(outs) - 1) / (outs[-1] - outs[0]) if len(outs) > 1 and outs[-1] > outs[0] else 0.0
    n_ply = 0
    if rec.last_cloud is not None:
        pts = read_points(rec.last_cloud)
        xyz = np.stack([pts['x'], pts['y'], pts['z']], axis=-1)
        rgb = unpack_rgb(pts['rgb']) if 'rgb' in pts.dtype.names else None
        n_ply = write_ply(
            out / 'cloud.ply', xyz, rgb, pts['label'] if 'label' in pts.dtype.names else None
        )
    report = dict(
        info,
        frames_in=rec.counts['input'],
        frames_out=len(rec.t_out),
        outputs=rec.counts,
        fps_out=round(fps, 2),
        latency_ms_p50=round(float(np.percentile(lat, 50)), 1) if lat.size else None,
        latency_ms_p95=round(float(np.percentile(lat, 95)), 1) if lat.size else None,
        frame_ids=sorted(rec.frame_ids),
        cloud_ply_points=n_ply,
        classes=[c['name'] for c in rec.classes['classes']] if rec.classes else None,
        ground_truth=ground_truth_metrics(
            rec, len(rec.classes['classes']), rec.classes['void_id']
        ),
        node_diagnostics={k: v for k, v in rec.diag.items() if not k.startswith('age_')},
        frames=[
            {
                'stamp_ns': t,
                'latency_ms': (
                    round((rec.t_out[t] - rec.t_in[t]) * 1e3, 1) if t in rec.t_in else None
                ),
                'overlay': f'overlay/{t}.png',
                'depth': f'depth/{t}.png',
            }
            for t in sorted(rec.t_out)
        ],
    )
    (out / 'report.json').write_text(json.dumps(report, indent=2))
    lines = [
        '# depth3dseg demo report',
        '',
        *([f"**{info['note']}**", ''] if info.get('note') else []),
        f"Bag `{info['bag']}`, model `{info['model']}`, replay rate {info['rate']}.",
        '',
        '| quantity | value |',
        '|---|---|',
        f"| frames in (replayed images) | {report['frames_in']} |",
        f"| frames out (stamps with outputs) | {report['frames_out']} |",
        f"| output rate | {report['fps_out']} fps |",
        f"| latency p50 / p95 (input arrival -> output arrival) | {report['latency_ms_p50']} / "
        f"{report['latency_ms_p95']} ms |",
        f"| outputs received | {rec.counts} |",
        f"| output frame_id | {', '.join(report['frame_ids'])} |",
        f"| cloud.ply points (last frame) | {n_ply} |",
        '',
        '## Against the bag\'s ground truth (processed frames, GT resized nearest to the output '
        'size)',
        '',
        '| labelled frames | fused mIoU | fused pixel acc | depth frames | AbsRel | RMSE (m) '
        '| δ1 |',
        '|---|---|---|---|---|---|---|',
        '| {labelled_frames} | {miou} | {pixel_acc} | {depth_frames} | {absrel} | {rmse_m} | '
        '{delta1} |'.format(
            **{
                k: (f'{v:.3f}' if isinstance(v, float) else v)
                for k, v in report['ground_truth'].items()
            }
        ),
        '',
        '## Node diagnostics (last /diagnostics)',
        '',
    ]
    lines += [f'- {k}: {v}' for k, v in report['node_diagnostics'].items()]
    lines += [
        '',
        '(frame age is left out: the replayed stamps are the recording time, not now; rate_hz and '
        "input_rate_hz count the frames of the node's last 5 s, the idle end of the replay "
        'included, so they read lower than the output rate above (over the replayed frames))',
    ]
    lines += [
        '',
        'Per frame: `overlay/<stamp_ns>.png`, `depth/<stamp_ns>.png` (turbo colour map, black = '
        'no data).',
    ]
    (out / 'report.md').write_text('\n'.join(lines) + '\n')
    return report
