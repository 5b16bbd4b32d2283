"""Benchmark: depth3dseg_node end to end at 640x480 input, with a per-stage breakdown.

    python bench/bench_node.py [--model M] [--seconds 10] [--rate 30] [--threads 0]
                               [--backends torch onnxruntime] [--subscribe points|all]

* model: the shipped models/depth3dseg_nyu13.pt, or (when it is not there) a randomly initialised
  default-arch Depth3DSeg saved with core.modelfile — the same compute, untrained; the output says
  which.
* reference, same run: ``Segmenter.infer`` alone in this process on the same 640x480 frame
  (model-only time per frame, including its own resize/normalise/postprocess).
* end to end: the node in a subprocess (real rclpy, LARGE_DATA), a publisher here sending 640x480
  rgb8 + CameraInfo at ``--rate`` Hz (stamps = publish time) for ``--seconds``; measured here:
  output rate of ``~/points``, latency = arrival - stamp (p50/p95); from the node's /diagnostics:
  mean ms per stage (decode, inference, cloud, publish) and received/processed/dropped.
* ``--subscribe points`` (default): this process subscribes ``~/points`` and ``/diagnostics``
  only; with the node's ``lazy_outputs`` (default true) the images nobody subscribes are neither
  built nor published. ``--subscribe all``: also every image output (``~/labels/image``,
  ``~/overlay/image``, ``~/mask/image``, ``~/depth/image``; their camera_info goes out with them),
  the figure of a node whose outputs are all in use (as every frame was before lazy outputs). The
  output prints the topics subscribed and the node's ``outputs`` diagnostics value.
* ``--backends torch onnxruntime``: the same stream through the node once per inference backend,
  back to back (the model exported with core.onnx_export for onnxruntime), and the frame-rate ratio
  of each to the first: machines here differ up to 3x in speed, so the goal is a ratio measured in
  one run. ``onnxruntime-whole`` / ``onnxruntime-split`` run the onnxruntime backend with its
  split mode forced (core.backends.SPLIT_ENV; plain ``onnxruntime`` is its CPU default, the split).
  ``--repeat N`` runs the sequence N times, reversing the order every other time (ABBA),
  and prints each round's figures, each ratio and their median (the load of a shared machine drifts
  within a minute).
Goals: >= 30 fps end to end (issue 7; on this 2-core machine: onnxruntime / torch >= 1.6x, issue
13); non-model stages (decode + cloud + publish) <= 10 % of frame time.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from depth3dseg_ros.procutil import popen_tied

REPO = Path(__file__).resolve().parents[1]
W, H = 640, 480
K = np.array([[525.0, 0, 319.5], [0, 525.0, 239.5], [0, 0, 1]])


def model_file(arg: str | None, tmp: Path) -> tuple[str, str]:
    """(path, description): --model, the shipped model, or a default-arch random model."""
    from depth3dseg_ros.paths import share_file

    if arg:
        return arg, f'given model {arg}'
    try:
        return str(
            share_file('models', 'depth3dseg_nyu13.pt')
        ), 'shipped model models/depth3dseg_nyu13.pt'
    except FileNotFoundError:
        from depth3dseg_ros.core.classes import NYU13
        from depth3dseg_ros.core.model import Depth3DSeg
        from depth3dseg_ros.core.modelfile import save_model

        path = tmp / 'default_arch.pt'
        save_model(path, Depth3DSeg(num_classes=len(NYU13)), {'classes': NYU13.to_dict()})
        return str(path), 'default-arch Depth3DSeg, random weights (shipped model not present yet)'


def reference_ms(path: str, threads: int, runs: int = 20) -> tuple[float, tuple[int, int]]:
    """Mean ms of Segmenter.infer on a 640x480 frame in this process (after a warm-up)."""
    from depth3dseg_ros.core.inference import Segmenter

    seg = Segmenter(path, device='cpu', num_threads=threads or None)
    rgb = np.random.default_rng(0).integers(0, 255, (H, W, 3), dtype=np.uint8)
    for _ in range(3):
        seg.infer(rgb, K)
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        seg.infer(rgb, K)
        t.append((time.perf_counter() - t0) * 1e3)
    return float(np.mean(t)), seg.input_size


class NoOutput(RuntimeError):
    """The node sent nothing within the start-up wait (its log tail is the message)."""


def end_to_end(
    path: str,
    seconds: float,
    rate: float,
    threads: int,
    tmp: Path,
    backend: str = 'torch',
    subscribe: str = 'points',
) -> dict:
    """Run the node in a subprocess and stream frames at it, subscribing ``~/points`` and
    ``/diagnostics`` (``subscribe='all'``: every image output too); returns the measured
    figures."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import CameraInfo, Image, PointCloud2
    from std_msgs.msg import Header

    from depth3dseg_ros.ros.camera_info import make_camera_info
    from depth3dseg_ros.ros.image import cv2_to_imgmsg

    log = open(tmp / f'node_{backend}.log', 'w')
    env = dict(os.environ)
    env.pop('DEPTH3DSEG_ORT_SPLIT', None)  # 'onnxruntime': the backend's own default
    if backend.startswith('onnxruntime-'):  # core.backends.SPLIT_ENV: the split mode, forced
        env['DEPTH3DSEG_ORT_SPLIT'] = backend.split('-', 1)[1]
    proc = popen_tied(
        [
            sys.executable,
            '-m',
            'depth3dseg_ros.node.main',
            '--ros-args',
            '-r',
            '__node:=bench_node',
            '-r',
            'image:=/bench/image',
            '-r',
            'camera_info:=/bench/camera_info',
            '-p',
            f'model_file:={path}',
            '-p',
            'device:=cpu',
            '-p',
            f'torch_threads:={threads}',
            '-p',
            'diagnostics_period:=1.0',
            '-p',
            f"backend:={backend.split('-')[0]}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
        env=env,
    )
    rclpy.init()
    node = rclpy.create_node('bench_harness')
    rel = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
    pub_img = node.create_publisher(Image, '/bench/image', rel)
    pub_info = node.create_publisher(CameraInfo, '/bench/camera_info', rel)
    arrivals: list[tuple[int, int]] = []
    diag: list = []
    node.create_subscription(
        PointCloud2,
        '/bench_node/points',
        lambda m: arrivals.append(
            (m.header.stamp.sec * 10**9 + m.header.stamp.nanosec, time.time_ns())
        ),
        rel,
    )
    node.create_subscription(DiagnosticArray, '/diagnostics', diag.append, 10)
    received_images = {t: 0 for t in image_topics(subscribe)}
    for topic in received_images:

        def count(_m, t=topic) -> None:
            received_images[t] += 1

        node.create_subscription(Image, topic, count, rel)
    rgb = np.random.default_rng(0).integers(0, 255, (H, W, 3), dtype=np.uint8)

    def stream(duration: float, stop=lambda: False) -> int:
        n, next_t, end = 0, time.monotonic(), time.monotonic() + duration
        while time.monotonic() < end and not stop():
            t = time.time_ns()
            header = Header(frame_id='bench_optical')
            header.stamp.sec, header.stamp.nanosec = divmod(t, 10**9)
            pub_info.publish(make_camera_info(K, W, H, header))
            pub_img.publish(cv2_to_imgmsg(rgb, 'rgb8', header))
            n += 1
            next_t += 1.0 / rate
            while time.monotonic() < next_t:
                rclpy.spin_once(node, timeout_sec=max(0.0, next_t - time.monotonic()))
        return n

    def values() -> dict:
        return {
            kv.key: kv.value
            for d in diag
            for s in d.status
            if s.name.startswith('bench_node')
            for kv in s.values
        }

    def counts() -> dict:
        out = {}
        for k, v in values().items():
            try:
                out[k] = float(v)
            except ValueError:  # 'outputs' and other text values
                pass
        return out

    try:
        stream(
            120, stop=lambda: len(arrivals) >= 5 or proc.poll() is not None
        )  # until outputs flow
        if len(arrivals) < 5:
            raise NoOutput(
                'no output from the node:\n' + (tmp / f'node_{backend}.log').read_text()[-3000:]
            )
        end = time.monotonic() + 2.5
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.05)
        before, t_start = counts(), time.time_ns()
        arrivals.clear()
        sent = stream(seconds)
        end = time.monotonic() + 2.5  # drain + a diagnostics period
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.05)
        after, outputs = counts(), values().get('outputs', '?')
    finally:
        # the node process first: deleting this participant while it is alive can deadlock with
        # FastDDS 3.2 over TCP (docs/pip_ros_stack.md §1)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        node.destroy_node()
        rclpy.try_shutdown()
    got = [(s, a) for s, a in arrivals if s >= t_start]
    lat = np.array([(a - s) / 1e6 for s, a in got])
    span = (got[-1][1] - got[0][1]) / 1e9 if len(got) > 1 else float('nan')
    return dict(
        sent=sent,
        out=len(got),
        fps=(len(got) - 1) / span if len(got) > 1 else 0.0,
        lat_p50=float(np.percentile(lat, 50)),
        lat_p95=float(np.percentile(lat, 95)),
        stages={
            k: after.get(f'{k}_ms', float('nan'))
            for k in ('decode', 'inference', 'cloud', 'publish', 'total')
        },
        received=after['received'] - before['received'],
        processed=after['processed'] - before['processed'],
        dropped=after['dropped'] - before['dropped'],
        outputs=outputs,
        images_received=sum(received_images.values()),
    )


