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

import faulthandler
import os
import sys
import threading
from typing import Any, Callable

PROG = 'depth3dseg_node'
MANAGED_PROG = 'depth3dseg_lifecycle_node'  # node/lifecycle.py

# GIL-free watchdogs (faulthandler's C thread: it runs even when a thread holds the GIL inside a
# blocked C call, where no Python code, signal handler or threading.Timer can run). On expiry it
# writes every thread's stack to stderr and ends the process with exit status 1.
STALL_EXIT_S = 30.0  # running: the main thread got no GIL for this long -> the node is wedged
SHUTDOWN_BACKSTOP_S = 5.0  # stopping: the staged shutdown (<= ~3 s) has not ended the process

USAGE = """usage: depth3dseg_node [-h]
                       [--ros-args [--params-file FILE] [-p NAME:=VALUE] [-r FROM:=TO] ...]

Semantic segmentation and depth of an RGB camera stream: a label image, a colour overlay, a
class-colour mask, a depth image and a labelled PointCloud2 per frame (model:
core.inference.Segmenter).

topics in:   image (sensor_msgs/Image; <image>/compressed with use_compressed:=true)
             camera_info (sensor_msgs/CameraInfo, paired by stamp; without it no ~/points)
             depth (sensor_msgs/Image 16UC1 mm / 32FC1 m registered to image, paired by stamp;
             with use_measured_depth:=true: the cloud, and with geometry_model the RGB-D late
             fusion)
topics out:  ~/labels/image, ~/overlay/image, ~/mask/image, ~/depth/image (sensor_msgs/Image,
             each with its camera_info beside it: ~/labels/camera_info, ...),
             ~/points (sensor_msgs/PointCloud2), ~/classes (std_msgs/String JSON, latched),
             /diagnostics (diagnostic_msgs/DiagnosticArray); ~ is the node name (depth3dseg)
             optional (publish_*_compressed): ~/labels/image/compressed (PNG),
             ~/overlay/image/compressed (JPEG), ~/depth/image/compressedDepth

parameters (default, allowed values, meaning):
{params}

Pass parameters as ROS arguments, one -p per parameter or a YAML file:
  depth3dseg_node --ros-args -p device:=cpu -p label_source:=2d
  depth3dseg_node --ros-args --params-file config/depth3dseg.yaml \\
      -r image:=/camera/color/image_raw -r camera_info:=/camera/color/camera_info
An unknown parameter name is ignored with a warning naming the closest known one.
More: docs/node.md (topics, parameters, launch, RViz, bag replay)."""


MANAGED_NOTE = """
managed (lifecycle) node: starts 'unconfigured'; the lifecycle services (ros2 lifecycle set
/depth3dseg configure | activate | deactivate | cleanup | shutdown) load the parameters and the
model (configure), start and stop the processing (activate, deactivate) and release them
(cleanup). Outputs are published only while active; [start-up only] parameters are read at
configure (docs/node.md "Managed (lifecycle) node")."""


def usage(prog: str = PROG) -> str:
    """The ``--help`` text of ``prog``, its parameter list generated from node/params.py SPECS."""
    from depth3dseg_ros.node.params import ParamSpec, usage_lines

    sim_time = ParamSpec('use_sim_time', False, 'follow /clock (rclpy declares it on every node)')
    text = USAGE.format(params='\n'.join(usage_lines(extra=[sim_time])))
    if prog == MANAGED_PROG:  # same parameters and topics; they exist once configured/active
        text = text.replace(PROG, prog).replace(
            '\n\nparameters', '\n' + MANAGED_NOTE + '\n\nparameters', 1
        )
    return text


def scan_args(argv: list[str]) -> tuple[bool, list[str | None], list[str]]:
    """(help asked, ``--params-file`` paths, stray arguments) in ``argv`` (program name first).

    Help is ``-h``/``--help`` outside ``--ros-args ... [--]`` (inside, tokens belong to rcl).
    The paths are those after ``--params-file`` inside ``--ros-args``; None where the path is
    missing. Stray arguments are the others outside ``--ros-args``: the node takes none, so e.g.
    ``-p device:=cpu`` typed without ``--ros-args`` would be ignored by rcl.
    """
    from depth3dseg_ros.rosinit import params_files

    help_asked, stray, in_ros = False, [], False
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == '--ros-args':
            in_ros = True
        elif in_ros and arg == '--':
            in_ros = False
        elif in_ros and arg == '--params-file':
            i += 1  # its path (rosinit.params_files collects it)
        elif not in_ros and arg in ('-h', '--help'):
            help_asked = True
        elif not in_ros:
            stray.append(arg)
        i += 1
    return help_asked, params_files(argv[1:]), stray


