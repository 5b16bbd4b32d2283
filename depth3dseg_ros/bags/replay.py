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
from typing import Any, Callable, Sequence

from depth3dseg_ros.clihelp import DefaultsHelpFormatter
from depth3dseg_ros.bags.rclpy_copy import ros_msg_class, to_rclpy

# numpy, rosbags (bags.reader) and rclpy are imported where used: ``main`` installs its signal
# handlers before any heavy import (C40)

CAMERA_TYPES = (
    'sensor_msgs/msg/Image',
    'sensor_msgs/msg/CompressedImage',
    'sensor_msgs/msg/CameraInfo',
)


def select_topics(topics: dict[str, str], wanted: list[str] | None) -> dict[str, str]:
    """Pick ``{topic: msgtype}`` to replay: ``wanted`` (each must exist) or every camera-type
    topic.

    Raises:
        ValueError: a wanted topic is not in the bag (listing the bag's topics), or nothing to
            replay.
    """
    if wanted:
        missing = [t for t in wanted if t not in topics]
        if missing:
            raise ValueError(f'--topics {missing} not in the bag; it has {sorted(topics)}')
        chosen = {t: topics[t] for t in wanted}
    else:
        chosen = {t: m for t, m in topics.items() if m in CAMERA_TYPES}
    if not chosen:
        raise ValueError(f'no image/camera_info topics to replay; the bag has {topics}')
    return chosen


