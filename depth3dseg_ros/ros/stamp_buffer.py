"""A topic's last messages looked up by header stamp (ros/sync.py pairs an image with its
CameraInfo; this keeps e.g. the registered depth images for the worker: issue 12, measured depth).

Pure Python, duck-typed like ros/sync.py. No rclpy import.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from depth3dseg_ros.ros.sync import header_stamp_ns


class StampBuffer:
    """The last ``size`` messages of a topic, looked up by header stamp (e.g. a depth image
    registered to the colour image: issue 12, measured depth). Appends come from the executor
    thread, look-ups from the worker: ``deque.append`` and ``list(deque)`` are atomic in CPython,
    so no lock is needed."""

    def __init__(self, size: int = 8) -> None:
        self._msgs: deque = deque(maxlen=int(size))

    def add(self, msg: Any) -> None:
        """Keep ``msg`` (the oldest is dropped when full)."""
        self._msgs.append(msg)

    def empty(self) -> bool:
        """Whether no message has arrived yet."""
        return not self._msgs

    def nearest(self, stamp_ns: int, slop_s: float) -> Any | None:
        """The kept message whose stamp is nearest ``stamp_ns`` if within ``slop_s`` seconds (0 =
        exact), else None."""
        best, best_dt = None, None
        for m in list(self._msgs):
            dt = abs(header_stamp_ns(m) - stamp_ns)
            if best_dt is None or dt < best_dt:
                best, best_dt = m, dt
        return best if best_dt is not None and best_dt <= slop_s * 1e9 else None