def check_params_files(files: list[str | None], prog: str = PROG) -> str | None:
    """The error line for the first ``--params-file`` that is missing, not a file or not valid
    YAML (rosinit.params_file_problem: file, line, column, the parser's reason), else None."""
    from depth3dseg_ros.rosinit import params_file_problem

    return params_file_problem(files, prog)


def main(
    argv: list[str] | None = None,
    segmenter_factory: Callable[..., Any] | None = None,
    managed: bool = False,
) -> int:
    """Run the node until SIGINT/SIGTERM. Returns 0, or 2 when start-up fails (message on stderr).

    Signals (docs/cases.md C40, C45; procutil.StopSignals): SIGINT or SIGTERM at any moment
    (imports, model loading, idle, busy, a second one during shutdown) ends the process within
    about 2 s, without a traceback, exit code 0. rclpy runs with ``SignalHandlerOptions.NO``; the
    executor spins in a thread while the main thread waits for the signal, then stops the worker,
    the executor, the node and rclpy. Once rclpy has been initialised, ``main`` does not return:
    after the clean-up it ends the process with the exit code (``os._exit``, output flushed),
    skipping the interpreter's slow teardown.

    Args:
        argv: command line (default ``sys.argv``), ROS arguments included.
        segmenter_factory: optional ``(params, model_file) -> segmenter`` (default:
            core.inference.Segmenter); tests use it to wrap the real Segmenter.
        managed: run the managed node (node/lifecycle.py, ``depth3dseg_lifecycle_node``): it
            starts unconfigured and loads nothing until the configure transition; at a signal
            it takes the shutdown transition before it is destroyed.
    """
    from depth3dseg_ros.procutil import StopRequested, StopSignals

    stop = StopSignals(
        MANAGED_PROG if managed else PROG
    )  # first: a signal during the imports below ends quietly (C40)
    try:
        rc = _main(argv, segmenter_factory, stop, managed)
    except StopRequested:  # a signal before the node ran: nothing more to clean up
        rc = stop.EXIT_CODE
    finally:
        if getattr(stop, 'ros_started', False):
            stop.finished()  # signals ignored from here on (nothing left to stop)
        else:
            stop.restore()  # --help / argument errors (also called in-process by tests)
    if getattr(stop, 'ros_started', False):
        stop.exit_now(rc)  # rclpy is shut down: skip the ~1 s interpreter teardown (C40)
    return rc


def _main(
    argv: list[str] | None,
    segmenter_factory: Callable[..., Any] | None,
    stop: Any,
    managed: bool = False,
) -> int:
    from depth3dseg_ros.departure import interrupted_node
    from depth3dseg_ros.procutil import RUNNING, STARTING, STOPPING, StopRequested

    prog = MANAGED_PROG if managed else PROG

    argv = sys.argv if argv is None else argv
    help_asked, params_files, stray = scan_args(list(argv))
    if help_asked:
        print(usage(prog))
        return 0
    error = check_params_files(params_files, prog)
    if stray and not error:
        error = (
            f'{prog}: error: unexpected arguments {stray}: ROS parameters and remappings go after '
            f'--ros-args ({prog} --ros-args -p name:=value; {prog} --help lists the parameters)'
        )
    if error:
        print(error, file=sys.stderr)
        return 2
    from depth3dseg_ros.rosenv import apply_ros_env

    apply_ros_env()
    from rclpy.executors import SingleThreadedExecutor
    from depth3dseg_ros.node.logbridge import route_python_logging
    from rclpy.signals import SignalHandlerOptions

    if managed:
        from depth3dseg_ros.node.lifecycle import Depth3DSegLifecycleNode as NodeClass
    else:
        from depth3dseg_ros.node.node import Depth3DSegNode as NodeClass

    from depth3dseg_ros.rosinit import init_rclpy

    # NO: rclpy's handlers would shut the context down under the worker (publish on an invalid
    # context, rclpy #937) and replace ours; StopSignals wakes the main thread instead (C45)
    error = init_rclpy(argv, prog, signal_handler_options=SignalHandlerOptions.NO)
    if error is not None:  # e.g. `-p name` without `:=value`: one line, no traceback
        print(error, file=sys.stderr)
        return 2
    stop.ros_started = True
    node = spinner = None
    # built before a signal can raise StopRequested: an exception inside rclpy's constructors would
    # leave a half-made guard condition whose __del__ prints 'Exception ignored' at exit (C40)
    executor = SingleThreadedExecutor()
    try:
        stop.set_phase(STARTING)  # a signal now raises StopRequested (model loading, warm-up)
        try:
            node = NodeClass(segmenter_factory=segmenter_factory)
        except Exception as err:  # noqa: BLE001 - start-up failure: one clear line, no traceback
            node = interrupted_node(err)  # leaves below; freed with err it would take the
            # DDS participant with it, which can deadlock (departure.py)
            print(f'{prog}: start-up failed: {err}', file=sys.stderr)
            return 2
        route_python_logging(node.get_logger(), warnings=True)  # Python warnings too (issue 54)
        executor.add_node(node)
        spinner = threading.Thread(
            target=_spin, args=(executor, node, stop), name='depth3dseg-executor', daemon=True
        )
        stop.set_phase(RUNNING)  # from here a signal only sets stop.event
        spinner.start()
        wait_for_stop(stop.event)
        return 0
    except StopRequested as err:
        if node is None:  # the signal came while the node was being built (model loading)
            node = interrupted_node(err)  # its endpoints leave below, like a built node's
        return stop.EXIT_CODE
    finally:
        stop.set_phase(STOPPING)  # a second signal from here on ends the process at once
        _shutdown(node, executor, spinner, prog=prog)


