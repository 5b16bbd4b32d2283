"""``depth3dseg-replay BAG``: publish a bag's camera topics in real (or scaled) time, with
``/clock``.

A stand-in for ``ros2 bag play`` (rosbag2 is not on pip: docs/pip_ros_stack.md §2, §5).
Any bag bags.reader.BagReader opens (rosbag2 sqlite3/MCAP, compressed, ROS 1) is replayed:

* by default the topics of type sensor_msgs/msg/Image, CompressedImage and CameraInfo
  (``--topics`` picks others: any type whose rclpy package is installed);
* each message of a rosbag2 goes out as its recorded CDR bytes through ``Publisher.publish(bytes)``
  (no decode); ROS 1 messages are decoded and copied into the rclpy type
  (:func:`bags.rclpy_copy.to_rclpy`: ROS 1 Header.seq dropped, ``K`` -> ``k``); at the bag's
  receive-time spacing divided by ``--rate``;
* ``--clock`` publishes rosgraph_msgs/Clock on ``/clock`` (bag time, before each message and every
  10 ms in between) so nodes started with ``use_sim_time:=true`` follow the bag;
* QoS: RELIABLE, KEEP_LAST ``--depth`` by default (like ``ros2 bag play``); ``--qos best_effort``;
* before the first message it waits (``--wait-subscribers``, default 10 s; 0 = not at all) until a
  subscriber has matched, and then until no further one matches for 1 s, saying so on stderr: a
  node started first then gets the bag from its first message (a volatile topic drops what was sent
  before the match). Without a subscriber by then it says so and publishes anyway;
* ``--pace IN OUT``: each message of the image topic IN goes out only once a node's output topic
  OUT carried the previous one's stamp (bags/pacing.py): nothing is dropped by a node slower than
  the bag (``make demo`` replays so);
* SIGINT/SIGTERM at any moment end it within about 2 s, exit code 0, no traceback (C40, C45;
  procutil.StopSignals): rclpy runs without its own signal handlers, so no publisher's context
  becomes invalid under the loop.

Example (the README's):
    depth3dseg-replay "$(python -m depth3dseg_ros.samples bag)" --clock
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from depth3dseg_ros.bags.pacing import Pacer
from depth3dseg_ros.bags.replayer import CAMERA_TYPES, Replayer, select_topics
from depth3dseg_ros.clihelp import DefaultsHelpFormatter

__all__ = ['CAMERA_TYPES', 'Replayer', 'select_topics', 'bag_argument_problem', 'main']

# numpy, rosbags (bags.reader) and rclpy are imported where used: ``main`` installs its signal
# handlers before any heavy import (C40)


def bag_argument_problem(bag: str) -> str | None:
    """Why the BAG argument cannot be replayed, in one line naming the argument, or None.

    An empty (or blank) path is refused as such: ``Path('')`` is the current directory, which the
    reader would search for a bag (issue 54: the README's ``"$(python -m depth3dseg_ros.samples
    bag)"`` is empty when the sample data cannot be had). A path that does not exist: not found.
    """
    if not bag.strip():
        return (
            f'argument BAG is empty ({bag!r}): give a rosbag2 directory, .db3/.mcap file or ROS 1 '
            '.bag (a "$(...)" that printed nothing, e.g. the sample data could not be had?)'
        )
    if not Path(bag).exists():
        return f'argument BAG: bag {bag!r} not found'
    return None


def build_parser() -> argparse.ArgumentParser:
    """The CLI of ``depth3dseg-replay``."""
    p = argparse.ArgumentParser(
        prog='depth3dseg-replay',
        description=' '.join(__doc__.split('\n\n')[0].replace('``', '').split()),
        formatter_class=DefaultsHelpFormatter,  # --help shows the defaults
    )
    p.add_argument('bag', help='rosbag2 directory, .db3/.mcap file or ROS 1 .bag')
    p.add_argument('--rate', type=float, default=1.0, help='time scale (2 = twice as fast)')
    p.add_argument('--loop', action='store_true', help='replay forever')
    p.add_argument(
        '--topics', nargs='+', default=None, help='topics to replay (default: camera topics)'
    )
    p.add_argument('--clock', action='store_true', help='publish /clock (for use_sim_time)')
    p.add_argument(
        '--qos',
        choices=('reliable', 'best_effort'),
        default='reliable',
        help='reliability of the publishers',
    )
    p.add_argument('--depth', type=int, default=5, help='publisher KEEP_LAST depth')
    p.add_argument(
        '--wait-subscribers',
        type=float,
        default=10.0,
        metavar='S',
        help='wait up to S seconds (default 10; 0 = do not wait) for a subscriber before the '
        'first '
        'message, then until no more match for 1 s',
    )
    p.add_argument(
        '--wait-for',
        action='append',
        default=[],
        metavar='TOPIC',
        help='with --wait-subscribers: wait until this replayed topic has a subscriber '
        '(repeatable), e.g. the camera_info only the node subscribes',
    )
    p.add_argument(
        '--delay', type=float, default=0.0, metavar='S', help='sleep S seconds before starting'
    )
    p.add_argument(
        '--pace',
        nargs=2,
        default=None,
        metavar=('IN', 'OUT'),
        help='send each message of the replayed image topic IN only once the topic OUT (a '
        "node's output) carried the previous one's stamp: one frame in flight, none dropped by a "
        'slow node (bags/pacing.py)',
    )
    p.add_argument(
        '--pace-timeout',
        type=float,
        default=60.0,
        metavar='S',
        help="with --pace: seconds to wait for one frame's answer before going on",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point: exit code 0 on success or after SIGINT/SIGTERM, 2 on a bad argument or bag
    (message on stderr). Signals: procutil.StopSignals (C40, C45), installed before the heavy
    imports. Ends the process itself (``os._exit`` after the clean-up, output flushed) instead of
    returning."""
    from depth3dseg_ros.procutil import StopRequested, StopSignals

    stop = StopSignals('depth3dseg-replay', raise_running=True)
    try:
        rc = _main(argv, stop)
    except StopRequested:
        rc = stop.EXIT_CODE
    finally:
        stop.finished()
    stop.exit_now(rc)  # done: skip the interpreter's slow teardown (C40)
    return rc


