"""``depth3dseg-replay --pace IN OUT``: replay no faster than a node answers (issue 54).

A node that keeps only the newest frame (``depth3dseg_node``, docs/cases.md C26) drops frames
when the replay outruns it, so which frames come out depends on the machine's load. Paced, the
replay sends each message of the image topic ``IN`` only after the node's output topic ``OUT``
has carried a message stamped like the previous ``IN`` message (the node copies the input
header to its outputs): one frame in flight, every frame out, on a loaded machine too. It waits
at most ``timeout`` s per frame (then says so and goes on). The node itself is unchanged.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable

from depth3dseg_ros.bags.rclpy_copy import ros_msg_class
from depth3dseg_ros.ros.sync import header_stamp_ns


class Pacer:
    """Subscribes ``out_topic`` on ``node`` (reliable) and waits for the stamps of ``in_topic``'s
    messages to come back on it.

    Args:
        node: the replay's rclpy node.
        in_topic: the replayed image topic whose frames are paced.
        out_topic: the node's output topic that answers each frame (same header stamp).
        timeout: seconds to wait for one frame's answer (> 0).

    Raises:
        ValueError: ``timeout`` not > 0.
    """

    def __init__(self, node: Any, in_topic: str, out_topic: str, timeout: float = 60.0) -> None:
        if not timeout > 0:
            raise ValueError(f'--pace-timeout={timeout!r} must be > 0 seconds')
        self.node, self.in_topic, self.out_topic, self.timeout = node, in_topic, out_topic, timeout
        self.sub = None
        self.answered: set[int] = set()  # stamps seen on out_topic (ns)
        self.pending: int | None = None  # stamp of the last in_topic message sent, not answered
        self.waited_s = 0.0  # total time spent waiting for answers
        self.timeouts = 0  # frames not answered within ``timeout``

    def subscribe(self, wait_s: float, spin: Callable[[float], None]) -> bool:
        """Find ``out_topic``'s type in the graph and subscribe it, waiting up to ``wait_s`` s for
        the topic and then for its publisher to match; True when matched."""
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        end = time.monotonic() + wait_s
        while self.sub is None and time.monotonic() < end:
            types = dict(self.node.get_topic_names_and_types()).get(self.out_topic)
            if types:
                qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
                self.sub = self.node.create_subscription(
                    ros_msg_class(types[0]), self.out_topic, self._on_out, qos
                )
            else:
                spin(0.05)
        while self.sub is not None and time.monotonic() < end:
            if self.sub.get_publisher_count() > 0:
                return True
            spin(0.05)
        return False

    def _on_out(self, msg: Any) -> None:
        self.answered.add(header_stamp_ns(msg))

    def before(self, topic: str, spin: Callable[[float], None]) -> float:
        """Before publishing a message of ``topic``: when it is ``in_topic``, wait until the
        previous one was answered (at most ``timeout`` s, spinning); returns the seconds
        waited."""
        if topic != self.in_topic or self.pending is None:
            return 0.0
        t0 = time.monotonic()
        end = t0 + self.timeout
        while self.pending not in self.answered and time.monotonic() < end:
            spin(0.01)
        if self.pending not in self.answered:
            self.timeouts += 1
            print(
                f'depth3dseg-replay: --pace: no message stamped {self.pending} on '
                f'{self.out_topic} within {self.timeout:g} s; going on',
                file=sys.stderr,
                flush=True,
            )
        self.answered.discard(self.pending)
        self.pending = None
        waited = time.monotonic() - t0
        self.waited_s += waited
        return waited

    def sent(self, topic: str, stamp_ns: Callable[[], int]) -> None:
        """After publishing a message of ``topic``: remember an ``in_topic`` message's stamp
        (``stamp_ns()`` reads it)."""
        if topic == self.in_topic:
            self.pending = stamp_ns()

    def finish(self, spin: Callable[[float], None]) -> float:
        """Wait for the last frame's answer (at most ``timeout`` s); returns the seconds waited."""
        return self.before(self.in_topic, spin)