class Replayer:
    """Publishes one bag through an rclpy node. ``run()`` returns ``{topic: messages published}``.

    Args:
        node: an rclpy Node (publishers are created on it).
        bag: bag path (see module docstring).
        rate: time scale (> 0): 2.0 plays twice as fast.
        topics: topics to replay (None = camera topics).
        clock: publish ``/clock``.
        reliable: RELIABLE (default) or BEST_EFFORT publishers; ``depth`` = KEEP_LAST depth.

    Raises:
        ValueError: rate <= 0, unknown topics, uninstalled message types.
    """

    def __init__(
        self,
        node: Any,
        bag: Path | str,
        rate: float = 1.0,
        topics: list[str] | None = None,
        clock: bool = False,
        reliable: bool = True,
        depth: int = 5,
        clock_period: float = 0.01,
    ) -> None:
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        from depth3dseg_ros.bags.reader import BagReader

        if not rate > 0:
            raise ValueError(f'--rate={rate!r} must be > 0')
        self.node, self.bag, self.rate, self.clock_period = (
            node,
            Path(bag),
            float(rate),
            clock_period,
        )
        self._reader = BagReader(self.bag).open()
        try:
            self.topics = select_topics(
                {t: e.msgtype for t, e in self._reader.topics().items()}, topics
            )
            qos = QoSProfile(
                depth=depth,
                reliability=ReliabilityPolicy.RELIABLE
                if reliable
                else ReliabilityPolicy.BEST_EFFORT,
            )
            self.pubs = {
                t: node.create_publisher(ros_msg_class(m), t, qos) for t, m in self.topics.items()
            }
        except Exception:
            self._reader.close()
            raise
        self.clock_pub = None
        if clock:
            from rosgraph_msgs.msg import Clock

            self._clock_cls = Clock
            self.clock_pub = node.create_publisher(Clock, '/clock', 10)
        self.counts = {t: 0 for t in self.topics}

    def close(self) -> None:
        """Close the bag."""
        self._reader.close()

    def check_replayed(self, topics: Sequence[str]) -> None:
        """Raise ValueError naming the first of ``topics`` (``--wait-for``) that is not
        replayed."""
        missing = [t for t in topics if t not in self.pubs]
        if missing:
            raise ValueError(
                f'--wait-for {missing[0]}: not a replayed topic (replayed: {sorted(self.pubs)})'
            )

    def wait_for_subscribers(
        self,
        timeout: float,
        spin: Callable[[float], None],
        quiet: float = 1.0,
        required: tuple[str, ...] = (),
    ) -> bool:
        """Wait (at most ``timeout`` s) until a subscriber has matched one of the publishers (each
        of the ``required`` topics, when given), then until no further publisher matches for
        ``quiet`` s (or all have one), then 1 s more. True when that happened in time (False:
        none matched, or a required topic has no subscriber yet).

        Discovery is not symmetric, and a sample sent before the subscriber has matched this
        publisher too is lost even on a reliable volatile topic; a node subscribes all its inputs
        together, so its other subscriptions match within the quiet second. ``required``: topics
        that only the intended subscriber reads (e.g. the node's camera_info while a recorder
        already reads the image topic). ``spin(s)`` runs the node for s seconds. Raises
        ValueError for a required topic that is not replayed (`check_replayed`).
        """
        self.check_replayed(required)
        end = time.monotonic() + timeout
        matched: set[str] = set()
        last_change = None
        while time.monotonic() < end:
            now_matched = {t for t, p in self.pubs.items() if p.get_subscription_count() > 0}
            if now_matched != matched:
                matched, last_change = now_matched, time.monotonic()
            if (
                matched
                and set(required) <= matched
                and (len(matched) == len(self.pubs) or time.monotonic() - last_change >= quiet)
            ):
                settle = time.monotonic() + 1.0
                while time.monotonic() < settle:
                    spin(0.05)
                return True
            spin(0.05)
        return bool(matched) and set(required) <= matched

    def wait_for_acks(self, timeout: float = 10.0) -> bool:
        """Wait (at most ``timeout`` s) until reliable subscribers acknowledged every sample sent.

        Exiting right after the last publish would lose samples still being (re)sent: FastDDS
        recovers a lost fragment only at its next heartbeat (about 3 s). Waits in 0.1 s steps so
        that a signal is handled at once (C40).
        """
        from rclpy.duration import Duration

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if all(p.wait_for_all_acked(Duration(seconds=0.1)) for p in self.pubs.values()):
                return True
        return False

    def _publish_clock(self, t_ns: int) -> None:
        if self.clock_pub is not None:
            msg = self._clock_cls()
            msg.clock.sec, msg.clock.nanosec = divmod(int(t_ns), 1_000_000_000)
            self.clock_pub.publish(msg)

    def _sleep_until(self, wall_target: float, bag_t0: int, wall0: float) -> None:
        while True:
            now = time.monotonic()
            if now >= wall_target:
                return
            if self.clock_pub is not None:
                self._publish_clock(bag_t0 + int((now - wall0) * self.rate * 1e9))
                time.sleep(min(self.clock_period, wall_target - now))
            else:
                time.sleep(min(0.1, wall_target - now))  # short steps: a signal is handled at once

    def run(
        self, loop: bool = False, should_stop: Callable[[], bool] = lambda: False
    ) -> dict[str, int]:
        """Replay (forever with ``loop``; until ``should_stop()``); return per-topic publish
        counts."""
        ros1 = self._reader.is_ros1
        while True:
            bag_t0, wall0 = None, time.monotonic()
            for topic, msgtype, t_ns, raw in self._reader.messages(self.topics):
                if should_stop():
                    return self.counts
                if bag_t0 is None:
                    bag_t0 = t_ns
                self._sleep_until(wall0 + (t_ns - bag_t0) / 1e9 / self.rate, bag_t0, wall0)
                self._publish_clock(t_ns)
                if (
                    ros1
                ):  # ROS 1 layout differs (Header.seq, K/k): decode, copy into the rclpy type
                    self.pubs[topic].publish(
                        to_rclpy(self._reader.deserialize(raw, msgtype), self.pubs[topic].msg_type)
                    )
                else:
                    self.pubs[topic].publish(bytes(raw))
                self.counts[topic] += 1
            if not loop or bag_t0 is None:
                return self.counts


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
    if not Path(args.bag).exists():
        print(f'depth3dseg-replay: bag {args.bag!r} not found', file=sys.stderr)
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
            rep.check_replayed(args.wait_for)
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
            counts = rep.run(loop=args.loop)
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
        print('depth3dseg-replay: published ' + ', '.join(f'{t}={n}' for t, n in counts.items()))
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