def _main(argv: list[str] | None, stop: Any) -> int:
    from depth3dseg_ros.procutil import RUNNING, STARTING, STOPPING, StopRequested

    argv = sys.argv if argv is None else [sys.argv[0]] + list(argv)
    from depth3dseg_ros.rosenv import apply_ros_env

    apply_ros_env()
    import rclpy
    from rclpy.signals import SignalHandlerOptions
    from depth3dseg_ros.departure import interrupted_node, leave_graph

    from depth3dseg_ros.rosinit import init_rclpy, non_ros_args, params_file_problem, params_files

    error = params_file_problem(params_files(argv), 'depth3dseg-replay')
    rest, bad_args = non_ros_args(argv, 'depth3dseg-replay') if error is None else ([], None)
    error = error or bad_args
    if error is not None:  # one line (issue 55), no traceback
        print(error, file=sys.stderr)
        return 2
    args = build_parser().parse_args(rest[1:])
    for flag, value in (('--wait-subscribers', args.wait_subscribers), ('--delay', args.delay)):
        if not 0 <= value < float('inf'):  # nan fails too
            print(
                f'depth3dseg-replay: {flag} {value:g} must be a finite number >= 0',
                file=sys.stderr,
            )
            return 2
    problem = bag_argument_problem(args.bag)
    if problem:
        print(f'depth3dseg-replay: {problem}', file=sys.stderr)
        return 2
    error = init_rclpy(argv, 'depth3dseg-replay', signal_handler_options=SignalHandlerOptions.NO)
    if error is not None:  # one line (issue 55), no traceback
        print(error, file=sys.stderr)
        return 2
    node = rep = None
    try:
        stop.set_phase(STARTING)
        node = rclpy.create_node('depth3dseg_replay')
        try:
            rep = Replayer(
                node,
                args.bag,
                rate=args.rate,
                topics=args.topics,
                clock=args.clock,
                reliable=args.qos == 'reliable',
                depth=args.depth,
            )
        except (ValueError, FileNotFoundError, RuntimeError) as err:
            print(f'depth3dseg-replay: {err}', file=sys.stderr)
            return 2
        stop.set_phase(RUNNING)  # raise_running: a signal raises StopRequested out of the loop
        try:  # before any wait, also with --wait-subscribers 0
            rep.check_replayed(args.wait_for + ([args.pace[0]] if args.pace else []))
            pacer = Pacer(node, *args.pace, args.pace_timeout) if args.pace else None
        except ValueError as err:
            print(f'depth3dseg-replay: {err}', file=sys.stderr)
            return 2
        if args.wait_subscribers > 0:
            on = ', '.join(args.wait_for) if args.wait_for else ', '.join(rep.topics)
            print(
                f'depth3dseg-replay: waiting up to {args.wait_subscribers:g} s for a subscriber '
                f'on {on} (--wait-subscribers{", --wait-for" if args.wait_for else ""})',
                file=sys.stderr,
                flush=True,
            )
            ok = rep.wait_for_subscribers(
                args.wait_subscribers,
                lambda s: rclpy.spin_once(node, timeout_sec=s),
                required=tuple(args.wait_for),
            )
            if not ok:
                print(
                    f'depth3dseg-replay: no subscriber on {on} after {args.wait_subscribers:g} s; '
                    'publishing anyway',
                    file=sys.stderr,
                    flush=True,
                )
        if pacer is not None and not pacer.subscribe(
            max(args.wait_subscribers, 10.0), lambda s: rclpy.spin_once(node, timeout_sec=s)
        ):
            print(
                f'depth3dseg-replay: --pace: no publisher of {pacer.out_topic} after '
                f'{max(args.wait_subscribers, 10.0):g} s',
                file=sys.stderr,
            )
            return 1
        if args.delay > 0:
            time.sleep(args.delay)
        print(
            f'depth3dseg-replay: replaying {", ".join(rep.topics)} from {args.bag} at rate '
            f'{args.rate:g}'
            f'{" with /clock" if args.clock else ""}{" in a loop" if args.loop else ""}',
            file=sys.stderr,
            flush=True,
        )
        from depth3dseg_ros.bags.reader import BagDamaged

        try:
            counts = rep.run(
                loop=args.loop,
                pacer=pacer,
                spin=lambda s: rclpy.spin_once(node, timeout_sec=s),
            )
        except BagDamaged as err:  # a damaged chunk met while playing (C38): no traceback
            done = ', '.join(f'{t}={n}' for t, n in rep.counts.items())
            print(
                f'depth3dseg-replay: {err}; published before it: {done} (depth3dseg-extract reads '
                'an MCAP bag like this one with the damaged chunks skipped)',
                file=sys.stderr,
            )
            return 2  # bad input, as every CLI (docs/extraction.md "Exit codes")
        if args.qos == 'reliable':
            rep.wait_for_acks()
        paced = (
            f' (paced by {pacer.out_topic}: waited {pacer.waited_s:.1f} s, '
            f'{pacer.timeouts} frames unanswered)'
            if pacer is not None
            else ''
        )
        print(
            'depth3dseg-replay: published '
            + ', '.join(f'{t}={n}' for t, n in counts.items())
            + paced
        )
        return 0
    except StopRequested as err:
        if node is None:  # the signal came inside create_node: that node leaves below too
            node = interrupted_node(err)
        raise
    finally:
        stop.set_phase(STOPPING)  # a second signal from here on ends the process at once
        if rep is not None:
            rep.close()
        # the publishers leave, the DDS participant is not deleted (that can deadlock on a live
        # TCP peer with FastDDS 3.2, departure.py); main ends the process with os._exit
        leave_graph([node])


if __name__ == '__main__':
    sys.exit(main())
