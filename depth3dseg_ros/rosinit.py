"""rclpy.init for the console scripts that take ROS arguments (depth3dseg_node, its lifecycle
twin, depth3dseg-replay), with bad input as one error line, exit 2 (issue 55):

* :func:`params_file_problem`: every ``--params-file`` inside ``--ros-args`` must exist, be a file
  and parse as YAML (core.yamlfile: file, line, column, the parser's reason), checked before rcl
  reads it (rcl's own message spreads over two lines and names no column).
* :func:`init_rclpy`: ``rclpy.init`` with rcl's ``[ERROR] ... [rcl]`` log line held back
  (depth3dseg_ros.quiet) and dropped when init fails: the caller prints the one line returned.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from depth3dseg_ros.core.yamlfile import load_yaml_file


def params_files(argv: Sequence[str]) -> list[str | None]:
    """The paths after ``--params-file`` inside ``--ros-args ... [--]`` (None: the flag ends the
    command line)."""
    files: list[str | None] = []
    in_ros = False
    for i, arg in enumerate(argv):
        if arg == '--ros-args':
            in_ros = True
        elif in_ros and arg == '--':
            in_ros = False
        elif in_ros and arg == '--params-file':
            files.append(argv[i + 1] if i + 1 < len(argv) else None)
    return files


def params_file_problem(files: Sequence[str | None], prog: str) -> str | None:
    """The error line for the first ``--params-file`` that is missing, not a file or not valid
    YAML, else None."""
    for path in files:
        if path is None:
            return (
                f'{prog}: error: --params-file needs a path (--params-file config/depth3dseg.yaml)'
            )
        if not os.path.exists(path):
            return f'{prog}: error: --params-file {path} does not exist'
        if not os.path.isfile(path):
            return f'{prog}: error: --params-file {path} is not a file'
        try:
            load_yaml_file(path)
        except (ValueError, OSError) as err:
            return f'{prog}: error: --params-file {err}'
    return None


def non_ros_args(argv: Sequence[str], prog: str) -> tuple[list[str], str | None]:
    """(``argv`` without its ROS arguments, None), or ([], the one error line) when rcl cannot
    parse them (rclpy.utilities.remove_ros_args raises on ``-p name`` without ``:=value``)."""
    from rclpy.utilities import remove_ros_args

    from depth3dseg_ros.quiet import held_fd

    with held_fd(2) as held:
        try:
            return list(remove_ros_args(list(argv))), None
        except Exception as err:  # noqa: BLE001 - RCLInvalidROSArgsError and its kin
            held.discard()
            return [], _bad_ros_args(err, prog)


def init_rclpy(argv: Sequence[str], prog: str, **kwargs: Any) -> str | None:
    """``rclpy.init(args=argv, **kwargs)``; returns None, or the one error line when rcl refuses
    the ROS arguments (``-p name`` without ``:=value``, a parameter file rcl cannot use), with
    rcl's own log line dropped."""
    import rclpy
    from rclpy._rclpy_pybind11 import RCLError

    from depth3dseg_ros.quiet import held_fd

    failed = None
    with held_fd(2) as held:  # rcl logs '[ERROR] ... [rcl]: Failed to parse ...' before raising
        try:
            rclpy.init(args=list(argv), **kwargs)
        except RCLError as err:
            failed = err
            held.discard()
    if failed is None:
        return None
    return _bad_ros_args(failed, prog)


def _bad_ros_args(err: Exception, prog: str) -> str:
    """One line for rcl's error: its text up to the first source location (``, at file.c:N``)."""
    text = ' '.join(str(err).split(', at ')[0].split())
    return f'{prog}: error: bad ROS arguments: {text}'
