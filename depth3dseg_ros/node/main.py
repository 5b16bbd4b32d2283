"""Console script ``depth3dseg_node`` (``python -m depth3dseg_ros.node.main``).

Usage (pip-only: no ``ros2 run``; arguments are the usual ``--ros-args``)::

    depth3dseg_node --ros-args --params-file config/depth3dseg.yaml \
        -r image:=/camera/color/image_raw -r camera_info:=/camera/color/camera_info -p device:=cpu

Sets ``FASTDDS_BUILTIN_TRANSPORTS=LARGE_DATA`` unless the environment already chose a transport
(depth3dseg_ros.rosenv; without it FastDDS loses large best-effort images between processes,
shared/docs/PIP_ROS_STACK.md section 1). It must be set before rclpy initialises the middleware,
which is why ``main`` does it first. A bad parameter or a missing model stops start-up with exit
code 2 and one line naming the problem.
"""
from __future__ import annotations

import os
import signal
import sys
from typing import Any, Callable


def main(argv: list[str] | None = None, segmenter_factory: Callable[..., Any] | None = None) -> int:
    """Run the node until SIGINT/SIGTERM. Returns 0, or 2 when start-up fails (message on stderr).

    Args:
        argv: command line (default ``sys.argv``), ROS arguments included.
        segmenter_factory: optional ``(params, model_file) -> segmenter`` (default: core.inference.Segmenter);
            tests use it to wrap the real Segmenter.
    """
    from depth3dseg_ros.rosenv import apply_ros_env
    apply_ros_env()
    import rclpy
    from rclpy.executors import ExternalShutdownException

    from depth3dseg_ros.node.node import Depth3DSegNode

    argv = sys.argv if argv is None else argv
    rclpy.init(args=argv)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    node = None
    try:
        try:
            node = Depth3DSegNode(segmenter_factory=segmenter_factory)
        except Exception as err:  # noqa: BLE001 - start-up failure: one clear line, no traceback
            print(f'depth3dseg_node: start-up failed: {err}', file=sys.stderr)
            return 2
        rclpy.spin(node)
        return 0
    except (KeyboardInterrupt, ExternalShutdownException):
        return 0
    finally:
        if node is not None and not node.destroy_node():
            print('depth3dseg_node: the worker did not stop within 5 s; exiting anyway', file=sys.stderr)
            rclpy.try_shutdown()
            os._exit(0)              # a thread blocked in a C call must not hold the process
        rclpy.try_shutdown()


if __name__ == '__main__':
    sys.exit(main())
