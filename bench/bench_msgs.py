"""Message-layer speed on a 640x480 frame (docs/message_layer.md records the figures).

Prints, all measured in this run on this machine:
  * rgb8 Image decode (imgmsg_to_cv2 passthrough and to_rgb) of an rclpy message;
  * rclpy Image build (cv2_to_imgmsg) against assigning ``bytes`` through the rclpy setter;
  * building the 307,200-point x,y,z,rgb,label PointCloud2 from depth + K + labels + colours
    (back-projection included) against a per-point Python ``struct.pack_into`` reference, with the
    speed-up ratio; both outputs are checked byte-identical first.

Usage: python bench/bench_msgs.py [--repeat N] [--ref-repeat M]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import struct
import time

import numpy as np
from sensor_msgs.msg import Image, PointCloud2

from depth3dseg_ros.ros.image import cv2_to_imgmsg, imgmsg_to_cv2, to_rgb
from depth3dseg_ros.core.geometry import backproject_np
from depth3dseg_ros.ros.pointcloud2 import create_cloud_from_depth, pack_cloud

H, W = 480, 640
K = np.array([[525.0, 0.0, 319.5], [0.0, 525.0, 239.5], [0.0, 0.0, 1.0]])


def timed(fn, repeat: int) -> tuple[float, float]:
    """(median, min) wall time in ms of ``fn()`` over ``repeat`` runs after one warm-up."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times)


def reference_cloud(
    depth: np.ndarray, K: np.ndarray, rgb: np.ndarray, labels: np.ndarray
) -> PointCloud2:
    """Per-point Python packing (the sensor_msgs_py-era way): one struct.pack_into per point."""
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    h, w = depth.shape
    buf = bytearray(h * w * 20)
    pack = struct.Struct('<fffII').pack_into
    d_rows, c_rows, l_rows = depth.tolist(), rgb.tolist(), labels.tolist()
    nan = float('nan')
    off = 0
    for v in range(h):
        drow, crow, lrow = d_rows[v], c_rows[v], l_rows[v]
        for u in range(w):
            z = drow[u]
            if math.isfinite(z) and z > 0:
                x, y = (u - cx) * z / fx, (v - cy) * z / fy
            else:
                x = y = z = nan
            r, g, b = crow[u]
            pack(buf, off, x, y, z, (r << 16) | (g << 8) | b, lrow[u])
            off += 20
    msg = PointCloud2(height=h, width=w, point_step=20, row_step=w * 20, is_dense=False)
    import array

    data = array.array('B')
    data.frombytes(buf)
    msg.data = data
    return msg


def clouds_match(a: PointCloud2, b: PointCloud2) -> bool:
    """Same points: rgb and label bytes identical, NaN pattern identical, x, y, z within 1 float32
    ulp.

    The reference computes in Python float64, ours in float32 (core.geometry), so x, y may differ
    in the last bit.
    """
    pa = np.frombuffer(a.data, np.uint8).reshape(-1, 20)
    pb = np.frombuffer(b.data, np.uint8).reshape(-1, 20)
    xa, xb = pa[:, :12].copy().view(np.float32), pb[:, :12].copy().view(np.float32)
    return (
        np.array_equal(pa[:, 12:], pb[:, 12:])
        and np.array_equal(np.isnan(xa), np.isnan(xb))
        and np.allclose(xa, xb, rtol=2.5e-7, atol=1e-7, equal_nan=True)
    )


def main() -> None:
    """Run the message-layer benchmark (CLI) on a random 640x480 frame and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--repeat', type=int, default=50)
    ap.add_argument('--ref-repeat', type=int, default=2)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    depth = rng.uniform(0.3, 8.0, (H, W)).astype(np.float32)
    depth[rng.random((H, W)) < 0.1] = np.nan  # 10 % no-data pixels
    labels = rng.integers(0, 14, (H, W)).astype(np.uint8)
    load = os.getloadavg()[0] if hasattr(os, 'getloadavg') else float('nan')
    print(
        f'machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {load:.1f}, python '
        f'{platform.python_version()}, numpy {np.__version__}; frame {W}x{H}; median (min) of '
        f'{args.repeat} runs'
    )

    img = cv2_to_imgmsg(rgb, 'rgb8')
    med, best = timed(lambda: imgmsg_to_cv2(img), args.repeat)
    print(f'rgb8 decode imgmsg_to_cv2 (view):      {med:8.3f} ms  ({best:.3f})')
    med, best = timed(lambda: to_rgb(img), args.repeat)
    print(f'rgb8 decode to_rgb (packed: no copy):  {med:8.3f} ms  ({best:.3f})')
    bgr = cv2_to_imgmsg(rgb[..., ::-1], 'bgr8')
    med, best = timed(lambda: to_rgb(bgr), args.repeat)
    print(f'bgr8 decode to_rgb (channel swap):     {med:8.3f} ms  ({best:.3f})')
    ours, _ = timed(lambda: cv2_to_imgmsg(rgb, 'rgb8'), args.repeat)
    flat = rgb.reshape(-1)
    ref, _ = timed(
        lambda: Image(height=H, width=W, encoding='rgb8', step=W * 3).__setattr__('data', flat), 3
    )
    print(
        f'rgb8 Image build cv2_to_imgmsg:        {ours:8.3f} ms   vs numpy array through the '
        f'rclpy setter {ref:.1f} ms  -> {ref / ours:.0f}x'
    )

    ours_msg = create_cloud_from_depth(None, depth, K, rgb=rgb, labels=labels)
    t0 = time.perf_counter()
    for _ in range(args.ref_repeat):
        ref_msg = reference_cloud(depth, K, rgb, labels)
    ref_ms = (time.perf_counter() - t0) * 1e3 / args.ref_repeat
    same = clouds_match(ours_msg, ref_msg)
    med, best = timed(
        lambda: create_cloud_from_depth(None, depth, K, rgb=rgb, labels=labels), args.repeat
    )
    print(f'PointCloud2 {H * W} pts x,y,z,rgb,label (incl. back-projection):')
    print(
        f'  vectorised create_cloud_from_depth:  {med:8.3f} ms  ({best:.3f})   '
        f'len(data)={len(ours_msg.data)}'
    )
    xyz = backproject_np(depth, K)
    bp, bp_min = timed(lambda: backproject_np(depth, K), args.repeat)
    pk, pk_min = timed(lambda: pack_cloud(xyz, rgb, labels), args.repeat)
    print(
        f'    of which back-projection {bp:.3f} ({bp_min:.3f}), packing {pk:.3f} ({pk_min:.3f}) ms'
    )
    print(f'  per-point struct.pack reference:     {ref_ms:8.1f} ms   same cloud: {same}')
    print(
        f'  speed-up: {ref_ms / med:.0f}x (median), {ref_ms / best:.0f}x (best); '
        f'goal >= 50x and <= 5 ms per frame'
    )
    if not same:
        raise SystemExit('outputs differ: the benchmark compares different clouds')


if __name__ == '__main__':
    main()