def wait_for_stop(event: threading.Event, stall_exit_s: float = STALL_EXIT_S) -> None:
    """The main thread's loop while the node runs: wait for ``event`` (set by the signal handler
    or by the executor thread's end), waking every 0.5 s to re-arm a GIL-free watchdog.

    Python runs signal handlers in the main thread only, between bytecodes: a thread holding the
    GIL inside a C call that never returns (a DDS write or entity deletion stuck on a peer's
    transport) leaves the process deaf to SIGINT/SIGTERM. The watchdog (``faulthandler``, a C
    thread) notices that the main thread has not woken for ``stall_exit_s`` s, writes every
    thread's stack to stderr and ends the process with exit status 1, so that a launch file's
    ``respawn`` can restart it (docs/node.md "Stopping"). A healthy node wakes every 0.5 s.
    """
    try:
        faulthandler.dump_traceback_later(stall_exit_s, exit=True)
        while not event.wait(0.5):
            faulthandler.dump_traceback_later(stall_exit_s, exit=True)  # re-armed: from now
    finally:
        faulthandler.cancel_dump_traceback_later()


def _spin(executor: Any, node: Any, stop: Any) -> None:
    """The executor thread: spin until the executor is shut down; any end of it stops the
    process."""
    from rclpy.executors import ExternalShutdownException

    try:
        executor.spin()
    except ExternalShutdownException:
        pass
    except Exception as err:  # noqa: BLE001 - report in one line, then let main shut down
        try:
            node.get_logger().error(f'executor stopped: {type(err).__name__}: {err}')
        except Exception:  # noqa: BLE001
            pass
    finally:
        stop.event.set()


def _shutdown(
    node: Any,
    executor: Any,
    spinner: Any,
    worker_timeout: float = 1.0,
    prog: str = PROG,
    teardown_timeout: float = 1.0,
) -> None:
    """Stop the worker (at most ``worker_timeout`` s: the whole shutdown stays within 2 s, C40),
    the executor and the node, in that order: nothing publishes on a context that is
    gone. A stage that stays blocked (worker, a callback, DDS teardown beyond
    ``teardown_timeout`` s) ends the process with one line on stderr and exit status 0. A stage
    blocked while holding the GIL (no Python thread can run, so neither can those checks) meets
    the GIL-free backstop after ``SHUTDOWN_BACKSTOP_S``: every thread's stack on stderr, exit
    status 1.

    The DDS participant is not deleted (departure.py: with FastDDS 3.2 over TCP that can
    deadlock while a peer is alive); ``main`` ends the process with ``os._exit`` right after."""
    from depth3dseg_ros.departure import leave_graph

    faulthandler.dump_traceback_later(SHUTDOWN_BACKSTOP_S, exit=True)

    def give_up(what: str) -> None:  # a thread blocked in a C call must not hold the process
        print(f'{prog}: {what}; exiting anyway', file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    if node is not None and not node.stop_worker(timeout=worker_timeout):
        give_up(f'the worker is still inside a frame after {worker_timeout:.0f} s')
    if executor is not None:
        done = executor.shutdown(timeout_sec=1.0)
        if spinner is not None and spinner.is_alive():
            spinner.join(1.0 if done else 0.1)
        if spinner is not None and spinner.is_alive():  # e.g. a managed node's configure
            give_up('a callback is still running after 1 s')

    # DDS teardown can block: a reliable writer being deleted while a peer's transport (LARGE_DATA
    # TCP) is stalled kept destroy_node waiting for 20 s in a test. Bounded like the stages above.
    watchdog = threading.Timer(
        teardown_timeout,
        give_up,
        args=(f'DDS teardown still blocked after {teardown_timeout:.0f} s',),
    )
    watchdog.daemon = True
    watchdog.start()
    try:
        # the node's endpoints leave (peers see them go), the DDS participant is NOT deleted: that
        # deletion can deadlock on a live TCP peer (FastDDS 3.2, departure.py); main then ends
        # the process with os._exit and the kernel closes its sockets
        leave_graph([node])
    finally:
        watchdog.cancel()
        faulthandler.cancel_dump_traceback_later()


if __name__ == '__main__':
    sys.exit(main())
