"""The replayer of ``depth3dseg-replay`` (bags/replay.py, its CLI): a bag's messages published
through an rclpy node at the bag's spacing, with ``/clock``, optional pacing (bags/pacing.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Sequence

from depth3dseg_ros.bags.rclpy_copy import ros_msg_class, to_rclpy
from depth3dseg_ros.ros.sync import header_stamp_ns

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
        self,
        loop: bool = False,
        should_stop: Callable[[], bool] = lambda: False,
        pacer: Any = None,
        spin: Callable[[float], None] | None = None,
    ) -> dict[str, int]:
        """Replay (forever with ``loop``; until ``should_stop()``); return per-topic publish
        counts. ``pacer`` (bags.pacing.Pacer, ``--pace``): each paced image waits for the previous
        one's answer (``spin(s)`` runs the node meanwhile); the bag's spacing is kept after it."""
        ros1 = self._reader.is_ros1
        while True:
            bag_t0, wall0 = None, time.monotonic()
            for topic, msgtype, t_ns, raw in self._reader.messages(self.topics):
                if should_stop():
                    return self.counts
                if bag_t0 is None:
                    bag_t0 = t_ns
                if pacer is not None:
                    wall0 += pacer.before(topic, spin)  # the time waited shifts the schedule
                self._sleep_until(wall0 + (t_ns - bag_t0) / 1e9 / self.rate, bag_t0, wall0)
                self._publish_clock(t_ns)
                decoded = None
                if (
                    ros1
                ):  # ROS 1 layout differs (Header.seq, K/k): decode, copy into the rclpy type
                    decoded = self._reader.deserialize(raw, msgtype)
                    self.pubs[topic].publish(to_rclpy(decoded, self.pubs[topic].msg_type))
                else:
                    self.pubs[topic].publish(bytes(raw))
                self.counts[topic] += 1
                if pacer is not None:
                    pacer.sent(
                        topic,
                        lambda: header_stamp_ns(
                            decoded or self._reader.deserialize(raw, msgtype)  # noqa: B023
                        ),
                    )
            if not loop or bag_t0 is None:
                if pacer is not None:
                    pacer.finish(spin)  # the last frame's answer
                return self.counts
