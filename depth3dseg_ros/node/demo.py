"""``make demo`` / ``depth3dseg-demo --out demo_out``: the node on the real-camera bag, end to end.

0. finds the bag: ``--bag``, else the real-camera bag of ``depth3dseg_ros.samples`` (22 real
   NYU/TUM frames, fetched by URL + sha256 into a cache and built there on first use); offline,
   with neither a cache nor a local copy, it renders a synthetic bag on the spot instead and says
   so;
1. starts ``depth3dseg_node`` in a subprocess (the shipped model, or ``--model``), on its own
   ROS_DOMAIN_ID unless one is set, with the LARGE_DATA transport (depth3dseg_ros.rosenv);
2. waits until the node has loaded the model (its transient-local ``~/classes`` message arrives);
3. replays the bag's colour image and CameraInfo topics with ``depth3dseg-replay`` (subprocess);
4. records every output in this process (reliable subscriptions, deep queues: nothing is lost
   here), plus the replayed input images (their arrival time is the input time for the latency);
5. writes ``--out``: ``overlay/<n>.png`` and ``depth/<n>.png`` (colour map) per output frame,
   ``cloud.ply`` (the last labelled cloud, invalid points left out), ``report.json`` and
   ``report.md`` (frames in/out, fps, latency p50/p95, the node's per-stage timings from
   /diagnostics).

Every subprocess runs with a timeout; a missing model or bag stops with one clear line (exit 2).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from depth3dseg_ros.paths import share_file
from depth3dseg_ros.procutil import (
    RUNNING,
    STARTING,
    STOPPING,
    StopRequested,
    StopSignals,
    popen_tied,
)
from depth3dseg_ros.rosenv import apply_ros_env, pick_domain_id

NODE = 'depth3dseg'
IMAGE_TOPIC = '/camera/color/image_raw'
INFO_TOPIC = '/camera/color/camera_info'
GT_DEPTH_TOPIC = '/camera/depth/image_raw'
GT_LABELS_TOPIC = '/camera/semantic/labels'


def _find(parts: tuple[str, ...], given: str | None, what: str) -> Path:
    if given:
        path = Path(given)
        if not path.exists():
            raise FileNotFoundError(f'{what} {str(path)!r} not found')
        return path
    try:
        return share_file(*parts)
    except FileNotFoundError as err:
        raise FileNotFoundError(
            f'{what} not found ({err}); pass --{what.split()[0]} PATH'
        ) from None


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
        '| labelled frames | mIoU | pixel acc | depth frames | AbsRel | RMSE (m) | δ1 |',
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
    lines += ['', '(frame age is left out: the replayed stamps are the recording time, not now)']
    lines += [
        '',
        'Per frame: `overlay/<stamp_ns>.png`, `depth/<stamp_ns>.png` (turbo colour map, black = '
        'no data).',
    ]
    (out / 'report.md').write_text('\n'.join(lines) + '\n')
    return report


def default_bag(out: Path) -> Path:
    """The real-camera sample bag; when the sample files cannot be had (offline, no cache, no local
    copy), a 1-room synthetic bag of 18 frames rendered into ``out/synthetic_bag`` (said on
    stderr)."""
    from depth3dseg_ros.samples import SampleDataUnavailable, real_camera_bag

    try:
        return real_camera_bag()
    except SampleDataUnavailable as err:
        from depth3dseg_ros.synth.cli import generate

        bag = out / 'synthetic_bag'
        shutil.rmtree(bag, ignore_errors=True)
        print(
            f'depth3dseg-demo: real sample frames unavailable ({err}); replaying a synthetic bag '
            f'rendered now instead: {bag}',
            file=sys.stderr,
        )
        generate(bag, scenes=1, frames_per_scene=18, seed=0, noise=True, progress=False)
        return bag


def run_demo(args: argparse.Namespace, stop: StopSignals | None = None) -> int:
    """Run steps 0-5 of the module docstring; returns the exit code. ``stop``: the process's signal
    handling (main installs it; a signal then raises StopRequested out of the loops, C40)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        model = _find(('models', 'depth3dseg_nyu13.pt'), args.model, 'model file')
        bag = _find((), args.bag, 'bag') if args.bag else default_bag(out)
    except FileNotFoundError as err:
        print(f'depth3dseg-demo: {err}', file=sys.stderr)
        return 2
    if 'ROS_DOMAIN_ID' not in os.environ:
        apply_ros_env(domain_id=pick_domain_id())
    apply_ros_env()
    import rclpy

    node_log = open(out / 'node.log', 'w')
    node_cmd = [
        sys.executable,
        '-m',
        'depth3dseg_ros.node.main',
        '--ros-args',
        '-r',
        f'__node:={NODE}',
        '-r',
        f'image:={IMAGE_TOPIC}',
        '-r',
        f'camera_info:={INFO_TOPIC}',
        '-p',
        f'model_file:={model}',
        '-p',
        f'device:={args.device}',
        '-p',
        'diagnostics_period:=1.0',
    ]
    from rclpy.signals import SignalHandlerOptions

    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)  # signals: procutil.StopSignals
    if stop is not None:
        stop.set_phase(STARTING)
    ros = rclpy.create_node('depth3dseg_demo_recorder')
    rec = Recorder(ros, out)
    node = popen_tied(node_cmd, stdout=node_log, stderr=subprocess.STDOUT)
    replay = None
    try:
        if stop is not None:
            # raise_running: a signal raises StopRequested out of the loops
            stop.set_phase(RUNNING)
        end = time.monotonic() + args.startup_timeout
        while rec.classes is None and time.monotonic() < end and node.poll() is None:
            rclpy.spin_once(ros, timeout_sec=0.1)
        if rec.classes is None:
            node_log.flush()
            print(
                f'depth3dseg-demo: the node did not start (see {out / "node.log"}):\n'
                + (out / 'node.log').read_text()[-2000:],
                file=sys.stderr,
            )
            return 1
        from depth3dseg_ros.bags.reader import BagReader

        with BagReader(bag) as reader:
            have = set(reader.topics())
        if not {IMAGE_TOPIC, INFO_TOPIC} <= have:
            print(
                f'depth3dseg-demo: bag {bag} lacks {IMAGE_TOPIC} / {INFO_TOPIC}; it has '
                f'{sorted(have)}',
                file=sys.stderr,
            )
            return 2
        topics = [IMAGE_TOPIC, INFO_TOPIC] + [
            t for t in (GT_DEPTH_TOPIC, GT_LABELS_TOPIC) if t in have
        ]
        replay = popen_tied(
            [
                sys.executable,
                '-m',
                'depth3dseg_ros.bags.replay',
                str(bag),
                '--rate',
                str(args.rate),
                '--topics',
                *topics,
                '--wait-subscribers',
                '20',
                '--delay',
                '1.0',
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        end = time.monotonic() + args.timeout
        while replay.poll() is None and time.monotonic() < end:
            rclpy.spin_once(ros, timeout_sec=0.05)
        if replay.poll() is None:
            print(
                f'depth3dseg-demo: replay did not finish within {args.timeout} s', file=sys.stderr
            )
            return 1
        replay_out = replay.communicate(timeout=10)[0]
        if replay.returncode != 0:
            print(f'depth3dseg-demo: replay failed:\n{replay_out}', file=sys.stderr)
            return 1
        quiet_end, last = (
            time.monotonic() + 3.0,
            len(rec.t_out),
        )  # drain: until 3 s without new output
        while time.monotonic() < quiet_end:
            rclpy.spin_once(ros, timeout_sec=0.05)
            if len(rec.t_out) != last:
                last, quiet_end = len(rec.t_out), time.monotonic() + 3.0
        info = dict(
            bag=str(bag),
            model=str(model),
            rate=args.rate,
            device=args.device,
            domain_id=os.environ.get('ROS_DOMAIN_ID'),
            replay=replay_out.strip().splitlines()[-1:],
        )
        report = write_report(out, rec, info)
        print(
            json.dumps(
                {
                    k: report[k]
                    for k in (
                        'frames_in',
                        'frames_out',
                        'fps_out',
                        'latency_ms_p50',
                        'latency_ms_p95',
                        'cloud_ply_points',
                    )
                }
            )
        )
        print(f'depth3dseg-demo: report in {out}/report.md')
        return 0 if report['frames_out'] > 0 else 1
    finally:
        if stop is not None:
            stop.set_phase(STOPPING)  # a second signal ends the process at once
        for proc in (replay, node):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # the node and replay end within 2 s (C40)
        for proc in (replay, node):
            if proc is not None:
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        node_log.close()
        ros.destroy_node()
        rclpy.try_shutdown()


def build_parser() -> argparse.ArgumentParser:
    """The CLI of ``depth3dseg-demo``."""
    p = argparse.ArgumentParser(prog='depth3dseg-demo', description=__doc__.split('\n')[0])
    p.add_argument('--out', default='demo_out', help='report folder (created)')
    p.add_argument(
        '--model',
        default=None,
        help='model file (default: the shipped models/depth3dseg_nyu13.pt)',
    )
    p.add_argument(
        '--bag',
        default=None,
        help='bag (default: the real-camera sample bag, fetched and built on first use)',
    )
    p.add_argument('--rate', type=float, default=1.0, help='replay time scale')
    p.add_argument('--device', default='auto', choices=('auto', 'cpu', 'cuda'))
    p.add_argument(
        '--startup-timeout', type=float, default=120.0, help='s to wait for the node to load'
    )
    p.add_argument(
        '--timeout', type=float, default=600.0, help='s to wait for the replay to finish'
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``depth3dseg-demo``. SIGINT/SIGTERM at any moment: the node and replay
    children are stopped and the demo ends within about 2 s, exit 0, no traceback (C40, C45;
    procutil.StopSignals)."""
    stop = StopSignals('depth3dseg-demo', raise_running=True)
    try:
        rc = run_demo(build_parser().parse_args(argv), stop)
    except StopRequested:
        rc = stop.EXIT_CODE
    finally:
        stop.finished()
        stop.restore()
    return rc


if __name__ == '__main__':
    sys.exit(main())
