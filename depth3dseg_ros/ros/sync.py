"""Header-stamp synchroniser for an image and its CameraInfo (message_filters stand-in).

message_filters is not installable with pip (docs/pip_ros_stack.md §3), so this module
pairs an ``Image`` (the *reference*) with the ``CameraInfo`` of the same ``header.stamp``, within a
slop, like ``message_filters.ApproximateTimeSynchronizer`` with two inputs (``slop = 0`` means
``TimeSynchronizer``, exact stamps). It keeps a bounded deque per input.

On top of the pairing it implements the policy of docs/ros_conventions.md ("Pair each image with the
CameraInfo of the same stamp; when only an older CameraInfo exists, use the latest one and warn once;
missing CameraInfo: publish no cloud, keep running"):

* ``matched``  — a CameraInfo within ``slop`` of the image stamp was found (closest wins);
* ``latest``   — CameraInfo messages arrive but none can match this image: the image is released
  with the newest CameraInfo (the caller warns once);
* ``none``     — no CameraInfo was ever received: the image is released at once, without one; unless
  the caller says one is expected (``add_image(..., info_expected=True)``, e.g. a CameraInfo publisher
  exists): then up to ``queue_size`` images wait for the first CameraInfo, so the first frames of a
  camera whose image beats its CameraInfo still get a cloud.

An image waits for its CameraInfo only while a match is still possible: it is released as ``latest``
as soon as a CameraInfo newer than ``stamp + slop`` has arrived (CameraInfo stamps increase), or when
``queue_size`` newer images are waiting. After one ``latest`` release the synchroniser switches to
*fallback* mode and releases images without waiting (no added latency when stamps never match, e.g.
a driver that stamps CameraInfo with 0); one real match switches it back.

Pure Python, duck-typed: works on rclpy and rosbags messages alike (anything with
``header.stamp.sec`` / ``nanosec``). No rclpy import.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

MATCHED = 'matched'
LATEST = 'latest'
NONE = 'none'


def stamp_to_ns(stamp: Any) -> int:
    """``builtin_interfaces/Time`` (``sec``, ``nanosec``) -> integer nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def header_stamp_ns(msg: Any) -> int:
    """``msg.header.stamp`` in integer nanoseconds."""
    return stamp_to_ns(msg.header.stamp)


@dataclass(frozen=True)
class Pair:
    """One released image with the CameraInfo chosen for it.

    Attributes:
        image: the reference message (Image or CompressedImage).
        info: the CameraInfo, or None when none was ever received.
        how: ``'matched'`` (stamp within slop), ``'latest'`` (fallback), ``'none'`` (no CameraInfo).
        dt_ns: |image stamp - info stamp| in ns (0 for ``'none'``).
    """

    image: Any
    info: Any | None
    how: str
    dt_ns: int = 0


class StampSync:
    """Pairs images with CameraInfo by header stamp (ApproximateTime with two inputs, slop in s).

    Args:
        slop: largest |image stamp - info stamp| in seconds still paired (>= 0; 0 = exact).
        queue_size: images waiting for their CameraInfo at most (>= 1), and CameraInfos kept.

    Raises:
        ValueError: slop < 0 or queue_size < 1 (naming the field).
    """

    def __init__(self, slop: float = 0.01, queue_size: int = 5) -> None:
        if not slop >= 0.0:
            raise ValueError(f'sync_slop={slop!r} must be >= 0 seconds')
        if int(queue_size) < 1:
            raise ValueError(f'queue_size={queue_size!r} must be >= 1')
        self.slop_ns = int(round(float(slop) * 1e9))
        self.queue_size = int(queue_size)
        self._images: deque = deque()
        self._infos: deque = deque(maxlen=max(self.queue_size, 2) * 2)
        self.fallback = False
        self.counts = {MATCHED: 0, LATEST: 0, NONE: 0}

    @property
    def latest_info(self) -> Any | None:
        """The newest CameraInfo received, or None."""
        return self._infos[-1] if self._infos else None

    @property
    def waiting(self) -> int:
        """Number of images waiting for a CameraInfo."""
        return len(self._images)

    def add_info(self, info: Any) -> list[Pair]:
        """Add a CameraInfo; return the images it releases (matched or no longer matchable)."""
        self._infos.append(info)
        return self._release()

    def add_image(self, image: Any, info_expected: bool = False) -> list[Pair]:
        """Add an image; return the pairs released now (possibly this image, possibly older ones).

        ``info_expected``: while no CameraInfo has arrived yet, wait for the first one (bounded by
        ``queue_size`` images) instead of releasing the image without one.
        """
        self._images.append(image)
        return self._release(info_expected)

    def _closest(self, t_ns: int) -> tuple[Any | None, int]:
        best, best_dt = None, None
        for info in self._infos:
            dt = abs(header_stamp_ns(info) - t_ns)
            if best_dt is None or dt < best_dt:
                best, best_dt = info, dt
        return best, (best_dt if best_dt is not None else 0)

    def _emit(self, image: Any, info: Any | None, how: str, dt: int) -> Pair:
        self.counts[how] += 1
        if how == MATCHED:
            self.fallback = False
        elif how == LATEST:
            self.fallback = True
        return Pair(image, info, how, dt)

    def _release(self, info_expected: bool = False) -> list[Pair]:
        out: list[Pair] = []
        while self._images:
            image = self._images[0]
            t = header_stamp_ns(image)
            if not self._infos:
                if info_expected and len(self._images) <= self.queue_size:
                    break                                 # the first CameraInfo is on its way
                self._images.popleft()
                out.append(self._emit(image, None, NONE, 0))
                continue
            info, dt = self._closest(t)
            if dt <= self.slop_ns:
                self._images.popleft()
                out.append(self._emit(image, info, MATCHED, dt))
                continue
            newest = header_stamp_ns(self._infos[-1])
            hopeless = newest > t + self.slop_ns          # later infos only get newer
            if hopeless or self.fallback or len(self._images) > self.queue_size:
                self._images.popleft()
                latest = self._infos[-1]
                out.append(self._emit(image, latest, LATEST, abs(newest - t)))
                continue
            break                                         # wait: its CameraInfo may still come
        return out
