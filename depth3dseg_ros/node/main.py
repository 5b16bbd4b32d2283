"""Console script ``depth3dseg_node`` (``python -m depth3dseg_ros.node.main``).

Usage (pip-only: no ``ros2 run``; arguments are the usual ``--ros-args``)::

    depth3dseg_node --ros-args --params-file config/depth3dseg.yaml \
        -r image:=/camera/color/image_raw -r camera_info:=/camera/color/camera_info -p device:=cpu

Sets ``FASTDDS_BUILTIN_TRANSPORTS=LARGE_DATA`` unless the environment already chose a transport
(depth3dseg_ros.rosenv; without it FastDDS loses large best-effort images between processes,
docs/pip_ros_stack.md §1). It must be set before rclpy initialises the middleware,
which is why ``main`` does it first. A bad parameter or a missing model stops start-up with exit
code 2 and one line naming the problem.

Before rclpy starts: ``-h``/``--help`` (outside ``--ros-args``) prints a usage with every parameter
(generated from node/params.py) and exits 0; a ``--params-file`` that does not exist, or ROS
arguments rcl cannot parse, stop with exit code 2 and an ``error:`` line instead of an RCLError
traceback.
"""
from __future__ import annotations

import os
import signal
import sys
from typing import Any, Callable

PROG = 'depth3dseg_node'

USAGE = """usage: depth3dseg_node [-h] [--ros-args [--params-file FILE] [-p NAME:=VALUE] [-r FROM:=TO] ...]

Semantic segmentation and depth of an RGB camera stream: a label image, a colour overlay, a depth
image and a labelled PointCloud2 per frame (model: core.inference.Segmenter).

topics in:   image (sensor_msgs/Image; <image>/compressed with use_compressed:=true)
             camera_info (sensor_msgs/CameraInfo, paired by stamp; without it no ~/points)
topics out:  ~/labels, ~/overlay, ~/depth (sensor_msgs/Image, each with ~/<name>/camera_info),
             ~/points (sensor_msgs/PointCloud2), ~/classes (std_msgs/String JSON, latched),
             /diagnostics (diagnostic_msgs/DiagnosticArray); ~ is the node name (depth3dseg)

parameters (default, allowed values, meaning):
{params}

Pass parameters as ROS arguments, one -p per parameter or a YAML file:
  depth3dseg_node --ros-args -p device:=cpu -p label_source:=2d
  depth3dseg_node --ros-args --params-file config/depth3dseg.yaml \\
      -r image:=/camera/color/image_raw -r camera_info:=/camera/color/camera_info
An unknown parameter name is ignored with a warning naming the closest known one.
More: docs/node.md (topics, parameters, launch, RViz, bag replay)."""


def usage() -> str:
    """The ``--help`` text, its parameter list generated from node/params.py SPECS."""
    from depth3dseg_ros.node.params import ParamSpec, usage_lines
    sim_time = ParamSpec('use_sim_time', False, 'follow /clock (rclpy declares it on every node)')
    return USAGE.format(params='\n'.join(usage_lines(extra=[sim_time])))


def scan_args(argv: list[str]) -> tuple[bool, list[str | None], list[str]]:
    """(help asked, ``--params-file`` paths, stray arguments) in ``argv`` (program name first).

    Help is ``-h``/``--help`` outside ``--ros-args ... [--]`` (inside, tokens belong to rcl).
    The paths are those after ``--params-file`` inside ``--ros-args``; None where the path is missing.
    Stray arguments are the others outside ``--ros-args``: the node takes none, so e.g. ``-p
    device:=cpu`` typed without ``--ros-args`` would be ignored by rcl.
    """
    help_asked, files, stray, in_ros = False, [], [], False
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == '--ros-args':
            in_ros = True
        elif in_ros and arg == '--':
            in_ros = False
        elif in_ros and arg == '--params-file':
            files.append(argv[i + 1] if i + 1 < len(argv) else None)
            i += 1
        elif not in_ros and arg in ('-h', '--help'):
            help_asked = True
        elif not in_ros:
            stray.append(arg)
        i += 1
    return help_asked, files, stray


def check_params_files(files: list[str | None]) -> str | None:
    """The error line for the first ``--params-file`` that is missing or not a file, else None."""
    for path in files:
        if path is None:
            return f'{PROG}: error: --params-file needs a path (--params-file config/depth3dseg.yaml)'
        if not os.path.exists(path):
            return f'{PROG}: error: --params-file {path} does not exist'
        if not os.path.isfile(path):
            return f'{PROG}: error: --params-file {path} is not a file'
    return None


def main(argv: list[str] | None = None, segmenter_factory: Callable[..., Any] | None = None) -> int:
    """Run the node until SIGINT/SIGTERM. Returns 0, or 2 when start-up fails (message on stderr).

    Args:
        argv: command line (default ``sys.argv``), ROS arguments included.
        segmenter_factory: optional ``(params, model_file) -> segmenter`` (default: core.inference.Segmenter);
            tests use it to wrap the real Segmenter.
    """
    argv = sys.argv if argv is None else argv
    help_asked, params_files, stray = scan_args(list(argv))
    if help_asked:
        print(usage())
        return 0
    error = check_params_files(params_files)
    if stray and not error:
        error = (f'{PROG}: error: unexpected arguments {stray}: ROS parameters and remappings go after '
                 f'--ros-args ({PROG} --ros-args -p name:=value; {PROG} --help lists the parameters)')
    if error:
        print(error, file=sys.stderr)
        return 2
    from depth3dseg_ros.rosenv import apply_ros_env
    apply_ros_env()
    import rclpy
    from rclpy._rclpy_pybind11 import RCLError
    from rclpy.executors import ExternalShutdownException

    from depth3dseg_ros.node.node import Depth3DSegNode

    try:
        rclpy.init(args=argv)
    except RCLError as err:   # e.g. `-p name` without `:=value`: one line, no traceback
        print(f'{PROG}: error: bad ROS arguments: {str(err).split(", at ")[0]}', file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    node = None
    try:
        try:
            node = Depth3DSegNode(segmenter_factory=segmenter_factory)
        except Exception as err:  # noqa: BLE001 - start-up failure: one clear line, no traceback
            print(f'{PROG}: start-up failed: {err}', file=sys.stderr)
            return 2
        rclpy.spin(node)
        return 0
    except (KeyboardInterrupt, ExternalShutdownException):
        return 0
    finally:
        if node is not None and not node.destroy_node():
            print(f'{PROG}: the worker did not stop within 5 s; exiting anyway', file=sys.stderr)
            rclpy.try_shutdown()
            os._exit(0)              # a thread blocked in a C call must not hold the process
        rclpy.try_shutdown()


if __name__ == '__main__':
    sys.exit(main())