def image_topics(subscribe: str) -> list[str]:
    """The image output topics the harness subscribes for ``--subscribe`` (none for 'points')."""
    if subscribe == 'points':
        return []
    return [f'/bench_node/{name}/image' for name in ('labels', 'overlay', 'mask', 'depth')]


def report(r: dict, ref: float, label: str) -> None:
    """Print one end-to-end run's figures (``ref``: Segmenter.infer ms in this process)."""
    st = r['stages']
    non_model = st['decode'] + st['cloud'] + st['publish']
    print(
        f"[{label}] end to end: {r['out']} outputs of {r['sent']} sent, {r['fps']:.1f} fps; "
        "latency p50 "
        f"{r['lat_p50']:.0f} ms p95 {r['lat_p95']:.0f} ms; node received {r['received']:.0f}, "
        "processed "
        f"{r['processed']:.0f}, dropped {r['dropped']:.0f}"
    )
    print(f'[{label}] node stages (mean ms): ' + ', '.join(f'{k} {v:.1f}' for k, v in st.items()))
    print(
        f"[{label}] node outputs published (diagnostics 'outputs'): {r['outputs']}; image "
        f"messages received here: {r['images_received']}"
    )
    print(
        f"[{label}] non-model stages (decode+cloud+publish): {non_model:.1f} ms = "
        f"{100 * non_model / st['total']:.1f} % of frame time (goal <= 10 %); end-to-end fps / "
        "reference fps = "
        f"{r['fps'] * ref / 1e3:.2f}; goal 30 fps: {'met' if r['fps'] >= 30 else 'NOT met'}"
    )


