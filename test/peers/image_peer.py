"""Stand-alone publisher/subscriber of a sensor_msgs/Image, run as a separate process by tests.

Usage: python image_peer.py pub|sub --width W --height H --count N --timeout S
The publisher sends a deterministic rgb8 pattern (pixel value = (u + 3*v + 7*c) % 251) until the
timeout or, with --count, after that many sends after a subscriber matched. The subscriber checks
the pattern and prints one line "RECEIVED n ok" or exits non-zero.
"""

import argparse
import os
import sys
import time

import numpy as np
import rclpy
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image

from depth3dseg_ros.departure import leave_graph


def pattern(h: int, w: int) -> np.ndarray:
    v, u, c = np.meshgrid(np.arange(h), np.arange(w), np.arange(3), indexing='ij')
    return ((u + 3 * v + 7 * c) % 251).astype(np.uint8)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument('mode', choices=['pub', 'sub'])
    ap.add_argument('--width', type=int, default=640)
    ap.add_argument('--height', type=int, default=480)
    ap.add_argument('--count', type=int, default=5)
    ap.add_argument('--timeout', type=float, default=20.0)
    ap.add_argument('--best-effort', action='store_true')
    a = ap.parse_args()
    qos = qos_profile_sensor_data if a.best_effort else 10
    rclpy.init()
    node = rclpy.create_node(f'image_peer_{a.mode}')
    expected = pattern(a.height, a.width)
    deadline = time.monotonic() + a.timeout
    rc = 1
    try:
        if a.mode == 'pub':
            pub = node.create_publisher(Image, 'peer_image', qos)
            msg = Image(
                height=a.height, width=a.width, encoding='rgb8', is_bigendian=0, step=a.width * 3
            )
            msg.header.frame_id = 'camera_color_optical_frame'
            msg.data = expected.tobytes()
            while time.monotonic() < deadline:
                if pub.get_subscription_count() > 0:
                    pub.publish(msg)
                rclpy.spin_once(node, timeout_sec=0.05)
            rc = 0
        else:
            got = []

            def cb(m: Image) -> None:
                arr = np.frombuffer(bytes(m.data), np.uint8).reshape(m.height, m.width, 3)
                got.append(
                    bool(np.array_equal(arr, expected))
                    and m.encoding == 'rgb8'
                    and m.header.frame_id == 'camera_color_optical_frame'
                )

            node.create_subscription(Image, 'peer_image', cb, qos)
            while time.monotonic() < deadline and len(got) < a.count:
                rclpy.spin_once(node, timeout_sec=0.1)
            ok = len(got) >= a.count and all(got)
            print(f'RECEIVED {len(got)} {"ok" if ok else "bad"}', flush=True)
            rc = 0 if ok else 2
    finally:
        # leave without deleting the DDS participant (FastDDS 3.2 over TCP can deadlock in that
        # deletion while a peer is alive: depth3dseg_ros/departure.py), then end at once
        leave_graph([node])
    return rc


if __name__ == '__main__':
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