def main() -> None:
    """Parse the arguments, run the reference and each backend's end-to-end stream, print the
    figures."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--model', default=None)
    ap.add_argument('--seconds', type=float, default=10.0)
    ap.add_argument('--rate', type=float, default=30.0)
    ap.add_argument(
        '--threads',
        type=int,
        default=1,
        help='torch threads, node and reference (0 = torch default)',
    )
    ap.add_argument(
        '--repeat',
        type=int,
        default=1,
        help='run the backend sequence this many times, order reversed every other time (ABBA: '
        'load drift cancels); prints each ratio and their median',
    )
    ap.add_argument(
        '--backends',
        nargs='+',
        default=['torch'],
        choices=('torch', 'onnxruntime', 'onnxruntime-whole', 'onnxruntime-split'),
        help='node inference backends to run back to back (ratios against the first)',
    )
    ap.add_argument(
        '--subscribe',
        default='points',
        choices=('points', 'all'),
        help="outputs this process subscribes: 'points' = ~/points + /diagnostics (default); "
        "'all' = every image output too (the node's lazy_outputs then builds them all)",
    )
    args = ap.parse_args()
    subscribed = ['/bench_node/points', '/diagnostics', *image_topics(args.subscribe)]
    print(f'subscribing ({args.subscribe}): ' + ', '.join(subscribed), flush=True)
    from depth3dseg_ros.rosenv import apply_ros_env, pick_domain_id

    apply_ros_env(domain_id=int(os.environ.get('ROS_DOMAIN_ID') or pick_domain_id()))
    rounds = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        path, what = model_file(args.model, tmp)
        ref, size = reference_ms(path, args.threads)
        models = {}
        for backend in args.backends:
            models[backend] = path
            if backend.startswith('onnxruntime'):
                from depth3dseg_ros.core.onnx_export import export_onnx

                models[backend] = str(tmp / 'model.onnx')
                export_onnx(path, models[backend])
        for i in range(max(1, args.repeat)):
            order = args.backends if i % 2 == 0 else args.backends[::-1]
            runs = {}
            for backend in order:
                for attempt in (1, 2):  # one retry: the pip ROS stack's rare discovery hang
                    try:
                        runs[backend] = end_to_end(
                            models[backend],
                            args.seconds,
                            args.rate,
                            args.threads,
                            tmp,
                            backend,
                            args.subscribe,
                        )
                        break
                    except NoOutput:
                        if attempt == 2:
                            raise
                        print(
                            f'[{backend}] no output from the node (a DDS discovery hang, '
                            'docs/pip_ros_stack.md): starting it again',
                            file=sys.stderr,
                        )
            rounds.append({b: runs[b] for b in args.backends})
    print(
        f'model: {what}; network input {size[0]}x{size[1]}; camera 640x480 rgb8 at {args.rate:g} '
        f'Hz for {args.seconds:g} s; cpu threads {os.cpu_count()}, torch threads '
        f'{args.threads or "default"}; subscribed ({args.subscribe}): ' + ', '.join(subscribed)
    )
    print(
        f'reference (Segmenter.infer alone, torch, this process): {ref:.1f} ms/frame = '
        f'{1e3 / ref:.1f} fps'
    )
    first = args.backends[0]
    ratios: dict = {b: [] for b in args.backends[1:]}
    for i, runs in enumerate(rounds):
        if len(rounds) > 1:
            order = args.backends if i % 2 == 0 else args.backends[::-1]
            print(f"-- round {i + 1} of {len(rounds)} (order: {', '.join(order)})")
        for backend, r in runs.items():
            report(r, ref, backend)
        for backend, r in runs.items():
            if backend != first:
                ratio = r['fps'] / runs[first]['fps'] if runs[first]['fps'] else float('nan')
                ratios[backend].append(ratio)
                print(
                    f'frame rate {backend} / {first}: {ratio:.2f}x (issue 13 goal for '
                    'onnxruntime / torch: >= 1.6x)'
                )
    if len(rounds) > 1:
        for backend, rs in ratios.items():
            print(
                f'frame rate {backend} / {first} over {len(rs)} rounds: median '
                f'{float(np.median(rs)):.2f}x (' + ', '.join(f'{q:.2f}' for q in rs) + ')'
            )


if __name__ == '__main__':
    main()
